import { randomBytes } from 'node:crypto';
import type { Logger } from 'winston';
import type { PriceConfig } from '../../config/types.js';
import {
  VIDEO_TERMINAL,
  type ProviderInstance,
  type RequestContext,
  type Usage,
  type VideoContent,
  type VideoPoll,
  type VideoRequest,
  type VideoSubmission,
  type VideoTask,
  type VideoTaskReader,
} from '../../core/index.js';
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
}

/** The longest one poll of a vendor may take. */
const POLL_TIMEOUT_MS = 30_000;

export const VIDEO_ENGINE_DEFAULTS: VideoEngineOptions = {
  pollIntervalMs: 2000,
  maxPollIntervalMs: 60_000,
  staleAfterMs: 5000,
  timeoutMs: 24 * 60 * 60 * 1000,
  batchSize: 32,
};

export interface VideoEngineDeps {
  tasks: TaskStore;
  provider(id: string): ProviderInstance | undefined;
  pricing: Readonly<Record<string, PriceConfig>>;
  logger: Logger;
  options?: Partial<VideoEngineOptions>;
  /** For tests: the clock and the jitter source. */
  now?(): number;
  random?(): number;
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

  /** Make the task of a submission (called when the submit call answered). */
  create(input: {
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
    const { submission } = input;
    const price = this.priceOf(input.model, input.upstreamModel);
    const estimateSeconds = input.usage?.seconds ?? 0;
    const cost = input.usage ? costOf(input.usage, price) : (price?.perRequest ?? 0);
    // A back end that reports a finished task at once is asked again right away (the engine
    // finishes tasks only through a poll, which carries the result).
    const status = submission.status === 'in_progress' || VIDEO_TERMINAL.has(submission.status) ? 'in_progress' : 'queued';
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
      nextPollAt: now + (VIDEO_TERMINAL.has(submission.status) ? 0 : this.backoff(0)),
      attempts: 0,
      estimateSeconds,
      cost,
    };
    this.deps.tasks.create(task);
    this.wake(task.nextPollAt);
    return taskView(task);
  }

  /** The task, for its key only; asked of the vendor first when it is unfinished and stale. */
  async get(id: string, keyId: string | null, signal?: AbortSignal): Promise<VideoTask | undefined> {
    let task = this.deps.tasks.get(id);
    if (!task || task.keyId !== keyId) return undefined;
    if (!VIDEO_TERMINAL.has(task.status) && this.now() - (task.polledAt ?? task.createdAt) >= this.options.staleAfterMs) {
      await this.pollOnce(task, signal);
      task = this.deps.tasks.get(id) ?? task;
    }
    return taskView(task);
  }

  /** A completed task's video, streamed from the back end (never its address), for its key only. */
  async content(id: string, keyId: string | null, signal?: AbortSignal): Promise<VideoContent | undefined> {
    const task = this.deps.tasks.get(id);
    if (!task || task.keyId !== keyId || task.status !== 'completed') return undefined;
    const backend = this.deps.provider(task.provider)?.video;
    const ctx = { signal: signal ?? new AbortController().signal, logger: this.deps.logger, model: task.upstreamModel };
    if (backend?.content) return backend.content(task.vendorTaskId, ctx);
    if (!task.resultUrl) return undefined;
    const res = await fetch(task.resultUrl, { signal: ctx.signal, redirect: 'follow' });
    if (!res.ok || !res.body) {
      void res.body?.cancel();
      throw new Error(`the video could not be fetched from the back end (HTTP ${res.status})`);
    }
    const length = Number(res.headers.get('content-length'));
    return {
      status: 200,
      contentType: res.headers.get('content-type') ?? `video/${task.container ?? 'mp4'}`,
      contentLength: Number.isFinite(length) && length > 0 ? length : undefined,
      body: res.body as unknown as AsyncIterable<Uint8Array>,
      destroy: () => void res.body?.cancel().catch(() => undefined),
    };
  }

  /** Poll one task (one poll at a time per task in this engine; other engines are kept honest by the CAS). */
  pollOnce(task: StoredTask, signal?: AbortSignal): Promise<void> {
    const running = this.inFlight.get(task.id);
    if (running) return running;
    const done = this.poll(task, signal).finally(() => this.inFlight.delete(task.id));
    this.inFlight.set(task.id, done);
    return done;
  }

