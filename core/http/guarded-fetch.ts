import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, request } from './undici.js';
import { GatewayError } from '../errors.js';

/**
 * Fetching a URL a client handed the gateway (an image to pass on as bytes), without letting the
 * client reach what only the gateway can reach (server-side request forgery):
 *
 * - only `http:` and `https:` URLs, without credentials in them;
 * - the host is resolved once (every address it has); if ANY address is private, loopback,
 *   link-local, unique-local, CGNAT, multicast, unspecified, reserved or a cloud metadata
 *   address (IPv4-mapped and other IPv4-embedding IPv6 forms included), the fetch is refused;
 * - the connection goes to the address that was checked (the socket's lookup returns it), so a
 *   second resolution cannot swap in another address (DNS rebinding);
 * - redirects are followed by hand, at most `maxRedirects`, each target checked as above;
 * - the body is read as a stream and abandoned past `maxBytes`; the whole fetch (every hop)
 *   must finish within `timeoutMs`;
 * - the answer must be an image (`image/*`, or bytes that start like PNG, JPEG, GIF or WebP
 *   when the server says nothing better than `application/octet-stream`).
 *
 * Every refusal is a GatewayError `invalid_value` (400) naming `param`, with a message that says
 * what was wrong and nothing of the gateway's network (no resolved addresses).
 */

// ---------------------------------------------------------------------------------------------
// Address classes
// ---------------------------------------------------------------------------------------------

export type AddressClass =
  | 'public'
  | 'private'
  | 'loopback'
  | 'link-local'
  | 'unique-local'
  | 'cgnat'
  | 'multicast'
  | 'unspecified'
  | 'broadcast'
  | 'reserved'
  | 'metadata'
  | 'invalid';

/** Cloud metadata services, refused whatever the allow-list says. */
const METADATA_V4 = new Set(['169.254.169.254', '169.254.170.2', '100.100.100.200', '192.0.0.192']);
/** fd00:ec2::254 (AWS's IPv6 metadata address) as eight groups. */
const METADATA_V6 = [[0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254]];

function v4Octets(address: string): number[] | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const n = Number(part);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function classifyV4(octets: number[]): AddressClass {
  const [a, b, c] = octets as [number, number, number, number];
  const text = octets.join('.');
  if (METADATA_V4.has(text)) return 'metadata';
  if (a === 0) return 'unspecified'; // 0.0.0.0/8: "this network"; connecting to it reaches the host
  if (a === 10) return 'private';
  if (a === 100 && b >= 64 && b <= 127) return 'cgnat';
  if (a === 127) return 'loopback';
  if (a === 169 && b === 254) return 'link-local';
  if (a === 172 && b >= 16 && b <= 31) return 'private';
  if (a === 192 && b === 168) return 'private';
  if (a === 192 && b === 0 && c === 0) return 'reserved'; // IETF protocol assignments
  if (a === 192 && b === 0 && c === 2) return 'reserved'; // TEST-NET-1
  if (a === 192 && b === 88 && c === 99) return 'reserved'; // 6to4 relay anycast
  if (a === 198 && (b === 18 || b === 19)) return 'reserved'; // benchmarking
  if (a === 198 && b === 51 && c === 100) return 'reserved'; // TEST-NET-2
  if (a === 203 && b === 0 && c === 113) return 'reserved'; // TEST-NET-3
  if (a >= 224 && a <= 239) return 'multicast';
  if (text === '255.255.255.255') return 'broadcast';
  if (a >= 240) return 'reserved';
  return 'public';
}

