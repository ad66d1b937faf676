import type { Pool } from 'undici';
import {
  GatewayError,
  keepUpstreamBytes,
  markSentAsIs,
  postJson,
  readJson,
  translateEvents,
  type OperationHandler,
  type RequestContext,
  type UpstreamRequest,
  type UpstreamResponse,
  mergeHeaders,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { fromCanonicalRequest } from '../../formats/gemini/request.js';
import { fromGenerateContentResponse } from '../../formats/gemini/response.js';
import { googleFrame, relayedStream } from '../anthropic/relay.js';
import { googleFailure, methodPath, type Endpoint } from './api.js';
import { inlineFileDataUrls, inlineImageUrls, type ImageFetchConfig } from './fetch-urls.js';
import { GenerateContentStreamTranslator } from './stream.js';

/** The client wire format this back end speaks: a call in it goes up as the client sent it. */
export const GEMINI_FORMAT = 'gemini';

/**
 * An upstream's failed answer as the gateway's error. Google answers a wrong or missing API key
 * with 400 INVALID_ARGUMENT (reason API_KEY_INVALID, "API key not valid"): that is the gateway's
 * credentials failing, not the client's request, so it is mapped as a 401 would be.
 */
/** Models that refuse a function call handed back without its thought signature. */
const GEMINI_3 = /^(models\/)?gemini-3/i;

/**
 * Gemini 3 refuses a model turn whose function calls come back without the thought signature it
 * gave them (400 "Function call is missing a thought_signature"), and OpenAI-style clients do not
 * keep it. Such a turn's first call gets the sentinel Google documents for history it did not
 * make (`skip_thought_signature_validator`); a real signature is never replaced.
 */
export function signUnsignedCalls(contents: unknown): void {
  if (!Array.isArray(contents)) return;
  for (const content of contents as Array<{ role?: unknown; parts?: unknown }>) {
    if (content?.role !== 'model' || !Array.isArray(content.parts)) continue;
    const parts = content.parts as Array<Record<string, unknown>>;
    const calls = parts.filter((part) => part && typeof part === 'object' && 'functionCall' in part);
    if (calls.length === 0 || parts.some((part) => typeof part?.thoughtSignature === 'string' && part.thoughtSignature !== '')) continue;
    calls[0]!.thoughtSignature = 'skip_thought_signature_validator';
  }
}

function isResponse(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && (Array.isArray((value as { candidates?: unknown }).candidates) || 'promptFeedback' in value || 'usageMetadata' in value);
}

/**
 * Chat against Google's generateContent API: the canonical request is translated to a
 * generateContent body (POST {base}/v1beta/models/{model}:generateContent, the key only in
 * x-goog-api-key), the answer back to a canonical chat answer, and a stream
 * (:streamGenerateContent?alt=sse) event by event into canonical chunks (a stream ends with a
 * usage chunk; the openai-chat format hides it from a client that did not ask).
 */
export function chatHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[], imageFetch?: ImageFetchConfig): OperationHandler<'chat'> {
  return async (request, { signal, request: ctx }) => {
    if (request.source?.format === GEMINI_FORMAT) return passThrough(pool, endpoint, secrets, request, signal, ctx, imageFetch);
    // Image URLs are fetched (through the SSRF guard) and sent as inlineData bytes.
    const translated = fromCanonicalRequest(await inlineImageUrls(request.body, imageFetch, signal));
    if (GEMINI_3.test(request.model)) signUnsignedCalls(translated.value.contents);
    const response = await postJson(pool, {
      path: methodPath(endpoint, request.model, request.stream),
      headers: mergeHeaders(endpoint.headers, request.forwardHeaders),
      body: translated.value,
      signal,
      stream: request.stream,
      secrets,
      failure: (status, body, headers) => googleFailure(status, body, headers, secrets),
    });
    // Recorded once this back end answers: a failed attempt's changes are not the call's losses.
    const losses = Losses.of(ctx);
    for (const name of translated.losses) losses.add(name);
    const type = String(response.headers['content-type'] ?? '');
    if (request.stream) {
      if (!type.includes('text/event-stream')) {
        response.body.destroy();
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      }
      const chunks = translateEvents(response.body, new GenerateContentStreamTranslator(losses, secrets, request.model), signal);
      return { kind: 'stream', status: response.statusCode, chunks };
    }
    const { parsed } = await readJson(response, signal);
    if (!isResponse(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a GenerateContentResponse' }, retryable: true });
    }
    const answer = fromGenerateContentResponse(parsed);
    for (const name of answer.losses) losses.add(name);
    const body = answer.value;
    if (!body.model) body.model = request.model;
    return { kind: 'json', status: response.statusCode, body };
  };
}

/**
 * Same format in and out: a call that came in as a generateContent body goes up as the client
 * sent it (the model is in the URL: this back end's name), with the provider's own key and
 * configured headers and the hop headers; only an image `fileData` by http(s) URL is fetched
 * through the SSRF guard and sent as `inlineData`, as for a translated call. The answer is still read into canonical chat (usage,
 * finish, routing) but keeps the upstream's bytes (JSON) or each SSE event's text for the gemini
 * format to relay unchanged. Nothing is translated, so no loss is recorded.
 */
async function passThrough(
  pool: Pool,
  endpoint: Endpoint,
  secrets: readonly (string | undefined)[],
  request: UpstreamRequest<'chat'>,
  signal: AbortSignal,
  ctx: RequestContext,
  imageFetch: ImageFetchConfig | undefined,
): Promise<UpstreamResponse<'chat'>> {
  // The one change: an image by http(s) URL is fetched (through the SSRF guard) and sent as bytes.
  const sent = await inlineFileDataUrls(request.source!.body, imageFetch, signal);
  const response = await postJson(pool, {
    path: methodPath(endpoint, request.model, request.stream),
    headers: mergeHeaders(endpoint.headers, request.forwardHeaders),
    body: sent,
    signal,
    stream: request.stream,
    secrets,
    failure: (status, text, headers) => googleFailure(status, text, headers, secrets),
  });
  // The canonical reading's own notes are not losses here: the client gets the answer as it came.
  const unused = new Losses();
  if (request.stream) return relayedStream(response, new GenerateContentStreamTranslator(unused, secrets, request.model), signal, GEMINI_FORMAT, googleFrame, ctx);
  const { parsed, bytes } = await readJson(response, signal);
  if (!isResponse(parsed)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a GenerateContentResponse' }, retryable: true });
  }
  const body = fromGenerateContentResponse(parsed).value;
  if (!body.model) body.model = request.model;
  markSentAsIs(ctx, GEMINI_FORMAT);
  return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(body, bytes, GEMINI_FORMAT) };
}
