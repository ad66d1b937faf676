import { validateHeaderName, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from 'winston';
import type { Call, RequestContext, Target } from './context.js';
import { clientGone, elapsedMs } from './context.js';
import { pluginBlamed } from './blame.js';
import { GatewayError, isGatewayError, toErrorView, defaultErrorBody, withClientParam, type ErrorView } from './errors.js';
import { callBail, callObservers, callParallelObservers, callSeries, callWaterfall, type GatewayHooks, type TapFailure } from './hooks.js';
import { bodyWaitMs, type JsonBody } from './http/body.js';
import type { MultipartBody } from './http/multipart.js';
import { billedBy, billedSoFarBy, reportedUsage, usageOf } from './usage.js';
import { isStoreBusy, isStoreUnwritableForNow } from './store/index.js';
import { answerUsage, forgetSentAsIs } from './passthrough.js';
import { chatChunkAnswers, mapStream, pollOf, primeStream, PRIME_WINDOW_MS } from './stream.js';
import { abortBinding, AttemptClock, signalLink, type Timeouts } from './attempt.js';
import { redactSecrets, redactWholeSecrets, transportError } from './http/upstream.js';
import type { ChatChunk, OperationId, UpstreamJsonResponse, UpstreamRequest, UpstreamResponse, UpstreamStreamResponse, Usage } from './operations.js';
import type { CallRoute, FormatReply, HandlerRoute, ModelCatalogView, ProviderCallContext, RouteInput, WireFormat } from './plugin.js';

export interface PipelineDeps {
  hooks: GatewayHooks;
  catalog: ModelCatalogView;
  logger: Logger;
  /** The JSON body: at once when it is at hand, else a promise. */
  readJsonBody(req: IncomingMessage): JsonBody | Promise<JsonBody>;
  /** A multipart/form-data body (routes with `body: 'multipart'`): files spooled to disk, fields typed by `schema`. */
  readMultipartBody?(req: IncomingMessage, schema?: object): Promise<MultipartBody>;
  /** The timeouts of a provider instance. */
  timeoutsFor(providerId: string): Timeouts;
  /** The hop headers every upstream request of this call carries. */
  forwardHeaders(rc: RequestContext): Readonly<Record<string, string>>;
  /** The providers' credentials, redacted from what the pipeline logs. */
  secrets: readonly string[];
  /** server.streamKeepAliveMs: an event stream silent this long gets a keep-alive comment (0: never). */
  streamKeepAliveMs?: number;
  /** server.writeTimeoutMs: a client that reads nothing this long while an answer waits for it is let go (0: never). */
  writeTimeoutMs?: number;
}

/** One HTTP exchange as the pipeline sees it: node's request and response, and the route's parameters. */
export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The route's path parameters (`:model`), decoded. */
  readonly params: Readonly<Record<string, string>>;
}

function routeInput(ex: Exchange, rc: RequestContext, body: Record<string, unknown>): RouteInput {
  return { body, params: ex.params, query: rc.query, headers: rc.headers };
}

/**
 * The headers of one answer, in order, as the flat list `[name, value, ...]` that one
 * `writeHead` takes: node then builds the head from it directly, where a `setHeader` per header
 * validates, lower-cases and copies each into a table of its own first (about 3 µs a reply of a
 * dozen headers). Every answer's list starts with its request id. Names are kept lower-case,
 * and a name set again replaces its value, as `setHeader` does.
 */
export class ReplyHead {
  readonly list: string[];

  constructor(requestId: string) {
    this.list = ['x-request-id', requestId];
  }

  set(name: string, value: string): void {
    const list = this.list;
    for (let i = 0; i < list.length; i += 2) {
      if (list[i] === name) {
        list[i + 1] = value;
        return;
      }
    }
    list.push(name, value);
  }

  /** Headers given by a plugin or a format, whose names may be in any case. */
  setAll(headers: Readonly<Record<string, string>>): void {
    for (const name in headers) this.set(name.toLowerCase(), headers[name]!);
  }

  get(name: string): string | undefined {
    const list = this.list;
    for (let i = 0; i < list.length; i += 2) if (list[i] === name) return list[i + 1];
    return undefined;
  }

  remove(name: string): void {
    const list = this.list;
    for (let i = 0; i < list.length; i += 2) {
      if (list[i] === name) {
        list.splice(i, 2);
        return;
      }
    }
  }
}

/** Headers that frame the reply or the connection: the gateway's to write, never a plugin's. */
const FRAMING_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'trailer', 'te', 'x-request-id']);
/** Header names a plugin set that could not be sent, already told, by the log they were told in (once each; at most 100 kept). */
const refusedPluginHeaders = new WeakMap<Logger, Set<string>>();
/** Header names already found sendable (the same few on every reply: a rate limit's, a cost): checked once. */
const sendableNames = new Set<string>();
/** A value Node writes as it is: no control character but tab, nothing past Latin-1. */
const SENDABLE_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers set by plugins (`ctx.responseHeaders`, or a plugin's error's own) onto a reply's head:
 * those HTTP can carry and that do not frame the reply. A name or value Node would refuse (a line
 * break, a character past Latin-1) would throw as the head is written, leaving the client with no
 * answer at all, and a Content-Length of a plugin's would contradict the body: left out, and told
 * once at warn.
 */
export function addPluginHeaders(head: ReplyHead, rc: RequestContext, logger?: Logger, headers: Readonly<Record<string, string>> = rc.responseHeaders): void {
  for (const name in headers) {
    const value: unknown = headers[name];
    const lower = name.toLowerCase();
    if (typeof value === 'string' && SENDABLE_VALUE.test(value) && sendableName(lower)) head.set(lower, value);
    else if (logger) {
      let told = refusedPluginHeaders.get(logger);
      if (!told) refusedPluginHeaders.set(logger, (told = new Set()));
      if (told.has(lower) || told.size >= 100) continue;
      told.add(lower);
      logger.warn('a plugin set a response header the gateway cannot send (an invalid name or value, or one that frames the reply): left out', {
        requestId: rc.id,
        header: JSON.stringify(name.slice(0, 64)),
      });
    }
  }
}

