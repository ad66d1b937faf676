import { toolNamesOf } from './tool-names.js';
import { defineBridge, GatewayError, keepBridgedExchange, type ChatChunk, type ChatResponse, type OperationHandler, type UpstreamRequest } from '../../../../core/index.js';
import { encodeCompaction, inputItems, itemsToMessages, LossList, toChatRequest } from './request.js';
import { newId, responseUsage, toResponse } from './response.js';
import { ResponseEventWriter, responseEvents } from './stream.js';

/**
 * `responses` and `compact` for back ends that only chat. A provider with its own `responses`
 * (an OpenAI back end with `responsesApi: true`) keeps it; every other chat back end (mock,
 * anthropic, gemini, a chat-only OpenAI-compatible one) answers /v1/responses through these.
 *
 * The request reaching a bridge already holds the whole conversation in `input`: the format's
 * beforeUpstream tap put a previous response's history in front (see history.ts).
 */

type Json = Record<string, unknown>;

/** Handlers made by a bridge (not a back end's own): the history tap expands previous_response_id for them. */
const bridged = new WeakSet<object>();

export function isBridged(handler: unknown): boolean {
  return typeof handler === 'function' && bridged.has(handler);
}

function chatRequestOf(request: UpstreamRequest<'responses'> | UpstreamRequest<'compact'>, body: ReturnType<typeof toChatRequest>['value']): UpstreamRequest<'chat'> {
  return {
    operation: 'chat',
    model: request.model,
    stream: body.stream === true,
    body,
    clientWantsStreamUsage: true,
    forwardHeaders: request.forwardHeaders,
  };
}

export const responsesBridge = defineBridge({
  from: 'responses',
  to: 'chat',
  wrap(chat: OperationHandler<'chat'>): OperationHandler<'responses'> {
    const handler: OperationHandler<'responses'> = async (request, context) => {
      const body = request.body as Json;
      const translated = toChatRequest(body, request.model, request.stream);
      // Nothing to answer (no input, or only tool outputs, and no previous response): a chat back
      // end would refuse it, or answer an empty conversation and be paid for it. Refused before
      // anything is sent, it is no attempt of this back end (no usage row: see the pipeline's
      // refusedUnsent).
      if (!translated.value.messages.some((message) => message.role === 'user' || message.role === 'assistant')) {
        throw new GatewayError('invalid_request', { param: 'input', params: { detail: 'There is no conversation to answer: give an input or a previous_response_id.' } });
      }
      // Undone by the pipeline if this attempt fails (a failed attempt's translation is not the call's).
      const losses = LossList.of(context.request);
      for (const name of translated.losses) losses.add(name);
      const answer = await chat(chatRequestOf(request, translated.value), context);
      const id = newId('resp');
      // The signatures this back end makes vouch only for it (see tagSignature).
      const maker = context.request.target?.provider.type;
      if (answer.kind === 'json') {
        const chatBody = answer.body as ChatResponse;
        return { kind: 'json', status: answer.status, body: toResponse(chatBody, body, id, request.model, maker), ...(answer.usage ? { usage: answer.usage } : {}) };
      }
      const writer = new ResponseEventWriter(id, body, request.model, maker);
      return { kind: 'stream', status: answer.status, chunks: responseEvents(answer.chunks as AsyncIterable<ChatChunk>, writer) };
    };
    bridged.add(handler);
    return handler;
  },
});

/** What the model is asked to do with the conversation when it compacts it. */
export const COMPACT_PROMPT =
  'Summarise the conversation above so that it can replace it: keep every fact, decision, open question, ' +
  'name, number and tool result that later turns may need, and the user\'s goals. Answer with the summary only.';

/**
 * `/v1/responses/compact` through chat: the routed model summarises the conversation (the input,
 * after any previous response's history) into one compaction item; the answer is the user's
 * messages followed by that item, as OpenAI's compaction answers, and is accepted as the `input`
 * of a later /v1/responses call (the item becomes the summary, handed to the model as a message).
 */
export const compactBridge = defineBridge({
  from: 'compact',
  to: 'chat',
  wrap(chat: OperationHandler<'chat'>): OperationHandler<'compact'> {
    const handler: OperationHandler<'compact'> = async (request, context) => {
      const body = request.body as Json;
      const losses = LossList.of(context.request);
      const items = inputItems(body.input);
      const messages = [
        ...(typeof body.instructions === 'string' && body.instructions !== '' ? [{ role: 'system' as const, content: body.instructions }] : []),
        ...itemsToMessages(items, losses, toolNamesOf(body)),
      ];
      if (messages.length === 0) throw new GatewayError('invalid_request', { param: 'input', params: { detail: 'There is no conversation to compact: give an input or a previous_response_id.' } });
      messages.push({ role: 'user', content: COMPACT_PROMPT });
      const asked = chatRequestOf(request, { model: request.model, messages });
      const answer = await chat(asked, context);
      if (answer.kind !== 'json') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a summary it was asked for whole' } });
      const chatBody = answer.body as ChatResponse;
      const content = chatBody.choices?.[0]?.message?.content;
      const summary = typeof content === 'string' ? content : Array.isArray(content) ? content.map((p) => String((p as Json).text ?? '')).join('') : '';
      const users = items.filter((item) => (item.type ?? 'message') === 'message' && item.role === 'user').map((item) => ({ ...item, type: 'message', id: newId('msg'), status: 'completed', content: typeof item.content === 'string' ? [{ type: 'input_text', text: item.content }] : item.content }));
      const compaction = { id: newId('cmp'), type: 'compaction', encrypted_content: encodeCompaction(summary) };
      const result = {
        id: newId('resp'),
        object: 'response.compaction',
        created_at: Math.floor(Date.now() / 1000),
        output: [...users, compaction],
        usage: responseUsage(chatBody.usage),
        // The compaction result's fields (the API spec's), as a response's: no error, since it was made.
        error: null,
      };
      // A back end that reports no usage has it counted from what it was asked (the summarising
      // instruction included) and what it answered, not from this result.
      keepBridgedExchange(result, { request: asked.body, answer: chatBody });
      return { kind: 'json', status: answer.status, body: result, ...(answer.usage ? { usage: answer.usage } : {}) };
    };
    bridged.add(handler);
    return handler;
  },
});
