import { TapAnsweredNull } from './tap-answered-null.js';
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
    /** Rewrite what is sent upstream; return the request to send (undefined: the one given, unchanged). */
    beforeUpstream: new AsyncSeriesWaterfallHook<[UpstreamRequest, RequestContext], UpstreamRequest | undefined>(['request', 'ctx']),
    /** One attempt at one target ended: answered (headers in) or failed. Sync, cheap: health tracking. */
    onAttempt: new SyncHook<[AttemptOutcome, RequestContext]>(['attempt', 'ctx']),
    /**
     * An attempt failed with a retryable error and another target is left: may the call go on?
     * A tap that answers false stops it (a retry budget); no answer means yes.
     */
    shouldRetry: new SyncBailHook<[GatewayError, RequestContext], boolean | undefined>(['error', 'ctx']),
    /** Rewrite what came back; return the response to render (undefined: the one given, unchanged). */
    afterUpstream: new AsyncSeriesWaterfallHook<[UpstreamResponse, RequestContext], UpstreamResponse | undefined>(['response', 'ctx']),
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
          ? (options: unknown, tapFn: TapFn) => hook.tapPromise!.call(hook, options, direct(async (...args: unknown[]) => tapFn(...args), tapFn))
          : fn.bind(hook);
    }
    view[name] = Object.freeze(facade);
  }
  return Object.freeze(view) as PluginHooks;
}

// ---------------------------------------------------------------------------------------------
// Calling the request hooks

type TapFn = (...args: unknown[]) => unknown;

/** Where a `tap` on an async hook keeps the plugin's own function, beside tapable's async wrapper. */
const DIRECT = Symbol('switchyard.directTap');

function direct(wrapper: TapFn, original: TapFn): TapFn {
  (wrapper as TapFn & { [DIRECT]?: TapFn })[DIRECT] = original;
  return wrapper;
}

interface CallableHook {
  readonly taps: ReadonlyArray<{ type: string; fn: unknown; name: string }>;
  readonly interceptors: readonly unknown[];
  promise(...args: unknown[]): Promise<unknown>;
}

/** Where a hook keeps its taps as plain functions (a property of the hook: no WeakMap lookup per call). */
const COMPILED = Symbol('switchyard.compiledTaps');

interface Compiled {
  count: number;
  fns: TapFn[] | null;
  /** Each tap's name (its plugin's), in the order of `fns`. */
  names: string[];
}

/** A hook's taps as plain functions (null when tapable must call them: callback taps, interceptors), and their names. */
function compiledOf(hook: CallableHook): Compiled {
  const taps = hook.taps;
  const holder = hook as CallableHook & { [COMPILED]?: Compiled };
  let entry = holder[COMPILED];
  // tapable only ever adds taps: the count says whether the list changed.
  if (!entry || entry.count !== taps.length || hook.interceptors.length > 0) {
    let fns: TapFn[] | null = [];
    for (const tap of taps) {
      const fn = tap.fn as TapFn & { [DIRECT]?: TapFn };
      if (tap.type === 'sync') fns.push(fn);
      else if (tap.type === 'promise') fns.push(fn[DIRECT] ?? fn);
      else fns = null;
      if (!fns) break;
    }
    entry = { count: taps.length, fns: hook.interceptors.length > 0 ? null : fns, names: taps.map((tap) => tap.name) };
    holder[COMPILED] = entry;
  }
  return entry;
}

/** The taps of a hook as plain functions, or null when tapable must call them (callback taps, interceptors). */
function tapsOf(hook: CallableHook): TapFn[] | null {
  return compiledOf(hook).fns;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}

/** The second argument of a hook that takes two (the request hooks take one or two). */
type Second<A extends unknown[]> = A extends [unknown, infer B] ? B : undefined;

/**
 * Call an async series hook's taps in tap order, as `hook.promise(a, b)` does, without making a
 * promise while every tap answers at once: a tap that returns one is awaited before the next
 * runs. Returns a promise only then (`undefined` when all answered synchronously); a tap that
 * throws throws here. The request path runs several hooks per call: most taps are synchronous.
 * (Arguments are passed one by one, not as a rest array: nothing is allocated per call.)
 */
export function callSeries<A extends [unknown] | [unknown, unknown]>(hook: AsyncSeriesHook<A>, a: A[0], b?: Second<A>): Promise<void> | undefined {
  const fns = tapsOf(hook as unknown as CallableHook);
  if (!fns) return (hook as unknown as CallableHook).promise(a, b) as Promise<void>;
  return seriesFrom(fns, 0, a, b);
}

