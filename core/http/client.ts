import { attemptOf, watchAbort, type Abortable } from '../attempt.js';
import type { PollableIterator } from '../stream.js';
import type { Dispatcher } from 'undici';

/** One HTTP request to a back end. */
export interface UpstreamHttpRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer | null;
  /** Aborting it ends the exchange: a pending answer rejects, a body being read fails. */
  signal?: Abortable;
}

/** The answer's status line and headers; the body arrives through `body`. */
export interface UpstreamHttpResponse {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: UpstreamBody;
}

/** Bytes queued from the socket before the reader is asked to catch up (the socket is paused). */
const HIGH_WATER = 64 * 1024;
/**
 * What one queued chunk holds beyond its bytes (its Buffer object, the queue's slot): a back end
 * that answers a byte at a time would otherwise hold a hundred times what its bytes count.
 */
const CHUNK_OVERHEAD = 128;
/** While an answer is read whole, chunks smaller than this, past the first few, are copied into one larger buffer. */
const SMALL_CHUNK = 16 * 1024;
/** Chunks kept as they came before small ones are copied together (an answer in a few pieces is not copied). */
const KEPT_CHUNKS = 16;
const COLLECTOR_BYTES = 64 * 1024;
const EMPTY = Buffer.alloc(0);

/** The most a whole answer read with `bytes()` or `text()` may hold unless the caller says otherwise. */
export const MAX_ANSWER_BYTES = 256 * 1024 * 1024;

/**
 * The bytes of answers read whole that one gateway holds at once, all calls together, and the
 * most it may (`server.answerMemoryLimit`): a few large answers at a time, not one per caller.
 */
export class HeldAnswers {
  bytes = 0;
  constructor(readonly limit: number = DEFAULT_ANSWER_MEMORY_LIMIT) {}
}

/** `server.answerMemoryLimit` by default: two answers of the largest size one may have. */
export const DEFAULT_ANSWER_MEMORY_LIMIT = 2 * MAX_ANSWER_BYTES;

/** An answer read whole did not fit in what the gateway may hold of all answers at once. */
export class HeldAnswersFull extends Error {
  constructor(readonly limit: number) {
    super(`the answers being read hold the gateway's ${limit} bytes for them`);
  }
}

/** The budget each dispatcher's answers count against (set by the pool registry that made it). */
const HELD = new WeakMap<Dispatcher, HeldAnswers>();

/** Count the answers `dispatcher` brings, read whole, against `held`. */
export function holdAnswersIn(dispatcher: Dispatcher, held: HeldAnswers): void {
  HELD.set(dispatcher, held);
}

