import { GatewayError } from './errors.js';
import { billedSoFarBy, billsSoFar } from './usage.js';
import { hiddenSlot } from './hidden.js';

/** What an attempt watches to learn that the client left (core/context.ts ClientLink has this shape). */
export interface ClientWatch {
  readonly gone: boolean;
  /**
   * The gateway is stopping and waits no longer (its drain ran out of time): watchers are told as
   * when the client leaves, but the client is still there, to be told why.
   */
  readonly stopped?: boolean;
  watch(fn: () => void): void;
  unwatch(fn: () => void): void;
}

/** A ClientWatch over an AbortSignal (for a context made without a ClientLink). */
export function signalLink(signal: AbortSignal): ClientWatch {
  return {
    get gone() {
      return signal.aborted;
    },
    watch: (fn) => (signal.aborted ? fn() : signal.addEventListener('abort', fn, { once: true })),
    unwatch: (fn) => signal.removeEventListener('abort', fn),
  };
}

/**
 * What an upstream exchange watches to learn it must stop, as cheap as a callback list: the
 * attempt clock is one (an AbortSignal costs about 3 us to make and listen to, on every call).
 * Core's upstream helpers (`sendUpstream`, `postJson`, `readJson`, `translateEvents`) take
 * either this or an AbortSignal.
 */
export interface AbortWatch {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** Call `fn` once when the work is aborted (at once if it is). */
  onAbort(fn: () => void): void;
  offAbort(fn: () => void): void;
  /** Bytes came from the back end, whatever they hold (a keep-alive comment, a ping): it is not silent. */
  alive?(): void;
}

/** An AbortSignal or an AbortWatch, as the upstream helpers accept them. */
export type Abortable = AbortSignal | AbortWatch;

/** What a back end's request id may hold: letters, digits and `_-.:`. */
const REQUEST_ID = /^[A-Za-z0-9_.:-]+$/;

/** A header's value as a back end's request id: only an id's characters, and not too long (it goes into a reply header and the log). */
function requestIdOf(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' && value.length <= 128 && REQUEST_ID.test(value) ? value : undefined;
}

/** The attempt's `alive` behind the AbortSignal it made (AttemptClock.signal). */
const ALIVE = hiddenSlot<() => void>();
/** The attempt behind the AbortSignal it made (AttemptClock.signal). */
const CLOCK = hiddenSlot<AttemptClock>();

/**
 * The attempt an upstream request is made for, when the provider passed its AbortWatch or the
 * AbortSignal it gave (`context.signal`): the HTTP client tells it when the request left and when
 * the back end's bytes came (see AttemptClock.upstreamMs).
 */
export function attemptOf(abortable: Abortable | undefined): AttemptClock | undefined {
  if (!abortable) return undefined;
  return abortable instanceof AttemptClock ? abortable : CLOCK.get(abortable);
}

/**
 * A signal that aborts with `attempt` (the AbortSignal a provider was given) or with `also`,
 * and still tells that attempt what its requests do (see attemptOf, aliveOf): for a provider that
 * makes several requests for one call and stops the others when one fails.
 */
export function withinAttempt(attempt: AbortSignal, also: AbortSignal): AbortSignal {
  const signal = AbortSignal.any([attempt, also]);
  const clock = CLOCK.get(attempt);
  if (clock) CLOCK.set(signal, clock);
  const alive = ALIVE.get(attempt);
  if (alive) ALIVE.set(signal, alive);
  return signal;
}

/**
 * What tells an attempt that its back end sent bytes (so its idle timeout starts again): the
 * attempt's own `alive`, whether the provider read with the attempt's AbortWatch or with the
 * AbortSignal it gave (`context.signal`); nothing for any other signal.
 */
export function aliveOf(abortable: Abortable | undefined): (() => void) | undefined {
  if (!abortable) return undefined;
  const watch = abortable as AbortWatch;
  if (typeof watch.alive === 'function') return () => watch.alive!();
  return ALIVE.get(abortable);
}

