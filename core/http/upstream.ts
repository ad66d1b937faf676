import type { Abortable } from '../attempt.js';
import { GatewayError, type GatewayErrorOptions } from '../errors.js';
import { HeldAnswersFull, UpstreamBodyTooLarge } from './client.js';
import { eachCredential } from '../../config/credentials.js';
import { hiddenSlot } from '../hidden.js';

const MAX_DETAIL = 300;

/** Top-level domains and private suffixes a back end's host name ends with. */
const HOST_SUFFIXES = [
  'com', 'net', 'org', 'io', 'ai', 'dev', 'app', 'cloud', 'co', 'tech', 'xyz', 'info', 'biz', 'me', 'sh', 'gov', 'edu', 'int',
  'us', 'uk', 'eu', 'de', 'fr', 'nl', 'cn', 'jp', 'kr', 'in', 'ru', 'br', 'ca', 'au', 'sg', 'hk', 'tw', 'ch', 'se', 'fi',
  'internal', 'local', 'localdomain', 'lan', 'corp', 'intra', 'intranet', 'home', 'svc', 'cluster', 'example', 'test', 'localhost',
];
const HOST_NAME = new RegExp(`\\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\\.)+(?:${HOST_SUFFIXES.join('|')})(?::\\d+)?\\b`, 'gi');

/**
 * An absolute path to a file of source code, with its line and column if given
 * (`/srv/app/server.js:10:5`, `C:\\app\\main.py`), where a path can begin (not inside a word or
 * a relative path the client may have written).
 */
const SOURCE_PATH = /(?<![\w./\\-])(?:[A-Za-z]:\\|\/)(?:[\w.@-]+[\\/])*[\w.@-]+\.(?:js|mjs|cjs|ts|py|rb|go|java|kt|rs|php|cs|cpp|cc|c|h|ex|exs|scala|swift)\b(?::\d+)*/g;

/**
 * Strip from an upstream's message what a client must never see: the gateway's own upstream
 * credentials, anything shaped like a key or token, addresses of the back end, URLs of any scheme
 * and the places in its code a stack trace names.
 */
export function scrub(text: string, secrets: readonly (string | undefined)[] = []): string {
  let out = redactSecrets(text, secrets);
  out = out
    // Any URL, not only http: a database's (postgres://user:password@host) holds a credential.
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, '[url]')
    // Stack traces: a frame's location, a file of source with its line (the back end's insides).
    .replace(/\bat\s+[^\s()]+\s+\([^()]*\.[A-Za-z]{1,6}:\d+(?::\d+)?\)/g, '[stack]')
    .replace(/\bFile\s+"[^"]*",\s*line\s+\d+/g, '[path]')
    .replace(SOURCE_PATH, '[path]')
    .replace(/\b(?:sk|pk|rk|key|api|token|sess|bearer)[-_][A-Za-z0-9_\-*.]{6,}/gi, '[redacted]')
    .replace(/\bBearer\s+\S+/gi, 'Bearer [redacted]')
    .replace(/\b[A-Za-z0-9_\-]{32,}\b/g, '[redacted]')
    .replace(/\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b/g, '[address]')
    // Bare host names (gpu-node-7.corp.internal, api.vendor.example:443), recognised by their last
    // label, so that a field path in a validation message (messages.0.content) stays readable.
    .replace(HOST_NAME, '[host]');
  out = out.replace(/\s+/g, ' ').trim();
  return out.length > MAX_DETAIL ? `${out.slice(0, MAX_DETAIL)}…` : out;
}

/**
 * `text` with each secret, and (with `pieces`) any run of 8 or more of its characters, as
 * `[redacted]`; nothing else changed.
 */
export function redactSecrets(text: string, secrets: readonly (string | undefined)[], pieces = true): string {
  const cut = pieces ? redactPieces : (t: string) => t;
  let out = text;
  for (const secret of secrets) {
    if (!secret || secret.length < 4) continue;
    // First as a URL or a form would carry it (`+`, `/`, `=` escaped, in either case): the
    // pieces of the plain secret between the escapes would otherwise go first and leave them.
    const escaped = encodeURIComponent(secret);
    if (escaped !== secret) out = cut(out.split(escaped).join('[redacted]'), escaped);
    out = cut(out.split(secret).join('[redacted]'), secret);
  }
  return out;
}

/**
 * `text` with every whole occurrence of a secret (as written, or URL-encoded) replaced, and
 * nothing else: for a message the gateway wrote itself, whose own words may share runs of
 * characters with a key, where redactSecrets' pieces would cut them.
 */
