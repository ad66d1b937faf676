import type { ErrorView } from '../../../core/index.js';
import { dataEvent } from './stream.js';

/**
 * The gateway's error table in Gemini's shape: `{"error":{"code","message","status"}}`, where
 * `code` is the HTTP status (the table's, unchanged) and `status` the google.rpc code name.
 */
export function googleStatus(view: Pick<ErrorView, 'status' | 'type'>): string {
  switch (view.status) {
    case 400:
    case 413:
    case 415:
    case 422:
    case 431:
      return 'INVALID_ARGUMENT';
    case 401:
      return 'UNAUTHENTICATED';
    case 403:
      return 'PERMISSION_DENIED';
    case 404:
      return 'NOT_FOUND';
    case 408:
    case 504:
      return 'DEADLINE_EXCEEDED';
    case 429:
      return 'RESOURCE_EXHAUSTED';
    case 499:
      return 'CANCELLED';
    case 502:
    case 503:
      return 'UNAVAILABLE';
    default:
      return view.status >= 500 ? 'INTERNAL' : 'INVALID_ARGUMENT';
  }
}

/** Messages that name where a key goes in this format. */
const MESSAGES: Partial<Record<string, string>> = {
  missing_api_key: 'Method doesn\'t allow unregistered callers. Send an API key in the x-goog-api-key header, the key query parameter or as a Bearer token.',
};

/**
 * The error body. A 429 that says when to try again carries it as Google's does, a
 * `google.rpc.RetryInfo` detail (`retryDelay: "<n>s"`), which Google's clients read (Gemini CLI
 * waits that long before it tries again); one that does not (a spent budget: waiting does not
 * help) carries none.
 */
export function errorBody(view: ErrorView): unknown {
  // Google's errors have no `param` of their own: a field the message does not name leads it, as Google's name theirs.
  const message = MESSAGES[view.code] ?? view.message;
  const error: Record<string, unknown> = { code: view.status, message: view.param && !message.includes(view.param) ? `${view.param}: ${message}` : message, status: googleStatus(view) };
  if (view.status === 429 && view.retryAfterSeconds !== undefined) {
    error.details = [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${view.retryAfterSeconds}s` }];
  }
  return { error };
}

/** A failure after the stream began: a last `data:` event with the error body (the SDK raises it). */
export function streamError(view: ErrorView): string {
  return dataEvent(errorBody(view));
}
