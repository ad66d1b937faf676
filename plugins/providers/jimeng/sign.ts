import { createHash, createHmac } from 'node:crypto';

/**
 * Volcengine's request signature (its "HMAC-SHA256" V4 scheme), as the visual API checks it:
 *
 *   CanonicalRequest = Method \n Path \n SortedQuery \n CanonicalHeaders \n SignedHeaders \n hex(sha256(body))
 *     CanonicalHeaders: `name:value\n` for each signed header, names lower-cased and sorted, values
 *     trimmed with inner runs of white space made one space (the block ends with its own `\n`).
 *     SortedQuery: `key=value` pairs sorted by key, both RFC 3986 escaped (`%20`, not `+`).
 *   StringToSign = "HMAC-SHA256" \n X-Date \n {YYYYMMDD}/{region}/{service}/request \n hex(sha256(CanonicalRequest))
 *   kSigning     = HMAC(HMAC(HMAC(HMAC(secretKey, YYYYMMDD), region), service), "request")
 *   Authorization: HMAC-SHA256 Credential={accessKey}/{scope}, SignedHeaders={names}, Signature={hex(HMAC(kSigning, StringToSign))}
 *
 * X-Date is `YYYYMMDD'T'HHMMSS'Z'` (UTC) and X-Content-Sha256 the body's hex SHA-256; both are
 * signed along with Host and Content-Type.
 */

export const ALGORITHM = 'HMAC-SHA256';

export interface SignInput {
  method: string;
  /** The Host header as sent (`visual.volcengineapi.com`, or `127.0.0.1:port`). */
  host: string;
  /** The request path, already as sent (`/`). */
  path: string;
  query: Readonly<Record<string, string>>;
  /** Headers besides Host, X-Date and X-Content-Sha256 to sign (Content-Type, say). */
  headers?: Readonly<Record<string, string>>;
  body: string | Buffer;
  accessKey: string;
  secretKey: string;
  region: string;
  service: string;
  /** The signing time; now by default. */
  date?: Date;
}

export interface Signed {
  /** Headers to send: the signed ones, X-Date, X-Content-Sha256 and Authorization. */
  headers: Record<string, string>;
  canonicalRequest: string;
  stringToSign: string;
  signature: string;
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** `YYYYMMDD'T'HHMMSS'Z'` in UTC. */
export function xDate(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z').replace(/[-:]/g, '');
}

/** RFC 3986 escaping: everything but unreserved characters, `*!'()` included. */
export function uriEscape(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function canonicalQuery(query: Readonly<Record<string, string>>): string {
  return Object.keys(query)
    .sort()
    .map((key) => `${uriEscape(key)}=${uriEscape(query[key]!)}`)
    .join('&');
}

export function signingKey(secretKey: string, day: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(secretKey, day), region), service), 'request');
}

/** Sign with exactly `signedHeaders` (lower-case name -> value) and a given payload hash. */
export function signParts(parts: {
  method: string;
  path: string;
  query: Readonly<Record<string, string>>;
  signedHeaders: Readonly<Record<string, string>>;
  payloadHash: string;
  xDate: string;
  secretKey: string;
  region: string;
  service: string;
}): { canonicalRequest: string; stringToSign: string; signature: string; names: string; scope: string } {
  const names = Object.keys(parts.signedHeaders).map((n) => n.toLowerCase()).sort();
  const lower: Record<string, string> = {};
  for (const [name, value] of Object.entries(parts.signedHeaders)) lower[name.toLowerCase()] = value;
  const canonicalHeaders = names.map((n) => `${n}:${lower[n]!.replace(/\s+/g, ' ').trim()}\n`).join('');
  const canonicalRequest = [
    parts.method.toUpperCase(),
    parts.path || '/',
    canonicalQuery(parts.query),
    canonicalHeaders,
    names.join(';'),
    parts.payloadHash,
  ].join('\n');
  const day = parts.xDate.slice(0, 8);
  const scope = `${day}/${parts.region}/${parts.service}/request`;
  const stringToSign = [ALGORITHM, parts.xDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const signature = createHmac('sha256', signingKey(parts.secretKey, day, parts.region, parts.service)).update(stringToSign, 'utf8').digest('hex');
  return { canonicalRequest, stringToSign, signature, names: names.join(';'), scope };
}

/** Sign one request: the headers to send with it. */
export function sign(input: SignInput): Signed {
  const date = xDate(input.date ?? new Date());
  const payloadHash = sha256Hex(input.body);
  const signedHeaders: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.headers ?? {})) signedHeaders[name.toLowerCase()] = value;
  signedHeaders.host = input.host;
  signedHeaders['x-date'] = date;
  signedHeaders['x-content-sha256'] = payloadHash;
  const { canonicalRequest, stringToSign, signature, names, scope } = signParts({
    method: input.method,
    path: input.path,
    query: input.query,
    signedHeaders,
    payloadHash,
    xDate: date,
    secretKey: input.secretKey,
    region: input.region,
    service: input.service,
  });
  const headers = { ...signedHeaders };
  headers.authorization = `${ALGORITHM} Credential=${input.accessKey}/${scope}, SignedHeaders=${names}, Signature=${signature}`;
  return { headers, canonicalRequest, stringToSign, signature };
}
