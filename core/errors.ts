import { printableLines } from './printable.js';

/**
 * Every error the gateway can answer with, in one table.
 *
 * A code names one situation. Its row gives the HTTP status, the error `type` a client sees in
 * the default error body, and a message template whose `{name}` slots are filled from the
 * params given when the error is raised. Format plugins render the same code in their own
 * error shape; they never invent statuses of their own.
 */
export interface ErrorSpec {
  readonly status: number;
  readonly type: ErrorType;
  readonly message: string;
}

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'insufficient_quota'
  | 'api_error'
  | 'overloaded_error'
  | 'timeout_error';

export const ERRORS = {
  // request shape
  invalid_json: { status: 400, type: 'invalid_request_error', message: 'We could not parse the JSON body of your request: {detail}' },
  invalid_request: { status: 400, type: 'invalid_request_error', message: '{detail}' },
  invalid_value: { status: 400, type: 'invalid_request_error', message: "Invalid value for '{param}': {detail}" },
  missing_required_parameter: { status: 400, type: 'invalid_request_error', message: "Missing required parameter: '{param}'." },
  unknown_parameter: { status: 400, type: 'invalid_request_error', message: "Unrecognized request argument supplied: '{param}'." },
  invalid_type: { status: 400, type: 'invalid_request_error', message: "Invalid type for '{param}': {detail}" },
  json_too_deep: { status: 400, type: 'invalid_request_error', message: 'The JSON body is nested deeper than {limit} levels.' },
  forbidden_key: { status: 400, type: 'invalid_request_error', message: "The request body contains the key '{key}', which is not allowed." },
  headers_too_large: { status: 431, type: 'invalid_request_error', message: 'The request headers are larger than the gateway accepts.' },
  malformed_http: { status: 400, type: 'invalid_request_error', message: 'The request is not valid HTTP (a header holds a character HTTP does not allow, or the framing is broken).' },
  body_too_large: { status: 413, type: 'invalid_request_error', message: 'The request body is larger than the limit of {limit} bytes.' },
  expectation_failed: { status: 417, type: 'invalid_request_error', message: 'The gateway cannot meet the request\'s Expect header ({expect}); only 100-continue is supported.' },
  body_timeout: { status: 408, type: 'invalid_request_error', message: 'The request body stopped arriving: nothing came for {seconds} s.' },
  headers_timeout: { status: 408, type: 'invalid_request_error', message: 'The request headers did not arrive in time.' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error', message: "Unsupported Content-Type '{contentType}'; this endpoint accepts {accepted}." },
  unsupported_content_encoding: { status: 415, type: 'invalid_request_error', message: "Unsupported Content-Encoding '{encoding}'; the gateway reads a body compressed with gzip, deflate or br, or not compressed." },
  not_found: { status: 404, type: 'invalid_request_error', message: 'Invalid URL ({method} {path})' },
  model_not_found: { status: 404, type: 'invalid_request_error', message: 'The model `{model}` does not exist or you do not have access to it.' },
  operation_not_supported: { status: 400, type: 'invalid_request_error', message: 'The model `{model}` does not support {operation}.' },
  previous_response_not_found: { status: 400, type: 'invalid_request_error', message: "Previous response with id '{id}' not found." },
  task_not_found: { status: 404, type: 'invalid_request_error', message: "No task with the id '{id}' exists." },
  range_not_satisfiable: { status: 416, type: 'invalid_request_error', message: 'The requested range is not within the video ({detail}).' },

  // keys
  missing_api_key: { status: 401, type: 'authentication_error', message: 'You did not provide an API key. Send it as a Bearer token in the Authorization header.' },
  invalid_api_key: { status: 401, type: 'authentication_error', message: 'Incorrect API key provided: {keyPrefix}' },
  expired_api_key: { status: 401, type: 'authentication_error', message: 'This API key has expired.' },
  revoked_api_key: { status: 401, type: 'authentication_error', message: 'This API key has been revoked.' },
  forbidden: { status: 403, type: 'permission_error', message: '{detail}' },
  model_not_allowed: { status: 403, type: 'permission_error', message: 'This key may not use the model `{model}`.' },
  admin_key_required: { status: 401, type: 'authentication_error', message: 'This route needs the admin key (auth.adminKey) as a Bearer token.' },
  admin_disabled: { status: 403, type: 'permission_error', message: 'The admin API is off: set auth.adminKey to turn it on.' },
  open_to_web_pages: { status: 403, type: 'permission_error', message: 'A call from a web page (it has an Origin header) needs an API key while the gateway has none: create one (switchyard keys create) and send it.' },
  invalid_cursor: { status: 400, type: 'invalid_request_error', message: 'The cursor is not one this gateway gave out.' },
  key_not_found: { status: 404, type: 'invalid_request_error', message: "No API key has the id or name '{key}'." },

  // limits
  rate_limit_exceeded: { status: 429, type: 'rate_limit_error', message: 'Rate limit reached for {limit}: {detail}' },
  insufficient_quota: { status: 429, type: 'insufficient_quota', message: "This key's budget does not cover this call: {detail}" },

  // upstream
  upstream_error: { status: 502, type: 'api_error', message: 'The upstream service failed to answer: {detail}' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error', message: 'The upstream service rejected the request: {detail}' },
  upstream_bad_request: { status: 400, type: 'invalid_request_error', message: 'The upstream service rejected the request: {detail}' },
  upstream_rate_limited: { status: 429, type: 'rate_limit_error', message: 'The upstream service is rate limiting this gateway; try again later.' },
  upstream_quota_exhausted: { status: 429, type: 'insufficient_quota', message: "The upstream service's account has no quota left (its plan or billing); the gateway's operator must resolve it." },
  upstream_overloaded: { status: 503, type: 'overloaded_error', message: 'The upstream service is overloaded ({detail}); try again later.' },
  upstream_timeout: { status: 504, type: 'timeout_error', message: 'The upstream service did not answer in time ({detail}).' },
  no_upstream_available: { status: 503, type: 'overloaded_error', message: 'No back end can serve `{model}` right now.' },

  loop_detected: { status: 508, type: 'api_error', message: 'The request looped back into the gateway ({detail}); check the providers\' baseUrl.' },

  // gateway
  gateway_overloaded: { status: 503, type: 'overloaded_error', message: 'The gateway is holding as many large answers as it may at once (server.answerMemoryLimit, {limit} bytes); try again shortly.' },
  store_busy: { status: 503, type: 'overloaded_error', message: "The gateway's store is locked by another process (a maintenance command, say); try again shortly." },
  store_unavailable: { status: 503, type: 'api_error', message: "The gateway's store cannot be read or written now (its disk full or read-only, or an I/O error); try again later." },
  gateway_shutdown: { status: 503, type: 'api_error', message: 'The gateway shut down before the answer ended (server.shutdownTimeoutMs).' },
  client_closed_request: { status: 499, type: 'invalid_request_error', message: 'The client closed the request before the answer was ready.' },
  internal_error: { status: 500, type: 'api_error', message: 'The gateway hit an internal error (request {requestId}).' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export type ErrorParams = Record<string, string | number | undefined>;

export interface GatewayErrorOptions {
  /** Values for the `{slot}`s of the message template. */
  params?: ErrorParams;
  /** The request field the error is about, as a client would name it (`messages[0].role`). */
  param?: string | null;
  /** Extra response headers (Retry-After and friends). */
  headers?: Record<string, string>;
  /** Another back end may succeed where this one failed (the call may be retried elsewhere). */
  retryable?: boolean;
  /** The HTTP status the back end answered with, for the operator's attempt chain. */
  upstreamStatus?: number;
  /** The back end's own error, for clients of its wire format (see VendorError). */
  vendor?: VendorError;
  cause?: unknown;
}

/**
 * A back end's own error as its vendor's clients know it, carried beside the gateway's code: a
 * format whose name is `format` may show its client this code (and message) where the gateway's
 * would say less to it, as a stream's last event, which has no status or header to say more
 * with. The gateway's code stays the call's (logs, the request log, the HTTP status).
 */
export interface VendorError {
  /** The wire format whose clients know `code` (a format plugin's name, as keepUpstreamBytes names one). */
  readonly format: string;
  /** The vendor's code (OpenAI's `rate_limit_exceeded`, `insufficient_quota`, `invalid_prompt`). */
  readonly code: string;
  /** What to tell such a client instead of the gateway's message (scrubbed); absent: the gateway's message. */
  readonly message?: string;
}

/** Params that hold a name the client chose (a model, an id, a path): echoed at most this long. */
const ECHOED = new Set(['model', 'id', 'path', 'key']);
const ECHO_LIMIT = 256;

function fill(template: string, params: ErrorParams): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) return '';
    // What a client wrote, echoed: a control, bidi or invisible character escaped (as `\u202e`),
    // so that a message read in a terminal or a log cannot be made to show something else; a
    // tab or a line break (a back end's message has them) as it is. Cut before escaping.
    const raw = String(value);
    const text = ECHOED.has(name) && raw.length > ECHO_LIMIT ? `${raw.slice(0, ECHO_LIMIT)}…` : raw;
    return printableLines(text);
  });
}

