import type { ChatChunk, ChatRequest } from '../../core/index.js';
import { loadCompactBpe } from './bpe.js';

export type TokenizerName = 'cl100k_base' | 'o200k_base';

export interface Tokenizer {
  count(text: string): number;
}

/** Counts tokens without holding up the event loop (see BpeTokenizer). */
export interface AsyncTokenizer {
  count(text: string): Promise<number>;
}

/**
 * The BPE tokenizer metering counts with: its tables (2 to 4 MB of typed arrays, see bpe.ts) are
 * loaded the first time a count is needed and shared by every tokenizer of the same encoding; a
 * long text is counted a few milliseconds at a time on the gateway's own thread.
 */
export class BpeTokenizer implements AsyncTokenizer {
  constructor(private readonly encoding: TokenizerName) {}

  async count(text: string): Promise<number> {
    if (!text) return 0;
    try {
      return await (await loadCompactBpe(this.encoding)).count(text);
    } catch {
      // Tables that cannot be loaded: a token is at least one byte, so the byte count bounds it.
      return Buffer.byteLength(text);
    }
  }
}

/** Load a BPE tokenizer that counts at once (for short texts and tests). */
export async function loadTokenizer(name: TokenizerName): Promise<Tokenizer> {
  const bpe = await loadCompactBpe(name);
  return { count: (text: string) => (text ? bpe.countNow(text) : 0) };
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content as Array<{ type?: string; text?: unknown; refusal?: unknown }>) {
    if (typeof part?.text === 'string') out += `${part.text}\n`;
    else if (typeof part?.refusal === 'string') out += `${part.refusal}\n`;
  }
  return out;
}

/**
 * What an embeddings call's `input` holds: its text, and the token ids it gives as numbers (a
 * string, an array of strings, an array of ids, or an array of arrays of ids).
 */
export function inputOf(input: unknown): { text: string; ids: number } {
  if (typeof input === 'string') return { text: input, ids: 0 };
  if (!Array.isArray(input)) return { text: '', ids: 0 };
  let text = '';
  let ids = 0;
  for (const item of input) {
    if (typeof item === 'string') text += `${item}\n`;
    else if (typeof item === 'number') ids++;
    else if (Array.isArray(item)) ids += item.length;
  }
  return { text, ids };
}

/** A list of Responses items (objects), as opposed to an embeddings input (strings and token ids). */
function isItemList(input: unknown): input is Array<Record<string, unknown>> {
  return Array.isArray(input) && input.length > 0 && input.every((item) => item !== null && typeof item === 'object' && !Array.isArray(item));
}

/** A Responses API request: `input` with `instructions`, or a list of items, or `max_output_tokens`. */
function isResponsesBody(raw: Record<string, unknown>): boolean {
  return 'input' in raw && ('instructions' in raw || 'max_output_tokens' in raw || 'previous_response_id' in raw || isItemList(raw.input));
}

/** An embeddings request: `input` of strings or token ids, and nothing of the other shapes. */
function isEmbeddingsBody(body: Partial<ChatRequest> | undefined): body is Partial<ChatRequest> & { input: unknown } {
  if (!body || Array.isArray(body.messages) || !('input' in body)) return false;
  const raw = body as Record<string, unknown>;
  return !('prompt' in raw) && !isResponsesBody(raw);
}

/** The text of a Responses API `input` (a string or a list of items) and how many items it has. */
function itemsText(input: unknown): { text: string; messages: number } {
  if (typeof input === 'string') return { text: input, messages: 1 };
  if (!isItemList(input)) return { text: '', messages: 0 };
  let text = '';
  for (const item of input) {
    if (typeof item.role === 'string') text += `${item.role}\n`;
    text += contentText(item.content);
    for (const field of ['name', 'arguments', 'output', 'text']) if (typeof item[field] === 'string') text += `${item[field] as string}\n`;
    if (Array.isArray(item.summary)) text += contentText(item.summary);
  }
  return { text, messages: input.length };
}

/**
 * The text a model reads in a request of any token operation: chat messages, tool calls and
 * results, tool definitions; a completion's prompt; a Responses call's instructions, input and
 * tools; an embeddings call's input.
 */
export function promptText(body: Partial<ChatRequest> | undefined): { text: string; messages: number } {
  if (!body) return NO_PROMPT;
  let found = prompts.get(body);
  if (!found) {
    found = readPrompt(body);
    prompts.set(body, found);
  }
  return found;
}

/**
 * What promptText found per body: rate limits (their estimate) and metering (the budget's bound)
 * both read the prompt of every call, one after the other, and a long conversation's text is
 * built once. Both are bounds taken before the call goes up; a count that bills (countPromptTokens)
 * reads the body again, so a tap that changed it in place since is counted as it went.
 */
const prompts = new WeakMap<object, { text: string; messages: number }>();
const NO_PROMPT: { readonly text: string; readonly messages: number } = Object.freeze({ text: '', messages: 0 });

