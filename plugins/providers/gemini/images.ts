import { readFile } from 'node:fs/promises';
import type { Pool } from 'undici';
import { CallFetches, type ImageFetchConfig } from './fetch-urls.js';
import {
  failureBilled,
  GatewayError,
  postJson,
  readJson,
  type OperationHandler,
  type ProviderCallContext,
  type UpstreamRequest,
  type Usage,
  mergeHeaders,
  withinAttempt,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import {
  dimensionsOf,
  IMAGE_OPTIONS,
  imageRequestOf,
  imageUsage,
  parseDataUrl,
  type ImageDatum,
  type ImageInput,
  type ImageRequest,
} from '../../formats/openai-chat/images-canonical.js';
import { googleFailure, methodPath, type Endpoint } from './api.js';

type Json = Record<string, any>;

/**
 * Image output from Google's generateContent API (the image-capable Gemini models):
 *
 *   POST {base}/v1beta/models/{model}:generateContent
 *   {contents: [{role: 'user', parts: [{inlineData}…, {text: prompt}]}],
 *    generationConfig: {responseModalities: ['TEXT', 'IMAGE'], imageConfig: {aspectRatio}, seed}}
 *
 * Every `inlineData` part of the answer is one image, its base64 `data` the image's `b64_json`
 * (the route turns it into a data: URL when the client asked for `url`). Text parts are the
 * model's commentary and are not part of the image result.
 *
 * - `n`: the models answer one candidate, so `n` images are `n` calls, made together. The first
 *   that fails ends the others (their requests are closed, so the back end stops making images
 *   nobody will get), and the attempt fails with its error once all have ended.
 * - `size`: Gemini takes an aspect ratio, not pixels: `WxH` becomes the nearest ratio it knows
 *   and the call records the loss `size` unless the ratio is exact (`auto`: not sent).
 * - `seed` goes as generationConfig.seed; `negative_prompt`, `prompt_extend`, `watermark`,
 *   `mask` and the OpenAI settings (quality, style, background, output_format, …) have no
 *   counterpart: not sent, each named as a loss.
 * - Edits: each input image is an `inlineData` part before the prompt (an upload read from
 *   where it was spooled, a data: URL's bytes, an http(s) URL fetched through the guarded fetch).
 * - No image in the answer: a blocked prompt or a safety finish is a 400 (upstream_bad_request);
 *   anything else a retryable 502.
 */

const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];

/** The aspect ratio Gemini knows nearest to `WxH`, and whether it is exact. */
export function aspectRatioOf(size: string | undefined): { ratio: string; exact: boolean } | undefined {
  const dims = dimensionsOf(size);
  if (!dims) return undefined;
  const target = dims.width / dims.height;
  let best = RATIOS[0]!;
  let bestDistance = Infinity;
  for (const ratio of RATIOS) {
    const [w, h] = ratio.split(':').map(Number) as [number, number];
    const distance = Math.abs(Math.log(w / h) - Math.log(target));
    if (distance < bestDistance) {
      best = ratio;
      bestDistance = distance;
    }
  }
  return { ratio: best, exact: bestDistance < 1e-9 };
}

/** The provider's `imageFetch` settings (as the chat handler reads them), for http(s) input images. */
export type ImageFetchSettings = ImageFetchConfig;

async function inlineDataOf(input: ImageInput, param: string, fetches: CallFetches): Promise<Json> {
  if (input.kind === 'file') {
    const type = /^image\/[\w.+-]+$/.test(input.file.contentType) ? input.file.contentType : 'image/png';
    return { inlineData: { mimeType: type, data: (await readFile(input.file.path)).toString('base64') } };
  }
  const data = parseDataUrl(input.url);
  if (data) return { inlineData: { mimeType: data.mime, data: data.bytes.toString('base64') } };
  // Bounded with the call's other images, as a chat call's are (imageFetch.maxImages, maxTotalBytes).
  const fetched = await fetches.get(input.url, param);
  return { inlineData: { mimeType: fetched.mimeType, data: fetched.bytes.toString('base64') } };
}

/** The generateContent body for one image, and the names of what it could not carry. */
export async function toGenerateContent(request: ImageRequest, signal: AbortSignal, fetching: ImageFetchSettings = {}): Promise<{ body: Json; losses: string[] }> {
  const parts: Json[] = [];
  // The field the client gave an image in: `image` for one, `image[i]` for several (as the openai provider names it).
  const many = (request.images?.length ?? 0) > 1;
  const fetches = new CallFetches(fetching, signal);
  for (const [i, image] of (request.images ?? []).entries()) parts.push(await inlineDataOf(image, many ? `image[${i}]` : 'image', fetches));
  parts.push({ text: request.prompt });
  const generationConfig: Json = { responseModalities: ['TEXT', 'IMAGE'] };
  const losses: string[] = [];
  const ratio = aspectRatioOf(request.size);
  if (ratio) {
    generationConfig.imageConfig = { aspectRatio: ratio.ratio };
    if (!ratio.exact) losses.push('size');
  }
  if (request.seed !== undefined) generationConfig.seed = request.seed;
  for (const name of ['negative_prompt', 'prompt_extend', 'watermark', 'mask'] as const) if (request[name] !== undefined) losses.push(name);
  for (const name of IMAGE_OPTIONS) if (request.options[name] !== undefined) losses.push(name);
  return { body: { contents: [{ role: 'user', parts }], generationConfig }, losses };
}

