import type { Pool } from 'undici';
import {
  GatewayError,
  keepUpstreamBytes,
  postJson,
  readJson,
  scrub,
  translateEvents,
  type OperationHandler,
  type ProviderCallContext,
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

/**
 * The events of a back end's Responses stream, in its own shape. Its failures (a `type: error`
 * event, or `response.failed`) are upstream_errors with the back end's message, scrubbed: before
 * the answer began the call can still go to another target; after, the client gets the gateway's
 * own `response.failed`, and the call is logged as failed, not as an answer.
 */
class ResponsesEvents extends OpenAIEvents<Json> {
  constructor(private readonly keys: readonly (string | undefined)[]) {
    super(keys, isObject, (event) => FINAL.has(event.type as string), (event) => typeof event.type !== 'string');
  }

  override push(data: unknown, event?: string, text = ''): Json[] {
    if (isObject(data) && (data.type === 'error' || data.type === 'response.failed')) {
      const error = data.type === 'error' ? data : isObject(data.response) && isObject(data.response.error) ? data.response.error : {};
      const message = typeof error.message === 'string' ? scrub(error.message, this.keys) : data.type;
      throw new GatewayError('upstream_error', { params: { detail: message } });
    }
    return super.push(data, event, text);
  }
}

/**
 * The body with the reasoning items a gateway made from another back end's answer left out (their
 * `encrypted_content` a tagged signature, `sy1.sig.`: a client replaying a conversation that began
 * elsewhere), named as a loss: OpenAI can read only the encrypted content it made. The same body
 * when it has none.
 */
function withoutOthersReasoning(body: Json, context: ProviderCallContext): Json {
  const input = body.input;
  if (!Array.isArray(input)) return body;
  const others = (item: unknown) => isObject(item) && item.type === 'reasoning' && typeof item.encrypted_content === 'string' && item.encrypted_content.startsWith('sy1.sig.');
  if (!input.some(others)) return body;
  const losses = (context.request.losses ??= []);
  if (!losses.includes('reasoning.other_back_end')) losses.push('reasoning.other_back_end');
  return { ...body, input: input.filter((item) => !others(item)) };
}

function responsesEvents(secrets: readonly (string | undefined)[]): OpenAIEvents<Json> {
  return new ResponsesEvents(secrets);
}

export function responsesHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'responses'> {
  const path = `${endpoint.basePath}/responses`;
  return async (request, context) => {
    const signal = abortOf(context);
    const body: Json = withoutOthersReasoning({ ...request.body, model: request.model }, context);
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
