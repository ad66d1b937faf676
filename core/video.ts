import { readFile } from 'node:fs/promises';

/**
 * Video generation, vendor-neutral. A video call is asynchronous: a submit makes a task, the
 * client polls it. Two sides meet here:
 *
 *  - a back end (provider) implements {@link VideoBackend}: submit one canonical
 *    {@link VideoRequest}, poll one vendor task, optionally stream a finished video's bytes; it
 *    exposes it as `ProviderInstance.video` and serves the `video` operation with
 *    `videoOperation(backend)` (so routing finds it like any other operation);
 *  - the task engine (plugins/video-tasks) turns a submission into a stored {@link VideoTask}
 *    owned by the calling key, polls it forward, meters its seconds and hands formats the task.
 *
 * A format's `video` call route renders `response.body` as a {@link VideoTask} (the engine has
 * replaced the back end's {@link VideoSubmission} with the task by the time render runs).
 */
import type { Logger } from 'winston';
import type { OperationHandler, ProviderCallContext, ProviderInstance } from './plugin.js';
import type { Usage } from './operations.js';
import type { UpstreamWaits } from './context.js';
import { GatewayError } from './errors.js';

/** The four states of a task. Transitions only go forward: queued -> in_progress -> completed | failed. */
export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

export const VIDEO_TERMINAL: ReadonlySet<VideoStatus> = new Set<VideoStatus>(['completed', 'failed']);

/** The canonical video request every video format translates into (`UpstreamRequest<'video'>.body`). */
export interface VideoRequest {
  /** The model name the back end knows (set by the pipeline from the target). */
  model: string;
  prompt?: string;
  /** First-frame / reference image: an http(s) URL, a data: URL, or bare base64. */
  image?: string;
  /** Last-frame image (URL or base64). */
  imageTail?: string;
  /** An uploaded reference file (multipart formats): its bytes and media type. */
  imageFile?: { data: Buffer; mediaType: string; filename?: string };
  /**
   * An uploaded reference file not read yet (a multipart format's spooled upload): read into
   * `imageFile` before the back end sees the request, off the event loop.
   */
  imageUpload?: { path: string; mediaType: string; filename?: string };
  negativePrompt?: string;
  /** Seconds. */
  duration?: number;
  width?: number;
  height?: number;
  /** `16:9`, `9:16`, `1:1`. */
  aspectRatio?: string;
  fps?: number;
  seed?: number;
  n?: number;
  /** Vendor quality mode (`std`, `pro`). */
  mode?: string;
  cfgScale?: number;
  /** The client's free-form `metadata`, echoed back on the task. */
  metadata?: Record<string, unknown>;
  /** Vendor fields a format accepted that have no canonical name; a back end may pass them on. */
  extra?: Record<string, unknown>;
  /**
   * Fields the client sent that the gateway sends to no back end (a callback address: the gateway
   * polls, and the vendor would post its own task id and video address there); named as the
   * call's losses once the submit succeeds.
   */
  dropped?: string[];
}

/** What a back end answers to a submit. `vendorTaskId` stays private to the gateway. */
export interface VideoSubmission {
  vendorTaskId: string;
  /** Usually `queued`; a back end may report further on at once. */
  status: VideoStatus;
  rawStatus?: string;
  /** Seconds the back end will bill, when it says so before the video exists. */
  seconds?: number;
}

/** One poll of a vendor task. `unknown`: a vendor state this back end cannot map (polling goes on). */
export interface VideoPoll {
  status: VideoStatus | 'unknown';
  /** 0..100. */
  progress?: number;
  /** Where the finished video is (the vendor's address: never shown to clients). */
  url?: string;
  /** Container format: `mp4`. */
  format?: string;
  /** Seconds of video produced (metered). */
  seconds?: number;
  /** `1280x720`. */
  size?: string;
  error?: { code: string; message: string };
  /** The vendor's own state word, kept for operators. */
  rawStatus: string;
}

/** A finished video's bytes, streamed. */
export interface VideoContent {
  /** 200 for the whole video; 206 for the part a `range` asked for (with `contentRange`). */
  status: number;
  contentType: string;
  contentLength?: number;
  /** With a 206: which bytes these are, as the back end's `Content-Range` said (`bytes 0-99/3145728`). */
  contentRange?: string;
  /** The back end serves parts of this video (`Accept-Ranges: bytes`, or it answered a range with 206). */
  acceptsRanges?: boolean;
  body: AsyncIterable<Uint8Array>;
  /** Release the upstream when the body is not read to the end. */
  destroy?(): void;
}

