import { abortsWith, aliveOf, attemptOf, type Abortable } from '../attempt.js';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors.js';
import { readCapped, sendUpstream, type UpstreamBody, type UpstreamHttpResponse } from './client.js';
import { SseLineTooLong, SseParser, type SseEvent } from './sse.js';
import { mergeHeaders, secretsWith, transportError, upstreamError } from './upstream.js';
import { pollOf, type PollableIterator } from '../stream.js';
import { keepUpstreamBytes, parseAnswer, parseBackEndJson } from '../passthrough.js';
import type { CanonicalResult, OperationId, UpstreamJsonResponse, Usage } from '../operations.js';
import { billedBy, billsSoFar, failureBilled } from '../usage.js';

const ACCEPT_EVENTS: Readonly<Record<string, string>> = Object.freeze({ accept: 'text/event-stream' });
const ACCEPT_JSON: Readonly<Record<string, string>> = Object.freeze({ accept: 'application/json' });

/** The accept header of a JSON call, as one shared object (for mergeHeaders): events when it streams. */
export function acceptFor(stream: boolean | undefined): Readonly<Record<string, string>> {
  return stream ? ACCEPT_EVENTS : ACCEPT_JSON;
}

/** One JSON call to a back end, as every provider of a JSON API makes it. */
export interface JsonCall {
  path: string;
  /** The provider's own headers (credentials, versions) and the hop headers of the call. */
  headers: Record<string, string>;
  body: unknown;
  /** `body` as JSON text already (the client's own text, when it goes up unchanged): sent as it is. */
  raw?: string;
  signal: Abortable;
  /** Ask for an event stream rather than one JSON answer. */
  stream?: boolean;
  /** Strings that must never reach a client in an upstream's error message (the provider's keys). */
  secrets: readonly (string | undefined)[];
  /** A vendor's own reading of an error status; `upstreamError` by default. */
  failure?: (status: number, body: string, headers: Record<string, string | string[] | undefined>) => GatewayError;
}

const JSON_CONTENT: Readonly<Record<string, string>> = { 'content-type': 'application/json' };

/** Whether `headers` has `lowerName` in any case. */
function named(headers: Readonly<Record<string, string>>, lowerName: string): boolean {
  for (const name in headers) if (name.toLowerCase() === lowerName) return true;
  return false;
}

/**
 * POST a JSON body (sent as `application/json` unless the headers name another type):
 * transport failures and error statuses become the gateway's errors (the
 * provider's secrets scrubbed from what the back end said); a 2xx answer comes back unread.
 */
export async function postJson(dispatcher: Dispatcher, call: JsonCall): Promise<UpstreamHttpResponse> {
  const { signal } = call;
  // A provider that set its own accept and content type (in the one object it built) needs no copy.
  let headers = call.headers.accept || named(call.headers, 'accept') ? call.headers : mergeHeaders(call.headers, acceptFor(call.stream));
  if (!headers['content-type'] && !named(headers, 'content-type')) headers = mergeHeaders(headers, JSON_CONTENT);
  let response: UpstreamHttpResponse;
  try {
    response = await sendUpstream(dispatcher, {
      method: 'POST',
      path: call.path,
      headers,
      body: call.raw ?? JSON.stringify(call.body),
      signal,
    });
  } catch (error) {
    throw transportError(error, signal);
  }
  if (response.statusCode >= 400) {
    const text = await readCapped(response.body);
    throw call.failure ? call.failure(response.statusCode, text, response.headers) : upstreamError(response.statusCode, text, response.headers, secretsWith(dispatcher, call.secrets));
  }
  return response;
}

/** Read a whole JSON answer: the parsed value and the bytes it came from (to relay them as they are). */
export async function readJson(response: UpstreamHttpResponse, signal: Abortable): Promise<{ parsed: unknown; bytes: Buffer }> {
  const bytes = await answerBytes(response, signal);
  return { parsed: parseAnswer(bytes), bytes };
}

/**
 * Read a whole JSON answer in the wire format `format`, for a format that may relay it as it is:
 * parsed inside the attempt, its bytes kept (see keepUpstreamBytes), so that a client of `format`
 * gets them as they came. An answer that is not JSON, or that `isAnswer` does not recognise (a
 * 200 carrying an error object, an array), is an upstream_error that may move on to the next
 * target: its text never reaches the client.
 */
export async function readRelayable<O extends OperationId>(
  response: UpstreamHttpResponse,
  signal: Abortable,
  format: string,
  isAnswer: (parsed: Record<string, unknown>) => boolean,
  what: string,
): Promise<UpstreamJsonResponse<O>> {
  const bytes = await answerBytes(response, signal);
  const parsed = parseAnswer(bytes);
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || !isAnswer(parsed as Record<string, unknown>)) {
    throw new GatewayError('upstream_error', { params: { detail: `the back end did not answer with ${what}` }, retryable: true });
  }
  return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, format) as CanonicalResult<O> };
}

