import { StringDecoder } from 'node:string_decoder';

/** A Content-Type that says the body is a stream of server-sent events (media types are case-insensitive: `Text/Event-Stream` too). */
export const EVENT_STREAM = /text\/event-stream/i;
/** A line, or an event's data over several lines, longer than the reader accepts: a broken or hostile stream. */
export class SseLineTooLong extends Error {
  constructor(
    readonly limit: number,
    readonly what: 'line' | 'event' = 'line',
  ) {
    super(`a stream ${what} is longer than ${limit} characters`);
  }
}

/** One server-sent event. */
export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

/**
 * A server-sent events parser fed one piece of the byte stream at a time, returning the events
 * each piece completes (synchronously: no promise per event). Follows the WHATWG rules: `\n`,
 * `\r\n` or `\r` line ends, multi-line `data:`, comments. A line longer than `maxLineLength`, or
 * an event whose data lines together are (one event of many `data:` lines and no blank line, which
 * would otherwise be held whole), throws SseLineTooLong. Linear in the input, however it is split.
 */
export class SseParser {
  // node's StringDecoder: a fifth of TextDecoder's time per piece, the same handling of a
  // character split between two pieces and of bytes that are not UTF-8 (U+FFFD).
  private readonly decoder = new StringDecoder('utf8');
  /** Whether the stream's first text is still to come (a byte-order mark there is dropped, as TextDecoder did). */
  private first = true;
  private data: string[] = [];
  /** The characters of `data` so far, with the line ends that join them. */
  private dataLength = 0;
  private event: string | undefined;
  private id: string | undefined;
  private sawField = false;
  // The part of a line seen so far, kept as pieces: a long line costs linear time, not quadratic.
  private pending: string[] = [];
  private pendingLength = 0;
  private lastWasCr = false;

  constructor(private readonly maxLineLength = 16 * 1024 * 1024) {}

  /** The events completed by this piece of the stream. */
  push(chunk: Uint8Array | string): SseEvent[] {
    let text = typeof chunk === 'string' ? chunk : this.decoder.write(chunk as Buffer);
    if (this.first && text.length > 0) {
      this.first = false;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    const out: SseEvent[] = [];
    let start = 0;
    // A \n right after a \r that ended the previous piece belongs to that line end.
    if (this.lastWasCr && text.charCodeAt(0) === 10) start = 1;
    this.lastWasCr = false;
    // Line ends found with indexOf (native) rather than a test of every character.
    let lf = text.indexOf('\n', start);
    let cr = text.indexOf('\r', start);
    while (lf !== -1 || cr !== -1) {
      let i = cr === -1 || (lf !== -1 && lf < cr) ? lf : cr;
      const ready = this.takeLine(this.lineOf(text.slice(start, i)));
      if (ready) out.push(ready);
      if (i === cr) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else this.lastWasCr = true;
      }
      start = i + 1;
      if (lf !== -1 && lf < start) lf = text.indexOf('\n', start);
      if (cr !== -1 && cr < start) cr = text.indexOf('\r', start);
    }
    if (start < text.length) {
      this.pending.push(text.slice(start));
      this.pendingLength += text.length - start;
      if (this.pendingLength > this.maxLineLength) throw new SseLineTooLong(this.maxLineLength);
    }
    return out;
  }

  /** The stream ended: the events its last, unterminated lines complete. */
  end(): SseEvent[] {
    const out: SseEvent[] = [];
    const rest = this.lineOf(this.decoder.end());
    if (rest.length > 0) {
      const ready = this.takeLine(rest);
      if (ready) out.push(ready);
    }
    const last = this.flush();
    if (last) out.push(last);
    return out;
  }

  private lineOf(tail: string): string {
    if (this.pending.length === 0) return tail;
    const line = this.pending.join('') + tail;
    this.pending = [];
    this.pendingLength = 0;
    return line;
  }

  private flush(): SseEvent | undefined {
    if (!this.sawField) return undefined;
    const hadData = this.data.length > 0;
    const out: SseEvent = { data: this.data.length === 1 ? this.data[0]! : this.data.join('\n') };
    if (this.event !== undefined) out.event = this.event;
    if (this.id !== undefined) out.id = this.id;
    this.data = [];
    this.dataLength = 0;
    this.event = undefined;
    this.sawField = false;
    // An event without data is not dispatched (WHATWG event-stream rules).
    return hadData ? out : undefined;
  }

  private takeLine(line: string): SseEvent | undefined {
    if (line === '') return this.flush();
    if (line.charCodeAt(0) === 58 /* : */) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case 'data':
        this.dataLength += value.length + 1;
        if (this.dataLength > this.maxLineLength) throw new SseLineTooLong(this.maxLineLength, 'event');
        this.data.push(value);
        this.sawField = true;
        break;
      case 'event':
        this.event = value;
        this.sawField = true;
        break;
      case 'id':
        this.id = value;
        break;
      default:
        break;
    }
    return undefined;
  }
}

/**
 * Read server-sent events from a byte stream as they arrive (never buffering the whole stream).
 * See SseParser for the rules.
 */
export async function* readSse(body: AsyncIterable<Uint8Array | string>, maxLineLength = 16 * 1024 * 1024): AsyncGenerator<SseEvent> {
  const parser = new SseParser(maxLineLength);
  for await (const chunk of body) {
    const events = parser.push(chunk);
    for (let i = 0; i < events.length; i++) yield events[i]!;
  }
  yield* parser.end();
}

/** `data: <json>\n\n` */
export function sseData(data: string): string {
  return `data: ${data}\n\n`;
}

/** `event: <name>\ndata: <json>\n\n` */
export function sseEvent(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}
