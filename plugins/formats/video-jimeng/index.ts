import {
  checkVideoImage,
  definePlugin,
  GatewayError,
  isVideoTaskRead,
  type CallRoute,
  type HandlerRoute,
  type JsonSchema,
  type OperationHandler,
  type ProviderInstance,
  type RequestContext,
  type RouteInput,
  type Target,
  type VideoRequest,
  type VideoTask,
  type VideoTaskRead,
} from '../../../core/index.js';
import { videoEngineOf, type VideoEngine } from '../../video-tasks/index.js';
import { contentReply } from '../../video-tasks/public.js';

/**
 * Video generation in the Jimeng / Volcengine visual API's own shape, at the spec's neutral
 * path `/videob/` and the vendor's `/jimeng/`:
 *
 *   POST /videob/?Action=CVSync2AsyncSubmitTask&Version=…  {req_key, prompt, binary_data_base64, image_urls, seed, aspect_ratio, frames}
 *   POST /videob/?Action=CVSync2AsyncGetResult&Version=…   {req_key, task_id}
 *
 * Replies are `{code, message, data, request_id, status, time_elapsed}` as the vendor writes
 * them (`code` 10000 on success); `data.status` is one of in_queue, generating, done, not_found,
 * expired; `data.video_url` is the gateway's own content route for the task (the client's key
 * reads it), never the vendor's address. A missing or unknown Action, or a missing Version, is a
 * 400 error object; so is a body that is not valid.
 *
 * `req_key` is the model name routing uses. A submit goes through the whole pipeline to any
 * video back end (the task engine stores it for the calling key and meters it). A result read
 * shares the submit's method and path, so it is a call too: this format answers it from the
 * task store through a target of its own (the `video-tasks` pseudo back end) instead of a vendor.
 */

export const FORMAT_ID = 'video-jimeng';
export const SUBMIT = 'CVSync2AsyncSubmitTask';
export const RESULT = 'CVSync2AsyncGetResult';
export const SUCCESS = 10000;
/** The id of the pseudo back end that answers result reads from the task store. */
export const TASK_READER_ID = 'video-tasks';
const PREFIXES = ['/videob', '/jimeng'] as const;

export const jimengSchema: JsonSchema = {
  type: 'object',
  required: ['req_key'],
  properties: {
    req_key: { type: 'string', minLength: 1 },
    prompt: { type: 'string' },
    binary_data_base64: {
      type: 'array',
      maxItems: 2,
      items: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9+/\\s]+={0,2}\\s*$', 'x-message': 'each item must be Base64 image data (no data: prefix)' },
    },
    image_urls: { type: 'array', maxItems: 2, items: { type: 'string', pattern: '^https?://' } },
    seed: { type: 'integer' },
    aspect_ratio: { enum: ['16:9', '4:3', '1:1', '3:4', '9:16', '21:9'] },
    frames: { enum: [121, 241] },
    task_id: { type: 'string', minLength: 1 },
  },
};

/** The Action of a call: 400 when it is missing or unknown, or Version is missing. */
export function actionOf(query: RouteInput['query']): typeof SUBMIT | typeof RESULT {
  const action = query.Action;
  const version = query.Version;
  if (action === undefined || action === '') throw new GatewayError('missing_required_parameter', { param: 'Action' });
  if (action !== SUBMIT && action !== RESULT) {
    throw new GatewayError('invalid_value', { param: 'Action', params: { detail: `'${String(action)}' is not an Action of this endpoint (${SUBMIT} or ${RESULT}).` } });
  }
  if (version === undefined || version === '') throw new GatewayError('missing_required_parameter', { param: 'Version' });
  if (typeof version !== 'string') throw new GatewayError('invalid_value', { param: 'Version', params: { detail: 'give it once.' } });
  return action;
}

/** The canonical form of a result read: not a video request, a lookup for the task reader. */
type Lookup = VideoTaskRead;
const isLookup = isVideoTaskRead;

/** A submit body as the canonical video request. */
export function toVideoRequest(body: Record<string, unknown>): VideoRequest {
  const request: VideoRequest = { model: String(body.req_key) };
  if (typeof body.prompt === 'string' && body.prompt !== '') request.prompt = body.prompt;
  const images = [
    // Checked as every video format checks an image (valid base64 with data), before any charge.
    ...((body.binary_data_base64 as string[] | undefined) ?? []).map((b, i) => checkVideoImage(b.replace(/\s+/g, ''), `binary_data_base64[${i}]`)),
    ...((body.image_urls as string[] | undefined) ?? []),
  ];
  if (images[0]) request.image = images[0];
  if (images[1]) request.imageTail = images[1];
  if (request.prompt === undefined && request.image === undefined) {
    throw new GatewayError('invalid_request', { param: 'prompt', params: { detail: 'A task needs a prompt or an image (binary_data_base64 or image_urls).' } });
  }
  if (typeof body.seed === 'number') request.seed = body.seed;
  if (typeof body.aspect_ratio === 'string') request.aspectRatio = body.aspect_ratio;
  if (typeof body.frames === 'number') request.duration = Math.round((body.frames - 1) / 24);
  return request;
}

/** A request id in Volcengine's style (a time stamp and hex). */
function requestIdOf(rc: RequestContext): string {
  const stamp = new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return `${stamp}${rc.id.replace(/[^0-9a-fA-F]/g, '').slice(0, 18).toUpperCase()}`;
}

function elapsed(rc: RequestContext): string {
  return `${(performance.now() - rc.startedAt).toFixed(1)}ms`;
}