/** What a back end gets besides the request: abort signal and logger. */
export interface VideoCallContext {
  readonly signal: AbortSignal;
  readonly logger: Logger;
  /** The upstream model the task was submitted with. */
  readonly model: string;
  /**
   * On a submit: where a back end names what it could not send as asked (`duration`); recorded
   * as the call's translation losses once the submit succeeds.
   */
  readonly losses?: string[];
  /**
   * On a content download: the client's `Range` (one `bytes=` range, checked), to be sent on. A
   * back end that serves it answers 206 with `contentRange`; one that ignores it, the whole video.
   */
  readonly range?: string;
}

/** The provider-side contract of a video back end. */
export interface VideoBackend {
  submit(request: VideoRequest, ctx: VideoCallContext): Promise<VideoSubmission>;
  poll(vendorTaskId: string, ctx: VideoCallContext): Promise<VideoPoll>;
  /**
   * Stream a finished video. Optional: without it the engine fetches `VideoPoll.url` itself
   * (fine for vendor CDN links that need no credentials).
   */
  content?(vendorTaskId: string, ctx: VideoCallContext): Promise<VideoContent>;
  /** Seconds a request will produce, for the estimate charged on submit. Default: `duration` or 5. */
  estimateSeconds?(request: VideoRequest): number;
  /**
   * The back end makes one video a task, whatever `n` asks: the estimate is not multiplied by it
   * (and the back end names `n` as a loss when it was more than 1).
   */
  readonly oneVideo?: boolean;
}

export const DEFAULT_VIDEO_SECONDS = 5;

/**
 * The longest video a request may ask for, in seconds. The spec states no bound; this one keeps
 * a typo (`duration: 1e9`) from being charged as a billion seconds. No back end makes longer clips.
 */
export const MAX_VIDEO_SECONDS = 60;

/** The most videos one request may ask for (`n`); the spec states no bound either. */
export const MAX_VIDEOS_PER_REQUEST = 10;

/**
 * The canonical body of a `video` call that reads a task rather than making a video (a format
 * whose reads share its submits' route, such as Jimeng's GetResult): answered from the task
 * store, it costs nothing and is never refused for a budget.
 */
export interface VideoTaskRead {
  kind: 'video-task-read';
  taskId: string;
}

export function isVideoTaskRead(value: unknown): value is VideoTaskRead {
  return value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'video-task-read';
}

/**
 * Name in `losses` each of `fields` a back end does not send that the request asks for something
 * with: `n` above 1, any other field when given (docs/writing-a-provider.md: named, not silently
 * dropped).
 */
export function nameUnsent(request: VideoRequest, fields: ReadonlyArray<keyof VideoRequest>, losses: string[]): void {
  for (const field of fields) {
    const value = request[field];
    if (value === undefined || (field === 'n' && typeof value === 'number' && value <= 1)) continue;
    if (!losses.includes(field)) losses.push(field);
  }
}

/**
 * The vendor fields another format carried in `request.extra` that this back end's API knows
 * (`known`), to send as they are; every other one is named in `losses`, not dropped unseen.
 */
export function knownExtras(request: VideoRequest, known: ReadonlySet<string>, losses: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.extra ?? {})) {
    if (value === undefined) continue;
    if (known.has(name)) out[name] = value;
    else if (!losses.includes(name)) losses.push(name);
  }
  return out;
}

/** Bare base64 (whitespace between the characters allowed), padded or not, holding some data. */
function isBase64(text: string): boolean {
  // Copied only when it holds whitespace (line breaks every 76 characters, as some encoders write).
  const bare = /\s/.test(text) ? text.replace(/\s+/g, '') : text;
  if (bare.length === 0 || bare.length % 4 === 1 || !/^[A-Za-z0-9+/]+={0,2}$/.test(bare)) return false;
  return !bare.endsWith('=') || bare.length % 4 === 0;
}

