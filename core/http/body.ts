import type Koa from 'koa';
import { koaBody } from 'koa-body';
import { GatewayError } from '../errors.js';

/** Keys that could reach an object's prototype if a body were ever merged into an object. */
const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Refuse bodies nested deeper than `maxDepth` and bodies holding a forbidden key anywhere.
 * Iterative, so a hostile body cannot overflow the stack.
 */
export function guardJson(value: unknown, maxDepth: number): void {
  if (value === null || typeof value !== 'object') return;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > maxDepth) throw new GatewayError('json_too_deep', { params: { limit: maxDepth } });
    if (Array.isArray(node)) {
      for (const item of node) if (item !== null && typeof item === 'object') stack.push([item, depth + 1]);
      continue;
    }
    for (const key of Object.keys(node as object)) {
      if (FORBIDDEN_KEYS.has(key)) throw new GatewayError('forbidden_key', { params: { key } });
      const item = (node as Record<string, unknown>)[key];
      if (item !== null && typeof item === 'object') stack.push([item, depth + 1]);
    }
  }
}

const UNPARSED = Symbol.for('unparsedBody');

export interface JsonBody {
  value: Record<string, unknown>;
  raw: string;
}

function hasBody(ctx: Koa.Context): boolean {
  const length = ctx.get('content-length');
  if (length) return length !== '0';
  return Boolean(ctx.get('transfer-encoding'));
}

/**
 * Read a JSON body: 415 for another media type, 413 past the limit (checked against
 * Content-Length before reading, and while reading a chunked body, which is then dropped),
 * 400 for malformed, too deep or hostile JSON. A body-less request reads as `{}`.
 */
export function createJsonBodyReader(limitBytes: number, maxDepth: number) {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: limitBytes,
    urlencoded: false,
    text: false,
    multipart: false,
    includeUnparsed: true,
    patchKoa: true,
    patchNode: false,
  });
  const noop = async () => undefined;

  return async function readJsonBody(ctx: Koa.Context): Promise<JsonBody> {
    if (!hasBody(ctx)) return { value: {}, raw: '' };
    const type = ctx.req.headers['content-type'];
    if (!type) {
      // Some clients send JSON without saying so; read it as JSON rather than refuse it.
      ctx.req.headers['content-type'] = 'application/json';
    } else if (!PLAIN_JSON.test(type) && !ctx.is('json')) {
      throw new GatewayError('unsupported_media_type', { params: { contentType: type.split(';')[0]!.trim(), accepted: 'application/json' } });
    }
    // What nearly every client sends (UTF-8 JSON, not compressed) is read directly; anything else
    // (another charset, a compressed body) goes through koa-body, which decodes it.
    if (!ctx.req.headers['content-encoding'] && (!type || PLAIN_JSON.test(type))) {
      const raw = await readUtf8(ctx.req, limitBytes);
      let parsed: unknown;
      try {
        parsed = JSON.parse(raw);
      } catch (error) {
        throw new GatewayError('invalid_json', { params: { detail: cleanParseMessage((error as Error).message) } });
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        throw new GatewayError('invalid_request', { params: { detail: 'The request body must be a JSON object.' } });
      }
      guardJson(parsed, maxDepth);
      return { value: parsed as Record<string, unknown>, raw };
    }
    try {
      await parse(ctx, noop);
    } catch (error) {
      throw bodyError(error, limitBytes);
    }
    const parsed = ctx.request.body as Record<string | symbol, unknown> | undefined;
    const raw = (parsed?.[UNPARSED] as string | undefined) ?? '';
    if (parsed === undefined || parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      throw new GatewayError('invalid_request', { params: { detail: 'The request body must be a JSON object.' } });
    }
    guardJson(parsed, maxDepth);
    return { value: parsed as Record<string, unknown>, raw };
  };
}

/** `application/json`, with no parameter or a UTF-8 charset only. */
const PLAIN_JSON = /^application\/json\s*(;\s*charset\s*=\s*"?utf-?8"?\s*)?$/i;

/**
 * The body as UTF-8 text: 413 when Content-Length says it is over the limit (before reading a
 * byte) or when a chunked body grows past it; 400 when the client stops sending midway.
 */
function readUtf8(req: Koa.Context['req'], limitBytes: number): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (declared > limitBytes) return Promise.reject(new GatewayError('body_too_large', { params: { limit: limitBytes } }));
  // Usually the whole body came with the headers: take it from the stream's buffer at once,
  // rather than waiting a few turns of the event loop for 'data' and 'end'.
  if (req.complete && !req.readableFlowing && req.readableLength <= limitBytes) {
    const chunks: Buffer[] = [];
    let size = 0;
    for (let chunk = req.read() as Buffer | null; chunk !== null; chunk = req.read() as Buffer | null) {
      chunks.push(chunk);
      size += chunk.length;
    }
    if (size > limitBytes) return Promise.reject(new GatewayError('body_too_large', { params: { limit: limitBytes } }));
    return Promise.resolve(utf8Of(chunks, size));
  }
  return new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
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
      resolve(utf8Of(chunks, size));
    };
    const onError = () => {
      cleanup();
      reject(new GatewayError('invalid_request', { params: { detail: 'The request body could not be read.' } }));
    };
    const onClose = () => {
      if (req.complete) return;
      onError();
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** The chunks as one UTF-8 text, without a byte-order mark (not JSON, but some clients write one). */
function utf8Of(chunks: Buffer[], size: number): string {
  const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
  const start = all.length >= 3 && all[0] === 0xef && all[1] === 0xbb && all[2] === 0xbf ? 3 : 0;
  return all.toString('utf8', start);
}

function bodyError(error: unknown, limitBytes: number): GatewayError {
  const e = error as { status?: number; type?: string; message?: string };
  switch (e.type) {
    case 'entity.too.large':
      return new GatewayError('body_too_large', { params: { limit: limitBytes } });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new GatewayError('unsupported_media_type', { params: { contentType: 'with that encoding', accepted: 'application/json in UTF-8' } });
    case 'entity.parse.failed':
      return new GatewayError('invalid_json', { params: { detail: cleanParseMessage(e.message) } });
    default:
      if (/forbidden prototype property/i.test(e.message ?? '')) return new GatewayError('forbidden_key', { params: { key: '__proto__' } });
      if (/only supports object and array/i.test(e.message ?? '')) {
        return new GatewayError('invalid_request', { params: { detail: 'The request body must be a JSON object.' } });
      }
      if (e.status === 413) return new GatewayError('body_too_large', { params: { limit: limitBytes } });
      if (e.status === 400 && /JSON|Unexpected|invalid/i.test(e.message ?? '')) {
        return new GatewayError('invalid_json', { params: { detail: cleanParseMessage(e.message) } });
      }
      return new GatewayError('invalid_request', { params: { detail: 'The request body could not be read.' } });
  }
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
