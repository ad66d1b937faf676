import type { Pool } from 'undici';
import { GatewayError, postJson, readJson, keepUpstreamBytes, tokenCount, type OperationHandler, type Usage, abortOf, mergeHeaders } from '../../../core/index.js';
import { moderationInputs } from '../../formats/openai-chat/moderations.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';

/**
 * Moderations against an OpenAI-compatible back end: POST {basePath}/moderations with the body
 * as the client sent it and the back end's model name. The answer must be a moderation object
 * with one result per input; its bytes are kept for a client of the same format. OpenAI reports
 * no usage for moderations (the call is priced per request); a back end that does report
 * `usage` (prompt_tokens / total_tokens) is metered by those input tokens.
 */
export function moderationHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'moderation'> {
  const path = `${endpoint.basePath}/moderations`;
  return async (request, context) => {
    const signal = abortOf(context);
    const body = { ...request.body, model: request.model };
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, signal, secrets });
    const { parsed, bytes } = await readJson(response, signal);
    if (!isModeration(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a moderation result' }, retryable: true });
    }
    const asked = moderationInputs(request.body.input).length;
    const got = (parsed.results as unknown[]).length;
    if (asked > 0 && got !== asked) {
      // A client pairs results with its inputs by position.
      throw new GatewayError('upstream_error', { params: { detail: `the back end answered ${got} result(s) for ${asked} input(s)` }, retryable: true });
    }
    const usage = moderationUsage(parsed.usage);
    const kept = keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT);
    return usage ? { kind: 'json', status: response.statusCode, body: kept, usage } : { kind: 'json', status: response.statusCode, body: kept };
  };
}

/** Input tokens a back end reported for a moderation call, if it did. */
export function moderationUsage(usage: unknown): Usage | undefined {
  if (usage === null || typeof usage !== 'object') return undefined;
  const { prompt_tokens, input_tokens, total_tokens } = usage as Record<string, unknown>;
  const input = tokenCount(prompt_tokens) ?? tokenCount(input_tokens) ?? tokenCount(total_tokens);
  if (input === undefined) return undefined;
  return { inputTokens: input, outputTokens: 0, totalTokens: tokenCount(total_tokens) ?? input };
}

/** An object whose `results` are objects each with a boolean `flagged`. */
function isModeration(value: unknown): value is Record<string, unknown> & { results: unknown[] } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const results = (value as { results?: unknown }).results;
  if (!Array.isArray(results)) return false;
  return results.every((r) => r !== null && typeof r === 'object' && typeof (r as { flagged?: unknown }).flagged === 'boolean');
}
