import { toolNamesOf, type ToolNames } from './tool-names.js';
import type { ChatMessage, ChatRequest, ContentPart, FunctionTool, RequestContext, ToolCall, ToolChoice } from '../../../../core/index.js';
import { clientPath, hiddenSlot, untagSignature } from '../../../../core/index.js';

/**
 * A Responses API request -> the canonical chat request, for back ends that only chat.
 *
 * `instructions` become the first (system) message; `input` items become messages: message
 * items keep their role, `function_call` items (and the calls of a client's custom tools and
 * local shell) become the `tool_calls` of an assistant message, their outputs `tool` messages
 * (an output whose call is not in the conversation is a loss), a `reasoning` item becomes the reasoning
 * of the assistant message after it, and a compaction item made by this gateway becomes a user
 * message carrying the summary. Whatever chat cannot carry is returned as a named loss.
 */

type Json = Record<string, unknown>;

export interface Translated<T> {
  value: T;
  losses: string[];
}

/** Loss names, each once, in the order met. */
export class LossList {
  constructor(readonly names: string[] = []) {}
  /** The request's own list (`ctx.losses`), made on first use. */
  static of(ctx: RequestContext | undefined): LossList {
    return new LossList(ctx ? (ctx.losses ??= []) : []);
  }
  add(name: string): void {
    if (!this.names.includes(name)) this.names.push(name);
  }
}

// ---------------------------------------------------------------------------------------------
// Compaction items made by this gateway
// ---------------------------------------------------------------------------------------------

/** The prefix of a compaction item's `encrypted_content` when this gateway made it. */
const COMPACTION_PREFIX = 'sy1.';

/**
 * The `encrypted_content` of a compaction item this gateway makes: not encrypted, but opaque to
 * clients (base64url of `{summary}`), so that it comes back unchanged in a later `input`.
 */
export function encodeCompaction(summary: string): string {
  return COMPACTION_PREFIX + Buffer.from(JSON.stringify({ summary }), 'utf8').toString('base64url');
}

/** The summary in a compaction item this gateway made, or undefined for anyone else's. */
export function decodeCompaction(content: unknown): string | undefined {
  if (typeof content !== 'string' || !content.startsWith(COMPACTION_PREFIX)) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(content.slice(COMPACTION_PREFIX.length), 'base64url').toString('utf8')) as { summary?: unknown };
    return typeof parsed.summary === 'string' ? parsed.summary : undefined;
  } catch {
    return undefined;
  }
}

/** The text a compacted conversation's summary is handed to the model in. */
export function summaryMessage(summary: string): string {
  return `Summary of the earlier conversation:\n${summary}`;
}

// ---------------------------------------------------------------------------------------------
// Items
// ---------------------------------------------------------------------------------------------

/** `input` as a list of items: a string is one user message. */
export function inputItems(input: unknown): Json[] {
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? (input as Json[]) : [];
}

/** Where an image part of the client's own `input` is (its history, put in front later, has none). */
const inputPaths = hiddenSlot<string>();

/**
 * Note where each image URL of `body.input` is in the client's body (`input[2].content[1].image_url`),
 * before a previous response's history is put in front of it: an error about one (a URL a back
 * end that needs the bytes may not fetch) names the field the client sent.
 */
export function markInputPaths(body: Json): void {
  if (!Array.isArray(body.input)) return;
  (body.input as unknown[]).forEach((item, k) => {
    // A message's content, or a function call output's own list of parts (an image a tool returned).
    for (const field of ['content', 'output'] as const) {
      const parts = (item as Json | null)?.[field];
      if (!Array.isArray(parts)) continue;
      parts.forEach((raw: unknown, j) => {
        if ((raw as Json | null)?.type === 'input_image' && typeof (raw as Json).image_url === 'string') inputPaths.set(raw as Json, `input[${k}].${field}[${j}].image_url`);
      });
    }
  });
}

