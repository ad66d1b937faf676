import { createHash } from 'node:crypto';
import type { ChatMessage, ChatRequest, ContentPart, FunctionTool, RequestContext, ToolCall, ToolChoice } from '../../../core/index.js';
import { allowedToolsOf, base64DataUrl, clientPath, functionsAsTools, mediaType, GatewayError, NOTHING_TO_ANSWER, joinedSignatures, signatureFor, strictReady, untagSignature } from '../../../core/index.js';
import { structuredSchema } from './structured-schema.js';

/**
 * Messages request <-> canonical chat request.
 *
 * `toCanonicalRequest` is what the format does with every call; `fromCanonicalRequest` is its
 * inverse (for a back end that speaks messages, and for the round-trip tests). Whatever the
 * canonical form cannot carry is returned as a named loss, never dropped silently.
 */

type Json = Record<string, unknown>;

export interface Translated<T> {
  value: T;
  /** Names of what could not be carried across, each once, in the order met. */
  losses: string[];
}

/** A list of loss names that keeps each name once. */
export class Losses {
  /** `names`: the list to append to (a request's `losses`), or a new one. */
  constructor(readonly names: string[] = []) {}

  /** The request's own list (`ctx.losses`, made on first use), or a loose one without a request. */
  static of(ctx: RequestContext | undefined): Losses {
    return new Losses(ctx ? (ctx.losses ??= []) : []);
  }

  add(name: string): void {
    if (!this.names.includes(name)) this.names.push(name);
  }
}

// ---------------------------------------------------------------------------------------------
// Thinking budget <-> reasoning effort
// ---------------------------------------------------------------------------------------------

/**
 * budget_tokens -> reasoning_effort: below 4,000 tokens `low`, below 16,000 `medium`, from
 * 16,000 `high`. (Anthropic's minimum budget is 1,024.)
 */
export function effortForBudget(budget: number): 'low' | 'medium' | 'high' {
  if (budget < 4000) return 'low';
  if (budget < 16000) return 'medium';
  return 'high';
}

/**
 * reasoning_effort -> budget_tokens: the middle of each band above (minimal 1,024, low 2,048,
 * medium 8,192, high 24,576, xhigh 32,768), so effort -> budget -> effort is the identity.
 */
export function budgetForEffort(effort: string): number | undefined {
  switch (effort) {
    case 'minimal':
      return 1024;
    case 'low':
      return 2048;
    case 'medium':
      return 8192;
    case 'high':
      return 24576;
    case 'xhigh':
      return 32768;
    default:
      return undefined;
  }
}

/**
 * The provider type whose thinking signatures a Claude-style client gets and hands back as they
 * are; another type's are tagged with their maker (see tagSignature).
 */
export const NATIVE_SIGNER = 'anthropic';

// ---------------------------------------------------------------------------------------------
// messages -> canonical
// ---------------------------------------------------------------------------------------------

/** Top-level fields the translation carries (or deliberately maps); every other one is a loss. */
const CARRIED = new Set([
  'model',
  'messages',
  'max_tokens',
  'system',
  'temperature',
  'top_p',
  'top_k',
  'stream',
  'stop_sequences',
  'tools',
  'tool_choice',
  'thinking',
  'metadata',
  'output_config',
  'output_format',
]);

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function noteCacheControl(block: Json, losses: Losses): void {
  if (block.cache_control != null) losses.add('cache_control');
}

/** An image block's source as a canonical image part (base64 becomes a data: URL). */
/** Where a block is in the client's body: `messages[i].content[j]`, and `.content[k]` inside a tool result. */
function blockPath(i: number, j: number, k: number | undefined): string {
  return k === undefined ? `messages[${i}].content[${j}]` : `messages[${i}].content[${j}].content[${k}]`;
}

function imagePart(block: Json, losses: Losses, i: number, j: number, k?: number): ContentPart | undefined {
  const source = isObject(block.source) ? block.source : {};
  if (source.type === 'base64' && typeof source.data === 'string') {
    return { type: 'image_url', image_url: { url: `data:${String(source.media_type)};base64,${source.data}` } };
  }
  if (source.type === 'url' && typeof source.url === 'string') return clientPath.set({ type: 'image_url', image_url: { url: source.url } }, `${blockPath(i, j, k)}.source.url`);
  losses.add(`image.source.${String(source.type)}`);
  return undefined;
}

