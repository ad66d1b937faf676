import { hiddenSlot } from './hidden.js';

/**
 * The closed list of operations a call can be, and the canonical shapes chat-like calls are
 * translated through. The canonical chat shape follows the widely used chat-completions shape;
 * later formats extend it where they carry more (thinking blocks, cache control, citations).
 */
export const OPERATIONS = [
  'chat',
  'completion',
  'responses',
  'compact',
  'embeddings',
  'rerank',
  'moderation',
  'speech',
  'transcription',
  'translation',
  'image',
  'image-edit',
  'video',
] as const;

export type OperationId = (typeof OPERATIONS)[number];

// ---------------------------------------------------------------------------------------------
// Canonical chat
// ---------------------------------------------------------------------------------------------

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool' | 'function';

export interface TextPart {
  type: 'text';
  text: string;
  [extra: string]: unknown;
}

export interface ImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: 'auto' | 'low' | 'high' };
  [extra: string]: unknown;
}

export interface OtherPart {
  type: string;
  [extra: string]: unknown;
}

export type ContentPart = TextPart | ImagePart | OtherPart;

/**
 * Why a back end whose API needs a turn to answer (the Messages API, generateContent) is not
 * called for a conversation with none: a system prompt alone, or only empty messages, which a
 * chat back end answers.
 */
export const NOTHING_TO_ANSWER =
  'This model needs at least one user or assistant message with content: the conversation has none (a system prompt alone is not answered by this back end).';

const clientPaths = hiddenSlot<string>();

/**
 * Where a canonical part came from in the client's own body (`messages[0].content[1].source.url`
 * for a Claude client's image), set by a format whose body is not the canonical one, so that an
 * error about the part (an image URL refused by the SSRF guard, say) names the field the client
 * sent rather than the canonical request's. Absent: the canonical path is the client's.
 */
export const clientPath = {
  get: (part: ContentPart): string | undefined => clientPaths.get(part),
  set: <P extends ContentPart>(part: P, path: string): P => {
    clientPaths.set(part, path);
    return part;
  },
};

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: ChatRole;
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  /** An assistant turn's call in the older function calling (before tools; see core/chat-functions.ts). */
  function_call?: { name: string; arguments: string } | null;
  refusal?: string | null;
  /**
   * Reasoning ("thinking") the assistant produced before its answer, as plain text. On an
   * assistant message of the history it is the reasoning of that earlier turn, handed back.
   */
  reasoning_content?: string | null;
  /**
   * An opaque signature that vouches for `reasoning_content` (a thinking block's signature).
   * Back ends that sign their reasoning need it back unchanged; others ignore it.
   */
  reasoning_signature?: string | null;
  /**
   * The provider type whose back end made `reasoning_signature`, when known (a Responses client's
   * replayed reasoning item says it): a back end of another type cannot verify it, and its
   * translation leaves it out.
   */
  reasoning_signature_by?: string;
  /**
   * On a `tool` message: the call failed, and its content says how (a format's error flag on a
   * tool result, or an error in place of its output). Chat completions has no place for it.
   */
  tool_error?: boolean;
  [extra: string]: unknown;
}

/** The prefix of a signature this gateway tagged with the provider type of the back end that made it. */
export const SIGNATURE_TAG = 'sy1.sig.';

/**
 * A signature as a client gets it (a Responses reasoning item's `encrypted_content`, a thinking
 * block's `signature`, a `thoughtSignature`): tagged with `maker`, the provider type of the back
 * end that made it, so that a conversation the client hands back is given only to a back end
 * that can verify it. `native` is the provider type whose signatures the client's format carries
 * as they are (a Claude-style client's own back end's): those are not tagged.
 */
export function tagSignature(signature: string, maker: string | undefined, native?: string): string {
  // A type with a dot in its name (a third party's `acme.claude`) is written with the dot escaped.
  return maker && maker !== native ? `${SIGNATURE_TAG}${maker.replace(/[.%]/g, (c) => (c === '.' ? '%2E' : '%25'))}.${signature}` : signature;
}

