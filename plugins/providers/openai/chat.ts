import type { Dispatcher, Pool } from 'undici';
import {
  GatewayError,
  readSse,
  SseLineTooLong,
  scrub,
  transportError,
  upstreamError,
  type ChatChunk,
  type ChatResponse,
  type OperationHandler,
} from '../../../core/index.js';
import type { Endpoint } from './api.js';

const MAX_ERROR_BODY = 64 * 1024;

/** Read at most `limit` bytes of an error body, then drop the rest. */
export async function readCapped(body: Dispatcher.ResponseData['body'], limit = MAX_ERROR_BODY): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      if (size + buf.length > limit) {
        parts.push(buf.subarray(0, limit - size));
        break;
      }
      parts.push(buf);
      size += buf.length;
    }
  } catch {
    // a broken error body is still an error; what we have is enough
  } finally {
    body.destroy();
  }
  return Buffer.concat(parts).toString('utf8');
}

/**
 * Chat completions against an OpenAI-compatible back end. The body goes up as the client sent
 * it, with the back end's model name; a stream always asks for usage (the format hides the
 * usage chunk from a client that did not ask). Chunks are relayed as they arrive.
 */
export function chatHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'chat'> {
  const path = `${endpoint.basePath}/chat/completions`;
  return async (request, { signal }) => {
    const body: Record<string, unknown> = { ...request.body, model: request.model };
    if (request.stream) {
      body.stream = true;
      body.stream_options = { ...(request.body.stream_options ?? {}), include_usage: true };
    }
    let response: Dispatcher.ResponseData;
    try {
      response = await pool.request({
        method: 'POST',
        path,
        headers: request.stream
          ? { ...endpoint.headers, ...request.forwardHeaders, accept: 'text/event-stream' }
          : { ...endpoint.headers, ...request.forwardHeaders },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw transportError(error, signal);
    }
    if (response.statusCode >= 400) {
      throw upstreamError(response.statusCode, await readCapped(response.body), response.headers, secrets);
    }
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !type.includes('text/event-stream')) {
      let text: string;
      try {
        text = await response.body.text();
      } catch (error) {
        throw transportError(error, signal);
      }
      let parsed: ChatResponse;
      try {
        parsed = JSON.parse(text) as ChatResponse;
      } catch {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
      }
      if (request.stream) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      }
      return { kind: 'json', status: response.statusCode, body: parsed };
    }
    return { kind: 'stream', status: response.statusCode, chunks: chunksOf(response.body, secrets) };
  };
}

/** A chunk the canonical chat stream can carry: an object whose choices (if any) are objects. */
function isChunk(value: unknown): value is ChatChunk {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const choices = (value as { choices?: unknown }).choices;
  if (choices === undefined) return true;
  return Array.isArray(choices) && choices.every((c) => c !== null && typeof c === 'object' && !Array.isArray(c));
}

async function* chunksOf(body: Dispatcher.ResponseData['body'], secrets: readonly (string | undefined)[]): AsyncGenerator<ChatChunk> {
  let done = false;
  let finished = false;
  try {
    for await (const event of readSse(body)) {
      if (event.data === '[DONE]') {
        done = true;
        return;
      }
      let chunk: unknown;
      try {
        chunk = JSON.parse(event.data);
      } catch {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
      }
      const error = (chunk as { error?: { message?: unknown } } | null)?.error;
      if (error) {
        const message = typeof error.message === 'string' ? scrub(error.message, secrets) : 'stream error';
        throw new GatewayError('upstream_error', { params: { detail: message } });
      }
      if (!isChunk(chunk)) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
      if (chunk.choices?.some((c) => c.finish_reason)) finished = true;
      yield chunk;
    }
    done = true;
    // A stream that closes before any choice finished (and without [DONE]) was cut, not completed.
    if (!finished) throw new GatewayError('upstream_error', { params: { detail: 'the stream ended before the answer did' } });
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    if (error instanceof SseLineTooLong) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a stream line that is too long' } });
    throw transportError(error);
  } finally {
    if (!done) body.destroy();
  }
}