/** An IPv6 address as eight 16-bit groups (an embedded dotted quad and a zone id understood). */
function v6Groups(address: string): number[] | undefined {
  let text = address.replace(/^\[|\]$/g, '');
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    // An embedded dotted quad (`::ffff:1.2.3.4`) is two groups written another way.
    const octets = v4Octets(text.slice(lastColon + 1));
    if (!octets) return undefined;
    text = `${text.slice(0, lastColon + 1)}${((octets[0]! << 8) | octets[1]!).toString(16)}:${((octets[2]! << 8) | octets[3]!).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((g) => (/^[0-9a-f]{1,4}$/i.test(g) ? parseInt(g, 16) : NaN)));
  const head = parse(halves[0]!);
  const rest = halves.length === 2 ? parse(halves[1]!) : [];
  let groups: number[];
  if (halves.length === 2) {
    const fill = 8 - head.length - rest.length;
    if (fill < 1) return undefined;
    groups = [...head, ...new Array<number>(fill).fill(0), ...rest];
  } else groups = head;
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return undefined;
  return groups;
}

function embeddedV4(hi: number, lo: number): number[] {
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff];
}

function classifyV6(g: number[]): AddressClass {
  if (METADATA_V6.some((m) => m.every((v, i) => v === g[i]))) return 'metadata';
  const zeros = (from: number, to: number) => g.slice(from, to).every((v) => v === 0);
  if (zeros(0, 8)) return 'unspecified';
  if (zeros(0, 7) && g[7] === 1) return 'loopback';
  // ::ffff:a.b.c.d (IPv4-mapped) and ::ffff:0:a.b.c.d (IPv4-translated): the IPv4 address decides.
  if (zeros(0, 5) && g[5] === 0xffff) return classifyV4(embeddedV4(g[6]!, g[7]!));
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return classifyV4(embeddedV4(g[6]!, g[7]!));
  // ::a.b.c.d (the deprecated IPv4-compatible form): no public host has one.
  if (zeros(0, 6)) return 'reserved';
  // 64:ff9b::/96 (NAT64) and 64:ff9b:1::/48 (local NAT64): the IPv4 address decides.
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) {
    const inner = classifyV4(embeddedV4(g[6]!, g[7]!));
    return inner === 'public' ? 'public' : inner;
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return 'private';
  // 2002::/16 (6to4): the IPv4 address in the next 32 bits decides.
  if (g[0] === 0x2002) return classifyV4(embeddedV4(g[1]!, g[2]!));
  if (g[0] === 0x2001 && g[1] === 0) return 'reserved'; // Teredo (an obfuscated IPv4 inside)
  if (g[0] === 0x2001 && g[1] === 0x0db8) return 'reserved'; // documentation
  if (g[0] === 0x0100 && zeros(1, 4)) return 'reserved'; // discard-only
  if ((g[0]! & 0xfe00) === 0xfc00) return 'unique-local'; // fc00::/7
  if ((g[0]! & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((g[0]! & 0xffc0) === 0xfec0) return 'private'; // fec0::/10, the old site-local
  if ((g[0]! & 0xff00) === 0xff00) return 'multicast';
  return 'public';
}

/** What kind of address an IP literal is (v4, v6, IPv4-mapped v6...); `invalid` if it is not one. */
export function classifyAddress(address: string): AddressClass {
  const v4 = v4Octets(address);
  if (v4) return classifyV4(v4);
  const v6 = address.includes(':') ? v6Groups(address) : undefined;
  return v6 ? classifyV6(v6) : 'invalid';
}

/** Classes an operator's allow-list may open (for tests and intranets); the rest never are. */
const ALLOWABLE = new Set<AddressClass>(['private', 'loopback', 'link-local', 'unique-local', 'cgnat', 'reserved']);

// ---------------------------------------------------------------------------------------------
// The fetch
// ---------------------------------------------------------------------------------------------

export interface GuardedFetchOptions {
  /** The request field the URL came from, named in every refusal (`messages[1].content[0]`). */
  param: string;
  /**
   * Hosts that may resolve to private, loopback, link-local, unique-local or CGNAT addresses:
   * `true` for any host, or a list of host names / IP literals as written in the URL (for tests
   * and intranets). Metadata, multicast, broadcast and unspecified addresses are never fetched.
   */
  allowPrivate?: boolean | readonly string[];
  /** Most bytes of the body (default 20 MiB). */
  maxBytes?: number;
  /** Most milliseconds for the whole fetch, redirects included (default 10,000). */
  timeoutMs?: number;
  /** Most redirects followed (default 3). */
  maxRedirects?: number;
  /** Aborts the fetch (the client left). */
  signal?: AbortSignal;
  /** Host name -> addresses; `dns.lookup(host, {all: true})` by default (a test may pin names). */
  resolve?: (host: string) => Promise<readonly { address: string; family: number }[]>;
}

export interface FetchedImage {
  bytes: Buffer;
  /** The media type (`image/png`), without parameters. */
  mimeType: string;
}

export const IMAGE_FETCH_DEFAULTS = { maxBytes: 20 * 1024 * 1024, timeoutMs: 10_000, maxRedirects: 3 } as const;

function refuse(param: string, detail: string): GatewayError {
  return new GatewayError('invalid_value', { param, params: { detail } });
}

function hostAllowed(host: string, allow: GuardedFetchOptions['allowPrivate']): boolean {
  if (allow === true) return true;
  if (!Array.isArray(allow)) return false;
  const bare = host.replace(/^\[|\]$/g, '').toLowerCase();
  return allow.some((entry) => entry.replace(/^\[|\]$/g, '').toLowerCase() === bare);
}

async function defaultResolve(host: string): Promise<readonly { address: string; family: number }[]> {
  return dnsLookup(host, { all: true, verbatim: true });
}

/** The address to connect to for a URL, once every address its host has is known to be allowed. */
/** `promise`, or the signal's abort (a resolver that hangs must not outlive the deadline). */
function until<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** How a guarded open speaks of the URL it refuses, and the error it refuses with. */
interface Refusals {
  /** The URL as a refusal names it: `the image URL`. */
  noun: string;
  /** A URL of another scheme than http or https. */
  scheme: string;
  /** A URL with a user name or password in it. */
  credentials: string;
  refuse(detail: string): Error;
}

const imageRefusals = (param: string): Refusals => ({
  noun: 'the image URL',
  scheme: 'only http and https image URLs can be fetched',
  credentials: 'an image URL may not carry credentials',
  refuse: (detail) => refuse(param, detail),
});

async function checkedAddress(
  url: URL,
  options: Pick<GuardedFetchOptions, 'allowPrivate' | 'resolve'>,
  signal: AbortSignal,
  words: Refusals,
): Promise<{ address: string; family: number }> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: readonly { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await until((options.resolve ?? defaultResolve)(host), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      throw words.refuse(`${words.noun}'s host could not be resolved`);
    }
    if (addresses.length === 0) throw words.refuse(`${words.noun}'s host could not be resolved`);
  }
  const allowed = hostAllowed(host, options.allowPrivate);
  for (const { address } of addresses) {
    const kind = classifyAddress(address);
    if (kind === 'public') continue;
    if (allowed && ALLOWABLE.has(kind)) continue;
    const named = kind === 'invalid' ? 'non-routable' : kind;
    throw words.refuse(`${words.noun} points to ${named === 'unspecified' ? 'an' : 'a'} ${named} address, which the gateway does not fetch`);
  }
  return addresses[0]!;
}

