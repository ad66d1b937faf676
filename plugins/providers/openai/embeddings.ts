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
    const problem = embeddingListProblem(parsed);
    if (problem) throw new GatewayError('upstream_error', { params: { detail: problem }, retryable: true });
    const list = parsed as { data: unknown[] };
    const asked = inputCount(request.body.input);
    const got = list.data.length;
    if (asked !== undefined && got !== asked) {
      // A client pairs vectors with its inputs by position: a short list would pair them wrongly.
      throw new GatewayError('upstream_error', {
        params: { detail: `the back end answered ${got} embedding(s) for ${asked} input(s)` },
        retryable: true,
      });
    }
    // Most lists are in order: nothing more to check then.
    if (!inOrder(list.data as Array<{ index?: unknown }>)) {
      const index = badIndex(list.data as Array<{ index?: unknown }>);
      if (index) {
        // Or by `index`, which says which input a vector is of: without it, or twice the same, a
        // vector is paired with no input or with the wrong one.
        throw new GatewayError('upstream_error', { params: { detail: `the back end answered ${index}` }, retryable: true });
      }
      // In the inputs' order, as OpenAI answers (code that pairs vectors by position relies on
      // it): a list the back end gave in another order is sorted, and goes out re-serialised.
      (list.data as Array<{ index: number }>).sort((a, b) => a.index - b.index);
      return { kind: 'json', status: response.statusCode, body: parsed as Record<string, unknown> };
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed as Record<string, unknown>, bytes, OPENAI_FORMAT) };
  };
}

/** How many vectors an input asks for: one per string or token-id array; a token-id array alone is one. */
function inputCount(input: unknown): number | undefined {
  if (typeof input === 'string') return 1;
  if (!Array.isArray(input) || input.length === 0) return undefined;
  return input.every((item) => typeof item === 'number') ? 1 : input.length;
}

/**
 * What is wrong with the items' `index`es, if anything: each must be a whole number below the
 * count of items, and no two the same (in any order: a client reads `index`), so that every
 * vector says which input it is of.
 */
function badIndex(data: ReadonlyArray<{ index?: unknown }>): string | undefined {
  const count = data.length;
  const seen = new Uint8Array(count);
  for (let i = 0; i < count; i++) {
    const index = data[i]!.index;
    if (index === undefined || index === null) return `an embedding without its index (data[${i}])`;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index >= count) return `an embedding with the index ${JSON.stringify(index)} in a list of ${count} (data[${i}])`;
    if (seen[index]) return `two embeddings with the index ${index}`;
    seen[index] = 1;
  }
  return undefined;
}

/** Whether every item's `index` is its place in the list. */
function inOrder(data: ReadonlyArray<{ index?: unknown }>): boolean {
  for (let i = 0; i < data.length; i++) if (data[i]!.index !== i) return false;
  return true;
}

/** Where a vector's bytes are decoded to be checked (a longer vector gets a buffer of its own). */
const scratch = Buffer.allocUnsafe(64 * 1024);

/** Base64's alphabet, each character's 6 bits at its index. */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * OpenAI's base64 embedding: canonical base64 of a whole number of float32s (the standard
 * alphabet, `=` padding to a multiple of four characters, unused bits zero, nothing else), each
 * of them finite, as a vector given as numbers must be (NaN and the infinities would reach a
 * client asking for floats as `null`, and one decoding base64 itself as NaN). Checked with one
 * pass of node's decoder, which skips what is not base64 and stops at a `=`: a text it decodes
 * to as many bytes as its length says holds nothing else, but for the URL-safe alphabet's `-`
 * and `_`, which the decoder takes too and are looked for first; then one look at each float's
 * exponent. About 2 us for a 1536-dimension vector, where decoding and encoding it again to
 * compare took 5.6 (slow VM).
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
  if (into.write(text, 'base64') !== size) return false;
  // A little-endian float32 is NaN or infinite when its 8 exponent bits are all set: the low 7
  // bits of its last byte and the high bit of the one before.
  for (let i = 3; i < size; i += 4) {
    if ((into[i]! & 0x7f) === 0x7f && (into[i - 1]! & 0x80) !== 0) return false;
  }
  return true;
}

function isVector(vector: unknown): boolean {
  if (typeof vector === 'string') return isBase64Vector(vector);
  if (!Array.isArray(vector)) return false;
  for (const value of vector) if (typeof value !== 'number' || !Number.isFinite(value)) return false;
  return true;
}

/**
 * What is wrong with an answer that should be an object whose `data` is an array of objects,
 * each with an `embedding`: finite numbers, or base64 of finite float32s. Anything else would
 * reach the client as garbage vectors (or, converted to the other encoding, as NaN, nulls and
 * zeros). Undefined when nothing is.
 */
function embeddingListProblem(value: unknown): string | undefined {
  const none = 'the back end did not answer with an embedding list';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return none;
  const data = (value as { data?: unknown }).data;
  if (!Array.isArray(data)) return none;
  for (let i = 0; i < data.length; i++) {
    const item: unknown = data[i];
    if (item === null || typeof item !== 'object') return none;
    if (!isVector((item as { embedding?: unknown }).embedding)) return `the back end answered an embedding that is neither finite numbers nor base64 of finite float32s (data[${i}])`;
  }
  return undefined;
}
