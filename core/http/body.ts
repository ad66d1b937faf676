import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { Transform } from 'node:stream';
import { TextDecoder } from 'node:util';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { GatewayError } from '../errors.js';
import { hiddenSlot } from '../hidden.js';
import { askForBody } from './continue.js';


/**
 * Refuse bodies nested deeper than `maxDepth` and bodies holding, anywhere, what could reach an
 * object's prototype if a body were ever merged into an object: a `__proto__` key, or a
 * `constructor` holding a `prototype` (the path to Object.prototype). Either name alone is an
 * ordinary key clients send (a tool's parameter called `constructor`, `metadata.prototype`). The
 * walk recurses at most `maxDepth` levels (deeper is refused before it recurses), so a hostile
 * body cannot overflow the stack, and it allocates nothing. Returns how many object keys the
 * value holds, at every depth.
 */
export function guardJson(value: unknown, maxDepth: number): number {
  return value !== null && typeof value === 'object' ? guardNode(value, 1, maxDepth) : 0;
}

function guardNode(node: object, depth: number, maxDepth: number): number {
  if (depth > maxDepth) throw new GatewayError('json_too_deep', { params: { limit: maxDepth } });
  let keys = 0;
  if (Array.isArray(node)) {
    for (let i = 0; i < node.length; i++) {
      const item: unknown = node[i];
      if (item !== null && typeof item === 'object') keys += guardNode(item, depth + 1, maxDepth);
    }
    return keys;
  }
  for (const key in node) {
    const item = (node as Record<string, unknown>)[key];
    if (key === '__proto__' || (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype'))) {
      throw new GatewayError('forbidden_key', { params: { key } });
    }
    keys++;
    if (item !== null && typeof item === 'object') keys += guardNode(item, depth + 1, maxDepth);
  }
  return keys;
}

/**
 * How many object keys a JSON text spells, at every depth, counting a key given twice in one
 * object twice (JSON.parse keeps only the last). Assumes valid JSON: a string followed by `:`
 * is a key.
 */
export function keysSpelt(text: string): number {
  let keys = 0;
  for (let i = text.indexOf('"'); i !== -1; i = text.indexOf('"', i + 1)) {
    // The end of this string: the next quote not escaped by an odd run of backslashes.
    let end = text.indexOf('"', i + 1);
    while (end !== -1) {
      let slashes = 0;
      while (text.charCodeAt(end - 1 - slashes) === 92) slashes++;
      if (slashes % 2 === 0) break;
      end = text.indexOf('"', end + 1);
    }
    if (end === -1) return keys;
    let next = end + 1;
    let c = text.charCodeAt(next);
    while (c === 32 || c === 10 || c === 13 || c === 9) c = text.charCodeAt(++next);
    if (c === 58) keys++;
    i = end;
  }
  return keys;
}

export interface JsonBody {
  value: Record<string, unknown>;
  /**
   * The text `value` was parsed from, when every parser reads it as `value`: empty when it gives
   * a key twice in one object (JSON.parse keeps the last, some servers the first), so that
   * nothing relays a text whose meaning depends on the reader.
   */
  raw: string;
}

/** Whether a request carries a body (a Content-Length other than 0, or a chunked one). */
export function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length) return length !== '0';
  return Boolean(req.headers['transfer-encoding']);
}

/** A JSON media type: `application/json` or any `+json` type, whatever its parameters. */
function isJsonType(type: string): boolean {
  const semi = type.indexOf(';');
  const media = (semi === -1 ? type : type.slice(0, semi)).trim().toLowerCase();
  return media === 'application/json' || (media.includes('/') && media.endsWith('+json'));
}

/**
 * Read a JSON body: 415 for another media type, 413 past the limit (checked against
 * Content-Length before reading, and while reading a chunked body, which is then dropped),
 * 400 for malformed, too deep or hostile JSON. A body-less request reads as `{}`.
 *
 * The answer comes at once, without a promise, when the whole body is already at hand (nearly
 * every call: it arrives with the headers); a refusal is then thrown at once too.
 */
