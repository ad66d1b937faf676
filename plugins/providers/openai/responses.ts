import type { Pool } from 'undici';
import {
  EVENT_STREAM,
  contextTooLong,
  failureBilled,
  GatewayError,
  keepUpstreamBytes,
  postJson,
  readJson,
  scrub,
  translateEvents,
  type Abortable,
  type OperationHandler,
  type ProviderCallContext,
  abortOf,
  mergeHeaders,
  upstreamError,
  upstreamErrorOf,
  usageOf,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { OPENAI_FORMAT, type Endpoint } from './api.js';
import { OpenAIEvents } from './events.js';

/**
 * The Responses API of a back end that has it (`responsesApi: true`): POST {basePath}/responses
 * and {basePath}/responses/compact with the body as the client sent it and the back end's model
 * name. Answers are parsed (for usage and conversation state) and their bytes kept, so an OpenAI
 * client gets exactly what the back end sent: the JSON body, and each stream event's data line.
 * `previous_response_id` goes up as it is when this back end made that response (the gateway's
 * conversation tap decides; see the openai-chat format's responses/history.ts).
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The events that end a Responses stream. */
const FINAL = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/**
 * The events of a back end's Responses stream, in its own shape. Its failures (a `type: error`
 * event, or `response.failed`) fail the call with the back end's message, scrubbed, as what its
 * code says: before the answer began the call can still go to another target; after, the client
 * gets the gateway's own `response.failed`, and the call is logged as failed, not as an answer.
 */
class ResponsesEvents extends OpenAIEvents<Json> {
  constructor(private readonly keys: readonly (string | undefined)[]) {
    super(keys, isObject, (event) => FINAL.has(event.type as string), (event) => typeof event.type !== 'string');
  }

  /**
   * `response.completed` (or `incomplete`) is the last event: the stream ends with it, as the
   * Responses API has no `[DONE]` to wait for, whether or not the back end ends its body.
   */
  get finished(): boolean {
    return this.complete;
  }

  override push(data: unknown, event?: string, text = ''): Json[] {
    if (isObject(data) && (data.type === 'error' || data.type === 'response.failed')) {
      const error = data.type === 'error' ? data : isObject(data.response) && isObject(data.response.error) ? data.response.error : {};
      const failure = streamFailure(error, typeof error.message === 'string' ? scrub(error.message, this.keys) : data.type);
      // A failed response carries its usage when the back end billed some: the call is charged it.
      const billed = data.type === 'response.failed' ? usageOf('responses', data) : undefined;
      if (billed) failureBilled(failure, billed);
      throw failure;
    }
    return super.push(data, event, text);
  }
}

/** Codes of a failed response that are the back end's own trouble (OpenAI's ResponseError codes); any other is the request's. */
const BACK_END_CODES = new Set(['server_error', 'vector_store_timeout']);

/**
 * What a failed response's `error` (or an `error` event) is: a rate limit (another target may
 * answer); the back end's own failure (`server_error`, or no code); or, for any other code
 * (`invalid_prompt`, an image it cannot read), the request's fault, a 400 with its message that
 * says nothing against the back end's health and is not tried elsewhere.
 */
function streamFailure(error: Json, message: string): GatewayError {
  const code = typeof error.code === 'string' && VENDOR_CODE.test(error.code) ? error.code : undefined;
  // The back end's code goes with the gateway's: a Responses client whose stream it ends reads
  // OpenAI's (see VendorError; the openai-chat format's responses/routes.ts).
  const vendor = code === undefined ? undefined : { format: OPENAI_FORMAT, code };
  if (code === 'rate_limit_exceeded') {
    // "Please try again in 1.5s" (or 20ms, 1m26.4s, 8h38m24s): the wait it names, as Retry-After
    // (whole seconds, a day at most), when the answer has not begun; once it has, in the words
    // the client's retry reads ("try again in 1.5s"), though not the rest of the back end's
    // message, which names the operator's organization and its limits.
    const seconds = namedWaitSeconds(message);
    const wait = namedWait(message);
    return new GatewayError('upstream_rate_limited', {
      retryable: true,
      ...(seconds !== undefined ? { headers: { 'retry-after': String(seconds) } } : {}),
      vendor: wait === undefined ? vendor : { ...vendor!, message: `The upstream service is rate limiting this gateway; try again in ${wait}.` },
    });
  }
  // The back end's account is out of credit: another target may answer; the client cannot help it.
  if (code === 'insufficient_quota') return new GatewayError('upstream_quota_exhausted', { retryable: true, headers: { 'x-should-retry': 'false' }, vendor });
  // Clients act on a prompt too long for the model (Codex compacts its conversation): its own code,
  // whether the back end gave that code or only said so.
  if (contextTooLong(code, message)) return new GatewayError('context_length_exceeded', { params: { detail: message }, param: typeof error.param === 'string' ? error.param : null });
  if (code === undefined || BACK_END_CODES.has(code)) return new GatewayError('upstream_error', { params: { detail: message }, vendor });
  return new GatewayError('upstream_bad_request', {
    params: { detail: `${message} (${code})` },
    param: typeof error.param === 'string' ? error.param : null,
    vendor,
  });
}

/** A code a back end's failure may hand on to a client: an identifier, not a text. */
const VENDOR_CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;

const WAIT = /try again in ((?:\d+h)?(?:\d+m(?!s))?(?:[\d.]+(?:ms|s))?)/i;

/** The wait an OpenAI rate-limit message names, as it wrote it ("1.5s", "20ms", "1m26.4s"). */
function namedWait(message: string): string | undefined {
  const match = WAIT.exec(message);
  return match && match[1] !== '' && namedWaitSeconds(message) !== undefined ? match[1] : undefined;
}

/** The wait an OpenAI rate-limit message names ("try again in 1h2m3.5s", "in 20ms"), in whole seconds (1 at least, a day at most). */
export function namedWaitSeconds(message: string): number | undefined {
  const match = WAIT.exec(message);
  if (!match || match[1] === '') return undefined;
  const part = (re: RegExp) => Number(re.exec(match[1]!)?.[1] ?? 0);
  const ms = part(/(\d+)h/) * 3_600_000 + part(/(\d+)m(?!s)/) * 60_000 + part(/([\d.]+)s/) * 1000 + part(/([\d.]+)ms/);
  if (!Number.isFinite(ms) || ms <= 0) return undefined;
  return Math.min(86_400, Math.max(1, Math.ceil(ms / 1000)));
}

/** An id a gateway made for a Responses item (see the openai-chat format's newId): `msg_sy` and 32 hex digits. */
const MADE_BY_A_GATEWAY = /^[a-z]+_sy[0-9a-f]{32}$/;

/**
 * A reasoning item a gateway made from another back end's answer: its `encrypted_content` a
 * tagged signature (`sy1.sig.`), or its id one a gateway gave (a chat back end's reasoning,
 * unsigned). OpenAI could verify neither, and refuses a reasoning item without its own id.
 */
function othersReasoning(item: unknown): boolean {
  if (!isObject(item) || item.type !== 'reasoning') return false;
  return (typeof item.encrypted_content === 'string' && item.encrypted_content.startsWith('sy1.sig.')) || (typeof item.id === 'string' && MADE_BY_A_GATEWAY.test(item.id));
}

/**
 * The body as OpenAI can read it, from a client that replays a conversation that began
 * elsewhere: the reasoning items a gateway made from another back end's answer left out, named
 * as a loss (OpenAI can read only the encrypted content it made), and the ids a gateway gave
 * items dropped (OpenAI refuses an input item whose id it never stored; the item is whole
 * without it). The same body when there is neither.
 */
function withoutOthersItems(body: Json, context: ProviderCallContext): Json {
  const input = body.input;
  if (!Array.isArray(input)) return body;
  const ours = (item: unknown) => isObject(item) && item.type !== 'item_reference' && typeof item.id === 'string' && MADE_BY_A_GATEWAY.test(item.id);
  const reasoning = input.some(othersReasoning);
  if (!reasoning && !input.some(ours)) return body;
  if (reasoning) Losses.of(context.request).add('reasoning.other_back_end');
  const kept: unknown[] = [];
  for (const item of input) {
    if (othersReasoning(item)) continue;
    if (ours(item)) {
      const { id: _id, ...rest } = item as Json;
      kept.push(rest);
    } else kept.push(item);
  }
  return { ...body, input: kept };
}

function responsesEvents(secrets: readonly (string | undefined)[]): OpenAIEvents<Json> {
  return new ResponsesEvents(secrets);
}

/**
 * The back end no longer has the previous response the call names (OpenAI keeps them for a
 * while; a back end restarted may keep none): the client gets the code it knows,
 * previous_response_not_found, rather than a generic upstream_bad_request, and another target,
 * one the gateway hands the history it kept, may still answer.
 */
function forgotten(status: number, text: string, previousId: unknown): GatewayError | undefined {
  if ((status !== 400 && status !== 404) || typeof previousId !== 'string') return undefined;
  if (upstreamErrorOf(text).code !== 'previous_response_not_found') return undefined;
  return new GatewayError('previous_response_not_found', { param: 'previous_response_id', params: { id: previousId }, retryable: true, upstreamStatus: status });
}

/**
 * How either operation calls the back end, `body` as the back end takes it: an error status is
 * a forgotten previous response (see above), else as any back end's.
 */
function sender(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]) {
  return (path: string, body: Json, signal: Abortable, forwardHeaders: Parameters<typeof mergeHeaders>[1], stream = false) =>
    postJson(pool, {
      path,
      headers: mergeHeaders(endpoint.headers, forwardHeaders),
      body,
      signal,
      secrets,
      stream,
      failure: (status, text, headers) => forgotten(status, text, body.previous_response_id) ?? upstreamError(status, text, headers, secrets),
    });
}