function part(raw: Json, losses: LossList): ContentPart | undefined {
  switch (raw.type) {
    case 'input_text':
    case 'output_text':
    case 'text':
    case 'summary_text':
    case 'reasoning_text':
      return { type: 'text', text: String(raw.text ?? '') };
    case 'refusal':
      return { type: 'text', text: String(raw.refusal ?? '') };
    case 'input_image': {
      if (typeof raw.image_url !== 'string' || raw.image_url === '') {
        losses.add('input_image.file_id');
        return undefined;
      }
      const detail = raw.detail === 'low' || raw.detail === 'high' || raw.detail === 'auto' ? raw.detail : undefined;
      const image: ContentPart = { type: 'image_url', image_url: detail ? { url: raw.image_url, detail } : { url: raw.image_url } };
      const at = inputPaths.get(raw);
      return at === undefined ? image : clientPath.set(image, at);
    }
    case 'input_file': {
      const file: Json = {};
      if (typeof raw.file_data === 'string') file.file_data = raw.file_data;
      if (typeof raw.file_id === 'string') file.file_id = raw.file_id;
      if (typeof raw.filename === 'string') file.filename = raw.filename;
      if (typeof raw.file_url === 'string') losses.add('input_file.file_url');
      if (Object.keys(file).length === 0) return undefined;
      return { type: 'file', file };
    }
    case 'input_audio':
      return { type: 'input_audio', input_audio: raw.input_audio };
    default:
      losses.add(`content.${String(raw.type)}`);
      return undefined;
  }
}

function parts(content: unknown, losses: LossList): ContentPart[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content)) return [];
  const out: ContentPart[] = [];
  for (const raw of content as Json[]) {
    const converted = raw && typeof raw === 'object' ? part(raw, losses) : undefined;
    if (converted) out.push(converted);
  }
  return out;
}

/** Only text: a plain string (what every chat back end takes); otherwise the parts. */
function flatten(list: ContentPart[]): string | ContentPart[] {
  if (list.every((p) => p.type === 'text')) return list.map((p) => String(p.text ?? '')).join('');
  return list;
}

function reasoningText(item: Json): string {
  const texts: string[] = [];
  for (const list of [item.content, item.summary]) {
    if (!Array.isArray(list)) continue;
    for (const piece of list as Json[]) if (piece && typeof piece.text === 'string') texts.push(piece.text);
    if (texts.length > 0) break; // the full reasoning when there is some, else its summary
  }
  return texts.join('\n');
}

/** The provider type whose Responses API makes the reasoning items a client hands back untagged. */
const NATIVE_SIGNER = 'openai';

