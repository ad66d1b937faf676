/**
 * Streams of chunks that hand over what is ready without a promise per chunk.
 *
 * A back end's stream arrives a read at a time, and one read usually holds many events. Passed
 * through async generators, every event costs each layer a promise and several turns of the
 * microtask queue (the reader, the pipeline's metering, the format's renderer, the writer). An
 * iterator here also has `poll()`: the next result if it is ready now, or `undefined` when only
 * `next()` can tell. A layer built with `mapStream` polls the layer below it, so the events of one
 * read go from the socket to the client in one synchronous pass; `next()` is left for the waits.
 */
import { likeStream } from './attempt.js';
import { GatewayError } from './errors.js';
import type { ChatChunk } from './operations.js';

/** An async iterator that can also give the next result at once when it is ready. */
export interface PollableIterator<T> extends AsyncIterator<T> {
  /** The next result if it is ready now (an item, or the end); undefined when only `next()` can tell. Throws what `next()` would reject with. */
  poll(): IteratorResult<T> | undefined;
}

/** `iterator`'s poll, when it has one. */
export function pollOf<T>(iterator: AsyncIterator<T>): (() => IteratorResult<T> | undefined) | undefined {
  const poll = (iterator as Partial<PollableIterator<T>>).poll;
  return typeof poll === 'function' ? poll.bind(iterator) : undefined;
}

export interface MapStreamOptions<S, T> {
  /** What comes after the last item (a closing event), once, when the source ends. */
  end?(): T | undefined;
  /** How to wait for the source's next result (a timeout around it, say); `iterator.next()` by default. */
  wait?(iterator: AsyncIterator<S>): Promise<IteratorResult<S>>;
  /** What the reader sees when the source or `map` throws (`error` itself by default). */
  fail?(error: unknown): unknown;
  /** The stream is over: `completed` when the source ended, false when it failed or the reader left. Called once. */
  close?(completed: boolean): void;
  /**
   * The reader left before the end: what to read of the source first, if anything (its usage,
   * say); the reader's `return()` waits for it, then `close(false)` runs and the source ends.
   */
  leave?(source: AsyncIterator<S>): Promise<void> | undefined;
}

const DONE: IteratorResult<never> = { value: undefined, done: true };

/**
 * `source`, each item mapped synchronously by `map` (an undefined result drops the item): an async
 * iterable whose iterator also polls (see PollableIterator). A reader that stops early
 * (`return()`) ends the source too.
 */
export function mapStream<S, T>(source: AsyncIterable<S>, map: (item: S) => T | undefined, options: MapStreamOptions<S, T> = {}): AsyncIterableIterator<T> & PollableIterator<T> {
  return new MappedStream(source[Symbol.asyncIterator](), map, options);
}

class MappedStream<S, T> implements AsyncIterableIterator<T>, PollableIterator<T> {
  private readonly pollSource: (() => IteratorResult<S> | undefined) | undefined;
  private closed = false;

  constructor(
    private readonly source: AsyncIterator<S>,
    private readonly map: (item: S) => T | undefined,
    private readonly options: MapStreamOptions<S, T>,
  ) {
    this.pollSource = pollOf(source);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    if (this.closed) return DONE;
    if (!this.pollSource) return undefined;
    try {
      for (;;) {
        const next = this.pollSource();
        if (next === undefined) return undefined;
        const result = this.take(next);
        if (result) return result;
      }
    } catch (error) {
      throw this.failed(error);
    }
  }

  async next(): Promise<IteratorResult<T>> {
    const ready = this.poll();
    if (ready) return ready;
    try {
      for (;;) {
        const next = await (this.options.wait ? this.options.wait(this.source) : this.source.next());
        if (this.closed) return DONE; // the reader left while this waited
        const result = this.take(next);
        if (result) return result;
        // Items the source had ready after the wait go out without another one.
        for (let ready = this.pollSource?.(); ready !== undefined; ready = this.pollSource?.()) {
          const polled = this.take(ready);
          if (polled) return polled;
        }
      }
    } catch (error) {
      throw this.failed(error);
    }
  }

  async return(): Promise<IteratorResult<T>> {
    if (!this.closed) {
      this.closed = true;
      const lingered = this.options.leave?.(this.source);
      if (lingered) {
        await lingered.catch(() => undefined);
        this.options.close?.(false);
        // Not awaited: a source left in a read that ignores the abort must not hold the reader.
        void Promise.resolve(this.source.return?.()).catch(() => undefined);
        return DONE;
      }
      this.options.close?.(false);
      await Promise.resolve(this.source.return?.()).catch(() => undefined);
    }
    return DONE;
  }