/** A document block: plain text becomes text, a base64 PDF a file part; anything else is lost. */
function documentPart(block: Json, losses: Losses): ContentPart | undefined {
  const source = isObject(block.source) ? block.source : {};
  if (block.citations != null) losses.add('document.citations');
  // What the client says about the document (for the model, not cited): no place for it in a part.
  if (block.context != null) losses.add('document.context');
  if (source.type === 'text' && typeof source.data === 'string') {
    if (typeof block.title === 'string' && block.title !== '') losses.add('document.title');
    return { type: 'text', text: source.data };
  }
  if (source.type === 'base64' && typeof source.data === 'string') {
    const file: Json = { file_data: `data:${String(source.media_type)};base64,${source.data}` };
    if (typeof block.title === 'string') file.filename = block.title;
    return { type: 'file', file };
  }
  losses.add(`document.source.${String(source.type)}`);
  return undefined;
}

/** The parts of a user turn (text, images, documents); other block types are losses. */
/** `i`, `j`, `k`: where the block is in the client's body (see blockPath). */
export function userPart(block: Json, losses: Losses, i: number, j: number, k?: number): ContentPart | undefined {
  noteCacheControl(block, losses);
  switch (block.type) {
    case 'text':
      if (block.citations != null) losses.add('text.citations');
      return { type: 'text', text: String(block.text) };
    case 'image':
      return imagePart(block, losses, i, j, k);
    case 'document':
      return documentPart(block, losses);
    default:
      losses.add(`content_block.${String(block.type)}`);
      return undefined;
  }
}

/**
 * A tool_result's content as canonical tool-message content: its text, images and documents, in
 * their order (a provider whose back end takes text only in a tool result moves the rest after
 * it: toolMediaAfter); no content at all is an empty string, as chat back ends refuse an empty list.
 */
function toolResultContent(block: Json, losses: Losses, i: number, j: number): string | ContentPart[] {
  const content = block.content;
  if (content === undefined) return '';
  if (typeof content === 'string') return content;
  const parts: ContentPart[] = [];
  for (const [k, item] of (content as Json[]).entries()) {
    noteCacheControl(item, losses);
    if (item.type === 'text') parts.push({ type: 'text', text: String(item.text) });
    else if (item.type === 'image' || item.type === 'document') {
      const part = userPart(item, losses, i, j, k);
      if (part) parts.push(part);
    } else losses.add(`tool_result.content.${String(item.type)}`);
  }
  return parts.length > 0 ? parts : '';
}

/**
 * A user turn: its tool results first, as `tool` messages in their order (chat wants them right
 * after the assistant's calls, whatever order the client put its blocks in), then one user
 * message with the turn's other blocks.
 */
function userMessages(content: string | Json[], losses: Losses, i: number, called: ReadonlySet<string>): ChatMessage[] {
  if (typeof content === 'string') return [{ role: 'user', content }];
  const out: ChatMessage[] = [];
  const parts: ContentPart[] = [];
  for (const [j, block] of content.entries()) {
    if (block.type === 'tool_result') {
      // A result of no call before it: Anthropic refuses it, and so do the back ends it would go
      // to (as a result naming no call); said here, where the client's own place for it is known.
      if (!called.has(backEndToolId(String(block.tool_use_id)))) {
        throw new GatewayError('invalid_request', {
          param: `messages[${i}].content[${j}].tool_use_id`,
          params: { detail: `unexpected tool_use_id found in tool_result blocks: ${String(block.tool_use_id).slice(0, 256)}. Each tool_result block must have a corresponding tool_use block in the previous message.` },
        });
      }
      noteCacheControl(block, losses);
      const message: ChatMessage = { role: 'tool', tool_call_id: backEndToolId(String(block.tool_use_id)), content: toolResultContent(block, losses, i, j) };
      if (block.is_error === true) message.tool_error = true;
      out.push(message);
      continue;
    }
    const part = userPart(block, losses, i, j);
    if (part) parts.push(part);
  }
  if (parts.length > 0) out.push({ role: 'user', content: parts });
  return out;
}