/** Input items (history included) -> chat messages. */
export function itemsToMessages(items: Json[], losses: LossList, names?: ToolNames): ChatMessage[] {
  const messages: ChatMessage[] = [];
  /** The assistant message function calls and reasoning attach to, while nothing else came between. */
  let open: ChatMessage | undefined;
  let reasoning: { text: string; signature?: string; maker?: string } | undefined;
  const assistant = (): ChatMessage => {
    if (!open) {
      open = { role: 'assistant', content: null };
      messages.push(open);
    }
    if (reasoning) {
      if (reasoning.text === '' && reasoning.signature && typeof open.reasoning_content === 'string' && open.reasoning_signature === undefined) {
        // Only a signature, after the turn's reasoning that had none (a back end that signs the
        // whole answer sent it after the text: see ResponseEventWriter.sign): it signs that reasoning.
        open.reasoning_signature = reasoning.signature;
        if (reasoning.maker) open.reasoning_signature_by = reasoning.maker;
      } else if (typeof open.reasoning_content === 'string' && open.reasoning_content !== '') {
        // Two reasoning items in one assistant turn: one text; no single signature vouches for it.
        open.reasoning_content += `\n${reasoning.text}`;
        delete open.reasoning_signature;
        delete open.reasoning_signature_by;
      } else {
        open.reasoning_content = reasoning.text;
        if (reasoning.signature) open.reasoning_signature = reasoning.signature;
        if (reasoning.maker) open.reasoning_signature_by = reasoning.maker;
      }
      reasoning = undefined;
    }
    return open;
  };
  /** The ids of the calls in the conversation so far: only their outputs become tool messages. */
  const callIds = new Set<string>();
  const addCall = (id: string, name: string, args: string): void => {
    const call: ToolCall = { id, type: 'function', function: { name, arguments: args } };
    (assistant().tool_calls ??= []).push(call);
    callIds.add(id);
  };
  /**
   * Another speaker: the assistant turn is over. A signature alone after its answer is still the
   * turn's (one a back end sent after the answer's text: see ResponseEventWriter.sign); other
   * reasoning nothing of the turn came after is dropped.
   */
  const endTurn = () => {
    if (reasoning && open && reasoning.text === '' && reasoning.signature) assistant();
    open = undefined;
    if (reasoning) losses.add('input.reasoning');
    reasoning = undefined;
  };
  for (const item of items) {
    const type = item.type ?? 'message';
    switch (type) {
      case 'message': {
        const role = String(item.role);
        if (role === 'assistant') {
          // A new assistant turn; the function calls after it (if any) join it.
          open = undefined;
          assistant().content = flatten(parts(item.content, losses));
          break;
        }
        endTurn();
        const list = parts(item.content, losses);
        const instruction = role === 'system' || role === 'developer';
        if (instruction && list.some((p) => p.type !== 'text')) losses.add(`${role}.content`);
        const content = instruction ? list.filter((p) => p.type === 'text').map((p) => String(p.text ?? '')).join('') : flatten(list);
        messages.push({ role: role as ChatMessage['role'], content });
        break;
      }
      case 'function_call':
        addCall(String(item.call_id), names ? names.chatName(String(item.name), item.namespace) : String(item.name), String(item.arguments ?? ''));
        break;
      // The calls of a client's own tools that chat has no kind of tool for (Codex's freeform
      // tools, its local shell) still happened: a function call of the same name, so that their
      // outputs answer a call the back end can see.
      case 'custom_tool_call':
        addCall(String(item.call_id), names ? names.chatName(String(item.name), item.namespace) : String(item.name), JSON.stringify({ input: typeof item.input === 'string' ? item.input : '' }));
        break;
      case 'local_shell_call':
        addCall(String(item.call_id ?? item.id), 'local_shell', JSON.stringify(item.action ?? {}));
        break;
      case 'function_call_output':
      case 'custom_tool_call_output':
      case 'local_shell_call_output': {
        const callId = String(type === 'local_shell_call_output' ? (item.call_id ?? item.id) : item.call_id);
        if (!callIds.has(callId)) {
          // An output of a call that is not in the conversation (an item chat cannot carry was
          // dropped): a tool message answering no call is refused by chat back ends.
          losses.add(`input.${type}`);
          break;
        }
        endTurn();
        const output = item.output;
        let content: string | ContentPart[];
        if (typeof output === 'string') content = output;
        else {
          // Several texts (a tool that answers in items, as MCP tools do): a line each. Its images
          // and files stay in the result (a provider whose back end takes text only there moves
          // them after it: toolMediaAfter).
          const list = parts(output, losses);
          const text = list.filter((p) => p.type === 'text').map((p) => String(p.text ?? '')).join('\n');
          const media = list.filter((p) => p.type !== 'text');
          content = media.length === 0 ? text : [...(text ? [{ type: 'text', text }] : []), ...media];
        }
        messages.push({ role: 'tool', tool_call_id: callId, content });
        break;
      }
      case 'reasoning': {
        const text = reasoningText(item);
        // Untagged, it came from a back end with the Responses API of its own, relayed as it was:
        // an `openai` provider's (the bridge tags every signature it hands out; see tagSignature).
        const tagged = typeof item.encrypted_content === 'string' && item.encrypted_content ? untagSignature(item.encrypted_content, NATIVE_SIGNER) : undefined;
        reasoning = { text, ...(tagged ? tagged : {}) };
        break;
      }
      case 'compaction': {
        endTurn();
        const summary = decodeCompaction(item.encrypted_content);
        if (summary === undefined) losses.add('input.compaction');
        else messages.push({ role: 'user', content: summaryMessage(summary) });
        break;
      }
      case 'item_reference':
      default:
        losses.add(`input.${String(type)}`);
        break;
    }
  }
  endTurn();
  return messages;
}

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