/** The images of one GenerateContentResponse, and its token counts. */
export function imagesOf(parsed: unknown): { data: ImageDatum[]; tokens: { input?: unknown; output?: unknown; total?: unknown } } {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a GenerateContentResponse' }, retryable: true });
  }
  const answer = parsed as Json;
  const data: ImageDatum[] = [];
  const finishes: string[] = [];
  for (const candidate of Array.isArray(answer.candidates) ? (answer.candidates as Json[]) : []) {
    if (typeof candidate?.finishReason === 'string') finishes.push(candidate.finishReason);
    for (const part of (candidate?.content?.parts as Json[] | undefined) ?? []) {
      const inline = part?.inlineData;
      if (inline && typeof inline.data === 'string' && inline.data !== '') data.push({ b64_json: inline.data });
    }
  }
  if (data.length === 0) {
    const blocked = answer.promptFeedback?.blockReason;
    const refused = finishes.find((reason) => /SAFETY|PROHIBITED|BLOCK|RECITATION|SPII/.test(reason));
    if (typeof blocked === 'string' || refused) {
      throw new GatewayError('upstream_bad_request', { params: { detail: `the back end made no image (${typeof blocked === 'string' ? blocked : refused})` } });
    }
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered without an image' }, retryable: true });
  }
  const usage = answer.usageMetadata as Json | undefined;
  return { data, tokens: { input: usage?.promptTokenCount, output: usage?.candidatesTokenCount, total: usage?.totalTokenCount } };
}

/**
 * The results of calls made together, or the first failure: that one aborts `stop` (the others'
 * requests are closed) and is thrown once every call has ended, so that none outlives the attempt.
 */
async function allOrFirstFailure<T>(calls: Array<Promise<T>>, stop: AbortController, billed: (made: T[]) => Usage): Promise<T[]> {
  let failure: { error: unknown } | undefined;
  const settled = await Promise.allSettled(
    calls.map((call) =>
      call.catch((error: unknown) => {
        if (!failure) {
          failure = { error };
          stop.abort(error);
        }
        throw error;
      }),
    ),
  );
  if (failure) {
    // The images made before the failure are the back end's to bill: the call is charged them.
    const made = settled.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
    const error = failure.error;
    if (made.length > 0 && error !== null && typeof error === 'object') failureBilled(error, billed(made));
    throw error;
  }
  return settled.map((result) => (result as PromiseFulfilledResult<T>).value);
}

/** The images and tokens of the calls that answered. */
function usageOfAnswers(answers: ReadonlyArray<{ data: unknown[]; tokens: { input?: unknown; output?: unknown; total?: unknown } }>): Usage {
  let input = 0;
  let output = 0;
  let total = 0;
  let images = 0;
  for (const { data, tokens } of answers) {
    images += data.length;
    input += whole(tokens.input);
    output += whole(tokens.output);
    total += whole(tokens.total) || whole(tokens.input) + whole(tokens.output);
  }
  return imageUsage(images, { input, output, total });
}

function whole(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}

function handler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[], fetching: ImageFetchSettings) {
  return async (upstream: UpstreamRequest<'image'> | UpstreamRequest<'image-edit'>, ctx: ProviderCallContext) => {
    const request = imageRequestOf(upstream.body);
    const { body, losses } = await toGenerateContent(request, ctx.signal, fetching);
    const count = request.n ?? 1;
    // Several calls share a signal that also aborts when any of them fails, still the attempt's
    // (it learns their timings and the back end's request id through it).
    const stop = count > 1 ? new AbortController() : undefined;
    const signal = stop ? withinAttempt(ctx.signal, stop.signal) : ctx.signal;
    const call = async () => {
      const response = await postJson(pool, {
        path: methodPath(endpoint, upstream.model, false),
        headers: mergeHeaders(endpoint.headers, upstream.forwardHeaders),
        body,
        signal,
        secrets,
        failure: (status, text, headers) => googleFailure(status, text, headers, secrets),
      });
      return { status: response.statusCode, ...imagesOf((await readJson(response, signal)).parsed) };
    };
    const answers = stop ? await allOrFirstFailure(Array.from({ length: count }, call), stop, usageOfAnswers) : [await call()];
    const data = answers.flatMap((a) => a.data);
    if (losses.length > 0) {
      const named = Losses.of(ctx.request);
      for (const name of losses) named.add(name);
    }
    return {
      kind: 'json' as const,
      status: answers[0]!.status,
      body: { created: Math.floor(Date.now() / 1000), data },
      usage: usageOfAnswers(answers),
    };
  };
}

/** The `image` and `image-edit` operations of a gemini provider instance. */
export function imageOperations(
  pool: Pool,
  endpoint: Endpoint,
  secrets: readonly (string | undefined)[],
  imageFetch?: unknown,
): { image: OperationHandler<'image'>; 'image-edit': OperationHandler<'image-edit'> } {
  const serve = handler(pool, endpoint, secrets, (imageFetch ?? {}) as ImageFetchSettings);
  return { image: serve, 'image-edit': serve };
}