/**
 * A whole answer's bytes, without a byte order mark before them (RFC 8259 lets a reader ignore
 * one, as fetch's json() does): parsed, or relayed as they are, they are the JSON alone.
 */
async function answerBytes(response: UpstreamHttpResponse, signal: Abortable): Promise<Buffer> {
  let bytes: Buffer;
  try {
    bytes = await response.body.bytes();
  } catch (error) {
    throw transportError(error, signal);
  }
  return bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes;
}


/** A vendor's stream, event by event, as canonical chunks (it keeps whatever state it needs). */
export interface EventTranslator<T> {
  /** The chunks one event (its parsed data, its `event:` name if it had one, its data's text) amounts to. */
  push(data: unknown, event?: string, text?: string): T[];
  /** An event whose data is exactly this text ends the stream, not as JSON (a `[DONE]` sentinel). */
  readonly doneText?: string;
  /** Whether the answer ended as the vendor ends one (a stream that stops short was cut). */
  readonly complete: boolean;
  /**
   * The vendor's last event came (a `message_stop`, say): the stream ends with it, whether
   * or not the back end ends its body (one that keeps the connection open is let go). Nothing
   * after it is read.
   */
  readonly finished?: boolean;
  /**
   * The answer is complete as far as its events tell, but the vendor has no last event to say so
   * (every candidate has its finish, and the usage came). What still comes is read, but
   * a silence of the back end now ends the stream, complete, after QUIET_MS (at most half the
   * attempt's idleMs) instead of waiting on a connection that stays open into the idle timeout.
   */
  readonly settled?: boolean;
  /** Chunks to add once the stream is over and complete (a usage chunk, say). */
  end?(): T[];
  /**
   * What the back end has said it bills so far, output included, when it said (a vendor whose
   * next-to-last event carries the whole usage): a stream that fails or is cut before its last
   * event, or whose client leaves before it, is charged this (see failureBilled, billsSoFar),
   * not a count of what it delivered.
   */
  billed?(): Usage | undefined;
}

/** How long a settled answer waits for more from a back end that keeps its connection open (see EventTranslator.settled). */
export const QUIET_MS = 1000;

/** How long the body of an answer whose last event came may take to end before its connection is closed (see EventTranslator.finished). */
export const LINGER_MS = 1000;

/** Parse one event's data; anything but JSON is a malformed stream. */
function dataOf(event: SseEvent): unknown {
  try {
    return parseBackEndJson(event.data);
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
  }
}

/**
 * A back end's SSE answer as canonical chunks, translated as the bytes arrive. A malformed event,
 * an over-long line or a stream that stops before the translator saw the answer end is an
 * upstream_error; stopping early (the client left) releases the connection. The events of a read
 * that has arrived are handed over by `poll()` without a promise each (see core/stream.ts).
 */
export function translateEvents<T>(body: UpstreamBody, translator: EventTranslator<T>, signal: Abortable): AsyncIterableIterator<T> & PollableIterator<T> {
  const chunks = new EventStream(body, translator, signal);
  // What the back end has billed so far, for a client that leaves before the end.
  if (translator.billed) billsSoFar(chunks, () => translator.billed!());
  // Its reads fail as soon as `signal` aborts when the body is that exchange's.
  return body.abortedBy === signal ? abortsWith(chunks, signal) : chunks;
}

const DONE: IteratorResult<never> = { value: undefined, done: true };

class EventStream<T> implements AsyncIterableIterator<T>, PollableIterator<T> {
  private readonly parser = new SseParser();
  private readonly source: AsyncIterator<Buffer>;
  private readonly pollSource: (() => IteratorResult<Buffer> | undefined) | undefined;
  /** Tells the attempt that bytes came (its idle timeout starts again). */
  private readonly alive: (() => void) | undefined;
  /** Chunks translated and not yet handed over, from `at` on. */
  private pending: T[] = [];
  private at = 0;
  /** The events of the last read, translated one at a time from `eventAt` on. */
  private events: SseEvent[] = [];
  private eventAt = 0;
  /** No read will count any more: the done sentinel, or the end of the body, was read. */
  private over = false;
  /** The body ended (no sentinel): its completeness is checked once its last events are translated. */
  private ending = false;
  /** The reader has had the end, an error, or left. */
  private closed = false;

