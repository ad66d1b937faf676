import type { Pool } from 'undici';
import {
  GatewayError,
  postJson,
  readJson,
  keepUpstreamBytes,
  type OperationHandler,
  abortOf,
} from '../../../core/index.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';

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
    const body = { ...request.body, model: request.model };
    const response = await postJson(pool, { path, headers: { ...endpoint.headers, ...request.forwardHeaders }, body, signal, secrets });
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

/** Any character base64 does not use. */
const NOT_BASE64 = /[^A-Za-z0-9+/=]/;

/**
 * OpenAI's base64 embedding: canonical base64 of a whole number of float32s. Checked as a length
 * that is a multiple of 4, the alphabet, and `=` only as the last one or two characters: the same
 * strings as groups of four with a padded last group, with one search for a foreign character
 * (the grouped pattern took a quarter of the CPU of an embeddings call: about 50 us for a
 * 1536-dimension vector, against 5).
 */
export function isBase64Vector(text: string): boolean {
  if (text.length % 4 !== 0 || NOT_BASE64.test(text)) return false;
  const pad = text.indexOf('=');
  if (pad !== -1 && (pad < text.length - 2 || text.charCodeAt(text.length - 1) !== 61)) return false;
  return Buffer.byteLength(text, 'base64') % 4 === 0;
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
