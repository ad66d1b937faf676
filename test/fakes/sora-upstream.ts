import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { fakeMp4 } from './jimeng-upstream.js';
import { json, LocalServer, readBody } from './server.js';

type Json = Record<string, any>;

export interface SoraReceived {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Text fields of a create form. */
  fields: Record<string, string>;
  /** Files of a create form. */
  files: Record<string, { filename: string; type: string; bytes: Buffer }>;
}

/** One retrieve's answer, in order (the last repeats). */
export type SoraStep = { status: 'queued' | 'in_progress' | 'completed' | string; progress?: number } | { status: 'failed'; error: { code: string; message: string } };

export const SORA_VIDEO = fakeMp4('sora');

export function openaiError(message: string, type: string, param: string | null, code: string | null): Json {
  return { error: { message, type, param, code } };
}

const MODELS = new Set(['sora-2', 'sora-2-pro']);
const SECONDS = new Set(['4', '8', '12']);
const SIZES = new Set(['720x1280', '1280x720', '1024x1792', '1792x1024']);

/**
 * OpenAI's video API for tests, in its real shapes:
 *
 * - `Authorization: Bearer <key>`, else 401 `invalid_api_key` in OpenAI's error shape;
 * - `POST /v1/videos` (multipart/form-data: model, prompt, seconds, size, input_reference file):
 *   the video object `{id: 'video_…', object: 'video', model, status: 'queued', progress: 0,
 *   created_at, seconds, size, prompt, completed_at, expires_at, error, remixed_from_video_id}`;
 *   unknown model, seconds or size: 400 with `param`;
 * - `GET /v1/videos/{id}`: the object, one step further along `plan` per call (default queued ->
 *   in_progress -> completed); unknown id: 404;
 * - `GET /v1/videos/{id}/content`: the MP4 bytes (SORA_VIDEO) once completed, else 404.
 *
 * Every request is recorded.
 */
export class FakeSora extends LocalServer {
  readonly received: SoraReceived[] = [];
  readonly videos = new Map<string, { object: Json; polls: number; plan: SoraStep[] }>();
  plan: SoraStep[] = [{ status: 'queued' }, { status: 'in_progress', progress: 40 }, { status: 'completed' }];
  contentDownloads = 0;
  /** How long each GET (a status or the content) waits before it is answered: a slow vendor. */
  readDelayMs = 0;
  /** When set, a content download sends its head and half the video, then nothing more (until the gateway lets it go). */
  contentStalls = false;

  constructor(readonly apiKey = 'sk-sora-upstream-secret-0123456789abcdef') {
    super();
  }

  reset(): void {
    this.received.length = 0;
    this.videos.clear();
    this.plan = [{ status: 'queued' }, { status: 'in_progress', progress: 40 }, { status: 'completed' }];
    this.contentDownloads = 0;
    this.readDelayMs = 0;
    this.contentStalls = false;
  }

  creates(): SoraReceived[] {
    return this.received.filter((r) => r.method === 'POST');
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const entry: SoraReceived = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, fields: {}, files: {} };
    const type = req.headers['content-type'] ?? '';
    if (req.method === 'POST' && /^multipart\/form-data/i.test(type)) {
      try {
        const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
        for (const [name, value] of form.entries()) {
          if (typeof value === 'string') entry.fields[name] = value;
          else entry.files[name] = { filename: value.name, type: value.type, bytes: Buffer.from(await value.arrayBuffer()) };
        }
      } catch {
        // a malformed form: answered below
      }
    }
    this.received.push(entry);

