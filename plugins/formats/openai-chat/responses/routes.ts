import {
  GatewayError,
  lossHeaders,
  printableLosses,
  sseEvent,
  replyBytesOf,
  type CallRoute,
  type ErrorView,
  type FormatReply,
  type PluginApi,
  type RequestContext,
  type UpstreamResponse,
  type Usage,
  usageAsResponses,
} from '../../../../core/index.js';
import { FORMAT, sameLine } from '../events.js';
import { compactBridge, responsesBridge } from './bridge.js';
import { applyConversationState } from './history.js';
import { markInputPaths } from './request.js';
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


type Json = Record<string, unknown>;


/** The gateway's codes for a back end's trouble that OpenAI's Responses API has a code of its own for. */
const OPENAI_CODES: Readonly<Partial<Record<string, string>>> = {
  upstream_rate_limited: 'rate_limit_exceeded',
  upstream_quota_exhausted: 'insufficient_quota',
};

/**
 * The code and message of a failed response's `error`, as OpenAI would give them: a stream's last
 * event has no status or header to say more with, and clients act on its code (Codex waits as
 * long as a `rate_limit_exceeded` message's "try again in 1.5s" says, stops on
 * `insufficient_quota`, gives up on `invalid_prompt`, compacts on `context_length_exceeded`). A
 * back end with OpenAI's API gave its own (VendorError): that one, with the gateway's message
 * unless it carries a safer one (a rate limit's wait); else a rate limit or an account out of
 * credit as OpenAI names them, a failure of a back end or the gateway (5xx) as `server_error`, any
 * other as the gateway's code. The call keeps the gateway's code (logs, the request log).
 */
function failureCode(view: ErrorView): { code: string; message: string } {
  const vendor = view.vendor?.format === FORMAT ? view.vendor : undefined;
  if (vendor) return { code: vendor.code, message: vendor.message ?? view.message };
  return { code: OPENAI_CODES[view.code] ?? (view.status >= 500 ? 'server_error' : view.code), message: view.message };
}

/**
 * What a Responses stream has said so far, for the event that ends it when it fails: the
 * response as its first events gave it, the items it finished, and the last sequence number.
 */
class StreamSoFar {
  private response: Json | undefined;
  private readonly items: Json[] = [];
  private sequence = -1;
  /** The stream already gave its last event (response.completed, .incomplete or .failed). */
  private ended = false;

  see(event: Json): void {
    if (typeof event.sequence_number === 'number') this.sequence = event.sequence_number;
    const type = event.type;
    if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') this.ended = true;
    else if (type === 'response.created' || type === 'response.in_progress') {
      if (event.response && typeof event.response === 'object') this.response = event.response as Json;
    } else if (type === 'response.output_item.done' && typeof event.output_index === 'number' && event.item && typeof event.item === 'object') {
      this.items[event.output_index] = event.item as Json;
    }
  }

  /**
   * OpenAI's ending of a stream whose response failed: `response.failed` with the response as
   * far as it got, `status: failed` and its `error` in OpenAI's codes (see failureCode); before
   * any response was announced, an `error` event. `billed`: the usage the call is charged for
   * its failure (what the back end's own failed response said it billed), which the failed
   * response then carries, so that the client can see what it paid for.
   */
  failure(view: ErrorView, billed: Usage | undefined): string {
    // The response already ended: a failure after its last event has nothing left to end.
    if (this.ended) return '';
    const { code, message } = failureCode(view);
    const sequence_number = this.sequence + 1;
    if (!this.response) {
      return sseEvent('error', JSON.stringify({ type: 'error', code, message, param: view.param, sequence_number }));
    }
    const response: Json = { ...this.response, status: 'failed', error: { code, message }, incomplete_details: null, output: this.items.filter(Boolean) };
    if (billed) response.usage = usageAsResponses(billed);
    return sseEvent('response.failed', JSON.stringify({ type: 'response.failed', sequence_number, response }));
  }
}

async function* eventText(chunks: AsyncIterable<unknown>, soFar: StreamSoFar): AsyncGenerator<string> {
  for await (const chunk of chunks) {
    const event = chunk as Json;
    if (event && typeof event === 'object') soFar.see(event);
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
  outputLimitField: 'max_output_tokens',
  schema: responsesSchema,
  parse({ body }) {
    markInputPaths(body);
    const stream = body.stream === true;
    return { model: typeof body.model === 'string' ? body.model : '', stream, wantsStreamUsage: stream };
  },
  render(response, _call, ctx) {
    if (response.kind === 'stream') {
      const soFar = new StreamSoFar();
      return { headers: lossHeaders(ctx), stream: eventText(response.chunks, soFar), streamError: (view) => soFar.failure(view, ctx.usage) };
    }
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
    markInputPaths(body);
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
      api.logger.info('translation losses', { requestId: ctx.id, format: FORMAT, operation: ctx.operation, losses: printableLosses(ctx.losses) });
    }
  });
}
