import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Logger } from 'winston';
import type { PriceConfig } from '../../config/types.js';
import {
  VIDEO_TERMINAL,
  type ProviderInstance,
  type RequestContext,
  type Usage,
  GatewayError,
  redactSecrets,
  scrub,
  type VideoCallContext,
  type VideoContent,
  type VideoPoll,
  type VideoRequest,
  type VideoSubmission,
  type VideoTask,
  type VideoTaskReader,
  type UpstreamWaits,
  waitingOnUpstream,
  DEFAULT_TIMEOUTS,
  type Timeouts,
} from '../../core/index.js';
import { fetchVideo, idleBounded, type VideoDownload } from './download.js';
import type { StoredTask, TaskStore, UsageRecord } from '../../core/store/types.js';
import { costOf } from '../metering/index.js';

export interface VideoEngineOptions {
  /** First poll of a task, and the base of its backoff (ms). */
  pollIntervalMs: number;
  /** The longest wait between two polls of one task (ms). */
  maxPollIntervalMs: number;
  /** A GET of an unfinished task asks the vendor first when its last poll is older than this (ms). */
  staleAfterMs: number;
  /** An unfinished task older than this fails (`timeout`) and is refunded (ms; default 24 h). */
  timeoutMs: number;
  /** Tasks polled per tick, and at once. */
  batchSize: number;
  /** The longest one poll of a vendor may take (ms): a hung vendor holds only its own task. */
  pollTimeoutMs: number;
  /**
   * A task written before its vendor was asked, still without the vendor's id this long after
   * (the gateway stopped mid-submit), fails and is refunded (ms; longer than any submit takes).
   */
  submitGraceMs: number;
  /**
   * Hosts (as written in a URL, any port) a finished video may be fetched from although they are
   * on a private network: a self-hosted back end whose files live on another internal host.
   */
  downloadPrivateHosts: readonly string[];
}

export const VIDEO_ENGINE_DEFAULTS: VideoEngineOptions = {
  pollIntervalMs: 2000,
  maxPollIntervalMs: 60_000,
  staleAfterMs: 5000,
  timeoutMs: 24 * 60 * 60 * 1000,
  batchSize: 32,
  pollTimeoutMs: 10_000,
  submitGraceMs: 10 * 60_000,
  downloadPrivateHosts: [],
};

/** The types of a page, not a video: what a CDN answers with when it shows an error or a sign-in page. */
const PAGE_TYPE = /^\s*(?:text\/html|text\/xml|application\/(?:[\w.+-]+\+)?(?:json|xml))\b/i;

/** A successful answer that is a page where the video should be (see PAGE_TYPE). */
function isPage(res: Pick<VideoDownload, 'ok' | 'headers'>): boolean {
  return res.ok && PAGE_TYPE.test(res.headers.get('content-type') ?? '');
}

/** What a submit call knows about its task before the vendor is asked. */
export interface SubmissionContext {
  keyId: string | null;
  keyName: string | null;
  provider: string;
  format: string;
  model: string;
  upstreamModel: string;
}

/** The submitting call, for its charge's row in the ledger. */
export interface SubmitCall {
  requestId: string;
  latencyMs: number;
}

/** A promise that settles when `signal` aborts (rejecting), if `work` has not settled first. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

export interface VideoEngineDeps {
  tasks: TaskStore;
  provider(id: string): ProviderInstance | undefined;
  pricing: Readonly<Record<string, PriceConfig>>;
  logger: Logger;
  /** The configuration's credentials: scrubbed from whatever a vendor says before it is stored, logged or shown. */
  secrets?: readonly string[];
  /** A back end's deadlines (its `timeouts:` over the defaults), for downloads from the addresses it gives. */
  timeouts?(provider: string): Timeouts;
  /**
   * The origin of a back end's own configuration (its `baseUrl`'s: scheme, host and port): a video
   * address it gives there is fetched though it is on a private network; any other must be
   * public (the SSRF guard) or a host of `downloadPrivateHosts`.
   */
  ownOrigins?(provider: string): readonly string[];
  options?: Partial<VideoEngineOptions>;
  /** For tests: the clock and the jitter source. */
  now?(): number;
  random?(): number;
}

/** `controller`, its signal allowed any number of listeners (node warns past 10, taken for a leak). */
function listenedBy(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal);
  return controller;
}

