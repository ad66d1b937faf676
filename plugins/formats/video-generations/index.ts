import { checkVideoImage, definePlugin, MAX_VIDEO_SECONDS, MAX_VIDEOS_PER_REQUEST, type CallRoute, type JsonSchema, type VideoRequest, type VideoTask } from '../../../core/index.js';
import { videoEngineOf } from '../../video-tasks/index.js';
import { taskRoutes } from '../../video-tasks/public.js';

const PATH = '/v1/video/generations';

/** POST /v1/video/generations: every field the spec names, with its type and range. */
export const videoGenerationsSchema: JsonSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string', minLength: 1 },
    prompt: { type: 'string' },
    image: { type: 'string', minLength: 1 },
    duration: { type: 'number', exclusiveMinimum: 0, maximum: MAX_VIDEO_SECONDS },
    width: { type: 'integer', minimum: 1 },
    height: { type: 'integer', minimum: 1 },
    fps: { type: 'integer', minimum: 1 },
    seed: { type: 'integer' },
    n: { type: 'integer', minimum: 1, maximum: MAX_VIDEOS_PER_REQUEST },
    response_format: { type: 'string' },
    user: { type: 'string' },
    metadata: { type: 'object' },
  },
};

/**
 * Fields sent to no back end: a vendor would post its own task id and video address to a
 * client's `callback_url`, past the gateway (which polls instead), and an `external_task_id` is
 * unique per vendor account, so one client's could collide with another's. Named as losses.
 */
const NEVER_SENT: ReadonlySet<string> = new Set([
  'callback_url',
  'external_task_id',
  // Fields the spec's body names that no video back end has a place for: the answer's `url` is
  // always the gateway's content path, and the end user's id goes nowhere. Named, not dropped
  // unseen.
  'response_format',
  'user',
]);

/** The spec's body as the canonical video request (fields it does not name ride along in `extra`, but NEVER_SENT). */
export function videoGenerationsToCanonical(body: Record<string, unknown>): VideoRequest {
  const known = new Set(Object.keys(videoGenerationsSchema.properties as object));
  const extra: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [name, value] of Object.entries(body)) {
    if (NEVER_SENT.has(name)) {
      if (value !== undefined && value !== null && value !== '') dropped.push(name);
    } else if (!known.has(name)) extra[name] = value;
  }
  const request: VideoRequest = { model: String(body.model ?? '') };
  if (dropped.length > 0) request.dropped = dropped;
  if (typeof body.prompt === 'string') request.prompt = body.prompt;
  if (typeof body.image === 'string') request.image = checkVideoImage(body.image, 'image');
  if (typeof body.duration === 'number') request.duration = body.duration;
  if (typeof body.width === 'number') request.width = body.width;
  if (typeof body.height === 'number') request.height = body.height;
  if (typeof body.fps === 'number') request.fps = body.fps;
  if (typeof body.seed === 'number') request.seed = body.seed;
  if (typeof body.n === 'number') request.n = body.n;
  if (body.metadata && typeof body.metadata === 'object') request.metadata = body.metadata as Record<string, unknown>;
  // Vendor fields the canonical request has a place for (Kling's names, as its own format sends them).
  if (typeof extra.negative_prompt === 'string') {
    request.negativePrompt = extra.negative_prompt;
    delete extra.negative_prompt;
  }
  if (typeof extra.aspect_ratio === 'string') {
    request.aspectRatio = extra.aspect_ratio;
    delete extra.aspect_ratio;
  }
  if (Object.keys(extra).length > 0) request.extra = extra;
  return request;
}

/** The spec's "video task submission result": a new task is reported as `queued`. */
export function submissionResult(task: VideoTask): Record<string, unknown> {
  return { task_id: task.id, status: 'queued' };
}

const submit: CallRoute<'video'> = {
  kind: 'call',
  method: 'POST',
  path: PATH,
  operation: 'video',
  schema: videoGenerationsSchema,
  parse: ({ body }) => ({ model: typeof body.model === 'string' ? body.model : '', stream: false }),
  toCanonical: (body) => videoGenerationsToCanonical(body) as never,
  render: (response) => ({ body: submissionResult((response as { body: unknown }).body as VideoTask) }),
};

/**
 * Video generation in the `/v1/video/generations` shape: submit a task, poll it by id, fetch
 * the finished video through the gateway (`url` points there). The routes are made per gateway
 * (each has its own task engine).
 */
export default definePlugin({
  name: 'video-generations',
  version: '0.1.0',
  description: 'POST /v1/video/generations and GET /v1/video/generations/{task_id}.',
  apply(api) {
    const engine = videoEngineOf(api);
    api.registerFormat({ id: 'video-generations', routes: [submit, ...taskRoutes(() => engine, PATH)] });
  },
});
