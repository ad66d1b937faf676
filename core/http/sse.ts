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
export async function* readSse(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
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

  for await (const chunk of body) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let start = 0;
    for (;;) {
      let end = -1;
      let next = -1;
      for (let i = start; i < buffer.length; i++) {
        const c = buffer.charCodeAt(i);
        if (c === 10) {
          end = i;
          next = i + 1;
          break;
        }
        if (c === 13) {
          if (i + 1 >= buffer.length) break; // wait: a \n may follow in the next chunk
          end = i;
          next = buffer.charCodeAt(i + 1) === 10 ? i + 2 : i + 1;
          break;
        }
      }
      if (end === -1) break;
      const line = buffer.slice(start, end);
      start = next;
      const ready = takeLine(line);
      if (ready) yield ready;
    }
    buffer = buffer.slice(start);
  }
  buffer += decoder.decode();
  if (buffer.length > 0) {
    const ready = takeLine(buffer.replace(/\r$/, ''));
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
