import type { Pool } from 'undici';
import {
  GatewayError,
  postJson,
  readJson,
  keepUpstreamBytes,
  translateEvents,
  type ChatChunk,
  type ChatMessage,
  type ChatResponse,
  type OperationHandler,
} from '../../../core/index.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';
import { finishesAChoice, OpenAIEvents } from './events.js';

/**
 * Chat completions against an OpenAI-compatible back end. The body goes up as the client sent
 * it, with the back end's model name; a stream always asks for usage (the format hides the
 * usage chunk from a client that did not ask). Chunks are relayed as they arrive.
 */
export function chatHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'chat'> {
  const path = `${endpoint.basePath}/chat/completions`;
  return async (request, { signal }) => {
    const body: Record<string, unknown> = { ...request.body, model: request.model };
    const messages = withoutReasoning(request.body.messages);
    if (messages !== request.body.messages) body.messages = messages;
    if (request.stream) {
      body.stream = true;
      body.stream_options = { ...(request.body.stream_options ?? {}), include_usage: true };
    }
    const response = await postJson(pool, { path, headers: { ...endpoint.headers, ...request.forwardHeaders }, body, signal, secrets, stream: request.stream });
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !type.includes('text/event-stream')) {
      const { parsed: answer, bytes } = await readJson(response, signal);
      const parsed = answer as ChatResponse;
      if (request.stream) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      }
      // The format that speaks this shape sends these bytes as they came (no re-serialising).
      const isObject = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed);
      return { kind: 'json', status: response.statusCode, body: isObject ? keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) : parsed };
    }
    return { kind: 'stream', status: response.statusCode, chunks: translateEvents(response.body, new OpenAIEvents(secrets, isChunk, finishesAChoice), signal) };
  };
}

/**
 * The canonical form carries a model's earlier reasoning on assistant turns (from formats that
 * send thinking back, such as messages); chat completions has no field for it, so it stays here.
 * The array is copied only when a message has such a field.
 */
function withoutReasoning(messages: ChatMessage[]): ChatMessage[] {
  if (!Array.isArray(messages)) return messages;
  let out: ChatMessage[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (message.reasoning_content === undefined && message.reasoning_signature === undefined) continue;
    out ??= messages.slice();
    const { reasoning_content: _content, reasoning_signature: _signature, ...rest } = message;
    out[i] = rest as ChatMessage;
  }
  return out ?? messages;
}

/** A chunk the canonical chat stream can carry: an object whose choices (if any) are objects. */
function isChunk(value: unknown): value is ChatChunk {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const choices = (value as { choices?: unknown }).choices;
  if (choices === undefined) return true;
  return Array.isArray(choices) && choices.every((c) => c !== null && typeof c === 'object' && !Array.isArray(c));
}