/** An answer read whole was larger than the reader accepts: a broken or hostile back end. */
export class UpstreamBodyTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the answer is larger than ${limit} bytes`);
  }
}

interface Waiter {
  resolve(result: IteratorResult<Buffer>): void;
  reject(error: unknown): void;
}

/**
 * A response body as undici hands it over, without a stream object in between: chunks are queued
 * as they arrive and read either as an async iterable (a stream, with backpressure: the socket is
 * paused while more than 64 KiB wait) or whole with `text()` (a JSON answer).
 */
export class UpstreamBody implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private failure: unknown;
  private waiter: Waiter | undefined;
  private paused = false;
  private whole: { resolve(text: Buffer): void; reject(error: unknown): void } | undefined;
  private limit = Infinity;
  /** Bytes this body counts in `held` while it is read whole. */
  private counted = 0;
  /** Where small chunks of an answer read whole are copied together, and how much of it is used. */
  private collector: Buffer | undefined;
  private collected = 0;

  constructor(
    private readonly controller: Dispatcher.DispatchController,
    /** What ends the exchange this body belongs to: reading fails once it aborts. */
    readonly abortedBy?: Abortable,
    /** What answers read whole may hold in all (none: no bound but `limit`). */
    private readonly held?: HeldAnswers,
  ) {}

  /** @internal */
  push(chunk: Buffer): void {
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.resolve({ value: chunk, done: false });
      return;
    }
    const before = this.queue.length;
    if (this.whole && chunk.length < SMALL_CHUNK && (this.collector || this.queue.length >= KEPT_CHUNKS)) this.collect(chunk);
    else {
      this.flushCollector();
      this.queue.push(chunk);
    }
    this.queued += chunk.length;
    if (this.queued > this.limit) {
      this.tooLarge();
      return;
    }
    if (this.whole && !this.hold(chunk.length + (this.queue.length - before) * CHUNK_OVERHEAD)) return;
    if (!this.whole && this.queued + this.queue.length * CHUNK_OVERHEAD > HIGH_WATER && !this.paused) {
      this.paused = true;
      this.controller.pause();
    }
  }

  /** Copy `chunk` to the end of the collector (a new one when it is full). */
  private collect(chunk: Buffer): void {
    if (!this.collector || this.collected + chunk.length > this.collector.length) {
      this.flushCollector();
      this.collector = Buffer.allocUnsafeSlow(COLLECTOR_BYTES);
      // Counted as one more chunk held (see push).
      this.queue.push(EMPTY);
    }
    chunk.copy(this.collector, this.collected);
    this.collected += chunk.length;
  }

  /** What the collector holds, in its place in the queue (the empty chunk `collect` put there). */
  private flushCollector(): void {
    if (!this.collector) return;
    // One flushed early (a large chunk came) holds only what it was given, not its whole buffer.
    const used = this.collector.subarray(0, this.collected);
    this.queue[this.queue.length - 1] = this.collected < COLLECTOR_BYTES / 2 ? Buffer.from(used) : used;
    this.collector = undefined;
    this.collected = 0;
  }

  /** @internal */
  end(): void {
    this.ended = true;
    if (this.whole) {
      this.flushCollector();
      this.release();
      this.whole.resolve(this.queue.length === 1 ? this.queue[0]! : Buffer.concat(this.queue, this.queued));
      this.whole = undefined;
      this.queue.length = 0;
    } else if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.resolve({ value: undefined, done: true });
    }
  }

  /** @internal */
  fail(error: unknown): void {
    if (this.ended || this.failure !== undefined) return;
    this.failure = error;
    this.release();
    this.queue.length = 0;
    this.queued = 0;
    this.collector = undefined;
    this.collected = 0;
    if (this.whole) {
      this.whole.reject(error);
      this.whole = undefined;
    } else if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.reject(error);
    }
  }

  private tooLarge(): void {
    const error = new UpstreamBodyTooLarge(this.limit);
    this.controller.abort(error);
    this.fail(error);
  }

  /** Count `bytes` more against what all answers may hold; past it, this answer is given up. */
  private hold(bytes: number): boolean {
    const held = this.held;
    if (!held) return true;
    held.bytes += bytes;
    this.counted += bytes;
    if (held.bytes <= held.limit) return true;
    // Larger alone than all answers may be: it never fits, whatever else ends (not "try again").
    const error = this.counted > held.limit ? new UpstreamBodyTooLarge(held.limit) : new HeldAnswersFull(held.limit);
    this.controller.abort(error);
    this.fail(error);
    return false;
  }

  private release(): void {
    if (this.counted === 0) return;
    this.held!.bytes -= this.counted;
    this.counted = 0;
  }

  /** The whole body, once it has arrived; rejects with UpstreamBodyTooLarge past `limit` bytes. */
  bytes(limit = MAX_ANSWER_BYTES): Promise<Buffer> {
    this.limit = limit;
    if (this.failure === undefined && this.queued > limit) this.tooLarge();
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.ended) {
      const all = this.queue.length === 1 ? this.queue[0]! : Buffer.concat(this.queue, this.queued);
      this.queue.length = 0;
      return Promise.resolve(all);
    }
    // What arrived before this read counts too, from now on.
    if (!this.hold(this.queued + this.queue.length * CHUNK_OVERHEAD)) return Promise.reject(this.failure);
    return new Promise<Buffer>((resolve, reject) => {
      this.whole = { resolve, reject };
      // Read whole from here: what resuming hands over at once (undici goes on parsing in this
      // call) is counted as such, not paused again as a lagging stream.
      if (this.paused) {
        this.paused = false;
        this.controller.resume();
      }
    });
  }

  async text(limit = MAX_ANSWER_BYTES): Promise<string> {
    return (await this.bytes(limit)).toString('utf8');
  }

  /** Stop reading: the connection is released (closed if the body was not complete). */
  destroy(): void {
    if (this.ended || this.failure !== undefined) return;
    this.controller.abort(new Error('response body discarded'));
    this.fail(new Error('response body discarded'));
  }

  [Symbol.asyncIterator](): PollableIterator<Buffer> {
    // What has arrived, without waiting: a chunk, the end, the failure, or undefined.
    const poll = (): IteratorResult<Buffer> | undefined => {
      const chunk = this.queue.shift();
      if (chunk) {
        this.queued -= chunk.length;
        if (this.paused && this.queued + this.queue.length * CHUNK_OVERHEAD <= HIGH_WATER / 2) {
          this.paused = false;
          this.controller.resume();
        }
        return { value: chunk, done: false };
      }
      if (this.failure !== undefined) throw this.failure;
      if (this.ended) return { value: undefined, done: true };
      return undefined;
    };
    return {
      poll,
      next: () => {
        let ready: IteratorResult<Buffer> | undefined;
        try {
          ready = poll();
        } catch (error) {
          return Promise.reject(error);
        }
        if (ready) return Promise.resolve(ready);
        return new Promise<IteratorResult<Buffer>>((resolve, reject) => (this.waiter = { resolve, reject }));
      },
      return: () => {
        this.destroy();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/**
 * Send one request through an undici dispatcher (a Pool) with a plain handler: no stream objects
 * and no AbortSignal plumbing inside undici, which is most of what `request()` costs per call.
 * Resolves when the status and headers arrive; rejects with undici's error (or the signal's
 * reason) when the exchange fails before that.
 */
export function sendUpstream(dispatcher: Dispatcher, request: UpstreamHttpRequest): Promise<UpstreamHttpResponse> {
  return new Promise<UpstreamHttpResponse>((resolve, reject) => {
    const { signal } = request;
    if (signal?.aborted) {
      reject(signal.reason ?? new Error('aborted'));
      return;
    }
    let controller: Dispatcher.DispatchController | undefined;
    let body: UpstreamBody | undefined;
    let settled = false;
    // The attempt this request is made for learns how long the back end took (x-switchyard-overhead-ms).
    const attempt = attemptOf(signal);
    attempt?.sent();
    const onAbort = () => controller?.abort(signal?.reason ?? new Error('aborted'));
    const done = watchAbort(signal, onAbort);
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart(c) {
        controller = c;
        attempt?.started();
        if (signal?.aborted) c.abort(signal.reason ?? new Error('aborted'));
      },
      onResponseStart(c, statusCode, headers) {
        if (statusCode < 200) return;
        attempt?.headed(headers as UpstreamHttpResponse['headers']);
        body = new UpstreamBody(c, signal, HELD.get(dispatcher));
        settled = true;
        resolve({ statusCode, headers: headers as UpstreamHttpResponse['headers'], body });
      },
      onResponseData(_c, chunk) {
        attempt?.received();
        body?.push(chunk);
      },
      onResponseEnd() {
        // The body's end is the back end's last word (it may end well after its last bytes).
        attempt?.received();
        done();
        body?.end();
      },
      onResponseError(_c, error) {
        done();
        if (!settled) {
          settled = true;
          reject(error);
        } else body?.fail(error);
      },
    };
    try {
      dispatcher.dispatch({ method: request.method, path: request.path, headers: request.headers, body: request.body ?? null }, handler);
    } catch (error) {
      done();
      reject(error);
    }
  });
}

/** Read at most `limit` bytes of a body (an error's, say), then drop the rest. */
export async function readCapped(body: AsyncIterable<Uint8Array> & { destroy(): void }, limit = 64 * 1024): Promise<string> {
  const parts: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      if (size + chunk.length > limit) {
        parts.push(chunk.subarray(0, limit - size));
        break;
      }
      parts.push(chunk);
      size += chunk.length;
    }
  } catch {
    // a broken body is still an answer; what arrived is enough
  } finally {
    body.destroy();
  }
  return Buffer.concat(parts).toString('utf8');
}