function assistantMessage(content: string | Json[], losses: Losses): ChatMessage {
  if (typeof content === 'string') return { role: 'assistant', content };
  const message: ChatMessage = { role: 'assistant', content: null };
  let text: string | undefined;
  const calls: ToolCall[] = [];
  let thoughts = 0;
  let signed = false;
  let sawToolUse = false;
  /** A tool call came since the last text: the next text is another paragraph, not the same one's rest. */
  let callSinceText = false;
  for (const block of content) {
    noteCacheControl(block, losses);
    switch (block.type) {
      case 'text':
        if (sawToolUse) losses.add('assistant.text_after_tool_use_order');
        if (block.citations != null) losses.add('text.citations');
        // Blocks side by side are one text (a cited answer is cut into several); text on both
        // sides of a call is two, which must not run together ("Let me check.The answer").
        text = text === undefined ? String(block.text) : text + (callSinceText ? '\n\n' : '') + String(block.text);
        callSinceText = false;
        break;
      case 'thinking':
        // A block with only a signature after unsigned thinking (what a stream gives when the
        // signature came after the thinking's text, as Gemini sends it) signs that thinking: not
        // another block. After signed thinking it is another block, whose signature wins.
        if (thoughts === 0 || String(block.thinking ?? '') !== '' || message.reasoning_signature !== undefined) thoughts++;
        if (thoughts > 1) losses.add('thinking.multiple_blocks');
        message.reasoning_content = (message.reasoning_content ?? '') + String(block.thinking);
        // An empty signature (what a back end that does not sign gave) is no signature. One
        // this gateway tagged names the type of back end that made it; any other is Anthropic's.
        if (typeof block.signature === 'string' && block.signature) {
          const { signature, maker } = untagSignature(block.signature, NATIVE_SIGNER);
          if (signed && (signature !== message.reasoning_signature || maker !== message.reasoning_signature_by)) {
            // Blocks signed apart, one text: neither signature vouches for it.
            losses.add('thinking.signatures_merged');
            delete message.reasoning_signature;
            delete message.reasoning_signature_by;
          } else if (!signed) {
            message.reasoning_signature = signature;
            if (maker !== undefined) message.reasoning_signature_by = maker;
          }
          signed = true;
        }
        break;
      case 'tool_use':
        sawToolUse = true;
        callSinceText = text !== undefined;
        calls.push({ id: backEndToolId(String(block.id)), type: 'function', function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
        break;
      default:
        losses.add(`content_block.${String(block.type)}`);
    }
  }
  if (text !== undefined) message.content = text;
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

function systemContent(system: string | Json[], losses: Losses): string | ContentPart[] {
  if (typeof system === 'string') return system;
  return system.map((block) => {
    noteCacheControl(block, losses);
    if (block.citations != null) losses.add('text.citations');
    return { type: 'text', text: String(block.text) };
  });
}

function canonicalTool(tool: Json, losses: Losses): FunctionTool | undefined {
  if (tool.type != null && tool.type !== 'custom') {
    losses.add(`tools.${String(tool.type)}`);
    return undefined;
  }
  noteCacheControl(tool, losses);
  const fn: FunctionTool['function'] = { name: String(tool.name) };
  if (typeof tool.description === 'string') fn.description = tool.description;
  fn.parameters = (tool.input_schema as Json | undefined) ?? { type: 'object' };
  if (typeof tool.strict === 'boolean') fn.strict = tool.strict;
  for (const key of Object.keys(tool)) {
    if (!['type', 'name', 'description', 'input_schema', 'cache_control', 'strict'].includes(key)) losses.add(`tools.${key}`);
  }
  return { type: 'function', function: fn };
}

function canonicalToolChoice(choice: Json): ToolChoice {
  switch (choice.type) {
    case 'any':
      return 'required';
    case 'tool':
      return { type: 'function', function: { name: String(choice.name) } };
    case 'none':
      return 'none';
    default:
      return 'auto';
  }
}

/** A validated messages body as a canonical chat request. */
export function toCanonicalRequest(body: Json): Translated<ChatRequest> {
  const losses = new Losses();
  const messages: ChatMessage[] = [];
  if (body.system !== undefined) messages.push({ role: 'system', content: systemContent(body.system as string | Json[], losses) });
  // The ids of the tool_use blocks of the last assistant turn (a result answers the assistant turn
  // before it, as Anthropic and OpenAI both require).
  let called = new Set<string>();
  for (const [i, turn] of (body.messages as Json[]).entries()) {
    const content = turn.content as string | Json[];
    if (turn.role === 'assistant') {
      const message = assistantMessage(content, losses);
      called = new Set((message.tool_calls ?? []).map((call) => call.id));
      messages.push(message);
    } else if (turn.role === 'system') messages.push({ role: 'system', content: systemContent(content, losses) });
    // (Consecutive user turns are one turn to Anthropic: they answer the same assistant turn.)
    else messages.push(...userMessages(content, losses, i, called));
  }
  // A last assistant turn is a prefill, which Claude continues; a chat back end answers anew.
  if ((body.messages as Json[]).at(-1)?.role === 'assistant') losses.add('assistant.prefill');

  const request: ChatRequest = { model: String(body.model), messages };
  if (typeof body.max_tokens === 'number') request.max_tokens = body.max_tokens;
  if (typeof body.temperature === 'number') request.temperature = body.temperature;
  // Chat completions has no top_k; Gemini takes it (topK): carried for the back ends that take it.
  // (A client's own Anthropic back end gets the body as sent.)
  if (typeof body.top_k === 'number') request.top_k = body.top_k;
  if (typeof body.top_p === 'number') request.top_p = body.top_p;
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) request.stop = body.stop_sequences as string[];
  if (body.stream === true) {
    request.stream = true;
    // Claude clients always get usage in message_delta: ask the back end for it.
    request.stream_options = { include_usage: true };
  }

  const tools = Array.isArray(body.tools) ? (body.tools as Json[]).map((t) => canonicalTool(t, losses)).filter((t): t is FunctionTool => Boolean(t)) : [];
  if (tools.length > 0) request.tools = tools;
  if (isObject(body.tool_choice)) {
    const choice = body.tool_choice;
    const forced = choice.type === 'any' || choice.type === 'tool';
    if (tools.length === 0) {
      // Without tools there is nothing to choose (`none` is then what happens anyway), and OpenAI
      // refuses a tool_choice sent without tools; a forced choice of server tools alone is lost.
      if (forced) losses.add('tool_choice.without_tools');
    } else if (choice.type === 'tool' && !tools.some((tool) => tool.function.name === String(choice.name))) {
      // The tool forced is one that went as a loss (a server tool): a chat back end refuses a
      // choice naming a function it was not given, so the choice goes too.
      losses.add('tool_choice.tool');
    } else request.tool_choice = canonicalToolChoice(choice);
    if (choice.disable_parallel_tool_use === true && tools.length > 0) request.parallel_tool_calls = false;
  }

  if (isObject(body.thinking)) {
    if (body.thinking.type === 'enabled' && typeof body.thinking.budget_tokens === 'number') {
      request.reasoning_effort = effortForBudget(body.thinking.budget_tokens);
      // A budget travels as its band: one the band does not stand for exactly is not carried.
      if (budgetForEffort(request.reasoning_effort) !== body.thinking.budget_tokens) losses.add('thinking.budget_tokens');
    } else if (body.thinking.type === 'adaptive') {
      losses.add('thinking.adaptive');
    } else if (body.thinking.type === 'disabled') {
      // Not carried: a back end whose model thinks by default (a reasoning model) cannot be told
      // not to in a way every one of them takes; a model that does not think loses nothing.
      losses.add('thinking.disabled');
    }
    if (body.thinking.display != null) losses.add('thinking.display');
  }
  if (isObject(body.output_config)) {
    const effort = body.output_config.effort;
    if (typeof effort === 'string') request.reasoning_effort = effort === 'max' ? 'xhigh' : effort;
    const format = body.output_config.format;
    if (isObject(format)) outputFormat(format, request, losses);
    for (const key of Object.keys(body.output_config)) if (key !== 'effort' && key !== 'format') losses.add(`output_config.${key}`);
  }
  if (isObject(body.output_format)) outputFormat(body.output_format, request, losses);

  if (isObject(body.metadata)) {
    for (const [key, value] of Object.entries(body.metadata)) {
      if (key === 'user_id') {
        if (typeof value === 'string') request.user = value;
      } else losses.add(`metadata.${key}`);
    }
  }
  for (const key of Object.keys(body)) {
    if (!CARRIED.has(key) && body[key] !== undefined) losses.add(key);
  }
  return { value: request, losses: losses.names };
}


/**
 * Structured output: `{type: json_schema, schema}` -> response_format json_schema, strict when
 * OpenAI's strict mode takes the schema as it is; otherwise not strict (the answer is then held to
 * the schema less firmly), named `output_format.strict`.
 */
function outputFormat(format: Json, request: ChatRequest, losses: Losses): void {
  if (format.type === 'json_schema' && isObject(format.schema)) {
    const strict = strictReady(format.schema);
    if (!strict) losses.add('output_format.strict');
    request.response_format = { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict } };
  } else losses.add(`output_format.${String(format.type)}`);
}

// ---------------------------------------------------------------------------------------------
// canonical -> messages
// ---------------------------------------------------------------------------------------------

/** An assistant turn's text: its text parts, and what it refused (a refusal part, or the message's `refusal`), which it said. */
/**
 * An assistant turn's texts, a text block each as the client gave them (its text parts, a
 * refusal part or field): Anthropic takes several text blocks in a turn, so none is run into
 * another. Blank ones say nothing and are left out (Anthropic refuses them).
 */
function textsOf(message: ChatMessage): string[] {
  const content = message.content;
  const texts = typeof content === 'string' ? [content] : Array.isArray(content) ? content.map((p) => (p.type === 'text' ? String(p.text) : p.type === 'refusal' ? String(p.refusal ?? '') : '')) : [];
  if (typeof message.refusal === 'string') texts.push(message.refusal);
  return texts.filter((text) => text.trim() !== '');
}

/** Anthropic's base64 image types; the others go as a named loss. */
const IMAGE_TYPES = new Set(['image/jpeg', 'image/png', 'image/gif', 'image/webp']);

/**
 * A base64 image's media type as Anthropic takes it: what its first bytes say it is (a client's
 * label may be wrong: a JPEG sent as image/png, which Anthropic refuses), else its label, lower-cased,
 * `image/jpg` (a common misspelling OpenAI takes) as `image/jpeg`.
 */
export function imageMediaType(label: string, base64: string): string {
  const head = Buffer.from(base64.slice(0, 16), 'base64');
  if (head[0] === 0x89 && head.subarray(1, 4).toString('latin1') === 'PNG') return 'image/png';
  if (head[0] === 0xff && head[1] === 0xd8 && head[2] === 0xff) return 'image/jpeg';
  if (head.subarray(0, 4).toString('latin1') === 'GIF8') return 'image/gif';
  if (head.subarray(0, 4).toString('latin1') === 'RIFF' && head.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return mediaType(label);
}

function blockOfPart(part: ContentPart, losses: Losses): Json | undefined {
  if (part.type === 'text') {
    const text = String(part.text ?? '');
    // Anthropic refuses an empty text block, and a message whose text is only whitespace; such a
    // block says nothing.
    return text.trim() === '' ? undefined : { type: 'text', text };
  }
  if (part.type === 'image_url') {
    const image = part.image_url as { url?: unknown; detail?: unknown } | undefined;
    const url = String(image?.url ?? '');
    // Claude has no detail level: one the client chose (not `auto`) is not carried.
    if (image?.detail !== undefined && image.detail !== 'auto') losses.add('image_url.detail');
    // data:<type>[;name=...];base64,<data>: parameters before base64 are allowed (RFC 2397).
    const data = base64DataUrl(url);
    return data ? { type: 'image', source: { type: 'base64', media_type: imageMediaType(data.type, data.data), data: data.data } } : { type: 'image', source: { type: 'url', url } };
  }
  if (part.type === 'file') {
    const file = (part.file ?? {}) as Json;
    const data = base64DataUrl(String(file.file_data ?? ''));
    if (data) {
      const media = data.type;
      // A base64 document is a PDF only; text goes as a text document, an image as an image.
      if (media === 'application/pdf') return titled({ type: 'document', source: { type: 'base64', media_type: media, data: data.data } }, file);
      if (media.startsWith('text/')) return titled({ type: 'document', source: { type: 'text', media_type: 'text/plain', data: Buffer.from(data.data, 'base64').toString('utf8') } }, file);
      const image = imageMediaType(media, data.data);
      if (IMAGE_TYPES.has(image)) return { type: 'image', source: { type: 'base64', media_type: image, data: data.data } };
      losses.add(`file.${media}`);
      return undefined;
    }
  }
  losses.add(`content_part.${part.type}`);
  return undefined;
}

/** A document block with the file's name as its title, when it has one. */
function titled(block: Json, file: Json): Json {
  if (typeof file.filename === 'string') block.title = file.filename;
  return block;
}

function blocksOf(content: ChatMessage['content'], losses: Losses): string | Json[] {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p) => cached(blockOfPart(p, losses), p)).filter((b): b is Json => Boolean(b));
}