function parseUrl(text: string, words: Refusals, base?: URL): URL {
  let url: URL;
  try {
    url = base ? new URL(text, base) : new URL(text);
  } catch {
    throw words.refuse(`${words.noun} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw words.refuse(words.scheme);
  if (url.username || url.password) throw words.refuse(words.credentials);
  return url;
}

/** An answer a guarded open arrived at (no redirect), its body not read yet. */
export interface GuardedResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: AsyncIterable<Buffer> & { destroy(): unknown; on(event: 'error', listener: () => void): unknown };
  /** Let the connection go (the body read to its end or not). */
  close(): void;
}

/**
 * GET `url` as the guard at the top of this file says (scheme, credentials, every address of
 * every hop checked, the socket pinned to the checked address, redirects followed by hand), and
 * hand over the first answer that is not a redirect, its body unread.
 */
async function openGuarded(
  url: URL,
  options: Pick<GuardedFetchOptions, 'allowPrivate' | 'resolve'> & {
    maxRedirects: number;
    backstopMs: number;
    headers: Record<string, string>;
    /** Origins (scheme, host and port) that may be on a private network, whatever `allowPrivate` says. */
    allowOrigins?: readonly string[];
  },
  signal: AbortSignal,
  words: Refusals,
): Promise<GuardedResponse> {
  for (let hop = 0; ; hop++) {
    const allowPrivate = options.allowOrigins?.includes(url.origin) ? true : options.allowPrivate;
    const { address, family } = await checkedAddress(url, { ...options, allowPrivate }, signal, words);
    if (signal.aborted) throw signal.reason;
    // undici's own timers are a backstop: the caller's signal is what ends a slow fetch.
    const backstop = options.backstopMs;
    const agent = new Agent({ connect: { lookup: pinnedLookup(address, family), timeout: backstop }, headersTimeout: backstop, bodyTimeout: backstop });
    const close = () => void agent.destroy().catch(() => undefined);
    let response;
    try {
      response = await request(url, agent, { method: 'GET', signal, headers: options.headers });
    } catch (error) {
      close();
      throw error;
    }
    const { statusCode, headers, body } = response;
    if (!REDIRECTS.has(statusCode)) return { statusCode, headers, body: body as unknown as GuardedResponse['body'], close };
    discard(body);
    close();
    const location = headers.location;
    if (typeof location !== 'string' || !location) throw words.refuse(`${words.noun} redirected (${statusCode}) without a location`);
    if (hop >= options.maxRedirects) throw words.refuse(`${words.noun} redirected more than ${options.maxRedirects} times`);
    url = parseUrl(location, words, url);
  }
}

/**
 * Open a URL a back end gave the gateway to fetch from (a finished video's address), under the
 * same guard as a client's image URL: a back end (or whoever sits between it and the gateway)
 * cannot make the gateway read the metadata service or the intranet and hand it to a client.
 * `allowPrivate` opens hosts the operator names, `allowOrigins` whole origins (the back end's own
 * `baseUrl`'s: that port of that host, not the others). Refusals
 * are `refuse(detail)`; `signal` ends the whole of it.
 */
export async function openGuardedUrl(
  urlText: string,
  options: Pick<GuardedFetchOptions, 'allowPrivate' | 'resolve'> & {
    headers: Record<string, string>;
    maxRedirects?: number;
    backstopMs: number;
    noun: string;
    refuse(detail: string): Error;
    allowOrigins?: readonly string[];
  },
  signal: AbortSignal,
): Promise<GuardedResponse> {
  const words: Refusals = { noun: options.noun, scheme: `${options.noun} is not an http or https URL`, credentials: `${options.noun} carries credentials`, refuse: options.refuse };
  return openGuarded(parseUrl(urlText, words), { ...options, maxRedirects: options.maxRedirects ?? IMAGE_FETCH_DEFAULTS.maxRedirects }, signal, words);
}

/** A socket lookup that answers only the address that was checked. */
function pinnedLookup(address: string, family: number): LookupFunction {
  return ((_host: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options?.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction;
}

/** What the first bytes of an image look like, for servers that do not say. */
function sniff(bytes: Buffer): string | undefined {
  if (bytes.length >= 8 && bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.length >= 6 && /^GIF8[79]a$/.test(bytes.subarray(0, 6).toString('latin1'))) return 'image/gif';
  if (bytes.length >= 12 && bytes.subarray(0, 4).toString('latin1') === 'RIFF' && bytes.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return undefined;
}

/** Drop a body not read to its end (its abort error has a listener, so nothing goes unhandled). */
function discard(body: { on(event: 'error', listener: () => void): unknown; destroy(): unknown }): void {
  body.on('error', () => undefined);
  body.destroy();
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Fetch an image a client named by URL, guarded as described at the top of this file. */
export async function fetchImage(urlText: string, options: GuardedFetchOptions): Promise<FetchedImage> {
  const { param } = options;
  const maxBytes = options.maxBytes ?? IMAGE_FETCH_DEFAULTS.maxBytes;
  const timeoutMs = options.timeoutMs ?? IMAGE_FETCH_DEFAULTS.timeoutMs;
  const maxRedirects = options.maxRedirects ?? IMAGE_FETCH_DEFAULTS.maxRedirects;
  const deadline = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
  const timedOut = () => deadline.aborted && !options.signal?.aborted;
  const words = imageRefusals(param);
  const url = parseUrl(urlText, words);
  try {
    const { statusCode, headers, body, close } = await openGuarded(
      url,
      { ...options, maxRedirects, backstopMs: timeoutMs + 1000, headers: { accept: 'image/*', 'user-agent': 'switchyard-image-fetch' } },
      signal,
      words,
    );
    try {
      if (statusCode < 200 || statusCode >= 300) {
        discard(body);
        throw refuse(param, `the image URL answered with HTTP status ${statusCode}`);
      }
      const declared = Number(headers['content-length']);
      if (Number.isFinite(declared) && declared > maxBytes) {
        discard(body);
        throw refuse(param, `the image at the URL is larger than ${maxBytes} bytes`);
      }
      const type = String(headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type && !type.startsWith('image/') && type !== 'application/octet-stream') {
        discard(body);
        throw refuse(param, `the URL does not point to an image (content type ${type.slice(0, 60)})`);
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of body) {
        size += chunk.length;
        if (size > maxBytes) {
          discard(body);
          throw refuse(param, `the image at the URL is larger than ${maxBytes} bytes`);
        }
        chunks.push(chunk);
      }
      const bytes = Buffer.concat(chunks, size);
      const mimeType = type.startsWith('image/') ? type : sniff(bytes);
      if (!mimeType) throw refuse(param, 'the URL does not point to an image');
      return { bytes, mimeType };
    } finally {
      close();
    }
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    const code = (error as { code?: unknown } | null)?.code;
    if (timedOut() || (typeof code === 'string' && /^UND_ERR_(HEADERS|BODY|CONNECT)_TIMEOUT$/.test(code))) {
      throw refuse(param, `the image URL did not answer within ${timeoutMs} ms`);
    }
    if (options.signal?.aborted) throw new GatewayError('client_closed_request');
    throw refuse(param, 'the image could not be fetched from the URL');
  }
}
