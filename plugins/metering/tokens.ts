import { hiddenSlot, keptHistoryOf, readKeptHistory, type ChatChunk, type ChatRequest, type OperationId } from '../../core/index.js';
import { loadCompactBpe } from './bpe.js';

export type TokenizerName = 'cl100k_base' | 'o200k_base';

export interface Tokenizer {
  count(text: string): number;
}

/** Counts tokens without holding up the event loop (see BpeTokenizer). */
export interface AsyncTokenizer {
  /** Tokens in `text`; a count `stop` says is moot by then ends early (its figure is then not a count). */
  count(text: string, stop?: () => boolean): Promise<number>;
}

/**
 * The BPE tokenizer metering counts with: its tables (2 to 4 MB of typed arrays, see bpe.ts) are
 * loaded the first time a count is needed and shared by every tokenizer of the same encoding; a
 * long text is counted a few milliseconds at a time on the gateway's own thread.
 */
export class BpeTokenizer implements AsyncTokenizer {
  constructor(private readonly encoding: TokenizerName) {}

  async count(text: string, stop?: () => boolean): Promise<number> {
    if (!text) return 0;
    try {
      return await (await loadCompactBpe(this.encoding)).count(text, stop);
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

/**
 * Where the text a model reads goes while a request is walked: built into one string (to count
 * its tokens) or only measured (for the bounds taken before a call, which need its size alone).
 * One walk for both, so the measure is always the size of the text that would be built.
 */
/**
 * What an image in a prompt is counted as where the back end has not said (Anthropic's estimate
 * for a large image: width × height / 750, about 1,600 tokens for the 1,092 × 1,092 pixels it
 * scales images to). The gateway cannot see an image's size without decoding it.
 */
export const IMAGE_TOKENS = 1600;

/**
 * What a file or an audio clip the gateway cannot see into is counted as, two ways: an estimate
 * (what tokens-per-minute reserves, and what a call is charged when its back end reports no
 * usage) and an upper bound (what a budget's worst case reserves). A document given inline (a
 * PDF): a token for 16 bytes of its data, FILE_TOKENS at least, bounded by a token a byte (a page
 * of dense text is a few kilobytes and a few thousand tokens, its picture besides). Audio: a
 * token for 1,600 bytes (about ten tokens a second of 16 kB/s audio), bounded by a token for 32
 * bytes (no audio a model takes is encoded in fewer than 256 bits a second, nor read as more
 * than a few dozen tokens a second). One given by reference (a file id, a URL): FILE_TOKENS both.
 */
export const FILE_TOKENS = 1600;
const FILE_BYTES_A_TOKEN = 16;
const AUDIO_BYTES_A_TOKEN = 1600;
const AUDIO_BYTES_A_TOKEN_AT_MOST = 32;

export interface PromptSink {
  add(text: string): void;
  /** Images in the prompt (each counted as IMAGE_TOKENS). */
  images: number;
  /** Tokens the files and audio in the prompt are estimated at, and at most (see FILE_TOKENS). */
  attached: number;
  attachedBound: number;
  /** Bytes of the body the walk counted other than as text (attachments' data, token ids): see hiddenBytes. */
  covered: number;
  /** Messages (or Responses items) read: each costs a few tokens of framing. */
  messages: number;
  /** Token ids an embeddings input gives as numbers. */
  ids: number;
}

/** The prompt's text, built. */
export class PromptText implements PromptSink {
  text = '';
  images = 0;
  attached = 0;
  attachedBound = 0;
  covered = 0;
  messages = 0;
  ids = 0;

  add(text: string): void {
    this.text += text;
  }
}

/**
 * The prompt's size without building it: `chars` in UTF-16 code units (String#length), `bytes`
 * in UTF-8. The bytes of the parts add up to the bytes of the whole, except that a surrogate pair
 * split across two parts counts 6 bytes instead of 4: still an upper bound, which is what the
 * byte size is used for.
 */
export class PromptSize implements PromptSink {
  chars = 0;
  bytes = 0;
  images = 0;
  attached = 0;
  attachedBound = 0;
  covered = 0;
  messages = 0;
  ids = 0;

  add(text: string): void {
    this.chars += text.length;
    this.bytes += Buffer.byteLength(text);
  }
}

/** Content parts that are an image: chat's, the Responses API's, Anthropic's. */
const IMAGE_PARTS: ReadonlySet<string> = new Set(['image_url', 'input_image', 'image']);
/** Content parts that are a file or audio: chat's, the Responses API's, Anthropic's. */
const ATTACHED_PARTS: ReadonlySet<string> = new Set(['file', 'input_file', 'input_audio', 'document']);

/** The size in bytes of what a base64 text (or a data: URL) holds. */
function base64Bytes(text: string): number {
  const start = text.startsWith('data:') ? text.indexOf(',') + 1 : 0;
  return Math.floor(((text.length - start) * 3) / 4);
}

/** What a file or audio part is counted as, estimated and at most (see FILE_TOKENS). */
/** `part[name][field]`, when `part[name]` is an object. */
function nestedOf(part: Record<string, unknown>, name: string, field: string): unknown {
  const holder = part[name];
  return holder !== null && typeof holder === 'object' ? (holder as Record<string, unknown>)[field] : undefined;
}

function addAttached(sink: PromptSink, part: Record<string, unknown>): void {
  const nested = (name: string, field: string): unknown => nestedOf(part, name, field);
  // A document whose text is given (Anthropic's text and content sources) is text.
  const source = nested('source', 'type');
  if (source === 'text' && typeof nested('source', 'data') === 'string') {
    sink.add(nested('source', 'data') as string);
    return;
  }
  if (source === 'content') {
    addContent(sink, nested('source', 'content'));
    return;
  }
  const audio = nested('input_audio', 'data');
  if (typeof audio === 'string') {
    sink.covered += audio.length;
    const bytes = base64Bytes(audio);
    sink.attached += Math.ceil(bytes / AUDIO_BYTES_A_TOKEN);
    sink.attachedBound += Math.ceil(bytes / AUDIO_BYTES_A_TOKEN_AT_MOST);
    return;
  }
  const data = nested('file', 'file_data') ?? part.file_data ?? nested('source', 'data');
  const bytes = typeof data === 'string' ? base64Bytes(data) : 0;
  if (typeof data === 'string') sink.covered += data.length;
  sink.attached += Math.max(FILE_TOKENS, Math.ceil(bytes / FILE_BYTES_A_TOKEN));
  sink.attachedBound += Math.max(FILE_TOKENS, bytes);
}

/** The tokens a prompt's images, files and audio are estimated at. */
export function attachedTokensOf(sink: Pick<PromptSink, 'images' | 'attached'>): number {
  return IMAGE_TOKENS * sink.images + sink.attached;
}

/** The tokens a prompt's images, files and audio may be at most. */
export function attachedBoundOf(sink: Pick<PromptSink, 'images' | 'attachedBound'>): number {
  return IMAGE_TOKENS * sink.images + sink.attachedBound;
}

/** The length of an image part's URL or data: chat's `image_url` (a string or `{url}`), Anthropic's `source.data`. */
function imageDataLength(part: Record<string, unknown>): number {
  const data = typeof part.image_url === 'string' ? part.image_url : (nestedOf(part, 'image_url', 'url') ?? nestedOf(part, 'source', 'data'));
  return typeof data === 'string' ? data.length : 0;
}

function addContent(sink: PromptSink, content: unknown): void {
  if (typeof content === 'string') {
    sink.add(content);
    return;
  }
  if (!Array.isArray(content)) return;
  for (const part of content as Array<{ type?: string; text?: unknown; refusal?: unknown }>) {
    const text = typeof part?.text === 'string' ? part.text : typeof part?.refusal === 'string' ? part.refusal : undefined;
    if (text === undefined) {
      if (IMAGE_PARTS.has(part?.type as string)) {
        sink.images++;
        // Its data (a data: URL, base64) is the image, counted as one: not text the body hides.
        sink.covered += imageDataLength(part as Record<string, unknown>);
      } else if (ATTACHED_PARTS.has(part?.type as string)) addAttached(sink, part as Record<string, unknown>);
      continue;
    }
    sink.add(text);
    sink.add('\n');
  }
}

/** The text of an answer's content: its parts' texts, a line between two (none after the last). */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  const built = new PromptText();
  addContent(built, content);
  const text = built.text;
  return text.endsWith('\n') ? text.slice(0, -1) : text;
}

/**
 * What an embeddings call's `input` holds: its text, and the token ids it gives as numbers (a
 * string, an array of strings, an array of ids, or an array of arrays of ids).
 */
function addInput(sink: PromptSink, input: unknown): void {
  if (typeof input === 'string') {
    sink.add(input);
    return;
  }
  if (!Array.isArray(input)) return;
  for (const item of input) {
    if (typeof item === 'string') {
      sink.add(item);
      sink.add('\n');
    } else if (typeof item === 'number') addIds(sink, [item]);
    else if (Array.isArray(item)) addIds(sink, item);
  }
}

/** Token ids given as numbers: a token each (and the bytes they take in the body, covered). */
function addIds(sink: PromptSink, ids: readonly unknown[]): void {
  for (const id of ids) {
    if (typeof id !== 'number') continue;
    sink.ids++;
    sink.covered += String(id).length + 1;
  }
}

/**
 * The bytes of the client's body that the walk did not read (fields it does not know: a
 * template, a schema, a vendor's own block): a token is at least a byte, so a bound counts them
 * as a token each. `clientBytes` is what the client's body holds (see clientBodyBytes).
 */
export function hiddenBytes(sink: Pick<PromptSink, 'covered'> & { bytes: number }, clientBytes: number): number {
  return Math.max(0, clientBytes - sink.bytes - sink.covered);
}

/** What clientBodyBytes found in a body, kept with it (the budget and the tokens per minute both ask). */
const CLIENT_BYTES = hiddenSlot<number>();

/**
 * What the body a client sent holds, in bytes: its texts (UTF-8) and its numbers (as written,
 * with a separator), not the JSON around them, so that a body whose every text the walk reads
 * has next to nothing left over.
 */
export function clientBodyBytes(source: { body?: unknown } | undefined): number {
  const body = source?.body;
  if (body === null || typeof body !== 'object') return 0;
  const kept = CLIENT_BYTES.get(body);
  if (kept !== undefined) return kept;
  const bytes = valueBytes(body, 0);
  CLIENT_BYTES.set(body, bytes);
  return bytes;
}

function valueBytes(value: unknown, depth: number): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number') return String(value).length + 1;
  if (value === null || typeof value !== 'object' || depth > 64) return 0;
  let sum = 0;
  if (Array.isArray(value)) for (const item of value) sum += valueBytes(item, depth + 1);
  else {
    const record = value as Record<string, unknown>;
    // Audio or video given inline (a Gemini client's inlineData): at the audio bound, not as text.
    const media = record.mimeType ?? record.mime_type ?? record.media_type;
    const timed = typeof media === 'string' && (media.startsWith('audio/') || media.startsWith('video/')) && typeof record.data === 'string';
    for (const key in record) {
      sum += timed && key === 'data' ? Math.ceil(base64Bytes(record.data as string) / AUDIO_BYTES_A_TOKEN_AT_MOST) : valueBytes(record[key], depth + 1);
    }
  }
  return sum;
}

/** A list of Responses items (objects), as opposed to an embeddings input (strings and token ids). */
function isItemList(input: unknown): input is Array<Record<string, unknown>> {
  return Array.isArray(input) && input.length > 0 && input.every((item) => item !== null && typeof item === 'object' && !Array.isArray(item));
}

/** A Responses API request: `input` with `instructions`, or a list of items, or `max_output_tokens`. */
function isResponsesBody(raw: Record<string, unknown>): boolean {
  return 'input' in raw && ('instructions' in raw || 'max_output_tokens' in raw || 'previous_response_id' in raw || 'tools' in raw || 'reasoning' in raw || isItemList(raw.input));
}

/** An embeddings request: `input` of strings or token ids, and nothing of the other shapes. */
function isEmbeddingsBody(body: Partial<ChatRequest> | undefined): body is Partial<ChatRequest> & { input: unknown } {
  if (!body || Array.isArray(body.messages) || !('input' in body)) return false;
  const raw = body as Record<string, unknown>;
  return !('prompt' in raw) && !isResponsesBody(raw);
}

/** The text of a Responses API `input` (a string or a list of items); each item is a message. */
function addItems(sink: PromptSink, input: unknown): void {
  if (typeof input === 'string') {
    // The user's message it is (and goes up as).
    sink.add('user\n');
    sink.add(input);
    sink.messages++;
    return;
  }
  if (!isItemList(input)) return;
  for (const item of input) {
    if (typeof item.role === 'string') {
      sink.add(item.role);
      sink.add('\n');
    }
    addContent(sink, item.content);
    // A custom tool call's `input` (a patch, say), a tool output as a list of parts.
    for (const field of ['name', 'arguments', 'input', 'output', 'text']) {
      const value = item[field];
      if (typeof value === 'string') {
        sink.add(value);
        sink.add('\n');
      } else if (field === 'output' && Array.isArray(value)) addContent(sink, value);
    }
    // A shell call's command.
    if (item.action !== null && typeof item.action === 'object') {
      sink.add(JSON.stringify(item.action));
      sink.add('\n');
    }
    if (Array.isArray(item.summary)) addContent(sink, item.summary);
  }
  sink.messages += input.length;
}

/**
 * The text a model reads in a request of any token operation, into `sink`: chat messages, tool
 * calls and results, tool definitions; a completion's prompt; a Responses call's instructions,
 * input and tools; an embeddings call's input (and its token ids).
 */
export function readPrompt(body: Partial<ChatRequest> | undefined, sink: PromptSink, operation?: OperationId): void {
  if (!body) return;
  const raw = body as Record<string, unknown>;
  // Earlier turns the back end keeps itself (a Responses previous_response_id) are billed as input too.
  const kept = keptHistoryOf(raw);
  if (kept) addItems(sink, kept);
  if (!Array.isArray(body.messages)) {
    // A completion's prompt: a text, a list of texts, token ids or lists of them (a Responses
    // call's `prompt` is a template reference, an object: read below with its input).
    const prompt = raw.prompt;
    if (operation !== 'responses' && operation !== 'compact' && (typeof prompt === 'string' || Array.isArray(prompt))) {
      if (typeof prompt === 'string') sink.add(prompt);
      else {
        let first = true;
        for (const p of prompt) {
          if (typeof p === 'number') addIds(sink, [p]);
          else if (Array.isArray(p)) addIds(sink, p);
          if (typeof p !== 'string') continue;
          if (!first) sink.add('\n');
          sink.add(p);
          first = false;
        }
      }
      // Text after the insertion point is read too.
      if (typeof raw.suffix === 'string') sink.add(raw.suffix);
      return;
    }
    if (operation === 'embeddings') {
      addInput(sink, raw.input);
      return;
    }
    // A Responses call's `input` as a string is one message; an embeddings call's is its text alone.
    if (operation === 'responses' || operation === 'compact' || isResponsesBody(raw)) {
      if (typeof raw.instructions === 'string') {
        sink.add(raw.instructions);
        sink.add('\n');
      }
      addItems(sink, raw.input);
      if (Array.isArray(raw.tools) && raw.tools.length > 0) sink.add(JSON.stringify(raw.tools));
      return;
    }
    if ('input' in raw) addInput(sink, raw.input);
    return;
  }
  for (const message of body.messages) {
    // String(): a body that passed no schema (a tap's) may hold anything; a string stays itself.
    sink.add(String(message.role));
    sink.add('\n');
    addContent(sink, message.content);
    for (const call of message.tool_calls ?? []) {
      // A custom (freeform) tool's call has its name and text input under `custom`.
      const custom = (call as { custom?: { name?: unknown; input?: unknown } }).custom;
      sink.add(String(call.function?.name ?? custom?.name ?? ''));
      sink.add(' ');
      sink.add(String(call.function?.arguments ?? custom?.input ?? ''));
      sink.add('\n');
    }
  }
  if (Array.isArray(body.tools) && body.tools.length > 0) sink.add(JSON.stringify(body.tools));
  // The older way of giving tools, which back ends still take (and read as tools).
  const functions = (body as { functions?: unknown }).functions;
  if (Array.isArray(functions) && functions.length > 0) sink.add(JSON.stringify(functions));
  sink.messages += body.messages.length;
}

/** The text a model reads in a request, built (see readPrompt), and how many messages it has. */
export function promptText(body: Partial<ChatRequest> | undefined): { text: string; messages: number } {
  const built = new PromptText();
  readPrompt(body, built);
  return { text: built.text, messages: built.messages };
}

/** The size of the text a model reads in a request (see PromptSize), without building it. */
export function promptSize(body: Partial<ChatRequest> | undefined, operation?: OperationId): PromptSize {
  const size = new PromptSize();
  readPrompt(body, size, operation);
  return size;
}

/**
 * The inputs of an embeddings call or the prompts of a completion, each on its own: the texts
 * (a completion's `suffix` among them: text after the insertion point is read too) and the
 * token ids given as numbers. Undefined for any other body (a chat's, a Responses call's).
 * These are what the back end reads, with nothing between them and no chat framing around
 * them: each input or prompt is tokenized apart, so they are counted apart and added up.
 */
export function separateInputs(body: Partial<ChatRequest> | undefined, operation?: OperationId): { texts: string[]; ids: number } | undefined {
  if (!body || operation === 'responses' || operation === 'compact') return undefined;
  const raw = body as Record<string, unknown>;
  if (Array.isArray(body.messages)) return undefined;
  const prompt = raw.prompt;
  const completion = (operation === undefined || operation === 'completion') && (typeof prompt === 'string' || Array.isArray(prompt));
  if (!completion && operation !== 'embeddings' && !isEmbeddingsBody(body)) return undefined;
  const texts: string[] = [];
  let ids = 0;
  const take = (value: unknown): void => {
    if (typeof value === 'string') texts.push(value);
    else if (typeof value === 'number') ids++;
    else if (Array.isArray(value)) for (const id of value) if (typeof id === 'number') ids++;
  };
  const list = completion ? prompt : raw.input;
  if (Array.isArray(list)) for (const item of list) take(item);
  else take(list);
  if (completion && typeof raw.suffix === 'string') texts.push(raw.suffix);
  return { texts, ids };
}

/** Keys whose values no reader of a prompt sees as text: labels, ids, signatures, caching marks. */
const LABEL_KEYS = new Set(['type', 'id', 'tool_use_id', 'signature', 'thoughtSignature', 'thought_signature', 'cache_control', 'media_type', 'mimeType', 'mime_type']);

/**
 * The UTF-8 bytes of the texts a value holds (its strings, not its labels, ids or signatures):
 * what a back end's tokenizer reads of a block this gateway has no place for (see the count
 * endpoints), at about four bytes a token.
 */
export function textBytes(value: unknown, depth = 0): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (value === null || typeof value !== 'object' || depth > 64) return 0;
  let sum = 0;
  if (Array.isArray(value)) for (const item of value) sum += textBytes(item, depth + 1);
  else for (const [key, item] of Object.entries(value)) if (!LABEL_KEYS.has(key)) sum += textBytes(item, depth + 1);
  return sum;
}