/** The task as formats see it: no vendor id, no vendor URL. */
export function taskView(t: StoredTask): VideoTask {
  return {
    id: t.id,
    keyId: t.keyId,
    provider: t.provider,
    format: t.format,
    model: t.model,
    upstreamModel: t.upstreamModel,
    status: t.status,
    progress: t.status === 'completed' ? 100 : t.progress,
    hasContent: t.status === 'completed',
    container: t.container,
    seconds: t.seconds,
    estimateSeconds: t.estimateSeconds,
    size: t.size,
    error: t.errorCode || t.errorMessage ? { code: t.errorCode ?? 'failed', message: t.errorMessage ?? '' } : null,
    rawStatus: t.rawStatus,
    metadata: t.metadata,
    createdAt: t.createdAt,
    updatedAt: t.updatedAt,
    completedAt: t.completedAt,
    cost: t.cost,
  };
}

/** A result address that answers these has expired (or was revoked): ask the vendor for a fresh one. */
const EXPIRED = new Set([403, 404, 410]);

function clampProgress(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? Math.max(0, Math.min(100, Math.round(value))) : undefined;
}

/**
 * The video task engine: makes a stored task of each submission, polls unfinished tasks with
 * per-task backoff and jitter, fails tasks stuck past the timeout, and settles their cost.
 *
 * Money: metering charges the estimate with the submit call (its usage is the estimated
 * seconds); a completion settles the difference to the seconds produced; a failure refunds what
 * was charged. Both are written in the same transaction as the compare-and-set that finishes the
 * task, so they happen exactly once whoever (poller, a GET, the sweep, another instance) gets there.
 */
export class VideoEngine implements VideoTaskReader {
  options: VideoEngineOptions;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = true;
  private lastSweep = 0;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Aborted by stop(): every in-flight poll ends with it. */
  /** Aborts every poll in flight at close; each adds a listener while it runs (as many as polls run at once). */
  private closing = listenedBy(new AbortController());
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(private readonly deps: VideoEngineDeps) {
    this.options = { ...VIDEO_ENGINE_DEFAULTS, ...deps.options };
    this.now = deps.now ?? Date.now;
    this.random = deps.random ?? Math.random;
  }

  private priceOf(model: string, upstreamModel: string): PriceConfig | undefined {
    return this.deps.pricing[model] ?? this.deps.pricing[upstreamModel];
  }

  /** The wait before poll number `attempts + 1`: exponential (x1.5), capped, with ±25% jitter. */
  backoff(attempts: number): number {
    const base = Math.min(this.options.maxPollIntervalMs, this.options.pollIntervalMs * 1.5 ** Math.max(0, attempts - 1));
    return Math.max(1, Math.round(base * (0.75 + this.random() * 0.5)));
  }

  /**
   * Write the task of a submit before its vendor is asked (no vendor id yet), synchronously:
   * once the vendor accepts, the job is billed, so the task must already be on disk. A crash
   * before the vendor's id is recorded leaves it without one: the poller fails it (nothing was
   * charged yet) after `submitGraceMs`.
   */
  reserve(input: SubmissionContext & { request: Partial<VideoRequest> | undefined }): string {
    const now = this.now();
    const id = `task_${randomBytes(16).toString('hex')}`;
    this.deps.tasks.create({
      id,
      keyId: input.keyId,
      keyName: input.keyName,
      provider: input.provider,
      format: input.format,
      model: input.model,
      upstreamModel: input.upstreamModel,
      vendorTaskId: '',
      status: 'queued',
      progress: 0,
      resultUrl: null,
      container: null,
      seconds: null,
      size: null,
      errorCode: null,
      errorMessage: null,
      rawStatus: null,
      metadata: input.request?.metadata ?? null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      polledAt: null,
      nextPollAt: now + this.options.submitGraceMs,
      attempts: 0,
      estimateSeconds: 0,
      cost: 0,
    });
    return id;
  }

  /** Forget a reserved task whose submit failed (the vendor has no job). */
  discard(id: string): void {
    this.deps.tasks.discard(id);
  }

