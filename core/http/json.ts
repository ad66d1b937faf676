import { abortsWith, type Abortable } from '../attempt.js';
import type { Dispatcher } from 'undici';
import { GatewayError } from '../errors.js';
import { readCapped, sendUpstream, type UpstreamBody, type UpstreamHttpResponse } from './client.js';
import { SseLineTooLong, SseParser, type SseEvent } from './sse.js';
import { transportError, upstreamError } from './upstream.js';

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

/**
 * POST a JSON body: transport failures and error statuses become the gateway's errors (the
 * provider's secrets scrubbed from what the back end said); a 2xx answer comes back unread.
 */
export async function postJson(dispatcher: Dispatcher, call: JsonCall): Promise<UpstreamHttpResponse> {
  const { signal } = call;
  let response: UpstreamHttpResponse;
  try {
    response = await sendUpstream(dispatcher, {
      method: 'POST',
      path: call.path,
      // A provider that set its own accept (already in the one object it built) needs no copy.
      headers: call.headers.accept ? call.headers : { ...call.headers, accept: call.stream ? 'text/event-stream' : 'application/json' },
      body: call.raw ?? JSON.stringify(call.body),
      signal,
    });
  } catch (error) {
    throw transportError(error, signal);
  }
  if (response.statusCode >= 400) {
    const text = await readCapped(response.body);
    throw call.failure ? call.failure(response.statusCode, text, response.headers) : upstreamError(response.statusCode, text, response.headers, call.secrets);
  }
  return response;
}

/** Read a whole JSON answer: the parsed value and the bytes it came from (to relay them as they are). */
export async function readJson(response: UpstreamHttpResponse, signal: Abortable): Promise<{ parsed: unknown; bytes: Buffer }> {
  let bytes: Buffer;
  try {
    bytes = await response.body.bytes();
  } catch (error) {
    throw transportError(error, signal);
  }
  try {
    return { parsed: JSON.parse(bytes.toString('utf8')) as unknown, bytes };
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
  }
}

/** A vendor's stream, event by event, as canonical chunks (it keeps whatever state it needs). */
export interface EventTranslator<T> {
  /** The chunks one event (its parsed data, its `event:` name if it had one, its data's text) amounts to. */
  push(data: unknown, event?: string, text?: string): T[];
  /** An event whose data is exactly this text ends the stream, not as JSON (a `[DONE]` sentinel). */
  readonly doneText?: string;
  /** Whether the answer ended as the vendor ends one (a stream that stops short was cut). */
  readonly complete: boolean;
  /** Chunks to add once the stream is over and complete (a usage chunk, say). */
  end?(): T[];
}

/** Parse one event's data; anything but JSON is a malformed stream. */
function dataOf(event: SseEvent): unknown {
  try {
    return JSON.parse(event.data);
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
  }
}

/**
 * A back end's SSE answer as canonical chunks, translated as the bytes arrive. A malformed event,
 * an over-long line or a stream that stops before the translator saw the answer end is an
 * upstream_error; stopping early (the client left) releases the connection.
 */
export function translateEvents<T>(body: UpstreamBody, translator: EventTranslator<T>, signal: Abortable): AsyncGenerator<T> {
  const chunks = eventsOf(body, translator, signal);
  // Its reads fail as soon as `signal` aborts when the body is that exchange's.
  return body.abortedBy === signal ? abortsWith(chunks, signal) : chunks;
}

async function* eventsOf<T>(body: UpstreamBody, translator: EventTranslator<T>, signal: Abortable): AsyncGenerator<T> {
  let done = false;
  const parser = new SseParser();
  try {
    for await (const bytes of body) {
      const events = parser.push(bytes);
      for (let i = 0; i < events.length; i++) {
        const event = events[i]!;
        if (event.data === translator.doneText) {
          done = true;
          return;
        }
        const chunks = translator.push(dataOf(event), event.event, event.data);
        for (let j = 0; j < chunks.length; j++) yield chunks[j]!;
      }
    }
    for (const event of parser.end()) {
      if (event.data === translator.doneText) {
        done = true;
        return;
      }
      yield* translator.push(dataOf(event), event.event, event.data);
    }
    done = true;
    if (!translator.complete) throw new GatewayError('upstream_error', { params: { detail: 'the stream ended before the answer did' } });
    if (translator.end) yield* translator.end();
  } catch (error) {
    if (error instanceof GatewayError) throw error;
    if (error instanceof SseLineTooLong) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a stream line that is too long' } });
    throw transportError(error, signal);
  } finally {
    if (!done) body.destroy();
  }
}