/**
 * A signature a client handed back and its maker: the one its tag names, else `native` (the
 * provider type whose signatures the client's format carries untagged: the format's own back
 * end's, such as the type whose API a reasoning item's format is).
 */
export function untagSignature(text: string, native?: string): { signature: string; maker?: string } {
  if (text.startsWith(SIGNATURE_TAG)) {
    const rest = text.slice(SIGNATURE_TAG.length);
    const dot = rest.indexOf('.');
    if (dot > 0) return { signature: rest.slice(dot + 1), maker: rest.slice(0, dot).replace(/%2E|%25/g, (c) => (c === '%2E' ? '.' : '%')) };
  }
  return native === undefined ? { signature: text } : { signature: text, maker: native };
}

/**
 * Whether `text` is several tagged signatures run together: a client that joins a stream's
 * signature deltas (as it joins its text) when an answer had several signed thinking blocks. No
 * back end verifies that, so it is no signature.
 */
export function joinedSignatures(text: string): boolean {
  return text.indexOf(SIGNATURE_TAG, 1) !== -1;
}

/**
 * The signature of an assistant message a back end of provider type `type` can verify, if it has
 * one. A signature still tagged with its maker (a chat completions client hands back what it was
 * given: see tagSignature) is read by its tag.
 */
export function signatureFor(message: { reasoning_signature?: string | null; reasoning_signature_by?: string }, type: string): string | undefined {
  const text = message.reasoning_signature;
  if (typeof text !== 'string' || text === '' || joinedSignatures(text)) return undefined;
  const { signature, maker } = text.startsWith(SIGNATURE_TAG) ? untagSignature(text) : { signature: text, maker: message.reasoning_signature_by };
  return maker === undefined || maker === type ? signature : undefined;
}

export interface FunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

export type ToolChoice =
  | 'none'
  | 'auto'
  | 'required'
  | { type: 'function'; function: { name: string } }
  | { type: string; [extra: string]: unknown };

/**
 * A `tool_choice` of `type: allowed_tools` (`{allowed_tools: {mode, tools: [{type: function,
 * function: {name}}]}}`): whether a call is required, and which of the request's `tools` it may
 * call. Undefined for any other choice, or one naming none of them.
 */
export function allowedToolsOf(choice: ToolChoice | undefined, tools: readonly FunctionTool[] | undefined): { required: boolean; tools: FunctionTool[] } | undefined {
  if (choice === null || typeof choice !== 'object' || choice.type !== 'allowed_tools') return undefined;
  const allowed = (choice as { allowed_tools?: { mode?: unknown; tools?: unknown } }).allowed_tools;
  if (!allowed || !Array.isArray(allowed.tools)) return undefined;
  const names = new Set<string>();
  for (const tool of allowed.tools as Array<{ type?: unknown; function?: { name?: unknown }; name?: unknown } | null>) {
    const name = tool?.type === 'function' ? (tool.function?.name ?? tool.name) : undefined;
    if (typeof name === 'string') names.add(name);
  }
  const allowedTools = (tools ?? []).filter((tool) => names.has(tool.function.name));
  return allowedTools.length > 0 ? { required: allowed.mode === 'required', tools: allowedTools } : undefined;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean; [extra: string]: unknown } | null;
  temperature?: number | null;
  top_p?: number | null;
  /** Sampling from the k likeliest tokens only: formats that have it carry it; chat completions has none. */
  top_k?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  logit_bias?: Record<string, number> | null;
  user?: string;
  tools?: FunctionTool[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
  /** The older function calling (before tools): the functions the model may call, and which (see core/chat-functions.ts). */
  functions?: Array<{ name: string; description?: string; parameters?: Record<string, unknown> }>;
  function_call?: 'none' | 'auto' | { name: string };
  response_format?: { type: string; [extra: string]: unknown };
  seed?: number | null;
  reasoning_effort?: string | null;
  modalities?: string[] | null;
  audio?: { voice: string; format: string } | null;
  [extra: string]: unknown;
}

