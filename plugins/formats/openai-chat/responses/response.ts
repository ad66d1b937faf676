import { toolNamesOf, type ToolNames } from './tool-names.js';
import { randomBytes } from 'node:crypto';
import type { ChatResponse, ChatUsage, FinishReason } from '../../../../core/index.js';
import { tagSignature, usageAsResponses, usageFromChat, type ResponseUsage } from '../../../../core/index.js';

/**
 * The canonical chat answer -> a Responses API `response` object: reasoning (the chat answer's
 * `reasoning_content`) as a reasoning item, the text as a message item of `output_text`, each
 * tool call as a `function_call` item whose `call_id` is the tool call's id. `finish_reason:
 * length` (or `content_filter`) makes the response `incomplete`, with its reason.
 */

type Json = Record<string, unknown>;

/**
 * An id this gateway makes for a response or one of its items: the prefix OpenAI uses, then
 * `sy` and 32 hex digits (`msg_sy…`, `fc_sy…`). The mark tells them from ids OpenAI made, which a
 * native back end is sent; ours are not (see the openai provider's responses.ts): a client that
 * replays a conversation with `store: false` hands them back, and OpenAI refuses an input item
 * whose id it never stored.
 */
export function newId(prefix: string): string {
  return `${prefix}_sy${randomBytes(16).toString('hex')}`;
}


/**
 * Chat usage as the Responses API reports it; none when its counts are not whole non-negative
 * numbers (a broken back end's), so that metering counts the call as it does one that reported
 * nothing, and the client gets that count.
 */
export function responseUsage(usage: ChatUsage | null | undefined): ResponseUsage | null {
  const counted = usageFromChat(usage);
  return counted ? usageAsResponses(counted) : null;
}


