import { createHash } from 'node:crypto';
import type { Pool } from 'undici';
import {
  EVENT_STREAM,
  GatewayError,
  postJson,
  readJson,
  readRelayable,
  translateEvents,
  type ChatChunk,
  type ChatMessage,
  type FunctionTool,
  type OperationHandler,
  abortOf,
  acceptFor,
  mergeHeaders,
  strictReady,
  toolMediaAfter,
  ToolNames,
} from '../../../core/index.js';
import { clientText, OPENAI_FORMAT, type Endpoint } from './api.js';
import { finishesAChoice, OpenAIEvents } from './events.js';
import { WrappedRoot } from './json-root.js';

/**
 * Chat completions against an OpenAI-compatible back end. The body goes up as the client sent
 * it, with the back end's model name; a stream always asks for usage (the format hides the
 * usage chunk from a client that did not ask). Chunks are relayed as they arrive.
 */
export function chatHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'chat'> {
  const path = `${endpoint.basePath}/chat/completions`;
  return async (request, context) => {
    // The attempt's own abort watch: no AbortSignal made per call.
    const signal = abortOf(context);
    const ctx = context.request;
    const dropped: string[] = [];
    // Tool names chat completions refuses (a Gemini client's `files.read`) go up as names it
    // takes, in a call translated from another format (a chat client's own names go as it sent them).
    const translated = request.source?.format !== OPENAI_FORMAT;
    const names = translated ? ToolNames.of(request.body) : undefined;
    if (names) request = { ...request, body: names.request(request.body) };
    // A schema another format may give a root other than an object (a Gemini client's list)
    // goes up inside one; the answer comes back out of it.
    const root = translated ? WrappedRoot.of(request.body) : undefined;
    if (root) request = { ...request, body: root.request(request.body) };
    const kept = forChatCompletions(request.body.messages, dropped, endpoint.reasoningContent);
    // For a call translated from another format: what a tool returned besides text goes after the
    // results (chat's tool results take text only); call ids another format made (a Gemini
    // client's `call_0_<name>`) fit chat's 40 characters; text in parts (a Claude client's blocks)
    // goes as plain text; a turn left with nothing to say is not sent.
    const messages = translated ? plainTurns(fitCallIds(toolMediaAfter(kept)), dropped) : kept;
    // The client's own text when nothing in it changes; else the body with this back end's changes.
    const raw = messages === request.body.messages ? clientText(request) : undefined;
    let body: Record<string, unknown> | undefined;
    if (raw === undefined) {
      // A call translated from another format (or bridged from Responses) asks for its limit in
      // the field this back end takes; a chat completions client's own field goes up as it chose.
      if (translated && request.body.max_tokens !== undefined && endpoint.maxTokensField === 'max_completion_tokens') {
        const { max_tokens, ...rest } = request.body;
        body = { ...rest, max_completion_tokens: rest.max_completion_tokens ?? max_tokens, model: request.model };
      } else body = { ...request.body, model: request.model };
      if (messages !== request.body.messages) body.messages = messages;
      if (translated) fitTranslated(body, dropped);
      if (request.stream) {
        body.stream = true;
        body.stream_options = { ...(request.body.stream_options ?? {}), include_usage: true };
      }
    }
    const headers = mergeHeaders(endpoint.headers, request.forwardHeaders, acceptFor(request.stream));
    const response = await postJson(pool, { path, headers, body, raw, signal, secrets, stream: request.stream });
    // Named once this back end answered: a failed attempt's changes are not the call's losses.
    if (ctx && dropped.length > 0) {
      const losses = (ctx.losses ??= []);
      for (const name of dropped) if (!losses.includes(name)) losses.push(name);
    }
    const type = String(response.headers['content-type'] ?? '');
    if (request.stream && !EVENT_STREAM.test(type)) {
      await readJson(response, signal);
      throw new GatewayError('upstream_error', { params: { detail: 'the back end did not stream' }, retryable: true });
    }
    // The format that speaks this shape sends these bytes as they came (no re-serialising), once
    // they parsed as a chat completion.
    if (!request.stream) {
      const answer = readRelayable<'chat'>(response, signal, OPENAI_FORMAT, isCompletion, 'a chat completion');
      // Renamed calls get the client's names back (and their bytes, which hold the names sent, go).
      if (!names && !root) return answer;
      return answer.then((read) => {
        if (read.kind === 'json') {
          names?.answer(read.body);
          root?.answer(read.body);
        }
        return read;
      });
    }
    let chunks: AsyncIterable<ChatChunk> = translateEvents(response.body, new OpenAIEvents(secrets, isChunk, finishesAChoice), signal);
    if (names) chunks = names.stream(chunks);
    if (root) chunks = root.stream(chunks);
    return { kind: 'stream', status: response.statusCode, chunks };
  };
}

/** The longest tool call id chat completions takes (a longer one is refused: `string_above_max_length`). */
const MAX_CALL_ID = 40;