  constructor(
    private readonly body: UpstreamBody,
    private readonly translator: EventTranslator<T>,
    private readonly signal: Abortable,
  ) {
    this.source = body[Symbol.asyncIterator]();
    this.pollSource = pollOf(this.source);
    this.alive = aliveOf(signal);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  poll(): IteratorResult<T> | undefined {
    try {
      for (;;) {
        if (this.at < this.pending.length) {
          const value = this.pending[this.at++]!;
          if (this.at === this.pending.length) {
            this.pending = [];
            this.at = 0;
          }
          return { value, done: false };
        }
        if (this.closed) return DONE;
        // One event at a time: the chunks before an event that fails reach the reader first.
        if (this.eventAt < this.events.length) {
          this.event(this.events[this.eventAt++]!);
          continue;
        }
        if (this.over) {
          if (this.ending) this.finish();
          else this.closed = true;
          continue;
        }
        const next = this.pollSource?.();
        if (next === undefined) return undefined;
        this.feed(next);
      }
    } catch (error) {
      throw this.fail(error);
    }
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      const ready = this.poll();
      if (ready) return ready;
      let next: IteratorResult<Buffer> | undefined;
      try {
        next = this.translator.settled ? await this.quietRead() : await this.source.next();
        if (this.closed) return DONE; // the reader left while this waited
        if (next === undefined) this.quiet();
        else this.feed(next);
      } catch (error) {
        throw this.fail(error);
      }
    }
  }

  /** The next read of a settled answer; undefined when the back end said nothing for the quiet window. */
  private async quietRead(): Promise<IteratorResult<Buffer> | undefined> {
    const read = this.source.next();
    const idleMs = attemptOf(this.signal)?.idleMs;
    const ms = idleMs === undefined ? QUIET_MS : Math.min(QUIET_MS, idleMs / 2);
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
    try {
      const result = await Promise.race([read, quiet]);
      // The body is let go (quiet()): the read it fails is nobody's.
      if (result === undefined) read.catch(() => undefined);
      return result;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A settled answer whose back end stayed silent: it ends here, complete, and its connection is closed. */
  private quiet(): void {
    this.over = true;
    this.ending = true;
    this.events = [];
    this.eventAt = 0;
    this.body.destroy();
  }

  async return(): Promise<IteratorResult<T>> {
    if (!this.closed) {
      this.closed = true;
      // Left before the end: the rest of the answer is not wanted.
      if (!this.over) this.body.destroy();
    }
    return DONE;
  }

  /** Take the events of one read (or, at the end of the body, the last ones and the end). */
  private feed(next: IteratorResult<Buffer>): void {
    if (!next.done) {
      // Whatever the bytes hold (a keep-alive comment, a ping, part of an event), the back end is not silent.
      this.alive?.();
      this.events = this.parser.push(next.value);
      this.eventAt = 0;
      return;
    }
    this.events = this.parser.end();
    this.eventAt = 0;
    this.over = true;
    this.ending = true;
  }

  private event(event: SseEvent): void {
    if (event.data === this.translator.doneText) {
      // Nothing after the sentinel counts, and a stream that ends with it is complete.
      this.over = true;
      this.ending = false;
      this.events = [];
      this.eventAt = 0;
      this.release();
      return;
    }
    const chunks = this.translator.push(dataOf(event), event.event, event.data);
    for (let i = 0; i < chunks.length; i++) this.pending.push(chunks[i]!);
    if (this.translator.finished) {
      // The vendor's last event: the stream ends with it (its end() chunks after it).
      this.over = true;
      this.ending = true;
      this.events = [];
      this.eventAt = 0;
      this.release();
    }
  }

  /**
   * The answer is over before its body is: nothing more of it is read. A body whose end has come
   * already (the usual case: it came with the last event) leaves its connection to the next call;
   * one that has not ended within LINGER_MS (a back end that keeps the connection open) is let go.
   */
  private release(): void {
    try {
      for (let next = this.pollSource?.(); next !== undefined; next = this.pollSource?.()) if (next.done) return;
    } catch {
      return; // the body failed already: nothing to let go
    }
    const body = this.body;
    setTimeout(() => body.destroy(), LINGER_MS).unref();
  }

  /** The body ended without the sentinel: complete only if the translator saw the answer end. */
  private finish(): void {
    this.ending = false;
    if (!this.translator.complete) throw new GatewayError('upstream_error', { params: { detail: 'the stream ended before the answer did' } });
    if (this.translator.end) for (const chunk of this.translator.end()) this.pending.push(chunk);
  }

  /** What the reader gets for `error`; the connection is let go unless the answer was all read. */
  private fail(error: unknown): unknown {
    if (!this.closed) {
      this.closed = true;
      this.pending = [];
      if (!this.over) this.body.destroy();
    }
    const failure =
      error instanceof GatewayError
        ? error
        : error instanceof SseLineTooLong
          ? new GatewayError('upstream_error', { params: { detail: `the back end sent a stream ${error.what} that is too long` } })
          : transportError(error, this.signal);
    const billed = this.translator.billed?.();
    if (billed && !billedBy(failure)) failureBilled(failure, billed);
    return failure;
  }
}

