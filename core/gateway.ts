import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
// Imported, not read through the global: node loads `performance` on its first use, which would
// otherwise be the first request's (about 3 ms of module loading on the path of that call).
import { performance } from 'node:perf_hooks';
import type { Duplex } from 'node:stream';
import Router from '@koa/router';
import Koa from 'koa';
import type { LoadedConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/types.js';
import { ConfigErrors, createConfigAjv } from '../config/validate.js';
import type { RequestContext } from './context.js';
import { hiddenSlot } from './hidden.js';
import { clientGone, elapsedMs, LiveRequest, ServingList } from './context.js';
import { GatewayError, toErrorView, type ErrorCode, type GatewayErrorOptions } from './errors.js';
import { callEachWithin, callNaming, callObservers, createHooks, tapOnly, type GatewayHooks } from './hooks.js';
import { createJsonBodyReader, failBodyRead } from './http/body.js';
import { holdContinue } from './http/continue.js';
import { createMultipartReader } from './http/multipart.js';
import { PoolRegistry } from './http/pools.js';
import { configuredSecrets, keepSecretsOf, redactWholeSecrets } from './http/upstream.js';
import { HeldAnswers } from './http/client.js';
import { DEFAULT_TIMEOUTS, type Timeouts } from './attempt.js';
import { BUSY_TIMEOUT_MS, isStoreBusy, loggablePath, openStores, pathSecrets, type Stores } from './store/index.js';
import { markStoreServed } from './store/instances.js';
import { sqliteFile } from './store/sqlite.js';
import { createLogger, writesLevel, type Logger } from './logger.js';
import { createProviders, loadPlugins, secretsOfConfig, type Builtins, type LoadedPlugin } from './loader.js';
import { addPluginHeaders, asGatewayError, gatewayHeaders, recordedModel, overheadMs, renderErrorBody, ReplyHead, runCall, runHandler, sendBody, failureText, tapFailureLogger, type Exchange, type PipelineDeps } from './pipeline.js';
import { applyBridges, type GatewayPlugin, type OperationBridge, type PluginApi, type ProviderEnv, type ProviderType, type RouteDefinition, type WireFormat } from './plugin.js';
import { ModelCatalog, ProviderRegistry, ProviderTypeRegistry } from './registry.js';

export interface GatewayOptions {
  loaded: LoadedConfig;
  builtins: Builtins;
  logger?: Logger;
}

export interface Gateway {
  readonly app: Koa;
  readonly hooks: GatewayHooks;
  readonly config: GatewayConfig;
  readonly plugins: readonly LoadedPlugin[];
  readonly providers: ProviderRegistry;
  readonly catalog: ModelCatalog;
  readonly logger: Logger;
  /** The stores, opened on first use. */
  readonly stores: Stores;
  /** The URL the server listens on, once it does. */
  url?: string;
  server?: http.Server;
  listen(port?: number, host?: string): Promise<string>;
  /** Stop accepting, drain in-flight requests (bounded by server.shutdownTimeoutMs), close plugins. */
  stop(): Promise<void>;
}

/**
 * `req_` + 32 hex digits: the time in milliseconds (12 digits), this process's random mark (8),
 * then a counter (12). Ids that grow with time land at the end of the stores' request-id
 * indexes, so a batch of rows dirties a few index pages instead of one page per row (random ids
 * cost about three disk writes per call); the random mark keeps the ids of two gateways sharing a
 * store apart, the counter those of one millisecond.
 */
const PROCESS_MARK = randomBytes(4).toString('hex');
/** Kept under 2^30, a small integer for V8: its hex digits then cost 76 ns, not the 330 of a larger number's. */
const COUNTER_MASK = 2 ** 30 - 1;
let requestCounter = Math.floor(Math.random() * COUNTER_MASK);
/** `req_`, the time and the mark: the same for every request of one millisecond, so made once for it. */
let idPrefix = '';
let idPrefixAt = -1;
const newRequestId = (): string => {
  requestCounter = (requestCounter + 1) & COUNTER_MASK;
  const now = Date.now();
  if (now !== idPrefixAt) {
    idPrefixAt = now;
    idPrefix = `req_${now.toString(16).padStart(12, '0')}${PROCESS_MARK}`;
  }
  return idPrefix + requestCounter.toString(16).padStart(12, '0');
};
/** The hop header: the gateways a request already went through. */
const VIA = 'x-switchyard-via';
const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * A copy of `value` frozen all the way down (a plugin's options: what one tap changes, every later
 * call would see), so that the configuration they came from stays as it was. Plain objects and
 * arrays are copied and frozen; anything else (a Buffer, a URL, a class's instance a programmatic
 * configuration gave) is kept as it is, the same object; a loop is copied as a loop.
 */
function deepFrozen<T>(value: T, seen = new WeakMap<object, unknown>()): T {
  if (value === null || typeof value !== 'object') return value;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return value;
  const known = seen.get(value);
  if (known !== undefined) return known as T;
  const copy = (Array.isArray(value) ? [] : Object.create(proto as object | null)) as Record<string, unknown>;
  seen.set(value, copy);
  for (const [name, inner] of Object.entries(value)) copy[name] = deepFrozen(inner, seen);
  return Object.freeze(copy) as T;
}
const MAX_HOPS = 8;

/** Build the gateway: load plugins, create providers, mount routes. Does not listen yet. */
export async function createGateway(options: GatewayOptions): Promise<Gateway> {
  const { loaded, builtins } = options;
  const config = loaded.config;
  const logger = options.logger ?? createLogger(config.logging);
  const hooks = createHooks();
  const pluginHooks = tapOnly(hooks);
  const types = new ProviderTypeRegistry();
  const providers = new ProviderRegistry();
  const catalog = new ModelCatalog(config, providers);
  const pools = new PoolRegistry(new HeldAnswers(config.server.answerMemoryLimit));
  const formats: WireFormat[] = [];
  const bridges: OperationBridge<any, any>[] = [];
  const ajv = createConfigAjv();
  // The credentials the configuration holds: kept out of every error message and log line.
  const secrets = secretsOfConfig(config);
  // The credentials a logged path is searched for, made once (see loggablePath).
  const inPaths = pathSecrets(secrets);

  let stores: Stores | undefined;
  const openedStores = (): Stores => (stores ??= openNamedStores());
  /** The stores, or an error that names the file and the setting when they cannot open (a folder it may not make, say). */
  const openNamedStores = (): Stores => {
    try {
      return openStoresNow();
    } catch (error) {
      throw new Error(`cannot open the store of ${loaded.filepath} (storage.url '${config.storage.url}'): ${(error as Error)?.message ?? String(error)}`, { cause: error });
    }
  };
  const openStoresNow = (): Stores =>
    openStores({
      storage: config.storage,
      cache: config.cache,
      baseDir: loaded.dir,
      onWriteError: (what, error, lost) => logger.error(`could not write ${what} rows`, { lost, error: String(error) }),
      // Another process holds the file (a CLI command, an operator's sqlite3, a VACUUM): no request
      // waits on it; the rows wait and are written when it lets go.
      busyTimeoutMs: BUSY_TIMEOUT_MS,
      // Or it cannot be written for now (the disk full, an I/O error): the same, told as what it is.
      onWriteBusy: (what, error) =>
        isStoreBusy(error)
          ? logger.warn(`the store is locked by another process: ${what} rows wait and are written when it is free`, { error: String(error) })
          : logger.error(`the store cannot be written (${String(error)}): ${what} rows wait and are tried again`, { error: String(error) }),
      // Still unwritable as the gateway stops: the rows are kept beside the store, and written when it next opens.
      onSpilled: (what, rows, file) => logger.warn(`the store still could not be written as the gateway stopped: ${what} rows kept in a file, written when the store next opens`, { rows, file }),
      onSpillWritten: (what, rows, file) => logger.info(`${what} rows kept when the store was locked are written`, { rows, file }),
      // Removed or replaced under the running gateway: on Linux its writes go on succeeding, to a
      // file nobody else can open, and are lost when it stops.
      onFileGone: (gone, file) =>
        gone
          ? logger.error('the store file was removed or replaced while the gateway runs: keys, usage and log rows written from now on go to the file it still holds open, which no other process sees and which is lost when it stops; put the file back, or stop the gateway and restore it', { file })
          : logger.warn('the store file is back: the gateway and other processes see the same file again', { file }),
      onNewerSchema: (found, known) =>
        logger.warn('the store was migrated by a newer version of the gateway than this one: it opens, but rows this version writes leave out what the newer migrations added', { schema: found, known }),
      onSpillFailed: (what, error, file) => logger.warn(`${what} rows kept when the store was locked could not be written yet: the file stays for the next start`, { file, error: String(error) }),
      // Off the event loop: copying the write-ahead log into the file, and its fsyncs.
      backgroundCheckpoint: {
        intervalMs: 1000,
        onError: (error) => logger.warn('a checkpoint of the SQLite log failed', { error }),
        onFallback: (reason) => logger.warn('checkpointing the SQLite log in its commits again', { reason }),
      },
    });

  const apiFor = (plugin: GatewayPlugin<any>, pluginOptions: Record<string, unknown>): PluginApi<any> =>
    Object.freeze({
      get stores() {
        return openedStores();
      },
      name: plugin.name,
      options: deepFrozen(pluginOptions),
      config,
      hooks: pluginHooks,
      logger: logger.child({ plugin: plugin.name }),
      providers,
      models: catalog,
      formats: { list: () => formats },
      error: (code: ErrorCode, errorOptions?: GatewayErrorOptions) => new GatewayError(code, errorOptions),
      registerProviderType: (definition: ProviderType) => types.register(definition, plugin.name),
      registerFormat: (format: WireFormat) => {
        // Said now, while the plugin that made it is named (as it fails to start): its routes are read only when the gateway listens.
        if (typeof format?.id !== 'string' || format.id === '') throw new Error('registerFormat: the format has no id (a string)');
        if (!Array.isArray(format.routes)) throw new Error(`registerFormat: the format '${format.id}' has no routes (an array)`);
        if (formats.some((f) => f.id === format.id)) throw new Error(`wire format '${format.id}' is already registered`);
        formats.push(format);
      },
      registerBridge: (bridge: OperationBridge<any, any>) => {
        bridges.push(bridge);
      },
    });

  /**
   * Start-up failed once plugins began to apply: what they and the providers opened is let go as
   * a stop lets it go (each close tap for a while at most, the providers, the pools, the stores),
   * and then the failure goes on. A plugin's close may thus run without its setup, and for a
   * plugin whose own apply() failed after it tapped close.
   */
  const releaseOnFailure = async (error: unknown): Promise<never> => {
    await releaseAll().catch(() => undefined);
    throw error;
  };
  /**
   * Let go of what the plugins and providers opened: each plugin's close on its own, for a while
   * at most (one that fails or hangs is logged, and the stores below are still written before
   * the process exits), the providers, the pools, and last the stores, so that everything the
   * requests recorded is written.
   */
  const releaseAll = async (): Promise<void> => {
    await callEachWithin(hooks.close, CLOSE_TAP_MS, (plugin, failure) => logger.error('close hook failed', { plugin, error: failureText(failure, secrets) }));
    await providers.closeAll();
    await pools.closeAll();
    await stores?.close().catch((failure) => logger.error('closing the stores failed', { error: String(failure) }));
  };
  const plugins = await loadPlugins({ loaded, builtins, ajv, types, apiFor }).catch(releaseOnFailure);
  const env: ProviderEnv = {
    logger,
    config,
    pool: (origin, poolOptions) => pools.get(origin, poolOptions),
    poolFor: (origin, entry) => {
      const timeouts = entry.timeouts as Partial<Timeouts> | undefined;
      const limits = { ...DEFAULT_TIMEOUTS, ...timeouts };
      const pool = pools.get(origin, {
        connections: entry.connections,
        connectTimeoutMs: timeouts?.connectMs,
        headersTimeoutMs: timeouts?.firstByteMs,
        // A backstop only (the attempt's clock enforces both): a silence within a non-streamed
        // answer is bounded by firstByteMs, which covers the whole answer, not by idleMs.
        bodyTimeoutMs: Math.max(limits.idleMs, limits.firstByteMs),
      });
      keepSecretsOf(pool, configuredSecrets([entry]));
      return pool;
    },
  };
  await createProviders(loaded, ajv, types, providers, env, Object.keys(builtins.providerTypes))
    .then(() => refuseUnservedPrices(loaded, providers.list()))
    .catch(releaseOnFailure);
  applyBridges(providers.list(), bridges);
  catalog.index();

  const timeouts = new Map(
    config.providers.map((p) => [p.id, { ...DEFAULT_TIMEOUTS, ...((p.timeouts as Partial<Timeouts> | undefined) ?? {}) }]),
  );
  // This process's mark in `x-switchyard-via`: a request that comes back with it looped.
  const instanceId = `sy-${randomUUID().slice(0, 8)}`;
  const ownHop: Readonly<Record<string, string>> = Object.freeze({ [VIA]: instanceId });
  const deps: PipelineDeps = {
    hooks,
    catalog,
    logger,
    readJsonBody: createJsonBodyReader(config.server.bodyLimit, config.server.maxJsonDepth, config.server.bodyTimeoutMs),
    readMultipartBody: createMultipartReader(config.server.bodyLimit, { idleMs: config.server.bodyTimeoutMs }),
    timeoutsFor: (providerId) => timeouts.get(providerId) ?? DEFAULT_TIMEOUTS,
    secrets,
    streamKeepAliveMs: config.server.streamKeepAliveMs,
    writeTimeoutMs: config.server.writeTimeoutMs,
    forwardHeaders: (rc) => {
      const via = rc.headers[VIA];
      // Most requests come straight from a client: one shared object for them (it is only read).
      return typeof via === 'string' && via ? { [VIA]: `${via}, ${instanceId}` } : ownHop;
    },
  };

  let ready = false;
  let draining = false;
  /** Removes this process's mark beside the store (see markStoreServed). */
  let unmarkStore = (): void => undefined;
  /** The timer of letGoOfStalled. */
  let stallSweep: NodeJS.Timeout | undefined;
  /** Set when a drain ran out of time and the remaining connections were closed by the gateway. */
  let cutOff = false;
  let inFlight = 0;
  /** The requests being served, to be told when a drain runs out of time (see stop). */
  const serving = new ServingList();
  let drained: (() => void) | undefined;
  const formatById = new Map(formats.map((f) => [f.id, f]));

  /** A start-up tap's failure (`setup`, `ready`), its message printed as it is: the configured credentials a plugin put in it redacted. */
  const withoutSecrets = (error: unknown): unknown => {
    // Its cause too (the plugin's own error, which an embedder may print whole), stacks included.
    for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
      // Only what changes, and what can be set (a DOMException's message is a getter).
      try {
        const message = redactWholeSecrets(e.message, secrets);
        if (message !== e.message) e.message = message;
        const stack = typeof e.stack === 'string' ? redactWholeSecrets(e.stack, secrets) : undefined;
        if (stack !== undefined && stack !== e.stack) e.stack = stack;
      } catch {
        // left as it is
      }
    }
    return error;
  };

  /** Observers still running (a stream's usage being counted): a shutdown waits for them before closing the stores. */
  const observing = new Set<Promise<unknown>>();
  /** The `onResponse` observers of a finished request; a failing one is logged, never thrown. */
  const observe = (rc: RequestContext): void => {
    const running = callObservers(hooks.onResponse, tapFailureLogger(logger, 'onResponse', rc, deps.secrets), rc);
    if (running) {
      observing.add(running);
      void running.finally(() => observing.delete(running));
    }
  };

  /**
   * One request, from arrival to the last observer: its context and id, the access log and
   * `onResponse` once it closes, the loop check, and errors in the client's shape. The routes the
   * gateway knows by exact path come here straight from node's server; everything else comes
   * through Koa's router (`respond = false`: this function answers).
   */
  async function serve(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    search: string,
    params: Readonly<Record<string, string>>,
    run: RouteRun,
    arrivedAt = performance.now(),
  ): Promise<void> {
    // Always the gateway's own id: a client-chosen one could collide with another request's usage
    // row, or carry text that should not be logged.
    const live = new LiveRequest(newRequestId(), req, path, search, arrivedAt);
    live.client.reply = res;
    serving.add(live.client);
    const rc: RequestContext = live;
    const client = live.client;
    // Every answer's head carries rc.id as x-request-id (see ReplyHead). inFlight was counted
    // by the caller, when the request arrived.
    // Observers run once the response closed and the pipeline has settled too: a client that
    // leaves while a back end is still being tried must not be logged before that attempt is
    // recorded.
    let closed: boolean | undefined; // how the response closed: completed or not
    let settled = false;
    const done = () => {
      if (closed !== undefined) return;
      closed = res.writableFinished && !client.letGo;
      // At once: the pipeline learns the client left (and aborts its upstream) through this.
      if (!closed) client.leave();
      if (settled) finishOnceUsageKnown(closed);
    };
    /** Settled once the usage a stream may still bring is in (see RequestContext.usagePending). */
    const finishOnceUsageKnown = (completed: boolean) => {
      if (rc.usagePending) void rc.usagePending.then(() => finish(completed));
      else finish(completed);
    };
    const finish = (completed: boolean) => {
      inFlight--;
      serving.delete(live.client);
      queued?.delete(done);
      if (!completed && cutOff && (!rc.errorCode || rc.errorCode === 'client_closed_request')) {
        // Not the client's doing: the gateway closed the connection when its drain ran out of time.
        rc.status = 503;
        rc.errorCode = 'gateway_shutdown';
        rc.endReason = 'shutdown';
      } else if (rc.errorCode === 'gateway_shutdown') {
        // Ended by a drain that ran out of time, told in its stream after its 200: logged as the 503 it is.
        rc.status = 503;
      } else if (!completed && !rc.errorCode) {
        // The client left before the answer ended (a stream cut midway): logged like nginx does.
        rc.status = 499;
        rc.errorCode = 'client_closed_request';
      }
      rc.status ??= res.statusCode;
      rc.endReason ??= endReasonOf(rc, completed);
      // A format's own route may have named a model (a listing's path).
      if (rc.model) rc.model = recordedModel(rc.model, secrets);
      accessLog(logger, rc, completed, inPaths);
      observe(rc);
      if (draining) {
        server?.closeIdleConnections();
        if (inFlight === 0) drained?.();
      }
    };
    res.once('close', done);
    // A request pipelined behind another: its response waits for the socket, and node never
    // closes it if the connection goes first (it would stay in flight, unlogged, for good).
    const queued = res.socket === null ? queuedOn(req.socket) : undefined;
    queued?.add(done);
    // (Its connection may have gone already, while the request waited a turn for its body.)
    if (queued && req.socket.destroyed) done();
    // The client may have gone while the request waited for its body (see handle).
    if (res.destroyed) done();
    if (draining) res.setHeader('connection', 'close');

    try {
      await handleRequest({ req, res, params }, rc, run);
    } finally {
      settled = true;
      if (closed !== undefined) finishOnceUsageKnown(closed);
    }
  }

  async function handleRequest(ex: Exchange, rc: RequestContext, run: RouteRun): Promise<void> {
    const { req, res } = ex;
    try {
      const via = req.headers[VIA];
      if (typeof via === 'string' && via) {
        const hops = via.split(',').map((h) => h.trim());
        const looped = hops.includes(instanceId) ? 'it came back to the same gateway' : hops.length >= MAX_HOPS ? `${hops.length} gateways in a row` : undefined;
        if (looped) {
          // Refused before its route runs: answered in the shape of the format its path is closest to.
          shapeByPath(rc);
          throw new GatewayError('loop_detected', { params: { detail: looped } });
        }
      }
      await run(ex, rc);
      rc.status = res.statusCode;
    } catch (error) {
      // A client that left is nobody to answer; what it was waiting for failed because it left.
      const gerr = clientGone(rc) ? new GatewayError('client_closed_request') : asGatewayError(error, rc, logger, deps.secrets);
      const format = rc.format ? formatById.get(rc.format) : undefined;
      const view = toErrorView(gerr, rc.id);
      // A format's own status for the failure, when it names one HTTP can carry.
      const own = format?.errorStatus?.(view);
      const status = own !== undefined && Number.isInteger(own) && own >= 400 && own <= 599 ? own : gerr.status;
      rc.status = status;
      rc.errorCode = gerr.code;
      await callObservers(hooks.onError, tapFailureLogger(logger, 'onError', rc, deps.secrets), gerr, rc);
      if (res.headersSent || clientGone(rc)) return;
      const head = new ReplyHead(rc.id);
      // A client that stopped sending its body will not send the rest: the connection ends with this answer.
      if (gerr.code === 'body_timeout') head.set('connection', 'close');
      else if (!req.complete) discardRest(req);
      addPluginHeaders(head, rc, logger);
      gatewayHeaders(head, rc);
      // The gateway already tried again, or elsewhere: an SDK retrying on top would multiply the
      // load. One attempt is what the client's own first try would have been: its SDK retries
      // as it would against the back end itself. Nor for a back end that is only overloaded for
      // now: waiting and trying again is what its clients are meant to do (the vendors' SDKs and
      // coding agents do).
      if (rc.attempts.length > 1 && gerr.status >= 500 && gerr.code !== 'upstream_overloaded') head.set('x-should-retry', 'false');
      addPluginHeaders(head, rc, logger, gerr.headers);
      head.set('content-type', 'application/json; charset=utf-8');
      try {
        sendBody(res, status, head, renderErrorBody(format, view), 'application/json; charset=utf-8');
      } catch (writeError) {
        // The error reply itself cannot be written (a header no HTTP carries): the connection is
        // closed, so the client is not left waiting for an answer that will never come.
        logger.error('the error reply could not be written: the connection is closed', { requestId: rc.id, error: failureText(writeError, deps.secrets) });
        res.destroy();
      }
    }
  }

  // Every route, as what runs once the request's context exists: health, outside every format
  // and plugin, then every format's routes.
  /** The head of an answer the gateway gives by itself: its request id and its overhead (all of its time). */
  const ownHead = (rc: RequestContext): ReplyHead => {
    const head = new ReplyHead(rc.id);
    head.set('x-switchyard-overhead-ms', overheadMs(rc));
    return head;
  };
  const healthz: RouteRun = async (ex, rc) => {
    sendBody(ex.res, 200, ownHead(rc), JSON.stringify({ status: 'ok' }), 'application/json; charset=utf-8');
  };
  const readyz: RouteRun = async (ex, rc) => {
    const ok = ready && !draining;
    sendBody(ex.res, ok ? 200 : 503, ownHead(rc), JSON.stringify({ status: ok ? 'ready' : draining ? 'draining' : 'starting' }), 'application/json; charset=utf-8');
  };
  const routes: RouteEntry[] = [
    { method: 'GET', path: '/healthz', run: healthz },
    { method: 'GET', path: '/readyz', run: readyz },
  ];
  for (const format of formats) {
    for (const route of format.routes) {
      const mark = (rc: RequestContext) => {
        rc.format = format.id;
        rc.access = route.kind === 'handler' && route.access === 'admin' ? 'admin' : 'client';
        rc.keyHeaders = format.keyHeaders;
        rc.keyQuery = format.keyQuery;
        idHeaderFor(rc, format);
        return rc;
      };
      const run: RouteRun =
        route.kind === 'call'
          ? (ex, rc) => runCall(deps, ex, mark(rc), format, route)
          : (ex, rc) => runHandler(deps, ex, mark(rc), route);
      routes.push({ method: route.method, path: route.path, run, onlyIf: route.onlyIf });
    }
  }
  // One entry per method and path: a guarded route (onlyIf) shares its path with another format's.
  routes.splice(0, routes.length, ...mergeGuarded(routes));

  // Routes without parameters, by exact method and path: two Map lookups (method, then path; no
  // key string built per request), straight from node's server (no Koa context, no router walk).
  // The router takes the rest: parameters, HEAD, a trailing slash, another case. The first
  // registration wins, as in the router.
  const exact = new Map<string, Map<string, RouteRun>>();
  for (const route of routes) {
    if (/[:*(?]/.test(route.path)) continue;
    let paths = exact.get(route.method);
    if (!paths) exact.set(route.method, (paths = new Map()));
    if (!paths.has(route.path)) paths.set(route.path, route.run);
  }

  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.on('error', (error: Error) => logger.debug('koa error', { error: error.message }));
  const viaKoa = (koa: Koa.Context, run: RouteRun): Promise<void> => {
    // This gateway answers, not Koa (which would otherwise answer 404 after it).
    koa.respond = false;
    inFlight++;
    return serve(koa.req, koa.res, koa.path, koa.querystring, (koa as unknown as { params?: Record<string, string> }).params ?? {}, run);
  };
  const router = new Router();
  for (const route of routes) router.register(route.path, [route.method], ((koa: Koa.Context) => viaKoa(koa, route.run)) as never);
  app.use(router.routes());

  // Nothing matched: a JSON 404, never HTML, in the shape of the format whose paths it is
  // closest to (a Gemini client gets Gemini's error for a wrong /v1beta/... path).
  const routeSegments = formats.flatMap((format) =>
    format.routes.map((route) => ({ format: format.id, segments: staticSegments(route.path) })),
  );
  /** A request no route ran: its answer in the shape (and id header) of the format whose paths it is closest to. */
  const shapeByPath = (rc: RequestContext): void => {
    rc.format ??= closestFormat(routeSegments, rc.path);
    idHeaderFor(rc, rc.format ? formatById.get(rc.format) : undefined);
  };
  const notFound: RouteRun = async (ex, rc) => {
    shapeByPath(rc);
    throw new GatewayError('not_found', { params: { method: rc.method, path: rc.path } });
  };
  app.use((koa) => viaKoa(koa, notFound));
  const viaRouter = app.callback();

  /** An error's body and id header in the shape of the format whose routes `path` is closest to (the default shape without a path). */
  const errorReply = (path: string | undefined, gerr: GatewayError, id: string): { body: string; idHeader: string | undefined } => {
    const format = path === undefined ? undefined : closestFormat(routeSegments, path);
    const wire = format ? formatById.get(format) : undefined;
    return { body: renderErrorBody(wire, toErrorView(gerr, id)), idHeader: wire?.requestIdHeader };
  };

  /**
   * Refuse a request before its body is sent: in the shape of the format whose route the path
   * is (or is closest to), as after the body; it has its access line and onResponse too.
   */
  const refuseEarly = (req: http.IncomingMessage, res: http.ServerResponse, gerr: GatewayError): void => {
    const startedAt = performance.now();
    const url = req.url ?? '/';
    const id = newRequestId();
    const { body, idHeader } = errorReply(url.split('?', 1)[0]!, gerr, id);
    res.writeHead(gerr.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
      'x-request-id': id,
      ...(idHeader ? { [idHeader]: id } : {}),
      'x-switchyard-overhead-ms': (performance.now() - startedAt).toFixed(3),
      connection: 'close',
    });
    res.end(body);
    observeBare(id, gerr, req.socket.remoteAddress, req);
  };

  /** node's request listener: an exact route at once, anything else through Koa's router. */
  const handle = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    // HTTP/1.1 requires a Host header (RFC 9112 3.2): node's own check would answer a bare 400.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      refuseEarly(req, res, new GatewayError('invalid_request', { params: { detail: 'An HTTP/1.1 request must carry a Host header.' } }));
      return;
    }
    // A transfer coding besides chunked (`gzip, chunked`): node reads the chunks and leaves the
    // coding undone, so the body would be taken for what it is not (and a proxy in front may
    // frame it otherwise). Refused, as RFC 9112 lets a server refuse a coding it does not do.
    const te = req.headers['transfer-encoding'];
    if (te !== undefined && te.trim().toLowerCase() !== 'chunked') {
      res.shouldKeepAlive = false;
      refuseEarly(req, res, new GatewayError('malformed_http'));
      return;
    }
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const run = path.charCodeAt(0) === 47 /* / */ ? exact.get(req.method ?? '')?.get(path) : undefined;
    if (!run) {
      void viaRouter(req, res);
      return;
    }
    const search = q === -1 ? '' : url.slice(q + 1);
    // Counted from now: a graceful stop waits for it even while it waits for its body.
    inFlight++;
    // node's parser announces a request on its headers, and reads the body that came with them
    // (in the same packet) only after this turn of the event loop; by the check phase the body is
    // in the request's buffer, and the JSON reader takes it from there at once instead of waiting
    // for 'resume', 'data' and 'end' (and arming the socket's idle timer) on every call. The
    // request's clock starts now all the same: the wait is part of the gateway's time.
    if (req.complete) serveNow(req, res, path, search, run, performance.now());
    else setImmediate(serveNow, req, res, path, search, run, performance.now());
  };
  const serveNow = (req: http.IncomingMessage, res: http.ServerResponse, path: string, search: string, run: RouteRun, arrivedAt: number): void => {
    serve(req, res, path, search, NO_PARAMS, run, arrivedAt).catch((error) => logger.error('unhandled error', { error: (error as Error)?.stack ?? String(error) }));
  };

  let server: http.Server | undefined;

  /**
   * The access line and onResponse of a request answered before it was routed (unparsable HTTP,
   * a body refused before it was sent): `req` when its head was read (an unreadable one has none).
   */
  function observeBare(id: string, error: GatewayError, clientIp: string | undefined, req?: http.IncomingMessage): void {
    const rc: RequestContext = {
      id,
      startedAt: performance.now(),
      method: req?.method ?? '-',
      path: req ? (req.url ?? '/').split('?', 1)[0]! : '-',
      headers: req?.headers ?? {},
      query: {},
      signal: AbortSignal.abort(),
      attempts: [],
      state: new Map(),
      access: 'client',
      clientIp: clientIp ?? '',
      userAgent: req?.headers['user-agent'],
      responseHeaders: {},
      status: error.status,
      errorCode: error.code,
      endReason: 'rejected',
    };
    accessLog(logger, rc, true, inPaths);
    observe(rc);
  }

  /** Requests that came while the plugins set up (see listen), until they are served or answered. */
  let waitingForSetup: Array<[http.IncomingMessage, http.ServerResponse]> | undefined;
  /** The requests waiting for setup answered 503 gateway_shutdown: the start failed, or a stop came first. */
  const answerWaiting = (): void => {
    const waiting = waitingForSetup;
    waitingForSetup = undefined;
    for (const [req, res] of waiting ?? []) if (!res.headersSent && !res.destroyed) refuseEarly(req, res, new GatewayError('gateway_shutdown'));
  };

  const gateway: Gateway = {
    app,
    hooks,
    config,
    plugins,
    providers,
    catalog,
    logger,
    get stores() {
      return openedStores();
    },
    async listen(port = config.server.port, host = config.server.host) {
      // The port is taken first, and the plugins set up after: a start that cannot listen (the
      // port in use, by a gateway already serving the same store, say) must change nothing, and
      // setup writes (auth's keys from the configuration). Requests that come meanwhile wait.
      waitingForSetup = [];
      const serveWhenSet = (req: http.IncomingMessage, res: http.ServerResponse): void => {
        if (waitingForSetup) waitingForSetup.push([req, res]);
        else if (draining) refuseEarly(req, res, new GatewayError('gateway_shutdown'));
        else handle(req, res);
      };
      // The status Claude clients read as "overloaded" (a back end's, passed on) has no reason
      // phrase in Node's table: its status line would say "unknown".
      http.STATUS_CODES[529] ??= 'Site Overloaded';
      // 96 KiB of headers: a long key must get a JSON 401, not Node's bare 431.
      // requireHostHeader: false: the gateway refuses a request without Host itself, in its own shape.
      server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 0, maxHeaderSize: 96 * 1024, requireHostHeader: false }, serveWhenSet);
      server.headersTimeout = 66_000;
      // No count of headers past which Node drops the rest unseen (2,000 by default: a request's
      // key or length after them was lost, and it was told it sent none); their size is bounded.
      server.maxHeadersCount = 0;
      server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
        const answered = answerClientError(error, socket, errorReply);
        if (answered) observeBare(answered.id, answered.error, (socket as { remoteAddress?: string }).remoteAddress);
      });
      // `Expect: 100-continue` with a body already over the limit: refuse before it is sent.
      // Otherwise the 100 waits until the body is read, after the key and limits (askForBody).
      server.on('checkContinue', (req, res) => {
        const length = Number(req.headers['content-length']);
        if (Number.isFinite(length) && length > config.server.bodyLimit) {
          refuseEarly(req, res, new GatewayError('body_too_large', { params: { limit: config.server.bodyLimit } }));
          return;
        }
        holdContinue(req, res);
        serveWhenSet(req, res);
      });
      // CONNECT (a proxy's tunnel, which this gateway is not): node would close the connection without a word.
      server.on('connect', (req: http.IncomingMessage, socket: Duplex) => {
        const arrivedAt = performance.now();
        const id = newRequestId();
        const gerr = new GatewayError('not_found', { params: { method: 'CONNECT', path: String(req.url ?? '').slice(0, 256) } });
        endWithError(socket, gerr, id, errorReply(undefined, gerr, id), arrivedAt);
        observeBare(id, gerr, (socket as { remoteAddress?: string }).remoteAddress, req);
      });
      // Any other expectation: node would answer a bare 417 itself; the gateway answers in its own shape.
      server.on('checkExpectation', (req, res) => {
        const expect = String(req.headers.expect ?? '').slice(0, 100);
        refuseEarly(req, res, new GatewayError('expectation_failed', { params: { expect: JSON.stringify(expect) } }));
      });
      gateway.server = server;
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(port, host, () => {
          server!.off('error', reject);
          resolve();
        });
      });
      try {
        await callNaming(hooks.setup, 'setup').catch((error: unknown) => {
          throw withoutSecrets(error);
        });
      } catch (error) {
        // Those that waited are told the gateway is not coming up, not left with a closed connection.
        answerWaiting();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server!.close(() => resolve()));
        throw error;
      }
      // Stopped while it set up (a signal): the waiting requests were answered; nothing more starts.
      if (draining) return '';
      // From now on node's server calls the gateway's listener straight; those that waited are served.
      server.off('request', serveWhenSet);
      server.on('request', handle);
      const waited = waitingForSetup;
      waitingForSetup = undefined;
      for (const [req, res] of waited) handle(req, res);
      const address = server.address() as AddressInfo;
      const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      gateway.url = `http://${shownHost}:${address.port}`;
      const writeTimeoutMs = config.server.writeTimeoutMs;
      if (writeTimeoutMs > 0) {
        stallSweep = setInterval(() => letGoOfStalled(serving, writeTimeoutMs), Math.min(STALL_SWEEP_MS, writeTimeoutMs));
        stallSweep.unref();
      }
      if (config.storage.driver === 'sqlite') {
        unmarkStore = markStoreServed(sqliteFile(config.storage.url, loaded.dir), (others) =>
          logger.warn(
            'another gateway serves this store: each process keeps its own budget reservations, rate-limit windows and concurrency counts, so together they can let a key past its limits',
            { pids: others, store: config.storage.url },
          ),
        );
      }
      ready = true;
      try {
        await callNaming(hooks.ready, 'ready', { url: gateway.url }).catch((error: unknown) => {
          throw withoutSecrets(error);
        });
      } catch (error) {
        // A plugin refused to become ready: do not stay half up, listening without it.
        ready = false;
        server.closeAllConnections();
        await new Promise<void>((resolve) => server!.close(() => resolve()));
        throw error;
      }
      return gateway.url;
    },
    async stop() {
      if (draining) return;
      draining = true;
      answerWaiting();
      unmarkStore();
      const timeoutMs = config.server.shutdownTimeoutMs;
      if (server) {
        const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
        server.closeIdleConnections();
        // The answers still to come say `connection: close` and close their connections (requests
        // that arrive from now on do too: serve): a client that reused a connection for its next
        // request would find it reset instead of refused.
        serving.each((link) => {
          if (link.reply && !link.reply.headersSent) link.reply.shouldKeepAlive = false;
        });
        if (inFlight > 0) {
          logger.info('draining', { inFlight, timeoutMs });
          const allDone = new Promise<void>((resolve) => (drained = resolve));
          let timer: NodeJS.Timeout | undefined;
          const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs)));
          const late = await Promise.race([allDone.then(() => false), timedOut]);
          clearTimeout(timer);
          if (late) {
            // Each call still running is told first: its back end's call ends with gateway_shutdown,
            // which its client gets in its own format (a 503, or a stream's error event), for a
            // moment; then whatever is left is cut.
            logger.warn('shutdown timeout reached; ending the calls still running', { inFlight });
            const told = new Promise<void>((resolve) => (drained = resolve));
            serving.stopAll();
            // A request whose body is still coming is answered too, not left to the cut.
            serving.each((link) => {
              const req = link.reply?.req;
              if (req && !req.complete) failBodyRead(req, new GatewayError('gateway_shutdown'));
            });
            const answerGrace = delay(SHUTDOWN_ANSWER_MS);
            if (inFlight > 0) await Promise.race([told, answerGrace.done]);
            answerGrace.cancel();
            cutOff = true;
          }
        }
        server.closeAllConnections();
        await closed;
        // The requests cut above settle (their back ends' calls aborted) and run their observers,
        // which write their usage and log rows: waited for, for a moment, before the stores close.
        const grace = delay(SHUTDOWN_GRACE_MS);
        if (inFlight > 0) await Promise.race([new Promise<void>((resolve) => (drained = resolve)), grace.done]);
        if (observing.size > 0) await Promise.race([Promise.allSettled([...observing]), grace.done]);
        grace.cancel();
        if (inFlight > 0 || observing.size > 0) logger.warn('shutdown: requests still unsettled when the stores closed', { inFlight, observing: observing.size });
      }
      clearInterval(stallSweep);
      await releaseAll();
    },
  };
  return gateway;
}

