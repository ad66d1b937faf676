import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  ChatChunk,
  ChatMessage,
  ChatRequest,
  ChatResponse,
  ChatUsage,
  FinishReason,
  FunctionTool,
  OperationHandler,
  ToolCall,
} from '../../../core/index.js';

export interface MockOptions {
  /** Wait before answering (ms). */
  latencyMs: number;
  /** Wait between streamed chunks (ms). */
  chunkDelayMs: number;
}

/** The mock's tokens: each word with the space before it. Deterministic, good enough to meter. */
export function tokenize(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

function textOf(message: ChatMessage | undefined): string {
  if (!message) return '';
  const content = message.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) => (part.type === 'text' && typeof part.text === 'string' ? part.text : ''))
      .filter(Boolean)
      .join(' ');
  }
  return '';
}

function promptTokens(request: ChatRequest): number {
  let count = 0;
  for (const message of request.messages) {
    count += tokenize(textOf(message)).length + 3;
    // A custom (freeform) tool's call has its text input under `custom`.
    for (const call of message.tool_calls ?? []) count += tokenize(call.function?.arguments ?? (call as { custom?: { input?: string } }).custom?.input ?? '').length + 1;
  }
  return Math.max(1, count);
}

/** The tool the mock calls, if any: forced by tool_choice, else the first, unless 'none'. */
function toolToCall(request: ChatRequest): FunctionTool | undefined {
  const tools = (request.tools ?? []).filter((t): t is FunctionTool => t.type === 'function' && Boolean(t.function));
  if (tools.length === 0 || request.tool_choice === 'none') return undefined;
  const last = request.messages[request.messages.length - 1];
  if (!last || last.role !== 'user') return undefined; // answering a tool result: speak, do not call again
  const choice = request.tool_choice;
  if (choice && typeof choice === 'object' && choice.type === 'function') {
    const name = (choice as { function?: { name?: string } }).function?.name;
    return tools.find((t) => t.function.name === name) ?? tools[0];
  }
  return tools[0];
}

/** Arguments that satisfy the tool's required fields: strings get the user's text. */
function argumentsFor(tool: FunctionTool, text: string): string {
  const parameters = (tool.function.parameters ?? {}) as { properties?: Record<string, { type?: string; enum?: unknown[] }>; required?: string[] };
  const args: Record<string, unknown> = {};
  for (const name of parameters.required ?? []) {
    const spec = parameters.properties?.[name] ?? {};
    if (Array.isArray(spec.enum) && spec.enum.length > 0) args[name] = spec.enum[0];
    else if (spec.type === 'number' || spec.type === 'integer') args[name] = 1;
    else if (spec.type === 'boolean') args[name] = true;
    else if (spec.type === 'array') args[name] = [];
    else if (spec.type === 'object') args[name] = {};
    else args[name] = text;
  }
  return JSON.stringify(args);
}

interface Plan {
  tokens: string[];
  finish: FinishReason;
  toolCall?: ToolCall;
  usage: ChatUsage;
  /** The stop sequence the answer was cut at, if one was (as vLLM-style back ends report it). */
  stopSequence?: string;
}

/** What the mock will answer: the last user (or tool) message, cut by stop and max tokens. */
export function plan(request: ChatRequest): Plan {
  const lastSpoken = [...request.messages].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  const text = textOf(lastSpoken);
  const prompt = promptTokens(request);
  const tool = toolToCall(request);
  if (tool) {
    const args = argumentsFor(tool, text);
    // Deterministic, and new for each turn of each conversation (an id a conversation already
    // holds would make its history one that Anthropic, for one, refuses).
    const id = `call_${createHash('sha256').update(`${tool.function.name}:${args}:`).update(JSON.stringify(request.messages)).digest('hex').slice(0, 24)}`;
    const completion = tokenize(args).length + 1;
    return {
      tokens: [],
      finish: 'tool_calls',
      toolCall: { id, type: 'function', function: { name: tool.function.name, arguments: args } },
      usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
    };
  }
  let output = text;
  let finish: FinishReason = 'stop';
  const stops = request.stop == null ? [] : Array.isArray(request.stop) ? request.stop : [request.stop];
  let stopSequence: string | undefined;
  for (const stop of stops) {
    const at = stop ? output.indexOf(stop) : -1;
    if (at !== -1) {
      output = output.slice(0, at);
      stopSequence = stop;
    }
  }
  let tokens = tokenize(output);
  const max = request.max_completion_tokens ?? request.max_tokens;
  if (typeof max === 'number' && tokens.length > max) {
    tokens = tokens.slice(0, max);
    finish = 'length';
    stopSequence = undefined;
  }
  const usage = { prompt_tokens: prompt, completion_tokens: tokens.length, total_tokens: prompt + tokens.length };
  return stopSequence === undefined ? { tokens, finish, usage } : { tokens, finish, usage, stopSequence };
}

