import {
  hiddenSlot,
  defineWireFormat,
  lossHeaders,
  printableLosses,
  GatewayError,
  mergeHeaders,
  modelAllowed,
  upstreamBytesOf,
  replyBytesOf,
  wasSentAsIs,
  type CallRoute,
  type ChatChunk,
  type ChatRequest,
  type HandlerRoute,
  type RequestContext,
} from '../../../core/index.js';
import { BpeTokenizer, countPromptTokens } from '../../metering/tokens.js';
import { uncarriedTokens } from './count.js';
import { createRequestAjv, toRequestError } from '../../validation/index.js';
import { errorBody, errorStatus, streamError } from './errors.js';
import { Losses, toCanonicalRequest } from './request.js';
import { modelRoutes, sendsVersion } from './models.js';
import { toMessage } from './response.js';
import { countTokensSchema, messagesSchema } from './schema.js';
import { messageEvents } from './stream.js';

const JSON_TYPE = { 'content-type': 'application/json' };

const FORMAT = 'anthropic-messages';

/** Version headers, either of which a client must send: the real clients' and the spec's name. */
const VERSION_HEADERS = ['anthropic-version', 'provider-version'] as const;

/** Tokens count_tokens adds for each image, as metering does (see plugins/metering/tokens.ts). */
export { IMAGE_TOKENS } from '../../metering/tokens.js';

export interface AnthropicMessagesOptions {
  /** Refuse calls without `anthropic-version` / `provider-version` (default true, as the API does). */
  requireVersion: boolean;
}

type Json = Record<string, unknown>;

function requestedStops(body: Json): string[] {
  return Array.isArray(body.stop_sequences) ? (body.stop_sequences as unknown[]).filter((s): s is string => typeof s === 'string') : [];
}

/**
 * The translated request of a call, made once: in the validate hook (where the request context
 * is at hand for the losses) or, failing that, when the pipeline asks for the canonical body.
 * The names it lost are kept too: a back end that got the body as it is (same format) lost none.
 */
const translated = hiddenSlot<{ request: ChatRequest; losses: string[] }>();

function canonicalOf(body: Json, ctx?: RequestContext): ChatRequest {
  let entry = translated.get(body);
  if (!entry) {
    const result = toCanonicalRequest(body);
    entry = { request: result.value, losses: result.losses };
    translated.set(body, entry);
    if (ctx) for (const name of result.losses) Losses.of(ctx).add(name);
  }
  return entry.request;
}

/**
 * The back end got the client's body as it is: what translating it would have lost was not
 * lost. Those names leave the request's list (in place: a stream's translator holds the list).
 */
export function forgetRequestLosses(ctx: RequestContext, names: readonly string[] | undefined): void {
  const list = ctx.losses;
  if (!list || !names?.length) return;
  for (let i = list.length - 1; i >= 0; i--) if (names.includes(list[i]!)) list.splice(i, 1);
}

/**
 * Same format in and out: each chunk's kept event text, as the back end sent it, in order
 * (chunks that carry '' belong to an event already written). A chunk without kept text (a tap
 * replaced it) has nothing to relay.
 */
export async function* relayedEvents(chunks: AsyncIterable<ChatChunk>, format: string): AsyncGenerator<string | Uint8Array> {
  for await (const chunk of chunks) {
    const text = upstreamBytesOf(chunk, format);
    if (text !== undefined && text.length > 0) yield text;
  }
}

const messages: CallRoute<'chat'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/messages',
  operation: 'chat',
  schema: messagesSchema,
  relaysOpeningChunk: true,
  parse({ body }) {
    const stream = body.stream === true;
    return { model: typeof body.model === 'string' ? body.model : '', stream, wantsStreamUsage: stream };
  },
  toCanonical(body) {
    return canonicalOf(body);
  },
  render(response, call, ctx) {
    if (wasSentAsIs(ctx, FORMAT)) {
      // The anthropic back end got the body as the client sent it: its answer goes back as it came.
      forgetRequestLosses(ctx, translated.get(call.body)?.losses);
      if (response.kind === 'stream') return { headers: lossHeaders(ctx), stream: relayedEvents(response.chunks, FORMAT) };
      const bytes = replyBytesOf(response, FORMAT);
      if (bytes) return { status: 200, headers: mergeHeaders(lossHeaders(ctx), JSON_TYPE), body: bytes };
    }
    const losses = Losses.of(ctx);
    const stops = requestedStops(call.body);
    // The provider type of the back end that answered: its signatures vouch only for it.
    const maker = ctx.target?.provider.type;
    if (response.kind === 'stream') {
      return { headers: lossHeaders(ctx), stream: messageEvents(response.chunks, { requestedStops: stops, losses, maker, model: call.model }) };
    }
    const message = toMessage(response.body, stops, maker, call.model);
    for (const name of message.losses) losses.add(name);
    return { status: 200, headers: lossHeaders(ctx), body: message.value };
  },
};