/** How often the answers waiting on clients that read nothing are looked at (see letGoOfStalled). */
const STALL_SWEEP_MS = 1_000;

/**
 * `server.writeTimeoutMs` for answers written whole: one whose last byte was handed to node but
 * not taken by its client (it stopped reading, and keeps its connection open) for that long, the
 * bytes its connection still has to send not going down, is let go, its connection closed, as a stream's writer lets go
 * of a client that stops reading. Without it such a client held its concurrency slot and the
 * answer's memory for as long as it kept the socket. A look a second over the requests being
 * served, nothing per call; a response still queued behind another on its connection (pipelined)
 * is not the client's stall.
 */
function letGoOfStalled(serving: ServingList, writeTimeoutMs: number): void {
  const now = performance.now();
  serving.each((link) => {
    const res = link.reply;
    const socket = res?.socket;
    if (!res || !socket || !res.writableEnded || res.writableFinished || res.destroyed) {
      link.stalledSince = undefined;
      return;
    }
    const waiting = unsent(socket);
    if (link.stalledSince === undefined || waiting !== link.stalledBytes) {
      link.stalledSince = now;
      link.stalledBytes = waiting;
    } else if (now - link.stalledSince >= writeTimeoutMs) {
      link.letGo = true;
      res.destroy();
    }
  });
}

