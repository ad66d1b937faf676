import { dropUpstreamBytes, GatewayError, keptHistory, keptHistoryLater, promptCounted, type PluginApi, type RequestContext, type UpstreamRequest, type UpstreamResponse } from '../../../../core/index.js';
import type { StoredResponse } from '../../../../core/store/types.js';
import { isBridged } from './bridge.js';
import { decodeCompaction, inputItems, LossList, summaryMessage } from './request.js';

/**
 * Conversation state for `previous_response_id`, whichever back end answers.
 *
 * The gateway keeps every response it serves on /v1/responses (unless the request says
 * `store: false`): this turn's input items and the response's output items, keyed by the
 * response id and scoped to the key that made it. A later call naming it in
 * `previous_response_id`:
 *
 * - to a bridged back end (one that only chats): gets the conversation so far (each stored
 *   turn's input and output, oldest first) put in front of its own `input`. The previous turns'
 *   `instructions` are not carried over, as the Responses API does.
 * - to a back end that speaks the Responses API itself: is passed on as it is when that same
 *   back end made the previous response (it keeps the conversation); otherwise the history is
 *   put in front of `input` as above (without item ids, which only their maker knows) and
 *   `previous_response_id` is removed.
 *
 * Either way, turns another back end made lose their reasoning items: their signatures and
 * encrypted content vouch only for their maker.
 *
 * An id this key did not get from this gateway is refused (400 previous_response_not_found), as
 * the Responses API refuses an unknown one; another key's responses are unknown to it.
 */

type Json = Record<string, unknown>;

const NAME = 'openai-chat:responses';
/** The `previous_response_id` a native back end was not sent (it got the history instead), for its answer. */
const ECHO = 'openai-chat:responses:echo';

/** Item references a call may have looked for in the store (past the ids held in memory). */
const MAX_SEARCHES = 4;

/** The longest chain of turns followed (a conversation of more turns keeps its latest ones). */
export const MAX_TURNS = 10_000;

/**
 * A conversation's items, oldest first, ending with the turn `last`; `itemsOf` picks what each
 * turn gives (by default its input, then its output).
 */
export async function historyOf(
  last: StoredResponse,
  read: (id: string) => Promise<StoredResponse | undefined>,
  itemsOf: (turn: StoredResponse) => unknown[] = (turn) => [...turn.input, ...turn.output],
): Promise<unknown[]> {
  const turns: StoredResponse[] = [last];
  const seen = new Set([last.id]);
  let at = last;
  while (at.previousResponseId && turns.length < MAX_TURNS && !seen.has(at.previousResponseId)) {
    const previous = await read(at.previousResponseId);
    if (!previous) break;
    seen.add(previous.id);
    turns.push(previous);
    at = previous;
  }
  const items: unknown[] = [];
  for (let i = turns.length - 1; i >= 0; i--) items.push(...itemsOf(turns[i]!));
  return items;
}

/**
 * A turn's items as another back end than its maker can read them: no reasoning items (their
 * signatures and encrypted content only vouch for their maker's), and for a native back end no
 * item ids (ids it never made).
 */
function portable(items: unknown[], withIds: boolean): unknown[] {
  const out: unknown[] = [];
  for (const item of items as Json[]) {
    // A reference names an item of its maker's: another back end cannot resolve it.
    if (!item || typeof item !== 'object' || item.type === 'reasoning' || item.type === 'item_reference') continue;
    if (withIds) out.push(item);
    else {
      const { id: _id, ...rest } = item;
      out.push(rest);
    }
  }
  return out;
}

/** A compaction item this gateway made, as a user message carrying its summary; any other item as it is. */
function readableCompaction(item: Json): Json {
  if (!item || item.type !== 'compaction') return item;
  const summary = decodeCompaction(item.encrypted_content);
  return summary === undefined ? item : { type: 'message', role: 'user', content: summaryMessage(summary) };
}