export function redactWholeSecrets(text: string, secrets: readonly (string | undefined)[]): string {
  return redactSecrets(text, secrets, false);
}

/**
 * The credentials in the providers' configuration: every string under a key named like one
 * (`apiKey`, `secretKey`, `accessKeyId`, `token`, `password`...), at any depth. Kept out of log
 * lines as they are kept out of answers.
 */
export function configuredSecrets(providers: readonly object[]): string[] {
  const found = new Set<string>();
  for (const provider of providers) {
    eachCredential(provider, (text) => {
      if (text.length >= 4) found.add(text);
    });
  }
  return [...found];
}

/** The credentials of the providers that call through a dispatcher (see keepSecretsOf). */
const dispatcherSecrets = hiddenSlot<string[]>();

/**
 * Remember the credentials of a provider's configuration on the dispatcher (an undici pool) it
 * calls through, so that the helpers scrub them from a back end's error message even when the
 * provider passed none (or not all) as its call's `secrets`.
 */
export function keepSecretsOf(dispatcher: object, secrets: readonly string[]): void {
  if (secrets.length === 0) return;
  const kept = dispatcherSecrets.get(dispatcher);
  dispatcherSecrets.set(dispatcher, kept ? [...new Set([...kept, ...secrets])] : [...secrets]);
}

/** A call's `secrets` with those kept on its dispatcher. */
export function secretsWith(dispatcher: object, secrets: readonly (string | undefined)[]): readonly (string | undefined)[] {
  const kept = dispatcherSecrets.get(dispatcher);
  return kept ? [...secrets, ...kept] : secrets;
}

/**
 * Headers an operator's `headers:` may never set: the transport's own, the bearer credential, and
 * accept-encoding (answers are read as they come: a compressed one could not be).
 */
const TRANSPORT_HEADERS = new Set(['authorization', 'host', 'content-length', 'connection', 'transfer-encoding', 'accept-encoding']);

/**
 * The headers of every call to one back end: a `user-agent` and `accept-encoding: identity` (a
 * server may compress an answer to a request that names no coding, and the gateway reads answers
 * as they come), then the operator's configured headers (names lower-cased), then the provider's
 * `own` (content type, credentials, API version), which always win. A configured header named
 * like the transport's, `authorization`, or any of `own` is ignored, whether or not `own` gives
 * it a value (`undefined` reserves a name unset).
 */
export function upstreamHeaders(configured: Readonly<Record<string, string>> | undefined, own: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const headers: Record<string, string> = { 'user-agent': 'switchyard', 'accept-encoding': 'identity' };
  for (const name in configured) {
    const lower = name.toLowerCase();
    if (!TRANSPORT_HEADERS.has(lower) && !(lower in own)) headers[lower] = configured[name]!;
  }
  for (const name in own) if (own[name] !== undefined) headers[name] = own[name]!;
  return headers;
}

/**
 * The headers of one call: `base` (an endpoint's, from upstreamHeaders), then `more` and `last`
 * on top (the call's hop headers, an accept), later ones winning, in a new object.
 *
 * A plain copy, because V8 (Node 20) builds `{ ...base, ...more }`, or `{ ...base, name }` with a
 * name `base` lacks, through a slow path: 0.5 to 4 us a call against 0.1 for this.
 */
export function mergeHeaders(
  base: Readonly<Record<string, string>> | undefined,
  more?: Readonly<Record<string, string>>,
  last?: Readonly<Record<string, string>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (base) for (const name in base) out[name] = base[name]!;
  if (more) for (const name in more) out[name] = more[name]!;
  if (last) for (const name in last) out[name] = last[name]!;
  return out;
}

/** The shortest piece of a secret that is redacted on its own (shorter runs are common text). */
const SECRET_PIECE = 8;

/**
 * `text` with every run of SECRET_PIECE or more characters that also occurs in `secret` replaced:
 * a back end that quotes the key cut or masked (`PROVIDER-SECRET-abc…`, the key without its
 * first characters) must not hand most of it to a client.
 */
function redactPieces(text: string, secret: string): string {
  if (secret.length < SECRET_PIECE || text.length < SECRET_PIECE) return text;
  // Compared without case (a back end that quotes the key upper-cased gives it away all the same),
  // unless lower-casing changes the text's length, which would shift the offsets.
  const lower = text.toLowerCase();
  const folded = lower.length === text.length;
  const seen = folded ? lower : text;
  const from = folded ? secret.toLowerCase() : secret;
  const pieces = new Set<string>();
  for (let i = 0; i + SECRET_PIECE <= from.length; i++) pieces.add(from.slice(i, i + SECRET_PIECE));
  const hidden = new Uint8Array(text.length);
  let found = false;
  for (let i = 0; i + SECRET_PIECE <= text.length; i++) {
    if (!pieces.has(seen.slice(i, i + SECRET_PIECE))) continue;
    hidden.fill(1, i, i + SECRET_PIECE);
    found = true;
  }
  if (!found) return text;
  let out = '';
  for (let i = 0; i < text.length; ) {
    if (!hidden[i]) {
      out += text[i++];
      continue;
    }
    while (i < text.length && hidden[i]) i++;
    out += '[redacted]';
  }
  return out;
}