/**
 * A block with the prompt-cache breakpoint its part carried (`cache_control: {type: 'ephemeral'}`,
 * a `ttl` too), as chat clients that know Claude mark their parts (the way OpenRouter and LiteLLM
 * take them): an OpenAI client's long prompt is then cached, and read back at the cached price.
 */
function cached(block: Json | undefined, part: unknown): Json | undefined {
  const mark = (part as { cache_control?: unknown } | null)?.cache_control;
  if (block && isObject(mark) && mark.type === 'ephemeral') block.cache_control = mark.ttl === undefined ? { type: 'ephemeral' } : { type: 'ephemeral', ttl: mark.ttl };
  return block;
}

function parseArguments(text: string, losses: Losses): unknown {
  try {
    const parsed = JSON.parse(text || '{}') as unknown;
    if (isObject(parsed)) return parsed;
  } catch {
    // fall through
  }
  losses.add('tool_calls.arguments_not_an_object');
  return {};
}

/** A canonical chat request as a messages body (the inverse of toCanonicalRequest). */
export function fromCanonicalRequest(canonical: ChatRequest): Translated<Json> {
  const losses = new Losses();
  // The older function calling (functions, function_call) as the tools this format knows.
  const request = functionsAsTools(canonical, losses);
  const body: Json = { model: request.model };
  const system: Array<string | ContentPart[]> = [];
  const messages: Json[] = [];
  let pendingUser: Json[] | undefined;
  /** Where the last user turn with nothing to say was (left out: Anthropic refuses one). */
  let emptyUser: number | undefined;
  const userBlocks = (): Json[] => {
    if (!pendingUser) {
      pendingUser = [];
      messages.push({ role: 'user', content: pendingUser });
    }
    return pendingUser;
  };
  for (const message of request.messages) {
    // Who spoke (several users of one conversation): a turn has no name here.
    if (typeof message.name === 'string' && message.name !== '') losses.add('messages.name');
    if (message.role === 'system' || message.role === 'developer') {
      if (messages.length > 0) losses.add('messages.system_after_first_turn');
      system.push(typeof message.content === 'string' ? message.content : ((message.content ?? []) as ContentPart[]));
      continue;
    }
    if (message.role === 'tool') {
      const content = message.content;
      const block: Json = { type: 'tool_result', tool_use_id: toolUseId(String(message.tool_call_id)) };
      block.content = typeof content === 'string' ? content : blocksOf(content ?? [], losses);
      if (message.tool_error === true) block.is_error = true;
      userBlocks().push(block);
      continue;
    }
    if (message.role === 'user') {
      const said = blocksOf(message.content ?? '', losses);
      // Empty or only whitespace: nothing Anthropic takes (it refuses such a message).
      const blocks = typeof said === 'string' && said.trim() === '' ? [] : said;
      // A user turn right after tool results joins their turn, as Anthropic requires.
      if (pendingUser) pendingUser.push(...(typeof blocks === 'string' ? [{ type: 'text', text: blocks }] : blocks));
      else if (blocks.length > 0) messages.push({ role: 'user', content: blocks });
      // Left out (it says nothing; Anthropic joins the turns around it); one that ends the
      // conversation is refused below.
      else emptyUser = messages.length;
      pendingUser = undefined;
      continue;
    }
    if (message.role === 'assistant') {
      pendingUser = undefined;
      // Image output of an earlier turn (another back end's): a Messages API assistant turn holds no images.
      if (Array.isArray(message.images) && message.images.length > 0) losses.add('message.images');
      const reasoning = message.reasoning_content;
      // A signature another type of back end made (a replayed Responses reasoning item) cannot be verified here.
      const signature = signatureFor(message, NATIVE_SIGNER);
      if (signature === undefined && typeof message.reasoning_signature === 'string' && message.reasoning_signature) {
        losses.add(joinedSignatures(message.reasoning_signature) ? 'reasoning_signature.joined' : 'reasoning_signature.other_back_end');
      }
      // A signature without reasoning text (Gemini's thoughtSignature) has no thinking block to ride in.
      else if (!reasoning && signature !== undefined) losses.add('reasoning_signature.without_reasoning');
      const plainText = (typeof message.content === 'string' || message.content == null) && !message.refusal;
      if (!reasoning && !message.tool_calls?.length && plainText) {
        // An answer with nothing in it is left out (it says nothing; Anthropic refuses an empty
        // turn), except an empty last one: the prefill Anthropic takes as it is.
        const said = typeof message.content === 'string' ? message.content : '';
        if (said.trim() !== '') messages.push({ role: 'assistant', content: said });
        else if (message === request.messages[request.messages.length - 1]) messages.push({ role: 'assistant', content: '' });
        continue;
      }
      const blocks: Json[] = [];
      if (typeof reasoning === 'string' && reasoning) {
        blocks.push({ type: 'thinking', thinking: reasoning, signature: signature ?? '' });
      }
      for (const text of textsOf(message)) blocks.push({ type: 'text', text });
      // An assistant turn holds only text, thinking and tool calls in the Messages API: an image or
      // file in one (a client's own history) is named, not dropped unseen.
      if (Array.isArray(message.content)) {
        for (const part of message.content) if (part.type !== 'text' && part.type !== 'refusal') losses.add(`assistant.content_part.${part.type}`);
      }
      for (const call of message.tool_calls ?? []) {
        blocks.push({ type: 'tool_use', id: toolUseId(call.id), name: call.function.name, input: parseArguments(call.function.arguments, losses) });
      }
      messages.push({ role: 'assistant', content: blocks });
      continue;
    }
    losses.add(`messages.role.${message.role}`);
  }
  if (system.length === 1 && typeof system[0] === 'string') body.system = system[0];
  else if (system.length > 0) {
    body.system = system.flatMap((s) => (typeof s === 'string' ? [{ type: 'text', text: s }] : s.map((p) => cached({ type: 'text', text: String(p.text ?? '') }, p)!)));
  }
  // Anthropic refuses a request without messages (a chat back end answers a system prompt alone).
  if (messages.length === 0) throw new GatewayError('invalid_request', { param: 'messages', params: { detail: NOTHING_TO_ANSWER } });
  // A conversation that ends with a user turn left empty would end on the model's turn, which
  // Anthropic reads as the start of its answer to continue: refused, not answered otherwise.
  if (emptyUser !== undefined && emptyUser === messages.length) {
    throw new GatewayError('invalid_request', { param: 'messages', params: { detail: "The last message has nothing this model's back end (Claude) takes: no text (it is empty or only whitespace), or only parts it cannot carry." } });
  }
  body.messages = messages;

  const maxTokens = request.max_completion_tokens ?? request.max_tokens;
  body.max_tokens = typeof maxTokens === 'number' ? maxTokens : 4096;
  if (typeof request.temperature === 'number') {
    if (request.temperature > 1) losses.add('temperature.above_1');
    body.temperature = Math.min(1, request.temperature);
  }
  if (typeof request.top_p === 'number') body.top_p = request.top_p;
  if (request.stop != null) {
    // Anthropic refuses a stop sequence that is empty or only whitespace (OpenAI clients send "\n").
    const stops = (Array.isArray(request.stop) ? request.stop : [request.stop]).filter((stop) => typeof stop === 'string');
    const kept = stops.filter((stop) => /\S/.test(stop));
    if (kept.length < stops.length) losses.add('stop.whitespace');
    if (kept.length > 0) body.stop_sequences = kept;
  }
  if (request.stream === true) body.stream = true;
  // A choice of allowed tools: only those are offered (the choice then says whether one must be called).
  // Naming none of the request's tools, the choice is lost (below) and every tool is still offered.
  const allowed = allowedToolsOf(request.tool_choice, request.tools);
  const offered = allowed?.tools ?? request.tools;
  if (offered?.length) {
    body.tools = offered.map((tool) => {
      const out: Json = { name: tool.function.name };
      if (tool.function.description !== undefined) out.description = tool.function.description;
      // Anthropic asks every input schema to say it is an object; OpenAI takes one that does not.
      const schema = tool.function.parameters;
      out.input_schema = !isObject(schema) ? { type: 'object' } : schema.type === undefined ? { type: 'object', ...schema } : schema;
      if (typeof tool.function.strict === 'boolean') out.strict = tool.function.strict;
      // A strict tool's schema is checked as structured outputs are: what they refuse is said in descriptions.
      if (tool.function.strict === true) out.input_schema = structuredSchema(out.input_schema);
      return out;
    });
  }
  const choice = request.tool_choice;
  if (choice !== undefined) {
    let out: Json | undefined;
    if (choice === 'auto') out = { type: 'auto' };
    else if (choice === 'required') out = { type: 'any' };
    else if (choice === 'none') out = { type: 'none' };
    else if (typeof choice === 'object' && choice.type === 'function') out = { type: 'tool', name: String((choice as { function: { name: string } }).function.name) };
    else if (allowed) out = !allowed.required ? { type: 'auto' } : allowed.tools.length === 1 ? { type: 'tool', name: allowed.tools[0]!.function.name } : { type: 'any' };
    else losses.add('tool_choice');
    // Anthropic's `none` takes no other field (it refuses unknown ones): no tool is called at all then.
    if (out && out.type !== 'none' && request.parallel_tool_calls === false) out.disable_parallel_tool_use = true;
    if (out) body.tool_choice = out;
  } else if (request.parallel_tool_calls === false && Array.isArray(request.tools) && request.tools.length > 0) {
    // No choice named: Anthropic's default (auto), which is where it takes the flag.
    body.tool_choice = { type: 'auto', disable_parallel_tool_use: true };
  }
  if (body.tools === undefined) {
    // A history with tool calls and no tools offered now (a later turn, or a compaction, that
    // leaves them out, as OpenAI allows): Anthropic refuses it ("Requests which include tool_use
    // or tool_result blocks must define tools"). The tools the history names are declared, and
    // none may be called, which is what offering none means.
    const named = toolsNamedIn(messages);
    if (named.length > 0) {
      body.tools = named.map((name) => ({ name, input_schema: { type: 'object' } }));
      body.tool_choice = { type: 'none' };
    }
  }
  if (typeof request.reasoning_effort === 'string') {
    const budget = budgetForEffort(request.reasoning_effort);
    if (budget !== undefined) body.thinking = { type: 'enabled', budget_tokens: budget };
    else if (request.reasoning_effort === 'none') body.thinking = { type: 'disabled' };
  }
  if (request.response_format?.type === 'json_schema') {
    const schema = (request.response_format.json_schema as { schema?: unknown } | undefined)?.schema;
    if (isObject(schema)) body.output_config = { format: { type: 'json_schema', schema: structuredSchema(schema) } };
    else losses.add('response_format.json_schema');
  }
  // The end user, for the back end's abuse checks: `user`, or the field OpenAI has in its place now.
  const safety = (request as { safety_identifier?: unknown }).safety_identifier;
  if (typeof request.user === 'string') body.metadata = { user_id: request.user };
  else if (typeof safety === 'string') body.metadata = { user_id: safety };
  const mapped = new Set([
    // Not top_k: current Claude models take fewer sampling fields (the SDK's types no longer have it).
    'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'stop', 'stream', 'stream_options',
    'tools', 'tool_choice', 'parallel_tool_calls', 'reasoning_effort', 'response_format', 'user',
  ]);
  if (typeof request.user !== 'string' && typeof safety === 'string') mapped.add('safety_identifier');
  for (const key of Object.keys(request)) if (!mapped.has(key) && !changesNothing(key, request[key])) losses.add(key);
  return { value: body, losses: losses.names };
}