export function responsesHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'responses'> {
  const path = `${endpoint.basePath}/responses`;
  const send = sender(pool, endpoint, secrets);
  return async (request, context) => {
    const signal = abortOf(context);
    const body: Json = withoutOthersItems({ ...request.body, model: request.model }, context);
    if (request.stream) body.stream = true;
    if (body.background === true) {
      // A background response is read later through GET /v1/responses/{id}, which the gateway
      // does not serve (nor meter): it runs in the foreground instead, as the bridge runs it.
      delete body.background;
      Losses.of(context.request).add('background');
    }
    const response = await send(path, body, signal, request.forwardHeaders, request.stream);
    const type = String(response.headers['content-type'] ?? '');
    if (!request.stream || !EVENT_STREAM.test(type)) {
      const { parsed, bytes } = await readJson(response, signal);
      if (request.stream) throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      if (!isObject(parsed) || !Array.isArray(parsed.output)) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a response object' }, retryable: true });
      }
      return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
    }
    return { kind: 'stream', status: response.statusCode, chunks: translateEvents(response.body, responsesEvents(secrets), signal) };
  };
}

export function compactHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'compact'> {
  const path = `${endpoint.basePath}/responses/compact`;
  const send = sender(pool, endpoint, secrets);
  return async (request, context) => {
    const signal = abortOf(context);
    const body: Json = withoutOthersItems({ ...request.body, model: request.model }, context);
    // The same rules as /v1/responses: a previous response the back end no longer has is the
    // client's previous_response_not_found, and the next target compacts the gateway's copy.
    const response = await send(path, body, signal, request.forwardHeaders);
    const { parsed, bytes } = await readJson(response, signal);
    if (!isObject(parsed) || !Array.isArray(parsed.output)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a compaction' }, retryable: true });
    }
    return { kind: 'json', status: response.statusCode, body: keepUpstreamBytes(parsed, bytes, OPENAI_FORMAT) };
  };
}