/** One function or custom tool as the chat function it goes up as, under `name`. */
function chatTool(raw: Json, name: string, losses: LossList): FunctionTool {
  if (raw.type === 'custom') {
    // A freeform tool: chat knows only functions, so one that takes its text as `input` (the
    // answer's calls of it come back as custom tool calls). A grammar is not carried.
    const fn: FunctionTool['function'] = {
      name,
      parameters: { type: 'object', properties: { input: { type: 'string', description: 'The raw text input of the tool.' } }, required: ['input'], additionalProperties: false },
    };
    if (typeof raw.description === 'string') fn.description = raw.description;
    const format = raw.format as Json | undefined;
    if (format && format.type !== 'text') losses.add('tools.custom.format');
    return { type: 'function', function: fn };
  }
  const fn: FunctionTool['function'] = { name };
  if (typeof raw.description === 'string') fn.description = raw.description;
  if (raw.parameters && typeof raw.parameters === 'object') fn.parameters = raw.parameters as Record<string, unknown>;
  if (typeof raw.strict === 'boolean') fn.strict = raw.strict;
  return { type: 'function', function: fn };
}

function toolsOf(tools: unknown, losses: LossList, names: ToolNames): FunctionTool[] | undefined {
  if (!Array.isArray(tools)) return undefined;
  const out: FunctionTool[] = [];
  for (const raw of tools as Json[]) {
    if (raw.type === 'function' || raw.type === 'custom') {
      out.push(chatTool(raw, String(raw.name), losses));
      continue;
    }
    if (raw.type === 'namespace' && Array.isArray(raw.tools)) {
      // A group of the client's own tools (Codex's sub-agent and MCP tools): each a function of
      // its own (see ToolNames); anything else in it is a loss as it would be outside.
      let first = true;
      for (const member of raw.tools as Json[]) {
        if ((member?.type === 'function' || member?.type === 'custom') && typeof member.name === 'string') {
          const tool = chatTool(member, names.chatName(member.name, raw.name), losses);
          // What the namespace says of its tools (a server's instructions) goes with the first of them.
          if (first && typeof raw.description === 'string' && raw.description !== '') {
            tool.function.description = tool.function.description ? `${raw.description}\n\n${tool.function.description}` : raw.description;
          }
          first = false;
          out.push(tool);
        } else losses.add(`tools.namespace.${String(member?.type)}`);
      }
      continue;
    }
    losses.add(`tools.${String(raw.type)}`);
  }
  return out.length > 0 ? out : undefined;
}