/**
 * A video request's image as a format takes it from a client: an http(s) URL, a `data:` URL with
 * valid base64, or bare valid base64 (what `VideoRequest.image` holds). Anything else is a 400
 * naming `param`, before the call is routed or charged.
 */
export function checkVideoImage(value: string, param: string): string {
  let problem = 'give an http(s) URL, a data: URL in base64 or base64 image data.';
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
    if (URL.canParse(value)) {
      const url = new URL(value);
      if ((url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '') return value;
    }
  } else {
    const data = /^data:([^,]*),(.*)$/is.exec(value);
    if (data) {
      if (/;base64$/i.test(data[1]!) && isBase64(data[2]!)) return value;
      problem = 'a data: URL must hold valid base64 (data:image/png;base64,...).';
    } else if (isBase64(value)) return value;
  }
  throw new GatewayError('invalid_value', { param, params: { detail: problem } });
}

/** The seconds charged up front for a request. */
export function estimateVideoSeconds(backend: VideoBackend, request: VideoRequest): number {
  const seconds = backend.estimateSeconds?.(request) ?? request.duration ?? DEFAULT_VIDEO_SECONDS;
  const n = !backend.oneVideo && request.n && request.n > 0 ? request.n : 1;
  return Math.max(0, seconds) * n;
}

/**
 * The provider instance of a back end that only makes videos: its video back end, polled by the
 * task engine, and the `video` operation that submits to it.
 */
export function videoProvider(config: { id: string; type: string; models: readonly string[] }, video: VideoBackend): ProviderInstance {
  return { id: config.id, type: config.type, models: config.models, video, operations: { video: videoOperation(video) } };
}

/**
 * The `video` operation handler of a back end: submit, answer the submission as the json body
 * (the engine makes it a task) with the estimated seconds as usage (metering charges them).
 */
export function videoOperation(backend: VideoBackend): OperationHandler<'video'> {
  return async (request, context: ProviderCallContext) => {
    const body = { ...(request.body as unknown as VideoRequest), model: request.model };
    if (body.imageUpload && !body.imageFile) {
      const { path, ...file } = body.imageUpload;
      body.imageFile = { ...file, data: await readFile(path) };
    }
    delete body.imageUpload;
    const losses: string[] = body.dropped ? [...body.dropped] : [];
    delete body.dropped;
    const submission = await backend.submit(body, { signal: context.signal, logger: context.logger, model: request.model, losses });
    if (losses.length > 0 && context.request) {
      const names = (context.request.losses ??= []);
      for (const name of losses) if (!names.includes(name)) names.push(name);
    }
    const seconds = submission.seconds ?? estimateVideoSeconds(backend, body);
    const usage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds };
    return { kind: 'json', status: 200, body: submission, usage };
  };
}

/** A task as the engine keeps it and formats render it (no vendor id, no vendor URL). */
export interface VideoTask {
  /** `task_...`: the public id. */
  id: string;
  keyId: string | null;
  provider: string;
  /** The format that submitted it (`video-generations`). */
  format: string;
  /** The public model name the client asked for. */
  model: string;
  upstreamModel: string;
  status: VideoStatus;
  progress: number;
  /** Whether the engine has the finished video (serve it through the gateway's content route). */
  hasContent: boolean;
  /** Container format (`mp4`) once completed. */
  container: string | null;
  seconds: number | null;
  /** Seconds charged on submit (the estimate, all `n` videos), until the back end reports `seconds`. */
  estimateSeconds: number;
  size: string | null;
  error: { code: string; message: string } | null;
  rawStatus: string | null;
  metadata: Record<string, unknown> | null;
  /** Milliseconds since the epoch. */
  createdAt: number;
  updatedAt: number;
  completedAt: number | null;
  /** Cost charged so far (estimate on submit, settled on completion, 0 after a refund). */
  cost: number;
}

/** What formats ask the engine (plugins/video-tasks `videoEngineOf(api)`). */
export interface VideoTaskReader {
  /** The task, only when `keyId` made it; refreshed from the vendor first when stale. */
  get(id: string, keyId: string | null, signal?: AbortSignal): Promise<VideoTask | undefined>;
  /** A completed task's video bytes, only for its key. */
  content(id: string, keyId: string | null, signal?: AbortSignal, waits?: UpstreamWaits, range?: string): Promise<VideoContent | undefined>;
}
