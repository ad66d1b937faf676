import { randomUUID } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Pool } from 'undici';
import {
  extensionOf,
  fetchImage,
  GatewayError,
  knownExtras,
  nameUnsent,
  postMultipart,
  readCapped,
  readJson,
  scrub,
  sendUpstream,
  transportError,
  upstreamError,
  type FormPart,
  type UploadedFile,
  type VideoBackend,
  type VideoCallContext,
  type VideoPoll,
  type VideoRequest,
  type VideoStatus,
} from '../../../core/index.js';
import type { Endpoint, SoraProviderConfig } from './api.js';

type Json = Record<string, any>;

/** The clip lengths and sizes OpenAI's video models take. */
export const SORA_SECONDS = [4, 8, 12] as const;

/** OpenAI's video states are the task engine's own; anything else is unknown (polling goes on). */
export function statusOf(raw: unknown): VideoStatus | 'unknown' {
  return raw === 'queued' || raw === 'in_progress' || raw === 'completed' || raw === 'failed' ? raw : 'unknown';
}

/** The one vendor field another format may carry that OpenAI's video API takes. */
const SORA_EXTRAS: ReadonlySet<string> = new Set(['size']);

/**
 * The form fields of a create call (files apart). `losses` names what OpenAI's video API has no
 * field for: `n` above 1 (one video a task), `fps`, `seed`.
 */
export function formFields(request: VideoRequest, losses: string[] = []): Record<string, string> {
  nameUnsent(request, ['n', 'fps', 'seed', 'imageTail', 'negativePrompt', 'aspectRatio', 'cfgScale', 'mode'], losses);
  // A size needs both sides: one alone is not sent.
  if ((request.width === undefined) !== (request.height === undefined) && typeof request.extra?.size !== 'string') losses.push(request.width === undefined ? 'height' : 'width');
  // Vendor fields another format carried along: OpenAI's video API takes only `size` of them.
  knownExtras(request, SORA_EXTRAS, losses);
  const fields: Record<string, string> = { model: request.model };
  if (request.prompt !== undefined) fields.prompt = request.prompt;
  if (request.duration !== undefined) fields.seconds = String(request.duration);
  const size = typeof request.extra?.size === 'string' ? request.extra.size : request.width && request.height ? `${request.width}x${request.height}` : undefined;
  if (size) fields.size = size;
  return fields;
}

/** Sniff an image's media type from its first bytes (PNG, JPEG, WebP), for base64 without a type. */
function sniff(bytes: Buffer): string {
  if (bytes.subarray(0, 8).toString('hex') === '89504e470d0a1a0a') return 'image/png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return 'image/jpeg';
  if (bytes.subarray(0, 4).toString('latin1') === 'RIFF' && bytes.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return 'application/octet-stream';
}

interface Spooled {
  file: UploadedFile;
  remove(): Promise<void>;
}

async function spool(bytes: Buffer, mediaType: string, filename?: string): Promise<Spooled> {
  const file = path.join(os.tmpdir(), `switchyard-video-ref-${randomUUID()}`);
  await writeFile(file, bytes);
  return {
    file: {
      kind: 'uploaded-file',
      path: file,
      filename: filename ?? `input_reference.${extensionOf(mediaType) ?? 'png'}`,
      contentType: mediaType,
      size: bytes.length,
    },
    remove: () => rm(file, { force: true }).catch(() => undefined),
  };
}

/** The reference image's bytes: the uploaded file, a data: URL or bare base64, or a fetched URL. */
async function referenceOf(request: VideoRequest, config: SoraProviderConfig, signal: AbortSignal): Promise<{ bytes: Buffer; mediaType: string; filename?: string } | undefined> {
  if (request.imageFile) return { bytes: request.imageFile.data, mediaType: request.imageFile.mediaType, filename: request.imageFile.filename };
  const image = request.image;
  if (!image) return undefined;
  if (/^https?:\/\//i.test(image)) {
    const fetched = await fetchImage(image, { param: 'image', signal, allowPrivate: config.allowPrivateImageHosts });
    return { bytes: fetched.bytes, mediaType: fetched.mimeType };
  }
  const data = /^data:([^;,]*)(?:;[^;,]*)*;base64,(.*)$/is.exec(image);
  const bytes = Buffer.from((data ? data[2]! : image).replace(/\s+/g, ''), 'base64');
  if (bytes.length === 0) throw new GatewayError('invalid_value', { param: 'image', params: { detail: 'the image holds no data' } });
  return { bytes, mediaType: data?.[1] || sniff(bytes) };
}

function videoError(value: unknown): { code: string; message: string } | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const e = value as Json;
  return { code: typeof e.code === 'string' ? e.code : 'video_generation_failed', message: typeof e.message === 'string' ? e.message : 'The video could not be generated.' };
}

/** One video object (create or retrieve) as a poll. */
export function pollOf(video: Json, secrets: readonly (string | undefined)[] = []): VideoPoll {
  const rawStatus = typeof video.status === 'string' ? video.status : String(video.status);
  const status = statusOf(video.status);
  const poll: VideoPoll = { status, rawStatus };
  if (typeof video.progress === 'number' && Number.isFinite(video.progress)) poll.progress = Math.max(0, Math.min(100, Math.round(video.progress)));
  const seconds = Number(video.seconds);
  if (Number.isFinite(seconds) && seconds > 0) poll.seconds = seconds;
  if (typeof video.size === 'string' && video.size) poll.size = video.size;
  if (status === 'completed') {
    poll.format = 'mp4';
    poll.progress = 100;
  }
  if (status === 'failed') {
    const error = videoError(video.error) ?? { code: 'video_generation_failed', message: 'The video could not be generated.' };
    poll.error = { code: error.code, message: scrub(error.message, secrets) };
  }
  return poll;
}

