import type { Pool } from 'undici';
import {
  GatewayError,
  keepUpstreamBytes,
  readCapped,
  sendUpstream,
  transportError,
  upstreamError,
  type OperationHandler,
} from '../../../core/index.js';
import type { Endpoint } from './api.js';

/**
 * Embeddings against an OpenAI-compatible back end: POST {basePath}/embeddings with the body as
 * the client sent it and the back end's model name. The answer is parsed (for its usage and to
 * be sure it is an embedding list) and its bytes are kept, so a client speaking the same format
 * gets exactly what the back end sent, float or base64.
 */
export function embeddingsHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'embeddings'> {
  const path = `${endpoint.basePath}/embeddings`;
  return async (request, { signal }) => {
    const body = { ...request.body, model: request.model };
    let response: Awaited<ReturnType<typeof sendUpstream>>;
    try {
      response = await sendUpstream(pool, {
        method: 'POST',
        path,
        headers: { ...endpoint.headers, ...request.forwardHeaders },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw transportError(error, signal);
    }
    if (response.statusCode >= 400) {
      throw upstreamError(response.statusCode, await readCapped(response.body), response.headers, secrets);
    }
    let bytes: Buffer;
    try {
      bytes = await response.body.bytes();
    } catch (error) {
      throw transportError(error, signal);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
    }
    if (!isEmbeddingList(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with an embedding list' }, retryable: true });
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes) };
  };
}

/** An object whose `data` is an array of objects, each with an `embedding` (numbers or base64). */
function isEmbeddingList(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const data = (value as { data?: unknown }).data;
  if (!Array.isArray(data)) return false;
  for (const item of data) {
    if (item === null || typeof item !== 'object') return false;
    const vector = (item as { embedding?: unknown }).embedding;
    if (!Array.isArray(vector) && typeof vector !== 'string') return false;
  }
  return true;
}
