import { GatewayError } from './errors.js';

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
 */
export class AttemptClock {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timers: NodeJS.Timeout[] = [];
  private firstByteTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  private failure: GatewayError | undefined;

  constructor(
    client: AbortSignal,
    private readonly timeouts: Timeouts,
  ) {
    this.signal = AbortSignal.any([client, this.controller.signal]);
    this.firstByteTimer = this.timer(timeouts.firstByteMs, 'no answer began in time');
    this.timers.push(this.timer(timeouts.totalMs, 'the call took longer than its total timeout'));
  }

  /** The timeout that ended this attempt, if one did. */
  get timedOut(): GatewayError | undefined {
    return this.failure;
  }

  private timer(ms: number, detail: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.expire(detail), ms);
    timer.unref();
    return timer;
  }

  private expire(detail: string): void {
    if (this.signal.aborted) return;
    this.failure = new GatewayError('upstream_timeout', { params: { detail }, retryable: true });
    this.controller.abort(this.failure);
  }

  /**
   * Resolve as `work` does, or reject as soon as the attempt is aborted. Each wait has its own
   * listener, removed when it settles: nothing piles up over a stream of many chunks.
   */
  race<T>(work: Promise<T>): Promise<T> {
    if (this.signal.aborted) {
      work.catch(() => undefined);
      return Promise.reject(this.failure ?? new GatewayError('client_closed_request'));
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(this.failure ?? new GatewayError('client_closed_request'));
      this.signal.addEventListener('abort', onAbort, { once: true });
      work.then(
        (value) => {
          this.signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          this.signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  }

  /** The answer began: the first-byte timer stops, the idle timer starts. */
  answered(): void {
    if (this.firstByteTimer) clearTimeout(this.firstByteTimer);
    this.firstByteTimer = undefined;
    this.idleTimer = this.timer(this.timeouts.idleMs, 'the stream stalled');
  }

  /** Waiting on the back end for the next chunk: the silence is counted from now. */
  private listen(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = this.timer(this.timeouts.idleMs, 'the stream stalled');
  }

  /**
   * A chunk arrived and waits for the client: the back end is not silent while the client reads
   * slowly (backpressure), so no idle timer runs until the next chunk is asked for.
   */
  private hold(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  /** The attempt is over: no timer may fire any more. */
  finish(): void {
    for (const timer of this.timers) clearTimeout(timer);
    if (this.firstByteTimer) clearTimeout(this.firstByteTimer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
  }

  /**
   * Pass chunks through; a back end silent for longer than idleMs while a chunk is awaited (or
   * the total timeout) ends them with upstream_timeout.
   */
  async *guard<T>(chunks: AsyncIterable<T>): AsyncGenerator<T> {
    const iterator = chunks[Symbol.asyncIterator]();
    let done = false;
    try {
      for (let first = true; ; first = false) {
        // The first wait is timed from the headers (answered()); each later one from when it starts.
        if (!first) this.listen();
        const next = await this.race(iterator.next());
        if (next.done) {
          done = true;
          return;
        }
        this.hold();
        yield next.value;
      }
    } catch (error) {
      throw this.failure ?? error;
    } finally {
      this.finish();
      // Do not wait: a provider stuck in a read finishes once its signal (aborted here) fires.
      if (!done) {
        if (!this.signal.aborted) this.controller.abort(new GatewayError('client_closed_request'));
        void Promise.resolve(iterator.return?.()).catch(() => undefined);
      }
    }
  }
}