/**
 * The body field a client lowers to ask for a shorter answer, as its format spells it: the route's
 * (CallRoute.outputLimitField), else, for a chat body, the one it set (`max_completion_tokens`,
 * which newer models take, or `max_tokens`).
 */
export function outputLimitFieldOf(ctx: { outputLimitField?: string }, body: unknown): string {
  if (ctx.outputLimitField) return ctx.outputLimitField;
  const limit = body !== null && typeof body === 'object' ? (body as { max_completion_tokens?: unknown }).max_completion_tokens : undefined;
  return limit !== undefined && limit !== null ? 'max_completion_tokens' : 'max_tokens';
}

const isRecord = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * Whether chat completions' strict mode (`strict: true` on a tool or a json_schema response
 * format) takes `schema` as it is: every object lists all its properties in `required` and allows
 * no others (`additionalProperties: false`), at every depth. Other formats' strict modes allow
 * optional properties; chat completions refuses them (400).
 */
export function strictReady(schema: unknown): boolean {
  if (Array.isArray(schema)) return schema.every(strictReady);
  if (!isRecord(schema)) return true;
  const properties = isRecord(schema.properties) ? schema.properties : undefined;
  const isObjectSchema = schema.type === 'object' || (Array.isArray(schema.type) && schema.type.includes('object')) || properties !== undefined;
  if (isObjectSchema) {
    if (schema.additionalProperties !== false) return false;
    const required = Array.isArray(schema.required) ? schema.required : [];
    if (properties && Object.keys(properties).some((name) => !required.includes(name))) return false;
  }
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'properties' || key === '$defs' || key === 'definitions') {
      if (isRecord(value) && !Object.values(value).every(strictReady)) return false;
    } else if (['items', 'anyOf', 'oneOf', 'allOf', 'prefixItems', 'not'].includes(key) && !strictReady(value)) return false;
  }
  return true;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /**
   * `cached_tokens`: prompt tokens read from the back end's prompt cache; `cache_creation_tokens`:
   * prompt tokens written to it, of which `cache_creation_1h_tokens` for an hour (priced apart).
   * All are part of `prompt_tokens`.
   */
  prompt_tokens_details?: { cached_tokens?: number; cache_creation_tokens?: number; cache_creation_1h_tokens?: number; [extra: string]: unknown };
  completion_tokens_details?: { reasoning_tokens?: number; [extra: string]: unknown };
  /** What the back end's own tools did for the call and bills apart: `web_search_requests`, the searches it ran. */
  server_tool_use?: { web_search_requests?: number; [extra: string]: unknown };
  [extra: string]: unknown;
}

export interface ChatChoice {
  index: number;
  message: ChatMessage & { role: 'assistant' };
  finish_reason: FinishReason | null;
  /** The stop sequence that ended the answer, when the back end says which one did. */
  stop_sequence?: string | null;
  logprobs?: unknown;
}

