/** A line longer than the reader accepts: a broken or hostile stream. */
export class SseLineTooLong extends Error {
  constructor(readonly limit: number) {
    super(`a stream line is longer than ${limit} characters`);
  }
}

/** One server-sent event. */
export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

/**
 * Read server-sent events from a byte stream as they arrive (never buffering the whole stream).
 * Follows the WHATWG rules: `\n`, `\r\n` or `\r` line ends, multi-line `data:`, comments.
 */
export async function* readSse(body: AsyncIterable<Uint8Array | string>, maxLineLength = 16 * 1024 * 1024): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let data: string[] = [];
  let event: string | undefined;
  let id: string | undefined;
  let sawField = false;

  const flush = (): SseEvent | undefined => {
    if (!sawField) return undefined;
    const hadData = data.length > 0;
    const out: SseEvent = { data: data.join('\n') };
    if (event !== undefined) out.event = event;
    if (id !== undefined) out.id = id;
    data = [];
    event = undefined;
    sawField = false;
    // An event without data is not dispatched (WHATWG event-stream rules).
    return hadData ? out : undefined;
  };

  const takeLine = (line: string): SseEvent | undefined => {
    if (line === '') return flush();
    if (line.charCodeAt(0) === 58 /* : */) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (field) {
      case 'data':
        data.push(value);
        sawField = true;
        break;
      case 'event':
        event = value;
        sawField = true;
        break;
      case 'id':
        id = value;
        break;
      default:
        break;
    }
    return undefined;
  };

  // The part of a line seen so far, kept as pieces: a long line costs linear time, not quadratic.
  let pending: string[] = [];
  let pendingLength = 0;
  let lastWasCr = false;
  const lineOf = (tail: string): string => {
    const line = pending.length ? pending.join('') + tail : tail;
    pending = [];
    pendingLength = 0;
    return line;
  };

  for await (const chunk of body) {
    const text = typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let start = 0;
    // A \n right after a \r that ended the previous chunk belongs to that line end.
    if (lastWasCr && text.charCodeAt(0) === 10) start = 1;
    lastWasCr = false;
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const ready = takeLine(lineOf(text.slice(start, i)));
      if (ready) yield ready;
      if (c === 13) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else lastWasCr = true;
      }
      start = i + 1;
    }
    if (start < text.length) {
      pending.push(text.slice(start));
      pendingLength += text.length - start;
      if (pendingLength > maxLineLength) throw new SseLineTooLong(maxLineLength);
    }
  }
  const rest = lineOf(decoder.decode());
  if (rest.length > 0) {
    const ready = takeLine(rest);
    if (ready) yield ready;
  }
  const last = flush();
  if (last) yield last;
}

/** `data: <json>\n\n` */
export function sseData(data: string): string {
  return `data: ${data}\n\n`;
}

/** `event: <name>\ndata: <json>\n\n` */
export function sseEvent(event: string, data: string): string {
  return `event: ${event}\ndata: ${data}\n\n`;
}
