import type { ErrorView } from '../../../core/index.js';
import { errorBody } from './errors.js';

/**
 * `:streamGenerateContent` without `?alt=sse`: Google's default, a JSON array whose responses
 * come as they are made (`[{…}`, then `,\r\n{…}` each, then `]`). Made here from the server-sent
 * events the format writes (or a Gemini back end's, relayed): the data of each event is one item.
 * A failure after the array began is its last item, Google's error body, and the array is closed,
 * so that what the client read is still JSON.
 */
export class JsonArrayStream {
  private opened = false;
  private closed = false;

  /** The items of `events` (server-sent events, whole or in pieces, text or bytes) as the array's text. */
  async *of(events: AsyncIterable<string | Uint8Array>): AsyncGenerator<string> {
    const decoder = new TextDecoder();
    let pending = '';
    for await (const piece of events) {
      pending += typeof piece === 'string' ? piece : decoder.decode(piece, { stream: true });
      for (;;) {
        const end = /\r\n\r\n|\n\n|\r\r/.exec(pending);
        if (!end) break;
        const data = dataOf(pending.slice(0, end.index));
        pending = pending.slice(end.index + end[0].length);
        if (data !== undefined) yield this.item(data);
      }
    }
    const last = dataOf(pending + decoder.decode());
    if (last !== undefined) yield this.item(last);
    this.closed = true;
    yield this.opened ? '\r\n]' : '[]';
  }

  /** A failure after the stream began, as the array's last item (nothing when the array was already closed). */
  error(view: ErrorView): string {
    if (this.closed) return '';
    this.closed = true;
    return `${this.item(JSON.stringify(errorBody(view)))}\r\n]`;
  }

  private item(json: string): string {
    const prefix = this.opened ? ',\r\n' : '[';
    this.opened = true;
    return prefix + json;
  }
}

/** The data of one server-sent event (its `data:` lines joined), or undefined for a comment or an empty event. */
function dataOf(event: string): string | undefined {
  let data: string | undefined;
  for (const line of event.split(/\r\n|\n|\r/)) {
    if (!line.startsWith('data:')) continue;
    const value = line.charCodeAt(5) === 0x20 ? line.slice(6) : line.slice(5);
    data = data === undefined ? value : `${data}\n${value}`;
  }
  return data === undefined || data.trim() === '' ? undefined : data;
}