/** What the response's status and incomplete_details are for a chat finish reason. */
export function statusOf(finish: FinishReason | null | undefined): { status: 'completed' | 'incomplete'; incomplete_details: { reason: string } | null } {
  if (finish === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finish === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/** The request's settings echoed on the response object, as the Responses API does. */
export function responseShell(id: string, body: Json, model: string, createdAt: number): Json {
  const reasoning = (body.reasoning ?? null) as Json | null;
  const text = (body.text ?? null) as Json | null;
  const shell: Json = {
    id,
    object: 'response',
    created_at: createdAt,
    status: 'in_progress',
    background: false,
    error: null,
    incomplete_details: null,
    instructions: typeof body.instructions === 'string' ? body.instructions : null,
    max_output_tokens: typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null,
    model,
    output: [],
    parallel_tool_calls: body.parallel_tool_calls !== false,
    previous_response_id: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
    reasoning: { effort: reasoning?.effort ?? null, summary: reasoning?.summary ?? null },
    store: body.store !== false,
    temperature: typeof body.temperature === 'number' ? body.temperature : 1,
    text: { format: (text?.format as Json | undefined) ?? { type: 'text' }, verbosity: typeof text?.verbosity === 'string' ? text.verbosity : 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools: Array.isArray(body.tools) ? body.tools : [],
    top_logprobs: typeof body.top_logprobs === 'number' ? body.top_logprobs : 0,
    top_p: typeof body.top_p === 'number' ? body.top_p : 1,
    truncation: body.truncation === 'auto' ? 'auto' : 'disabled',
    usage: null,
    user: typeof body.user === 'string' ? body.user : null,
    metadata: body.metadata && typeof body.metadata === 'object' ? body.metadata : {},
  };
  // Echoed as the client set them, as OpenAI echoes them (they are null or absent otherwise).
  for (const name of ECHOED) if (body[name] !== undefined) shell[name] = body[name];
  return shell;
}

/** Settings a response object repeats only when the request had them. */
const ECHOED = ['prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'service_tier', 'max_tool_calls'] as const;

/** A reasoning item; its signature tagged with the provider type that made it (see tagSignature). */
export function reasoningItem(id: string, text: string, signature?: string | null, maker?: string): Json {
  const item: Json = { id, type: 'reasoning', summary: text ? [{ type: 'summary_text', text }] : [] };
  if (signature) item.encrypted_content = tagSignature(signature, maker);
  return item;
}

/** One token's log probability as the Responses API gives it (`output_text.logprobs`). */
export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

function tokenOf(entry: Json): { token: string; logprob: number; bytes: number[] } | undefined {
  if (typeof entry?.token !== 'string' || typeof entry.logprob !== 'number') return undefined;
  const bytes = Array.isArray(entry.bytes) && entry.bytes.every((b) => Number.isInteger(b)) ? (entry.bytes as number[]) : [...Buffer.from(entry.token, 'utf8')];
  return { token: entry.token, logprob: entry.logprob, bytes };
}

/**
 * A chat choice's `logprobs` (`{content: [{token, logprob, bytes, top_logprobs}]}`) as the
 * Responses API's list for an output_text; entries of another shape are left out.
 */
export function logprobsOf(logprobs: unknown): TokenLogprob[] {
  const content = (logprobs as { content?: unknown } | null | undefined)?.content;
  if (!Array.isArray(content)) return [];
  const out: TokenLogprob[] = [];
  for (const entry of content as Json[]) {
    const token = tokenOf(entry);
    if (!token) continue;
    const top: TokenLogprob['top_logprobs'] = [];
    for (const alt of Array.isArray(entry.top_logprobs) ? (entry.top_logprobs as Json[]) : []) {
      const one = tokenOf(alt);
      if (one) top.push(one);
    }
    out.push({ ...token, top_logprobs: top });
  }
  return out;
}

export function messageItem(id: string, text: string | undefined, refusal: string | undefined, status: string, logprobs: TokenLogprob[] = []): Json {
  const content: Json[] = [];
  if (text !== undefined) content.push({ type: 'output_text', text, annotations: [], logprobs });
  if (refusal !== undefined) content.push({ type: 'refusal', refusal });
  return { id, type: 'message', status, role: 'assistant', content };
}

export function functionCallItem(id: string, callId: string, name: string, args: string, status: string, namespace?: string): Json {
  return { id, type: 'function_call', status, arguments: args, call_id: callId, name, ...(namespace !== undefined ? { namespace } : {}) };
}

/**
 * A call's arguments as a Responses client gets them: a JSON text, `{}` for a call that took
 * none (a chat back end may send `""`, which the SDKs' parse of the arguments throws on).
 */
export function argumentsText(args: string): string {
  return args.trim() === '' ? '{}' : args;
}

/** A custom tool's input from the arguments of the function call it went up as. */
export function customInput(args: string): string {
  try {
    const parsed = JSON.parse(args) as { input?: unknown };
    if (typeof parsed?.input === 'string') return parsed.input;
  } catch {
    // not the object it was asked for: the text as it came
  }
  return args;
}

export function customToolCallItem(id: string, callId: string, name: string, input: string, status: string, namespace?: string): Json {
  return { id, type: 'custom_tool_call', status, call_id: callId, name, input, ...(namespace !== undefined ? { namespace } : {}) };
}

/**
 * A tool call of the answer (by the name it went up to chat under) as its output item: a custom
 * tool's call as one, any other as a function call; by the client's name, in its namespace.
 */
export function callItem(id: string, callId: string, chatName: string, args: string, status: string, names: ToolNames): Json {
  const { name, namespace } = names.clientName(chatName);
  return names.customs.has(chatName)
    ? customToolCallItem(id, callId, name, customInput(args), status, namespace)
    : functionCallItem(id, callId, name, argumentsText(args), status, namespace);
}

function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return undefined;
  const texts = (content as Json[]).filter((p) => typeof p?.text === 'string').map((p) => p.text as string);
  return texts.length > 0 ? texts.join('') : undefined;
}

/** A whole chat answer as the `response` object of a request `body`. */
export function toResponse(chat: ChatResponse, body: Json, id: string, model: string, maker?: string): Json {
  const createdAt = Math.floor(Date.now() / 1000);
  const response = responseShell(id, body, model, createdAt);
  const choice = chat.choices?.[0];
  const message = choice?.message;
  const { status, incomplete_details } = statusOf(choice?.finish_reason);
  const output: Json[] = [];
  if (message) {
    // Reasoning, or only its signature (a Gemini function call signed without thought text): the
    // item carries the signature back on the next turn, as a streamed answer's does.
    const reasoning = typeof message.reasoning_content === 'string' ? message.reasoning_content : '';
    const signature = typeof message.reasoning_signature === 'string' && message.reasoning_signature !== '' ? message.reasoning_signature : undefined;
    if (reasoning !== '' || signature !== undefined) output.push(reasoningItem(newId('rs'), reasoning, signature, maker));
    const text = textOf(message.content);
    const refusal = typeof message.refusal === 'string' && message.refusal !== '' ? message.refusal : undefined;
    if ((text !== undefined && text !== '') || refusal !== undefined || !message.tool_calls?.length) {
      const done = status === 'completed' ? 'completed' : 'incomplete';
      output.push(messageItem(newId('msg'), refusal !== undefined && !text ? undefined : (text ?? ''), refusal, done, logprobsOf(choice?.logprobs)));
    }
    const names = toolNamesOf(body);
    const calls = message.tool_calls ?? [];
    calls.forEach((call, i) => {
      const name = call.function?.name ?? '';
      // An answer cut short (max_output_tokens) was cut in its last call: that one is incomplete.
      const done = status === 'completed' || i < calls.length - 1 ? 'completed' : 'incomplete';
      output.push(callItem(newId(names.customs.has(name) ? 'ctc' : 'fc'), call.id, name, call.function?.arguments ?? '', done, names));
    });
  }
  return { ...response, status, incomplete_details, output, usage: responseUsage(chat.usage) };
}