/** A call id of at most MAX_CALL_ID characters: as it is when it fits, else `call_` and a hash of it (the same for a call and its result). */
function fitCallId(id: string): string {
  return id.length <= MAX_CALL_ID ? id : `call_${createHash('sha256').update(id).digest('hex').slice(0, 32)}`;
}

/**
 * The messages with every tool call id chat completions would refuse (past 40 characters) made to
 * fit, a call's and its result's alike; the same array when none needed it. The client never sees
 * these: the answer's calls carry the back end's own ids.
 */
export function fitCallIds(messages: ChatMessage[]): ChatMessage[] {
  if (!Array.isArray(messages)) return messages;
  let out: ChatMessage[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    let copy: ChatMessage | undefined;
    if (Array.isArray(message.tool_calls) && message.tool_calls.some((call) => typeof call?.id === 'string' && call.id.length > MAX_CALL_ID)) {
      copy = { ...message, tool_calls: message.tool_calls.map((call) => (typeof call?.id === 'string' ? { ...call, id: fitCallId(call.id) } : call)) };
    }
    if (typeof message.tool_call_id === 'string' && message.tool_call_id.length > MAX_CALL_ID) copy = { ...(copy ?? message), tool_call_id: fitCallId(message.tool_call_id) };
    if (!copy) continue;
    out ??= messages.slice();
    out[i] = copy;
  }
  return out ?? messages;
}

/**
 * The fields of a call translated from another format as a strict chat completions server takes
 * them (a chat client's own fields go up as it sent them, and it gets what its server says):
 * each change that leaves something out is named in `dropped`.
 */
function fitTranslated(body: Record<string, unknown>, dropped: string[]): void {
  // OpenAI takes a `user` of 64 characters at most; another format's (Claude Code's
  // metadata.user_id, about 150) goes as its SHA-256, the same id for the same user.
  if (typeof body.user === 'string' && body.user.length > MAX_USER) body.user = createHash('sha256').update(body.user).digest('hex');
  // Chat completions has no top_k (OpenAI refuses the field).
  if (body.top_k !== undefined) {
    delete body.top_k;
    dropped.push('top_k');
  }
  // Chat completions' JSON mode refuses a conversation in which the word "json" never appears
  // (400); another format's (a Gemini client's responseMimeType) has no such rule: a system line
  // says it.
  if ((body.response_format as { type?: unknown } | undefined)?.type === 'json_object' && !mentionsJson(body.messages as ChatMessage[])) {
    body.messages = withJsonModeLine(body.messages as ChatMessage[]);
  }
  // Another format's strict mode allows optional properties; chat completions' refuses such a
  // schema (400): that tool goes up not strict, held to its schema less firmly.
  if (Array.isArray(body.tools) && body.tools.some(needsLooseStrict)) {
    body.tools = (body.tools as FunctionTool[]).map((tool) => (needsLooseStrict(tool) ? { ...tool, function: { ...tool.function, strict: false } } : tool));
    dropped.push('tools.strict');
  }
  // OpenAI takes four stop sequences at most; another format may have sent more.
  if (Array.isArray(body.stop) && body.stop.length > MAX_STOP_SEQUENCES) {
    body.stop = body.stop.slice(0, MAX_STOP_SEQUENCES);
    dropped.push('stop.too_many');
  }
}

/** The system line a translated call in JSON mode goes up with when nothing in it says "json". */
const JSON_MODE_LINE = 'Answer in JSON.';

/**
 * The messages with JSON_MODE_LINE: at the end of the first system message's text when the
 * conversation opens with one (some servers' chat templates refuse a second system message),
 * else as a system message of its own, first.
 */
function withJsonModeLine(messages: ChatMessage[]): ChatMessage[] {
  const first = messages[0];
  if (first?.role === 'system' && typeof first.content === 'string') return [{ ...first, content: `${first.content}\n${JSON_MODE_LINE}` }, ...messages.slice(1)];
  return [{ role: 'system', content: JSON_MODE_LINE }, ...messages];
}

/** Whether any text of the conversation says "json", as chat completions' JSON mode requires. */
function mentionsJson(messages: ChatMessage[]): boolean {
  const says = (text: unknown) => typeof text === 'string' && /json/i.test(text);
  return messages.some((m) => says(m.content) || (Array.isArray(m.content) && m.content.some((p) => says(p?.text))));
}

/** A tool marked strict whose schema chat completions' strict mode refuses. */
function needsLooseStrict(tool: FunctionTool | undefined): boolean {
  return tool?.type === 'function' && tool.function?.strict === true && !strictReady(tool.function.parameters ?? { type: 'object' });
}

/** The longest `user` chat completions takes (a longer one is refused: "string too long"). */
const MAX_USER = 64;

/**
 * Messages of a call translated from another format as every chat completions server takes them:
 * content that is only text parts (a Claude client's system blocks and tool results, a Gemini
 * turn of several parts) as one string, the parts a line apart, since some servers (DeepSeek)
 * refuse a list where they expect text; and an assistant turn with neither text nor calls (one
 * that held only thinking or a server tool's blocks) left out, named `messages.empty_assistant_turn`,
 * since OpenAI refuses an assistant message without content; a file given inline without a name
 * named (see namedFiles). The same array when nothing changed.
 */
