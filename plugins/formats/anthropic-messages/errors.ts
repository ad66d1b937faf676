import { sseEvent, type ErrorView } from '../../../core/index.js';

/**
 * The gateway's error table in Anthropic's shape: `{"type":"error","error":{"type","message"}}`.
 * The status stays the table's; only the `type` name changes to the one Anthropic's clients
 * know (their SDKs pick an error class by status, and show the type).
 */
export function anthropicErrorType(view: Pick<ErrorView, 'status' | 'type'>): string {
  if (view.status === 404) return 'not_found_error';
  if (view.status === 413) return 'request_too_large';
  switch (view.type) {
    case 'authentication_error':
    case 'permission_error':
    case 'rate_limit_error':
    case 'overloaded_error':
    case 'timeout_error':
    case 'api_error':
      return view.type;
    case 'insufficient_quota':
      // A spent budget answers 429 like a rate limit; Anthropic's billing_error is a 402.
      return 'rate_limit_error';
    case 'invalid_request_error':
      return view.status >= 500 ? 'api_error' : 'invalid_request_error';
    default:
      return view.status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** Messages that name where a key goes: here x-api-key, which Claude clients send, or Bearer. */
const MESSAGES: Partial<Record<string, string>> = {
  missing_api_key: 'x-api-key header is required (or send the key as a Bearer token in the Authorization header).',
};

/**
 * A prompt too long for the back end's model, in the words Anthropic's API uses, which Claude
 * clients read to act on it (Claude Code compacts the conversation on "prompt is too long: N
 * tokens > M maximum", and lowers max_tokens on "input length and `max_tokens` exceed context
 * limit: I + O > L"), with the figures when the back end's message gives them (OpenAI's, vLLM's,
 * Google's wordings); else the gateway's message after the same words.
 */
export function promptTooLong(message: string): string {
  // Anthropic's own words (an Anthropic back end's, passed on): as they are.
  const own = /(prompt is too long: [\d,]+ tokens > [\d,]+ maximum|input length and `max_tokens` exceed context limit: [\d,]+ \+ [\d,]+ > [\d,]+)/i.exec(message)?.[1];
  if (own) return own;
  const number = (pattern: RegExp): string | undefined => pattern.exec(message)?.[1]?.replace(/,/g, '');
  const limit = number(/maximum context length (?:is|of) ([\d,]+)/i) ?? number(/maximum number of tokens allowed \(([\d,]+)\)/i) ?? number(/configured limit of ([\d,]+)/i);
  const input = number(/([\d,]+) (?:tokens )?(?:in|from) the (?:input )?messages/i) ?? number(/prompt contains at least ([\d,]+) input tokens/i);
  const output = number(/([\d,]+) (?:tokens )?(?:in|for) the completion/i) ?? number(/you requested ([\d,]+) output tokens/i);
  if (limit && input && output) return `input length and \`max_tokens\` exceed context limit: ${input} + ${output} > ${limit}`;
  const prompt = number(/(?:messages resulted in|input token count \(?)\s*([\d,]+)/i) ?? number(/you requested ([\d,]+) tokens/i);
  if (limit && prompt) return `prompt is too long: ${prompt} tokens > ${limit} maximum`;
  return `prompt is too long: ${message}`;
}

/** Anthropic's error body, with the request's id at its top level as Anthropic gives it. */
export function errorBody(view: ErrorView): unknown {
  const said = MESSAGES[view.code] ?? (view.code === 'context_length_exceeded' ? promptTooLong(view.message) : view.message);
  const error: Record<string, unknown> = { type: anthropicErrorType(view), message: said };
  // A request the API cannot thread: the SDK reads the code here, and goes on without a thread.
  if (view.vendor?.code === 'thread_unsupported_request') error.details = { error_code: 'thread_unsupported_request', unsupported: ['thread'] };
  return view.requestId ? { type: 'error', error, request_id: view.requestId } : { type: 'error', error };
}

/**
 * Anthropic answers an overloaded API with 529, and its SDKs raise a class of their own for it
 * (`OverloadedError`): a back end overloaded for now reaches these clients the same way.
 */
export function errorStatus(view: ErrorView): number {
  return view.code === 'upstream_overloaded' ? 529 : view.status;
}

/** A failure after the stream began: an `error` event, which the SDKs raise as an APIError. */
export function streamError(view: ErrorView): string {
  return sseEvent('error', JSON.stringify(errorBody(view)));
}