/** Watch `abortable` for an abort: returns what stops watching. */
export function watchAbort(abortable: Abortable | undefined, fn: () => void): () => void {
  if (!abortable) return () => undefined;
  if ('onAbort' in abortable && typeof abortable.onAbort === 'function') {
    abortable.onAbort(fn);
    return () => abortable.offAbort(fn);
  }
  const signal = abortable as AbortSignal;
  if (signal.aborted) {
    fn();
    return () => undefined;
  }
  signal.addEventListener('abort', fn, { once: true });
  return () => signal.removeEventListener('abort', fn);
}

/** Iterables that end with an error by themselves once the given watch aborts. */
const BOUND = hiddenSlot<Abortable>();

/**
 * Record that `iterable` fails on its own as soon as `abortable` aborts (its bytes come from an
 * upstream exchange that watches it): a clock reading it need not race each chunk against its
 * own abort. Core's translateEvents marks what it returns when the body it reads is such an
 * exchange's.
 */
export function abortsWith<T extends object>(iterable: T, abortable: Abortable): T {
  BOUND.set(iterable, abortable);
  return iterable;
}

/** What `iterable` fails with by itself, if anything (see abortsWith). */
export function abortBinding(iterable: object): Abortable | undefined {
  return BOUND.get(iterable);
}

/**
 * `made`, an iterable that reads `source` and fails when it fails (a stream mapped from it),
 * marked as `source` is: failing by itself on the same abort (see abortsWith), billing what its
 * back end said so far (see billsSoFar).
 */
export function likeStream<T extends object>(made: T, source: object): T {
  const binding = BOUND.get(source);
  if (binding) abortsWith(made, binding);
  const billed = billedSoFarBy(source);
  if (billed) billsSoFar(made, billed);
  return made;
}

/** How long a back end may take, per provider (`providers[].timeouts`). */
export interface Timeouts {
  /** To open a connection (enforced by the provider's HTTP client). */
  connectMs: number;
  /** From sending the request until the answer begins (headers; for a non-streamed call, the whole answer). */
  firstByteMs: number;
  /** Longest silence between two chunks of a stream. */
  idleMs: number;
  /** The whole attempt, stream included. */
  totalMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 10_000, firstByteMs: 300_000, idleMs: 60_000, totalMs: 900_000 };

/**
 * The clock of one attempt at one back end. Its signal aborts when the client leaves or when a
 * timeout fires; `race()` makes any wait give up at that moment, even if a provider ignores
 * the signal.
 *
 * It is on the path of every call and every stream chunk, so it is cheap there: one timer armed
 * for the nearest deadline (first byte, idle, total) and re-armed only when it fires early, no
 * timer work per chunk, no composite AbortSignal, and no event listener per wait.
 */
const SLOWED_BY_CLIENT = hiddenSlot<true>();

/**
 * Whether `error` is an attempt's total timeout that ran out while the gateway mostly waited for
 * its client to read the answer, not for the back end: it says nothing against the back end's
 * health.
 */
export function slowedByClient(error: unknown): boolean {
  return error !== null && typeof error === 'object' && SLOWED_BY_CLIENT.get(error) === true;
}