  private async poll(task: StoredTask, signal?: AbortSignal): Promise<void> {
    const backend = this.deps.provider(task.provider)?.video;
    if (!backend) {
      this.finishFailed(task, 'provider_unavailable', `The back end '${task.provider}' that ran this task is no longer configured.`, null);
      return;
    }
    let poll: VideoPoll;
    try {
      poll = await backend.poll(task.vendorTaskId, {
        // A hung vendor never holds a GET (or the loop) longer than this.
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(POLL_TIMEOUT_MS)]) : AbortSignal.timeout(POLL_TIMEOUT_MS),
        logger: this.deps.logger,
        model: task.upstreamModel,
      });
    } catch (error) {
      // The vendor did not answer: ask again later (the timeout sweep ends tasks that never recover).
      this.deps.logger.warn('video task poll failed', { task: task.id, provider: task.provider, error: String(error) });
      this.reschedule(task, undefined);
      return;
    }
    this.apply(task, poll);
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

  /** Apply one poll answer; true when this call finished the task. */
  apply(task: StoredTask, poll: VideoPoll): boolean {
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
        this.ledgerRow(task, cost - task.cost, 200, 'done', now),
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
      this.ledgerRow(task, -task.cost, 502, 'upstream_error', now),
    );
    if (finished) this.deps.logger.info('video task failed (refunded)', { task: task.id, provider: task.provider, code, refunded: task.cost });
    return finished;
  }

  /** The settle (or refund) row of a finish: the change of the task's cost. */
  private ledgerRow(task: StoredTask, delta: number, status: number, endReason: UsageRecord['endReason'], now: number): UsageRecord | null {
    if (Math.abs(delta) < 1e-12) return null;
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
      status,
      endReason,
      latencyMs: 0,
      ttfbMs: null,
    };
  }

  /** Poll every due task once (up to batchSize); returns how many tasks this call finished. */
  async pollDue(): Promise<number> {
    const due = this.deps.tasks.due(this.now(), this.options.batchSize);
    let finished = 0;
    await Promise.all(
      due.map(async (task) => {
        const before = task.status;
        await this.pollOnce(task);
        const after = this.deps.tasks.get(task.id);
        if (after && before !== after.status && VIDEO_TERMINAL.has(after.status)) finished++;
      }),
    );
    return finished;
  }

  /** Fail (and refund) unfinished tasks older than the timeout. */
  sweep(): number {
    const before = this.now() - this.options.timeoutMs;
    let failed = 0;
    for (const task of this.deps.tasks.stuck(before, 500)) {
      if (this.finishFailed(task, 'timeout', `The task did not finish within ${Math.round(this.options.timeoutMs / 1000)} s.`, task.rawStatus)) failed++;
    }
    return failed;
  }

  /** One round of the background loop. */
  async tick(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      if (this.now() - this.lastSweep >= Math.min(60_000, this.options.timeoutMs)) {
        this.lastSweep = this.now();
        this.sweep();
      }
      await this.pollDue();
    } catch (error) {
      this.deps.logger.error('video task loop failed', { error: String(error) });
    } finally {
      this.running = false;
    }
  }

  start(): void {
    this.stopped = false;
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
    const next = this.deps.tasks.nextDue();
    // At least once per pollIntervalMs * 4 (the sweep, and tasks another instance made).
    const idle = this.now() + Math.max(this.options.pollIntervalMs * 4, 1000);
    this.wake(next === undefined ? idle : Math.min(Math.max(next, this.now() + 10), idle));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.inFlight.values()]);
  }
}

/** Build the `create()` input of a submit call from its request context. */
export function submissionContext(rc: RequestContext): { keyId: string | null; keyName: string | null; provider: string; format: string; model: string; upstreamModel: string } {
  return {
    keyId: rc.key?.id ?? null,
    keyName: rc.key?.name ?? null,
    provider: rc.target?.provider.id ?? '',
    format: rc.format ?? '',
    model: rc.model ?? rc.target?.model ?? '',
    upstreamModel: rc.target?.model ?? rc.model ?? '',
  };
}