function seriesFrom(fns: TapFn[], start: number, a: unknown, b: unknown): Promise<void> | undefined {
  for (let i = start; i < fns.length; i++) {
    const result = fns[i]!(a, b);
    if (isThenable(result)) return Promise.resolve(result).then(() => seriesFrom(fns, i + 1, a, b));
  }
  return undefined;
}

/** `hook.promise(value, b)` of an async waterfall hook, synchronous while its taps are. */
export function callWaterfall<T, B>(hook: AsyncSeriesWaterfallHook<[T, B], T | undefined>, value: T, b: B): T | Promise<T> {
  const { fns, names } = compiledOf(hook as unknown as CallableHook);
  if (!fns) return (hook as unknown as CallableHook).promise(value, b) as Promise<T>;
  return waterfallFrom(fns, names, 0, value, b);
}


function waterfallFrom<T>(fns: TapFn[], names: string[], start: number, value: T, b: unknown): T | Promise<T> {
  for (let i = start; i < fns.length; i++) {
    const result = fns[i]!(value, b);
    if (isThenable(result)) {
      return Promise.resolve(result).then((next) => {
        if (next === null) throw new TapAnsweredNull(names[i]!);
        return waterfallFrom(fns, names, i + 1, next !== undefined ? (next as T) : value, b);
      });
    }
    if (result === null) throw new TapAnsweredNull(names[i]!);
    if (result !== undefined) value = result as T;
  }
  return value;
}

/** `hook.promise(a, b)` of an async bail hook: the first answer that is not undefined, synchronous while its taps are. */
export function callBail<A extends [unknown] | [unknown, unknown], R>(hook: AsyncSeriesBailHook<A, R>, a: A[0], b?: Second<A>): R | undefined | Promise<R | undefined> {
  const fns = tapsOf(hook as unknown as CallableHook);
  if (!fns) return (hook as unknown as CallableHook).promise(a, b) as Promise<R | undefined>;
  return bailFrom<R>(fns, 0, a, b);
}

function bailFrom<R>(fns: TapFn[], start: number, a: unknown, b: unknown): R | undefined | Promise<R | undefined> {
  for (let i = start; i < fns.length; i++) {
    const result = fns[i]!(a, b);
    if (isThenable(result)) {
      return Promise.resolve(result).then((answer) => (answer !== undefined ? (answer as R) : bailFrom<R>(fns, i + 1, a, b)));
    }
    if (result !== undefined) return result as R;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Observers and lifecycle taps, each on its own

/** A tap that failed: the name it was tapped under (its plugin's, by convention) and what it threw. */
export type TapFailure = (tapName: string, error: unknown) => void;

/**
 * An observer hook (`onResponse`, `onError`) called in tap order as callSeries calls it, each tap
 * on its own: one that throws or rejects is reported through `failed` with its name, and the next
 * runs all the same. One plugin's bug cannot keep another's observer from running (metering's,
 * which records the call's cost and releases what its admission held).
 */
export function callObservers<A extends [unknown] | [unknown, unknown]>(hook: AsyncSeriesHook<A>, failed: TapFailure, a: A[0], b?: Second<A>): Promise<void> | undefined {
  const callable = hook as unknown as CallableHook;
  const { fns, names } = compiledOf(callable);
  // Through tapable (a callback tap, an interceptor): its taps cannot be told apart, so the whole
  // hook gets the time its taps would get together.
  if (!fns) return within(byTapable(callable, names, failed, a, b), names.join(', '), failed, OBSERVER_TAP_MS * Math.max(1, names.length));
  return observersFrom(fns, names, 0, failed, a, b);
}

/**
 * How long a series observer's tap (`onResponse`, `onError`) is waited for before the taps after
 * it run: one that never settles (a webhook that hangs) must not keep the built-in taps after it
 * from settling the call's cost, freeing its rate-limit slot and writing its log row, nor hold an
 * error reply for ever. It goes on running; it is reported as a TapTimeout.
 */
export const OBSERVER_TAP_MS = 5000;

function observersFrom(fns: TapFn[], names: string[], start: number, failed: TapFailure, a: unknown, b: unknown): Promise<void> | undefined {
  for (let i = start; i < fns.length; i++) {
    const result = observeOne(fns[i]!, names[i]!, failed, a, b);
    if (result) return within(result, names[i]!, failed).then(() => observersFrom(fns, names, i + 1, failed, a, b));
  }
  return undefined;
}

/** `running`, or `ms`, whichever ends first (the second reported as the tap's TapTimeout). */
function within(running: Promise<void>, name: string, failed: TapFailure, ms = OBSERVER_TAP_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      failed(name, new TapTimeout(ms));
      resolve();
    }, ms);
    timer.unref();
  });
  return Promise.race([running.finally(() => clearTimeout(timer)), late]);
}

