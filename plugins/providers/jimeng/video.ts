import type { Pool } from 'undici';
import {
  GatewayError,
  knownExtras,
  nameUnsent,
  readCapped,
  scrub,
  sendUpstream,
  transportError,
  upstreamError,
  type VideoBackend,
  type VideoCallContext,
  type VideoPoll,
  type VideoRequest,
  type VideoStatus,
} from '../../../core/index.js';
import { RESULT_ACTION, SUBMIT_ACTION, reqKeyFor, takesFrames, takesTail, type Endpoint, type JimengProviderConfig } from './api.js';
import { sign } from './sign.js';

type Json = Record<string, any>;

/** The `code` of a Volcengine visual API answer that succeeded. */
export const SUCCESS_CODE = 10000;

/** Codes worth asking again later (rate and concurrency limits, internal errors). */
const RATE_CODES = new Set([50429, 50430]);
const TRANSIENT_CODES = new Set([50500, 50501, 50511, 50519]);

/**
 * Jimeng's five result states as the task engine's: `in_queue` queued, `generating` in
 * progress, `done` completed (or failed when it comes without a video), `not_found` and
 * `expired` failed (the vendor no longer has the task: nothing more will come of it).
 */
export function statusOf(raw: unknown): VideoStatus | 'unknown' {
  switch (raw) {
    case 'in_queue':
      return 'queued';
    case 'generating':
      return 'in_progress';
    case 'done':
      return 'completed';
    case 'not_found':
    case 'expired':
      return 'failed';
    default:
      return 'unknown';
  }
}