function envelope(rc: RequestContext, code: number, message: string, data: unknown): Record<string, unknown> {
  return { code, message, data, request_id: requestIdOf(rc), status: code, time_elapsed: elapsed(rc) };
}

/** The prefix the client called (`/videob` or `/jimeng`), for the content URL. */
function prefixOf(rc: RequestContext): string {
  const path = rc.path;
  return PREFIXES.find((p) => path.startsWith(`${p}/`)) ?? PREFIXES[0];
}

/** A task as a GetResult answer: the vendor's five states, the gateway's URL when done. */
export function resultOf(task: VideoTask | undefined, rc: RequestContext, contentUrl: (task: VideoTask) => string): Record<string, unknown> {
  if (!task) return envelope(rc, SUCCESS, 'Success', { status: 'not_found', video_url: '' });
  switch (task.status) {
    case 'queued':
      return envelope(rc, SUCCESS, 'Success', { task_id: task.id, status: 'in_queue', video_url: '' });
    case 'in_progress':
      return envelope(rc, SUCCESS, 'Success', { task_id: task.id, status: 'generating', video_url: '' });
    case 'completed':
      return envelope(rc, SUCCESS, 'Success', { task_id: task.id, status: 'done', video_url: contentUrl(task) });
    case 'failed': {
      const code = task.error?.code ?? '';
      // Gone at the vendor, or timed out waiting for it: the vendor's own word is `expired`.
      if (code === 'expired' || code === 'timeout') return envelope(rc, SUCCESS, 'Success', { task_id: task.id, status: 'expired', video_url: '' });
      if (code === 'not_found') return envelope(rc, SUCCESS, 'Success', { task_id: task.id, status: 'not_found', video_url: '' });
      // Failed in generation: the vendor answers a failed task with its own code and message.
      const numeric = /^\d{5}$/.test(code) ? Number(code) : 50500;
      return envelope(rc, numeric, task.error?.message || 'Internal Error', { task_id: task.id, status: 'done', video_url: '' });
    }
  }
}

export function jimengRoutes(engine: () => VideoEngine): Array<CallRoute<'video'> | HandlerRoute> {
  const contentUrl = (rc: RequestContext) => (task: VideoTask) => `${prefixOf(rc)}/tasks/${encodeURIComponent(task.id)}/content`;
  const calls: Array<CallRoute<'video'>> = PREFIXES.map((prefix) => ({
    kind: 'call',
    method: 'POST',
    path: `${prefix}/`,
    operation: 'video',
    schema: jimengSchema,
    // Volcengine's clients name the model `req_key`.
    clientParams: { model: 'req_key' },
    parse(input) {
      actionOf(input.query);
      return { model: typeof input.body.req_key === 'string' ? input.body.req_key : '', stream: false };
    },
    toCanonical(body, input) {
      if (actionOf(input.query) === SUBMIT) return toVideoRequest(body) as never;
      if (typeof body.task_id !== 'string') throw new GatewayError('missing_required_parameter', { param: 'task_id' });
      return { kind: 'video-task-read', taskId: body.task_id } satisfies Lookup as never;
    },
    render(response, _call, rc) {
      if (response.kind !== 'json') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a video submission' } });
      const body = response.body as { lookup?: true; task?: VideoTask } | VideoTask;
      if ('lookup' in body && body.lookup) return { body: resultOf(body.task, rc, contentUrl(rc)) };
      return { body: envelope(rc, SUCCESS, 'Success', { task_id: (body as VideoTask).id }) };
    },
  }));

  const contents: HandlerRoute[] = PREFIXES.map((prefix) => ({
    kind: 'handler',
    method: 'GET',
    path: `${prefix}/tasks/:task_id/content`,
    handle: (ctx, input, helpers) => contentReply(engine(), input.params.task_id ?? '', helpers.key?.id ?? null, ctx),
  }));
  return [...calls, ...contents];
}

/** The pseudo back end that answers result reads: the task, for the calling key only. */
export function taskReader(engine: () => VideoEngine): ProviderInstance {
  const video: OperationHandler<'video'> = async (request, context) => {
    const lookup = request.body as unknown;
    if (!isLookup(lookup)) throw new GatewayError('internal_error', { params: { requestId: context.requestId } });
    const task = await engine().get(lookup.taskId, context.request.key?.id ?? null, context.signal);
    return { kind: 'json', status: 200, body: { lookup: true, task } };
  };
  return { id: TASK_READER_ID, type: TASK_READER_ID, models: [], operations: { video } };
}

export default definePlugin({
  name: FORMAT_ID,
  version: '0.1.0',
  description: 'POST /videob/ and /jimeng/ (?Action=CVSync2AsyncSubmitTask | CVSync2AsyncGetResult) in the Jimeng / Volcengine visual API shape.',
  apply(api) {
    const engine = videoEngineOf(api);
    api.registerFormat({ id: FORMAT_ID, routes: jimengRoutes(() => engine) });
    const reader = taskReader(() => engine);
    // A result read goes to the task store, before routing looks for a vendor (the bail hook's
    // first answer wins: this tap runs ahead of the routing plugin's).
    api.hooks.resolveTargets.tap({ name: FORMAT_ID, stage: -100 }, (ctx, call): Target[] | undefined => {
      if (ctx.format !== FORMAT_ID || !isLookup(call.canonical)) return undefined;
      return [{ provider: reader, model: call.model, weight: 1, priority: 0 }];
    });
  },
});
