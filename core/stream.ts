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
import { abortBinding, abortsWith } from './attempt.js';

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
 * it gives undefined). Polls through to `source`; an iterable that fails by itself when an
 * attempt's clock aborts (see abortsWith) still does. A source that fails, or a reader that
 * leaves, ends it without the tail.
 */
export function withTail<T>(source: AsyncIterable<T>, tail: () => T | undefined | Promise<T | undefined>): AsyncIterableIterator<T> & PollableIterator<T> {
  const tailed = new TailedStream(source[Symbol.asyncIterator](), tail);
  const binding = abortBinding(source);
  return binding ? abortsWith(tailed, binding) : tailed;
}

class TailedStream<T> implements AsyncIterableIterator<T>, PollableIterator<T> {
  private readonly pollSource: (() => IteratorResult<T> | undefined) | undefined;
  /** open: reading the source; ended: the source is done, the tail not taken yet; closed: nothing more. */
  private phase: 'open' | 'ended' | 'closed' = 'open';

  constructor(
    private readonly source: AsyncIterator<T>,
    private readonly tail: () => T | undefined | Promise<T | undefined>,
  ) {
    this.pollSource = pollOf(source);
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
    const next = this.pollSource();
    if (next === undefined || !next.done) return next;
    this.phase = 'ended';
    return undefined; // the tail is taken by next()
  }

  async next(): Promise<IteratorResult<T>> {
    if (this.phase === 'open') {
      const next = await this.source.next();
      if (!next.done) return next;
      if (this.closed()) return DONE; // the reader left while this waited
      this.phase = 'ended';
    }
    if (this.phase === 'closed') return DONE;
    this.phase = 'closed';
    const last = await this.tail();
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
