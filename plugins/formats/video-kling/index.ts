import { checkVideoImage, definePlugin, GatewayError, MAX_VIDEO_SECONDS, type CallRoute, type JsonSchema, type VideoRequest, type VideoTask } from '../../../core/index.js';
import { videoEngineOf } from '../../video-tasks/index.js';
import { taskRoutes } from '../../video-tasks/public.js';
import { submissionResult, videoGenerationsSchema, videoGenerationsToCanonical } from '../video-generations/index.js';

/** The spec's neutral path and the vendor's own. */
const PATHS = ['/videoa/v1/videos/image2video', '/kling/v1/videos/image2video'] as const;

const base = videoGenerationsSchema.properties as Record<string, JsonSchema>;

/**
 * The `/v1/video/generations` body, also accepting the vendor's native names: model_name,
 * image, image_tail, negative_prompt, mode, duration as text ("5"), aspect_ratio, cfg_scale.
 * One of model / model_name is needed.
 */
export const videoKlingSchema: JsonSchema = {
  type: 'object',
  properties: {
    ...base,
    model_name: { type: 'string', minLength: 1 },
    image_tail: { type: 'string', minLength: 1 },
    negative_prompt: { type: 'string', maxLength: 2500 },
    prompt: { type: 'string', maxLength: 2500 },
    mode: { enum: ['std', 'pro'] },
    duration: {
      type: ['number', 'string'],
      exclusiveMinimum: 0,
      maximum: MAX_VIDEO_SECONDS,
      pattern: '^[0-9]+(\\.[0-9]+)?$',
      'x-message': `'duration' must be a number of seconds up to ${MAX_VIDEO_SECONDS}, as a number or as text ('5').`,
    },
    aspect_ratio: { enum: ['16:9', '9:16', '1:1'] },
    cfg_scale: { type: 'number', minimum: 0, maximum: 1 },
    callback_url: { type: 'string' },
    external_task_id: { type: 'string' },
  },
  if: { not: { required: ['model'] } },
  then: { required: ['model_name'] },
};

export function videoKlingToCanonical(body: Record<string, unknown>): VideoRequest {
  const { model_name, image_tail, negative_prompt, mode, duration, aspect_ratio, cfg_scale, ...rest } = body;
  const request = videoGenerationsToCanonical({ ...rest, model: rest.model ?? model_name });
  if (typeof duration === 'number') request.duration = duration;
  else if (typeof duration === 'string') request.duration = Number(duration);
  // The schema bounds a number; a duration written as text is bounded here.
  if (request.duration !== undefined && !(request.duration > 0 && request.duration <= MAX_VIDEO_SECONDS)) {
    throw new GatewayError('invalid_value', { param: 'duration', params: { detail: `a video lasts more than 0 and at most ${MAX_VIDEO_SECONDS} seconds.` } });
  }
  // The endpoint is image-to-video: without an image a back end would make (and charge) a text-to-video task.
  if (request.image === undefined) throw new GatewayError('missing_required_parameter', { param: 'image' });
  if (typeof image_tail === 'string') request.imageTail = checkVideoImage(image_tail, 'image_tail');
  if (typeof negative_prompt === 'string') request.negativePrompt = negative_prompt;
  if (typeof mode === 'string') request.mode = mode;
  if (typeof aspect_ratio === 'string') request.aspectRatio = aspect_ratio;
  if (typeof cfg_scale === 'number') request.cfgScale = cfg_scale;
  return request;
}

function modelOf(body: Record<string, unknown>): string {
  if (typeof body.model === 'string') return body.model;
  return typeof body.model_name === 'string' ? body.model_name : '';
}

const submit = (path: string): CallRoute<'video'> => ({
  kind: 'call',
  method: 'POST',
  path,
  operation: 'video',
  schema: videoKlingSchema,
  parse: ({ body }) => ({ model: modelOf(body), stream: false }),
  // Kling's clients name the model `model_name` (`model` is taken too, as the gateway's alias).
  clientParams: { model: 'model_name' },
  toCanonical: (body) => videoKlingToCanonical(body) as never,
  render: (response) => ({ body: submissionResult((response as { body: unknown }).body as VideoTask) }),
});

/**
 * Image-to-video in the vendor's shape, at the spec's neutral path (`/videoa/...`) and the
 * vendor's own (`/kling/...`): same answers as `/v1/video/generations` (`{task_id, status}`
 * on submit; GET `<path>/{task_id}` for the status result, `<path>/{task_id}/content` for the video).
 */
export default definePlugin({
  name: 'video-kling',
  version: '0.1.0',
  description: 'POST /videoa/v1/videos/image2video and /kling/v1/videos/image2video (+ GET of the task).',
  apply(api) {
    const engine = videoEngineOf(api);
    api.registerFormat({ id: 'video-kling', routes: PATHS.flatMap((path) => [submit(path), ...taskRoutes(() => engine, path)]) });
  },
});