  /** Make the task of a submission (called when the submit call answered), on its reserved row when there is one. */
  create(input: {
    reserved?: string;
    /** The submitting call: its charge is written with the task, in one transaction. */
    call?: SubmitCall;
    submission: VideoSubmission;
    usage: Usage | undefined;
    request: Partial<VideoRequest> | undefined;
    keyId: string | null;
    keyName: string | null;
    provider: string;
    format: string;
    model: string;
    upstreamModel: string;
  }): VideoTask {
    const now = this.now();
    const submission = { ...input.submission, rawStatus: this.vendorText(input.submission.rawStatus) };
    const price = this.priceOf(input.model, input.upstreamModel);
    const estimateSeconds = input.usage?.seconds ?? 0;
    const cost = input.usage ? costOf(input.usage, price) : (price?.perRequest ?? 0);
    // A back end that reports a finished task at once is asked again right away (the engine
    // finishes tasks only through a poll, which carries the result).
    const status = submission.status === 'in_progress' || VIDEO_TERMINAL.has(submission.status) ? 'in_progress' : 'queued';
    const nextPollAt = now + (VIDEO_TERMINAL.has(submission.status) ? 0 : this.backoff(0));
    const charge: UsageRecord | null = input.call
      ? {
          requestId: input.call.requestId,
          time: now,
          keyId: input.keyId,
          keyName: input.keyName,
          model: input.model,
          upstreamModel: input.upstreamModel,
          provider: input.provider,
          operation: 'video',
          promptTokens: null,
          completionTokens: null,
          cachedTokens: null,
          reasoningTokens: null,
          seconds: input.usage?.seconds ?? null,
          source: input.usage ? 'provider' : null,
          cost,
          status: 200,
          endReason: 'done',
          latencyMs: input.call.latencyMs,
          ttfbMs: null,
        }
      : null;
    if (input.reserved) {
      // One small synchronous UPDATE: the vendor's id is what lets the task be polled and settled.
      const attached = this.deps.tasks.attach(input.reserved, {
        vendorTaskId: submission.vendorTaskId,
        provider: input.provider,
        upstreamModel: input.upstreamModel,
        status,
        rawStatus: submission.rawStatus ?? null,
        nextPollAt,
        estimateSeconds,
        cost,
        at: now,
        charge,
      });
      const task = attached ? this.deps.tasks.get(input.reserved) : undefined;
      if (task) {
        this.wake(task.nextPollAt);
        return taskView(task);
      }
    }
    const task: StoredTask = {
      id: `task_${randomBytes(16).toString('hex')}`,
      keyId: input.keyId,
      keyName: input.keyName,
      provider: input.provider,
      format: input.format,
      model: input.model,
      upstreamModel: input.upstreamModel,
      vendorTaskId: submission.vendorTaskId,
      status,
      progress: 0,
      resultUrl: null,
      container: null,
      seconds: null,
      size: null,
      errorCode: null,
      errorMessage: null,
      rawStatus: submission.rawStatus ?? null,
      metadata: input.request?.metadata ?? null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
      polledAt: null,
      nextPollAt,
      attempts: 0,
      estimateSeconds,
      cost,
    };
    this.deps.tasks.create(task, charge);
    this.wake(task.nextPollAt);
    return taskView(task);
  }

  /**
   * The task, for its key only; asked of the vendor first when it is unfinished and stale (that
   * wait added to `waits`, the request's: see waitingOnUpstream).
   */
  async get(id: string, keyId: string | null, signal?: AbortSignal, waits?: UpstreamWaits): Promise<VideoTask | undefined> {
    let task = this.deps.tasks.get(id);
    if (!task || task.keyId !== keyId) return undefined;
    if (!VIDEO_TERMINAL.has(task.status) && this.now() - (task.polledAt ?? task.createdAt) >= this.options.staleAfterMs) {
      await this.pollOnce(task, signal, waits);
      task = this.deps.tasks.get(id) ?? task;
    }
    return taskView(task);
  }

  /**
   * A completed task's video, streamed from the back end (never its address), for its key only;
   * `range` (the client's, checked: see videoRange) is sent on. The wait for the back end's answer
   * to begin is added to `waits` (see waitingOnUpstream).
   */
  async content(id: string, keyId: string | null, signal?: AbortSignal, waits?: UpstreamWaits, range?: string): Promise<VideoContent | undefined> {
    const task = this.deps.tasks.get(id);
    if (!task || task.keyId !== keyId || task.status !== 'completed') return undefined;
    return waitingOnUpstream(waits, this.fetchContent(task, signal, range));
  }