  /** One result of the source, mapped; undefined when the item was dropped. */
  private take(next: IteratorResult<S>): IteratorResult<T> | undefined {
    if (next.done) return this.ending();
    const value = this.map(next.value);
    return value === undefined ? undefined : { value, done: false };
  }

  /** The end item (once), then done. */
  private ending(): IteratorResult<T> {
    this.closed = true;
    this.options.close?.(true);
    const last = this.options.end?.();
    return last === undefined ? DONE : { value: last, done: false };
  }

  /** What the reader gets for `error` (read before `close` runs: closing may change it), the stream closed. */
  private failed(error: unknown): unknown {
    const seen = this.options.fail ? this.options.fail(error) : error;
    if (!this.closed) {
      this.closed = true;
      this.options.close?.(false);
      void Promise.resolve(this.source.return?.()).catch(() => undefined);
    }
    return seen;
  }
}

/**
 * `source` as it is, then, once it has ended in full, what `tail()` gives (awaited; nothing when
 * it gives undefined). Items `keep` picks are held back from where they came and handed to
 * `tail` instead (the last one it picked), to give them again, changed, at the end. Polls
 * through to `source`; an iterable that fails by itself when an attempt's clock aborts (see
 * abortsWith) still does. A source that fails, or a reader that leaves, ends it without the tail.
 */
export function withTail<T>(
  source: AsyncIterable<T>,
  tail: (kept: T | undefined) => T | undefined | Promise<T | undefined>,
  keep?: (item: T) => boolean,
): AsyncIterableIterator<T> & PollableIterator<T> {
  return likeStream(new TailedStream(source[Symbol.asyncIterator](), tail, keep), source);
}

class TailedStream<T> implements AsyncIterableIterator<T>, PollableIterator<T> {
  private readonly pollSource: (() => IteratorResult<T> | undefined) | undefined;
  /** open: reading the source; ended: the source is done, the tail not taken yet; closed: nothing more. */
  private phase: 'open' | 'ended' | 'closed' = 'open';
  /** The item `keep` last picked, for the tail. */
  private kept: T | undefined;

  constructor(
    private readonly source: AsyncIterator<T>,
    private readonly tail: (kept: T | undefined) => T | undefined | Promise<T | undefined>,
    private readonly keep: ((item: T) => boolean) | undefined,
  ) {
    this.pollSource = pollOf(source);
  }

