import type { Pool } from 'undici';
import {
  GatewayError,
  keepUpstreamBytes,
  postJson,
  readJson,
  scrub,
  SseLineTooLong,
  SseParser,
  transportError,
  type OperationHandler,
  type UpstreamBody,
} from '../../../core/index.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';

/**
 * The Responses API of a back end that has it (`responsesApi: true`): POST {basePath}/responses
 * and {basePath}/responses/compact with the body as the client sent it and the back end's model
 * name. Answers are parsed (for usage and conversation state) and their bytes kept, so an OpenAI
 * client gets exactly what the back end sent: the JSON body, and each stream event's data line.
 * `previous_response_id` goes up as it is when this back end made that response (the gateway's
 * conversation tap decides; see the openai-chat format's responses/history.ts).
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The events that end a Responses stream. */
const FINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

function eventOf(data: string, secrets: readonly (string | undefined)[]): Json | 'done' {
  if (data === '[DONE]') return 'done';
  let event: unknown;
  try {
    event = JSON.parse(data);
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
  }
  if (!isObject(event)) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
  // A bare `{"error": ...}` (not the protocol's `type: error` event) is a failure the protocol does not frame.
  const error = event.error as { message?: unknown } | undefined;
  if (error && typeof event.type !== 'string') {
    const message = typeof error.message === 'string' ? scrub(error.message, secrets) : 'stream error';
    throw new GatewayError('upstream_error', { params: { detail: message } });
  }
  return keepUpstreamBytes(event, data, OPENAI_FORMAT);
}

/** The back end's SSE as Responses events (objects with their data text kept), as they arrive. */
async function* eventsOf(body: UpstreamBody, secrets: readonly (string | undefined)[], signal: AbortSignal): AsyncGenerator<Json> {
  let done = false;
  let finished = false;
  const parser = new SseParser();
  try {
    for await (const bytes of body) {
      const events = parser.push(bytes);
      for (let i = 0; i < events.length; i++) {
        const event = eventOf(events[i]!.data, secrets);
        if (event === 'done') {
          done = true;
          return;
        }
        if (FINAL.has(event.type as string) || event.type === 'error') finished = true;
        yield event;
      }
    }
    for (const raw of parser.end()) {
      const event = eventOf(raw.data, secrets);
      if (event === 'done') break;
      if (FINAL.has(event.type as string) || event.type === 'error') finished = true;
      yield event;
    }
    done = true;
    if (!finished) throw new GatewayError('upstream_error', { params: { detail: 'the stream ended before the answer did' } });
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    if (error instanceof SseLineTooLong) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a stream line that is too long' } });
    throw transportError(error, signal);
  } finally {
    if (!done) body.destroy();
  }
}

export function responsesHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'responses'> {
  const path = `${endpoint.basePath}/responses`;
  return async (request, { signal }) => {
    const body: Json = { ...request.body, model: request.model };
    if (request.stream) body.stream = true;
    const response = await postJson(pool, { path, headers: { ...endpoint.headers, ...request.forwardHeaders }, body, signal, secrets, stream: request.stream });
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !type.includes('text/event-stream')) {
      const { parsed, bytes } = await readJson(response, signal);
      if (request.stream) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      if (!isObject(parsed) || !Array.isArray(parsed.output)) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a response object' }, retryable: true });
      }
      return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
    }
    return { kind: 'stream', status: response.statusCode, chunks: eventsOf(response.body, secrets, signal) };
  };
}

export function compactHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'compact'> {
  const path = `${endpoint.basePath}/responses/compact`;
  return async (request, { signal }) => {
    const body: Json = { ...request.body, model: request.model };
    const response = await postJson(pool, { path, headers: { ...endpoint.headers, ...request.forwardHeaders }, body, signal, secrets });
    const { parsed, bytes } = await readJson(response, signal);
    if (!isObject(parsed) || !Array.isArray(parsed.output)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a compaction' }, retryable: true });
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
  };
}