  private async fetchContent(task: StoredTask, signal: AbortSignal | undefined, range: string | undefined): Promise<VideoContent | undefined> {
    const backend = this.deps.provider(task.provider)?.video;
    const ctx = { signal: signal ?? new AbortController().signal, logger: this.deps.logger, model: task.upstreamModel, ...(range ? { range } : {}) };
    // The back end's deadlines (its `timeouts:`) hold for its video's download: a CDN (or a
    // back end) that never answers, or stops sending midway, must not hold the client for minutes.
    const limits = this.deps.timeouts?.(task.provider) ?? DEFAULT_TIMEOUTS;
    if (backend?.content) {
      const content = await backend.content(task.vendorTaskId, ctx);
      return { ...content, body: idleBounded(content.body, limits.idleMs, () => content.destroy?.()) };
    }
    let url = task.resultUrl;
    if (!url) return undefined;
    const sources = { origins: this.deps.ownOrigins?.(task.provider) ?? [], hosts: this.options.downloadPrivateHosts };
    let res = await fetchVideo(url, ctx.signal, limits, range, sources);
    let refreshed = false;
    if ((EXPIRED.has(res.status) || isPage(res)) && backend) {
      // The vendor's address expired (signed CDN links do; some answer it with a page): ask the
      // vendor once for a fresh one.
      res.discard();
      let fresh: VideoPoll | undefined;
      try {
        fresh = await this.askVendor(task, (c) => backend.poll(task.vendorTaskId, c), signal);
      } catch (error) {
        this.deps.logger.warn('video task re-poll for a fresh address failed', { task: task.id, provider: task.provider, error: String(error) });
      }
      if (!fresh || fresh.status !== 'completed' || !fresh.url) {
        throw new GatewayError('upstream_error', {
          params: { detail: `the finished video's address expired (HTTP ${res.status}) and the back end gave no fresh one` },
        });
      }
      url = fresh.url;
      refreshed = true;
      this.deps.tasks.refreshResult(task.id, url);
      res = await fetchVideo(url, ctx.signal, limits, range, sources);
    }
    if (res.status === 416) {
      res.discard();
      // The video's length, as `bytes */N`, is what a player reads to ask again.
      const size = res.headers.get('content-range');
      throw new GatewayError('range_not_satisfiable', { params: { detail: size ?? range ?? '' }, ...(size ? { headers: { 'content-range': size } } : {}) });
    }
    if (!res.ok) {
      res.discard();
      throw new GatewayError('upstream_error', {
        params: { detail: `the finished video could not be fetched from the back end${refreshed ? ', even at the fresh address it gave' : ''} (HTTP ${res.status})` },
        upstreamStatus: res.status,
      });
    }
    // A page where the video should be (a CDN's sign-in or error page answered 200): never the
    // client's video, nor its bytes the client's to see.
    if (isPage(res)) {
      res.discard();
      throw new GatewayError('upstream_error', { params: { detail: `the finished video's address answered a page (${(res.headers.get('content-type') ?? '').split(';')[0]!.trim().slice(0, 60)}), not a video` } });
    }
    // A server that compressed anyway: fetch decodes the body, so its length is not the header's
    // (nor is its range, which counts the compressed bytes: such an answer is refused below).
    const encoded = (res.headers.get('content-encoding') ?? 'identity').toLowerCase() !== 'identity';
    const partial = res.status === 206 && !encoded && !!range && res.headers.get('content-range') !== null;
    if (res.status === 206 && !partial) {
      res.discard();
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered a part of the video that cannot be served as asked (HTTP 206)' } });
    }
    const length = encoded ? NaN : Number(res.headers.get('content-length'));
    return {
      status: partial ? 206 : 200,
      contentType: res.headers.get('content-type') ?? `video/${task.container ?? 'mp4'}`,
      contentLength: Number.isFinite(length) && length > 0 ? length : undefined,
      ...(partial ? { contentRange: res.headers.get('content-range')! } : {}),
      acceptsRanges: partial || (!encoded && /\bbytes\b/i.test(res.headers.get('accept-ranges') ?? '')),
      body: res.relay,
      destroy: () => {
        void res.relay.return(undefined);
        res.discard();
      },
    };
  }

  /**
   * Poll one task (one poll at a time per task in this engine; other engines are kept honest by
   * the CAS). `waits`: the request that asked, whose wait on the vendor is the vendor's time (see
   * waitingOnUpstream); a poll already running is waited on as the vendor's.
   */
  pollOnce(task: StoredTask, signal?: AbortSignal, waits?: UpstreamWaits): Promise<void> {
    const running = this.inFlight.get(task.id);
    if (running) return waitingOnUpstream(waits, running);
    const done = this.poll(task, signal, waits).finally(() => this.inFlight.delete(task.id));
    this.inFlight.set(task.id, done);
    return done;
  }