export class AttemptClock implements AbortWatch {
  /** Made on the first read of `signal`: most calls never need one. */
  private controller: AbortController | undefined;
  private failure: GatewayError | undefined;
  /** onAbort's watchers; made with the first. */
  private aborters: Array<() => void> | undefined;
  private readonly startedAt = performance.now();
  private readonly totalAt: number;
  /** When the answer must have begun; undefined once it has. */
  private firstByteAt: number | undefined;
  /** The time spent waiting on the back end so far: for its answer to begin, then for each chunk (see slowedByClient). */
  private backEndMs = 0;
  /** While a chunk is awaited: since when (the back end's silence began; see next()). */
  private waitingSince: number | undefined;
  /** The reads of the stream in progress: one, or two while a primed stream's pending read is awaited again (see next()). */
  private waiting = 0;
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;
  private finished = false;
  /** The rejections of the waits in progress (one, nearly always). */
  private waits: Array<(error: GatewayError) => void> = [];
  /** When the first request to the back end left, and when its last bytes so far came (see upstreamMs). */
  private sentAt: number | undefined;
  /** When the first request went onto a connection, if it waited for one before. */
  private connectedAt: number | undefined;
  private receivedAt: number | undefined;
  /** Made through the gateway's HTTP client: whether a connection took the request yet (see unsent). */
  private onConnection: boolean | undefined;
  /**
   * The back end's own id for its answer (its `x-request-id` or `request-id` header), when it
   * gave one: what its support asks for. Told by the HTTP client when the answer's head came.
   */
  upstreamRequestId: string | undefined;
  /** Set once the answer is over (see graceAfterAnswer): the client leaving aborts the attempt this much later. */
  private graceMs = 0;
  private graceTimer: NodeJS.Timeout | undefined;
  private readonly onClientAbort = () => {
    const shutdown = this.client.stopped && !this.client.gone;
    if (this.graceMs > 0 && !shutdown) {
      this.graceTimer = setTimeout(() => this.abort(new GatewayError('client_closed_request')), this.graceMs);
      this.graceTimer.unref();
      return;
    }
    // A call the back end bills once it has it (a video task) goes on without its client once
    // its request is on a connection: abandoned, the job would be made and billed, and recorded
    // nowhere. Its deadlines still hold.
    if (this.finishOnceStarted && this.onConnection === true && !shutdown) return;
    this.abort(new GatewayError(shutdown ? 'gateway_shutdown' : 'client_closed_request'));
  };

  constructor(
    private readonly client: ClientWatch,
    private readonly timeouts: Timeouts,
    /** The attempt is not aborted by its client leaving once its request went onto a connection (see onClientAbort). */
    private readonly finishOnceStarted = false,
  ) {
    this.totalAt = this.startedAt + timeouts.totalMs;
    this.firstByteAt = this.startedAt + timeouts.firstByteMs;
    client.watch(this.onClientAbort);
    this.arm(Math.min(this.totalAt, this.firstByteAt));
  }

  /** Why the attempt was aborted (a timeout, or the client leaving), if it was. */
  get reason(): GatewayError | undefined {
    return this.failure;
  }

  get aborted(): boolean {
    return this.failure !== undefined;
  }

  /** An AbortSignal that aborts with the attempt, for a provider that needs one. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.failure) this.controller.abort(this.failure);
      // A stream read with this signal tells the clock of its bytes too (see aliveOf).
      ALIVE.set(this.controller.signal, () => this.alive());
      CLOCK.set(this.controller.signal, this);
    }
    return this.controller.signal;
  }

  onAbort(fn: () => void): void {
    if (this.failure) fn();
    else (this.aborters ??= []).push(fn);
  }

  offAbort(fn: () => void): void {
    const i = this.aborters ? this.aborters.indexOf(fn) : -1;
    if (i !== -1) this.aborters!.splice(i, 1);
  }

  /** The timeout that ended this attempt, if one did. */
  get timedOut(): GatewayError | undefined {
    return this.failure?.code === 'upstream_timeout' ? this.failure : undefined;
  }