export function createJsonBodyReader(limitBytes: number, maxDepth: number, idleMs = DEFAULT_BODY_TIMEOUT_MS) {
  return function readJsonBody(req: IncomingMessage): JsonBody | Promise<JsonBody> {
    if (!hasBody(req)) return { value: {}, raw: '' };
    const type = req.headers['content-type'];
    if (!type) {
      // Some clients send JSON without saying so; read it as JSON rather than refuse it.
      req.headers['content-type'] = 'application/json';
    } else if (!PLAIN_JSON.test(type) && !isJsonType(type)) {
      throw new GatewayError('unsupported_media_type', { params: { contentType: type.split(';')[0]!.trim(), accepted: 'application/json' } });
    }
    // A client waiting for its 100 Continue sends the body now: the call was let in.
    askForBody(req);
    // What nearly every client sends (UTF-8 JSON, not compressed) is read directly; anything else
    // (a compressed body, another charset) is decoded first, within the same size limit.
    const coding = req.headers['content-encoding'];
    if (!coding && (!type || PLAIN_JSON.test(type))) {
      const text = readUtf8(req, limitBytes, idleMs);
      return typeof text === 'string' ? jsonBody(text, maxDepth) : text.then((raw) => jsonBody(raw, maxDepth));
    }
    return readDecoded(req, codingsOf(coding), limitBytes, idleMs).then((bytes) => jsonBody(decodeText(bytes, type ?? ''), maxDepth));
  };
}

/** A body's text as a JsonBody: parsed, checked, and kept as text unless it spells a key twice. */
function jsonBody(raw: string, maxDepth: number): JsonBody {
  const { value, keys } = parseObject(raw, maxDepth);
  return { value, raw: keysSpelt(raw) === keys ? raw : '' };
}

/** A JSON text as an object: 400 when it is malformed, not an object, too deep or hostile. */
function parseObject(raw: string, maxDepth: number): { value: Record<string, unknown>; keys: number } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new GatewayError('invalid_json', { params: { detail: cleanParseMessage((error as Error).message) } });
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatewayError('invalid_request', { params: { detail: 'The request body must be a JSON object.' } });
  }
  const keys = guardJson(parsed, maxDepth);
  return { value: parsed as Record<string, unknown>, keys };
}

/** The content codings of a body, in the order they must be undone (the last applied first). */
export function codingsOf(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity')
    .reverse();
}

export function decoderFor(coding: string): Transform {
  switch (coding) {
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      throw new GatewayError('unsupported_content_encoding', { params: { encoding: coding.slice(0, 100) } });
  }
}

/**
 * `req` piped through `stages` (the decoders of `codings`, made by decoderFor, the last applied
 * first): the stream of its decoded bytes; a stage whose data is not valid fails with `fail`,
 * naming its coding.
 */
export function decodedStream(req: IncomingMessage, codings: readonly string[], stages: readonly Transform[], fail: (error: GatewayError) => void): NodeJS.ReadableStream {
  let tail: NodeJS.ReadableStream = req;
  stages.forEach((stage, i) => {
    stage.on('error', () => fail(new GatewayError('invalid_request', { params: { detail: `The request body is not valid ${codings[i]} data.` } })));
    tail = tail.pipe(stage);
  });
  return tail;
}

/**
 * The body's bytes with its content codings undone. The limit applies to the decoded size too
 * (a small compressed body may expand enormously): 413 as soon as it passes it.
 */
function readDecoded(req: IncomingMessage, codings: string[], limitBytes: number, idleMs: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) return Promise.reject(new GatewayError('body_too_large', { params: { limit: limitBytes } }));
  const stages = codings.map(decoderFor);
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const stopWatching = watchBodyIdle(req, idleMs, (error) => fail(error));
    const fail = (error: GatewayError) => {
      if (settled) return;
      settled = true;
      stopWatching();
      req.unpipe();
      for (const stage of stages) stage.destroy();
      // Drain what the client still sends, so that the error can be answered on this connection.
      req.resume();
      reject(error);
    };
    const tail = decodedStream(req, codings, stages, fail);
    req.on('error', () => fail(new GatewayError('invalid_request', { params: { detail: 'The request body could not be read.' } })));
    req.on('close', () => {
      if (!req.complete) fail(new GatewayError('invalid_request', { params: { detail: 'The request body could not be read.' } }));
    });
    tail.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > limitBytes) fail(new GatewayError('body_too_large', { params: { limit: limitBytes } }));
      else chunks.push(chunk);
    });
    tail.on('end', () => {
      if (settled) return;
      settled = true;
      stopWatching();
      resolve(Buffer.concat(chunks, size));
    });
  });
}