function sendableName(lower: string): boolean {
  if (sendableNames.has(lower)) return true;
  if (FRAMING_HEADERS.has(lower)) return false;
  try {
    validateHeaderName(lower);
  } catch {
    return false;
  }
  if (sendableNames.size < 1000) sendableNames.add(lower);
  return true;
}

/**
 * End a response with a whole body, its head written at once: its length set, no body (nor type
 * or length) for HEAD or a status that has none. `type` is the Content-Type when none was set.
 */
export function sendBody(res: ServerResponse, status: number, head: ReplyHead, body: string | Uint8Array, type: string): void {
  if (status === 204 || status === 304) {
    head.remove('content-type');
    head.remove('content-length');
    res.writeHead(status, head.list);
    res.end();
    return;
  }
  if (head.get('content-type') === undefined) head.list.push('content-type', type);
  head.list.push('content-length', String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength));
  res.writeHead(status, head.list);
  res.end(body);
}

/**
 * Any thrown value as a GatewayError; unknown ones become internal_error and are logged with
 * their stack, the configured credentials (`secrets`) redacted from it. A GatewayError whose
 * message names a credential (a provider that put its key in a detail) has it redacted before
 * any client, tap or log line sees it.
 */
export function asGatewayError(error: unknown, rc: RequestContext, logger: Logger, secrets: readonly string[] = []): GatewayError {
  if (isGatewayError(error)) {
    if (secrets.length > 0) error.message = redactWholeSecrets(error.message, secrets);
    error.message = error.message.replace(MADE_KEY, '[redacted]');
    return error;
  }
  // The store locked by another process for longer than the gateway waits (BUSY_TIMEOUT_MS): nothing
  // is wrong with the request, and trying again shortly works.
  if (isStoreBusy(error)) {
    logger.warn('the store is locked by another process: a request that must write at once was refused', { requestId: rc.id });
    return new GatewayError('store_busy', { headers: { 'retry-after': '1' } });
  }
  // The disk full or read-only, an I/O error: a request that must write at once (a key made or
  // revoked, a video task) cannot, and the operator must hear of it; the request is not the fault.
  if (isStoreUnwritableForNow(error)) {
    logger.error('the store cannot be written: a request that must write at once was refused', { requestId: rc.id, error: String(error) });
    return new GatewayError('store_unavailable', { headers: { 'retry-after': '5' } });
  }
  // A third party's plugin it came from, when its stack says so (a tap's bug).
  const plugin = pluginBlamed(error);
  logger.error('unhandled error', plugin ? { requestId: rc.id, plugin, error: failureText(error, secrets) } : { requestId: rc.id, error: failureText(error, secrets) });
  return new GatewayError('internal_error', { params: { requestId: rc.id } });
}

export function renderErrorBody(format: WireFormat | undefined, view: ErrorView): string {
  return JSON.stringify(format?.renderError ? format.renderError(view) : defaultErrorBody(view));
}

/**
 * Time spent in the gateway so far, not counting the time the back ends took to answer (each
 * attempt's upstreamMs, else its whole duration, and a handler route's waits on a back end,
 * rc.upstreamWaitMs), nor the wait for a client's body that came after its headers
 * (rc.bodyWaitMs): the gateway's tax on this call, as `x-switchyard-overhead-ms`. Parsing and
 * translating an answer count as the gateway's.
 */
export function overheadMs(rc: RequestContext): string {
  let upstream = (rc.upstreamWaitMs ?? 0) + (rc.bodyWaitMs ?? 0);
  for (const attempt of rc.attempts) upstream += attempt.upstreamMs ?? attempt.durationMs;
  return Math.max(0, performance.now() - rc.startedAt - upstream).toFixed(3);
}

/** The reply header with the back end's own id for the answer (the last attempt's), for the client to quote to that vendor. */
export const UPSTREAM_ID_HEADER = 'x-switchyard-upstream-request-id';

/** The gateway's own reply headers: its overhead, and the back end's id for the answer when it gave one. */
export function gatewayHeaders(head: ReplyHead, rc: RequestContext): void {
  head.set('x-switchyard-overhead-ms', overheadMs(rc));
  const last = rc.attempts.length > 0 ? rc.attempts[rc.attempts.length - 1]!.upstreamRequestId : undefined;
  if (last !== undefined) head.set(UPSTREAM_ID_HEADER, last);
}

/** Write a format's reply: JSON as one string, streams as SSE text written at the client's pace. */
export function writeReply(res: ServerResponse, reply: FormatReply, rc: RequestContext, observer?: StreamObserver, logger?: Logger): void {
  const status = reply.status ?? 200;
  const head = new ReplyHead(rc.id);
  addPluginHeaders(head, rc, logger);
  gatewayHeaders(head, rc);
  if (reply.headers) head.setAll(reply.headers);
  if ('stream' in reply) {
    const type = reply.headers?.['content-type'];
    if (!type) head.set('content-type', 'text/event-stream');
    // SSE's headers only for SSE: a stream of bytes (speech audio) keeps its own type.
    if (!type || type.startsWith('text/event-stream')) {
      head.set('cache-control', 'no-cache');
      head.set('x-accel-buffering', 'no');
    }
    // The head goes out with the first piece of the stream.
    res.writeHead(status, head.list);
    const sse = !type || type.startsWith('text/event-stream');
    void writeStream(res, reply.stream, rc, observer, sse, sse || reply.streamError !== undefined);
    return;
  }
  rc.firstByteAt = performance.now();
  if (typeof reply.body === 'string') sendBody(res, status, head, reply.body, 'text/plain; charset=utf-8');
  else if (reply.body instanceof Uint8Array) sendBody(res, status, head, reply.body, 'application/octet-stream');
  else {
    head.set('content-type', 'application/json');
    sendBody(res, status, head, JSON.stringify(reply.body), 'application/json');
  }
}