/**
 * A message thread (`thread: {type: create | continue}`, the SDK's `thread()` and its tool
 * runner): the gateway keeps none, and a `continue` sends only the new turn, which no other back
 * end (and no fallback) could answer. Refused as Anthropic refuses a request it cannot thread
 * (`error.details.error_code: thread_unsupported_request`), on which the SDK's tool runner goes on
 * without a thread, sending the whole conversation.
 */
function refuseThreads(body: Record<string, unknown>): void {
  if (body.thread === undefined || body.thread === null) return;
  throw new GatewayError('invalid_request', {
    param: 'thread',
    params: { detail: 'this gateway keeps no message threads: send the whole conversation in messages, without thread.' },
    vendor: { format: FORMAT, code: 'thread_unsupported_request' },
  });
}

function countTokensRoute(count: (request: ChatRequest) => Promise<number>): HandlerRoute {
  const validate = createRequestAjv().compile(countTokensSchema);
  return {
    kind: 'handler',
    method: 'POST',
    path: '/v1/messages/count_tokens',
    readsBody: true,
    async handle(ctx, { body }, { models, key }) {
      if (!validate(body)) throw toRequestError(validate.errors ?? [], body);
      const model = String(body.model);
      ctx.model = model;
      if (!models.list().some((m) => m.id === model)) throw new GatewayError('model_not_found', { params: { model }, param: 'model' });
      if (!modelAllowed(key?.models, model)) throw new GatewayError('model_not_allowed', { params: { model }, param: 'model' });
      // Counted here, for whichever back end the model routes to: what the translation has no
      // place for is estimated from the body as it came (uncarriedTokens), not named as lost,
      // since a back end of the client's own format reads it.
      const result = toCanonicalRequest(body);
      return { body: { input_tokens: (await count(result.value)) + uncarriedTokens(body) } };
    },
  };
}

/** The metering plugin's default tokenizer, its tables built on the first count_tokens call. */
const tokenizer = new BpeTokenizer('cl100k_base');

/**
 * An estimate of a prompt's input tokens, as the metering plugin counts one: its tokenizer
 * (cl100k_base) over the translated request's text, tool definitions and message framing, plus
 * IMAGE_TOKENS per image.
 */
export async function estimateInputTokens(request: ChatRequest): Promise<number> {
  return countPromptTokens(tokenizer, request);
}

/**
 * POST /v1/messages (streamed and not) and POST /v1/messages/count_tokens in Anthropic's wire
 * format, translated through the canonical chat form so that any chat back end answers.
 */
export default defineWireFormat<AnthropicMessagesOptions>({
  name: FORMAT,
  version: '0.1.0',
  description: 'Messages (and count_tokens) in the Anthropic wire format, over any chat back end.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { requireVersion: { type: 'boolean', default: true } },
  },
  id: FORMAT,
  routes: [messages, countTokensRoute(estimateInputTokens), ...modelRoutes(VERSION_HEADERS)],
  keyHeaders: ['x-api-key'],
  // Anthropic's SDKs read a call's id (`_request_id`, an error's `requestID`) from `request-id`.
  requestIdHeader: 'request-id',
  renderError: errorBody,
  errorStatus,
  renderStreamError: streamError,
  apply(api) {
    if (api.options.requireVersion !== false) {
      api.hooks.onRequest.tap(FORMAT, (ctx) => {
        if (ctx.format !== FORMAT) return;
        if (!sendsVersion(ctx.headers, VERSION_HEADERS)) {
          throw new GatewayError('invalid_request', { param: 'anthropic-version', params: { detail: 'anthropic-version: header is required' } });
        }
      });
    }
    // Stage 10: after the validation plugin's tap, so only a valid body is translated.
    api.hooks.validate.tap({ name: FORMAT, stage: 10 }, (ctx, call) => {
      if (call.format !== FORMAT || call.schema !== messagesSchema) return;
      refuseThreads(call.body);
      canonicalOf(call.body, ctx);
    });
    api.hooks.onResponse.tap(FORMAT, (ctx) => {
      if (ctx.format === FORMAT && ctx.losses?.length) {
        api.logger.info('translation losses', { requestId: ctx.id, format: FORMAT, losses: printableLosses(ctx.losses) });
      }
    });
  },
});
