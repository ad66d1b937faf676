import { GatewayError } from './errors.js';
import type { ChatChunk, ChatMessage, ChatRequest, ChatResponse, FunctionTool, ToolCallDelta, ToolChoice } from './operations.js';

/**
 * Chat completions' older way of calling functions, before tools: the request's `functions` and
 * `function_call`, an assistant message's `function_call` ({name, arguments}) and a `function`
 * message with the result (its `name` says whose). Back ends that speak chat completions take it
 * as it is; a translation to a format that knows only tools turns it into tools with
 * `functionsAsTools`, and the answer back into the older shape with `toolCallsAsFunctionCall` (a
 * reply) or `toolDeltasAsFunctionCall` (a stream's chunks), for the client that asked that way.
 */

interface LegacyFunction {
  name?: unknown;
  description?: unknown;
  parameters?: unknown;
}

interface LegacyCall {
  name?: unknown;
  arguments?: unknown;
}

/** Whether a request asks in the older way only: `functions` and no `tools` (its answer then comes back as `function_call`). */
export function usesLegacyFunctions(request: { functions?: unknown; tools?: unknown } | undefined | null): boolean {
  if (!request || !Array.isArray(request.functions) || request.functions.length === 0) return false;
  return !Array.isArray(request.tools) || request.tools.length === 0;
}

/** The id given to the call of the older shape in message `index` of the history (one call a turn). */
const callIdOf = (index: number): string => `call_fn_${index}`;

/** Where a translation names what it could not carry (both formats' `Losses`). */
export interface LossNotes {
  add(name: string): void;
}

/** The loss named for a `function` message that answers no call before it: it is left out. */
export const UNANSWERED_FUNCTION_RESULT = 'messages.role.function.without_call';

/**
 * The request with the older function calling as tools: `functions` as `tools` (beside any the
 * request has), `function_call` as `tool_choice` (when it sets none), each assistant
 * `function_call` as a tool call with an id of its own (none when the turn has a tool call of the
 * same name: that call), and each `function` message as the `tool` result of the
 * latest call of its name not yet answered; a result that answers no call is left out (a back end
 * refuses a result without its call), named in `losses`. The older way makes one call a turn: a
 * request that asks only that way gets `parallel_tool_calls: false`. The request itself is not
 * changed; one without any of it comes back as it is.
 */
export function functionsAsTools(request: ChatRequest, losses?: LossNotes): ChatRequest {
  refuseCustomTools(request);
  const functions = Array.isArray(request.functions) ? (request.functions as LegacyFunction[]) : undefined;
  const messages = Array.isArray(request.messages) ? request.messages : [];
  const legacyHistory = messages.some((m) => m?.role === 'function' || (m?.role === 'assistant' && isLegacyCall(m.function_call)));
  if (!functions && request.function_call === undefined && !legacyHistory) return request;

  const out: ChatRequest = { ...request };
  delete out.functions;
  delete out.function_call;
  if (functions) {
    const tools: FunctionTool[] = Array.isArray(request.tools) ? [...request.tools] : [];
    const named = new Set(tools.map((tool) => tool.function?.name));
    for (const fn of functions) {
      if (!fn || typeof fn.name !== 'string' || named.has(fn.name)) continue;
      const tool: FunctionTool = { type: 'function', function: { name: fn.name } };
      if (typeof fn.description === 'string') tool.function.description = fn.description;
      if (fn.parameters !== null && typeof fn.parameters === 'object') tool.function.parameters = fn.parameters as Record<string, unknown>;
      tools.push(tool);
      named.add(fn.name);
    }
    if (tools.length > 0) out.tools = tools;
    if (usesLegacyFunctions(request) && out.parallel_tool_calls === undefined) out.parallel_tool_calls = false;
  }
  if (out.tool_choice === undefined) {
    const choice = toolChoiceOf(request.function_call);
    if (choice !== undefined) out.tool_choice = choice;
  }
  if (legacyHistory) {
    // The calls not yet answered, latest last: a function result answers the latest of its name.
    const pending: Array<{ id: string; name: string }> = [];
    const kept: ChatMessage[] = [];
    for (const [index, message] of messages.entries()) {
      if (message?.role === 'assistant') {
        const toolCalls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
        let turn = message;
        if (isLegacyCall(message.function_call)) {
          const { function_call: call, ...rest } = message;
          const name = call.name;
          const args = typeof call.arguments === 'string' ? call.arguments : '{}';
          // The same call given both ways (a client that kept both fields, its arguments perhaps
          // written otherwise) is one call: the older field holds one call, a turn's of that name.
          const same = toolCalls.some((c) => c.function?.name === name);
          turn = same ? rest : { ...rest, tool_calls: [...toolCalls, { id: callIdOf(index), type: 'function' as const, function: { name, arguments: args } }] };
        }
        for (const call of turn.tool_calls ?? []) pending.push({ id: call.id, name: call.function?.name });
        kept.push(turn);
        continue;
      }
      if (message?.role === 'function') {
        const { name, ...rest } = message;
        let answered = -1;
        for (let i = pending.length - 1; i >= 0 && answered === -1; i--) if (pending[i]!.name === name) answered = i;
        if (answered === -1) {
          losses?.add(UNANSWERED_FUNCTION_RESULT);
          continue;
        }
        const [call] = pending.splice(answered, 1);
        kept.push({ ...rest, role: 'tool', tool_call_id: call!.id, content: rest.content ?? '' });
        continue;
      }
      // A tool result answers its call by id.
      if (message?.role === 'tool') {
        const at = pending.findIndex((call) => call.id === message.tool_call_id);
        if (at !== -1) pending.splice(at, 1);
      }
      kept.push(message);
    }
    out.messages = kept;
  }
  return out;
}

