import { GatewayError, keepUpstreamBytes, scrub, UnparsedEvent, type EventTranslator } from '../../../core/index.js';
import { OPENAI_FORMAT } from './api.js';

const MALFORMED = 'the back end sent a malformed stream event';

/**
 * An OpenAI-style event stream (chat, completions, responses) read by core's translateEvents:
 * each event's data is one object of the expected shape, kept with its text so that a client of
 * the same format gets the event as it came; `[DONE]` ends it; an error event (an object with
 * `error` where the protocol has none) is an upstream_error with the back end's message,
 * scrubbed; anything else is a malformed stream. `ends` says which chunk shows the answer
 * finished: a stream that stops before one was cut.
 *
 * With `relayUnparsed` (the client speaks this format and its events go out as they came), an
 * event whose text shows it is only a piece of the answer (see isPlainDelta) is handed on as an
 * UnparsedEvent: parsed only if a tap or the client's options need its fields.
 */
export class OpenAIEvents<T extends object> implements EventTranslator<T> {
  readonly doneText = '[DONE]';
  complete = false;
  private readonly read = (text: string): T => this.checked(parseData(text));

  constructor(
    private readonly secrets: readonly (string | undefined)[],
    private readonly isShape: (value: unknown) => value is T,
    private readonly ends: (chunk: T) => boolean,
    /** Whether an object with `error` is an error event (default: always). */
    private readonly isError: (value: Record<string, unknown>) => boolean = () => true,
    private readonly relayUnparsed = false,
  ) {}

  push(data: unknown, _event?: string, text = ''): T[] {
    const chunk = this.checked(data);
    if (!this.complete && this.ends(chunk)) this.complete = true;
    return [keepUpstreamBytes(chunk, text, OPENAI_FORMAT)];
  }

  unparsed(text: string): T | undefined {
    if (!this.relayUnparsed || !isPlainDelta(text)) return undefined;
    // The stream's element type is the canonical chunk; the pipeline parses this event before
    // anything but the taps and format that asked for unparsed events reads it (see UnparsedEvent).
    return new UnparsedEvent(text, OPENAI_FORMAT, this.read) as unknown as T;
  }

  /** The event's data as a chunk of the expected shape; an error event or another shape fails the stream. */
  private checked(data: unknown): T {
    if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
      const error = (data as { error?: { message?: unknown } }).error;
      if (error && this.isError(data as Record<string, unknown>)) {
        const message = typeof error.message === 'string' ? scrub(error.message, this.secrets) : 'stream error';
        throw new GatewayError('upstream_error', { params: { detail: message } });
      }
    }
    if (!this.isShape(data)) throw new GatewayError('upstream_error', { params: { detail: MALFORMED } });
    return data;
  }
}

function parseData(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: MALFORMED } });
  }
}

/**
 * A field the gateway acts on, as a key in an event's text: `"usage"`, `"finish_reason"` or
 * `"error"` followed by anything but `:null`. Inside a JSON string a quote is escaped, so the
 * pattern cannot match the answer's own text. One pass of a compiled expression: a fifth of what
 * parsing a 300-byte event costs.
 */
const ACTED_ON = /"(?:usage|finish_reason|error)"(?!:null)/;

/**
 * Whether an event's text can only be a piece of the answer, read without parsing it: an object
 * on one line in which `"usage"`, `"finish_reason"` and `"error"`, wherever they appear, are
 * null. A text that is not so, or is spaced otherwise than OpenAI spaces it, is parsed: the test
 * errs only towards parsing. (A back end that spelt a key with `\u` escapes would have it read as
 * an unparsed piece; none does, and the field would only be metering's, which falls back to
 * counting what was delivered.)
 */
export function isPlainDelta(text: string): boolean {
  return text.charCodeAt(0) === 0x7b && text.charCodeAt(text.length - 1) === 0x7d && text.indexOf('\n') === -1 && !ACTED_ON.test(text);
}

/** Whether any choice of a chat or completion chunk has a finish reason. */
export function finishesAChoice(chunk: { choices?: ReadonlyArray<{ finish_reason?: unknown }> }): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.some((choice) => Boolean(choice.finish_reason));
}
