import { contextTooLong, GatewayError, keepUpstreamBytes, outOfCredit, scrub, upstreamError, type EventTranslator } from '../../../core/index.js';
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
        // An error of a kind the status of a JSON answer would say (a rate limit, an account out
        // of credit, an overload, a prompt too long) is that error, as upstreamError makes it: the
        // client hears what its SDK waits out or acts on, and before any content the next target
        // is tried for what is worth trying elsewhere.
        const status = statusOfStreamError(error as StreamError);
        if (status !== undefined) throw upstreamError(status, JSON.stringify(data), {}, this.secrets);
        const message = typeof error.message === 'string' ? scrub(error.message, this.secrets) : 'stream error';
        throw new GatewayError('upstream_error', { params: { detail: message } });
      }
    }
    if (!this.isShape(data)) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event' } });
    if (!this.complete && this.ends(data)) this.complete = true;
    return [keepUpstreamBytes(data, text, OPENAI_FORMAT)];
  }
}

interface StreamError {
  message?: unknown;
  type?: unknown;
  code?: unknown;
  status?: unknown;
}

/**
 * The HTTP status an error event stands for when it is a rate limit, an account out of credit, an
 * overload or a prompt too long, read from its code, type or status as OpenAI and the servers
 * that speak its API (vLLM, LiteLLM, OpenRouter) word them; undefined for any other.
 */
export function statusOfStreamError(error: StreamError): number | undefined {
  const words = [error.code, error.type, error.status].filter((w): w is string => typeof w === 'string').map((w) => w.toLowerCase());
  // A status as a number, or as its digits (LiteLLM's `"code": "429"`).
  const numbers = [error.code, error.status].map((n) => (typeof n === 'string' && /^\d{3}$/.test(n) ? Number(n) : n)).filter((n): n is number => typeof n === 'number');
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  // As an answer's body is read for it (upstreamError): the code or type, or the vendors' wordings.
  if (outOfCredit({ code: text(error.code)?.toLowerCase(), type: text(error.type)?.toLowerCase(), message: text(error.message) })) return 402;
  if (numbers.includes(429) || words.some((w) => w.includes('rate_limit') || w === 'resource_exhausted' || w === 'too_many_requests')) return 429;
  if (numbers.includes(503) || numbers.includes(529) || words.some((w) => w.includes('overloaded') || w === 'unavailable' || w === 'service_unavailable')) return 503;
  if (contextTooLong(text(error.code), text(error.message))) return 400;
  // Any other failure (a server error) stays an upstream_error that keeps its (scrubbed) words.
  return undefined;
}

/** Whether any choice of a chat or completion chunk has a finish reason. */
export function finishesAChoice(chunk: { choices?: ReadonlyArray<{ finish_reason?: unknown }> }): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.some((choice) => Boolean(choice.finish_reason));
}
