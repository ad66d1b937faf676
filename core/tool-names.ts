import { createHash } from 'node:crypto';
import type { ChatChunk, ChatMessage, ChatRequest, ChatResponse, FunctionTool, ToolCallDelta } from './operations.js';
import { likeStream } from './attempt.js';
import { dropUpstreamBytes } from './passthrough.js';
import { mapStream } from './stream.js';

/** What a back end takes as a tool name: which names fit, and how a name that does not is made to. */
export interface ToolNameRule {
  /** Whether the back end takes `name` as it is. */
  fits(name: string): boolean;
  /** `name` with every character the back end refuses replaced (and what it must start with put first). */
  clean(name: string): string;
  /** The longest name it takes. */
  readonly max: number;
}

/** A rule of names of `allowed` characters, `max` at most, optionally starting with one of `first`. */
function nameRule(allowed: string, max: number, first?: string): ToolNameRule {
  const whole = new RegExp(`^${first ? `[${first}]` : ''}[${allowed}]{${first ? 0 : 1},${first ? max - 1 : max}}$`);
  const other = new RegExp(`[^${allowed}]`, 'g');
  const firstOk = first ? new RegExp(`^[${first}]`) : undefined;
  return {
    fits: (name) => whole.test(name),
    clean: (name) => {
      const cleaned = name.replace(other, '_');
      return firstOk && !firstOk.test(cleaned) ? `_${cleaned}` : cleaned;
    },
    max,
  };
}

/** Chat completions: letters, digits, `_` and `-`, 64 at most. */
export const CHAT_TOOL_NAMES = nameRule('a-zA-Z0-9_-', 64);
/** The Messages API: letters, digits, `_` and `-`, 128 at most. */
export const MESSAGES_TOOL_NAMES = nameRule('a-zA-Z0-9_-', 128);
/** Gemini: letters, digits, `_`, `.`, `:` and `-`, starting with a letter or `_`, 64 at most. */
export const GEMINI_TOOL_NAMES = nameRule('a-zA-Z0-9_.:-', 64, 'a-zA-Z_');

/** Whether chat completions takes `name` as a tool name. */
export function fitsChatName(name: string): boolean {
  return CHAT_TOOL_NAMES.fits(name);
}

/**
 * Tool names as a back end takes them. Formats differ in what a function may be called: Gemini
 * takes dots and colons (`files.read`) but no name that starts with a digit, chat completions and
 * the Messages API only letters, digits, `_` and `-`, 64 and 128 characters at most, and each
 * refuses the call otherwise. A translation to such a back end sends each name that does not fit
 * under one that does (what it refuses as `_`; with `_` and a hash of the whole name when that is
 * taken, and always when it is too long, the hash then after as much of its start as fits), and
 * gives the answer's calls back their names as the client declared them.
 */
export class ToolNames {
  /** The name sent for each client name that needed one. */
  private readonly sent = new Map<string, string>();
  /** The client's name for each name sent. */
  private readonly original = new Map<string, string>();

  private constructor() {}

  /**
   * The names of `request` (its tools, its tool choice, its history's calls, and the older
   * `functions`, `function_call` and function results) that `rule` refuses, each with the name sent
   * instead; undefined when every name fits (the common case: nothing to do).
   */
  static of(request: ChatRequest, rule: ToolNameRule = CHAT_TOOL_NAMES): ToolNames | undefined {
    // Most calls have no tools: nothing is gathered for them.
    if (!Array.isArray(request.tools) && typeof request.tool_choice !== 'object' && !request.functions && !hasToolCalls(request.messages)) return undefined;
    const names = namesOf(request);
    if (names.every(rule.fits)) return undefined;
    const map = new ToolNames();
    const fitting = new Set(names.filter(rule.fits));
    // How many names that need changing clean to each form: one shared by two (`a.b`, `a:b`) is
    // neither's, whatever the order of the tools, so that a name sent stays the same turn after turn.
    const cleanedOf = new Map<string, string>();
    const shared = new Map<string, number>();
    for (const name of names) {
      if (fitting.has(name)) continue;
      const cleaned = rule.clean(name);
      cleanedOf.set(name, cleaned);
      shared.set(cleaned, (shared.get(cleaned) ?? 0) + 1);
    }
    for (const [name, cleaned] of cleanedOf) {
      let candidate = cleaned;
      if (!rule.fits(candidate) || fitting.has(candidate) || shared.get(cleaned)! > 1) {
        // Too long, taken or shared: as much of its start as fits, then a hash of the whole name.
        const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
        candidate = `${cleaned.slice(0, rule.max - hash.length - 1)}_${hash}`;
      }
      map.sent.set(name, candidate);
      map.original.set(candidate, name);
    }
    return map;
  }