/** A back end's Retry-After as the header to pass on (whole seconds, at most a day), or none. */
export function retryAfterHeader(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const seconds = retryAfterSeconds(headers['retry-after']);
  return seconds ? { 'retry-after': seconds } : {};
}

/** A back end's Retry-After as whole seconds (from seconds or an HTTP date), at most a day; else undefined. */
function retryAfterSeconds(value: string | string[] | undefined): string | undefined {
  if (typeof value !== 'string') return undefined;
  const text = value.trim();
  let seconds: number;
  if (/^\d+(\.\d+)?$/.test(text)) seconds = Number(text);
  else {
    const at = Date.parse(text);
    if (!Number.isFinite(at)) return undefined;
    seconds = (at - Date.now()) / 1000;
  }
  return String(Math.min(86_400, Math.max(1, Math.ceil(seconds))));
}

/** What a typical JSON error body says: its human message, and its `code` and `param` where it has them. */
export function errorOf(body: string): { message?: string; code?: string; type?: string; param?: string } {
  try {
    // A byte order mark before the JSON (some Windows-hosted back ends write one) is not the body's.
    const parsed = JSON.parse(body.charCodeAt(0) === 0xfeff ? body.slice(1) : body) as Record<string, unknown>;
    const error = parsed.error;
    if (error && typeof error === 'object') {
      const { message, code, type, param } = error as { message?: unknown; code?: unknown; type?: unknown; param?: unknown };
      return {
        message: typeof message === 'string' ? message : undefined,
        code: typeof code === 'string' ? code : undefined,
        type: typeof type === 'string' ? type : undefined,
        param: typeof param === 'string' ? param : undefined,
      };
    }
    if (typeof error === 'string') return { message: error };
    // A code and a message at the top (DashScope's `{code, message, request_id}`, and others').
    if (typeof parsed.message === 'string') return { message: parsed.message, ...(typeof parsed.code === 'string' ? { code: parsed.code } : {}) };
    if (typeof parsed.detail === 'string') return { message: parsed.detail };
    // FastAPI's validation errors (text-embeddings and rerank servers): `detail: [{loc, msg}]`.
    if (Array.isArray(parsed.detail)) {
      const first = (parsed.detail as Array<{ loc?: unknown; msg?: unknown }>).find((d) => d !== null && typeof d === 'object' && typeof d.msg === 'string');
      if (first) {
        const loc = Array.isArray(first.loc) ? first.loc.filter((part) => part !== 'body').join('.') : '';
        return { message: loc ? `${loc}: ${first.msg as string}` : (first.msg as string), ...(loc ? { param: loc } : {}) };
      }
    }
  } catch {
    // not JSON: say nothing of it
  }
  return {};
}

/**
 * A prompt longer than the model's context, as back ends say it: the code `context_length_exceeded`
 * or the usual wordings ("prompt is too long", "maximum context length", "exceeds the context
 * window", "the input token count
 * ... exceeds the maximum number of tokens"); not a max_tokens larger than the model writes. Clients
 * act on it (trim or compact the conversation), so it keeps a code of its own.
 */
export function contextTooLong(code: string | undefined, message: string | undefined): boolean {
  if (code === 'context_length_exceeded') return true;
  return message !== undefined && /prompt is too long|maximum context length|exceeds the context window|input token count[^.]*exceeds the maximum number of tokens|input length and `?max_tokens`? exceed context limit|input tokens exceed the configured limit/i.test(message);
}

/**
 * An answer saying the back end's account has no credit left: OpenAI's `insufficient_quota`
 * code or type, a `billing_error` type, or the wordings vendors use for it ("your credit balance
 * is too low", "insufficient balance"). Not "you exceeded your current quota", which some
 * back ends say of a per-minute limit too.
 */
export function outOfCredit(said: { code?: string; type?: string; message?: string }): boolean {
  if (said.code === 'insufficient_quota' || said.type === 'insufficient_quota' || said.type === 'billing_error') return true;
  return said.message !== undefined && /credit balance is too low|insufficient (?:account )?balance|insufficient credits?\b/i.test(said.message);
}

