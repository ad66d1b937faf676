import type { Pool } from 'undici';
import {
  GatewayError,
  keepUpstreamBytes,
  postJson,
  readJson,
  translateEvents,
  type OperationHandler,
  abortOf,
  mergeHeaders,
} from '../../../core/index.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';
import { OpenAIEvents } from './events.js';

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

/** The events of a back end's Responses stream, in its own shape: an error is a `type: error` event, not a bare `{error}`. */
function responsesEvents(secrets: readonly (string | undefined)[]): OpenAIEvents<Json> {
  return new OpenAIEvents<Json>(
    secrets,
    isObject,
    (event) => FINAL.has(event.type as string) || event.type === 'error',
    (event) => typeof event.type !== 'string',
  );
}

export function responsesHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'responses'> {
  const path = `${endpoint.basePath}/responses`;
  return async (request, context) => {
    const signal = abortOf(context);
    const body: Json = { ...request.body, model: request.model };
    if (request.stream) body.stream = true;
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, signal, secrets, stream: request.stream });
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !type.includes('text/event-stream')) {
      const { parsed, bytes } = await readJson(response, signal);
      if (request.stream) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      if (!isObject(parsed) || !Array.isArray(parsed.output)) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a response object' }, retryable: true });
      }
      return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
    }
    return { kind: 'stream', status: response.statusCode, chunks: translateEvents(response.body, responsesEvents(secrets), signal) };
  };
}

export function compactHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'compact'> {
  const path = `${endpoint.basePath}/responses/compact`;
  return async (request, context) => {
    const signal = abortOf(context);
    const body: Json = { ...request.body, model: request.model };
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, signal, secrets });
    const { parsed, bytes } = await readJson(response, signal);
    if (!isObject(parsed) || !Array.isArray(parsed.output)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a compaction' }, retryable: true });
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
  };
}
