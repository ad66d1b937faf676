/**
 * Whether a configuration field's name says it holds a credential (`apiKey`, `secretKey`,
 * `accessKeyId`, `token`, `password`, an `authorization` header). Names that only mention keys or
 * tokens as counts or settings are not (`maxTokensField`, `tokenizer`, `reqKeys`, `defaultMaxTokens`):
 * their values (`max_tokens`, a model's name) are words of the gateway's own messages.
 */
export function isCredentialName(key: string): boolean {
  if (/tokens|tokenizer|keys$|field$/i.test(key)) return false;
  return /key|secret|token|password|passwd|credential|authorization/i.test(key);
}

/**
 * Each string in `value` under a field named like a credential (see isCredentialName), at any
 * depth, with its path from `at`; `named` says `value` itself is one's.
 */
export function eachCredential(value: unknown, visit: (text: string, path: Array<string | number>) => void, at: Array<string | number> = [], named = false): void {
  if (typeof value === 'string') {
    if (named) visit(value, at);
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => eachCredential(item, visit, [...at, i], named));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) eachCredential(item, visit, [...at, key], named || isCredentialName(key));
  }
}

/** A header name as HTTP allows it (RFC 9110's token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * What is wrong with a provider's credentials and headers for HTTP, each at its path: a
 * one-line credential that ends with a line break (a secret file's last newline, read into an
 * environment variable), holds another control character or has spaces around it; a header name
 * HTTP does not allow, a header value with a control character. Node refuses to send such a header: every call would
 * fail as if the back end could not be reached. Values are never repeated in the message.
 */
export function credentialProblems(provider: Readonly<Record<string, unknown>>): Array<{ path: Array<string | number>; problem: string }> {
  const problems: Array<{ path: Array<string | number>; problem: string }> = [];
  const check = (value: string, at: Array<string | number>): void => {
    // A credential of several lines (a PEM private key a provider signs with) is left as it is.
    if (/[\r\n]/.test(value.trimEnd())) return;
    if (/[\r\n]$/.test(value)) problems.push({ path: at, problem: 'ends with a line break (a secret file\'s last newline?): an HTTP header cannot carry it; remove it' });
    else if (/[\x00-\x08\x0b-\x1f\x7f]/.test(value)) problems.push({ path: at, problem: 'holds a control character: an HTTP header cannot carry it' });
    else if (value !== value.trim()) problems.push({ path: at, problem: 'starts or ends with a space or a tab: remove it' });
  };
  for (const [key, value] of Object.entries(provider)) {
    if (key === 'headers' && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [name, header] of Object.entries(value)) {
        if (!HEADER_NAME.test(name)) problems.push({ path: [key, name], problem: 'is not a header name HTTP allows (letters, digits and !#$%&\'*+-.^_`|~ only)' });
        else if (typeof header === 'string' && /[\x00-\x08\x0a-\x1f\x7f]/.test(header)) problems.push({ path: [key, name], problem: 'holds a line break or another control character: an HTTP header cannot carry it' });
      }
    } else eachCredential(value, check, [key], isCredentialName(key));
  }
  return problems;
}