/** An image as Jimeng takes it: an http(s) URL (`image_urls`) or bare base64 (`binary_data_base64`). */
function imageOf(image: string): { url?: string; base64?: string } {
  if (/^https?:\/\//i.test(image)) return { url: image };
  const data = /^data:[^;,]*(?:;[^;,]*)*;base64,(.*)$/is.exec(image);
  return { base64: (data ? data[1]! : image).replace(/\s+/g, '') };
}

/** Fields of the submit body a format may carry in `extra` (anything else stays behind). */
const PASSED_ON = new Set(['frames', 'return_url', 'logo_info', 'req_json', 'camera_strength']);

/**
 * The submit body for a canonical request. `losses` names what Jimeng cannot make as asked: a
 * `duration` other than the 5 or 10 s it makes (always 5 for models that take no frame count),
 * `n` above 1 (one video a task), `fps` (it has no field for it).
 */
export function submitBody(config: Pick<JimengProviderConfig, 'reqKeys'>, request: VideoRequest, losses: string[] = []): { reqKey: string; body: Json; seconds: number } {
  const images: Array<{ url?: string; base64?: string }> = [];
  if (request.imageFile) images.push({ base64: request.imageFile.data.toString('base64') });
  if (request.image) images.push(imageOf(request.image));
  const tail = request.imageTail ? request.imageTail : undefined;
  const reqKey = reqKeyFor(config, request.model, images.length > 0, tail !== undefined);
  if (tail !== undefined) {
    // A last frame goes only to a req_key that takes one (`…first_tail…`); the others make a video
    // from one image, and would read a second as they please.
    if (takesTail(reqKey)) images.push(imageOf(tail));
    else losses.push('imageTail');
  }
  const body: Json = { req_key: reqKey };
  if (request.prompt !== undefined) body.prompt = request.prompt;
  // The images go as one list, in order (first frame, then last): all URLs or all base64, as the
  // API reads one of the two; a mix would put the last frame first.
  const kinds = new Set(images.map((i) => (i.url !== undefined ? 'url' : 'base64')));
  if (kinds.size > 1) {
    throw new GatewayError('invalid_value', {
      param: 'image',
      params: { detail: 'this back end (Jimeng) takes a first and a last frame both as http(s) URLs or both as image data; one of each was given' },
    });
  }
  if (kinds.has('base64')) body.binary_data_base64 = images.map((i) => i.base64!);
  if (kinds.has('url')) body.image_urls = images.map((i) => i.url!);
  if (request.seed !== undefined) body.seed = request.seed;
  const ratio = request.aspectRatio ?? ratioOf(request.width, request.height);
  if (ratio) body.aspect_ratio = ratio;
  let seconds = 5;
  if (takesFrames(reqKey)) {
    seconds = request.duration !== undefined && request.duration >= 10 ? 10 : 5;
    body.frames = seconds * 24 + 1;
  }
  if (request.duration !== undefined && request.duration !== seconds) losses.push('duration');
  // One video a task, at the frame rate the model makes.
  nameUnsent(request, ['n', 'fps', 'negativePrompt', 'cfgScale', 'mode'], losses);
  // Vendor fields another format carried along: only the ones Jimeng's video API knows; any other is named.
  for (const [name, value] of Object.entries(knownExtras(request, PASSED_ON, losses))) if (!(name in body)) body[name] = value;
  return { reqKey, body, seconds };
}

const RATIOS: ReadonlyArray<[string, number]> = [
  ['16:9', 16 / 9],
  ['4:3', 4 / 3],
  ['1:1', 1],
  ['3:4', 3 / 4],
  ['9:16', 9 / 16],
  ['21:9', 21 / 9],
];

/** The nearest of Jimeng's aspect ratios to a width and height. */
function ratioOf(width?: number, height?: number): string | undefined {
  if (!width || !height) return undefined;
  const r = width / height;
  let best = RATIOS[0]!;
  for (const entry of RATIOS) if (Math.abs(Math.log(entry[1] / r)) < Math.abs(Math.log(best[1] / r))) best = entry;
  return best[0];
}

/** The private task id the engine keeps: the req_key is needed again to read the result. */
export function vendorTaskIdOf(reqKey: string, taskId: string): string {
  return `${reqKey}:${taskId}`;
}

function parseVendorTaskId(id: string): { reqKey: string; taskId: string } {
  const at = id.indexOf(':');
  if (at < 0) throw new GatewayError('upstream_error', { params: { detail: 'the stored task id is not a Jimeng one' } });
  return { reqKey: id.slice(0, at), taskId: id.slice(at + 1) };
}

/**
 * Volcengine's errors: its gateway answers a refused signature, a stale X-Date, an unknown
 * Action or a throttled account with `{ResponseMetadata: {Error: {Code, Message}}}` and an HTTP
 * error status; the visual service answers its own failures with `{code, message}` (code other
 * than 10000). Credential trouble is the operator's (502, never retried on the same key);
 * 50429/50430 (QPS and concurrency limits) are rate limits; 5xx codes retryable; the content
 * checks (50411-50413…) and other request problems a 400 with the vendor's message, scrubbed.
 */
export function jimengError(status: number, text: string, secrets: readonly (string | undefined)[]): GatewayError {
  let parsed: Json | undefined;
  try {
    parsed = JSON.parse(text) as Json;
  } catch {
    parsed = undefined;
  }
  const meta = parsed?.ResponseMetadata?.Error as Json | undefined;
  if (meta && typeof meta.Code === 'string') {
    // Volcengine's code names a condition (SignatureDoesNotMatch); what a back end puts there still goes through scrub.
    const code = scrub(meta.Code as string, secrets).slice(0, 80);
    if (status === 401 || status === 403 || /Signature|AccessKey|Unauthorized|AccessDenied|RequestExpired|InvalidTimestamp/i.test(code)) {
      return new GatewayError('upstream_error', { params: { detail: `the back end refused the gateway's credentials (${code})` }, upstreamStatus: status });
    }
    if (status === 429 || /FlowLimit|Throttl|RateLimit/i.test(code)) return new GatewayError('upstream_rate_limited', { retryable: true, upstreamStatus: status });
    if (status >= 500) return new GatewayError('upstream_error', { params: { detail: `status ${status} (${code})` }, retryable: true, upstreamStatus: status });
    return new GatewayError('upstream_bad_request', { params: { detail: scrub(`${code}: ${String(meta.Message ?? '')}`, secrets) }, upstreamStatus: status });
  }
  if (parsed && typeof parsed.code === 'number' && parsed.code !== SUCCESS_CODE) return codeError(parsed, secrets, status);
  return upstreamError(status, text, {}, secrets);
}

function codeError(parsed: Json, secrets: readonly (string | undefined)[], status?: number): GatewayError {
  const code = parsed.code as number;
  const message = typeof parsed.message === 'string' ? parsed.message : '';
  if (RATE_CODES.has(code)) return new GatewayError('upstream_rate_limited', { retryable: true, upstreamStatus: status });
  if (TRANSIENT_CODES.has(code)) return new GatewayError('upstream_error', { params: { detail: `code ${code}` }, retryable: true, upstreamStatus: status });
  if (code === 50400) {
    return new GatewayError('upstream_error', { params: { detail: `the back end refused the gateway's credentials (code ${code})` }, upstreamStatus: status });
  }
  return new GatewayError('upstream_bad_request', { params: { detail: scrub(`code ${code}: ${message}`, secrets) }, upstreamStatus: status });
}

export interface JimengBackendOptions {
  pool: Pool;
  endpoint: Endpoint;
  config: JimengProviderConfig;
  /** The signing time (tests). */
  now?: () => Date;
}

/** Jimeng video through Volcengine's visual API, as a VideoBackend. */
export function jimengBackend(options: JimengBackendOptions): VideoBackend {
  const { pool, endpoint, config } = options;
  const secrets = [config.secretKey];

  async function call(action: string, payload: Json, ctx: VideoCallContext): Promise<Json> {
    const body = JSON.stringify(payload);
    const query = { Action: action, Version: config.version };
    const signed = sign({
      method: 'POST',
      host: endpoint.host,
      path: endpoint.path,
      query,
      headers: { 'content-type': 'application/json' },
      body,
      accessKey: config.accessKey,
      secretKey: config.secretKey,
      region: config.region,
      service: config.service,
      date: options.now?.(),
    });
    const path = `${endpoint.path}?Action=${encodeURIComponent(action)}&Version=${encodeURIComponent(config.version)}`;
    let response;
    try {
      response = await sendUpstream(pool, {
        method: 'POST',
        path,
        headers: { ...signed.headers, accept: 'application/json', 'user-agent': 'switchyard' },
        body,
        signal: ctx.signal,
      });
    } catch (error) {
      throw transportError(error, ctx.signal);
    }
    const text = await readCapped(response.body, 4 * 1024 * 1024);
    if (response.statusCode >= 400) throw jimengError(response.statusCode, text, secrets);
    let parsed: Json;
    try {
      parsed = JSON.parse(text) as Json;
    } catch {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
    }
    if (parsed === null || typeof parsed !== 'object') {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not an object' }, retryable: true });
    }
    return parsed;
  }

  return {
    oneVideo: true,
    estimateSeconds(request) {
      return submitBody(config, request).seconds;
    },

    async submit(request, ctx) {
      const { reqKey, body, seconds } = submitBody(config, request, ctx.losses);
      const parsed = await call(SUBMIT_ACTION, body, ctx);
      if (parsed.code !== SUCCESS_CODE) throw codeError(parsed, secrets);
      const taskId = parsed.data?.task_id;
      if (typeof taskId !== 'string' || taskId === '') {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end accepted the task without a task_id' }, retryable: true });
      }
      return { vendorTaskId: vendorTaskIdOf(reqKey, taskId), status: 'queued', rawStatus: 'in_queue', seconds };
    },

    async poll(vendorTaskId, ctx): Promise<VideoPoll> {
      const { reqKey, taskId } = parseVendorTaskId(vendorTaskId);
      const parsed = await call(RESULT_ACTION, { req_key: reqKey, task_id: taskId }, ctx);
      const code = parsed.code;
      if (code !== SUCCESS_CODE) {
        if (typeof code !== 'number' || RATE_CODES.has(code) || TRANSIENT_CODES.has(code) || code === 50400) throw codeError({ code: typeof code === 'number' ? code : -1, message: parsed.message }, secrets);
        // The task itself failed (a content check, bad input found while generating).
        return {
          status: 'failed',
          rawStatus: typeof parsed.data?.status === 'string' ? parsed.data.status : `code ${code}`,
          error: { code: String(code), message: scrub(typeof parsed.message === 'string' ? parsed.message : 'the task failed', secrets) },
        };
      }
      const raw = parsed.data?.status;
      const rawStatus = typeof raw === 'string' ? raw : String(raw);
      const status = statusOf(raw);
      if (status === 'queued') return { status, progress: 0, rawStatus };
      if (status === 'in_progress') return { status, rawStatus };
      if (raw === 'not_found') return { status: 'failed', rawStatus, error: { code: 'not_found', message: 'The back end has no such task (it may have expired).' } };
      if (raw === 'expired') return { status: 'failed', rawStatus, error: { code: 'expired', message: 'The task expired at the back end before its video was fetched.' } };
      if (status === 'completed') {
        const url = parsed.data?.video_url;
        if (typeof url !== 'string' || url === '') {
          return { status: 'failed', rawStatus, error: { code: 'no_video', message: 'The back end finished the task without a video.' } };
        }
        const seconds = takesFrames(reqKey) && Number(parsed.data?.frames) > 0 ? Math.round((Number(parsed.data.frames) - 1) / 24) : undefined;
        return { status, progress: 100, url, format: 'mp4', rawStatus, ...(seconds ? { seconds } : {}) };
      }
      return { status: 'unknown', rawStatus };
    },
  };
}
