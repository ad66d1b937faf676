import {
  AsyncParallelHook,
  AsyncSeriesBailHook,
  AsyncSeriesHook,
  AsyncSeriesWaterfallHook,
  SyncBailHook,
  SyncHook,
  SyncWaterfallHook,
} from 'tapable';
import type { AttemptOutcome, Call, RequestContext, Target } from './context.js';
import type { GatewayError } from './errors.js';
import type { UpstreamRequest, UpstreamResponse, Usage } from './operations.js';

/** A chunk on its way to the client: the canonical chunk of the call's operation. */
export type StreamChunk = unknown;

/**
 * THE list of lifecycle hooks. Created once per gateway; never per request. Read
 * docs/hooks.md for when each one runs and what a tap may do.
 */
export function createHooks() {
  return Object.freeze({
    // application lifecycle
    /** After every plugin's apply(), before the port opens: open stores, compile schemas. */
    setup: new AsyncSeriesHook<[]>([]),
    /** The server is listening. */
    ready: new AsyncSeriesHook<[{ url: string }]>(['server']),
    /** Shutdown, after in-flight requests drained: flush and close. */
    close: new AsyncSeriesHook<[]>([]),

    // request lifecycle
    /**
     * A request matched a format route; its body is not read yet (so an unauthenticated client
     * cannot make the gateway read a large body). Throw a GatewayError to stop it (auth, limits).
     */
    onRequest: new AsyncSeriesHook<[RequestContext]>(['ctx']),
    /** Check the call's body. Throw a GatewayError (invalid_value ...) to stop it. */
    validate: new AsyncSeriesHook<[RequestContext, Call]>(['ctx', 'call']),
    /** Decide which back ends to try, in order. The first tap that answers wins. */
    resolveTargets: new AsyncSeriesBailHook<[RequestContext, Call], Target[] | undefined>(['ctx', 'call']),
    /** Rewrite what is sent upstream; return the request to send. */
    beforeUpstream: new AsyncSeriesWaterfallHook<[UpstreamRequest, RequestContext]>(['request', 'ctx']),
    /** One attempt at one target ended: answered (headers in) or failed. Sync, cheap: health tracking. */
    onAttempt: new SyncHook<[AttemptOutcome, RequestContext]>(['attempt', 'ctx']),
    /**
     * An attempt failed with a retryable error and another target is left: may the call go on?
     * A tap that answers false stops it (a retry budget); no answer means yes.
     */
    shouldRetry: new SyncBailHook<[GatewayError, RequestContext], boolean | undefined>(['error', 'ctx']),
    /** Rewrite what came back; return the response to render. */
    afterUpstream: new AsyncSeriesWaterfallHook<[UpstreamResponse, RequestContext]>(['response', 'ctx']),
    /** Each streamed chunk before it is rendered. Runs per chunk: keep it cheap and synchronous. */
    onStreamChunk: new SyncWaterfallHook<[StreamChunk, RequestContext]>(['chunk', 'ctx']),
    /** Token usage is known. Observers only: the reply never waits for them. */
    onUsage: new AsyncParallelHook<[Usage, RequestContext]>(['usage', 'ctx']),
    /**
     * The response was sent in full (or the client went away). Observers only, never awaited by
     * the reply; run one after another in tap order, so a tap sees what earlier ones settled
     * (metering's usage of a stream the back end gave none for, before the request log's row).
     */
    onResponse: new AsyncSeriesHook<[RequestContext]>(['ctx']),
    /** The request failed with this error, before it is rendered. */
    onError: new AsyncSeriesHook<[GatewayError, RequestContext]>(['error', 'ctx']),
  });
}

export type GatewayHooks = ReturnType<typeof createHooks>;
export type HookName = keyof GatewayHooks;

type TapMethod = 'tap' | 'tapAsync' | 'tapPromise';
/** A hook as a plugin sees it: it can tap, never call. */
export type TapOnly<H> = Pick<H, Extract<keyof H, TapMethod>>;
export type PluginHooks = { readonly [K in HookName]: TapOnly<GatewayHooks[K]> };

/**
 * The hooks as handed to plugins: tap methods only, so no plugin can fire a hook itself. On an
 * async hook, `tap` is routed through `tapPromise`, so a tap written as an async function is
 * awaited and its failure reaches the pipeline instead of becoming an unhandled rejection.
 */
export function tapOnly(hooks: GatewayHooks): PluginHooks {
  const view = {} as Record<string, unknown>;
  for (const name of Object.keys(hooks) as HookName[]) {
    const hook = hooks[name] as unknown as Record<TapMethod, ((...args: unknown[]) => void) | undefined>;
    const facade: Record<string, unknown> = {};
    // Sync hooks have tapAsync/tapPromise methods that only throw: expose `tap` alone there.
    const isAsync = !(hook as object).constructor.name.startsWith('Sync');
    for (const method of isAsync ? (['tap', 'tapAsync', 'tapPromise'] as const) : (['tap'] as const)) {
      const fn = hook[method];
      if (typeof fn !== 'function') continue;
      facade[method] =
        method === 'tap' && isAsync
          ? (options: unknown, tapFn: (...args: unknown[]) => unknown) => hook.tapPromise!.call(hook, options, async (...args: unknown[]) => tapFn(...args))
          : fn.bind(hook);
    }
    view[name] = Object.freeze(facade);
  }
  return Object.freeze(view) as PluginHooks;
}
