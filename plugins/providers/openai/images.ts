import { randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'undici';
import { GatewayError, mergeHeaders, postJson, readJson, type OperationHandler, type ProviderCallContext } from '../../../core/index.js';
import { fetchImage } from '../../../core/http/guarded-fetch.js';
import { extensionOf, postMultipart, type FormPart, type UploadedFile } from '../../../core/http/multipart.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import {
  IMAGE_OPTIONS,
  IMAGE_RESULT_EXTRAS,
  imageRequestOf,
  imageUsage,
  parseDataUrl,
  type ImageDatum,
  type ImageInput,
  type ImageRequest,
  type ImageResult,
} from '../../formats/openai-chat/images-canonical.js';
import type { Endpoint } from './api.js';

/**
 * Images against an OpenAI-compatible back end.
 *
 * - `image`: POST {basePath}/images/generations, JSON: model (the back end's name), prompt, n,
 *   size, response_format, and the OpenAI settings the client gave (quality, style, background,
 *   output_format, output_compression, moderation, user).
 * - `image-edit`: POST {basePath}/images/edits as multipart/form-data (what the images API
 *   takes): the same fields, `image` (or `image[]` for several) and `mask`. An uploaded file is
 *   streamed from where the gateway spooled it; a `data:` URL's bytes are sent as a file; an
 *   http(s) URL is fetched through the guarded fetch (public addresses only, 20 MiB, 10 s).
 *
 * The spec shape's `negative_prompt`, `prompt_extend`, `watermark` and `seed` have no
 * counterpart in the images API: they are not sent, and each is recorded as a named loss.
 * Usage: the images returned, plus the tokens the back end reports (GPT image models).
 */

const NOT_SENT = ['negative_prompt', 'prompt_extend', 'watermark', 'seed'] as const;

/** OpenAI's GPT image models (gpt-image-1, -1-mini, -1.5, chatgpt-image-…), after any path. */
const GPT_IMAGE = /(?:^|\/)(?:gpt-image|chatgpt-image)/i;

type Json = Record<string, unknown>;

/** The fields both operations send, as JSON values. */
function fieldsOf(request: ImageRequest, model: string): Json {
  const body: Json = { model, prompt: request.prompt };
  if (request.n !== undefined) body.n = request.n;
  if (request.size !== undefined) body.size = request.size;
  // GPT image models always answer base64 and refuse the field (400 unknown_parameter): the
  // client's choice is kept for the gateway's own conversion (a `url` asked is a data: URL).
  if (request.response_format !== undefined && !GPT_IMAGE.test(model)) body.response_format = request.response_format;
  for (const name of IMAGE_OPTIONS) if (request.options[name] !== undefined) body[name] = request.options[name];
  return body;
}

function recordLosses(request: ImageRequest, ctx: ProviderCallContext): void {
  const dropped = NOT_SENT.filter((name) => request[name] !== undefined);
  if (dropped.length === 0) return;
  const losses = Losses.of(ctx.request);
  for (const name of dropped) losses.add(name);
}

/** The back end's answer as the canonical result, or a 502 when it is not an image list. */
function resultOf(parsed: unknown): { result: ImageResult; usage: ReturnType<typeof imageUsage> } {
  const data = (parsed as { data?: unknown } | null)?.data;
  if (parsed === null || typeof parsed !== 'object' || !Array.isArray(data)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with an image list' }, retryable: true });
  }
  const images: ImageDatum[] = [];
  for (const item of data as Json[]) {
    const datum: ImageDatum = {};
    if (item && typeof item.url === 'string') datum.url = item.url;
    if (item && typeof item.b64_json === 'string') datum.b64_json = item.b64_json;
    if (datum.url === undefined && datum.b64_json === undefined) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered an image with neither url nor b64_json' }, retryable: true });
    }
    if (typeof item.revised_prompt === 'string') datum.revised_prompt = item.revised_prompt;
    images.push(datum);
  }
  // A call asks for at least one image: an empty list is no answer (another target may make it).
  if (images.length === 0) throw new GatewayError('upstream_error', { params: { detail: 'the back end answered no image' }, retryable: true });
  const created = (parsed as { created?: unknown }).created;
  const usage = (parsed as { usage?: { input_tokens?: unknown; output_tokens?: unknown; total_tokens?: unknown } }).usage;
  const result: ImageResult = { created: typeof created === 'number' ? created : Math.floor(Date.now() / 1000), data: images };
  const extras = parsed as Record<string, unknown>;
  for (const name of IMAGE_RESULT_EXTRAS) {
    const value = extras[name];
    if (name === 'usage' ? value !== null && typeof value === 'object' && !Array.isArray(value) : typeof value === 'string') (result as unknown as Record<string, unknown>)[name] = value;
  }
  return {
    result,
    usage: imageUsage(images.length, usage ? { input: usage.input_tokens, output: usage.output_tokens, total: usage.total_tokens } : undefined),
  };
}

