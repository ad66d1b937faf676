import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { jsonOrUndefined } from '../support/json.js';
import { FakeServer, json, readBody, recordAborts } from './server.js';

type Json = Record<string, any>;

/** What the fake upstream received, one entry per request. */
export interface AnthropicReceived {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Json | undefined;
  /** The request's body as its text came (numbers JSON.parse cannot hold exactly included). */
  text: string;
  /** Set when the caller closed the connection before the response ended. */
  aborted: boolean;
  /** The text of a successful answer as written: the JSON body, or every event's bytes in order. */
  sent: string;
  /** The id the fake gave its answer in `request-id`, as Anthropic gives one on every answer (errors too). */
  requestId: string;
}

/** One event of the stream: its name and data (the data's `type` is set to the name). */
export type FakeEvent = [name: string, data: Json];

/** What a scripted call answers. */
export type FakeReply =
  | { status?: number; headers?: Record<string, string>; json: unknown }
  | {
      events: FakeEvent[];
      /** Close the connection after this many events (a stream cut short). */
      cutAfter?: number;
      /** Raw text written after the events (a malformed line, say). */
      tail?: string;
      /** Write this many events, then wait for `hold` before the rest. */
      holdAfter?: number;
      hold?: Promise<void>;
      /** While holding, send a `ping` event this often (as Anthropic does while a model works). */
      pingEveryMs?: number;
      /** Called when the hold begins (the events before `holdAfter` are written). */
      onHold?: () => void;
      /** After the last event, keep the connection open (the body not ended) until this settles or the caller closes it. */
      linger?: Promise<void>;
    };

export type Script = (body: Json, received: AnthropicReceived) => FakeReply | Promise<FakeReply>;

export const FAKE_USAGE = { input_tokens: 11, output_tokens: 7, cache_creation_input_tokens: 2, cache_read_input_tokens: 5 };

/** Anthropic's error body. */
export function anthropicError(type: string, message: string): Json {
  return { type: 'error', error: { type, message }, request_id: 'req_fake0123' };
}

function lastUserText(body: Json): string {
  const last = [...((body.messages as Json[] | undefined) ?? [])].reverse().find((m) => m.role === 'user');
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  return (last.content as Json[])
    .map((b) => (b.type === 'text' ? b.text : b.type === 'tool_result' ? (typeof b.content === 'string' ? b.content : '') : ''))
    .join(' ')
    .trim();
}

/** A complete message as the API answers it. */
export function message(content: Json[], extra: Json = {}): Json {
  return {
    id: 'msg_fake0123456789',
    type: 'message',
    role: 'assistant',
    model: 'claude-fake-1',
    content,
    stop_reason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { ...FAKE_USAGE },
    ...extra,
  };
}

/** Split a string into pieces of at most `size` characters. */
function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/**
 * The event stream the API sends for a message: message_start (usage with input and cache
 * tokens, output 1), ping, each block as content_block_start / deltas / content_block_stop
 * (text in words, thinking then its signature, tool input as JSON pieces of 5 characters),
 * message_delta (stop_reason, stop_sequence, output tokens), message_stop.
 */
