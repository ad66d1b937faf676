import { untagSignature, type ChatRequest, type ChatResponse } from '../../../core/index.js';
import { fromCanonicalRequest, Losses, NATIVE_SIGNER, type Translated } from '../../formats/anthropic-messages/request.js';
import { fromMessage } from '../../formats/anthropic-messages/response.js';

/**
 * Canonical chat <-> Anthropic's Messages API, for the `anthropic` provider.
 *
 * The translation itself is the anthropic-messages format's (fromCanonicalRequest, fromMessage:
 * one copy of the mapping, tested both ways there). What is added here is what the real API
 * insists on and a client of another format does not know about: a max_tokens, thinking
 * budgets below max_tokens, no sampling changes or forced tool use while thinking, no
 * unsigned thinking blocks handed back.
 */

type Json = Record<string, unknown>;

export interface MessagesRequestOptions {
  /** The back end's model name. */
  model: string;
  stream: boolean;
  /** max_tokens when the request has none. */
  defaultMaxTokens: number;
}

/** Anthropic's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1024;

/** Fields whose value means "the default", which is no loss when the Messages API lacks them. */
function isDefault(request: ChatRequest, name: string): boolean {
  const value = request[name];
  switch (name) {
    case 'n':
      return value === 1;
    case 'logprobs':
      return value === false;
    case 'presence_penalty':
    case 'frequency_penalty':
      return value === 0;
    default:
      return false;
  }
}

/** A canonical chat request as the body of POST /v1/messages. */
export function toMessagesRequest(request: ChatRequest, options: MessagesRequestOptions): Translated<Json> {
  const translated = fromCanonicalRequest(request);
  const body = translated.value;
  const losses = new Losses(translated.losses.filter((name) => !isDefault(request, name)));

  body.model = options.model;
  if (options.stream) body.stream = true;
  else delete body.stream;
  const asked = request.max_completion_tokens ?? request.max_tokens;
  const askedMax = typeof asked === 'number';
  if (!askedMax) body.max_tokens = options.defaultMaxTokens;

  if (request.response_format && request.response_format.type !== 'text' && request.response_format.type !== 'json_schema') {
    losses.add(`response_format.${request.response_format.type}`);
  }

  const messages = body.messages as Json[];
  dropUnsignedThinking(messages, losses, 'reasoning_content.unsigned');

  // An assistant turn with nothing in it (an OpenAI client's `content: ""`) is refused by the
  // API; it carries nothing, so it goes. The last turn may stay empty (it is a prefill).
  for (let i = messages.length - 2; i >= 0; i--) {
    const message = messages[i]!;
    if (message.role === 'assistant' && (message.content === '' || (Array.isArray(message.content) && message.content.length === 0))) messages.splice(i, 1);
  }

  // A tool choice without tools: `auto` and `none` are what happens anyway; a forced choice of
  // no tool cannot be carried. The API refuses tool_choice without tools.
  if (body.tool_choice !== undefined && body.tools === undefined) {
    const type = (body.tool_choice as Json).type;
    if (type !== 'auto' && type !== 'none') losses.add('tool_choice.without_tools');
    delete body.tool_choice;
  }

  const thinking = body.thinking as Json | undefined;
  if (thinking?.type === 'enabled') {
    const choice = body.tool_choice as Json | undefined;
    if (choice?.type === 'any' || choice?.type === 'tool') {
      // The API refuses forced tool use with thinking; the client's tool choice wins.
      delete body.thinking;
      losses.add('reasoning_effort.with_forced_tool_choice');
    } else if (toolTurnWithoutThinking(messages)) {
      // With thinking on, the API wants the last assistant turn of a tool loop to begin with its
      // signed thinking, which OpenAI-style clients do not hand back: this turn goes without.
      delete body.thinking;
      losses.add('reasoning_effort.tool_turn_without_thinking');
    } else {
      let budget = Number(thinking.budget_tokens);
      const max = Number(body.max_tokens);
      // Without a max_tokens of the client's, the answer keeps defaultMaxTokens beside the thinking.
      if (!askedMax) body.max_tokens = budget + options.defaultMaxTokens;
      else if (budget >= max) {
        if (max > MIN_THINKING_BUDGET) {
          budget = max - 1;
          losses.add('reasoning_effort.budget_capped_by_max_tokens');
        } else {
          budget = 0;
          losses.add('reasoning_effort.max_tokens_too_small');
        }
      }
      if (budget === 0) delete body.thinking;
      else {
        thinking.budget_tokens = budget;
        // Thinking allows no temperature but 1 and a top_p of at least 0.95.
        if (typeof body.temperature === 'number' && body.temperature !== 1) {
          delete body.temperature;
          losses.add('temperature.with_thinking');
        }
        if (typeof body.top_p === 'number' && body.top_p < 0.95) {
          delete body.top_p;
          losses.add('top_p.with_thinking');
        }
      }
    }
  }
  // Current Claude models refuse temperature and top_p together; OpenAI's clients may send both.
  if (typeof body.temperature === 'number' && typeof body.top_p === 'number') {
    // A top_p of 1 keeps every token: leaving it out changes nothing.
    if (body.top_p < 1) losses.add('top_p.with_temperature');
    delete body.top_p;
  }
  return { value: body, losses: losses.names };
}