/** Texts taken in one pass are written once they reach this many characters, whatever is still ready. */
const PASS_TEXT_LIMIT = 64 * 1024;

/** What the writer of a stream tells the pipeline. */
interface StreamObserver {
  /** The source failed: the last text to write (a stream error event in the client's format). */
  onError(error: unknown): string | undefined;
  /** The stream is over, however it ended. */
  onEnd(): void;
  /** How long a client may read nothing while its answer waits for it (see closeIfStalled); 0 or absent: no bound. */
  stallMs?: number;
  /** After this long without a byte to its client, an event stream gets a `: keep-alive` comment (0 or absent: never). */
  keepAliveMs?: number;
}

/** An SSE comment: every client's event parser skips it; proxies on the way see the stream alive. */
const KEEP_ALIVE = ': keep-alive\n\n';

/**
 * Write each piece of text as it comes, waiting for 'drain' when the client reads slower than
 * the back end writes (so the back end is paused, never buffered whole). When the source fails,
 * an event stream ends with the format's error event; a stream of bytes (audio) has no place for
 * one, so its connection is cut: the client sees a broken transfer, never a complete-looking file.
 */
async function writeStream(
  res: ServerResponse,
  source: AsyncIterable<string | Uint8Array>,
  rc: RequestContext,
  observer: StreamObserver | undefined,
  events: boolean,
  /** A failure ends the stream with the format's text (an event stream, or a format's own `streamError`), not a cut connection. */
  endsWithText = events,
): Promise<void> {
  const iterator = source[Symbol.asyncIterator]();
  const stallMs = observer?.stallMs ?? 0;
  const drained = (res: ServerResponse) => drainedWithin(res, stallMs);
  // A model that thinks a long while sends nothing: a proxy between the gateway and its client
  // (nginx, a load balancer: 60 s by default) would cut the stream as idle. The socket's own
  // timer, which every write restarts, says when nothing was written for keepAliveMs.
  const keepAliveMs = events ? (observer?.keepAliveMs ?? 0) : 0;
  const keepAlive = () => {
    if (!res.destroyed && !res.writableEnded) res.write(KEEP_ALIVE);
  };
  if (keepAliveMs > 0) res.setTimeout(keepAliveMs, keepAlive);
  // What is ready is taken without a promise (the events of one read from the back end).
  const poll = pollOf(iterator);
  // The pieces written in one turn of the event loop leave in one system call, not one each:
  // the response is corked until the turn's promise jobs are done. The first leaves at once,
  // with the head: the client's first byte does not wait for the rest of what is ready to be
  // read, metered and rendered (a primed stream gives what it held as a pass of its own).
  let started = false;
  let corked = false;
  const uncork = () => {
    corked = false;
    if (!res.destroyed && res.writableCorked > 0) res.uncork();
  };
  // The texts taken in one pass (everything ready at once) go to the response as one piece: a
  // write per event cost node's writable machinery (an entry, its encoding, a callback slot) 22
  // times a stream where one a pass does.
  let text = '';
  const write = (piece: string | Uint8Array): boolean => {
    if (!started) {
      started = true;
      const ok = res.write(piece);
      // node corks the socket under every response write until its next tick, which comes only
      // after the promise jobs that would read the rest: the first write is sent now.
      const socket = res.socket;
      while (socket && socket.writableCorked > 0) socket.uncork();
      return ok;
    }
    if (!corked) {
      corked = true;
      res.cork();
      process.nextTick(uncork);
    }
    return res.write(piece);
  };
  /** Write the texts taken so far; false when the client is behind (wait for 'drain'). */
  const flush = (): boolean => {
    if (text === '') return true;
    const piece = text;
    text = '';
    return write(piece);
  };
  try {
    for (;;) {
      let next = poll?.();
      if (next === undefined) {
        // Nothing else is ready: what this pass took goes out before waiting for more.
        if (!flush()) await drained(res);
        next = await iterator.next();
      }
      if (next.done) break;
      rc.firstByteAt ??= performance.now();
      if (res.destroyed) break;
      const piece = next.value;
      if (typeof piece === 'string') {
        text += piece;
        if (text.length >= PASS_TEXT_LIMIT && !flush()) await drained(res);
      } else {
        if (!flush()) await drained(res);
        if (!write(piece)) await drained(res);
      }
    }
  } catch (error) {
    const last = observer?.onError(error);
    if (!endsWithText) res.destroy();
    else if (!res.destroyed) {
      // What was taken before the failure, then the format's error event.
      flush();
      if (last !== undefined) res.write(last);
    }
  } finally {
    if (keepAliveMs > 0) {
      res.off('timeout', keepAlive);
      // Once the answer has finished, node has set the connection's keep-alive timer: left as it is.
      if (!res.writableFinished) res.socket?.setTimeout(0);
    }
    if (res.destroyed) await Promise.resolve(iterator.return?.()).catch(() => undefined);
    else {
      flush();
      res.end();
      // The end waits behind what the client has not read yet: bounded too.
      if (!res.writableFinished && stallMs > 0) res.once('close', closeIfStalled(res, stallMs));
    }
    observer?.onEnd();
  }
}

/**
 * A client that reads nothing for `ms` while the gateway waits to write to it (it stopped
 * reading and keeps its connection open) is let go: its connection is closed, the back end's
 * stream with it, and the request ends as the client's leaving. Without it such a client held
 * its concurrency slot and its budget hold for as long as it kept the socket. The canceller.
 */
function closeIfStalled(res: ServerResponse, ms: number): () => void {
  const timer = setTimeout(() => res.destroy(), ms);
  timer.unref();
  return () => clearTimeout(timer);
}