const BRAND = Symbol.for('switchyard.GatewayError');

/** The one error class the pipeline throws; format plugins render it in their own shape. */
export class GatewayError extends Error {
  /** Recognised by brand, so an error made by a second copy of this package still counts. */
  readonly [BRAND] = true;
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  readonly retryable: boolean;
  readonly upstreamStatus: number | undefined;
  readonly vendor: VendorError | undefined;

  constructor(code: ErrorCode, options: GatewayErrorOptions = {}) {
    const spec: ErrorSpec | undefined = Object.hasOwn(ERRORS, code) ? ERRORS[code] : undefined;
    // A plugin written in JavaScript can name a code the table lacks: say which, where it is thrown.
    if (!spec) throw new TypeError(`GatewayError: unknown error code '${String(code)}' (the codes are in docs/errors.md)`);
    const params = { ...options.params, param: options.param ?? options.params?.param };
    super(fill(spec.message, params), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.status = spec.status;
    this.type = spec.type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
    this.retryable = options.retryable ?? false;
    this.upstreamStatus = options.upstreamStatus;
    this.vendor = options.vendor;
  }
}

/**
 * `error` about the field its client calls something else, by `names` (canonical name -> the
 * client's: CallRoute.clientParams): the same error with that name in its `param` and wherever
 * its message quotes the field ('dimensions'); a part of the field (`input[2]`, `input.x`) keeps
 * its part. Any other error as it is.
 */
export function withClientParam(error: unknown, names: Readonly<Record<string, string>>): unknown {
  if (!isGatewayError(error) || !error.param) return error;
  const param = error.param;
  const field = /^[^[.]+/.exec(param)?.[0] ?? param;
  if (!Object.hasOwn(names, field)) return error;
  const renamed = names[field]! + param.slice(field.length);
  const out = new GatewayError(error.code, {
    param: renamed,
    headers: error.headers,
    retryable: error.retryable,
    upstreamStatus: error.upstreamStatus,
    vendor: error.vendor,
    cause: error.cause,
  });
  out.message = error.message.split(`'${param}'`).join(`'${renamed}'`);
  return out;
}

export function isGatewayError(value: unknown): value is GatewayError {
  if (value instanceof GatewayError) return true;
  if (!value || typeof value !== 'object' || (value as Record<symbol, unknown>)[BRAND] !== true) return false;
  const code = (value as { code?: unknown }).code;
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

/** The shape every format's error renderer receives. */
export interface ErrorView {
  status: number;
  code: ErrorCode;
  type: ErrorType;
  message: string;
  param: string | null;
  /** The request's id, for formats whose error bodies carry it. */
  requestId?: string;
  /** Seconds to wait before trying again, when the answer says (its Retry-After), for formats whose error bodies carry it. */
  retryAfterSeconds?: number;
  /** The back end's own error, for a format of its vendor's (see VendorError). */
  vendor?: VendorError;
}

export function toErrorView(error: GatewayError, requestId?: string): ErrorView {
  const view: ErrorView = { status: error.status, code: error.code, type: error.type, message: error.message, param: error.param, requestId };
  const retryAfter = error.headers['retry-after'];
  if (retryAfter !== undefined && /^\d+$/.test(retryAfter)) view.retryAfterSeconds = Number(retryAfter);
  if (error.vendor) view.vendor = error.vendor;
  return view;
}

/**
 * The default error body: `{"error":{"message","type","param","code"}}`. Used by every format
 * that does not bring a renderer of its own, and for paths no format owns.
 */
export function defaultErrorBody(view: ErrorView): unknown {
  return { error: { message: view.message, type: view.type, param: view.param, code: view.code } };
}