/** The bytes a connection still has to send: in its stream's buffer and in libuv's queue (which shrinks as the client reads). */
function unsent(socket: Socket): number {
  return socket.writableLength + ((socket as unknown as { _handle?: { writeQueueSize?: number } })._handle?.writeQueueSize ?? 0);
}

/** Per connection, the requests pipelined on it whose responses wait for it (see serve). */
const QUEUED = hiddenSlot<Set<() => void>>();

/** The requests waiting on `socket`, each told when it closes (one listener a connection). */
function queuedOn(socket: Socket): Set<() => void> {
  let queued = QUEUED.get(socket);
  if (!queued) {
    const waiting = new Set<() => void>();
    socket.once('close', () => {
      for (const told of [...waiting]) told();
    });
    QUEUED.set(socket, waiting);
    queued = waiting;
  }
  return queued;
}

/** How long a shutdown waits, once it closed every connection, for the cut requests to settle and record. */
const SHUTDOWN_GRACE_MS = 2_000;
/** How long a shutdown waits for each plugin's close tap before it goes on without it. */
const CLOSE_TAP_MS = 5_000;
/** How long a drain that ran out of time gives the calls it ended to tell their clients why, before it cuts their connections. */
const SHUTDOWN_ANSWER_MS = 500;

/** A timer as a promise that can be called off (so it does not hold the process). */
function delay(ms: number): { done: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return { done, cancel: () => clearTimeout(timer) };
}

