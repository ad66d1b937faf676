import { Worker } from 'node:worker_threads';
import type { ChatChunk, ChatRequest } from '../../core/index.js';

export type TokenizerName = 'cl100k_base' | 'o200k_base';

export interface Tokenizer {
  count(text: string): number;
}

/** Counts tokens on another thread (see TokenizerThread). */
export interface AsyncTokenizer {
  count(text: string): Promise<number>;
}

/**
 * A BPE tokenizer on a worker thread, started on the first count and stopped after `idleMs`
 * without one. Its tables (tens of MB) stay out of the main heap, where every major garbage
 * collection would have to walk them, and are given back when counting stops; a long text is
 * counted without holding up other calls.
 */
export class TokenizerThread implements AsyncTokenizer {
  private worker: Worker | undefined;
  private next = 0;
  private readonly waiting = new Map<number, { resolve: (tokens: number) => void; text: string }>();
  private idle: NodeJS.Timeout | undefined;

  constructor(
    private readonly encoding: TokenizerName,
    private readonly idleMs = 30_000,
  ) {}

  /** Whether the thread is running now. */
  get running(): boolean {
    return this.worker !== undefined;
  }

  count(text: string): Promise<number> {
    if (!text) return Promise.resolve(0);
    const worker = this.start();
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    const id = this.next++;
    return new Promise<number>((resolve) => {
      this.waiting.set(id, { resolve, text });
      worker.postMessage({ id, text });
    });
  }

  /** Stop the thread now (at shutdown); counts still waiting get the byte bound. */
  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (this.idle) clearTimeout(this.idle);
    this.fallBack();
    await worker?.terminate();
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    // A small young generation: the thread's garbage is one message and one count at a time;
    // its tables live in the old generation (about 7 MB less resident than V8's default).
    const worker = new Worker(new URL('./tokenizer-worker.js', import.meta.url), {
      workerData: { encoding: this.encoding },
      resourceLimits: { maxYoungGenerationSizeMb: 2 },
    });
    worker.unref();
    worker.on('message', (answer: { id: number; tokens: number }) => {
      const entry = this.waiting.get(answer.id);
      if (!entry) return;
      this.waiting.delete(answer.id);
      entry.resolve(answer.tokens);
      if (this.waiting.size === 0 && this.worker === worker) {
        this.idle = setTimeout(() => void this.stopIdle(worker), this.idleMs);
        this.idle.unref();
      }
    });
    // A thread that dies (out of memory, a bug) must not leave counts waiting forever.
    const lost = () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fallBack();
    };
    worker.on('error', lost);
    worker.on('exit', lost);
    this.worker = worker;
    return worker;
  }

  private async stopIdle(worker: Worker): Promise<void> {
    if (this.worker !== worker || this.waiting.size > 0) return;
    this.worker = undefined;
    await worker.terminate();
  }

  /** Counts that cannot be answered any more get the byte bound (a token is at least one byte). */
  private fallBack(): void {
    for (const entry of this.waiting.values()) entry.resolve(Buffer.byteLength(entry.text));
    this.waiting.clear();
  }
}

/** Load a BPE tokenizer in this thread (it takes tens of milliseconds and tens of MB). */
export async function loadTokenizer(name: TokenizerName): Promise<Tokenizer> {
  const module =
    name === 'o200k_base' ? await import('gpt-tokenizer/encoding/o200k_base') : await import('gpt-tokenizer/encoding/cl100k_base');
  return { count: (text: string) => (text ? module.countTokens(text) : 0) };
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
  if (!body) return { text: '', messages: 0 };
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

/** promptTokens, counted on the tokenizer thread. */
export async function countPromptTokens(tokenizer: AsyncTokenizer, body: Partial<ChatRequest> | undefined): Promise<number> {
  if (isEmbeddingsBody(body)) {
    const { text, ids } = inputOf(body.input);
    return (await tokenizer.count(text)) + ids;
  }
  const { text, messages } = promptText(body);
  return (await tokenizer.count(text)) + 4 * messages + 3;
}

/** Tokens a chat prompt costs: the text, plus the few tokens each message's framing takes. */
export function promptTokens(tokenizer: Tokenizer, body: Partial<ChatRequest> | undefined): number {
  if (isEmbeddingsBody(body)) {
    // Embeddings: the input's tokens, no chat framing.
    const { text, ids } = inputOf(body.input);
    return tokenizer.count(text) + ids;
  }
  const { text, messages } = promptText(body);
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