/** Bytes as text in the Content-Type's charset (UTF-8 when it names none): 415 for a charset unknown here. */
function decodeText(bytes: Buffer, contentType: string): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType)?.[1] ?? 'utf-8';
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset, { fatal: true });
  } catch {
    throw new GatewayError('unsupported_media_type', { params: { contentType: `application/json; charset=${charset}`, accepted: 'application/json in a known charset' } });
  }
  try {
    return decoder.decode(bytes);
  } catch {
    throw new GatewayError('invalid_json', { params: { detail: `the body is not valid ${charset} text.` } });
  }
}

/** `application/json`, with no parameter or a UTF-8 charset only. */
const PLAIN_JSON = /^application\/json\s*(;\s*charset\s*=\s*"?utf-?8"?\s*)?$/i;

/** How long a body may go without a byte before it is refused (`server.bodyTimeoutMs`). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;

const NOT_WATCHING = (): void => undefined;

/** What a body's reader does when its request turns out to be broken (see failBodyRead). */
const bodyFailure = hiddenSlot<(error: GatewayError) => void>();
/** A broken body's error, kept until its reader starts (see failBodyRead). */
const pendingFailure = hiddenSlot<GatewayError>();

/**
 * Fail the read of `req`'s body with `error`, as if its reader had found it: node stopped
 * parsing the request midway (a chunk size that is not hex, a `Transfer-Encoding` it refuses),
 * and no more of the body will come. A reader that starts later (the request is served on the
 * next turn of the event loop) fails as soon as it starts.
 */
export function failBodyRead(req: IncomingMessage, error: GatewayError): void {
  const fail = bodyFailure.get(req);
  if (fail) fail(error);
  else pendingFailure.set(req, error);
}

/**
 * Call `onIdle` with a 408 `body_timeout` if the client sends nothing for `idleMs` while its body
 * is still incomplete: a client that stops midway (or declares more than it sends) is answered,
 * not waited on forever. It is the socket's own idle timer, so a steady upload costs nothing per
 * chunk, and a body that came whole with its headers arms nothing. `onIdle` is also called
 * with failBodyRead's error. Returns what stops watching; `idleMs` 0 never times out.
 */
export function watchBodyIdle(req: IncomingMessage, idleMs: number, onIdle: (error: GatewayError) => void): () => void {
  if (req.complete || !req.socket) return NOT_WATCHING;
  let watching = true;
  const stop = () => {
    if (!watching) return;
    watching = false;
    bodyFailure.clear(req);
    req.off('end', stop);
    if (idleMs <= 0) return;
    req.off('timeout', onTimeout);
    // Node's server keeps no idle timer on a socket while a request is on it (server.timeout 0).
    req.socket?.setTimeout(0);
  };
  const onTimeout = () => {
    stop();
    onIdle(new GatewayError('body_timeout', { params: { seconds: idleMs / 1000 } }));
  };
  const fail = (error: GatewayError) => {
    stop();
    onIdle(error);
  };
  req.once('end', stop);
  const pending = pendingFailure.get(req);
  if (pending) {
    pendingFailure.clear(req);
    // After the reader has what stops it (it calls this before it holds the result).
    process.nextTick(fail, pending);
    return stop;
  }
  bodyFailure.set(req, fail);
  // The server emits the socket's 'timeout' on the request while it is incomplete, and leaves
  // the socket open when someone listens; once the body is complete it would destroy the socket,
  // so the timer goes with the body's end, whatever the reader is still doing (a form's files
  // are still being written to disk then).
  if (idleMs > 0) req.setTimeout(idleMs, onTimeout);
  return stop;
}

/** How long each request's body kept the gateway waiting for it (see bodyWaitMs). */
const BODY_WAITS = new WeakMap<IncomingMessage, number>();

/**
 * How long reading `req`'s body waited for the client to send it: from the first turn of the
 * event loop that found it incomplete to its last byte, or to its failure (a body that stopped
 * coming). The client's time, which `x-switchyard-overhead-ms` leaves out. Undefined when the
 * body was at hand (nearly every call), or came in the same packets as the headers (node parses
 * those before the loop turns), or was neither plain UTF-8 JSON nor a form (see timeBodyWait).
 */