/** A route path's segments up to its first parameter (`/v1beta/models/:model` -> v1beta, models). */
function staticSegments(routePath: string): string[] {
  const out: string[] = [];
  for (const segment of routePath.split('/').filter(Boolean)) {
    if (/[:*(]/.test(segment)) break;
    out.push(segment);
  }
  return out;
}

/** What runs for a matched route, once the request's context exists. */
type RouteRun = (ex: Exchange, rc: RequestContext) => Promise<void>;

interface RouteEntry {
  method: string;
  path: string;
  run: RouteRun;
  onlyIf?: RouteDefinition['onlyIf'];
}

/**
 * The routes with one entry per method and path. Where none is guarded, the first registered
 * wins (as before: the router would take the first too). Where some are guarded (`onlyIf`), one
 * entry asks their guards in order, then goes to the first unguarded route, or answers 404.
 */
function mergeGuarded(routes: readonly RouteEntry[]): RouteEntry[] {
  const out: RouteEntry[] = [];
  const groups = new Map<string, { slot: number; guarded: RouteEntry[]; fallback?: RouteEntry }>();
  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    let group = groups.get(key);
    if (!group) {
      group = { slot: out.length, guarded: [] };
      groups.set(key, group);
      out.push(route);
    }
    if (route.onlyIf) group.guarded.push(route);
    else group.fallback ??= route;
  }
  for (const { slot, guarded, fallback } of groups.values()) {
    // Unguarded only: the first registered is already in its slot.
    if (guarded.length === 0) continue;
    const { method, path } = out[slot]!;
    out[slot] = {
      method,
      path,
      run: (ex, rc) => {
        for (const route of guarded) if (route.onlyIf!(ex.req.headers)) return route.run(ex, rc);
        if (fallback) return fallback.run(ex, rc);
        throw new GatewayError('not_found', { params: { method: rc.method, path: rc.path } });
      },
    };
  }
  return out;
}