function toolChoiceOf(choice: unknown, losses: LossList, names: ToolNames): ToolChoice | undefined {
  if (choice === 'none' || choice === 'auto' || choice === 'required') return choice;
  if (!choice || typeof choice !== 'object') return undefined;
  const c = choice as Json;
  if (c.type === 'function' || c.type === 'custom') return { type: 'function', function: { name: names.chatName(String(c.name), c.namespace) } };
  if (c.type === 'allowed_tools') {
    // Chat completions takes the same choice in its own shape; hosted tools in it are not carried.
    const tools = Array.isArray(c.tools) ? (c.tools as Json[]) : [];
    const functions = tools.filter((tool) => (tool?.type === 'function' || tool?.type === 'custom') && typeof tool.name === 'string');
    if (functions.length < tools.length) losses.add('tool_choice.allowed_tools');
    const mode = c.mode === 'required' ? 'required' : 'auto';
    if (functions.length === 0) return mode;
    return { type: 'allowed_tools', allowed_tools: { mode, tools: functions.map((tool) => ({ type: 'function', function: { name: names.chatName(String(tool.name), tool.namespace) } })) } };
  }
  losses.add(`tool_choice.${String(c.type)}`);
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------------

/** The `include` entry that asks for the output text's token log probabilities, which chat can give. */
const LOGPROBS_INCLUDE = 'message.output_text.logprobs';
/** `include` entries the bridge answers: log probabilities, and reasoning items' signatures (their `encrypted_content`). */
const CARRIED_INCLUDES: ReadonlySet<unknown> = new Set([LOGPROBS_INCLUDE, 'reasoning.encrypted_content']);

/** Fields with no chat equivalent: named as losses when the client set them. */
const UNCARRIED = [
  'background',
  'prompt',
  'prompt_cache_retention',
  'conversation',
  'max_tool_calls',
  // Compaction the back end runs itself past a threshold: a chat back end has none.
  'context_management',
];

/**
 * The top-level fields of a Responses request this bridge reads, or the gateway answers itself
 * (`store`, `metadata` and `previous_response_id`: the response store; `stream_options` only asks
 * how events are padded), or names among the losses above.
 */
const READ_HERE: ReadonlySet<string> = new Set([
  'model', 'input', 'instructions', 'stream', 'stream_options', 'max_output_tokens', 'temperature', 'top_p', 'user',
  'prompt_cache_key', 'safety_identifier', 'service_tier', 'tools', 'parallel_tool_calls', 'tool_choice', 'reasoning', 'text',
  'include', 'top_logprobs', 'truncation', 'store', 'metadata', 'previous_response_id', ...UNCARRIED,
]);

/**
 * The chat request for a Responses request whose `input` already holds the whole conversation
 * (the gateway puts a previous response's history in front of it before this runs).
 */
export function toChatRequest(body: Json, model: string, stream: boolean): Translated<ChatRequest> {
  const losses = new LossList();
  const messages: ChatMessage[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '') messages.push({ role: 'system', content: body.instructions });
  const names = toolNamesOf(body);
  messages.push(...itemsToMessages(inputItems(body.input), losses, names));
  const request: ChatRequest = { model, messages };
  if (stream) {
    request.stream = true;
    request.stream_options = { include_usage: true };
  }
  if (typeof body.max_output_tokens === 'number') request.max_tokens = body.max_output_tokens;
  if (typeof body.temperature === 'number') request.temperature = body.temperature;
  if (typeof body.top_p === 'number') request.top_p = body.top_p;
  if (typeof body.user === 'string') request.user = body.user;
  // Chat completions takes these three as the Responses API does (Codex sends a prompt_cache_key,
  // which keeps an OpenAI back end's prompt cache warm); a back end of another kind names them.
  for (const name of ['prompt_cache_key', 'safety_identifier', 'service_tier'] as const) {
    if (typeof body[name] === 'string') request[name] = body[name];
  }
  const tools = toolsOf(body.tools, losses, names);
  if (tools) request.tools = tools;
  // Chat completions refuses parallel_tool_calls without tools (the Responses API takes it).
  if (typeof body.parallel_tool_calls === 'boolean' && tools) request.parallel_tool_calls = body.parallel_tool_calls;
  const choice = toolChoiceOf(body.tool_choice, losses, names);
  if (choice !== undefined && tools) request.tool_choice = choice;
  const reasoning = body.reasoning as Json | null | undefined;
  if (reasoning && typeof reasoning.effort === 'string') request.reasoning_effort = reasoning.effort;
  const text = body.text as Json | null | undefined;
  const format = text?.format as Json | undefined;
  if (format?.type === 'json_object') request.response_format = { type: 'json_object' };
  else if (format?.type === 'json_schema') {
    const schema: Json = { name: format.name, schema: format.schema };
    if (typeof format.description === 'string') schema.description = format.description;
    if (typeof format.strict === 'boolean') schema.strict = format.strict;
    request.response_format = { type: 'json_schema', json_schema: schema };
  }
  // Chat completions takes verbosity at the top level; a back end of another kind names it lost.
  if (text && typeof text.verbosity === 'string') request.verbosity = text.verbosity;
  // Token log probabilities: asked for by `include`, with as many alternatives a token as
  // `top_logprobs` (which alone asks for none, as the Responses API answers it: nothing is lost).
  const include = Array.isArray(body.include) ? (body.include as unknown[]) : [];
  if (include.includes(LOGPROBS_INCLUDE)) {
    request.logprobs = true;
    if (typeof body.top_logprobs === 'number' && body.top_logprobs > 0) request.top_logprobs = body.top_logprobs;
  }
  if (include.some((entry) => !CARRIED_INCLUDES.has(entry))) losses.add('include');
  if (body.truncation === 'auto') losses.add('truncation');
  for (const name of UNCARRIED) {
    const value = body[name];
    if (value !== undefined && value !== null && value !== false && !(Array.isArray(value) && value.length === 0)) losses.add(name);
  }
  // A field the bridge does not know (a newer API's, or a client's own such as Codex's
  // client_metadata) is not carried either: named, not dropped in silence.
  for (const name of Object.keys(body)) if (!READ_HERE.has(name) && body[name] !== undefined && body[name] !== null) losses.add(name);
  return { value: request, losses: losses.names };
}