export function bodyWaitMs(req: IncomingMessage): number | undefined {
  return BODY_WAITS.get(req);
}

/**
 * Start timing the client's sending of `req`'s body for bodyWaitMs: from the first check phase
 * that finds it incomplete (the bytes that came with the headers are parsed before the loop
 * turns) until the returned stop is called, at the body's end or failure. Called again, stop
 * does nothing.
 */
function timeBody(req: IncomingMessage): () => void {
  let waitingSince: number | undefined;
  let stopped = false;
  const waiting = setImmediate(() => (waitingSince = performance.now()));
  return () => {
    if (stopped) return;
    stopped = true;
    clearImmediate(waiting);
    if (waitingSince !== undefined) BODY_WAITS.set(req, performance.now() - waitingSince);
  };
}

/**
 * Time the client's sending of `req`'s body for bodyWaitMs, for a reader that streams the body
 * itself (a multipart form, its files written to disk as they come): until its end, or the
 * request's close when it never ends. The reader's own work between the pieces counts as
 * waiting too; it is small beside a client slow enough to be waited for.
 */
export function timeBodyWait(req: IncomingMessage): void {
  if (req.complete) return;
  const stop = timeBody(req);
  const over = () => {
    req.off('end', over);
    req.off('close', over);
    stop();
  };
  req.once('end', over);
  req.once('close', over);
}

/**
 * The body as UTF-8 text: 413 when Content-Length says it is over the limit (before reading a
 * byte) or when a chunked body grows past it; 400 when the client stops sending midway; 408
 * when nothing arrives for `idleMs`. The text itself (no promise) when the whole body is at hand.
 */
function readUtf8(req: IncomingMessage, limitBytes: number, idleMs: number): string | Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) throw new GatewayError('body_too_large', { params: { limit: limitBytes } });
  // Usually the whole body came with the headers: take it from the stream's buffer at once,
  // rather than waiting a few turns of the event loop for 'data' and 'end'.
  if (req.complete && !req.readableFlowing && req.readableLength <= limitBytes) {
    const chunks: Buffer[] = [];
    let size = 0;
    for (let chunk = req.read() as Buffer | null; chunk !== null; chunk = req.read() as Buffer | null) {
      chunks.push(chunk);
      size += chunk.length;
    }
    if (size > limitBytes) throw new GatewayError('body_too_large', { params: { limit: limitBytes } });
    return utf8Of(chunks, size);
  }
  // The client's wait, for bodyWaitMs: until the body's end or failure.
  const stopTiming = timeBody(req);
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      stopTiming();
      stopWatching();
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        cleanup();
        reject(new GatewayError('body_too_large', { params: { limit: limitBytes } }));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      try {
        resolve(utf8Of(chunks, size));
      } catch (error) {
        reject(error);
      }
    };
    const onError = () => {
      cleanup();
      reject(new GatewayError('invalid_request', { params: { detail: 'The request body could not be read.' } }));
    };
    const onClose = () => {
      if (req.complete) return;
      onError();
    };
    const stopWatching = watchBodyIdle(req, idleMs, (error) => {
      cleanup();
      reject(error);
    });
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * The chunks as one UTF-8 text, without a byte-order mark (not JSON, but some clients write one).
 * Bytes that are not UTF-8 are refused, as in a compressed body, rather than turned into U+FFFD
 * on their way to the back end.
 */
function utf8Of(chunks: Buffer[], size: number): string {
  const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  if (!isUtf8(all)) throw new GatewayError('invalid_json', { params: { detail: 'the body is not valid utf-8 text.' } });
  const start = all.length >= 3 && all[0] === 0xef && all[1] === 0xbb && all[2] === 0xbf ? 3 : 0;
  return all.toString('utf8', start);
}

/** V8's parse message without the echo of the body it quotes. */
function cleanParseMessage(message: string | undefined): string {
  if (!message) return 'invalid JSON.';
  const match = /(Unexpected [^,]*?|Expected [^,]*?|Bad control character[^,]*?|Unterminated string[^,]*?)(?: in JSON)? at position (\d+)/.exec(message);
  if (match) return `${match[1]} at position ${match[2]}.`;
  if (/Unexpected end of JSON input/.test(message)) return 'unexpected end of JSON input.';
  if (/invalid JSON, only supports object and array/.test(message)) return 'the body must be a JSON object.';
  return 'invalid JSON.';
}