export interface ChatResponse {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: ChatChoice[];
  usage?: ChatUsage;
  system_fingerprint?: string | null;
  [extra: string]: unknown;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface ChatChunkChoice {
  index: number;
  delta: {
    role?: 'assistant';
    content?: string | null;
    refusal?: string | null;
    tool_calls?: ToolCallDelta[];
    /** A piece of a call in the older function calling: its name first, then pieces of its arguments. */
    function_call?: { name?: string; arguments?: string };
    /** A piece of the reasoning text (see ChatMessage.reasoning_content). */
    reasoning_content?: string | null;
    /** The signature of the reasoning streamed so far; sent once, when the reasoning ends. */
    reasoning_signature?: string | null;
    [extra: string]: unknown;
  };
  finish_reason: FinishReason | null;
  /** With a finish_reason: the stop sequence that ended the answer, when the back end says. */
  stop_sequence?: string | null;
  logprobs?: unknown;
}

export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: ChatUsage | null;
  system_fingerprint?: string | null;
  [extra: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Usage, as the gateway meters it whatever the format
// ---------------------------------------------------------------------------------------------

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  cachedInputTokens?: number;
  /** Prompt tokens the back end wrote to its prompt cache (part of inputTokens; some vendors price them higher). */
  cacheWriteTokens?: number;
  /** Of cacheWriteTokens, those written for an hour (a vendor may price them above the minutes-long ones). */
  cacheWrite1hTokens?: number;
  /** Web searches the back end ran for the call (a server tool, billed per search), priced by `perWebSearch`. */
  webSearches?: number;
  reasoningTokens?: number;
  /** Images produced (image operations), priced by `perImage`. */
  images?: number;
  /** Seconds of audio or video (transcribed, translated or generated), priced by `perSecond`. */
  seconds?: number;
  /** Characters of text turned into speech, priced by `perCharacter`. */
  characters?: number;
}

/** More tokens than any one call has (models take a few million at most): a count past it is not believed. */
const MOST_TOKENS = 1_000_000_000;

/** A token count a back end reported, if it is one (a whole number, not negative, not absurd: 1e308 would price a call at Infinity). */
export function tokenCount(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MOST_TOKENS ? value : undefined;
}

/**
 * The usage of a chat reply. Counts that are not whole non-negative numbers (a broken or hostile
 * back end) make the whole usage unknown, so metering counts it itself rather than record them.
 */
export function usageFromChat(usage: ChatUsage | null | undefined): Usage | undefined {
  if (!usage) return undefined;
  const prompts = usage.prompt_tokens_details;
  return countedUsage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, {
    cached: prompts?.cached_tokens,
    written: prompts?.cache_creation_tokens,
    writtenForAnHour: prompts?.cache_creation_1h_tokens,
    reasoning: usage.completion_tokens_details?.reasoning_tokens,
    searches: usage.server_tool_use?.web_search_requests,
  });
}

/**
 * Usage from a back end's input, output and total counts (an absent output is 0, as some servers
 * leave out a zero; an absent total their sum) and its details (see withDetails); undefined when
 * the input count is missing, or a count given is not a whole non-negative number: a usage of
 * `{}` or `{total_tokens}` says nothing, and metering then counts the call itself rather than
 * charge it nothing. What chat and Responses usages share under different names.
 */
export function countedUsage(
  input: unknown,
  output: unknown,
  total: unknown,
  details: Parameters<typeof withDetails>[1],
): Usage | undefined {
  const inputTokens = tokenCount(input);
  const outputTokens = output === undefined || output === null ? 0 : tokenCount(output);
  if (inputTokens === undefined || outputTokens === undefined) return undefined;
  const totalTokens = total === undefined || total === null ? inputTokens + outputTokens : tokenCount(total);
  if (totalTokens === undefined) return undefined;
  return withDetails({ inputTokens, outputTokens, totalTokens }, details);
}

/**
 * `result` (its input tokens known) with the details a back end reported, whatever its format
 * calls them: cached and cache-written prompt tokens (bounded by the prompt), reasoning tokens,
 * web searches. Counts that are not whole non-negative numbers are left out.
 */
export function withDetails(
  result: Usage,
  details: { cached?: unknown; written?: unknown; writtenForAnHour?: unknown; reasoning?: unknown; searches?: unknown },
): Usage {
  const cached = tokenCount(details.cached);
  if (cached !== undefined) result.cachedInputTokens = Math.min(cached, result.inputTokens);
  const written = tokenCount(details.written);
  if (written !== undefined && written > 0) {
    result.cacheWriteTokens = Math.min(written, result.inputTokens - (result.cachedInputTokens ?? 0));
    const hour = tokenCount(details.writtenForAnHour);
    if (hour !== undefined && hour > 0) result.cacheWrite1hTokens = Math.min(hour, result.cacheWriteTokens);
  }
  const reasoning = tokenCount(details.reasoning);
  if (reasoning !== undefined) result.reasoningTokens = reasoning;
  const searches = tokenCount(details.searches);
  if (searches !== undefined && searches > 0) result.webSearches = searches;
  return result;
}