  private async poll(task: StoredTask, signal?: AbortSignal, waits?: UpstreamWaits): Promise<void> {
    if (!task.vendorTaskId) {
      // Written before its vendor was asked, and the vendor's id never recorded: the gateway
      // stopped mid-submit (a live submit records it within submitGraceMs). Nothing to poll.
      if (this.now() - task.createdAt >= this.options.submitGraceMs) {
        this.finishFailed(task, 'submit_lost', 'The gateway stopped before the back end confirmed this task.', task.rawStatus);
      } else {
        this.deps.tasks.advance(task.id, { polledAt: this.now(), nextPollAt: task.createdAt + this.options.submitGraceMs, attempts: task.attempts });
      }
      return;
    }
    const backend = this.deps.provider(task.provider)?.video;
    if (!backend) {
      // Its back end is not in this configuration (taken out, or renamed, for now): the vendor may
      // still be making, and billing, the video. Asked again later, as when the vendor does not
      // answer; a back end that never comes back leaves the task to the timeout sweep.
      this.deps.logger.warn('video task poll skipped: its back end is not configured', { task: task.id, provider: task.provider });
      this.reschedule(task, undefined);
      return;
    }
    let poll: VideoPoll;
    try {
      poll = await waitingOnUpstream(waits, this.askVendor(task, (s) => backend.poll(task.vendorTaskId, s), signal));
    } catch (error) {
      // The vendor did not answer: ask again later (the timeout sweep ends tasks that never recover).
      this.deps.logger.warn('video task poll failed', { task: task.id, provider: task.provider, error: String(error) });
      this.reschedule(task, undefined);
      return;
    }
    this.apply(task, poll);
  }

  /**
   * One call to the vendor about a task, under its own deadline (pollTimeoutMs), the caller's
   * signal and the engine's close: a hung vendor holds only this call, never the loop or a shutdown.
   */
  private askVendor<T>(task: StoredTask, ask: (ctx: VideoCallContext) => Promise<T>, signal?: AbortSignal): Promise<T> {
    // One controller the deadline's timer and the other signals' listeners hold: node 20 lets an
    // AbortSignal.timeout that only AbortSignal.any refers to be collected (a garbage collection
    // during a hung poll, and its deadline never came), and the combined signal with it.
    const stop = new AbortController();
    const sources = signal ? [this.closing.signal, signal] : [this.closing.signal];
    const onAbort = (event: Event) => stop.abort((event.target as AbortSignal).reason);
    for (const source of sources) {
      if (source.aborted) stop.abort(source.reason);
      else source.addEventListener('abort', onAbort, { once: true });
    }
    const timer = setTimeout(() => stop.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')), this.options.pollTimeoutMs);
    timer.unref();
    const done = () => {
      clearTimeout(timer);
      for (const source of sources) source.removeEventListener('abort', onAbort);
    };
    const asked = untilAborted(ask({ signal: stop.signal, logger: this.deps.logger, model: task.upstreamModel }), stop.signal);
    asked.then(done, done);
    return asked;
  }

  private reschedule(task: StoredTask, poll: VideoPoll | undefined): boolean {
    const now = this.now();
    const attempts = task.attempts + 1;
    const status = poll && (poll.status === 'queued' || poll.status === 'in_progress') ? poll.status : undefined;
    return this.deps.tasks.advance(task.id, {
      status,
      progress: clampProgress(poll?.progress),
      rawStatus: poll?.rawStatus,
      polledAt: now,
      nextPollAt: now + this.backoff(attempts),
      attempts,
    });
  }

  /**
   * What a vendor said, as the gateway keeps, logs and shows it: the configuration's credentials
   * redacted (a vendor may echo the key it was given in a state or an error code); a message
   * (`prose`) is scrubbed whole, of key-shaped strings, URLs and addresses too.
   */
  private vendorText<T extends string | null | undefined>(text: T, prose = false): T {
    if (typeof text !== 'string') return text;
    const secrets = this.deps.secrets ?? [];
    return (prose ? scrub(text, secrets) : redactSecrets(text, secrets)) as T;
  }

  /** Apply one poll answer; true when this call finished the task. */
  apply(task: StoredTask, answer: VideoPoll): boolean {
    const poll: VideoPoll = { ...answer, rawStatus: this.vendorText(answer.rawStatus) };
    if (answer.error) poll.error = { code: this.vendorText(answer.error.code), message: this.vendorText(answer.error.message, true) };
    if (poll.status === 'completed') {
      const seconds = typeof poll.seconds === 'number' && poll.seconds >= 0 ? poll.seconds : task.estimateSeconds;
      const usage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds };
      const cost = costOf(usage, this.priceOf(task.model, task.upstreamModel));
      const now = this.now();
      const finished = this.deps.tasks.finish(
        task.id,
        {
          status: 'completed',
          progress: 100,
          resultUrl: poll.url ?? null,
          container: poll.format ?? 'mp4',
          seconds,
          size: poll.size ?? null,
          rawStatus: poll.rawStatus,
          cost,
          at: now,
        },
        this.ledgerRow(task, cost - task.cost, seconds - task.estimateSeconds, 200, 'done', now),
      );
      if (finished) this.deps.logger.info('video task completed', { task: task.id, provider: task.provider, seconds, cost });
      return finished;
    }
    if (poll.status === 'failed') {
      return this.finishFailed(task, poll.error?.code ?? 'generation_failed', poll.error?.message ?? 'The video could not be generated.', poll.rawStatus);
    }
    // queued, in_progress, or a state this back end does not know: keep polling.
    if (poll.status === 'unknown') this.deps.logger.warn('video task in an unknown vendor state', { task: task.id, provider: task.provider, rawStatus: poll.rawStatus });
    this.reschedule(task, poll);
    return false;
  }