/**
 * Reasoning handed back: Anthropic checks every thinking block's signature, so reasoning without
 * one (from a back end that does not sign, or a gateway's translation of such an answer) cannot
 * go up; the turn keeps the rest, or goes when nothing is left. Changes `messages` in place.
 */
export function dropUnsignedThinking(messages: Json[], losses: Losses, loss: string): void {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (message.role !== 'assistant' || !Array.isArray(message.content)) continue;
    const blocks = (message.content as Json[]).filter((block) => !(block.type === 'thinking' && !block.signature));
    if (blocks.length === message.content.length) continue;
    losses.add(loss);
    if (blocks.length > 0) message.content = blocks;
    else messages.splice(i, 1);
  }
}

/** Whether a thinking block cannot go up as it is: no signature, or one this gateway tagged (see tagSignature). */
function needsChange(block: Json): boolean {
  return block?.type === 'thinking' && (!block.signature || untagSignature(String(block.signature)).maker !== undefined);
}

/**
 * A messages body as a client sent it, made acceptable to Anthropic when an earlier answer came
 * from another back end (a fallback target): thinking blocks without a signature, or with one
 * another type of back end made (tagged with its maker), are left out, and thinking is turned off
 * for a tool loop whose last call then has no thinking before it. The body itself when nothing
 * needed changing; else a copy, the changes named as losses.
 */
export function forAnthropic(body: Json, losses: Losses): Json {
  const messages = body.messages as Json[] | undefined;
  if (!Array.isArray(messages) || !messages.some((m) => m?.role === 'assistant' && Array.isArray(m.content) && (m.content as Json[]).some(needsChange))) {
    return body;
  }
  const copy: Json = { ...body, messages: messages.map((m) => (m?.role === 'assistant' && Array.isArray(m.content) ? { ...m, content: [...(m.content as Json[])] } : m)) };
  const copied = copy.messages as Json[];
  dropUnsignedThinking(copied, losses, 'thinking.unsigned');
  for (const message of copied) {
    if (message.role !== 'assistant' || !Array.isArray(message.content)) continue;
    message.content = (message.content as Json[]).map((block) => {
      if (block?.type !== 'thinking') return block;
      const { signature, maker } = untagSignature(String(block.signature));
      if (maker === undefined) return block;
      // Tagged by this gateway: Anthropic's own goes up as Anthropic made it; another's is no signature here.
      return { ...block, signature: maker === NATIVE_SIGNER ? signature : '' };
    });
  }
  dropUnsignedThinking(copied, losses, 'thinking.other_back_end');
  const thinking = copy.thinking as Json | undefined;
  if ((thinking?.type === 'enabled' || thinking?.type === 'adaptive') && toolTurnWithoutThinking(copied)) {
    delete copy.thinking;
    losses.add('thinking.tool_turn_without_thinking');
  }
  return copy;
}

/** Whether the last assistant turn calls a tool without beginning with a thinking block. */
function toolTurnWithoutThinking(messages: Json[]): boolean {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!;
    if (message.role !== 'assistant') continue;
    if (!Array.isArray(message.content)) return false;
    const blocks = message.content as Json[];
    if (!blocks.some((block) => block.type === 'tool_use')) return false;
    const first = blocks[0]?.type;
    return first !== 'thinking' && first !== 'redacted_thinking';
  }
  return false;
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Whether a parsed answer is a message the translation can read (else: a broken back end). */
export function isMessage(value: unknown): value is Json {
  return isObject(value) && value.type === 'message' && Array.isArray(value.content) && (value.content as unknown[]).every(isObject);
}

/** A Messages API answer as a canonical chat answer. */
export function fromMessagesResponse(message: Json): Translated<ChatResponse> {
  const translated = fromMessage(message);
  const response = translated.value;
  const out = response.choices[0]!.message;
  // A thinking block always has a signature from Anthropic; anything else is no signature.
  if (out.reasoning_content !== undefined) {
    const signatures = new Set<string>();
    for (const block of message.content as Json[]) {
      if (block.type === 'thinking' && typeof block.signature === 'string' && block.signature) signatures.add(block.signature);
    }
    // Interleaved thinking signs each block: their texts, joined in one answer, are vouched for by
    // neither signature, and Anthropic would refuse either on the joined text handed back.
    if (signatures.size > 1 && !translated.losses.includes('thinking.signatures_merged')) translated.losses.push('thinking.signatures_merged');
    if (signatures.size !== 1) delete out.reasoning_signature;
    else out.reasoning_signature = [...signatures][0];
  }
  if (response.choices[0]!.finish_reason === null) response.choices[0]!.finish_reason = 'stop';
  // No usage from the back end: leave it unknown so the gateway counts it, not zero.
  if (!isObject(message.usage)) delete response.usage;
  return translated;
}
