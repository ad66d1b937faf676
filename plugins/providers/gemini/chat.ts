import type { Pool } from 'undici';
import {
  EVENT_STREAM,
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
  ToolNames,
  GEMINI_TOOL_NAMES,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { fromCanonicalRequest, NO_SIGNATURE, readGeminiSignature } from '../../formats/gemini/request.js';
import { fromGenerateContentResponse } from '../../formats/gemini/response.js';
import { googleFrame, relayedStream } from '../anthropic/relay.js';
import { googleFailure, methodPath, type Endpoint } from './api.js';
import { inlineFileDataUrls, inlineImageUrls, type ImageFetchConfig } from './fetch-urls.js';
import { GenerateContentStreamTranslator } from './stream.js';

/** The client wire format this back end speaks: a call in it goes up as the client sent it. */
export const GEMINI_FORMAT = 'gemini';

/**
 * Models that refuse a function call handed back without its thought signature: Gemini 3 by its
 * own name, after any path (`models/`, Vertex's `publishers/google/models/`), and the moving
 * aliases (`gemini-pro-latest`, `gemini-flash-latest`), which name the newest models.
 */
export const GEMINI_3 = /(^|\/)gemini-(3|(pro|flash|flash-lite)-latest$)/i;

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
    calls[0]!.thoughtSignature = NO_SIGNATURE;
  }
}

type Json = Record<string, unknown>;

/** A part handed back with a thought signature this gateway tagged (see geminiSignature): another back end's, or Gemini's own. */
function taggedSignature(part: unknown): boolean {
  const signature = (part as Json | null)?.thoughtSignature;
  return typeof signature === 'string' && readGeminiSignature(signature).signature !== signature;
}

/**
 * A generateContent body as a Gemini-style client sent it, made acceptable to Google when an
 * earlier answer came from another type of back end (a fallback target): a thought signature
 * tagged with another maker is left out (Google could not verify it; a Gemini 3 model's call then
 * gets the sentinel, as for a translated call), and one tagged as Gemini's goes up untagged. The
 * body itself when nothing needed changing; else a copy, the changes named in `losses`.
 */
export function forGemini(body: Json, model: string, losses: Losses): Json {
  const contents = body.contents;
  if (!Array.isArray(contents) || !contents.some((c: Json | null) => Array.isArray(c?.parts) && (c.parts as unknown[]).some(taggedSignature))) return body;
  // Every part copied: the client's body stays as it came, for another target to be sent.
  const copied = (contents as Array<Json | null>).map((content) => {
    if (!Array.isArray(content?.parts)) return content;
    const parts = (content.parts as Json[]).map((part) => {
      if (!taggedSignature(part)) return part !== null && typeof part === 'object' ? { ...part } : part;
      const { signature, maker } = readGeminiSignature(String(part.thoughtSignature));
      if (maker === GEMINI_FORMAT) return { ...part, thoughtSignature: signature };
      losses.add('thoughtSignature.other_back_end');
      const { thoughtSignature: _foreign, ...rest } = part;
      return rest;
    });
    return { ...content, parts };
  });
  if (GEMINI_3.test(model)) signUnsignedCalls(copied);
  return { ...body, contents: copied };
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
    // Tool names Gemini refuses (one that starts with a digit, or past 64 characters) go up as names it takes.
    const names = ToolNames.of(request.body, GEMINI_TOOL_NAMES);
    // Image URLs are fetched (through the SSRF guard) and sent as inlineData bytes.
    const translated = fromCanonicalRequest(await inlineImageUrls(names ? names.request(request.body) : request.body, imageFetch, signal), request.model);
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
      if (!EVENT_STREAM.test(type)) {
        response.body.destroy();
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      }
      const translatedChunks = translateEvents(response.body, new GenerateContentStreamTranslator(losses, secrets, request.model), signal);
      const chunks = names ? names.stream(translatedChunks) : translatedChunks;
      // UNAVAILABLE and the like may come as an event before any content: read on to the answer.
      return { kind: 'stream', status: response.statusCode, chunks, primeToAnswer: true };
    }
    const { parsed } = await readJson(response, signal);
    if (!isResponse(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a GenerateContentResponse' }, retryable: true });
    }
    const answer = fromGenerateContentResponse(parsed);
    for (const name of answer.losses) losses.add(name);
    const body = names ? names.answer(answer.value) : answer.value;
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
  // And a thought signature another type of back end made is left out (see forGemini).
  const changes = new Losses();
  const source = request.source!;
  const sent = forGemini(await inlineFileDataUrls(source.body, imageFetch, signal), request.model, changes);
  const response = await postJson(pool, {
    path: methodPath(endpoint, request.model, request.stream),
    headers: mergeHeaders(endpoint.headers, request.forwardHeaders),
    body: sent,
    // Nothing changed: the client's own text goes up, not parsed and serialised again.
    raw: sent === source.body ? source.raw : undefined,
    signal,
    stream: request.stream,
    secrets,
    failure: (status, text, headers) => googleFailure(status, text, headers, secrets),
  });
  // Named once this back end answered (a failed attempt's changes are not the call's).
  if (changes.names.length > 0) {
    const losses = Losses.of(ctx);
    for (const name of changes.names) losses.add(name);
  }
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