function drainedWithin(res: ServerResponse, stallMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const cancel = stallMs > 0 ? closeIfStalled(res, stallMs) : undefined;
    const done = () => {
      cancel?.();
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/**
 * Operations whose call the back end bills once it has it, finished without their client once
 * sent: a video submit whose client hangs up still becomes the task (and the charge) the vendor
 * made, rather than a job nobody recorded.
 */
const FINISHED_ONCE_SENT: ReadonlySet<OperationId> = new Set<OperationId>(['video']);

/** The longest model name a call may name (the longest real ones, cloud ARNs, are about 150). */
export const MAX_MODEL_NAME = 256;

/** The pipeline for one call route: onRequest -> body -> validate -> targets -> provider -> render. */
export async function runCall(deps: PipelineDeps, ex: Exchange, rc: RequestContext, format: WireFormat, route: CallRoute): Promise<void> {
  const { hooks } = deps;
  // Known from the route: a request refused before its body is read is logged with it too.
  rc.operation = route.operation;
  rc.outputLimitField = route.outputLimitField;
  rc.defaultOutputTokens = route.defaultOutputTokens;
  const admitted = callSeries(hooks.onRequest, rc);
  if (admitted) await admitted;

  const read = isForm(route, ex.req) ? readUploads(deps, ex, route) : deps.readJsonBody(ex.req);
  // A body at hand is taken without a turn of the microtask queue.
  const body = read instanceof Promise ? await waitedFor(read, ex, rc) : read;
  const input = routeInput(ex, rc, body.value);
  const parsed = route.parse(input);
  if (parsed.model.length > MAX_MODEL_NAME) {
    // Not kept: a name this long is no back end's, and would be logged and echoed whole.
    throw new GatewayError('invalid_value', { param: 'model', params: { param: 'model', detail: `a model name has at most ${MAX_MODEL_NAME} characters; this one has ${parsed.model.length}` } });
  }
  rc.model = recordedModel(parsed.model, deps.secrets);
  rc.stream = parsed.stream;
  const call: Call = {
    operation: route.operation,
    model: parsed.model,
    stream: parsed.stream,
    format: format.id,
    body: body.value,
    rawBody: parsed.rewritten ? '' : body.raw,
    canonical: undefined,
    wantsStreamUsage: parsed.wantsStreamUsage ?? false,
    schema: route.schema,
  };

  let targets: readonly Target[] | undefined;
  try {
    const validated = callSeries(hooks.validate, rc, call);
    if (validated) await validated;
    call.canonical = route.toCanonical ? route.toCanonical(body.value, input) : body.value;

    let chosen = callBail(hooks.resolveTargets, rc, call);
    if (chosen instanceof Promise) chosen = await chosen;
    targets = chosen ?? deps.catalog.candidates(call.model, call.operation);
    rc.targets = targets;
    if (!targets || targets.length === 0) {
      const known = deps.catalog.list().some((m) => m.id === call.model);
      throw known
        ? new GatewayError('operation_not_supported', { params: { model: call.model, operation: call.operation }, param: 'model' })
        : new GatewayError('model_not_found', { params: { model: call.model }, param: 'model' });
    }
  } catch (error) {
    // The key's or the catalog's refusal of the model names the field the client sent it in.
    const named = route.clientParams?.model;
    throw named ? withClientParam(error, { model: named }) : error;
  }

  const tried = tryTargets(deps, rc, call, targets, route.relaysOpeningChunk === true);
  // A back end's error about a field its client names otherwise names the client's.
  const names = route.clientParams;
  const { response, clock } = await (names ? tried.catch((error: unknown) => Promise.reject(withClientParam(error, names))) : tried);
  let final: UpstreamResponse;
  try {
    const after = callWaterfall(hooks.afterUpstream, response, rc);
    final = after instanceof Promise ? await after : after;
    // A tap that answered with another response must answer in the shape the format renders, as
    // a provider must (a plugin's bug is the gateway's: a 500, not a body the client cannot read).
    if (final !== response && PRIMED_OPERATIONS[call.operation]) {
      const wrong = final !== null && typeof final === 'object' ? wrongShape(final, call.operation, call.stream) : 'no response';
      if (wrong) {
        deps.logger.error('an afterUpstream tap answered in the wrong shape', { requestId: rc.id, detail: wrong.replace('the back end', 'it') });
        throw new GatewayError('internal_error', { params: { requestId: rc.id } });
      }
    }
    if (final.kind === 'stream') {
      // The stream's chunks run under the attempt's idle and total timeouts.
      streamReply(deps, ex.res, rc, format, route, call, final, clock);
      return;
    }
  } catch (error) {
    // Nothing will read the stream now: release the upstream connection.
    clock.finish();
    if (response.kind === 'stream') await closeChunks(response.chunks);
    // A tap refused the answer (an output check) or failed after the back end gave it whole: the
    // back end has billed it, and so is the key (a client that does not get an answer it cost
    // still cost it, as one that leaves does).
    else chargeWhole(deps, rc, call.operation, response);
    throw error;
  }
  const usage = answerUsage(call.operation, final);
  if (usage) {
    rc.usage = usage;
    reportUsage(deps, usage, rc);
  }
  writeReply(ex.res, route.render(final, call, rc), rc, undefined, deps.logger);
}

/**
 * How an observer tap's failure is logged: a warning naming the hook, the request, the tap (its
 * plugin) and what it threw (its stack, for a plugin's author), the configured credentials
 * redacted.
 */
export function tapFailureLogger(logger: Logger, hook: string, rc: RequestContext, secrets: readonly string[]): TapFailure {
  return (plugin, error) => logger.warn(`${hook} tap failed`, { requestId: rc.id, plugin, error: failureText(error, secrets) });
}

/** What a plugin's failure is logged as: a bug's stack (a GatewayError's message), the configured credentials redacted. */
export function failureText(error: unknown, secrets: readonly string[]): string {
  const text = error instanceof Error && !isGatewayError(error) ? (error.stack ?? String(error)) : String(error);
  // Keys the gateway made (kept only as hashes, so not among `secrets`) by their shape.
  return redactSecrets(text, secrets).replace(MADE_KEY, '[redacted]');
}

/** A client key as `switchyard keys create` and the admin API make them. */
const MADE_KEY = /sk-sy-[A-Za-z0-9_-]{8,}/g;

/**
 * A model name as logs, usage rows and the request log keep it (and metering prices it): a key
 * pasted into the model field by mistake (one the gateway made, or a configured credential of
 * the length of a real key) is redacted there as it is in the answer's error. A short credential
 * (`ollama`, `none`: the placeholders local back ends take) is left alone: it may well be part of
 * a real model name (`ollama/llama3`), whose price it would hide.
 */
export function recordedModel(model: string, secrets: readonly string[]): string {
  const own = model.includes('sk-sy-') ? model.replace(MADE_KEY, '[redacted]') : model;
  // A name shorter than a credential cannot hold it (most are): nothing is searched per call.
  for (const secret of secrets) {
    if (secret.length >= KEY_LIKE_LENGTH && own.length >= secret.length && own.includes(secret)) {
      return redactWholeSecrets(own, secrets.filter((s) => s.length >= KEY_LIKE_LENGTH));
    }
  }
  return own;
}

/** The shortest credential recordedModel looks for in a model name (real API keys are longer). */
const KEY_LIKE_LENGTH = 16;

/**
 * A failure that is the client's request, refused by the provider before it sent anything to its
 * back end through the gateway's HTTP client (a translation's 400): not the back end's refusal
 * (`upstream_bad_request`), nor a timeout.
 */
function refusedUnsent(gerr: GatewayError, clock: AttemptClock): boolean {
  return (
    gerr.type === 'invalid_request_error' &&
    gerr.upstreamStatus === undefined &&
    !gerr.code.startsWith('upstream_') &&
    !BACK_END_SAYS.has(gerr.code) &&
    clock.nothingSent &&
    !clock.timedOut
  );
}

/** Codes of the request's fault that only a back end says (a prompt too long for it): never a translation's refusal. */
const BACK_END_SAYS: ReadonlySet<string> = new Set(['context_length_exceeded', 'client_closed_request']);

/**
 * The usage a back end reported, and bills, for the failure the call ends with (see
 * failureBilled), as the call's. A failure another target then answered for is not charged: the
 * call has one usage, its answer's.
 */
function chargeFailure(deps: PipelineDeps, rc: RequestContext, error: unknown): void {
  const usage = billedBy(error);
  if (!usage) return;
  rc.usage = usage;
  reportUsage(deps, usage, rc);
}

/** The usage a whole answer reports, as the call's: an answer the client does not get (a tap refused it, or failed) is charged as it was billed. */
function chargeWhole(deps: PipelineDeps, rc: RequestContext, operation: OperationId, response: UpstreamJsonResponse): void {
  const usage = answerUsage(operation, response);
  if (!usage) return;
  rc.usage = usage;
  reportUsage(deps, usage, rc);
}

/** Tell the `onUsage` observers; the reply never waits for them, a failing one is logged and the others still run. */
function reportUsage(deps: PipelineDeps, usage: Usage, rc: RequestContext): void {
  callParallelObservers(deps.hooks.onUsage, tapFailureLogger(deps.logger, 'onUsage', rc, deps.secrets), usage, rc);
}

/** Whether this call's body is read as a form: always for a multipart route, by Content-Type for one that takes either. */
function isForm(route: CallRoute, req: IncomingMessage): boolean {
  if (route.body === 'multipart') return true;
  return route.body === 'json-or-multipart' && /^multipart\/form-data/i.test(req.headers['content-type'] ?? '');
}

/** A form's fields as the body; its spooled files are deleted once the response closes, however the call ended. */
async function readUploads(deps: PipelineDeps, ex: Exchange, route: CallRoute): Promise<JsonBody> {
  if (!deps.readMultipartBody) throw new Error('this gateway reads no multipart/form-data bodies');
  const form = await deps.readMultipartBody(ex.req, route.schema);
  if (form.files.length > 0) {
    if (ex.res.destroyed) void form.cleanup();
    else ex.res.once('close', () => void form.cleanup());
  }
  return { value: form.value, raw: '' };
}

/** What a provider's handler gets for one attempt; its `signal` is made only if read. */
class AttemptContext implements ProviderCallContext {
  readonly requestId: string;
  constructor(
    readonly request: RequestContext,
    readonly abort: AttemptClock,
    readonly logger: Logger,
  ) {
    this.requestId = request.id;
  }

  get signal(): AbortSignal {
    return this.abort.signal;
  }
}

/** Retry-After as milliseconds: seconds, or an HTTP date. */
export function retryAfterMs(value: string | undefined): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

interface Answer {
  response: UpstreamResponse;
  clock: AttemptClock;
}

/**
 * Try the targets in order until one answers. A failure moves on only while nothing reached the
 * client, when it is retryable, the target is one not tried yet in this call, and no
 * `shouldRetry` tap (the retry budget) says no.
 */
async function tryTargets(deps: PipelineDeps, rc: RequestContext, call: Call, targets: readonly Target[], relaysOpeningChunk: boolean): Promise<Answer> {
  let lastError: GatewayError | undefined;
  /** What the last failed attempt threw, as it threw it (it may say what its back end billed: chargeFailure). */
  let lastThrown: unknown;
  // Only a call with several targets can meet one twice.
  const tried = targets.length > 1 ? new Set<string>() : undefined;
  for (const target of targets) {
    const handler = target.provider.operations[call.operation] as
      | ((req: UpstreamRequest, context: ProviderCallContext) => Promise<UpstreamResponse>)
      | undefined;
    if (!handler) continue;
    if (tried) {
      const id = `${target.provider.id}\u0000${target.model}`;
      if (tried.has(id)) continue;
      tried.add(id);
    }
    if (lastError && deps.hooks.shouldRetry.call(lastError, rc) === false) break;
    // The target being tried, for the taps; a call they refuse before it went anywhere (a limit,
    // a budget) names no back end in its log row.
    const previous = rc.target;
    rc.target = target;
    let prepared: UpstreamRequest | Promise<UpstreamRequest>;
    try {
      prepared = callWaterfall(
        deps.hooks.beforeUpstream,
        {
          operation: call.operation,
          model: target.model,
          stream: call.stream,
          body: call.canonical as never,
          clientWantsStreamUsage: call.wantsStreamUsage,
          forwardHeaders: deps.forwardHeaders(rc),
          source: { format: call.format, body: call.body, raw: call.rawBody || undefined, headers: rc.headers },
        },
        rc,
      );
      if (prepared instanceof Promise) prepared = await prepared;
    } catch (error) {
      rc.target = previous;
      throw error;
    }
    const request = prepared;
    if (clientGone(rc)) {
      // The client left while the taps prepared the request (a budget's count of a long prompt):
      // no back end was asked, so no attempt, and nothing is charged for it (a target tried
      // before it that billed its failure still charges that).
      rc.target = previous;
      chargeFailure(deps, rc, lastThrown);
      throw new GatewayError('client_closed_request');
    }
    const clock = new AttemptClock(rc.client ?? signalLink(rc.signal), deps.timeoutsFor(target.provider.id), FINISHED_ONCE_SENT.has(call.operation));
    const started = performance.now();
    // What a provider records about the call once its back end answers (losses, a body sent as
    // it came) is this attempt's: undone if the attempt still fails (while its stream is primed).
    const lossesBefore = rc.losses?.length ?? 0;
    /** While the answering stream is read up to its first piece of answer (see PRIMED_OPERATIONS). */
    let priming = false;
    /** The chunks read while priming (see primeStream's `held`). */
    let held: unknown[] | undefined;
    /** The attempt's answer, once it is recorded as answered (an onAttempt tap that throws then fails the call, not the attempt). */
    let answered: UpstreamResponse | undefined;
    try {
      const context = new AttemptContext(rc, clock, deps.logger);
      let response = await clock.race(handler(request, context));
      clock.answered();
      // Usage the provider gives in the gateway's shape is believed only if its figures are ones.
      if (response.usage !== undefined) {
        const usage = reportedUsage(response.usage);
        if (usage !== response.usage) response = { ...response, usage };
      }
      const answers = PRIMED_OPERATIONS[call.operation];
      if (answers) {
        const wrong = wrongShape(response, call.operation, request.stream);
        if (wrong) {
          // Nothing will read it: the back end is let go before the next target is tried.
          if (response.kind === 'stream') {
            clock.cancel();
            void closeChunks(response.chunks);
          }
          throw new GatewayError('upstream_error', { params: { detail: wrong }, retryable: true });
        }
      }
      if (response.kind === 'stream' && answers) {
        // Read up to its first chunk (see CallRoute.relaysOpeningChunk), or its first piece of
        // answer, before the stream is the client's: a back end that fails right after its
        // headers (a cut, an error event, a body that is not a stream) fails this attempt, and
        // another target can still be tried.
        priming = true;
        const bound = abortBinding(response.chunks) === clock;
        const until = relaysOpeningChunk && call.operation !== 'responses' && !response.primeToAnswer ? anyChunk : answers;
        const chunks = await primeStream(response.chunks as AsyncIterable<unknown>, until, PRIME_WINDOW_MS, (iterator) => clock.next(iterator, bound), (held = []));
        priming = false;
        response = { ...response, chunks };
      }
      const durationMs = performance.now() - started;
      rc.attempts.push({ provider: target.provider.id, model: target.model, status: response.status, durationMs, upstreamMs: clock.upstreamMs(), upstreamRequestId: clock.upstreamRequestId });
      answered = response;
      deps.hooks.onAttempt.call({ target, status: response.status, durationMs }, rc);
      if (response.kind === 'json') clock.finish();
      return { response, clock };
    } catch (error) {
      clock.finish();
      if (answered) {
        // The back end answered and an onAttempt tap threw (a plugin's bug): the call fails as
        // the tap's, not as a failed attempt told to onAttempt again, which would count against a
        // healthy back end and try the next one. A whole answer's usage is charged, as billed.
        if (answered.kind === 'stream') await closeChunks(answered.chunks);
        else chargeWhole(deps, rc, call.operation, answered);
        throw asGatewayError(error, rc, deps.logger, deps.secrets);
      }
      if (rc.losses && rc.losses.length > lossesBefore) rc.losses.length = lossesBefore;
      forgetSentAsIs(rc);
      const gone = clientGone(rc);
      const gerr = gone
        ? new GatewayError('client_closed_request')
        : (clock.timedOut ?? asGatewayError(error, rc, deps.logger, deps.secrets));
      if (!gone && refusedUnsent(gerr, clock)) {
        // The provider refused the request as it translated it (a conversation no back end of its
        // kind takes), before anything went up: the client's mistake, not an attempt of this back
        // end. No attempt is recorded or told to onAttempt (its health is unchanged), no usage row;
        // a target tried before it that billed its failure still charges it.
        rc.target = previous;
        chargeFailure(deps, rc, lastThrown);
        throw gerr;
      }
      // The client left while its stream was held back: what the back end reported in the chunks
      // read so far (the prompt's usage at the stream's start, cache tokens included) counts, as
      // it does when the client leaves later.
      if (gone && priming && held && held.length > 0) meterHeld(deps, rc, call.operation, held);
      // A stream broken before its first piece of answer: nothing reached the client, another target may answer.
      const retryable = gerr.retryable || (priming && gerr.code === 'upstream_error');
      // A failed attempt is the back end's whole (one that stalled after its last byte until a timeout included).
      const durationMs = performance.now() - started;
      rc.attempts.push({
        provider: target.provider.id,
        model: target.model,
        status: gerr.upstreamStatus ?? 'error',
        durationMs,
        upstreamRequestId: clock.upstreamRequestId,
        error: gerr.code,
        message: gerr.message.slice(0, 300),
        ...(clock.unsent ? { unsent: true } : {}),
      });
      deps.hooks.onAttempt.call({ target, error: gerr, durationMs, retryAfterMs: retryAfterMs(gerr.headers['retry-after']) }, rc);
      lastError = gerr;
      lastThrown = error;
      if (!retryable || clientGone(rc)) {
        chargeFailure(deps, rc, error);
        throw gerr;
      }
    }
  }
  // No target left to try (or the retry budget said no): the call ends with the last failure.
  chargeFailure(deps, rc, lastThrown);
  throw lastError ?? new GatewayError('no_upstream_available', { params: { model: call.model } });
}

/**
 * The chunks a stream gave while it was primed, when its client left before it was handed on:
 * through the onStreamChunk taps (metering notes the usage they report), and the usage a chunk
 * carries as the call's, as streamReply does for the chunks it reads. Nothing is rendered: the
 * client is gone. A tap that throws changes nothing (the call ends as the client's leaving).
 */
function meterHeld(deps: PipelineDeps, rc: RequestContext, operation: OperationId, held: readonly unknown[]): void {
  for (const chunk of held) {
    try {
      const tapped = deps.hooks.onStreamChunk.call(chunk as never, rc);
      const usage = usageOf(operation, tapped);
      if (usage) rc.usage = usage;
    } catch {
      return;
    }
  }
}

/**
 * What a provider answered a chat, completion or Responses call with must be what the format
 * renders: a stream when the request it was given asked for one and an answer whole when it did
 * not, and a chat or completion answer with its list of choices. Anything else (a third party's
 * provider that got it wrong) fails the attempt, retryably: another target may answer, and
 * nothing the client cannot read reaches it. What is wrong, or undefined.
 */
function wrongShape(response: UpstreamResponse, operation: OperationId, stream: boolean): string | undefined {
  if (response.kind === 'stream') return stream ? undefined : 'the back end streamed an answer it was asked for whole';
  if (stream) return 'the back end answered whole a call it was asked to stream';
  if (operation !== 'chat' && operation !== 'completion') return undefined;
  const body = response.body as { choices?: unknown } | null;
  if (body === null || typeof body !== 'object' || !Array.isArray(body.choices)) return `the back end did not answer with a ${operation === 'chat' ? 'chat completion' : 'completion'}`;
  return undefined;
}

/** How far a stream is read before it is the client's when its first chunk reaches the client at once (CallRoute.relaysOpeningChunk). */
const anyChunk = (): boolean => true;

/**
 * Operations whose streams are read before they are the client's, and how a chunk is known to
 * carry a piece of answer: canonical chat or completion chunks (read this far unless the route
 * relays an opening chunk and the provider does not ask for more, primeToAnswer), and Responses
 * events past the opening `response.created` and `response.in_progress` (always).
 */
const PRIMED_OPERATIONS: Partial<Record<OperationId, (chunk: unknown) => boolean>> = {
  chat: chatChunkAnswers as (chunk: unknown) => boolean,
  completion: chatChunkAnswers as (chunk: unknown) => boolean,
  responses: (event) => {
    const type = (event as { type?: unknown } | null)?.type;
    return type !== 'response.created' && type !== 'response.in_progress';
  },
};

function streamReply(
  deps: PipelineDeps,
  res: ServerResponse,
  rc: RequestContext,
  format: WireFormat,
  route: CallRoute,
  call: Call,
  upstream: UpstreamStreamResponse,
  clock: AttemptClock,
): void {
  const { hooks, logger } = deps;
  const operation = call.operation;
  // One generator between the provider and the format: the attempt's idle and total timeouts,
  // the onStreamChunk taps and the usage the stream reports.
  // Chunks that fail by themselves when this attempt's clock aborts are not raced against it.
  const bound = abortBinding(upstream.chunks) === clock;
  const finishes = operation === 'chat' ? new Finishes((call.canonical as { n?: unknown } | undefined)?.n) : undefined;
  let usageCame: (() => void) | undefined;
  /** Whether a chunk gave the call's usage (rc.usage may be what the back end billed so far, see onLeave). */
  let usageChunk = false;
  /** A chunk through the taps, its usage the call's if it has one, the answer's end watched for. */
  const take = (chunk: unknown): unknown => {
    const tapped = hooks.onStreamChunk.call(chunk, rc);
    const usage = usageOf(operation, tapped);
    if (usage) {
      rc.usage = usage;
      usageChunk = true;
    }
    if (finishes && !usageChunk) {
      finishes.see(tapped as ChatChunk);
      // Over until a choice not seen before begins (n > 1 streamed one choice after another).
      clock.graceAfterAnswer(finishes.over ? USAGE_AFTER_LEAVE_MS : 0);
      if (finishes.over && !usageCame) rc.usagePending = new Promise((resolve) => (usageCame = resolve));
    }
    return tapped;
  };
  const metered = mapStream(
    upstream.chunks,
    (chunk) => {
      // A chunk already read when the attempt's clock ran out (its total timeout) goes no further.
      if (clock.reason) throw clock.reason;
      return take(chunk);
    },
    {
      // A client that leaves once the answer is over (the gateway had every choice's finish)
      // leaves before the usage a chat back end sends in a chunk of its own after it: that is read
      // still, for a short while (the attempt is not aborted before), and the call is charged
      // what the back end reports.
      leave: (source) => (finishes?.over && !usageChunk && !clock.aborted ? readOn(source, USAGE_AFTER_LEAVE_MS, (chunk) => (take(chunk), usageChunk)) : undefined),
      wait: (iterator) => clock.next(iterator, bound),
      fail: (error) => {
        // A back end that ends its stream with a failure and the usage it bills: that is the call's.
        const billed = billedBy(error);
        if (billed) rc.usage = billed;
        return clock.reason ?? upstreamFailure(error);
      },
      close: (completed) => {
        clock.finish();
        // Nobody reads on (the client left, or the stream failed): stop the back end's stream.
        if (!completed) clock.cancel();
      },
    },
  );
  // Usage known before the stream (speech: the characters asked for); a chunk's own wins.
  if (upstream.usage) rc.usage = upstream.usage;
  // A client that leaves before the end, when the back end had said what it bills (its usage
  // before its last event): that is the call's, not a count of what was delivered. Told as the
  // client leaves, before the call is settled.
  const billedSoFar = billedSoFarBy(upstream.chunks);
  const onLeave = billedSoFar && (() => void (rc.usage ??= billedSoFar()));
  if (onLeave) rc.client?.watch(onLeave);
  const reply = route.render({ ...upstream, chunks: metered }, call, rc);
  const usageOnce = () => {
    if (onLeave) rc.client?.unwatch(onLeave);
    if (rc.usage) reportUsage(deps, rc.usage, rc);
    rc.usagePending = undefined;
    usageCame?.();
  };
  if (!('stream' in reply)) {
    writeReply(res, reply, rc, undefined, logger);
    usageOnce();
    return;
  }
  const onError = (error: unknown): string | undefined => {
    const gerr = streamFailed(deps, rc, error);
    if (!gerr) return undefined; // the client left; nobody to tell
    void callObservers(hooks.onError, tapFailureLogger(logger, 'onError', rc, deps.secrets), gerr, rc);
    const view = toErrorView(gerr, rc.id);
    if (reply.streamError) return reply.streamError(view);
    return format.renderStreamError ? format.renderStreamError(view) : `data: ${renderErrorBody(format, view)}\n\n`;
  };
  // The stream ends (or fails, or the client leaves): usage is recorded once, from what arrived.
  const keepAliveMs = format.streamComments === false ? 0 : deps.streamKeepAliveMs;
  writeReply(res, reply, rc, { onError, onEnd: usageOnce, stallMs: deps.writeTimeoutMs, keepAliveMs }, logger);
}

/** How long a chat stream whose client left after the answer's end is read for its usage (see streamReply). */
const USAGE_AFTER_LEAVE_MS = 2000;

/** Whether every choice of a chat stream has finished: its answer is over, though its usage may come after. */
class Finishes {
  private readonly choices = new Map<number, boolean>();
  /** How many choices the call asked for (`n`): a back end may stream them one after another. */
  private readonly asked: number;

  constructor(n: unknown) {
    this.asked = typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
  }

  see(chunk: ChatChunk | undefined): void {
    const choices = chunk?.choices;
    if (!Array.isArray(choices)) return;
    for (const choice of choices) {
      const index = typeof choice?.index === 'number' ? choice.index : 0;
      if (choice?.finish_reason) this.choices.set(index, true);
      else if (!this.choices.has(index)) this.choices.set(index, false);
    }
  }

  get over(): boolean {
    if (this.choices.size < this.asked) return false;
    for (const finished of this.choices.values()) if (!finished) return false;
    return true;
  }
}

/** Read `source` on, each item to `take`, until it ends, `take` says enough, or `ms` pass. */
async function readOn(source: AsyncIterator<unknown>, ms: number, take: (item: unknown) => boolean): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    for (;;) {
      const read = source.next();
      const next = await Promise.race([read, late]);
      // Out of time: the read is let go with the source, which its caller ends.
      if (next === undefined) {
        read.catch(() => undefined);
        return;
      }
      if (next.done || take(next.value)) return;
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * An error from a back end's stream: a broken connection (undici's errors, a reset socket) is the
 * back end's failure, not the gateway's; anything else (a bug) stays as it is.
 */
function upstreamFailure(error: unknown): unknown {
  if (isGatewayError(error)) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (code.startsWith('UND_ERR') || /^E[A-Z]+$/.test(code))) return transportError(error);
  return error;
}

/** End an iterator nobody will read (an undici body behind it is released). */
async function closeChunks(chunks: AsyncIterable<unknown>): Promise<void> {
  const iterator = chunks[Symbol.asyncIterator]();
  await iterator.return?.().catch(() => undefined);
}

/** A body read that had to wait for the client: how long it waited goes to rc.bodyWaitMs, whether it came or not (see bodyWaitMs). */
async function waitedFor(read: JsonBody | Promise<JsonBody>, ex: Exchange, rc: RequestContext): Promise<JsonBody> {
  try {
    return await read;
  } finally {
    const waited = bodyWaitMs(ex.req);
    if (waited !== undefined) rc.bodyWaitMs = waited;
  }
}

/** A format's own route (a listing): onRequest (auth) runs first. */
export async function runHandler(deps: PipelineDeps, ex: Exchange, rc: RequestContext, route: HandlerRoute): Promise<void> {
  const admitted = callSeries(deps.hooks.onRequest, rc);
  if (admitted) await admitted;
  // No plugin vouched for the operator (auth missing from plugins:): an admin route stays shut.
  if (route.access === 'admin' && !rc.adminVerified) throw new GatewayError('admin_disabled');
  const body = route.readsBody ? (await waitedFor(deps.readJsonBody(ex.req), ex, rc)).value : {};
  const reply = await route.handle(rc, routeInput(ex, rc, body), { models: deps.catalog, key: rc.key });
  writeReply(ex.res, reply, rc, 'stream' in reply ? handlerStreamObserver(deps, rc) : undefined, deps.logger);
}

/**
 * A stream that failed while its client was still there: the failure as the request's error
 * (logged, and its code the request's); undefined when the client had left.
 */
function streamFailed(deps: PipelineDeps, rc: RequestContext, error: unknown): GatewayError | undefined {
  if (clientGone(rc)) return undefined;
  const gerr = asGatewayError(error, rc, deps.logger, deps.secrets);
  rc.errorCode = gerr.code;
  deps.logger.warn('stream failed', { requestId: rc.id, code: gerr.code, message: gerr.message });
  return gerr;
}

/**
 * A handler's stream (a video download) that fails midway failed at its source, not at the
 * client: the request is logged with the source's error (a back end's break or silence), not as
 * the client's leaving; a client that stops reading is let go after writeTimeoutMs.
 */
function handlerStreamObserver(deps: PipelineDeps, rc: RequestContext): StreamObserver {
  return {
    onError(error) {
      streamFailed(deps, rc, upstreamFailure(error));
      return undefined;
    },
    onEnd() {},
    stallMs: deps.writeTimeoutMs,
  };
}

export { elapsedMs };
