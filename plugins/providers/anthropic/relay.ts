import {
  EVENT_STREAM,
  GatewayError,
  keepUpstreamBytes,
  markSentAsIs,
  translateEvents,
  type ChatChunk,
  type RequestContext,
  type UpstreamHttpResponse,
  type UpstreamStreamResponse,
  type EventTranslator,
  type SseEvent,
  type Usage,
  type UpstreamBody,
} from '../../../core/index.js';

/** How a vendor frames one event on the wire (its `event:` line, its `data:` lines, its line ends). */
export type EventFrame = (event: SseEvent) => string;

/** Anthropic's framing: `event: <name>` then `data: <json>`, lines ended by `\n`, a blank line after. */
export const anthropicFrame: EventFrame = (event) => {
  const data = event.data.split('\n').map((line) => `data: ${line}\n`).join('');
  return `${event.event !== undefined ? `event: ${event.event}\n` : ''}${data}\n`;
};

/**
 * Google's framing: one `data: <json>` line ended by `\r\n`, a blank line after. An event whose
 * JSON a back end spread over several `data:` lines (valid SSE, which joins them with newlines:
 * whitespace between JSON's tokens) goes on one line, as Google sends it: @google/genai reads each
 * `data:` line as a whole event.
 */
export const googleFrame: EventFrame = (event) => `data: ${event.data.includes('\n') ? event.data.replace(/\n/g, ' ') : event.data}\r\n\r\n`;

/** A chunk that carries nothing for the canonical stream: only an event to relay (metering ignores it). */
function relayOnly(): ChatChunk {
  return { id: '', object: 'chat.completion.chunk', created: 0, model: '', choices: [] };
}

/**
 * A back end's SSE answer in the client's own wire format (`format`): translated event by event
 * into canonical chunks (usage, finish and routing need them), and every event's text, framed
 * again as the vendor frames it, kept on the chunks with keepUpstreamBytes for the format to relay.
 *
 * Each event's text rides on the first chunk it makes; the other chunks of that event carry ''
 * (nothing more to write). An event that makes no chunk (ping, content_block_stop, an event type
 * the translator does not know) comes as a relay-only chunk (no choices, no usage). The chunks
 * the translator adds after the stream (`end()`) carry ''. The sequence of texts is therefore
 * exactly the sequence of events, none dropped, none repeated.
 *
 * Failures are translateEvents' own: a malformed event, an over-long line, or a stream that stops
 * before the translator saw the answer end is an upstream_error; stopping early releases the body.
 */
export function relayEvents(
  body: UpstreamBody,
  translator: EventTranslator<ChatChunk>,
  signal: AbortSignal,
  format: string,
  frame: EventFrame,
): AsyncIterableIterator<ChatChunk> {
  return translateEvents(body, new Relay(translator, format, frame), signal);
}

/**
 * A pass-through call's streamed answer: an event stream (anything else is a retryable
 * upstream_error), relayed event by event with relayEvents, read up to its first piece of answer
 * (the pipeline primes it: an error before any content lets the next target be tried), and the call marked as
 * sent as the client wrote it.
 */
export async function relayedStream(
  response: UpstreamHttpResponse,
  translator: EventTranslator<ChatChunk>,
  signal: AbortSignal,
  format: string,
  frame: EventFrame,
  ctx: RequestContext,
): Promise<UpstreamStreamResponse<'chat'>> {
  if (!EVENT_STREAM.test(String(response.headers['content-type'] ?? ''))) {
    response.body.destroy();
    throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
  }
  const chunks = relayEvents(response.body, translator, signal, format, frame);
  markSentAsIs(ctx, format);
  // Both back ends that relay (Anthropic, Gemini) may fail after an opening event: read on to the answer.
  return { kind: 'stream', status: response.statusCode, chunks, primeToAnswer: true };
}

/** A translator whose chunks also carry the text of the events they came from. */
class Relay implements EventTranslator<ChatChunk> {
  constructor(
    private readonly inner: EventTranslator<ChatChunk>,
    private readonly format: string,
    private readonly frame: EventFrame,
  ) {}

  get complete(): boolean {
    return this.inner.complete;
  }

  get finished(): boolean | undefined {
    return this.inner.finished;
  }

  get settled(): boolean | undefined {
    return this.inner.settled;
  }

  push(data: unknown, event?: string, text = ''): ChatChunk[] {
    const chunks = this.inner.push(data, event, text);
    const framed = this.frame(event === undefined ? { data: text } : { event, data: text });
    if (chunks.length === 0) return [keepUpstreamBytes(relayOnly(), framed, this.format)];
    for (let i = 0; i < chunks.length; i++) chunks[i] = keepUpstreamBytes(chunks[i]!, i === 0 ? framed : '', this.format);
    return chunks;
  }

  end(): ChatChunk[] {
    return (this.inner.end?.() ?? []).map((chunk) => keepUpstreamBytes(chunk, '', this.format));
  }

  billed(): Usage | undefined {
    return this.inner.billed?.();
  }
}