    if (req.headers.authorization !== `Bearer ${this.apiKey}`) {
      return json(res, 401, openaiError('Incorrect API key provided: sk-***. You can find your API key at https://platform.openai.com/account/api-keys.', 'invalid_request_error', null, 'invalid_api_key'));
    }
    const url = new URL(req.url ?? '/', 'http://fake');
    if (req.method === 'POST' && url.pathname === '/v1/videos') return this.create(entry, type, res);
    const match = /^\/v1\/videos\/([^/]+)(\/content)?$/.exec(url.pathname);
    if (req.method === 'GET' && match) {
      if (this.readDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.readDelayMs));
      const video = this.videos.get(decodeURIComponent(match[1]!));
      if (!video) return json(res, 404, openaiError(`Video with id '${match[1]}' not found.`, 'invalid_request_error', null, null));
      if (match[2]) {
        if (video.object.status !== 'completed') return json(res, 404, openaiError('Video is not ready yet; its content is available once it has completed.', 'invalid_request_error', null, null));
        this.contentDownloads++;
        if (this.contentStalls) {
          res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': SORA_VIDEO.length });
          res.write(SORA_VIDEO.subarray(0, SORA_VIDEO.length >> 1));
          return;
        }
        // One range of bytes when asked (`bytes=a-b`, `bytes=a-`), as a file server answers it.
        const range = /^bytes=(\d+)-(\d*)$/.exec(String(req.headers.range ?? ''));
        if (range) {
          const start = Number(range[1]);
          const end = range[2] === '' ? SORA_VIDEO.length - 1 : Math.min(SORA_VIDEO.length - 1, Number(range[2]));
          // A file server says the length of what it has (RFC 9110: Content-Range `bytes */N` on a 416).
          if (start >= SORA_VIDEO.length) return json(res, 416, openaiError('Range not satisfiable.', 'invalid_request_error', null, null), { 'content-range': `bytes */${SORA_VIDEO.length}` });
          res.writeHead(206, { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'content-range': `bytes ${start}-${end}/${SORA_VIDEO.length}`, 'content-length': end - start + 1 });
          res.end(SORA_VIDEO.subarray(start, end + 1));
          return;
        }
        res.writeHead(200, { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'content-length': SORA_VIDEO.length });
        res.end(SORA_VIDEO);
        return;
      }
      const step = video.plan[Math.min(video.polls, video.plan.length - 1)]!;
      video.polls++;
      const object = video.object;
      object.status = step.status;
      object.progress = step.status === 'completed' ? 100 : 'progress' in step && step.progress !== undefined ? step.progress : object.progress;
      if (step.status === 'completed') {
        object.completed_at = Math.floor(Date.now() / 1000);
        object.expires_at = object.completed_at + 3600;
      }
      if (step.status === 'failed' && 'error' in step) object.error = step.error;
      return json(res, 200, object);
    }
    return json(res, 404, openaiError(`Invalid URL (${req.method} ${url.pathname})`, 'invalid_request_error', null, null));
  }

  private create(entry: SoraReceived, type: string, res: http.ServerResponse): void {
    if (!/^multipart\/form-data/i.test(type)) return json(res, 400, openaiError('The request must be multipart/form-data.', 'invalid_request_error', null, null));
    const { model = 'sora-2', prompt, seconds = '4', size = '720x1280' } = entry.fields;
    if (!prompt) return json(res, 400, openaiError("Missing required parameter: 'prompt'.", 'invalid_request_error', 'prompt', 'missing_required_parameter'));
    if (!MODELS.has(model)) return json(res, 400, openaiError(`Invalid value: '${model}'. Supported values are: 'sora-2' and 'sora-2-pro'.`, 'invalid_request_error', 'model', 'invalid_value'));
    if (!SECONDS.has(seconds)) return json(res, 400, openaiError(`Invalid value: '${seconds}'. Supported values are: '4', '8', and '12'.`, 'invalid_request_error', 'seconds', 'invalid_value'));
    if (!SIZES.has(size)) return json(res, 400, openaiError(`Invalid value: '${size}'.`, 'invalid_request_error', 'size', 'invalid_value'));
    const id = `video_${randomBytes(16).toString('hex')}`;
    const object: Json = {
      id,
      object: 'video',
      created_at: Math.floor(Date.now() / 1000),
      status: 'queued',
      completed_at: null,
      error: null,
      expires_at: null,
      model,
      progress: 0,
      prompt,
      remixed_from_video_id: null,
      seconds,
      size,
    };
    this.videos.set(id, { object, polls: 0, plan: this.plan });
    json(res, 200, object);
  }
}
