import { randomBytes } from 'node:crypto';
import { tagSignature, tokenCount, usageFromChat, type ChatChoice, type ChatResponse, type ChatUsage, type FinishReason, type ToolCall } from '../../../core/index.js';
import { clientToolUseId, Losses, NATIVE_SIGNER, type Translated } from './request.js';

/**
 * Canonical chat answer <-> messages answer: content blocks, stop reasons and usage.
 */

type Json = Record<string, unknown>;

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** Random bytes drawn 4 KiB at a time (one call into the random source per 170 ids, not one per id). */
let pool = Buffer.alloc(0);
let taken = 0;

/** `msg_…` / `toolu_…`: a prefix and 24 random letters and digits, as Anthropic's ids look. */
export function newId(prefix: string): string {
  if (taken + 24 > pool.length) {
    pool = randomBytes(4096);
    taken = 0;
  }
  let out = `${prefix}_`;
  for (let i = taken; i < taken + 24; i++) out += ALPHABET[pool[i]! % ALPHABET.length];
  taken += 24;
  return out;
}

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';

/**
 * A canonical finish -> Anthropic's stop_reason and stop_sequence. A back end that names the
 * stop sequence it hit (`stop_sequence`, or a string `stop_reason` as vLLM sends) gives
 * `stop_sequence`, provided the client asked for that sequence; plain `stop` is `end_turn`.
 */
export function stopReasonOf(
  finish: FinishReason | null | undefined,
  choice: { stop_sequence?: unknown; stop_reason?: unknown } | undefined,
  requested: readonly string[],
  sawToolCalls: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  switch (finish) {
    case 'tool_calls':
    case 'function_call':
      return { stop_reason: 'tool_use', stop_sequence: null };
    case 'length':
      return { stop_reason: 'max_tokens', stop_sequence: null };
    case 'content_filter':
      return { stop_reason: 'refusal', stop_sequence: null };
    default: {
      const named = typeof choice?.stop_sequence === 'string' ? choice.stop_sequence : typeof choice?.stop_reason === 'string' ? choice.stop_reason : undefined;
      if (named !== undefined && requested.includes(named)) return { stop_reason: 'stop_sequence', stop_sequence: named };
      // Some back ends finish a tool-calling answer with `stop`.
      if (sawToolCalls) return { stop_reason: 'tool_use', stop_sequence: null };
      return { stop_reason: 'end_turn', stop_sequence: null };
    }
  }
}

/** The canonical finish_reason of an Anthropic stop_reason (inverse of stopReasonOf). */
export function finishReasonOf(stopReason: unknown): FinishReason | null {
  switch (stopReason) {
    case 'tool_use':
      return 'tool_calls';
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'refusal':
      return 'content_filter';
    case 'end_turn':
    case 'stop_sequence':
    case 'pause_turn':
      return 'stop';
    default:
      return null;
  }
}

/**
 * Canonical usage -> Anthropic usage. Anthropic's `input_tokens` does not include tokens read
 * from or written to the prompt cache (OpenAI's `prompt_tokens` does), so those are taken out
 * and reported in their own fields; unknown cache figures are 0.
 */
export function messageUsage(usage: ChatUsage | null | undefined): Json {
  // Counts that are not whole non-negative numbers (a broken back end's) are read as none.
  const counted = usageFromChat(usage);
  const prompt = counted?.inputTokens ?? 0;
  const cached = counted?.cachedInputTokens ?? 0;
  const written = counted?.cacheWriteTokens ?? 0;
  const out: Json = {
    input_tokens: Math.max(0, prompt - cached - written),
    output_tokens: counted?.outputTokens ?? 0,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
  };
  const reasoning = counted?.reasoningTokens;
  if (reasoning !== undefined) out.output_tokens_details = { thinking_tokens: reasoning };
  // Searches the back end's own web search ran, billed apart: where Anthropic's usage says them.
  if (counted?.webSearches) out.server_tool_use = { web_search_requests: counted.webSearches };
  return out;
}

/** Anthropic usage -> canonical usage (inverse of messageUsage). */
export function chatUsage(usage: Json | undefined): ChatUsage | undefined {
  // A count that is there but is not one (a string, a negative, an absurd number), or a missing
  // input or output count, makes the usage unknown: metering counts the call itself.
  const num = (v: unknown) => (v == null ? 0 : (tokenCount(v) ?? Number.NaN));
  if (tokenCount(usage?.input_tokens) === undefined || tokenCount(usage?.output_tokens) === undefined) return undefined;
  const cached = num(usage?.cache_read_input_tokens);
  const written = num(usage?.cache_creation_input_tokens);
  const prompt = num(usage?.input_tokens) + cached + written;
  const completion = num(usage?.output_tokens);
  const out: ChatUsage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (usage?.cache_read_input_tokens != null || usage?.cache_creation_input_tokens != null) {
    out.prompt_tokens_details = { cached_tokens: cached, cache_creation_tokens: written };
    // Writes for an hour (`ttl: 1h`), which Anthropic prices above the 5-minute ones.
    const hour = num((usage?.cache_creation as Json | undefined)?.ephemeral_1h_input_tokens);
    if (hour > 0) out.prompt_tokens_details.cache_creation_1h_tokens = hour;
  }
  const thinking = (usage?.output_tokens_details as Json | undefined)?.thinking_tokens;
  if (typeof thinking === 'number') out.completion_tokens_details = { reasoning_tokens: thinking };
  // Web searches Anthropic ran (its web_search server tool), billed per search.
  const searches = num((usage?.server_tool_use as Json | undefined)?.web_search_requests);
  if (searches > 0) out.server_tool_use = { web_search_requests: searches };
  return usageFromChat(out) && !Number.isNaN(searches) ? out : undefined;
}

