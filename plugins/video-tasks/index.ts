import { definePlugin, secretsOfConfig, DEFAULT_TIMEOUTS, type Timeouts, type Call, type PluginApi, type RequestContext, type Usage, type VideoRequest, type VideoSubmission } from '../../core/index.js';
import { submissionContext, VIDEO_ENGINE_DEFAULTS, VideoEngine, type VideoEngineOptions } from './engine.js';

export { VideoEngine, taskView, VIDEO_ENGINE_DEFAULTS, type VideoEngineOptions } from './engine.js';

const PLUGIN_NAME = 'video-tasks';

/** One engine per gateway, keyed by the gateway's hooks (the stores are opened only when used). */
const engines = new WeakMap<object, VideoEngine>();

function isSubmission(body: unknown): body is VideoSubmission {
  return !!body && typeof body === 'object' && typeof (body as VideoSubmission).vendorTaskId === 'string';
}

/** The `video-tasks` entry of `plugins:`, if the operator listed one with options. */
function configuredOptions(api: PluginApi<any>): Partial<VideoEngineOptions> {
  for (const entry of api.config.plugins ?? []) {
    if (typeof entry === 'object' && entry.name === PLUGIN_NAME) return (entry.options ?? {}) as Partial<VideoEngineOptions>;
  }
  return {};
}

/**
 * The gateway's video task engine, made the first time any video format (or this plugin) asks.
 * It turns the answer of every `video` call into a stored task (so a format's render gets a
 * VideoTask), runs the background poller from `setup` to `close`, and answers task lookups.
 * Video formats need not list this plugin: it is only where its options are set.
 */
export function videoEngineOf(api: PluginApi<any>): VideoEngine {
  let engine = engines.get(api.hooks);
  if (engine) return engine;
  const made = new VideoEngine({
    get tasks() {
      return api.stores.tasks;
    },
    provider: (id) => api.providers.get(id),
    pricing: api.config.pricing ?? {},
    logger: api.logger,
    secrets: secretsOfConfig(api.config),
    timeouts: (provider) => {
      const entry = api.config.providers.find((p) => p.id === provider);
      return { ...DEFAULT_TIMEOUTS, ...((entry?.timeouts as Partial<Timeouts> | undefined) ?? {}) };
    },
    ownOrigins: (provider) => {
      const entry = api.config.providers.find((p) => p.id === provider);
      const base = typeof entry?.baseUrl === 'string' ? entry.baseUrl : undefined;
      try {
        return base ? [new URL(base).origin] : [];
      } catch {
        return [];
      }
    },
    options: configuredOptions(api),
  });
  engine = made;
  engines.set(api.hooks, made);
  // The call (its canonical body is filled in after validation) of each video request.
  const calls = new WeakMap<RequestContext, Call>();
  api.hooks.validate.tap(PLUGIN_NAME, (ctx, call) => {
    if (call.operation === 'video') calls.set(ctx, call);
  });
  // Before the vendor is asked, the task is on disk (no vendor id yet): a submit the vendor
  // accepts is never lost to a crash, and one lost mid-submit is failed by the poller.
  const reserved = new WeakMap<RequestContext, string>();
  api.hooks.beforeUpstream.tap(PLUGIN_NAME, (request, ctx) => {
    if (ctx.operation === 'video' && !reserved.has(ctx)) {
      reserved.set(ctx, made.reserve({ request: calls.get(ctx)?.canonical as Partial<VideoRequest> | undefined, ...submissionContext(ctx) }));
    }
    return request;
  });
  api.hooks.onError.tap(PLUGIN_NAME, (_error, ctx) => {
    const id = reserved.get(ctx);
    if (id) made.discard(id);
  });
  // The submit answered: the back end's submission becomes a task owned by the calling key.
  api.hooks.afterUpstream.tap(PLUGIN_NAME, (response, ctx) => {
    if (ctx.operation !== 'video') return response;
    const id = reserved.get(ctx);
    if (response.kind !== 'json' || !isSubmission(response.body)) {
      if (id) made.discard(id);
      return response;
    }
    const task = made.create({
      reserved: id,
      // The submit's charge goes into the ledger with the task, in one transaction: a crash right
      // after the answer cannot leave a task whose refund takes back a charge never written.
      call: { requestId: ctx.id, latencyMs: performance.now() - ctx.startedAt },
      submission: response.body,
      usage: response.usage as Usage | undefined,
      request: calls.get(ctx)?.canonical as Partial<VideoRequest> | undefined,
      ...submissionContext(ctx),
    });
    ctx.usageRecorded = true;
    return { ...response, body: task };
  });
  api.hooks.setup.tap(PLUGIN_NAME, () => made.start());
  api.hooks.close.tapPromise(PLUGIN_NAME, () => made.stop());
  return made;
}

/**
 * Options of the video task engine (poll interval and backoff, staleness of a GET, the timeout
 * sweep). Listing it is optional: any video format starts the engine with the defaults.
 */
export default definePlugin<VideoEngineOptions>({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Video generation tasks: stored, polled in the background, metered and refunded.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      pollIntervalMs: { type: 'integer', minimum: 10, maximum: 3_600_000, default: VIDEO_ENGINE_DEFAULTS.pollIntervalMs },
      maxPollIntervalMs: { type: 'integer', minimum: 10, maximum: 86_400_000, default: VIDEO_ENGINE_DEFAULTS.maxPollIntervalMs },
      staleAfterMs: { type: 'integer', minimum: 0, maximum: 86_400_000, default: VIDEO_ENGINE_DEFAULTS.staleAfterMs },
      timeoutMs: { type: 'integer', minimum: 1000, maximum: 30 * 86_400_000, default: VIDEO_ENGINE_DEFAULTS.timeoutMs },
      batchSize: { type: 'integer', minimum: 1, maximum: 1000, default: VIDEO_ENGINE_DEFAULTS.batchSize },
      pollTimeoutMs: { type: 'integer', minimum: 10, maximum: 600_000, default: VIDEO_ENGINE_DEFAULTS.pollTimeoutMs },
      submitGraceMs: { type: 'integer', minimum: 1000, maximum: 86_400_000, default: VIDEO_ENGINE_DEFAULTS.submitGraceMs },
      downloadPrivateHosts: { type: 'array', items: { type: 'string', minLength: 1 }, default: [] },
    },
  },
  apply(api) {
    videoEngineOf(api).options = { ...VIDEO_ENGINE_DEFAULTS, ...api.options };
  },
});
