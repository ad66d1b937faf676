import {
  GatewayError,
  sseEvent,
  replyBytesOf,
  type CallRoute,
  type FormatReply,
  type PluginApi,
  type RequestContext,
  type UpstreamResponse,
} from '../../../../core/index.js';
import { FORMAT, sameLine } from '../events.js';
import { compactBridge, responsesBridge } from './bridge.js';
import { applyConversationState } from './history.js';
import { compactSchema, responsesSchema } from './schema.js';

/**
 * POST /v1/responses and POST /v1/responses/compact in OpenAI's wire format.
 *
 * The canonical body of both operations is the request body as the client sent it (validated);
 * the canonical result is the Responses API object (`response`, `response.compaction`), and the
 * canonical chunks of a `responses` stream are its events as objects (`{type, sequence_number,
 * ...}`), written as `event: <type>` / `data: <json>`. A back end that speaks the Responses API
 * itself answers in this shape already (its bytes are relayed as they came); every chat back end
 * answers through the bridges in bridge.ts.
 */


/** The header that names what a translation could not carry. */
export const LOSSES_HEADER = 'x-switchyard-losses';

type Json = Record<string, unknown>;

function lossHeaders(ctx: RequestContext): Record<string, string> | undefined {
  return ctx.losses?.length ? { [LOSSES_HEADER]: ctx.losses.join(',') } : undefined;
}

async function* eventText(chunks: AsyncIterable<unknown>): AsyncGenerator<string> {
  for await (const chunk of chunks) {
    const event = chunk as Json;
    const type = typeof event?.type === 'string' ? event.type : 'message';
    yield sseEvent(type, sameLine(event) ?? JSON.stringify(event));
  }
}

function renderJson(response: UpstreamResponse, ctx: RequestContext): FormatReply {
  if (response.kind === 'stream') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed an answer it was asked for whole' } });
  const headers = lossHeaders(ctx);
  const bytes = replyBytesOf(response, FORMAT);
  if (bytes) return { status: 200, headers: { ...headers, 'content-type': 'application/json' }, body: bytes };
  return { status: 200, headers, body: response.body };
}

export const responses: CallRoute<'responses'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/responses',
  operation: 'responses',
  schema: responsesSchema,
  parse({ body }) {
    const stream = body.stream === true;
    return { model: typeof body.model === 'string' ? body.model : '', stream, wantsStreamUsage: stream };
  },
  render(response, _call, ctx) {
    if (response.kind === 'stream') return { headers: lossHeaders(ctx), stream: eventText(response.chunks) };
    return renderJson(response, ctx);
  },
};

export const compact: CallRoute<'compact'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/responses/compact',
  operation: 'compact',
  schema: compactSchema,
  parse({ body }) {
    return { model: typeof body.model === 'string' ? body.model : '', stream: false };
  },
  render: (response, _call, ctx) => renderJson(response, ctx),
};

export const responsesRoutes = [responses, compact] as const;

/** The bridges (responses and compact through chat) and the conversation-state taps. */
export function applyResponses(api: PluginApi<any>): void {
  api.registerBridge(responsesBridge);
  api.registerBridge(compactBridge);
  applyConversationState(api);
  api.hooks.onResponse.tap('openai-chat:responses', (ctx) => {
    if ((ctx.operation === 'responses' || ctx.operation === 'compact') && ctx.losses?.length) {
      api.logger.info('translation losses', { requestId: ctx.id, format: FORMAT, operation: ctx.operation, losses: ctx.losses });
    }
  });
}