// ---------------------------------------------------------------------------------------------
// What a provider is asked and what it answers
// ---------------------------------------------------------------------------------------------

/** Canonical request bodies per operation. Operations without a canonical shape yet carry the raw body. */
export interface OperationBodies {
  chat: ChatRequest;
}
export type CanonicalBody<O extends OperationId> = O extends keyof OperationBodies ? OperationBodies[O] : Record<string, unknown>;

/** Operations whose usage is counted in tokens (a tokenizer may count what a back end did not report). */
export const TOKEN_OPERATIONS: ReadonlySet<OperationId> = new Set<OperationId>(['chat', 'completion', 'responses', 'compact', 'embeddings']);

export interface OperationResults {
  chat: ChatResponse;
}
export interface OperationChunks {
  chat: ChatChunk;
}
export type CanonicalResult<O extends OperationId> = O extends keyof OperationResults ? OperationResults[O] : unknown;
export type CanonicalChunk<O extends OperationId> = O extends keyof OperationChunks ? OperationChunks[O] : unknown;

export interface UpstreamRequest<O extends OperationId = OperationId> {
  operation: O;
  /** The model name the back end knows (after alias mapping). */
  model: string;
  stream: boolean;
  body: CanonicalBody<O>;
  /** Whether the client asked for usage in the stream (the provider may ask the upstream regardless). */
  clientWantsStreamUsage: boolean;
  /**
   * Headers a provider must send upstream as they are: the gateway's hop marks, which stop a
   * request that loops back into a gateway. Read-only (it may be shared between calls): a tap
   * that adds one sets a new object.
   */
  forwardHeaders: Readonly<Record<string, string>>;
  /**
   * The call as the client sent it: its wire format's id and its validated body. A provider whose
   * back end speaks that same format may send `body` on as it is (with its own model name)
   * instead of the canonical body, and keep the answer's bytes for the format to relay.
   */
  source?: {
    format: string;
    body: Readonly<Record<string, unknown>>;
    /**
     * The JSON text `body` was parsed from, when the client sent JSON and no object in it gives a
     * key twice (JSON.parse keeps the last, some servers the first). A provider that sends
     * `body` on unchanged (the same object, the same model name) may send this text instead of
     * serialising the object again. A `beforeUpstream` tap that changes `body` in place (rather
     * than returning a changed copy) must delete it.
     */
    raw?: string;
    /** The client's request headers (a provider passes on only the ones its own API defines, such as a beta flag). */
    headers?: Readonly<Record<string, string | string[] | undefined>>;
  };
}

export interface UpstreamJsonResponse<O extends OperationId = OperationId> {
  kind: 'json';
  status: number;
  body: CanonicalResult<O>;
  usage?: Usage;
}

export interface UpstreamStreamResponse<O extends OperationId = OperationId> {
  kind: 'stream';
  status: number;
  /** Canonical chunks in arrival order. Returning early (break) must release the upstream. */
  chunks: AsyncIterable<CanonicalChunk<O>>;
  /** Usage known before the stream is read (speech: the characters it turns into audio). */
  usage?: Usage;
  /**
   * A chat stream to a route that relays an opening chunk (CallRoute.relaysOpeningChunk) is read
   * up to its first chunk before it is the client's (a back end that fails right after its
   * headers lets the next target be tried). A back end known to report failures after an opening
   * chunk that holds no answer yet (an overload error event after the event that opens the
   * message) sets this: its stream is then read up to its first piece of answer (text, a tool
   * call, a finish), as it is for every other route, so such a failure moves on too, and the
   * client's first byte waits for that piece. Responses streams are always read past their
   * opening `response.created` and `response.in_progress`.
   */
  primeToAnswer?: boolean;
}

export type UpstreamResponse<O extends OperationId = OperationId> = UpstreamJsonResponse<O> | UpstreamStreamResponse<O>;