  /** Whether `next` is an item to hold back for the tail (then held). */
  private held(next: IteratorResult<T>): boolean {
    if (next.done || !this.keep || !this.keep(next.value)) return false;
    this.kept = next.value;
    return true;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Read anew: return() may have closed it during an await. */
  private closed(): boolean {
    return this.phase === 'closed';
  }

  poll(): IteratorResult<T> | undefined {
    if (this.phase === 'closed') return DONE;
    if (this.phase === 'ended' || !this.pollSource) return undefined;
    for (;;) {
      const next = this.pollSource();
      if (next === undefined) return undefined;
      if (this.held(next)) continue;
      if (!next.done) return next;
      this.phase = 'ended';
      return undefined; // the tail is taken by next()
    }
  }

  async next(): Promise<IteratorResult<T>> {
    while (this.phase === 'open') {
      const next = await this.source.next();
      if (this.held(next)) continue;
      if (!next.done) return next;
      if (this.closed()) return DONE; // the reader left while this waited
      this.phase = 'ended';
    }
    if (this.phase === 'closed') return DONE;
    this.phase = 'closed';
    const last = await this.tail(this.kept);
    return last === undefined ? DONE : { value: last, done: false };
  }

  async return(): Promise<IteratorResult<T>> {
    if (this.phase !== 'closed') {
      const open = this.phase === 'open';
      this.phase = 'closed';
      if (open) await Promise.resolve(this.source.return?.()).catch(() => undefined);
    }
    return DONE;
  }
}

/**
 * How long a stream is held back waiting for its first chunk or piece of answer (see primeStream). Errors
 * that follow a 200 come at once; a model that thinks for a while before its first word must not
 * keep the client (and every proxy on the way) from hearing anything, not even the headers.
 */
export const PRIME_WINDOW_MS = 1000;

const WAITED = Symbol('waited');

/** The most chunks a stream's priming holds before it lets the stream go on unprimed. */
export const PRIME_HELD_LIMIT = 256;

/**
 * `source`, read up to its first item that `answers` (a piece of the answer, not just a role),
 * for at most `windowMs`, before it is handed on. A back end may answer 200 and then fail before
 * any content (an error event, a connection cut, a body that is not a stream): read here, that
 * failure fails the attempt while another target can still be tried, instead of reaching the
 * client as a broken stream. Past the window the stream goes on as it is, the read under way
 * included (its reader then awaits that same read: the attempt's clock measures the back end's
 * silence from its last chunk, see AttemptClock.next). What was read is given first; then it
 * polls through to `source`, and keeps what the source fails with by itself when an attempt
 * aborts (abortsWith). A failure while priming releases the source and is thrown. `read` reads
 * the source (the pipeline's: under the attempt's idle timeout). `held`, when given, is the list
 * the items read are kept in: what the caller still has of them when priming fails (the usage
 * they reported, when the client left meanwhile).
 */
export async function primeStream<T>(
  source: AsyncIterable<T>,
  answers: (item: T) => boolean,
  windowMs = PRIME_WINDOW_MS,
  read: (iterator: AsyncIterator<T>) => Promise<IteratorResult<T>> = (iterator) => iterator.next(),
  held: T[] = [],
): Promise<AsyncIterableIterator<T> & PollableIterator<T>> {
  const iterator = source[Symbol.asyncIterator]();
  const poll = pollOf(iterator);
  const buffered = held;
  let ended = false;
  let pending: Promise<IteratorResult<T>> | undefined;
  // One timer for the whole window, made at the first read that has to wait.
  let timer: NodeJS.Timeout | undefined;
  let closed: Promise<typeof WAITED> | undefined;
  try {
    for (;;) {
      let result = poll?.();
      if (result === undefined) {
        const next = read(iterator);
        closed ??= new Promise<typeof WAITED>((resolve) => (timer = setTimeout(resolve, windowMs, WAITED)));
        const waited = await Promise.race([next, closed]);
        if (waited === WAITED) {
          pending = next;
          // Read by the stream later; until then its failure is not an unhandled rejection.
          next.catch(() => undefined);
          break;
        }
        result = waited;
      }
      if (result.done) {
        ended = true;
        break;
      }
      buffered.push(result.value);
      // Past PRIME_HELD_LIMIT chunks without an answer the stream goes on as it comes: the window
      // holds chunks in memory (a back end that streams fast and says nothing could fill it).
      if (answers(result.value) || buffered.length >= PRIME_HELD_LIMIT) break;
    }
  } catch (error) {
    // Not awaited: a source stuck in a read that ignores the abort must not hold up the failure.
    void Promise.resolve(iterator.return?.()).catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
  // A stream that ended having said nothing at all (a lone `[DONE]`) is no answer: the attempt
  // fails, nothing having reached the client, and another target may answer.
  if (ended && buffered.length === 0) {
    throw new GatewayError('upstream_error', { params: { detail: 'the stream ended without any answer' }, retryable: true });
  }
  return likeStream(new PrimedStream(iterator, poll, buffered, pending, ended), source);
}

class PrimedStream<T> implements AsyncIterableIterator<T>, PollableIterator<T> {
  private at = 0;
  /** Whether a poll has said "nothing ready" once the held items were given (see poll). */
  private handedOn = false;

  constructor(
    private readonly source: AsyncIterator<T>,
    private readonly pollSource: (() => IteratorResult<T> | undefined) | undefined,
    private readonly buffered: T[],
    private pending: Promise<IteratorResult<T>> | undefined,
    private ended: boolean,
  ) {}

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    if (this.at < this.buffered.length) return { value: this.buffered[this.at++]!, done: false };
    if (this.ended) return DONE;
    // What was held while priming is a pass of its own: a writer that writes what one pass took
    // sends it now, before what the source has ready since is read (next() goes on with it).
    if (!this.handedOn) {
      this.handedOn = true;
      if (this.buffered.length > 0) return undefined;
    }
    if (this.pending || !this.pollSource) return undefined;
    return this.pollSource();
  }

  async next(): Promise<IteratorResult<T>> {
    const ready = this.poll();
    if (ready) return ready;
    const pending = this.pending;
    if (pending) {
      this.pending = undefined;
      return pending;
    }
    return this.source.next();
  }

  async return(): Promise<IteratorResult<T>> {
    if (!this.ended) {
      this.ended = true;
      this.at = this.buffered.length;
      await Promise.resolve(this.source.return?.()).catch(() => undefined);
    }
    return DONE;
  }
}

/**
 * Whether a canonical chat (or completion) chunk carries part of the answer (text, a tool call,
 * a finish), not just the role.
 */
export function chatChunkAnswers(chunk: ChatChunk): boolean {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return false;
  for (const choice of choices) {
    if (choice.finish_reason) return true;
    const text = (choice as { text?: unknown }).text;
    if (typeof text === 'string' && text !== '') return true;
    const delta = choice.delta;
    if (!delta) continue;
    for (const key in delta) {
      const value = delta[key];
      if (key !== 'role' && value !== '' && value != null) return true;
    }
  }
  return false;
}