function isVideo(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && typeof (value as Json).id === 'string' && (value as Json).id !== '';
}

export interface SoraBackendOptions {
  pool: Pool;
  endpoint: Endpoint;
  config: SoraProviderConfig;
}

/** OpenAI's `/v1/videos` as a VideoBackend: multipart create, retrieve, content download. */
export function soraBackend({ pool, endpoint, config }: SoraBackendOptions): VideoBackend {
  const secrets = [config.apiKey, ...Object.values(config.headers ?? {})];
  const videos = `${endpoint.basePath}/videos`;

  async function get(urlPath: string, accept: string, ctx: VideoCallContext, range?: string) {
    let response;
    try {
      const headers = range ? { ...endpoint.headers, accept, range } : { ...endpoint.headers, accept };
      response = await sendUpstream(pool, { method: 'GET', path: urlPath, headers, signal: ctx.signal });
    } catch (error) {
      throw transportError(error, ctx.signal);
    }
    if (response.statusCode === 416) {
      // A range past the video: its length (`bytes */N`) is what a player reads to ask again.
      await readCapped(response.body);
      const size = response.headers['content-range'];
      const length = typeof size === 'string' && /^bytes \*\/\d+$/.test(size) ? size : undefined;
      throw new GatewayError('range_not_satisfiable', { params: { detail: length ?? range ?? '' }, ...(length ? { headers: { 'content-range': length } } : {}) });
    }
    if (response.statusCode >= 400) {
      const text = await readCapped(response.body);
      throw upstreamError(response.statusCode, text, response.headers, secrets);
    }
    return response;
  }

  return {
    oneVideo: true,
    estimateSeconds(request) {
      return request.duration ?? 4;
    },

    async submit(request, ctx) {
      const parts: FormPart[] = Object.entries(formFields(request, ctx.losses)).map(([name, value]) => ({ name, value }));
      const reference = await referenceOf(request, config, ctx.signal);
      const spooled = reference ? await spool(reference.bytes, reference.mediaType, reference.filename) : undefined;
      try {
        if (spooled) parts.push({ name: 'input_reference', file: spooled.file });
        const response = await postMultipart(pool, { path: videos, headers: endpoint.headers, parts, signal: ctx.signal, secrets });
        const { parsed } = await readJson(response, ctx.signal);
        if (!isVideo(parsed)) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a video object' }, retryable: true });
        const poll = pollOf(parsed, secrets);
        return {
          vendorTaskId: parsed.id as string,
          status: poll.status === 'unknown' ? 'queued' : poll.status,
          rawStatus: poll.rawStatus,
          ...(poll.seconds ? { seconds: poll.seconds } : {}),
        };
      } finally {
        await spooled?.remove();
      }
    },

    async poll(vendorTaskId, ctx) {
      let response;
      try {
        response = await get(`${videos}/${encodeURIComponent(vendorTaskId)}`, 'application/json', ctx);
      } catch (error) {
        // The vendor no longer has the video (deleted, or past its retention): nothing more will come.
        if (error instanceof GatewayError && error.upstreamStatus === 404) {
          return { status: 'failed', rawStatus: 'not_found', error: { code: 'not_found', message: 'The back end no longer has this video.' } };
        }
        throw error;
      }
      const { parsed } = await readJson(response, ctx.signal);
      if (!isVideo(parsed)) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a video object' }, retryable: true });
      return pollOf(parsed, secrets);
    },

    async content(vendorTaskId, ctx) {
      let response;
      try {
        response = await get(`${videos}/${encodeURIComponent(vendorTaskId)}/content`, 'application/binary', ctx, ctx.range);
      } catch (error) {
        // A finished video the vendor no longer serves: past its retention, or deleted.
        if (error instanceof GatewayError && (error.upstreamStatus === 404 || error.upstreamStatus === 410)) {
          throw new GatewayError('upstream_error', {
            params: { detail: `the back end no longer has this video's content (HTTP ${error.upstreamStatus}): it has expired or was deleted` },
            upstreamStatus: error.upstreamStatus,
          });
        }
        throw error;
      }
      const type = response.headers['content-type'];
      const length = Number(response.headers['content-length']);
      const range = response.headers['content-range'];
      // A part only when one was asked for and the back end says which bytes it is.
      const partial = response.statusCode === 206 && !!ctx.range && typeof range === 'string';
      if (response.statusCode === 206 && !partial) {
        response.body.destroy();
        throw new GatewayError('upstream_error', { params: { detail: 'the back end answered a part of the video that cannot be served as asked (HTTP 206)' } });
      }
      return {
        status: partial ? 206 : 200,
        contentType: typeof type === 'string' && type ? type : 'video/mp4',
        ...(Number.isFinite(length) && length >= 0 && response.headers['content-length'] !== undefined ? { contentLength: length } : {}),
        ...(partial ? { contentRange: range } : {}),
        acceptsRanges: partial || /\bbytes\b/i.test(String(response.headers['accept-ranges'] ?? '')),
        body: response.body,
        destroy: () => response.body.destroy(),
      };
    },
  };
}
