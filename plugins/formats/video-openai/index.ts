import {
  definePlugin,
  DEFAULT_VIDEO_SECONDS,
  MAX_VIDEO_SECONDS,
  GatewayError,
  isUploadedFile,
  type CallRoute,
  type FormatReply,
  type HandlerRoute,
  type JsonSchema,
  type VideoRequest,
  type VideoTask,
} from '../../../core/index.js';
import { videoEngineOf, type VideoEngine } from '../../video-tasks/index.js';
import { contentReply, type TaskWording } from '../../video-tasks/public.js';

/**
 * Video generation in OpenAI's `/v1/videos` shape (the "Video object"):
 *
 *   POST /v1/videos               multipart/form-data: model, prompt, seconds, size, input_reference
 *   GET  /v1/videos/{id}          the video object
 *   GET  /v1/videos/{id}/content  the finished video's bytes, streamed through the gateway
 *
 * Any video back end can serve it (the task engine keeps the task, polls it and meters it); the
 * client never sees a vendor's address or needs a vendor's credentials. A task belongs to the
 * key that made it: another key gets the same 404 as an id that does not exist.
 */

export const FORMAT_ID = 'video-openai';
const PATH = '/v1/videos';
/** A video is named by its `video_id`, as OpenAI's API names it. */
const VIDEO_WORDING: TaskWording = { param: 'video_id', notReady: (id, status) => `Video '${id}' is not ready: its status is ${status}.` };

/** OpenAI's default model when a create names none. */
export const DEFAULT_MODEL = 'sora-2';

export const createSchema: JsonSchema = {
  type: 'object',
  properties: {
    model: { type: 'string', minLength: 1 },
    prompt: { type: 'string', minLength: 1, maxLength: 32_000 },
    // Text, as the spec says ("duration in seconds, as text"): a whole number of seconds.
    seconds: { type: 'string', pattern: '^[1-9][0-9]{0,2}$', 'x-message': "'seconds' must be a whole number of seconds written as text, such as \"4\"." },
    size: { type: 'string', pattern: '^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$', 'x-message': "'size' must be written width x height, such as \"1280x720\"." },
    input_reference: { type: 'object', 'x-message': "'input_reference' must be an uploaded image file." },
  },
};

/** What the client asked for, kept per task for the video object (seconds and size before the vendor reports them). */
interface Asked {
  seconds?: string;
  size?: string;
  prompt?: string;
}

const IMAGE_TYPES = /^image\/(png|jpeg|jpg|webp|gif)$/i;

/** The form as the canonical video request. */
export function toVideoRequest(body: Record<string, unknown>): VideoRequest {
  const request: VideoRequest = { model: typeof body.model === 'string' ? body.model : DEFAULT_MODEL };
  if (typeof body.prompt === 'string') request.prompt = body.prompt;
  if (typeof body.seconds === 'string') {
    request.duration = Number(body.seconds);
    // The bound the other video formats hold: a typo must not be charged as a long video.
    if (request.duration > MAX_VIDEO_SECONDS) {
      throw new GatewayError('invalid_value', { param: 'seconds', params: { detail: `a video is at most ${MAX_VIDEO_SECONDS} seconds long; got ${request.duration}.` } });
    }
  }
  if (typeof body.size === 'string') {
    const [width, height] = body.size.split('x').map(Number);
    request.width = width;
    request.height = height;
  }
  const file = body.input_reference;
  if (file !== undefined) {
    if (!isUploadedFile(file)) throw new GatewayError('invalid_value', { param: 'input_reference', params: { detail: 'it must be an uploaded file, not a text field.' } });
    if (!IMAGE_TYPES.test(file.contentType) && !/\.(png|jpe?g|webp|gif)$/i.test(file.filename)) {
      throw new GatewayError('invalid_value', { param: 'input_reference', params: { detail: `the file must be an image (PNG, JPEG or WebP), not ${file.contentType}.` } });
    }
    // Read by the video operation (asynchronously), not here on the request path.
    request.imageUpload = { path: file.path, mediaType: IMAGE_TYPES.test(file.contentType) ? file.contentType : 'image/png', filename: file.filename };
  }
  if (request.prompt === undefined && request.imageUpload === undefined) {
    throw new GatewayError('missing_required_parameter', { param: 'prompt' });
  }
  return request;
}

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