export function imageHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'image'> {
  const urlPath = `${endpoint.basePath}/images/generations`;
  return async (upstream, ctx) => {
    const request = imageRequestOf(upstream.body);
    const response = await postJson(pool, {
      path: urlPath,
      headers: mergeHeaders(endpoint.headers, upstream.forwardHeaders),
      body: fieldsOf(request, upstream.model),
      signal: ctx.signal,
      secrets,
    });
    const { parsed } = await readJson(response, ctx.signal);
    const { result, usage } = resultOf(parsed);
    recordLosses(request, ctx);
    return { kind: 'json', status: response.statusCode, body: result, usage };
  };
}

/** Bytes held in memory (a data: URL, a fetched image) as a temporary file the form streams. */
interface Spooled {
  file: UploadedFile;
  remove(): Promise<void>;
}

async function spool(bytes: Buffer, mimeType: string, name: string): Promise<Spooled> {
  const file = path.join(os.tmpdir(), `switchyard-image-${randomUUID()}`);
  await writeFile(file, bytes);
  return {
    file: { kind: 'uploaded-file', path: file, filename: `${name}.${extensionOf(mimeType) ?? 'png'}`, contentType: mimeType, size: bytes.length },
    remove: () => rm(file, { force: true }).catch(() => undefined),
  };
}

/** One input image as a file to send: the upload itself, or its bytes spooled to a temporary file. */
async function fileOf(input: ImageInput, param: string, name: string, signal: AbortSignal, spooled: Spooled[]): Promise<UploadedFile> {
  if (input.kind === 'file') return input.file as UploadedFile;
  const data = parseDataUrl(input.url);
  const fetched = data ? { bytes: data.bytes, mimeType: data.mime } : await fetchImage(input.url, { param, signal });
  const made = await spool(fetched.bytes, fetched.mimeType, name);
  spooled.push(made);
  return made.file;
}

export function imageEditHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'image-edit'> {
  const urlPath = `${endpoint.basePath}/images/edits`;
  // The form sets its own content type; the JSON one of the endpoint's headers must not go.
  const { 'content-type': _json, ...headers } = endpoint.headers;
  return async (upstream, ctx) => {
    const request = imageRequestOf(upstream.body);
    const parts: FormPart[] = [];
    for (const [name, value] of Object.entries(fieldsOf(request, upstream.model))) {
      parts.push({ name, value: typeof value === 'string' ? value : JSON.stringify(value) });
    }
    const spooled: Spooled[] = [];
    try {
      const images = request.images ?? [];
      const many = images.length > 1;
      for (const [i, input] of images.entries()) {
        const file = await fileOf(input, many ? `image[${i}]` : 'image', `image-${i}`, ctx.signal, spooled);
        parts.push({ name: many ? 'image[]' : 'image', file });
      }
      if (request.mask) parts.push({ name: 'mask', file: await fileOf(request.mask, 'mask', 'mask', ctx.signal, spooled) });
      const response = await postMultipart(pool, {
        path: urlPath,
        headers: mergeHeaders(headers, upstream.forwardHeaders),
        parts,
        signal: ctx.signal,
        secrets,
      });
      const { parsed } = await readJson(response, ctx.signal);
      const { result, usage } = resultOf(parsed);
      recordLosses(request, ctx);
      return { kind: 'json', status: response.statusCode, body: result, usage };
    } finally {
      await Promise.all(spooled.map((s) => s.remove()));
    }
  };
}