  /** The request with the names the back end takes (a copy; the request itself is not changed). */
  request(request: ChatRequest): ChatRequest {
    const out: ChatRequest = { ...request };
    if (Array.isArray(request.tools)) {
      out.tools = request.tools.map((tool): FunctionTool => (tool?.function ? { ...tool, function: { ...tool.function, name: this.to(tool.function.name) } } : tool));
    }
    const choice = request.tool_choice as { type?: string; function?: { name?: unknown }; allowed_tools?: { tools?: unknown } } | undefined;
    if (choice && typeof choice === 'object' && typeof choice.function?.name === 'string') {
      out.tool_choice = { ...choice, function: { ...choice.function, name: this.to(choice.function.name) } } as ChatRequest['tool_choice'];
    } else if (choice && typeof choice === 'object' && Array.isArray(choice.allowed_tools?.tools)) {
      const tools = (choice.allowed_tools.tools as Array<{ function?: { name?: unknown } }>).map((tool) =>
        typeof tool?.function?.name === 'string' ? { ...tool, function: { ...tool.function, name: this.to(tool.function.name) } } : tool,
      );
      out.tool_choice = { ...choice, allowed_tools: { ...choice.allowed_tools, tools } } as ChatRequest['tool_choice'];
    }
    if (Array.isArray(request.functions)) out.functions = request.functions.map((fn) => (typeof fn?.name === 'string' ? { ...fn, name: this.to(fn.name) } : fn));
    const legacyChoice = request.function_call;
    if (legacyChoice && typeof legacyChoice === 'object' && typeof legacyChoice.name === 'string') out.function_call = { ...legacyChoice, name: this.to(legacyChoice.name) };
    if (Array.isArray(request.messages)) {
      out.messages = request.messages.map((message): ChatMessage => {
        if (message?.role === 'function' && typeof message.name === 'string') return { ...message, name: this.to(message.name) };
        if (message?.role !== 'assistant') return message;
        let turn = message;
        if (typeof message.function_call?.name === 'string') turn = { ...turn, function_call: { ...message.function_call, name: this.to(message.function_call.name) } };
        if (Array.isArray(message.tool_calls)) turn = { ...turn, tool_calls: message.tool_calls.map((call) => ({ ...call, function: { ...call.function, name: this.to(call.function?.name) } })) };
        return turn;
      });
    }
    return out;
  }

  /** An answer's calls under the client's names again (its bytes from the back end, which hold the names sent, are let go). */
  answer(response: ChatResponse): ChatResponse {
    for (const choice of response.choices ?? []) {
      for (const call of choice?.message?.tool_calls ?? []) {
        if (call?.function && this.original.has(call.function.name)) {
          call.function.name = this.back(call.function.name);
          dropUpstreamBytes(response);
        }
      }
    }
    return response;
  }

  /**
   * A stream's calls under the client's names again (a chunk renamed is written anew, not
   * relayed). A call's name comes whole in its first piece, as every back end sends it.
   */
  stream<C extends ChatChunk>(chunks: AsyncIterable<C>): AsyncIterableIterator<C> {
    const mapped = mapStream(chunks, (chunk) => {
      for (const choice of chunk.choices ?? []) {
        for (const call of (choice?.delta?.tool_calls ?? []) as ToolCallDelta[]) {
          if (call?.function?.name !== undefined && this.original.has(call.function.name)) {
            call.function.name = this.back(call.function.name);
            dropUpstreamBytes(chunk);
          }
        }
      }
      return chunk;
    });
    // An attempt's stream that fails by itself when the attempt aborts still does.
    return likeStream(mapped, chunks);
  }

  private to(name: string): string {
    return this.sent.get(name) ?? name;
  }

  private back(name: string): string {
    return this.original.get(name) ?? name;
  }
}

/** Whether any turn of `messages` made a tool call (or, the older way, a function call or its result). */
function hasToolCalls(messages: readonly ChatMessage[] | undefined): boolean {
  if (!Array.isArray(messages)) return false;
  for (const message of messages) {
    if (message?.role === 'function' || (message?.role === 'assistant' && (Array.isArray(message.tool_calls) || message.function_call))) return true;
  }
  return false;
}

/** Every tool name a request gives: its tools', its tool choice's and its history's calls'. */
function namesOf(request: ChatRequest): string[] {
  const names = new Set<string>();
  for (const tool of request.tools ?? []) if (typeof tool?.function?.name === 'string') names.add(tool.function.name);
  const choice = request.tool_choice as { function?: { name?: unknown }; allowed_tools?: { tools?: Array<{ function?: { name?: unknown } }> } } | undefined;
  if (choice && typeof choice === 'object') {
    if (typeof choice.function?.name === 'string') names.add(choice.function.name);
    for (const tool of Array.isArray(choice.allowed_tools?.tools) ? choice.allowed_tools.tools : []) if (typeof tool?.function?.name === 'string') names.add(tool.function.name);
  }
  // The older function calling's names (made tools later, by the format's translation).
  for (const fn of Array.isArray(request.functions) ? request.functions : []) if (typeof fn?.name === 'string') names.add(fn.name);
  const legacyChoice = request.function_call as { name?: unknown } | undefined;
  if (legacyChoice && typeof legacyChoice === 'object' && typeof legacyChoice.name === 'string') names.add(legacyChoice.name);
  for (const message of Array.isArray(request.messages) ? request.messages : []) {
    if (message?.role === 'function' && typeof message.name === 'string') names.add(message.name);
    if (message?.role !== 'assistant') continue;
    if (typeof message.function_call?.name === 'string') names.add(message.function_call.name);
    for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) if (typeof call?.function?.name === 'string') names.add(call.function.name);
  }
  return [...names];
}