export function plainTurns(messages: ChatMessage[], losses: string[]): ChatMessage[] {
  if (!Array.isArray(messages)) return messages;
  let out: ChatMessage[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    const content = message.content;
    const text = Array.isArray(content) && content.every((p) => p?.type === 'text') ? content.map((p) => String(p.text ?? '')).join('\n') : undefined;
    const said = text ?? content;
    if (message.role === 'assistant' && !message.tool_calls?.length && !message.function_call && !message.refusal && (said == null || said === '')) {
      out ??= messages.slice(0, i);
      if (!losses.includes('messages.empty_assistant_turn')) losses.push('messages.empty_assistant_turn');
      continue;
    }
    const named = text === undefined && Array.isArray(content) ? namedFiles(content) : content;
    if (text !== undefined || named !== content) out ??= messages.slice(0, i);
    out?.push(text !== undefined ? { ...message, content: text } : named !== content ? { ...message, content: named as ChatMessage['content'] } : message);
  }
  return out ?? messages;
}

/**
 * Parts with a file given inline and no name (a Gemini client's PDF, a Claude client's document
 * without a title) named by their type (`document.pdf`): OpenAI refuses `file_data` without a
 * `filename`. The same array when every file has one.
 */
function namedFiles(parts: readonly unknown[]): readonly unknown[] {
  let out: unknown[] | undefined;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as { type?: unknown; file?: { file_data?: unknown; filename?: unknown } } | null;
    if (part?.type !== 'file' || typeof part.file?.file_data !== 'string' || typeof part.file.filename === 'string') continue;
    const subtype = /^data:[^/;,]+\/([A-Za-z0-9.+-]+)/.exec(part.file.file_data)?.[1]?.toLowerCase();
    out ??= parts.slice();
    out[i] = { ...part, file: { ...part.file, filename: subtype === undefined || subtype === 'pdf' ? 'document.pdf' : `document.${subtype}` } };
  }
  return out ?? parts;
}

/** How many stop sequences chat completions takes. */
const MAX_STOP_SEQUENCES = 4;

/** Fields the canonical form carries on messages that chat completions has no place for. */
const NOT_IN_CHAT = ['reasoning_content', 'reasoning_signature', 'images', 'tool_error'] as const;

/**
 * The canonical form carries a model's earlier reasoning on assistant turns (from formats that
 * send thinking back, such as messages) and the images an earlier answer made (Gemini image
 * output); chat completions has no field for either, and OpenAI refuses messages with fields it
 * does not know, so they stay here, each named as a loss (`messages.<field>`). The array is
 * copied only when a message has such a field.
 */
export function forChatCompletions(messages: ChatMessage[], losses: string[], keepReasoning = false): ChatMessage[] {
  if (!Array.isArray(messages)) return messages;
  let out: ChatMessage[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    let copy: Record<string, unknown> | undefined;
    // A back end that takes reasoning back (DeepSeek) wants it on every turn that called tools,
    // an empty one where there was none (another back end's turn).
    if (keepReasoning && message.role === 'assistant' && message.tool_calls?.length && typeof message.reasoning_content !== 'string') {
      copy = { ...message, reasoning_content: '' };
    }
    for (const field of NOT_IN_CHAT) {
      if (message[field] === undefined || (keepReasoning && field === 'reasoning_content')) continue;
      copy ??= { ...message };
      delete copy[field];
      // A null is "none": nothing is lost by leaving it out.
      const name = `messages.${field}`;
      if (message[field] !== null && !losses.includes(name)) losses.push(name);
    }
    // Whose signature it was: the gateway's own note, which goes with the signature.
    if (message.reasoning_signature_by !== undefined) {
      copy ??= { ...message };
      delete copy.reasoning_signature_by;
    }
    if (!copy) continue;
    out ??= messages.slice();
    out[i] = copy as ChatMessage;
  }
  return out ?? messages;
}

/** A chunk the canonical chat stream can carry: an object whose choices (if any) are objects. */
function isChunk(value: unknown): value is ChatChunk {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const choices = (value as { choices?: unknown }).choices;
  if (choices === undefined) return true;
  return Array.isArray(choices) && choices.every((c) => c !== null && typeof c === 'object' && !Array.isArray(c));
}


/**
 * A chat completion: `choices`, a list of objects each with a `message` object, and no `error`
 * (some back ends answer 200 with an error object).
 */
function isCompletion(value: Record<string, unknown>): boolean {
  if (value.error !== undefined && value.error !== null) return false;
  const choices = value.choices;
  return (
    Array.isArray(choices) &&
    choices.every((c) => c !== null && typeof c === 'object' && !Array.isArray(c) && (c as { message?: unknown }).message !== null && typeof (c as { message?: unknown }).message === 'object')
  );
}