function isLegacyCall(value: unknown): value is LegacyCall & { name: string } {
  return value !== null && typeof value === 'object' && typeof (value as LegacyCall).name === 'string';
}

/** `function_call` as a tool choice: `none`, `auto`, or `{name}` for that function. */
function toolChoiceOf(choice: unknown): ToolChoice | undefined {
  if (choice === 'none' || choice === 'auto') return choice;
  if (isLegacyCall(choice)) return { type: 'function', function: { name: choice.name } };
  return undefined;
}

/** What turning an answer into the older shape did: nothing, changed it, or changed it and left out a later call. */
export type Reshaped = 'unchanged' | 'changed' | 'dropped';

/**
 * A chat answer in the older shape, for a client that asked with `functions`: a choice's first
 * tool call as its message's `function_call`, finish `function_call` for `tool_calls`. The older
 * shape holds one call: any more are left out (`dropped`, for the caller to name as a loss).
 */
export function toolCallsAsFunctionCall(response: ChatResponse): Reshaped {
  let done: Reshaped = 'unchanged';
  for (const choice of response.choices ?? []) {
    const message = choice?.message;
    const calls = message?.tool_calls;
    if (Array.isArray(calls)) {
      const first = calls[0];
      if (first) message.function_call = { name: first.function?.name ?? '', arguments: first.function?.arguments ?? '' };
      delete message.tool_calls;
      done = calls.length > 1 ? 'dropped' : done === 'dropped' ? done : 'changed';
    }
    if (choice && choice.finish_reason === 'tool_calls') {
      choice.finish_reason = 'function_call';
      if (done === 'unchanged') done = 'changed';
    }
  }
  return done;
}

/**
 * A stream's chunk in the older shape (see toolCallsAsFunctionCall): the first tool call's pieces
 * (index 0: every translation numbers a choice's calls from 0) as `delta.function_call` ({name}
 * first, then pieces of `arguments`), the pieces of any later call left out; finish
 * `function_call` for `tool_calls`.
 */
export function toolDeltasAsFunctionCall(chunk: ChatChunk): Reshaped {
  let done: Reshaped = 'unchanged';
  for (const choice of chunk.choices ?? []) {
    const delta = choice?.delta;
    const calls = delta?.tool_calls as ToolCallDelta[] | undefined;
    if (Array.isArray(calls)) {
      const first = calls.find((call) => call.index === 0);
      if (first) {
        const piece: { name?: string; arguments: string } = { arguments: first.function?.arguments ?? '' };
        if (first.function?.name !== undefined) piece.name = first.function.name;
        delta.function_call = piece;
      }
      delete delta.tool_calls;
      done = calls.some((call) => call.index !== 0) ? 'dropped' : done === 'dropped' ? done : 'changed';
    }
    if (choice && choice.finish_reason === 'tool_calls') {
      choice.finish_reason = 'function_call';
      if (done === 'unchanged') done = 'changed';
    }
  }
  return done;
}

/**
 * Custom (freeform) tools, and calls of them in the conversation, which a chat completions client
 * may send: a back end of another API has nothing that takes their text input, and a translation
 * would hand the client function calls for its custom tools. Refused (400, naming the field)
 * before any back end is called, rather than dropped or failing inside the translation.
 */
function refuseCustomTools(request: ChatRequest): void {
  const refuse = (param: string) =>
    new GatewayError('invalid_value', { param, params: { param, detail: 'custom tools are carried only to back ends that speak chat completions; this model is served by one of another API. Use a function tool.' } });
  const tools = request.tools as Array<{ type?: unknown }> | undefined;
  if (Array.isArray(tools)) {
    const at = tools.findIndex((tool) => tool?.type === 'custom');
    if (at >= 0) throw refuse(`tools[${at}]`);
  }
  if (!Array.isArray(request.messages)) return;
  for (const [i, message] of request.messages.entries()) {
    const calls = message?.tool_calls as Array<{ type?: unknown }> | undefined;
    if (!Array.isArray(calls)) continue;
    const at = calls.findIndex((call) => call?.type === 'custom');
    if (at >= 0) throw refuse(`messages[${i}].tool_calls[${at}]`);
  }
}
