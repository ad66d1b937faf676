import type { Pool } from 'undici';
import {
  GatewayError,
  readCapped,
  sendUpstream,
  transportError,
  upstreamError,
  type UpstreamHttpResponse,
} from '../../../core/index.js';
import type { Endpoint } from './api.js';

/** What one call to an OpenAI-compatible back end needs besides its body. */
export interface PostOptions {
  forwardHeaders: Record<string, string>;
  signal: AbortSignal;
  secrets: readonly (string | undefined)[];
  /** Ask for an event stream. */
  stream?: boolean;
}

/**
 * POST a JSON body to `path` on the back end: transport failures and error statuses become the
 * gateway's errors (the provider's secrets scrubbed from what the back end said); a 2xx answer
 * is returned with its body unread.
 */
export async function postJson(pool: Pool, endpoint: Endpoint, path: string, body: unknown, options: PostOptions): Promise<UpstreamHttpResponse> {
  const { signal } = options;
  let response: UpstreamHttpResponse;
  try {
    response = await sendUpstream(pool, {
      method: 'POST',
      path,
      headers: options.stream
        ? { ...endpoint.headers, ...options.forwardHeaders, accept: 'text/event-stream' }
        : { ...endpoint.headers, ...options.forwardHeaders },
      body: JSON.stringify(body),
      signal,
    });
  } catch (error) {
    throw transportError(error, signal);
  }
  if (response.statusCode >= 400) {
    throw upstreamError(response.statusCode, await readCapped(response.body), response.headers, options.secrets);
  }
  return response;
}

/** Read a whole JSON answer: the parsed value and the bytes it came from (to relay them as they are). */
export async function readJson(response: UpstreamHttpResponse, signal: AbortSignal): Promise<{ parsed: unknown; bytes: Buffer }> {
  let bytes: Buffer;
  try {
    bytes = await response.body.bytes();
  } catch (error) {
    throw transportError(error, signal);
  }
  try {
    return { parsed: JSON.parse(bytes.toString('utf8')) as unknown, bytes };
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
  }
}