/** The request id in the header where the clients of the answer's format read it, if it has one. */
function idHeaderFor(rc: RequestContext, format: WireFormat | undefined): void {
  if (format?.requestIdHeader) rc.responseHeaders[format.requestIdHeader] = rc.id;
}

/**
 * The format whose routes share the most leading path segments with `path`, if exactly one
 * does; a tie (`/v1/unknown` is as close to chat completions as to messages) leaves the default.
 */
function closestFormat(routes: ReadonlyArray<{ format: string; segments: string[] }>, path: string): string | undefined {
  const segments = path.split('/').filter(Boolean);
  const best = new Map<string, number>();
  for (const route of routes) {
    let shared = 0;
    while (shared < route.segments.length && shared < segments.length && route.segments[shared] === segments[shared]) shared++;
    if (shared > (best.get(route.format) ?? 0)) best.set(route.format, shared);
  }
  let winner: string | undefined;
  let top = 0;
  let tied = false;
  for (const [format, shared] of best) {
    if (shared > top) {
      top = shared;
      winner = format;
      tied = false;
    } else if (shared === top) tied = true;
  }
  return tied ? undefined : winner;
}

/**
 * After an early answer (413, 401, 404) to a request whose body is still arriving: read and drop
 * the rest so the client can finish sending and read the answer, and keep the connection; give
 * up and close it if that takes more than a few seconds.
 */