function completionId(): string {
  return `chatcmpl-mock${randomBytes(10).toString('hex')}`;
}

export function mockChat(options: MockOptions): OperationHandler<'chat'> {
  return async (request, { signal, request: ctx }) => {
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    // The mock stands in for a chat completions back end, which has no top_k (a Claude-style or Gemini-style client's).
    if (request.body.top_k != null) {
      const losses = (ctx.losses ??= []);
      if (!losses.includes('top_k')) losses.push('top_k');
    }
    const answer = plan(request.body);
    const n = Math.max(1, request.body.n ?? 1);
    const created = Math.floor(Date.now() / 1000);
    const id = completionId();
    if (!request.stream) {
      const body: ChatResponse = {
        id,
        object: 'chat.completion',
        created,
        model: request.model,
        choices: Array.from({ length: n }, (_, index) => ({
          index,
          message: answer.toolCall
            ? { role: 'assistant' as const, content: null, tool_calls: [answer.toolCall], refusal: null }
            : { role: 'assistant' as const, content: answer.tokens.join('').trimStart(), refusal: null },
          finish_reason: answer.finish,
          ...(answer.stopSequence === undefined ? {} : { stop_sequence: answer.stopSequence }),
          logprobs: null,
        })),
        usage: { ...answer.usage, completion_tokens: answer.usage.completion_tokens * n, total_tokens: answer.usage.prompt_tokens + answer.usage.completion_tokens * n },
        system_fingerprint: 'fp_mock',
      };
      return { kind: 'json', status: 200, body };
    }
    return { kind: 'stream', status: 200, chunks: streamAnswer(answer, n, id, created, request.model, options, signal) };
  };
}

async function* streamAnswer(
  answer: Plan,
  n: number,
  id: string,
  created: number,
  model: string,
  options: MockOptions,
  signal: AbortSignal,
): AsyncGenerator<ChatChunk> {
  const chunk = (choices: ChatChunk['choices'], usage: ChatUsage | null = null): ChatChunk => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    system_fingerprint: 'fp_mock',
    choices,
    usage,
  });
  const pause = async () => {
    if (options.chunkDelayMs > 0) await sleep(options.chunkDelayMs, undefined, { signal });
  };
  for (let index = 0; index < n; index++) {
    yield chunk([{ index, delta: { role: 'assistant', content: answer.toolCall ? null : '', refusal: null }, finish_reason: null, logprobs: null }]);
    if (answer.toolCall) {
      const args = answer.toolCall.function.arguments;
      const half = Math.ceil(args.length / 2);
      const pieces = [args.slice(0, half), args.slice(half)].filter(Boolean);
      await pause();
      yield chunk([
        {
          index,
          delta: { tool_calls: [{ index: 0, id: answer.toolCall.id, type: 'function', function: { name: answer.toolCall.function.name, arguments: '' } }] },
          finish_reason: null,
          logprobs: null,
        },
      ]);
      for (const piece of pieces) {
        await pause();
        yield chunk([{ index, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null, logprobs: null }]);
      }
    } else {
      for (const [i, token] of answer.tokens.entries()) {
        await pause();
        yield chunk([{ index, delta: { content: i === 0 ? token.trimStart() : token }, finish_reason: null, logprobs: null }]);
      }
    }
    await pause();
    const matched = answer.stopSequence === undefined ? {} : { stop_sequence: answer.stopSequence };
    yield chunk([{ index, delta: {}, finish_reason: answer.finish, ...matched, logprobs: null }]);
  }
  const completion = answer.usage.completion_tokens * n;
  yield chunk([], { prompt_tokens: answer.usage.prompt_tokens, completion_tokens: completion, total_tokens: answer.usage.prompt_tokens + completion });
}
