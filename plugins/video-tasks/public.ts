import { GatewayError, type FormatReply, type HandlerRoute, type RequestContext, type VideoTask } from '../../core/index.js';
import type { VideoEngine } from './engine.js';

/*
 * Content URLs are paths on the gateway (`/v1/video/generations/{id}/content`), not absolute
 * URLs: the spec asks only for "a video resource address", and an absolute one would have to be
 * built from the request's Host header, which a client (or anyone in front of the gateway)
 * chooses (`Host: evil.example` would hand out links to evil.example).
 */

/**
 * The spec's "video task status result": `{task_id, status, url, format, metadata, error}`.
 * `url` is the gateway's content route for the task (the vendor's address never leaves the
 * gateway); it is there, with `format`, once the task completed; `error` once it failed.
 */
export function taskStatusResult(task: VideoTask, contentUrl: string): Record<string, unknown> {
  const result: Record<string, unknown> = { task_id: task.id, status: task.status };
  if (task.status === 'completed') {
    result.url = contentUrl;
    result.format = task.container ?? 'mp4';
  }
  if (task.metadata) result.metadata = task.metadata;
  if (task.status === 'failed') result.error = { code: task.error?.code ?? 'failed', message: task.error?.message ?? '' };
  return result;
}

/** GET <path>/:task_id -> the status result; GET <path>/:task_id/content -> the video. 404 for another key's task. */
export function taskRoutes(engine: () => VideoEngine, basePath: string): HandlerRoute[] {
  return [
    {
      kind: 'handler',
      method: 'GET',
      path: `${basePath}/:task_id`,
      async handle(ctx, input, helpers): Promise<FormatReply> {
        const id = input.params.task_id ?? '';
        const task = await engine().get(id, helpers.key?.id ?? null, ctx.signal, ctx);
        if (!task) throw new GatewayError('task_not_found', { params: { id }, param: 'task_id' });
        return { body: taskStatusResult(task, `${basePath}/${encodeURIComponent(task.id)}/content`) };
      },
    },
    {
      kind: 'handler',
      method: 'GET',
      path: `${basePath}/:task_id/content`,
      handle: (ctx, input, helpers) => contentReply(engine(), input.params.task_id ?? '', helpers.key?.id ?? null, ctx),
    },
  ];
}

/** How a format names a task in its errors: the id's field, and what a task without its video yet is told. */
export interface TaskWording {
  param: string;
  notReady: (id: string, status: string) => string;
}

const TASK_WORDING: TaskWording = { param: 'task_id', notReady: (id, status) => `The task '${id}' is ${status}: it has no video.` };

/**
 * The client's `Range` when it is one range of bytes (`bytes=0-99`, `bytes=100-`, `bytes=-500`),
 * the form every player and download tool sends; anything else (several ranges, another unit, a
 * malformed value) is ignored, as HTTP allows, and the whole video is served.
 */
export function videoRange(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? undefined : header?.trim();
  if (!value) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/i.exec(value);
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  if (m[1] !== '' && m[2] !== '' && Number(m[2]) < Number(m[1])) return undefined;
  return `bytes=${m[1]}-${m[2]}`;
}

/**
 * A task's video, streamed through the gateway, for the key that owns the task: 404
 * task_not_found for anyone else's (or none), 400 while it has no video (not completed); the
 * waits on the vendor are the request's (see waitingOnUpstream). A `Range` of one part is sent
 * on: a back end that serves it gives a 206 with its `Content-Range`, so players can seek and
 * downloads resume.
 */
export async function contentReply(engine: VideoEngine, id: string, keyId: string | null, rc: RequestContext, wording: TaskWording = TASK_WORDING): Promise<FormatReply> {
  const task = await engine.get(id, keyId, rc.signal, rc);
  if (!task) throw new GatewayError('task_not_found', { params: { id }, param: wording.param });
  if (task.status !== 'completed') {
    throw new GatewayError('invalid_request', { param: wording.param, params: { detail: wording.notReady(id, task.status) } });
  }
  const content = await engine.content(id, keyId, rc.signal, rc, videoRange(rc.headers.range));
  if (!content) throw new GatewayError('task_not_found', { params: { id }, param: wording.param });
  const headers: Record<string, string> = { 'content-type': content.contentType || 'video/mp4' };
  if (content.contentLength !== undefined) headers['content-length'] = String(content.contentLength);
  if (content.acceptsRanges) headers['accept-ranges'] = 'bytes';
  const partial = content.status === 206 && content.contentRange !== undefined;
  if (partial) headers['content-range'] = content.contentRange!;
  return { status: partial ? 206 : 200, headers, stream: content.body };
}