/** The request with this gateway's compaction items in `input` made readable (the same request when it has none). */
function withReadableCompaction(request: UpstreamRequest): UpstreamRequest {
  const body = request.body as Json;
  if (!Array.isArray(body.input)) return request;
  const input = (body.input as Json[]).map(readableCompaction);
  if (input.every((item, i) => item === (body.input as Json[])[i])) return request;
  return { ...request, body: { ...body, input } } as UpstreamRequest;
}

function keyIdOf(ctx: RequestContext): string | null {
  return ctx.key?.id ?? null;
}

/** The call's original body (before any tap rewrote what goes upstream). */
function originalBody(ctx: RequestContext): Json | undefined {
  return ctx.state.get(NAME) as Json | undefined;
}

/** Keep one served response (this turn's input and the output) for later turns. */
function remember(api: PluginApi<any>, ctx: RequestContext, response: unknown): void {
  const body = originalBody(ctx);
  if (!body || body.store === false) return;
  const r = response as Json | null;
  if (!r || typeof r.id !== 'string' || !Array.isArray(r.output) || r.status === 'failed') return;
  api.stores.responses.save({
    id: r.id,
    keyId: keyIdOf(ctx),
    provider: ctx.target?.provider.id ?? null,
    previousResponseId: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
    model: typeof r.model === 'string' ? r.model : String(body.model ?? ''),
    createdAt: Date.now(),
    input: inputItems(body.input),
    output: r.output,
  });
}