/** The names of the tools a conversation's tool_use blocks called, each once. */
function toolsNamedIn(messages: readonly Json[]): string[] {
  const names = new Set<string>();
  for (const message of messages) {
    if (!Array.isArray(message.content)) continue;
    for (const block of message.content as Json[]) if (block?.type === 'tool_use' && typeof block.name === 'string') names.add(block.name);
  }
  return [...names];
}

/** The ids the Messages API takes for a tool use (and refuses any other with a 400). */
const TOOL_USE_ID = /^[a-zA-Z0-9_-]+$/;

/**
 * A tool call's id as the Messages API takes it: as it is when it fits Anthropic's pattern; else
 * (another back end's `functions.get_weather:0`, say) its other characters as `_`, with a hash of
 * the whole id after them, so that two ids stay two and a call and its result, mapped alike, still
 * match. The client never sees these: a Claude client is given such a call under a reversible id
 * (clientToolUseId), which comes back as the back end's own.
 */
export function toolUseId(id: string): string {
  if (TOOL_USE_ID.test(id)) return id;
  return `${id.replace(/[^a-zA-Z0-9_-]/g, '_')}_${createHash('sha256').update(id).digest('hex').slice(0, 12)}`;
}

/** The prefix of an id clientToolUseId made. */
const CARRIED_ID = 'sytc_';