  private finishFailed(task: StoredTask, code: string, message: string, rawStatus: string | null): boolean {
    const now = this.now();
    const finished = this.deps.tasks.finish(
      task.id,
      { status: 'failed', errorCode: code, errorMessage: message, rawStatus, cost: 0, at: now },
      this.ledgerRow(task, -task.cost, -task.estimateSeconds, 502, 'upstream_error', now),
    );
    if (finished) this.deps.logger.info('video task failed (refunded)', { task: task.id, provider: task.provider, code, refunded: task.cost });
    return finished;
  }

  /**
   * The settle (or refund) row of a finish: the change of the task's cost and of its metered
   * seconds (actual − estimate on a settle, −estimate on a refund), so the ledger's seconds sum
   * to what was delivered. (The row also counts as one more request in usage totals.)
   */
  private ledgerRow(task: StoredTask, delta: number, seconds: number, status: number, endReason: UsageRecord['endReason'], now: number): UsageRecord | null {
    if (Math.abs(delta) < 1e-12 && Math.abs(seconds) < 1e-9) return null;
    return {
      requestId: task.id,
      time: now,
      keyId: task.keyId,
      keyName: task.keyName,
      model: task.model,
      upstreamModel: task.upstreamModel,
      provider: task.provider,
      operation: 'video',
      promptTokens: null,
      completionTokens: null,
      cachedTokens: null,
      reasoningTokens: null,
      source: 'provider',
      cost: delta,
      seconds: Math.abs(seconds) < 1e-9 ? null : seconds,
      status,
      endReason,
      latencyMs: 0,
      ttfbMs: null,
    };
  }

  /** Poll every due task once (up to batchSize); resolves, with how many it finished, when all those polls are done. */
  async pollDue(): Promise<number> {
    const done = await Promise.all(this.startDue());
    return done.filter(Boolean).length;
  }

  /**
   * Start a poll of each due task not already being polled (at most batchSize at once); each
   * promise says whether its poll finished the task. The loop does not wait for them.
   */
  private startDue(): Promise<boolean>[] {
    const room = this.options.batchSize - this.inFlight.size;
    if (room <= 0) return [];
    const due = this.deps.tasks
      .due(this.now(), room + this.inFlight.size)
      .filter((task) => !this.inFlight.has(task.id))
      .slice(0, room);
    return due.map(async (task) => {
      const before = task.status;
      await this.pollOnce(task);
      const after = this.deps.tasks.get(task.id);
      return !!after && before !== after.status && VIDEO_TERMINAL.has(after.status);
    });
  }