/** The taps that give `previous_response_id` its meaning and keep each response (see above). */
export function applyConversationState(api: PluginApi<any>): void {
  // Stage 10: after validation, so only a valid body is kept.
  api.hooks.validate.tap({ name: NAME, stage: 10 }, (ctx, call) => {
    if (call.operation === 'responses' || call.operation === 'compact') ctx.state.set(NAME, call.body);
  });

  // A plain tap: a call of another operation passes at once, without a promise (tap on an async
  // hook awaits a promise it returns, docs/hooks.md; tapable's type for tap does not say so).
  const rewrite = (original: UpstreamRequest, ctx: RequestContext): UpstreamRequest | Promise<UpstreamRequest> =>
    original.operation !== 'responses' && original.operation !== 'compact' ? original : withHistory(original, ctx);
  // Stage -100: before metering's admission (stage 0), which reserves the worst case of the
  // body as it will go up, the earlier turns included.
  api.hooks.beforeUpstream.tap({ name: NAME, stage: -100 }, rewrite as (original: UpstreamRequest, ctx: RequestContext) => UpstreamRequest);
  const withHistory = async (original: UpstreamRequest, ctx: RequestContext): Promise<UpstreamRequest> => {
    const provider = ctx.target?.provider;
    const handler = provider?.operations[original.operation];
    const native = Boolean(handler) && !isBridged(handler);
    // A native back end cannot read this gateway's compaction items: it gets their summary as a message.
    const request = await withReferencedItems(native ? withReadableCompaction(original) : original, ctx, native);
    const body = request.body as Json;
    const previousId = body.previous_response_id;
    if (typeof previousId !== 'string' || previousId === '') return request;
    const keyId = keyIdOf(ctx);
    const read = (id: string) => api.stores.responses.get(id, keyId);
    const previous = await read(previousId);
    if (!previous) throw new GatewayError('previous_response_not_found', { param: 'previous_response_id', params: { id: previousId } });
    const target = provider?.id ?? null;
    const turnsOf = (turn: StoredResponse) => {
      const items = [...turn.input, ...turn.output];
      return turn.provider === target ? items : portable(items, !native);
    };
    // The back end that made it keeps the conversation itself, and bills it as input. A call whose
    // prompt is counted before it goes up (a key's budget, for its worst case; a tokens-per-minute
    // limit, for its estimate) reads the chain now; any other only if metering must count the
    // call itself (its back end reported no usage).
    if (native && previous.provider === provider!.id) {
      const kept: Json = { ...body };
      if (ctx.key?.budget === undefined && !promptCounted(ctx)) keptHistoryLater(kept, () => historyOf(previous, read, turnsOf));
      else keptHistory(kept, await historyOf(previous, read, turnsOf));
      return { ...request, body: kept } as UpstreamRequest;
    }
    const history = await historyOf(previous, read, turnsOf);
    const input = [...history, ...inputItems(body.input)];
    if (native) for (let i = 0; i < input.length; i++) input[i] = readableCompaction(input[i] as Json);
    const rewritten: Json = { ...body, input };
    // A bridge reads only `input` (and echoes the id on its answer); a native back end must not
    // see an id it never made, and its answer gets the id back (see echoPrevious).
    if (native) {
      delete rewritten.previous_response_id;
      ctx.state.set(ECHO, previousId);
    }
    return { ...request, body: rewritten } as UpstreamRequest;
  };

  /**
   * `input`'s item_references to items of this key's stored turns, as those items (the AI SDK
   * sends an earlier turn of its conversation so, the ids this gateway gave): as they are for the
   * back end that made them, as any stored turn goes to another (see portable). A reference the
   * gateway never stored stays for the back end to resolve (a native one that made it), or lost.
   */
  const withReferencedItems = async (request: UpstreamRequest, ctx: RequestContext, native: boolean): Promise<UpstreamRequest> => {
    const body = request.body as Json;
    if (!Array.isArray(body.input) || !(body.input as Json[]).some((item) => item?.type === 'item_reference')) return request;
    const keyId = keyIdOf(ctx);
    const target = ctx.target?.provider.id ?? null;
    const input: unknown[] = [];
    // What this turn is kept as: the items the references named, so that a later turn naming
    // them again finds the items, not this turn's references.
    const kept: unknown[] = [];
    let changed = false;
    let searches = 0;
    for (const item of body.input as Json[]) {
      if (item?.type !== 'item_reference' || typeof item.id !== 'string') {
        input.push(item);
        kept.push(item);
        continue;
      }
      // An id the memory no longer holds is searched for in the store (a scan of the key's latest
      // turns): a few a call, so that a body of many unknown ids costs no more.
      const stored = await api.stores.responses.findItem(item.id, keyId, searches++ < MAX_SEARCHES);
      if (stored === 'another key') {
        // Another key's item: not this key's to name, nor to pass to a back end that might resolve it.
        LossList.of(ctx).add('input.item_reference');
        changed = true;
      } else if (stored === undefined) {
        input.push(item);
        kept.push(item);
      } else {
        changed = true;
        input.push(...(stored.provider === target ? [stored.item] : portable([stored.item], !native)));
        kept.push(stored.item);
      }
    }
    if (!changed) return request;
    const original = originalBody(ctx);
    if (original && Array.isArray(original.input)) ctx.state.set(NAME, { ...original, input: kept });
    return { ...request, body: { ...body, input } } as UpstreamRequest;
  };

  /** A response of a native back end that was sent the history instead of the id: the id, as the client gave it. */
  const echoPrevious = (response: unknown, ctx: RequestContext): boolean => {
    const id = ctx.state.get(ECHO) as string | undefined;
    const r = response as Json | null;
    if (id === undefined || !r || typeof r !== 'object' || (r.previous_response_id !== null && r.previous_response_id !== undefined)) return false;
    r.previous_response_id = id;
    return true;
  };

  api.hooks.afterUpstream.tap(NAME, (response: UpstreamResponse, ctx) => {
    if (ctx.operation === 'responses' && response.kind === 'json' && response.status < 400) {
      if (echoPrevious(response.body, ctx)) dropUpstreamBytes(response.body as object);
      remember(api, ctx, response.body);
    }
    return response;
  });

  api.hooks.onStreamChunk.tap(NAME, (chunk, ctx) => {
    if (ctx.operation !== 'responses') return chunk;
    const event = chunk as { type?: unknown; response?: unknown } | null;
    // The events that carry the response (created, in_progress, completed...) carry the id too.
    if (event && typeof event.response === 'object' && echoPrevious(event.response, ctx)) dropUpstreamBytes(event);
    const type = event?.type;
    if (type === 'response.completed' || type === 'response.incomplete') remember(api, ctx, event!.response);
    return chunk;
  });
}
