import { readFile } from 'node:fs/promises';
import type { Pool } from 'undici';
import { GatewayError, mergeHeaders, postJson, readJson, upstreamError, upstreamErrorOf as errorOf, type OperationHandler, type ProviderCallContext } from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import {
  IMAGE_OPTIONS,
  imageRequestOf,
  imageUsage,
  type ImageDatum,
  type ImageInput,
  type ImageRequest,
  type ImageResult,
} from '../../formats/openai-chat/images-canonical.js';
import { multimodalPath, type Endpoint } from './api.js';

type Json = Record<string, any>;

/**
 * The canonical image request as DashScope's multimodal generation body:
 *
 *   {model, input: {messages: [{role: 'user', content: [{image}…, {text: prompt}]}]},
 *    parameters: {negative_prompt, prompt_extend, watermark, size: 'W*H', n, seed}}
 *
 * Input images go as they are when they are URLs (http(s) or data:, both of which DashScope
 * takes); an uploaded file is sent as a data: URL (DashScope's body is JSON). `size: auto` is
 * DashScope's default and is not sent. What DashScope has no field for is not sent and is named
 * as a loss: `mask`, and the OpenAI settings quality, style, background, output_format,
 * output_compression, moderation, input_fidelity, user.
 */
export async function toDashScope(request: ImageRequest, model: string): Promise<{ body: Json; losses: string[] }> {
  const content: Json[] = [];
  for (const image of request.images ?? []) content.push({ image: await imageValue(image) });
  content.push({ text: request.prompt });
  const parameters: Json = {};
  if (request.negative_prompt !== undefined) parameters.negative_prompt = request.negative_prompt;
  if (request.prompt_extend !== undefined) parameters.prompt_extend = request.prompt_extend;
  if (request.watermark !== undefined) parameters.watermark = request.watermark;
  if (request.size !== undefined && request.size !== 'auto') parameters.size = request.size.replace('x', '*');
  if (request.n !== undefined) parameters.n = request.n;
  if (request.seed !== undefined) parameters.seed = request.seed;
  const losses: string[] = [];
  if (request.mask) losses.push('mask');
  for (const name of IMAGE_OPTIONS) if (request.options[name] !== undefined) losses.push(name);
  return { body: { model, input: { messages: [{ role: 'user', content }] }, parameters }, losses };
}

async function imageValue(input: ImageInput): Promise<string> {
  if (input.kind === 'url') return input.url;
  const bytes = await readFile(input.file.path);
  const type = /^image\/[\w.+-]+$/.test(input.file.contentType) ? input.file.contentType : 'image/png';
  return `data:${type};base64,${bytes.toString('base64')}`;
}

/**
 * DashScope's answer as the canonical image result: every `image` item of every choice's
 * message content, in order, as a URL (DashScope answers with URLs to its object storage, valid
 * for a limited time). A `text` item beside them is their revised prompt. An answer with no
 * image is a 502.
 */
export function fromDashScope(parsed: unknown): { result: ImageResult; usage: ReturnType<typeof imageUsage> } {
  const choices = (parsed as Json | null)?.output?.choices;
  if (!Array.isArray(choices)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with output.choices' }, retryable: true });
  }
  const data: ImageDatum[] = [];
  for (const choice of choices as Json[]) {
    const content = choice?.message?.content;
    if (!Array.isArray(content)) continue;
    const text = content.find((item: Json) => typeof item?.text === 'string')?.text as string | undefined;
    for (const item of content as Json[]) {
      if (typeof item?.image !== 'string') continue;
      data.push(text === undefined ? { url: item.image } : { url: item.image, revised_prompt: text });
    }
  }
  if (data.length === 0) throw new GatewayError('upstream_error', { params: { detail: 'the back end answered without an image' }, retryable: true });
  const usage = (parsed as Json).usage as Json | undefined;
  return {
    result: { created: Math.floor(Date.now() / 1000), data },
    usage: imageUsage(data.length, usage ? { input: usage.input_tokens, output: usage.output_tokens, total: usage.total_tokens } : undefined),
  };
}

function record(ctx: ProviderCallContext, names: readonly string[]): void {
  if (names.length === 0) return;
  const losses = Losses.of(ctx.request);
  for (const name of names) losses.add(name);
}

/** DashScope's codes that say the account cannot pay (not the request's fault): another target may answer. */
const OUT_OF_CREDIT = new Set(['Arrearage', 'AllocationQuota.FreeTierOnly']);

/** A failed DashScope answer as the gateway's error: its billing codes as the account's, the rest as every provider's. */
function dashscopeFailure(status: number, text: string, headers: Record<string, string | string[] | undefined>, secrets: readonly (string | undefined)[]): GatewayError {
  const { code } = errorOf(text);
  if (code !== undefined && OUT_OF_CREDIT.has(code)) {
    return new GatewayError('upstream_quota_exhausted', { retryable: true, upstreamStatus: status, headers: { 'x-should-retry': 'false' } });
  }
  return upstreamError(status, text, headers, secrets);
}

/**
 * `image` and `image-edit` against DashScope: POST {base}/api/v1/services/aigc/multimodal-generation/generation
 * with `Authorization: Bearer <apiKey>`. DashScope's errors (`{code, message, request_id}`) are
 * mapped as every provider's are: a refused key (401/403) is a 502, a 400 keeps its message
 * scrubbed, 429 is a 429, 5xx a retryable 502.
 */
export function dashscopeImages(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'image'> & OperationHandler<'image-edit'> {
  const path = multimodalPath(endpoint);
  return async (upstream, ctx) => {
    const request = imageRequestOf(upstream.body);
    const { body, losses } = await toDashScope(request, upstream.model);
    const response = await postJson(pool, { path, headers: mergeHeaders(endpoint.headers, upstream.forwardHeaders), body, signal: ctx.signal, secrets, failure: (status, text, headers) => dashscopeFailure(status, text, headers, secrets) });
    const { parsed } = await readJson(response, ctx.signal);
    const { result, usage } = fromDashScope(parsed);
    record(ctx, losses);
    return { kind: 'json', status: response.statusCode, body: result, usage };
  };
}
