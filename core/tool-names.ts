import { createHash } from 'node:crypto';
import type { ChatChunk, ChatMessage, ChatRequest, ChatResponse, FunctionTool, ToolCallDelta } from './operations.js';
import { mapStream } from './stream.js';

/**
 * Tool names as a back end takes them. Formats differ in what a function may be called: Gemini
 * takes dots and colons (`files.read`), chat completions and the Messages API only letters,
 * digits, `_` and `-`, 64 characters at most, and refuse the call otherwise. A translation to such
 * a back end sends each name that does not fit under a name that does (its other characters as
 * `_`; with a hash of the name when that is taken or too long), and gives the answer's calls back
 * their names as the client declared them.
 */
export class ToolNames {
  /** The name sent for each client name that needed one. */
  private readonly sent = new Map<string, string>();
  /** The client's name for each name sent. */
  private readonly original = new Map<string, string>();

  private constructor() {}

  /**
   * The names of `request` (its tools, its tool choice, its history's calls) that `fits` refuses,
   * each with the name sent instead; undefined when every name fits (the common case: nothing to do).
   */
  static of(request: ChatRequest, fits: (name: string) => boolean = fitsChatName): ToolNames | undefined {
    // Most calls have no tools: nothing is gathered for them.
    if (!Array.isArray(request.tools) && typeof request.tool_choice !== 'object' && !request.messages?.some((m) => m?.role === 'assistant' && Array.isArray(m.tool_calls))) return undefined;
    const names = namesOf(request);
    if (names.every(fits)) return undefined;
    const map = new ToolNames();
    const taken = new Set(names.filter(fits));
    for (const name of names) {
      if (fits(name) || map.sent.has(name)) continue;
      let candidate = name.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, MAX_NAME);
      if (!candidate || taken.has(candidate) || !fits(candidate)) {
        const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
        candidate = `${name.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, MAX_NAME - hash.length - 1)}_${hash}`;
      }
      taken.add(candidate);
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
    if (Array.isArray(request.messages)) {
      out.messages = request.messages.map((message): ChatMessage => {
        if (message?.role !== 'assistant' || !Array.isArray(message.tool_calls)) return message;
        return { ...message, tool_calls: message.tool_calls.map((call) => ({ ...call, function: { ...call.function, name: this.to(call.function?.name) } })) };
      });
    }
    return out;
  }

  /** An answer's calls under the client's names again. */
  answer(response: ChatResponse): ChatResponse {
    for (const choice of response.choices ?? []) {
      for (const call of choice?.message?.tool_calls ?? []) if (call?.function) call.function.name = this.back(call.function.name);
    }
    return response;
  }

  /** A stream's calls under the client's names again (a call's name comes whole, in its first piece). */
  stream<C extends ChatChunk>(chunks: AsyncIterable<C>): AsyncIterableIterator<C> {
    return mapStream(chunks, (chunk) => {
      for (const choice of chunk.choices ?? []) {
        for (const call of (choice?.delta?.tool_calls ?? []) as ToolCallDelta[]) if (call?.function?.name !== undefined) call.function.name = this.back(call.function.name);
      }
      return chunk;
    });
  }

  private to(name: string): string {
    return this.sent.get(name) ?? name;
  }

  private back(name: string): string {
    return this.original.get(name) ?? name;
  }
}

/** The longest tool name chat completions and the Messages API take. */
const MAX_NAME = 64;

/** A name chat completions and the Messages API take: letters, digits, `_` and `-`, 1 to 64 of them. */
export function fitsChatName(name: string): boolean {
  return /^[a-zA-Z0-9_-]{1,64}$/.test(name);
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
  for (const message of Array.isArray(request.messages) ? request.messages : []) {
    if (message?.role !== 'assistant' || !Array.isArray(message.tool_calls)) continue;
    for (const call of message.tool_calls) if (typeof call?.function?.name === 'string') names.add(call.function.name);
  }
  return [...names];
}