/** Tool-call arguments (JSON text) as a tool_use input object. */
export function toolInput(text: string, losses: Losses): Json {
  try {
    const parsed = JSON.parse(text || '{}') as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json;
  } catch {
    // fall through
  }
  losses.add('tool_use.input_not_json_object');
  return {};
}

/** Reasoning text of a delta or message: `reasoning_content`, or `reasoning` as some back ends name it. */
export function reasoningOf(value: Json | undefined): string | undefined {
  const text = value?.reasoning_content ?? value?.reasoning;
  return typeof text === 'string' ? text : undefined;
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p: Json) => (typeof p?.text === 'string' ? p.text : typeof p?.refusal === 'string' ? p.refusal : '')).join('');
}

/** A canonical chat answer as an Anthropic message; `asked`, the model the client asked for, names it when the answer names none. */
export function toMessage(response: ChatResponse, requestedStops: readonly string[], maker?: string, asked?: string): Translated<Json> {
  const losses = new Losses();
  if (response.choices.length > 1) losses.add('choices.n');
  const choice: ChatChoice | undefined = response.choices[0];
  const message = choice?.message;
  const content: Json[] = [];
  const reasoning = reasoningOf(message);
  // A signature without reasoning text (a back end that signs but shows no thoughts) still goes
  // out, in an empty thinking block, so that the client hands it back (as the stream does).
  // Another type of back end's signature is tagged with its maker (see tagSignature).
  const signature = typeof message?.reasoning_signature === 'string' && message.reasoning_signature ? tagSignature(message.reasoning_signature, maker, NATIVE_SIGNER) : '';
  if (reasoning || signature) content.push({ type: 'thinking', thinking: reasoning ?? '', signature });
  const text = textOf(message?.content);
  if (text) content.push({ type: 'text', text });
  if (typeof message?.refusal === 'string' && message.refusal) content.push({ type: 'text', text: message.refusal });
  // An assistant message holds no images in the Messages API (image output from a back end).
  if (Array.isArray(message?.images) && message.images.length > 0) losses.add('message.images');
  const calls = message?.tool_calls ?? [];
  for (const call of calls) {
    content.push({ type: 'tool_use', id: call.id ? clientToolUseId(call.id) : newId('toolu'), name: call.function.name, input: toolInput(call.function.arguments, losses) });
  }
  const stop = stopReasonOf(choice?.finish_reason, choice as unknown as Json | undefined, requestedStops, calls.length > 0);
  if (typeof message?.refusal === 'string' && message.refusal) stop.stop_reason = 'refusal';
  return {
    value: {
      id: newId('msg'),
      type: 'message',
      role: 'assistant',
      model: typeof response.model === 'string' && response.model !== '' ? response.model : (asked ?? ''),
      content,
      stop_reason: stop.stop_reason,
      stop_sequence: stop.stop_sequence,
      usage: messageUsage(response.usage),
    },
    losses: losses.names,
  };
}

/** An Anthropic message as a canonical chat answer (inverse of toMessage). */
export function fromMessage(message: Json): Translated<ChatResponse> {
  const losses = new Losses();
  let text: string | undefined;
  let reasoning: string | undefined;
  let signature: string | undefined;
  const calls: ToolCall[] = [];
  for (const block of (message.content as Json[] | undefined) ?? []) {
    switch (block.type) {
      case 'text':
        text = (text ?? '') + String(block.text);
        if (Array.isArray(block.citations) && block.citations.length > 0) losses.add('text.citations');
        break;
      case 'thinking':
        if (reasoning !== undefined) losses.add('thinking.multiple_blocks');
        reasoning = (reasoning ?? '') + String(block.thinking);
        signature = String(block.signature);
        break;
      case 'tool_use':
        calls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
        break;
      default:
        losses.add(`content_block.${String(block.type)}`);
    }
  }
  const out: ChatChoice['message'] = { role: 'assistant', content: text ?? null };
  if (reasoning !== undefined) {
    out.reasoning_content = reasoning;
    out.reasoning_signature = signature;
  }
  if (calls.length > 0) out.tool_calls = calls;
  const choice: ChatChoice = { index: 0, message: out, finish_reason: finishReasonOf(message.stop_reason) };
  if (typeof message.stop_sequence === 'string') choice.stop_sequence = message.stop_sequence;
  return {
    value: {
      id: String(message.id),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: String(message.model),
      choices: [choice],
      usage: chatUsage(message.usage as Json | undefined),
    },
    losses: losses.names,
  };
}