  /**
   * Fail (and refund) unfinished tasks older than the timeout. Each is asked of its vendor once
   * more first: a gateway that was down longer than the timeout never polled them, and a task
   * its vendor finished meanwhile is settled as it finished, not refunded unseen. A vendor that
   * does not answer, or says the task is still running, does not save it. Resolves with how many
   * tasks this sweep failed.
   */
  async sweep(): Promise<number> {
    const stuck = this.deps.tasks.stuck(this.now() - this.options.timeoutMs, 500);
    let failed = 0;
    const timeOut = async (task: StoredTask): Promise<void> => {
      if (this.closing.signal.aborted) return;
      if (task.vendorTaskId && this.deps.provider(task.provider)?.video) {
        await this.pollOnce(task).catch((error) => this.deps.logger.warn('video task poll failed', { task: task.id, error: String(error) }));
        // Stopped mid-sweep: the poll was cut short, not answered; the next start sweeps again.
        if (this.closing.signal.aborted) return;
        const now = this.deps.tasks.get(task.id);
        if (!now || VIDEO_TERMINAL.has(now.status)) return;
        task = now;
      }
      if (this.finishFailed(task, 'timeout', `The task did not finish within ${Math.round(this.options.timeoutMs / 1000)} s.`, task.rawStatus)) failed++;
    };
    // batchSize at a time, each poll under pollTimeoutMs: a sweep after a long outage does not
    // ask a vendor about hundreds of tasks at once.
    // A stop ends the sweep: the tasks not reached yet wait for the next start's.
    for (let i = 0; i < stuck.length && !this.closing.signal.aborted; i += this.options.batchSize) {
      await Promise.all(stuck.slice(i, i + this.options.batchSize).map(timeOut));
    }
    return failed;
  }

  /** The sweep running in the background, if one is (stop() waits for it). */
  private sweeping: Promise<unknown> | undefined;

  /** A sweep in the background (one at a time): the loop's polls do not wait for its vendors. */
  private sweepInBackground(): void {
    if (this.sweeping) return;
    this.sweeping = this.sweep()
      .catch((error) => this.deps.logger.error('video task sweep failed', { error: String(error) }))
      .finally(() => {
        this.sweeping = undefined;
      });
  }

  /** One round of the background loop. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      if (this.now() - this.lastSweep >= Math.min(60_000, this.options.timeoutMs)) {
        this.lastSweep = this.now();
        this.sweepInBackground();
      }
      for (const polling of this.startDue()) {
        // Each poll, when done, lets the loop look again (its task is due again later).
        polling.then(
          () => this.wake(this.nextDue()),
          (error) => this.deps.logger.error('video task poll failed', { error: String(error) }),
        );
      }
    } catch (error) {
      this.deps.logger.error('video task loop failed', { error: String(error) });
    } finally {
      this.running = false;
    }
  }

  /** The next due poll of a task not being polled now (those come back through their own wake). */
  private nextDue(): number {
    const next = this.deps.tasks.nextDue([...this.inFlight.keys()]);
    const idle = this.now() + Math.max(this.options.pollIntervalMs * 4, 1000);
    return next === undefined ? idle : Math.min(Math.max(next, this.now() + 10), idle);
  }

  start(): void {
    this.stopped = false;
    if (this.closing.signal.aborted) this.closing = listenedBy(new AbortController());
    this.wake(this.now());
  }

  /** Make sure the loop runs again by `at` at the latest. */
  private wake(at: number): void {
    if (this.stopped) return;
    const delay = Math.max(0, at - this.now());
    if (this.timer && this.timerAt !== undefined && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = this.now() + delay;
    this.timer = setTimeout(() => void this.loop(), delay);
    this.timer.unref();
  }

  private timerAt: number | undefined;

  private async loop(): Promise<void> {
    this.timer = undefined;
    this.timerAt = undefined;
    await this.tick();
    if (this.stopped) return;
    const next = this.nextDue();
    // At least once per pollIntervalMs * 4 (the sweep, and tasks another instance made).
    this.wake(next);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    // In-flight polls end now (a poll cut short is asked again by the next start).
    this.closing.abort(new Error('the video task engine is closing'));
    await Promise.allSettled([...this.inFlight.values(), this.sweeping]);
  }
}

/** Build the `create()` input of a submit call from its request context. */
export function submissionContext(rc: RequestContext): SubmissionContext {
  return {
    keyId: rc.key?.id ?? null,
    keyName: rc.key?.name ?? null,
    provider: rc.target?.provider.id ?? '',
    format: rc.format ?? '',
    model: rc.model ?? rc.target?.model ?? '',
    upstreamModel: rc.target?.model ?? rc.model ?? '',
  };
}
