import type { Pool } from 'undici';
import {
  GatewayError,
  postJson,
  readJson,
  keepUpstreamBytes,
  type OperationHandler,
  abortOf,
  mergeHeaders,
} from '../../../core/index.js';
import { clientText, OPENAI_FORMAT, type Endpoint } from './api.js';

/**
 * Embeddings against an OpenAI-compatible back end: POST {basePath}/embeddings with the body as
 * the client sent it and the back end's model name. The answer is parsed (for its usage and to
 * be sure it is an embedding list) and its bytes are kept, so a client speaking the same format
 * gets exactly what the back end sent, float or base64.
 */
export function embeddingsHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'embeddings'> {
  const path = `${endpoint.basePath}/embeddings`;
  return async (request, context) => {
    const signal = abortOf(context);
    const raw = clientText(request);
    const body = raw === undefined ? { ...request.body, model: request.model } : undefined;
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, raw, signal, secrets });
    const { parsed, bytes } = await readJson(response, signal);
    if (!isEmbeddingList(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with an embedding list' }, retryable: true });
    }
    const asked = inputCount(request.body.input);
    const got = (parsed.data as unknown[]).length;
    if (asked !== undefined && got !== asked) {
      // A client pairs vectors with its inputs by position: a short list would pair them wrongly.
      throw new GatewayError('upstream_error', {
        params: { detail: `the back end answered ${got} embedding(s) for ${asked} input(s)` },
        retryable: true,
      });
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
  };
}

/** How many vectors an input asks for: one per string or token-id array; a token-id array alone is one. */
function inputCount(input: unknown): number | undefined {
  if (typeof input === 'string') return 1;
  if (!Array.isArray(input) || input.length === 0) return undefined;
  return input.every((item) => typeof item === 'number') ? 1 : input.length;
}

/** Where a vector's bytes are decoded to be checked (a longer vector gets a buffer of its own). */
const scratch = Buffer.allocUnsafe(64 * 1024);

/** Base64's alphabet, each character's 6 bits at its index. */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * OpenAI's base64 embedding: canonical base64 of a whole number of float32s (the standard
 * alphabet, `=` padding to a multiple of four characters, unused bits zero, nothing else).
 * Checked with one pass of node's decoder, which skips what is not base64 and stops at a `=`: a
 * text it decodes to as many bytes as its length says holds nothing else, but for the URL-safe
 * alphabet's `-` and `_`, which the decoder takes too and are looked for first. About 2 us for a
 * 1536-dimension vector, where decoding and encoding it again to compare took 5.6 (slow VM).
 */
export function isBase64Vector(text: string): boolean {
  const length = text.length;
  if (length % 4 !== 0) return false;
  const pad = length > 0 && text.charCodeAt(length - 1) === 61 ? (text.charCodeAt(length - 2) === 61 ? 2 : 1) : 0;
  const size = (length / 4) * 3 - pad;
  if (size % 4 !== 0) return false;
  if (pad > 0 && (ALPHABET.indexOf(text[length - pad - 1]!) & (pad === 2 ? 0b1111 : 0b11)) !== 0) return false;
  if (text.indexOf('-') !== -1 || text.indexOf('_') !== -1) return false;
  const into = size <= scratch.length ? scratch : Buffer.allocUnsafe(size);
  return into.write(text, 'base64') === size;
}

function isVector(vector: unknown): boolean {
  if (typeof vector === 'string') return isBase64Vector(vector);
  if (!Array.isArray(vector)) return false;
  for (const value of vector) if (typeof value !== 'number' || !Number.isFinite(value)) return false;
  return true;
}

/**
 * An object whose `data` is an array of objects, each with an `embedding`: finite numbers, or
 * base64 of float32s. Anything else would reach the client as garbage vectors (or, converted to
 * the other encoding, as NaN and zeros).
 */
function isEmbeddingList(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const data = (value as { data?: unknown }).data;
  if (!Array.isArray(data)) return false;
  for (const item of data) {
    if (item === null || typeof item !== 'object') return false;
    if (!isVector((item as { embedding?: unknown }).embedding)) return false;
  }
  return true;
}