function readPrompt(body: Partial<ChatRequest>): { text: string; messages: number } {
  const raw = body as Record<string, unknown>;
  if (!Array.isArray(body.messages)) {
    if ('prompt' in raw) {
      const prompt = raw.prompt;
      if (typeof prompt === 'string') return { text: prompt, messages: 0 };
      return { text: Array.isArray(prompt) ? prompt.filter((p): p is string => typeof p === 'string').join('\n') : '', messages: 0 };
    }
    if (isResponsesBody(raw)) {
      const { text, messages } = itemsText(raw.input);
      const instructions = typeof raw.instructions === 'string' ? `${raw.instructions}\n` : '';
      const tools = Array.isArray(raw.tools) && raw.tools.length > 0 ? JSON.stringify(raw.tools) : '';
      return { text: instructions + text + tools, messages };
    }
    if ('input' in raw) return { text: inputOf(raw.input).text, messages: 0 };
    return { text: '', messages: 0 };
  }
  let text = '';
  for (const message of body.messages) {
    text += `${message.role}\n${contentText(message.content)}`;
    for (const call of message.tool_calls ?? []) text += `${call.function?.name ?? ''} ${call.function?.arguments ?? ''}\n`;
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) text += JSON.stringify(body.tools);
  return { text, messages: body.messages.length };
}

/** promptTokens, counted without holding up the event loop. */
export async function countPromptTokens(tokenizer: AsyncTokenizer, body: Partial<ChatRequest> | undefined): Promise<number> {
  if (isEmbeddingsBody(body)) {
    const { text, ids } = inputOf(body.input);
    return (await tokenizer.count(text)) + ids;
  }
  const { text, messages } = body ? readPrompt(body) : NO_PROMPT;
  return (await tokenizer.count(text)) + 4 * messages + 3;
}

/** Tokens a chat prompt costs: the text, plus the few tokens each message's framing takes. */
export function promptTokens(tokenizer: Tokenizer, body: Partial<ChatRequest> | undefined): number {
  if (isEmbeddingsBody(body)) {
    // Embeddings: the input's tokens, no chat framing.
    const { text, ids } = inputOf(body.input);
    return tokenizer.count(text) + ids;
  }
  const { text, messages } = body ? readPrompt(body) : NO_PROMPT;
  return tokenizer.count(text) + 4 * messages + 3;
}

/** Responses stream events whose `delta` is model output (text, refusal, reasoning, tool arguments). */
const OUTPUT_DELTA_EVENTS = new Set([
  'response.output_text.delta',
  'response.refusal.delta',
  'response.reasoning_text.delta',
  'response.reasoning_summary_text.delta',
  'response.function_call_arguments.delta',
]);

/**
 * What a streamed chunk delivered to the client as model output: a chat chunk's text, refusal,
 * reasoning and tool calls; a completion chunk's text; a Responses event's delta.
 */
export function deliveredText(chunk: ChatChunk): string {
  const event = chunk as unknown as { type?: unknown; delta?: unknown };
  if (typeof event?.type === 'string') return OUTPUT_DELTA_EVENTS.has(event.type) && typeof event.delta === 'string' ? event.delta : '';
  let out = '';
  if (!Array.isArray(chunk?.choices)) return out;
  for (const choice of chunk.choices) {
    const text = (choice as { text?: unknown })?.text;
    if (typeof text === 'string') out += text;
    const delta = choice?.delta;
    if (!delta || typeof delta !== 'object') continue;
    if (typeof delta.content === 'string') out += delta.content;
    if (typeof delta.refusal === 'string') out += delta.refusal;
    const reasoning = (delta as { reasoning_content?: unknown }).reasoning_content;
    if (typeof reasoning === 'string') out += reasoning;
    if (delta.tool_calls) {
      for (const call of delta.tool_calls) {
        if (call.function?.name) out += call.function.name;
        if (call.function?.arguments) out += call.function.arguments;
      }
    }
  }
  return out;
}

/** The model output of a Responses `output` list: message text and refusals, reasoning, function calls. */
function outputItemsText(output: unknown[]): string {
  let out = '';
  for (const item of output as Array<Record<string, unknown>>) {
    if (!item || typeof item !== 'object') continue;
    out += contentText(item.content);
    if (Array.isArray(item.summary)) out += contentText(item.summary);
    if (typeof item.name === 'string') out += item.name;
    if (typeof item.arguments === 'string') out += item.arguments;
  }
  return out;
}

/**
 * The model output in a non-streamed reply: a chat reply's message text, refusals, reasoning and
 * tool calls; a completion's text; a Response's output items.
 */
export function replyText(body: unknown): string {
  const output = (body as { output?: unknown } | null)?.output;
  if (Array.isArray(output)) return outputItemsText(output);
  let out = '';
  for (const choice of (body as { choices?: Array<{ message?: Record<string, unknown>; text?: unknown }> })?.choices ?? []) {
    if (typeof choice.text === 'string') out += choice.text;
    const message = choice.message ?? {};
    out += contentText(message.content);
    if (typeof message.refusal === 'string') out += message.refusal;
    if (typeof message.reasoning_content === 'string') out += message.reasoning_content;
    for (const call of (message.tool_calls as Array<{ function?: { name?: string; arguments?: string } }> | undefined) ?? []) {
      out += `${call.function?.name ?? ''}${call.function?.arguments ?? ''}`;
    }
  }
  return out;
}