/**
 * A call's id as a Claude client is given it: as it is when it fits Anthropic's pattern (a Claude
 * client's SDK, and Anthropic itself on a later turn, take no other); else (Kimi's
 * `functions.get_weather:0`) the id itself, base64url-encoded after `sytc_`, so that the next
 * turn gives the back end its own id again (backEndToolId): a model that reads its ids in the
 * history (Kimi K2) goes wrong with another's.
 */
export function clientToolUseId(id: string): string {
  if (TOOL_USE_ID.test(id)) return id;
  return CARRIED_ID + Buffer.from(id, 'utf8').toString('base64url');
}

/** The back end's own id of a call a Claude client hands back: what clientToolUseId made, undone; any other id as it is. */
export function backEndToolId(id: string): string {
  if (!id.startsWith(CARRIED_ID)) return id;
  const original = Buffer.from(id.slice(CARRIED_ID.length), 'base64url').toString('utf8');
  return original !== '' && !TOOL_USE_ID.test(original) && clientToolUseId(original) === id ? original : id;
}

/** What a chat field's default is, where leaving the field out asks for the same. */
const DEFAULTS: Readonly<Record<string, unknown>> = { n: 1, top_logprobs: 0, presence_penalty: 0, frequency_penalty: 0, service_tier: 'auto', verbosity: 'medium' };

/**
 * Whether a field a back end does not take asks for nothing it would not do anyway: absent,
 * `false`, an empty object or list, its default, or text alone as the output modality.
 */
export function changesNothing(key: string, value: unknown): boolean {
  if (value == null || value === false) return true;
  if (Array.isArray(value)) return value.length === 0 || (key === 'modalities' && value.length === 1 && value[0] === 'text');
  // `web_search_options: {}` is how a chat client turns web search on, with its defaults.
  if (isObject(value)) return Object.keys(value).length === 0 && key !== 'web_search_options';
  return DEFAULTS[key] === value;
}