/** A task as OpenAI's video object. */
export function videoObject(task: VideoTask, asked: Asked | undefined): Record<string, unknown> {
  return {
    id: task.id,
    object: 'video',
    model: task.model,
    status: task.status,
    progress: task.status === 'completed' ? 100 : Math.max(0, Math.min(100, Math.round(task.progress))),
    created_at: seconds(task.createdAt),
    completed_at: task.status === 'completed' || task.status === 'failed' ? seconds(task.completedAt ?? task.updatedAt) : null,
    expires_at: null,
    // Always a duration: the vendor's once it reports one, else what was asked, else the estimate charged.
    seconds: String(task.seconds ?? asked?.seconds ?? (task.estimateSeconds > 0 ? task.estimateSeconds : DEFAULT_VIDEO_SECONDS)),
    size: task.size ?? asked?.size ?? null,
    prompt: asked?.prompt ?? null,
    remixed_from_video_id: null,
    error: task.status === 'failed' ? { code: task.error?.code ?? 'video_generation_failed', message: task.error?.message ?? 'The video could not be generated.' } : null,
    ...(task.metadata ? { metadata: task.metadata } : {}),
  };
}

/** Remembers what each create asked (bounded: the oldest are forgotten first). */
class AskedMemory {
  private readonly map = new Map<string, Asked>();
  constructor(private readonly limit = 10_000) {}
  set(id: string, asked: Asked): void {
    this.map.set(id, asked);
    if (this.map.size > this.limit) this.map.delete(this.map.keys().next().value as string);
  }
  get(id: string): Asked | undefined {
    return this.map.get(id);
  }
}

export function videoRoutes(engine: () => VideoEngine): Array<CallRoute<'video'> | HandlerRoute> {
  const asked = new AskedMemory();
  const create: CallRoute<'video'> = {
    kind: 'call',
    method: 'POST',
    path: PATH,
    operation: 'video',
    body: 'multipart',
    schema: createSchema,
    parse: ({ body }) => ({ model: typeof body.model === 'string' && body.model ? body.model : DEFAULT_MODEL, stream: false }),
    toCanonical: (body) => toVideoRequest(body) as never,
    render(response, call) {
      if (response.kind !== 'json') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a video submission' } });
      const task = response.body as VideoTask;
      const body = call.body;
      const wanted: Asked = {
        seconds: typeof body.seconds === 'string' ? body.seconds : undefined,
        size: typeof body.size === 'string' ? body.size : undefined,
        prompt: typeof body.prompt === 'string' ? body.prompt : undefined,
      };
      asked.set(task.id, wanted);
      return { status: 200, body: videoObject(task, wanted) };
    },
  };

  const retrieve: HandlerRoute = {
    kind: 'handler',
    method: 'GET',
    path: `${PATH}/:video_id`,
    async handle(ctx, input, helpers): Promise<FormatReply> {
      const id = input.params.video_id ?? '';
      const task = await engine().get(id, helpers.key?.id ?? null, ctx.signal, ctx);
      if (!task) throw new GatewayError('task_not_found', { params: { id }, param: 'video_id' });
      return { body: videoObject(task, asked.get(task.id)) };
    },
  };

  const content: HandlerRoute = {
    kind: 'handler',
    method: 'GET',
    path: `${PATH}/:video_id/content`,
    async handle(ctx, input, helpers): Promise<FormatReply> {
      const id = input.params.video_id ?? '';
      const variant = input.query.variant;
      if (variant !== undefined && variant !== 'video') {
        throw new GatewayError('invalid_value', { param: 'variant', params: { detail: "only 'video' is available through this gateway." } });
      }
      return contentReply(engine(), id, helpers.key?.id ?? null, ctx, VIDEO_WORDING);
    },
  };

  return [create, retrieve, content];
}

export default definePlugin({
  name: FORMAT_ID,
  version: '0.1.0',
  description: 'POST /v1/videos (multipart), GET /v1/videos/{id} and GET /v1/videos/{id}/content in OpenAI\'s video shape.',
  apply(api) {
    const engine = videoEngineOf(api);
    api.registerFormat({ id: FORMAT_ID, routes: videoRoutes(() => engine) });
  },
});