/**
 * An async parallel observer hook (`onUsage`): every tap starts at once, each on its own (see
 * callObservers); the promise (made only when a tap returned one) settles when all have.
 */
export function callParallelObservers<A extends [unknown] | [unknown, unknown]>(hook: AsyncParallelHook<A>, failed: TapFailure, a: A[0], b?: Second<A>): Promise<void> | undefined {
  const callable = hook as unknown as CallableHook;
  const { fns, names } = compiledOf(callable);
  if (!fns) return byTapable(callable, names, failed, a, b);
  let pending: Promise<void>[] | undefined;
  for (let i = 0; i < fns.length; i++) {
    const result = observeOne(fns[i]!, names[i]!, failed, a, b);
    if (result) (pending ??= []).push(result);
  }
  return pending ? Promise.all(pending).then(() => undefined) : undefined;
}

/** One observer tap, on its own: a promise (that never rejects) when it returned one, else undefined; a failure is reported. */
function observeOne(fn: TapFn, name: string, failed: TapFailure, a: unknown, b: unknown): Promise<void> | undefined {
  let result: unknown;
  try {
    result = fn(a, b);
  } catch (error) {
    failed(name, error);
    return undefined;
  }
  return isThenable(result) ? Promise.resolve(result).then(() => undefined, (error: unknown) => failed(name, error)) : undefined;
}

/** A hook tapable must call (an interceptor, a callback tap): its taps are not told apart. */
function byTapable(hook: CallableHook, names: string[], failed: TapFailure, a: unknown, b: unknown): Promise<void> {
  return hook.promise(a, b).then(() => undefined, (error: unknown) => failed(names.join(', '), error));
}

/** A lifecycle tap that did not settle in the time it was given. */
export class TapTimeout extends Error {
  constructor(readonly ms: number) {
    super(`did not finish within ${ms} ms`);
  }
}

/**
 * A lifecycle hook's taps (`close`), one after another, each on its own and for at most `limitMs`:
 * one that throws, rejects or never settles is reported through `failed` with its name (a
 * TapTimeout for the last), and the next runs all the same. The wait holds the process open, so
 * a tap that never settles cannot end the process before what follows (the stores' last write).
 */
export async function callEachWithin(hook: AsyncSeriesHook<[]>, limitMs: number, failed: TapFailure): Promise<void> {
  for (const tap of (hook as unknown as CallableHook).taps) {
    const run = runTap(tap, []);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<TapTimeout>((resolve) => (timer = setTimeout(() => resolve(new TapTimeout(limitMs)), limitMs)));
    try {
      const outcome = await Promise.race([run, late]);
      if (outcome instanceof TapTimeout) failed(tap.name, outcome);
    } catch (error) {
      failed(tap.name, error);
    } finally {
      clearTimeout(timer);
    }
  }
}

/** One tap of any kind (sync, promise, callback), called with `args`: settles when it has. */
function runTap(tap: CallableHook['taps'][number], args: unknown[]): Promise<unknown> {
  const fn = tap.fn as (...args: unknown[]) => unknown;
  return new Promise<unknown>((resolve, reject) => {
    if (tap.type === 'async') fn(...args, (error: unknown) => (error ? reject(error) : resolve(undefined)));
    else resolve(fn(...args));
  });
}

/** A lifecycle tap that failed, named: what `switchyard start` prints. */
export class TapError extends Error {
  constructor(
    readonly tapName: string,
    hookName: string,
    cause: unknown,
  ) {
    super(`plugin '${tapName}' failed in its ${hookName} tap: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * A lifecycle hook (`setup`, `ready`) as `hook.promise(...args)` calls it, its taps one after
 * another; the first failure is thrown as a TapError naming the tap (its plugin) and the hook.
 */
export async function callNaming<A extends unknown[]>(hook: AsyncSeriesHook<A>, hookName: string, ...args: A): Promise<void> {
  for (const tap of (hook as unknown as CallableHook).taps) {
    try {
      await runTap(tap, args);
    } catch (error) {
      throw new TapError(tap.name, hookName, error);
    }
  }
}