/** A request field an upstream names, if it looks like one (`messages`, `messages[0].content`). */
function fieldName(param: string | undefined): string | undefined {
  return param !== undefined && /^[A-Za-z_][\w.[\]-]{0,99}$/.test(param) ? param : undefined;
}

/**
 * Map an upstream's failed answer to the gateway's error: 4xx request problems keep a scrubbed
 * message, credential problems and 5xx become upstream_error (502), 503 and 529 upstream_overloaded, 429 upstream_rate_limited, 408 upstream_timeout. Only connection-level failures, 408, 429 and 5xx may be retried
 * elsewhere; never 400, 401, 403, 404, 413 or 422. The raw body never reaches the client.
 */
export function upstreamError(
  status: number,
  body: string,
  headers: Record<string, string | string[] | undefined> = {},
  secrets: readonly (string | undefined)[] = [],
): GatewayError {
  const said = errorOf(body);
  const detail = said.message;
  const make = (code: ConstructorParameters<typeof GatewayError>[0], options: GatewayErrorOptions = {}) =>
    new GatewayError(code, { ...options, upstreamStatus: status });
  const retryAfter = retryAfterHeader(headers);
  // The back end's account is out of credit (402 Payment Required, a billing error, or its usual
  // wordings on another status): the operator must act; another target may still answer.
  if (status === 402 || outOfCredit(said)) {
    return make('upstream_quota_exhausted', { retryable: true, headers: { 'x-should-retry': 'false' } });
  }
  if (status === 429) {
    return make('upstream_rate_limited', { retryable: true, headers: retryAfter });
  }
  if (status === 408) return make('upstream_timeout', { params: { detail: 'the upstream timed out' }, retryable: true });
  if (status === 401 || status === 403) {
    return make('upstream_error', { params: { detail: `the back end refused the gateway's credentials (${status})` } });
  }
  if (status === 404) {
    // The back end does not know the model or the path: the operator's mapping is wrong, not the
    // client's request. Say nothing of its message (it names internal models).
    return make('upstream_error', { params: { detail: 'the back end does not serve this model or path (404)' } });
  }
  // Overloaded for now: worth another try, here and by the client. 529 is how some back ends say
  // it (and the proxies in front of them pass it on).
  if (status === 503 || status === 529) {
    return make('upstream_overloaded', {
      params: { detail: `status ${status}` },
      retryable: true,
      headers: retryAfter,
    });
  }
  // A target that loops back: the next target may well not (and the breaker cools this one).
  if (status === 508) return make('loop_detected', { params: { detail: 'a gateway further along saw it come back' }, retryable: true });
  if (status >= 400 && status < 500) {
    // The field the back end named goes to the client as `param`, as it would from the vendor.
    return make(contextTooLong(said.code, detail) ? 'context_length_exceeded' : 'upstream_bad_request', {
      params: { detail: detail ? scrub(detail, secrets) : `status ${status}` },
      param: fieldName(said.param),
    });
  }
  return make('upstream_error', { params: { detail: `status ${status}` }, retryable: true });
}

/** Map a transport failure (refused, reset, timed out) to the gateway's error; a fault of the calling code (a TypeError, say) is returned as it is. */
export function transportError(error: unknown, signal?: Abortable): Error {
  const e = error as { code?: string; name?: string; message?: string };
  if (signal?.aborted) return new GatewayError('upstream_error', { params: { detail: 'the request was cancelled' } });
  if (error instanceof UpstreamBodyTooLarge) return new GatewayError('upstream_error', { params: { detail: error.message }, retryable: true });
  if (error instanceof HeldAnswersFull) return new GatewayError('gateway_overloaded', { params: { limit: error.limit } });
  switch (e.code) {
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new GatewayError('upstream_timeout', { params: { detail: 'connect timeout' }, retryable: true });
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new GatewayError('upstream_timeout', { params: { detail: 'no response headers in time' }, retryable: true });
    case 'UND_ERR_BODY_TIMEOUT':
      return new GatewayError('upstream_timeout', { params: { detail: 'the response stalled' }, retryable: true });
    default:
      // A fault in the code that made the call (a method that is not there, a bad argument) is
      // not the back end's: it stays what it is (a 500 logged with its stack) and is not retried
      // elsewhere (it still counts as a failure of that target, which answers nothing).
      if (e.code === undefined && (error instanceof TypeError || error instanceof ReferenceError || error instanceof RangeError)) return error;
      return new GatewayError('upstream_error', { params: { detail: 'connection failed' }, retryable: true, cause: error });
  }
}