export function eventsOf(msg: Json): FakeEvent[] {
  const usage = msg.usage as Json;
  const events: FakeEvent[] = [
    ['message_start', { message: { ...msg, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } }],
    ['ping', {}],
  ];
  (msg.content as Json[]).forEach((block, index) => {
    if (block.type === 'text') {
      events.push(['content_block_start', { index, content_block: { type: 'text', text: '' } }]);
      for (const word of (block.text as string).split(/(?= )/)) events.push(['content_block_delta', { index, delta: { type: 'text_delta', text: word } }]);
    } else if (block.type === 'thinking') {
      events.push(['content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }]);
      for (const piece of pieces(block.thinking as string, 8)) events.push(['content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } }]);
      events.push(['content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } }]);
    } else if (block.type === 'tool_use') {
      events.push(['content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }]);
      for (const piece of pieces(JSON.stringify(block.input), 5)) events.push(['content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }]);
    } else {
      events.push(['content_block_start', { index, content_block: block }]);
    }
    events.push(['content_block_stop', { index }]);
  });
  events.push(['message_delta', { delta: { stop_reason: msg.stop_reason, stop_sequence: msg.stop_sequence }, usage: { output_tokens: usage.output_tokens } }]);
  events.push(['message_stop', {}]);
  return events;
}

/**
 * An Anthropic Messages API for tests. It checks credentials as the API does: `x-api-key` must
 * be the configured key (401 authentication_error otherwise, in Anthropic's error shape), and
 * `anthropic-version` must be present (400 invalid_request_error otherwise, as the API answers).
 * It records every request and answers POST /v1/messages with JSON or the event stream: by
 * default an echo of the last user text (a tool_use of the first tool when tools are given and
 * the last turn is the user's), or what a test scripts with `script()`.
 */
/**
 * What Anthropic's API says of a body whose messages it refuses: none at all, an empty turn or
 * text block, a message whose text is only whitespace, a base64 document that is not a PDF, a
 * text document that is not text/plain.
 */
/** The first constraint in a schema that Anthropic's structured outputs refuse, with its schema's type. */
function unenforcedConstraint(schema: unknown): { type: string; key: string } | undefined {
  if (schema === null || typeof schema !== 'object') return undefined;
  const s = schema as Json;
  for (const key of ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minLength', 'maxLength', 'pattern']) {
    if (key in s) return { type: String(s.type), key };
  }
  for (const value of Object.values(s)) {
    const inner = Array.isArray(value) ? value.map(unenforcedConstraint).find(Boolean) : unenforcedConstraint(value);
    if (inner) return inner;
  }
  return undefined;
}

function badMessageContent(body: Json): string | undefined {
  const messages = Array.isArray(body.messages) ? (body.messages as Json[]) : [];
  if (messages.length === 0) return 'messages: at least one message is required';
  const tools = Array.isArray(body.tools) ? (body.tools as Json[]) : [];
  const usesTools = messages.some((m) => Array.isArray(m.content) && (m.content as Json[]).some((b) => b.type === 'tool_use' || b.type === 'tool_result'));
  if (usesTools && tools.length === 0) return 'Requests which include `tool_use` or `tool_result` blocks must define tools.';
  for (const [i, tool] of tools.entries()) {
    const schema = tool.input_schema as Json | undefined;
    if (tool.type === undefined && schema?.type !== 'object') return `tools.${i}.custom.input_schema.type: Field required`;
  }
  // Structured outputs refuse constraints they do not enforce (an integer's minimum, a string's minLength).
  const format = (body.output_config as Json | undefined)?.format as Json | undefined;
  const refused = format ? unenforcedConstraint(format.schema) : undefined;
  if (refused) return `output_format.schema: For '${refused.type}' type, property '${refused.key}' is not supported`;
  for (const [i, message] of messages.entries()) {
    const content = message.content;
    const finalAssistant = i === messages.length - 1 && message.role === 'assistant';
    if (!finalAssistant && (content === '' || (Array.isArray(content) && content.length === 0))) return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`;
    // Whitespace alone is refused where it is all the message's text (beside other text it is taken).
    const texts = typeof content === 'string' ? [content] : Array.isArray(content) ? (content as Json[]).filter((b) => b.type === 'text').map((b) => String(b.text)) : [];
    if (texts.length > 0 && texts.every((t) => t.trim() === '') && (typeof content === 'string' || (content as Json[]).every((b) => b.type === 'text'))) {
      if (!(finalAssistant && content === '')) return 'messages: text content blocks must contain non-whitespace text';
    }
    if (!Array.isArray(content)) continue;
    for (const [j, block] of (content as Json[]).entries()) {
      if (block.type === 'text' && block.text === '') return `messages.${i}.content.${j}.text: text content blocks must be non-empty`;
      const source = block.type === 'document' ? (block.source as Json | undefined) : undefined;
      if (source?.type === 'base64' && source.media_type !== 'application/pdf') return `messages.${i}.content.${j}.source.base64.media_type: Input should be 'application/pdf'`;
      if (source?.type === 'text' && source.media_type !== 'text/plain') return `messages.${i}.content.${j}.source.text.media_type: Input should be 'text/plain'`;
    }
  }
  return undefined;
}

export class FakeAnthropic extends FakeServer<AnthropicReceived, Script> {
  constructor(apiKey = 'sk-ant-api03-upstream-secret-0123456789') {
    super(apiKey);
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const text = (await readBody(req)).toString('utf8');
    const body = jsonOrUndefined<Json>(text);
    const entry: AnthropicReceived = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, text, aborted: false, sent: '', requestId: `req_${randomBytes(12).toString('base64url')}` };
    recordAborts(this.received, entry, res);
    res.setHeader('request-id', entry.requestId);

    const key = req.headers['x-api-key'];
    if (typeof key !== 'string' || key === '') return json(res, 401, anthropicError('authentication_error', 'x-api-key header is required'));
    if (key !== this.apiKey) return json(res, 401, anthropicError('authentication_error', 'invalid x-api-key'));
    const version = req.headers['anthropic-version'];
    if (typeof version !== 'string' || version === '') return json(res, 400, anthropicError('invalid_request_error', 'anthropic-version: header is required'));
    const route = `${req.method} ${(req.url ?? '').split('?')[0]}`;
    if (route !== 'POST /v1/messages') return json(res, 404, anthropicError('not_found_error', 'Not Found'));
    if (!body) return json(res, 400, anthropicError('invalid_request_error', 'There was an issue with the request body: not JSON'));
    if (typeof body.max_tokens !== 'number') return json(res, 400, anthropicError('invalid_request_error', 'max_tokens: Field required'));
    const badId = badToolId(body);
    if (badId) return json(res, 400, anthropicError('invalid_request_error', `${badId}: String should match pattern '^[a-zA-Z0-9_-]+$'`));
    const badName = badToolName(body);
    if (badName) return json(res, 400, anthropicError('invalid_request_error', `${badName}: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`));
    const badContent = badMessageContent(body);
    if (badContent) return json(res, 400, anthropicError('invalid_request_error', badContent));

    const reply = this.scripted ? await this.scripted(body, entry) : this.defaultReply(body);
    if ('json' in reply) {
      entry.sent = JSON.stringify(reply.json);
      return json(res, reply.status ?? 200, reply.json, reply.headers);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const events = reply.cutAfter === undefined ? reply.events : reply.events.slice(0, reply.cutAfter);
    for (const [i, [name, data]] of events.entries()) {
      if (reply.hold && i === reply.holdAfter) {
        const pinging = reply.pingEveryMs ? setInterval(() => res.write('event: ping\ndata: {"type": "ping"}\n\n'), reply.pingEveryMs) : undefined;
        reply.onHold?.();
        await reply.hold;
        clearInterval(pinging);
        if (res.destroyed) return;
      }
      const text = `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
      entry.sent += text;
      res.write(text);
    }
    if (reply.tail) res.write(reply.tail);
    if (reply.linger) {
      await Promise.race([reply.linger, new Promise((resolve) => res.once('close', resolve))]);
      if (res.destroyed) return;
    }
    if (reply.cutAfter !== undefined) {
      // A connection that drops mid-stream: no terminating chunk.
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.socket?.destroy();
      return;
    }
    res.end();
  }

  private defaultReply(body: Json): FakeReply {
    const messages = (body.messages as Json[] | undefined) ?? [];
    const last = messages[messages.length - 1];
    const lastIsToolResult = Array.isArray(last?.content) && (last.content as Json[]).some((b) => b.type === 'tool_result');
    const tool = last?.role === 'user' && !lastIsToolResult ? (body.tools as Json[] | undefined)?.[0] : undefined;
    const content: Json[] = tool
      ? [{ type: 'tool_use', id: 'toolu_fake01', name: tool.name, input: { city: 'Paris' } }]
      : [{ type: 'text', text: `upstream says: ${lastUserText(body)}` }];
    const msg = message(content, { model: body.model });
    return body.stream === true ? { events: eventsOf(msg) } : { json: msg };
  }
}

/**
 * Where a client tool's name (no `type`, or `custom`) does not match the pattern the Messages API
 * holds it to, as it names it. (A history's tool_use names are not held to it, only to a length.)
 */
function badToolName(body: Json): string | undefined {
  for (const [i, tool] of (Array.isArray(body.tools) ? (body.tools as Json[]) : []).entries()) {
    if ((tool.type === undefined || tool.type === 'custom') && !(typeof tool.name === 'string' && /^[a-zA-Z0-9_-]{1,128}$/.test(tool.name))) return `tools.${i}.custom.name`;
  }
  return undefined;
}

/** Where a tool use or result id does not match the pattern the Messages API holds them to, as it names it. */
function badToolId(body: Json): string | undefined {
  const turns = Array.isArray(body.messages) ? (body.messages as Json[]) : [];
  for (const [i, turn] of turns.entries()) {
    if (!Array.isArray(turn.content)) continue;
    for (const [j, block] of (turn.content as Json[]).entries()) {
      const field = block?.type === 'tool_use' ? 'id' : block?.type === 'tool_result' ? 'tool_use_id' : undefined;
      if (field && !/^[a-zA-Z0-9_-]+$/.test(String(block[field]))) return `messages.${i}.content.${j}.${block.type}.${field}`;
    }
  }
  return undefined;
}
