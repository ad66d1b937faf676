import { randomBytes } from 'node:crypto';
import type { Pool } from 'undici';
import { GatewayError, postJson, readJson, tokenCount, type OperationHandler, type Usage, abortOf, mergeHeaders } from '../../../core/index.js';
import { documentObject, type RerankResponse, type RerankResult } from '../../formats/openai-chat/rerank.js';
import type { Endpoint } from './api.js';

/**
 * Rerank against a Cohere- or Jina-compatible back end (Cohere v1/v2, Jina, vLLM, TEI-style
 * `/rerank`): POST to `rerankPath` with the body as the client sent it and the back end's model
 * name. `rerankPath` unset or without a leading slash is relative to the base URL
 * ({basePath}/rerank by default); with a leading slash it is a path from the origin
 * (`/v2/rerank` for Cohere's v2 on a `/v1` base URL).
 *
 * The answer's `results[]` (`index`, `relevance_score` — or `score` —, `document` as a string
 * or an object) become the spec's result, `document` always an object. Usage: tokens the back
 * end reports (Jina's `usage.total_tokens`, `usage.prompt_tokens`, `meta.tokens.input_tokens`,
 * `meta.billed_units.input_tokens`) are metered as input tokens; Cohere's search units are not
 * tokens and are left to the model's `perRequest` price (the units stay in `meta.billed_units`).
 */
export function rerankPathOf(endpoint: Endpoint, rerankPath: string | undefined): string {
  const path = rerankPath ?? 'rerank';
  return path.startsWith('/') ? path : `${endpoint.basePath}/${path}`;
}

export function rerankHandler(pool: Pool, endpoint: Endpoint, rerankPath: string | undefined, secrets: readonly (string | undefined)[]): OperationHandler<'rerank'> {
  const path = rerankPathOf(endpoint, rerankPath);
  return async (request, context) => {
    const signal = abortOf(context);
    const body = { ...request.body, model: request.model };
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, request.forwardHeaders), body, signal, secrets });
    const { parsed } = await readJson(response, signal);
    const documents = Array.isArray(request.body.documents) ? request.body.documents.length : 0;
    const result = rerankResultOf(parsed, documents);
    const usage = rerankUsage(parsed);
    if (usage && result.meta.tokens === undefined) result.meta.tokens = { input_tokens: usage.inputTokens, output_tokens: 0 };
    return usage ? { kind: 'json', status: response.statusCode, body: result, usage } : { kind: 'json', status: response.statusCode, body: result };
  };
}

function upstreamFailure(detail: string): GatewayError {
  return new GatewayError('upstream_error', { params: { detail }, retryable: true });
}

/** A Cohere/Jina rerank answer as the spec's rerank result; anything else is a 502. */
export function rerankResultOf(parsed: unknown, documents: number): RerankResponse {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw upstreamFailure('the back end did not answer with a rerank result');
  const answer = parsed as { id?: unknown; results?: unknown; meta?: unknown };
  if (!Array.isArray(answer.results)) throw upstreamFailure('the back end did not answer with a rerank result');
  // Each document is ranked once: a second result for one would rank it twice and leave another out.
  const seen = new Set<number>();
  const results: RerankResult[] = answer.results.map((item: unknown) => {
    const r = (item ?? {}) as { index?: unknown; relevance_score?: unknown; score?: unknown; document?: unknown };
    const score = r.relevance_score ?? r.score;
    if (typeof r.index !== 'number' || !Number.isInteger(r.index) || r.index < 0 || (documents > 0 && r.index >= documents)) {
      throw upstreamFailure(`the back end answered a result for a document that does not exist (${JSON.stringify(r.index)})`);
    }
    if (seen.has(r.index)) throw upstreamFailure(`the back end answered two results for the document with the index ${r.index}`);
    seen.add(r.index);
    if (typeof score !== 'number' || !Number.isFinite(score)) throw upstreamFailure('the back end answered a result without a relevance score');
    const out: RerankResult = { index: r.index, relevance_score: score };
    const document = documentObject(r.document);
    if (document) out.document = document;
    return out;
  });
  const meta = answer.meta !== null && typeof answer.meta === 'object' && !Array.isArray(answer.meta) ? { ...(answer.meta as Record<string, unknown>) } : {};
  const id = typeof answer.id === 'string' && answer.id ? answer.id : `rerank-${randomBytes(12).toString('hex')}`;
  return { id, results, meta };
}

/** Tokens a rerank back end reported, if any (search units are not tokens). */
export function rerankUsage(parsed: unknown): Usage | undefined {
  const answer = (parsed ?? {}) as { usage?: Record<string, unknown>; meta?: { tokens?: Record<string, unknown>; billed_units?: Record<string, unknown> } };
  const input =
    tokenCount(answer.usage?.prompt_tokens) ??
    tokenCount(answer.usage?.total_tokens) ??
    tokenCount(answer.meta?.tokens?.input_tokens) ??
    tokenCount(answer.meta?.billed_units?.input_tokens);
  if (input === undefined) return undefined;
  return { inputTokens: input, outputTokens: 0, totalTokens: input };
}
