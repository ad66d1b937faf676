import type { Pool } from 'undici';
import {
  EVENT_STREAM,
  GatewayError,
  postJson,
  readJson,
  keepUpstreamBytes,
  translateEvents,
  type OperationHandler,
  abortOf,
  mergeHeaders,
} from '../../../core/index.js';
import type { CompletionResponse } from '../../formats/openai-chat/completions.js';
import { clientText, OPENAI_FORMAT, type Endpoint } from './api.js';
import { finishesAChoice, OpenAIEvents } from './events.js';

/**
 * Text completions against an OpenAI-compatible back end: POST {basePath}/completions with the
 * body as the client sent it and the back end's model name. A stream always asks for usage (the
 * format hides the usage chunk from a client that did not ask). The answer's bytes (whole, or
 * each event's data) are kept, so a client of the same format gets them as they came.
 */
export function completionHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'completion'> {
  const path = `${endpoint.basePath}/completions`;
  return async (request, context) => {
    const signal = abortOf(context);
    // No max_tokens: the API's default of 16 asked for in so many words, since a compatible server
    // may default to no limit (llama.cpp) while rate limits and budgets reserved 16.
    const limit = request.body.max_tokens === undefined || request.body.max_tokens === null ? { max_tokens: 16 } : undefined;
    // The client's own text where no tap replaced its body; else the body with this back end's changes.
    const raw = clientText(request, limit);
    let body: Record<string, unknown> | undefined;
    if (raw === undefined) {
      body = { ...request.body, ...limit, model: request.model };
      if (request.stream) {
        body.stream = true;
        body.stream_options = { ...((request.body.stream_options as object | null | undefined) ?? {}), include_usage: true };
      }
    }
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, raw, signal, secrets, stream: request.stream });
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !EVENT_STREAM.test(type)) {
      const { parsed, bytes } = await readJson(response, signal);
      if (request.stream) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      if (!isCompletion(parsed)) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a text completion' }, retryable: true });
      }
      return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
    }
    return { kind: 'stream', status: response.statusCode, chunks: translateEvents(response.body, new OpenAIEvents(secrets, isCompletion, finishesAChoice), signal) };
  };
}

/** An object whose `choices` is an array of objects: what the format can render. */
function isCompletion(value: unknown): value is CompletionResponse {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const choices = (value as { choices?: unknown }).choices;
  return Array.isArray(choices) && choices.every((c) => c !== null && typeof c === 'object' && !Array.isArray(c));
}

