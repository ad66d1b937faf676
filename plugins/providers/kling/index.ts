import { createHmac } from 'node:crypto';
import type { Dispatcher } from 'undici';
import {
  defineProvider,
  GatewayError,
  knownExtras,
  nameUnsent,
  readCapped,
  redactSecrets,
  sendUpstream,
  transportError,
  upstreamError,
  videoProvider,
  type ProviderConfig,
  type VideoBackend,
  type VideoCallContext,
  type VideoPoll,
  type VideoRequest,
} from '../../../core/index.js';

export interface KlingProviderConfig extends ProviderConfig {
  baseUrl: string;
  accessKey: string;
  secretKey: string;
  /** Lifetime of each signed token, seconds (Kling's examples: 1800). */
  tokenTtlSeconds: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number };
}

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url');
}

/**
 * Kling's API token: a JWT signed HS256 with the secret key, `iss` the access key, valid from
 * five seconds ago (clock skew) until `ttl` seconds from now.
 */
export function klingToken(accessKey: string, secretKey: string, nowSeconds = Math.floor(Date.now() / 1000), ttl = 1800): string {
  const header = base64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' }));
  const payload = base64url(JSON.stringify({ iss: accessKey, exp: nowSeconds + ttl, nbf: nowSeconds - 5 }));
  const signature = createHmac('sha256', secretKey).update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${signature}`;
}

/** Kling takes an image as a URL or as bare base64 (no `data:` prefix). */
function klingImage(image: string): string {
  const data = /^data:[^,]*;base64,(.*)$/s.exec(image);
  return data ? data[1]! : image;
}

/** submitted / processing / succeed / failed: Kling's four states; anything else is unknown (polling goes on). */
export function mapKlingStatus(raw: unknown): VideoPoll['status'] {
  switch (raw) {
    case 'submitted':
      return 'queued';
    case 'processing':
      return 'in_progress';
    case 'succeed':
      return 'completed';
    case 'failed':
      return 'failed';
    default:
      return 'unknown';
  }
}

interface KlingEnvelope {
  code?: unknown;
  message?: unknown;
  request_id?: unknown;
  data?: {
    task_id?: unknown;
    task_status?: unknown;
    task_status_msg?: unknown;
    task_result?: { videos?: Array<{ id?: unknown; url?: unknown; duration?: unknown }> };
  } | null;
}

/**
 * The HTTP status Kling pairs with one of its codes, for an answer that carries a code but no
 * error status: 1000-1004 authentication (401), 1103 no access (403), 1100-1102 the account and
 * 1302-1304 the rate (429), 1202-1203 not found (404), 5000 and up its own failures (500,
 * 5001 unavailable: 503), anything else a request problem (400).
 */
export function klingStatusOf(code: number | undefined): number {
  if (code === undefined) return 502;
  if (code >= 1000 && code < 1100) return 401;
  if (code === 1103) return 403;
  if ((code >= 1100 && code < 1200) || (code >= 1302 && code < 1400)) return 429;
  if (code === 1202 || code === 1203) return 404;
  if (code >= 5000) return code === 5001 ? 503 : 500;
  return 400;
}

/** Kling makes 5 s or 10 s videos only. */
const KLING_DURATIONS = [5, 10] as const;

/** The allowed Kling duration nearest to `seconds` (ties go up). */
export function klingDuration(seconds: number): 5 | 10 {
  return seconds < 7.5 ? 5 : 10;
}

/** Fields of Kling's submit body a format may carry in `extra`. */
const KLING_EXTRAS = new Set(['camera_control', 'static_mask', 'dynamic_masks']);

/**
 * The Kling body of a canonical request: text2video without an image, image2video with one (a
 * URL or base64 `image`, or an uploaded `imageFile`, sent as bare base64). `losses` names what
 * Kling cannot take as asked (`duration`, moved to 5 or 10; `n` above 1: Kling makes one video a
 * task; `fps` and `seed`, which it has no field for).
 */
export function klingBody(request: VideoRequest, losses: string[] = []): { kind: 'text2video' | 'image2video'; body: Record<string, unknown> } {
  const kind = request.image || request.imageFile ? 'image2video' : 'text2video';
  const body: Record<string, unknown> = { model_name: request.model };
  if (request.prompt !== undefined) body.prompt = request.prompt;
  if (request.negativePrompt !== undefined) body.negative_prompt = request.negativePrompt;
  if (request.image) body.image = klingImage(request.image);
  else if (request.imageFile) body.image = request.imageFile.data.toString('base64');
  if (request.imageTail) body.image_tail = klingImage(request.imageTail);
  if (request.mode !== undefined) body.mode = request.mode;
  if (request.cfgScale !== undefined) body.cfg_scale = request.cfgScale;
  // Kling takes the length as text, "5" or "10": another length becomes the nearest of them.
  if (request.duration !== undefined) {
    const duration = klingDuration(request.duration);
    if (!(KLING_DURATIONS as readonly number[]).includes(request.duration)) losses.push('duration');
    body.duration = String(duration);
  }
  if (request.aspectRatio !== undefined && kind === 'text2video') body.aspect_ratio = request.aspectRatio;
  // One video a task, and no frame rate, seed or size (an image2video takes its image's shape).
  nameUnsent(request, ['n', 'fps', 'seed', 'width', 'height'], losses);
  if (request.aspectRatio !== undefined && kind === 'image2video') losses.push('aspectRatio');
  // Vendor fields another format carried along: the ones Kling's API knows; any other is named.
  // Never sent, whatever format carried them: `callback_url` (Kling would post its task id and
  // signed video address to the client's callback, past the gateway) and `external_task_id`
  // (unique per account).
  Object.assign(body, knownExtras(request, KLING_EXTRAS, losses));
  return { kind, body };
}

/** The Kling video back end: submit to /v1/videos/{kind}, poll /v1/videos/{kind}/{id}. */
export function klingVideo(config: KlingProviderConfig, pool: Dispatcher): VideoBackend {
  const url = new URL(config.baseUrl);
  const basePath = url.pathname.replace(/\/+$/, '');
  const secrets = [config.secretKey];
  /** The code Kling's envelope gave with an error call() threw. */
  const kling = new WeakMap<GatewayError, number>();

  async function call(method: 'GET' | 'POST', path: string, body: unknown, ctx: VideoCallContext): Promise<KlingEnvelope> {
    const token = klingToken(config.accessKey, config.secretKey, undefined, config.tokenTtlSeconds);
    const sent: Record<string, string> = {
      authorization: `Bearer ${token}`,
      accept: 'application/json',
      'user-agent': 'switchyard',
    };
    if (body !== undefined) sent['content-type'] = 'application/json';
    let text: string;
    let status: number;
    let headers: Record<string, string | string[] | undefined>;
    try {
      const response = await sendUpstream(pool, {
        method,
        path: `${basePath}${path}`,
        headers: sent,
        body: body === undefined ? null : JSON.stringify(body),
        signal: ctx.signal,
      });
      status = response.statusCode;
      headers = response.headers;
      text = await readCapped(response.body, 1024 * 1024);
    } catch (error) {
      throw transportError(error, ctx.signal);
    }
    let parsed: KlingEnvelope | undefined;
    try {
      parsed = JSON.parse(text) as KlingEnvelope;
    } catch {
      parsed = undefined;
    }
    const code = typeof parsed?.code === 'number' ? parsed.code : undefined;
    if (status >= 400 || (parsed?.code !== 0 && parsed?.code !== undefined)) {
      // Kling's own words (an error page, a stack trace) go to the gateway's log, never to the client.
      ctx.logger.warn('kling answered with an error', { status, code, path, body: redactSecrets(text.slice(0, 2000), [...secrets, config.accessKey, token]) });
      // The account is in arrears (1101) or its resource pack is used up (1102): out of credit, not busy.
      if (code === 1101 || code === 1102) throw new GatewayError('upstream_quota_exhausted', { retryable: true, upstreamStatus: status, headers: { 'x-should-retry': 'false' } });
      const error = upstreamError(status >= 400 ? status : klingStatusOf(code), text, headers, secrets);
      if (code !== undefined) kling.set(error, code);
      throw error;
    }
    if (!parsed || typeof parsed !== 'object') {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
    }
    return parsed;
  }

  return {
    oneVideo: true,
    async submit(request, ctx) {
      const { kind, body } = klingBody(request, ctx.losses);
      const answer = await call('POST', `/v1/videos/${kind}`, body, ctx);
      const id = answer.data?.task_id;
      if (typeof id !== 'string' || !id) throw new GatewayError('upstream_error', { params: { detail: 'Kling answered without data.task_id' } });
      const raw = typeof answer.data?.task_status === 'string' ? answer.data.task_status : 'submitted';
      const status = mapKlingStatus(raw);
      // The kind is part of the private id: the poll path depends on it.
      return { vendorTaskId: `${kind}:${id}`, status: status === 'unknown' || status === 'failed' || status === 'completed' ? 'queued' : status, rawStatus: raw };
    },

    async poll(vendorTaskId, ctx) {
      const colon = vendorTaskId.indexOf(':');
      const kind = colon > 0 ? vendorTaskId.slice(0, colon) : 'text2video';
      const id = colon > 0 ? vendorTaskId.slice(colon + 1) : vendorTaskId;
      let answer: KlingEnvelope;
      try {
        answer = await call('GET', `/v1/videos/${kind}/${encodeURIComponent(id)}`, undefined, ctx);
      } catch (error) {
        // Kling does not know the task (code 1203: past its retention, or never made): nothing more
        // will come. A 404 without Kling's code (a proxy's page, a wrong path) or another code (1202,
        // a method it refuses) says nothing of the task, which may still be made and billed: polled again.
        if (error instanceof GatewayError && kling.get(error) === 1203) {
          return { status: 'failed', rawStatus: 'not_found', error: { code: 'not_found', message: 'Kling no longer has this task.' } };
        }
        throw error;
      }
      const raw = answer.data?.task_status;
      const rawStatus = typeof raw === 'string' ? raw : String(raw);
      const status = mapKlingStatus(raw);
      const poll: VideoPoll = { status, rawStatus };
      if (status === 'completed') {
        const video = answer.data?.task_result?.videos?.[0];
        if (!video || typeof video.url !== 'string') {
          return { status: 'failed', rawStatus, error: { code: 'no_video', message: 'Kling reported success without a video.' } };
        }
        poll.url = video.url;
        poll.format = 'mp4';
        // Kling reports the video's own length ("5.1" for a 5 s video) and bills its 5 or 10 s:
        // settled at the length billed, not a tenth of a second past what the submit reserved.
        const seconds = Number(video.duration);
        if (Number.isFinite(seconds) && seconds > 0) poll.seconds = klingDuration(seconds);
      } else if (status === 'failed') {
        const message = typeof answer.data?.task_status_msg === 'string' && answer.data.task_status_msg ? answer.data.task_status_msg : 'Kling failed the task.';
        poll.error = { code: 'generation_failed', message };
      }
      return poll;
    },

    estimateSeconds(request) {
      // Kling makes 5 s unless asked for (about) 10.
      return request.duration === undefined ? 5 : klingDuration(request.duration);
    },
  };
}

/** Kling (klingai.com) video generation: text-to-video and image-to-video tasks, JWT-signed. */
export default defineProvider<KlingProviderConfig>({
  name: 'kling',
  version: '0.1.0',
  description: 'Kling video generation (text2video, image2video), polled by the video task engine.',
  type: 'kling',
  configSchema: {
    type: 'object',
    required: ['accessKey', 'secretKey'],
    properties: {
      baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: 'https://api.klingai.com' },
      accessKey: { type: 'string', minLength: 1 },
      secretKey: { type: 'string', minLength: 1 },
      tokenTtlSeconds: { type: 'integer', minimum: 60, maximum: 86400, default: 1800 },
      timeouts: {
        type: 'object',
        additionalProperties: false,
        properties: {
          connectMs: { type: 'integer', minimum: 1 },
          firstByteMs: { type: 'integer', minimum: 1 },
          idleMs: { type: 'integer', minimum: 1 },
          totalMs: { type: 'integer', minimum: 1 },
        },
      },
    },
  },
  create(config, env) {
    const pool = env.poolFor(new URL(config.baseUrl).origin, config);
    const video = klingVideo(config, pool);
    return videoProvider(config, video);
  },
});
