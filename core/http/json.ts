import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors.js';
import { readCapped, sendUpstream, type UpstreamHttpResponse } from './client.js';
import { transportError, upstreamError } from './upstream.js';

/** One JSON call to a back end, as every provider of a JSON API makes it. */
export interface JsonCall {
  path: string;
  /** The provider's own headers (credentials, versions) and the hop headers of the call. */
  headers: Record<string, string>;
  body: unknown;
  signal: AbortSignal;
  /** Ask for an event stream rather than one JSON answer. */
  stream?: boolean;
  /** Strings that must never reach a client in an upstream's error message (the provider's keys). */
  secrets: readonly (string | undefined)[];
  /** A vendor's own reading of an error status; `upstreamError` by default. */
  failure?: (status: number, body: string, headers: Record<string, string | string[] | undefined>) => GatewayError;
}

/**
 * POST a JSON body: transport failures and error statuses become the gateway's errors (the
 * provider's secrets scrubbed from what the back end said); a 2xx answer comes back unread.
 */
export async function postJson(dispatcher: Dispatcher, call: JsonCall): Promise<UpstreamHttpResponse> {
  const { signal } = call;
  let response: UpstreamHttpResponse;
  try {
    response = await sendUpstream(dispatcher, {
      method: 'POST',
      path: call.path,
      headers: { ...call.headers, accept: call.stream ? 'text/event-stream' : 'application/json' },
      body: JSON.stringify(call.body),
      signal,
    });
  } catch (error) {
    throw transportError(error, signal);
  }
  if (response.statusCode >= 400) {
    const text = await readCapped(response.body);
    throw call.failure ? call.failure(response.statusCode, text, response.headers) : upstreamError(response.statusCode, text, response.headers, call.secrets);
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
