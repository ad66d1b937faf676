import type { Pool } from 'undici';
import {
  EVENT_STREAM,
  GatewayError,
  keepUpstreamBytes,
  markSentAsIs,
  postJson,
  readJson,
  translateEvents,
  upstreamError,
  withMembers,
  type OperationHandler,
  type RequestContext,
  type UpstreamRequest,
  type UpstreamResponse,
  mergeHeaders,
  ToolNames,
  MESSAGES_TOOL_NAMES,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import type { Endpoint } from './api.js';
import { forAnthropic, fromMessagesResponse, isMessage, toMessagesRequest } from './mapping.js';
import { anthropicFrame, relayedStream } from './relay.js';
import { MessageStreamTranslator } from './stream.js';

/** The client wire format this back end speaks: a call in it goes up as the client sent it. */
export const MESSAGES_FORMAT = 'anthropic-messages';

/** An upstream's failed answer as the gateway's error (Anthropic's 529, overloaded, as core maps it: upstream_overloaded). */
function failure(status: number, body: string, headers: Record<string, string | string[] | undefined>, secrets: readonly (string | undefined)[]): GatewayError {
  const id = requestIdOf(headers);
  const error = upstreamError(status, body, headers, secrets);
  // Anthropic's request-id is no secret and is what its support asks for: the operator (and the
  // client) can quote it.
  if (id) error.message = `${error.message} (request-id ${id})`;
  return error;
}

/** Anthropic's `request-id` response header, if it looks like one (letters, digits, `_`, `-`). */
export function requestIdOf(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['request-id'];
  return typeof value === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(value) ? value : undefined;
}

/**
 * Chat against Anthropic's Messages API: the canonical request is translated to a messages body
 * (POST {base}/v1/messages with x-api-key and anthropic-version), the answer back to a canonical
 * chat answer, and a stream event by event into canonical chunks (a stream always ends with a
 * usage chunk; the openai-chat format hides it from a client that did not ask).
 */
export function chatHandler(
  pool: Pool,
  endpoint: Endpoint,
  secrets: readonly (string | undefined)[],
  defaultMaxTokens: number,
): OperationHandler<'chat'> {
  return async (request, { signal, request: ctx }) => {
    if (request.source?.format === MESSAGES_FORMAT) return passThrough(pool, endpoint, secrets, request, signal, ctx);
    // Tool names the Messages API refuses (a Gemini client's `files.read`) go up as names it takes.
    const names = ToolNames.of(request.body, MESSAGES_TOOL_NAMES);
    const translated = toMessagesRequest(names ? names.request(request.body) : request.body, { model: request.model, stream: request.stream, defaultMaxTokens });
    const response = await postJson(pool, {
      path: endpoint.messagesPath,
      headers: mergeHeaders(endpoint.headers, request.forwardHeaders),
      body: translated.value,
      signal,
      stream: request.stream,
      secrets,
      failure: (status, body, headers) => failure(status, body, headers, secrets),
    });
    // Recorded once this back end answers: a failed attempt's changes are not the call's losses.
    const losses = Losses.of(ctx);
    for (const name of translated.losses) losses.add(name);
    const type = String(response.headers['content-type'] ?? '');
    if (request.stream) {
      if (!EVENT_STREAM.test(type)) {
        response.body.destroy();
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
      }
      const translatedChunks = translateEvents(response.body, new MessageStreamTranslator(losses, secrets), signal);
      const chunks = names ? names.stream(translatedChunks) : translatedChunks;
      // An overloaded_error may follow message_start: read on to the answer before the client has it.
      return { kind: 'stream', status: response.statusCode, chunks, primeToAnswer: true };
    }
    const { parsed } = await readJson(response, signal);
    if (!isMessage(parsed)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a message' }, retryable: true });
    }
    const answer = fromMessagesResponse(parsed);
    for (const name of answer.losses) losses.add(name);
    return { kind: 'json', status: response.statusCode, body: names ? names.answer(answer.value) : answer.value };
  };
}

/**
 * The beta features a Claude-style client asked for (`anthropic-beta`, which such clients send
 * for features their body relies on), added to the ones the operator configured.
 */
function clientBetas(configured: Readonly<Record<string, string>>, client: Readonly<Record<string, string | string[] | undefined>> | undefined): Record<string, string> {
  const asked = client?.['anthropic-beta'];
  const betas = new Set<string>();
  for (const value of [configured['anthropic-beta'], ...(Array.isArray(asked) ? asked : [asked])]) {
    for (const beta of (value ?? '').split(',')) if (beta.trim()) betas.add(beta.trim());
  }
  return betas.size > 0 ? { 'anthropic-beta': [...betas].join(',') } : {};
}

/** An API version as Anthropic names them (a date). */
const API_VERSION = /^\d{4}-\d{2}-\d{2}$/;

/**
 * The client's own `anthropic-version`, for its body as it wrote it, when the provider takes it
 * (see AnthropicProviderConfig.clientVersion): a newer SDK's version changes what a body means,
 * and Anthropic reads the body by the version sent with it.
 */
function clientVersion(endpoint: Endpoint, client: Readonly<Record<string, string | string[] | undefined>> | undefined): Record<string, string> | undefined {
  const asked = client?.['anthropic-version'];
  return endpoint.clientVersion && typeof asked === 'string' && API_VERSION.test(asked) ? { 'anthropic-version': asked } : undefined;
}

/**
 * Same format in and out: a call that came in as a messages body goes up as the client sent it,
 * with only `model` replaced by this back end's name (`stream` as asked; the provider's own
 * `x-api-key`, `anthropic-version` and configured headers, and the hop headers). The answer is
 * still read into canonical chat (usage, finish, routing) but keeps the upstream's bytes (JSON)
 * or each event's text (stream) for the anthropic-messages format to relay unchanged. Nothing is
 * translated, so no loss is recorded.
 */
async function passThrough(
  pool: Pool,
  endpoint: Endpoint,
  secrets: readonly (string | undefined)[],
  request: UpstreamRequest<'chat'>,
  signal: AbortSignal,
  ctx: RequestContext,
): Promise<UpstreamResponse<'chat'>> {
  // Only what Anthropic would refuse is changed: thinking another back end answered without a signature.
  const changes = new Losses();
  const source = request.source!;
  const asked = { ...source.body, model: request.model };
  const body = forAnthropic(asked, changes);
  // Nothing changed but the model name: the client's own text goes up, with the back end's name
  // put in (see withMembers), not parsed and serialised again.
  const raw = body === asked && source.raw ? (source.body.model === request.model ? source.raw : withMembers(source.raw, { model: request.model })) : undefined;
  const response = await postJson(pool, {
    path: endpoint.messagesPath,
    headers: mergeHeaders(endpoint.headers, { ...clientBetas(endpoint.headers, source.headers), ...clientVersion(endpoint, source.headers) }, request.forwardHeaders),
    body,
    raw,
    signal,
    stream: request.stream,
    secrets,
    failure: (status, text, headers) => failure(status, text, headers, secrets),
  });
  // Named once this back end answered (a failed attempt's changes are not the call's).
  if (changes.names.length > 0) {
    const losses = Losses.of(ctx);
    for (const name of changes.names) losses.add(name);
  }
  // The canonical reading's own notes are not losses here: the client gets the answer as it came.
  const unused = new Losses();
  if (request.stream) return relayedStream(response, new MessageStreamTranslator(unused, secrets), signal, MESSAGES_FORMAT, anthropicFrame, ctx);
  const { parsed, bytes } = await readJson(response, signal);
  if (!isMessage(parsed)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not a message' }, retryable: true });
  }
  const answer = keepUpstreamBytes(fromMessagesResponse(parsed).value, bytes, MESSAGES_FORMAT);
  markSentAsIs(ctx, MESSAGES_FORMAT);
  return { kind: 'json', status: response.statusCode, body: answer };
}