  /** Have the timer fire by `at` (it may be armed for earlier already). */
  private arm(at: number): void {
    if (this.finished || at === Infinity) return;
    if (this.timer && this.armedFor <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(this.tick, Math.max(1, Math.ceil(at - performance.now())));
    this.timer.unref();
  }

  private readonly tick = (): void => {
    this.timer = undefined;
    this.armedFor = Infinity;
    if (this.finished) return;
    const now = performance.now();
    if (now >= this.totalAt) {
      // Most of it spent waiting for the client to take the answer (a slow reader holds the
      // stream back), not for the back end: the deadline still holds, but it is the client's.
      const waitedOnBackEnd = this.backEndMs + (this.waitingSince !== undefined ? now - this.waitingSince : this.firstByteAt !== undefined ? now - (this.connectedAt ?? this.startedAt) : 0);
      if (waitedOnBackEnd * 2 < now - this.startedAt) {
        const error = new GatewayError('upstream_timeout', { params: { detail: 'the call took longer than its total timeout, most of it waiting for the client to read the answer' }, retryable: true });
        SLOWED_BY_CLIENT.set(error, true);
        return this.abort(error);
      }
      return this.expire('the call took longer than its total timeout');
    }
    // A request still waiting for a connection of the pool has not reached the back end: its
    // first-byte deadline begins once it has one (see started).
    const firstByteAt = this.onConnection === false ? Infinity : (this.firstByteAt ?? Infinity);
    if (now >= firstByteAt) return this.expire('no answer began in time');
    const idleAt = this.waitingSince === undefined ? Infinity : this.waitingSince + this.timeouts.idleMs;
    if (now >= idleAt) return this.expire('the stream stalled');
    this.arm(Math.min(this.totalAt, firstByteAt, idleAt));
  };

  private expire(detail: string): void {
    this.abort(new GatewayError('upstream_timeout', { params: { detail }, retryable: true }));
  }

  private abort(reason: GatewayError): void {
    if (this.failure) return;
    this.failure = reason;
    this.controller?.abort(reason);
    const aborters = this.aborters;
    this.aborters = undefined;
    if (aborters) for (const fn of aborters) fn();
    const waits = this.waits;
    this.waits = [];
    for (const fail of waits) fail(reason);
  }

  /** Resolve as `work` does, or reject as soon as the attempt is aborted. */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.failure) {
      work.catch(() => undefined);
      return Promise.reject(this.failure);
    }
    return new Promise<T>((resolve, reject) => {
      this.waits.push(reject);
      work.then(
        (value) => {
          this.unwait(reject);
          resolve(value);
        },
        (error: unknown) => {
          this.unwait(reject);
          reject(error);
        },
      );
    });
  }

  private unwait(reject: (error: GatewayError) => void): void {
    const i = this.waits.indexOf(reject);
    if (i !== -1) this.waits.splice(i, 1);
  }

  /**
   * The back end sent something while a chunk is awaited (a keep-alive comment, a ping event, a
   * piece of an event): the silence the idle timeout measures starts again.
   */
  alive(): void {
    if (this.waitingSince === undefined) return;
    // The wait so far was the back end's (see slowedByClient); its silence starts again.
    const now = performance.now();
    this.backEndMs += now - this.waitingSince;
    this.waitingSince = now;
  }

  /** A request to the back end leaves (the HTTP client says so). */
  sent(): void {
    this.sentAt ??= performance.now();
    this.onConnection ??= false;
  }

  /**
   * The request went onto a connection to the back end (it had waited for one in the pool until
   * now). The wait was the gateway's (its `connections` were all busy), not the back end's: the
   * back end's time, and its first-byte deadline, begin now.
   */
  started(): void {
    if (this.onConnection === false) {
      const now = performance.now();
      this.sentAt = now;
      if (this.firstByteAt !== undefined) {
        this.firstByteAt = now + this.timeouts.firstByteMs;
        this.connectedAt = now;
        this.arm(this.firstByteAt);
      }
    }
    this.onConnection = true;
  }

  /**
   * Whether no request of this attempt went to a back end through the gateway's HTTP client (a
   * provider that refused the request while translating it; or one that does not use that client).
   */
  get nothingSent(): boolean {
    return this.sentAt === undefined;
  }

  /**
   * Whether the back end never saw this attempt: its request waited in the HTTP client's pool for
   * a connection (all busy) and the attempt ended first (the client left, a timeout). False when
   * it went out, or when the provider did not use the gateway's HTTP client (unknown).
   */
  get unsent(): boolean {
    return this.onConnection === false;
  }

  /** The head of the back end's answer came (the HTTP client says so): its request id, if it gave one. */
  headed(headers: Readonly<Record<string, string | string[] | undefined>>): void {
    this.receivedAt = performance.now();
    // The last answer's (a provider may make several requests in one attempt), none if it gave none.
    this.upstreamRequestId = requestIdOf(headers['x-request-id']) ?? requestIdOf(headers['request-id']);
  }

  /** Bytes of the back end's answer came (the HTTP client says so). */
  received(): void {
    this.receivedAt = performance.now();
  }

  /**
   * The part of the attempt that was the back end's: from its request leaving to the last of its
   * bytes so far (a JSON answer's end; a stream's first piece, when the attempt ends). Reading,
   * parsing and translating the answer after that are the gateway's. While a read of the answer
   * is pending (a stream handed on after its first window while the back end is silent), the wait
   * up to now is the back end's too. Undefined when the provider did not go through the gateway's
   * HTTP client with this attempt's signal.
   */
  upstreamMs(): number | undefined {
    if (this.sentAt === undefined) return undefined;
    if (this.waitingSince !== undefined) return performance.now() - this.sentAt;
    return this.receivedAt !== undefined ? this.receivedAt - this.sentAt : undefined;
  }

  /** The answer began: the first-byte deadline is gone; the stream's silences count from now on. */
  answered(): void {
    if (this.firstByteAt !== undefined) this.backEndMs += performance.now() - (this.connectedAt ?? this.startedAt);
    this.firstByteAt = undefined;
  }

  /** The longest silence of the back end between two chunks of its stream (`timeouts.idleMs`). */
  get idleMs(): number {
    return this.timeouts.idleMs;
  }

  /**
   * The next chunk of a stream, under the idle and total timeouts. A chunk that waits for the
   * client is not silence: only the time spent waiting on the back end counts. A wait that
   * begins while another is still pending (a primed stream whose window closed during a read:
   * its reader now awaits that same read) does not start the silence again: it is measured from
   * the back end's last chunk, however many readers wait for the next one.
   */
  async next<T>(iterator: AsyncIterator<T>, bound = false): Promise<IteratorResult<T>> {
    if (this.waiting++ === 0) {
      this.waitingSince = performance.now();
      this.arm(this.waitingSince + this.timeouts.idleMs);
    }
    try {
      // An iterator that fails by itself when this clock aborts (see abortsWith) needs no race.
      return await (bound && !this.failure ? iterator.next() : this.race(iterator.next()));
    } finally {
      if (--this.waiting === 0) {
        this.backEndMs += performance.now() - this.waitingSince!;
        this.waitingSince = undefined;
      }
    }
  }

  /**
   * The answer is over but for what the back end still has to say (its usage): a client that
   * leaves now ends the attempt `ms` later, not at once, so that what is left can be read; 0
   * (an answer that turned out not to be over) ends it at once again.
   */
  graceAfterAnswer(ms: number): void {
    this.graceMs = ms;
  }

  /** The attempt is over: no timer may fire any more, the client's signal is let go. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.client.unwatch(this.onClientAbort);
  }

  /** Abort the attempt (its reader left): a provider stuck in a read finishes once its signal fires. */
  cancel(): void {
    this.abort(new GatewayError('client_closed_request'));
  }

  /**
   * Pass chunks through; a back end silent for longer than idleMs while a chunk is awaited (or
   * the total timeout) ends them with upstream_timeout.
   */
  async *guard<T>(chunks: AsyncIterable<T>): AsyncGenerator<T> {
    const iterator = chunks[Symbol.asyncIterator]();
    let done = false;
    try {
      for (;;) {
        const next = await this.next(iterator);
        if (next.done) {
          done = true;
          return;
        }
        yield next.value;
      }
    } catch (error) {
      throw this.failure ?? error;
    } finally {
      this.finish();
      if (!done) {
        this.cancel();
        void Promise.resolve(iterator.return?.()).catch(() => undefined);
      }
    }
  }
}