/**
 * promptTokens, counted without holding up the event loop; with `atMost`, the files and audio
 * at their upper bound (what a budget's worst case takes) rather than their estimate.
 */
export async function countPromptTokens(tokenizer: AsyncTokenizer, body: Partial<ChatRequest> | undefined, operation?: OperationId, atMost = false): Promise<number> {
  // Earlier turns its back end keeps, left to be read when a count needs them.
  if (body) await readKeptHistory(body);
  // Embeddings and completions: each input's (or prompt's) tokens, added up; no chat framing.
  const inputs = separateInputs(body, operation);
  if (inputs) {
    const counts = await Promise.all(inputs.texts.map((text) => tokenizer.count(text)));
    return counts.reduce((sum, tokens) => sum + tokens, inputs.ids);
  }
  const built = new PromptText();
  readPrompt(body, built, operation);
  return (await tokenizer.count(built.text)) + built.ids + 4 * built.messages + 3 + (atMost ? attachedBoundOf(built) : attachedTokensOf(built));
}

/** Tokens a chat prompt costs: the text, plus the few tokens each message's framing takes (embeddings and completions: their inputs' tokens alone). */
export function promptTokens(tokenizer: Tokenizer, body: Partial<ChatRequest> | undefined): number {
  const inputs = separateInputs(body);
  if (inputs) return inputs.texts.reduce((sum, text) => sum + tokenizer.count(text), inputs.ids);
  const built = new PromptText();
  readPrompt(body, built);
  return tokenizer.count(built.text) + built.ids + 4 * built.messages + 3 + attachedTokensOf(built);
}

/** Responses stream events whose `delta` is model output (text, refusal, reasoning, tool arguments). */
const OUTPUT_DELTA_EVENTS = new Set([
  'response.output_text.delta',
  'response.custom_tool_call_input.delta',
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
    if (typeof item.input === 'string') out += item.input;
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

/**
 * How many answers a chat or completion call may be charged output for: `n` choices (a
 * completion's `best_of`, when larger, is generated and billed too) for each prompt of a
 * completion's array of prompts.
 */
export function answersAsked(body: Partial<ChatRequest> | undefined): number {
  const raw = (body ?? {}) as Record<string, unknown>;
  const prompts = Array.isArray(raw.prompt) && raw.prompt.some((p) => typeof p === 'string' || Array.isArray(p)) ? raw.prompt.length : 1;
  const whole = (value: unknown): number => (typeof value === 'number' && Number.isInteger(value) && value > 1 ? value : 1);
  return prompts * Math.max(whole(raw.n), whole(raw.best_of));
}