function discardRest(req: http.IncomingMessage): void {
  const timer = setTimeout(() => req.socket.destroy(), 5_000);
  timer.unref();
  req.once('end', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
  req.removeAllListeners('data');
  req.resume();
}

/** The path of the request line in what node read of a request it could not parse, if it got that far. */
function pathOfRawRequest(raw: unknown): string | undefined {
  if (!Buffer.isBuffer(raw)) return undefined;
  const line = raw.toString('latin1', 0, Math.min(raw.length, 8192)).split('\r\n', 1)[0]!;
  const match = /^[A-Z]+ (\/[^ ?]*)/.exec(line);
  return match ? match[1] : undefined;
}

/**
 * A price for a name no call can have is a typo: calls to the model meant would cost 0. A call
 * is priced by its public name or by the model its target names (an alias's target may name a
 * model its provider does not list); a provider instance may serve names of its own besides
 * those its entry lists, so this waits until every provider is created.
 */
function refuseUnservedPrices(loaded: LoadedConfig, created: readonly { models: readonly string[] }[]): void {
  const { config } = loaded;
  const served = new Set<string>([
    ...config.models.map((model) => model.name),
    ...config.providers.flatMap((provider) => provider.models),
    ...created.flatMap((provider) => provider.models),
    ...config.models.flatMap((model) => model.targets.map((target) => target.model ?? model.name)),
  ]);
  const problems = Object.keys(config.pricing ?? {})
    .filter((model) => !served.has(model))
    .map((model) => loaded.error(['pricing', model], `no provider serves a model '${model}' and no alias has that name (a typo? calls to the model meant would cost 0)`));
  if (problems.length > 0) throw new ConfigErrors(problems);
}

/** Requests whose body node could not parse, already told so (see answerClientError). */
const malformedBodies = new WeakSet<http.IncomingMessage>();

/**
 * A request Node could not parse never reaches Koa; answer it, rather than with Node's bare
 * status line, in the shape of the format its path is closest to when the piece node failed on
 * holds the request line (a broken header in a small request), else in the default one (headers
 * too large for node come in several pieces, the request line in an earlier one).
 */
function answerClientError(
  error: NodeJS.ErrnoException,
  socket: Duplex,
  reply: (path: string | undefined, gerr: GatewayError, id: string) => { body: string; idHeader: string | undefined },
): { id: string; error: GatewayError } | undefined {
  // From when node gave up on the request: the gateway's part of this answer.
  const arrivedAt = performance.now();
  // A request already under way on this socket (node keeps its response there, and makes the
  // same check before answering a client error itself) is answered and logged by serve(): a
  // client that leaves in the middle of its body is one request, not also a malformed one.
  const response = (socket as { _httpMessage?: http.ServerResponse | null })._httpMessage;
  if (response) {
    // Node stopped parsing in the middle of that request's body (a chunk size that is not hex,
    // a Transfer-Encoding it refuses): its reader, if one waits, fails with malformed_http, and
    // serve() answers in the client's shape and logs it; the connection closes after the answer,
    // since nothing more can be read from it. Node calls this again for every later packet.
    // (A socket that ended midway is a client that left: HPE_INVALID_EOF_STATE.)
    if (malformedBodies.has(response.req)) return undefined;
    if (error.code?.startsWith('HPE_') && error.code !== 'HPE_INVALID_EOF_STATE' && socket.writable && !response.headersSent) {
      response.shouldKeepAlive = false;
      malformedBodies.add(response.req);
      failBodyRead(response.req, new GatewayError('malformed_http'));
      return undefined;
    }
    socket.destroy();
    return undefined;
  }
  // A socket that ended midway (a client that gave up its upload after an early refusal: a 401,
  // a 413) is a client that left, whether or not an answer is on its way: nobody to answer, and
  // no request of its own to log.
  if (error.code === 'ECONNRESET' || error.code === 'HPE_INVALID_EOF_STATE' || !socket.writable) {
    socket.destroy();
    return undefined;
  }
  const gerr = new GatewayError(error.code === 'HPE_HEADER_OVERFLOW' ? 'headers_too_large' : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'headers_timeout' : 'malformed_http');
  const id = newRequestId();
  endWithError(socket, gerr, id, reply(pathOfRawRequest((error as { rawPacket?: unknown }).rawPacket), gerr, id), arrivedAt);
  return { id, error: gerr };
}

/** Answer `gerr` on a socket node gave the gateway raw (no response object), and close it. */
function endWithError(socket: Duplex, gerr: GatewayError, id: string, { body, idHeader }: { body: string; idHeader: string | undefined }, arrivedAt: number): void {
  // Closed once written: node reads such a socket no more, so a client that kept its side open
  // would hold it (and a shutdown waiting for it) for good.
  socket.end(
    `HTTP/1.1 ${gerr.status} ${http.STATUS_CODES[gerr.status]}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${id}\r\n${idHeader ? `${idHeader}: ${id}\r\n` : ''}` +
      `x-switchyard-overhead-ms: ${(performance.now() - arrivedAt).toFixed(3)}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}

/** How a finished request ended, from what the pipeline recorded. */
function endReasonOf(rc: RequestContext, completed: boolean): NonNullable<RequestContext['endReason']> {
  // Ended by a drain that ran out of time, its client told so (see stop).
  if (rc.errorCode === 'gateway_shutdown') return 'shutdown';
  // Not completed, and no failure of the back end's told first (a stream of bytes it broke off
  // is cut, having no error event to end with): the client left.
  if (!completed && (rc.errorCode === undefined || rc.errorCode === 'client_closed_request')) return 'client_gone';
  if (rc.errorCode === 'upstream_timeout') return 'timeout';
  if (rc.errorCode?.startsWith('upstream_') || (rc.errorCode && rc.attempts.length > 0)) return 'upstream_error';
  if (rc.errorCode) return 'rejected';
  return 'done';
}

function accessLog(logger: Logger, rc: RequestContext, completed: boolean, inPaths: readonly string[]): void {
  // At level warn or above the line is dropped: do not build it.
  if (!writesLevel(logger, 'info')) return;
  logger.info('request', {
    requestId: rc.id,
    method: rc.method,
    path: loggablePath(rc.path, inPaths),
    status: rc.status,
    model: rc.model,
    provider: rc.target?.provider.id,
    durationMs: Math.round(elapsedMs(rc) * 100) / 100,
    key: rc.key?.prefix,
    stream: rc.stream || undefined,
    usage: rc.usage,
    error: rc.errorCode,
    aborted: completed ? undefined : true,
    // Several tries, or one that failed: why each back end failed is the operator's to read here.
    attempts: rc.attempts.length > 1 || rc.attempts[0]?.error !== undefined ? rc.attempts : undefined,
  });
}
