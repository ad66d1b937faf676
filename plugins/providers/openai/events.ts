import { GatewayError, keepUpstreamBytes, scrub, type EventTranslator } from '../../../core/index.js';
import { OPENAI_FORMAT } from './api.js';

/**
 * An OpenAI-style event stream (chat, completions, responses) read by core's translateEvents:
 * each event's data is one object of the expected shape, kept with its text so that a client of
 * the same format gets the event as it came; `[DONE]` ends it; an error event (an object with
 * `error` where the protocol has none) is an upstream_error with the back end's message,
 * scrubbed; anything else is a malformed stream. `ends` says which chunk shows the answer
 * finished: a stream that stops before one was cut.
 */
export class OpenAIEvents<T extends object> implements EventTranslator<T> {
  readonly doneText = '[DONE]';
  complete = false;

  constructor(
    private readonly secrets: readonly (string | undefined)[],
    private readonly isShape: (value: unknown) => value is T,
    private readonly ends: (chunk: T) => boolean,
    /** Whether an object with `error` is an error event (default: always). */
    private readonly isError: (value: Record<string, unknown>) => boolean = () => true,
  ) {}

  push(data: unknown, _event?: string, text = ''): T[] {
    if (data !== null && typeof data === 'object' && !Array.isArray(data)) {
      const error = (data as { error?: { message?: unknown } }).error;
      if (error && this.isError(data as Record<string, unknown>)) {
        const message = typeof error.message === 'string' ? scrub(error.message, this.secrets) : 'stream error';
        throw new GatewayError('upstream_error', { params: { detail: message } });
      }
    }
    if (!this.isShape(data)) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
    if (!this.complete && this.ends(data)) this.complete = true;
    return [keepUpstreamBytes(data, text, OPENAI_FORMAT)];
  }
}

/** Whether any choice of a chat or completion chunk has a finish reason. */
export function finishesAChoice(chunk: { choices?: ReadonlyArray<{ finish_reason?: unknown }> }): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.some((choice) => Boolean(choice.finish_reason));
}
