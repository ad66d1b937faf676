import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { jsonOrUndefined } from '../support/json.js';
import { json, LocalServer, readBody, recordAborts } from './server.js';

export { json };

/** What the fake upstream received, one entry per request. */
export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown> | undefined;
  /** The request body's exact bytes (a multipart form, audio). */
  raw: Buffer;
  /** Set when the caller closed the connection before the response ended. */
  aborted: boolean;
  /** The exact body text the fake answered with (set by the embeddings route). */
  answer?: string;
  /** The id the fake gave its answer in `x-request-id`, as OpenAI gives one on every answer (errors too). */
  requestId: string;
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Record<string, unknown> | undefined, fake: FakeOpenAI) => unknown;

interface ChatBody {
  model?: string;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  messages?: Array<{ role: string; content?: unknown; tool_calls?: Array<{ id: string }>; tool_call_id?: string; function_call?: unknown }>;
  tools?: Array<{ type: string; function: { name: string } }>;
}

/** OpenAI's 400 for a function name it does not take (letters, digits, `_` and `-`; 64 at most), in its tools, as the API words it. */
export function toolNameError(body: ChatBody): Record<string, unknown> | undefined {
  for (const [i, tool] of (body.tools ?? []).entries()) {
    const name = tool.type === 'function' ? tool.function?.name : undefined;
    if (name === undefined) continue;
    const param = `tools[${i}].function.name`;
    if (name.length > 64) {
      return { error: { message: `Invalid '${param}': string too long. Expected a string with maximum length 64, but got a string with length ${name.length} instead.`, type: 'invalid_request_error', param, code: 'string_above_max_length' } };
    }
    if (!/^[a-zA-Z0-9_-]+$/.test(name)) {
      return { error: { message: `Invalid '${param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.`, type: 'invalid_request_error', param, code: 'invalid_value' } };
    }
  }
  return undefined;
}

/** OpenAI's 400 for a tool call id past 40 characters in the history, as the API words it. */
export function toolCallIdError(body: ChatBody): Record<string, unknown> | undefined {
  for (const [i, message] of (body.messages ?? []).entries()) {
    for (const [j, call] of (message.tool_calls ?? []).entries()) {
      if (typeof call.id === 'string' && call.id.length > 40) {
        const param = `messages[${i}].tool_calls[${j}].id`;
        return { error: { message: `Invalid '${param}': string too long. Expected a string with maximum length 40, but got a string with length ${call.id.length} instead.`, type: 'invalid_request_error', param, code: 'string_above_max_length' } };
      }
    }
  }
  return undefined;
}

/**
 * OpenAI's rule for tool turns, as its API words the 400: an assistant message with tool_calls
 * must be followed at once by a tool message for each call, and a tool message must answer one.
 * And no message's content may be an empty list.
 */
export function toolOrderError(messages: NonNullable<ChatBody['messages']>): Record<string, unknown> | undefined {
  const invalid = (message: string, param: string) => ({ error: { message, type: 'invalid_request_error', param, code: null } });
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!;
    if (Array.isArray(message.content) && message.content.length === 0) {
      return invalid(`Invalid 'messages[${i}].content': empty array. Expected an array with minimum length 1, but got an empty array instead.`, `messages.[${i}].content`);
    }
    if (message.role === 'tool') {
      return invalid("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", `messages.[${i}].role`);
    }
    if (message.role === 'assistant' && !message.tool_calls?.length && !message.function_call && (message.content === null || message.content === undefined)) {
      return invalid(`Invalid value for 'content': expected a string, got null.`, `messages.[${i}].content`);
    }
    if (message.role !== 'assistant' || !message.tool_calls?.length) continue;
    const waiting = new Set(message.tool_calls.map((c) => c.id));
    while (messages[i + 1]?.role === 'tool') waiting.delete(messages[++i]!.tool_call_id ?? '');
    if (waiting.size > 0) {
      return invalid(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...waiting].join(', ')}`,
        `messages.[${messages.indexOf(message)}].role`,
      );
    }
  }
  return undefined;
}

/** OpenAI's 400 for a strict tool whose schema leaves a property optional or allows others (checked at the top level), as the API words it. */
export function strictToolError(body: ChatBody): Record<string, unknown> | undefined {
  for (const [i, tool] of (body.tools ?? []).entries()) {
    const fn = tool.function as { name: string; strict?: boolean; parameters?: { properties?: Record<string, unknown>; required?: string[]; additionalProperties?: unknown } };
    if (fn?.strict !== true) continue;
    const schema = fn.parameters ?? {};
    const missing = Object.keys(schema.properties ?? {}).find((name) => !(schema.required ?? []).includes(name));
    if (schema.additionalProperties !== false || missing !== undefined) {
      const why = missing !== undefined ? `'required' is required to be supplied and to be an array including every key in properties. Missing '${missing}'.` : "'additionalProperties' is required to be supplied and to be false.";
      return { error: { message: `Invalid schema for function '${fn.name}': In context=(), ${why}`, type: 'invalid_request_error', param: `tools[${i}].function.parameters`, code: 'invalid_function_parameters' } };
    }
  }
  return undefined;
}

/** OpenAI's 400 for JSON mode in a conversation that never says "json", as the API words it. */
export function jsonModeError(body: Record<string, unknown>): Record<string, unknown> | undefined {
  if ((body.response_format as { type?: unknown } | undefined)?.type !== 'json_object') return undefined;
  if (/json/i.test(JSON.stringify((body.messages as Array<{ content?: unknown }> | undefined)?.map((m) => m.content) ?? []))) return undefined;
  return { error: { message: "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.", type: 'invalid_request_error', param: 'messages', code: null } };
}

/** OpenAI's 400 for a structured-output schema whose root is not an object, as the API words it. */
export function jsonSchemaRootError(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const format = body.response_format as { type?: unknown; json_schema?: { name?: string; schema?: { type?: unknown } } } | undefined;
  const type = format?.type === 'json_schema' ? format.json_schema?.schema?.type : 'object';
  if (type === 'object') return undefined;
  return {
    error: { message: `Invalid schema for response_format '${format?.json_schema?.name}': schema must be a JSON Schema of 'type: "object"', got 'type: "${String(type)}"'.`, type: 'invalid_request_error', param: 'response_format', code: null },
  };
}

/** OpenAI's 400 for a `user` past 64 characters, as the API words it. */
export function userError(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const user = body.user;
  if (typeof user !== 'string' || user.length <= 64) return undefined;
  return { error: { message: `Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with length ${user.length} instead.`, type: 'invalid_request_error', param: 'user', code: 'string_above_max_length' } };
}

/** DeepSeek's 400 for a message whose content is a list where it takes only text, as that API words it. */
function textOnlyError(messages: NonNullable<ChatBody['messages']>): Record<string, unknown> | undefined {
  const i = messages.findIndex((m) => Array.isArray(m.content));
  if (i === -1) return undefined;
  return { error: { message: `Failed to deserialize the JSON body into the target type: messages[${i}]: invalid type: sequence, expected a string at line 1 column 1`, type: 'invalid_request_error', param: null, code: 'invalid_request_error' } };
}

function lastUserText(body: ChatBody): string {
  const last = [...(body.messages ?? [])].reverse().find((m) => m.role === 'user' || m.role === 'tool');
  if (!last) return '';
  if (typeof last.content === 'string') return last.content;
  if (Array.isArray(last.content)) return last.content.map((p: { text?: string }) => p.text ?? '').join(' ');
  return '';
}

/**
 * An OpenAI-compatible upstream for tests: checks the Bearer key like the real API (401 in the
 * real error shape), records every request, and answers chat completions streamed or not,
 * with tool calls, usage only when `stream_options.include_usage` asks for it, and `usage: null`
 * on the other chunks then, as the real API does, and embeddings (float or base64). Tests
 * override a route with `handle()`.
 */
export class FakeOpenAI extends LocalServer {
  readonly received: Received[] = [];
  private overrides = new Map<string, Handler>();
  /** Released by tests to let a held stream continue. */
  private gates: Array<() => void> = [];
  /** Refuse message content given as a list, as DeepSeek does (it takes text only). */
  textOnly = false;

  constructor(readonly apiKey = 'sk-upstream-secret-0123456789') {
    super();
  }

  override async stop(): Promise<void> {
    this.release();
    await super.stop();
  }

  /** Replace the answer for `METHOD /path` (e.g. `POST /v1/chat/completions`). */
  handle(route: string, handler: Handler): void {
    this.overrides.set(route, handler);
  }

  reset(): void {
    this.overrides.clear();
    this.received.length = 0;
  }

  /** A promise a handler can await; `release()` resolves every pending one. */
  gate(): Promise<void> {
    return new Promise((resolve) => this.gates.push(resolve));
  }

  release(): void {
    const pending = this.gates;
    this.gates = [];
    for (const resolve of pending) resolve();
  }

  last(): Received {
    const entry = this.received[this.received.length - 1];
    if (!entry) throw new Error('the fake upstream received nothing');
    return entry;
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const body = jsonOrUndefined<Record<string, unknown>>(raw.toString('utf8'));
    const entry: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, raw, aborted: false, requestId: `req_${randomBytes(12).toString('hex')}` };
    recordAborts(this.received, entry, res);
    res.setHeader('x-request-id', entry.requestId);

    if (req.headers.authorization !== `Bearer ${this.apiKey}`) return json(res, 401, invalidApiKey(req.headers.authorization));
    const route = `${req.method} ${(req.url ?? '').split('?')[0]}`;
    const override = this.overrides.get(route);
    if (override) {
      await override(req, res, body, this);
      return;
    }
    if (route === 'POST /v1/chat/completions') return this.chat(res, (body ?? {}) as ChatBody);
    if (route === 'POST /v1/embeddings') return this.embeddings(res, (body ?? {}) as EmbeddingsBody, entry);
    if (route === 'GET /v1/models') return json(res, 200, { object: 'list', data: [{ id: 'gpt-4o-mini', object: 'model', created: 1, owned_by: 'system' }] });
    return json(res, 404, { error: { message: `Invalid URL (${route})`, type: 'invalid_request_error', param: null, code: null } });
  }

  private chat(res: http.ServerResponse, body: ChatBody): void {
    const refused =
      toolOrderError(body.messages ?? []) ?? toolNameError(body) ?? toolCallIdError(body) ?? strictToolError(body) ?? jsonModeError(body as Record<string, unknown>) ?? jsonSchemaRootError(body as Record<string, unknown>) ?? userError(body as Record<string, unknown>) ?? (this.textOnly ? textOnlyError(body.messages ?? []) : undefined);
    if (refused) return json(res, 400, refused);
    const model = body.model ?? 'unknown';
    const text = `upstream says: ${lastUserText(body)}`;
    const last = body.messages?.[body.messages.length - 1];
    const tool = last?.role === 'user' ? body.tools?.find((t) => t.type === 'function') : undefined;
    const usage = { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, prompt_tokens_details: { cached_tokens: 3 } };
    const id = 'chatcmpl-fake123';
    const created = 1_700_000_000;
    if (!body.stream) {
      const message = tool
        ? { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: tool.function.name, arguments: '{"city":"Paris"}' } }] }
        : { role: 'assistant', content: text };
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, finish_reason: tool ? 'tool_calls' : 'stop', logprobs: null }],
        usage,
        system_fingerprint: 'fp_fake',
      });
    }
    const withUsage = body.stream_options?.include_usage === true;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_fake', choices, ...(withUsage ? { usage: null } : {}), ...extra })}\n\n`);
    send([{ index: 0, delta: { role: 'assistant', content: tool ? null : '' }, finish_reason: null }]);
    if (tool) {
      send([{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_fake1', type: 'function', function: { name: tool.function.name, arguments: '' } }] }, finish_reason: null }]);
      for (const piece of ['{"ci', 'ty":"Pa', 'ris"}']) send([{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null }]);
    } else {
      for (const word of text.split(/(?= )/)) send([{ index: 0, delta: { content: word }, finish_reason: null }]);
    }
    send([{ index: 0, delta: {}, finish_reason: tool ? 'tool_calls' : 'stop' }]);
    if (withUsage) send([], { usage });
    res.end('data: [DONE]\n\n');
  }

  /**
   * An embedding list like the real API's: pretty-printed (so a gateway that writes the JSON
   * again is caught), float arrays or base64 as `encoding_format` asks, `dimensions` honoured,
   * usage counting one token per word or token id. The text sent is kept in `entry.answer`.
   */
  private embeddings(res: http.ServerResponse, body: EmbeddingsBody, entry: Received): void {
    const inputs = fakeInputs(body.input);
    const tokens = inputs.reduce((n, input) => n + (typeof input === 'string' ? input.split(/\s+/).filter(Boolean).length : input.length), 0);
    const data = inputs.map((input, index) => {
      const vector = fakeVector(input, body.dimensions ?? 8);
      return { object: 'embedding', index, embedding: body.encoding_format === 'base64' ? fakeBase64(vector) : vector };
    });
    const text = JSON.stringify({ object: 'list', data, model: body.model ?? 'unknown', usage: { prompt_tokens: tokens, total_tokens: tokens } }, null, 2);
    entry.answer = text;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }
}

interface EmbeddingsBody {
  model?: string;
  input?: unknown;
  encoding_format?: string;
  dimensions?: number;
}

/**
 * The fake's vector for one input: `dimensions` (default 8) float32 values derived from the
 * input's characters or token ids. Exported so tests can compute what the upstream sent.
 */
export function fakeVector(input: string | number[], dimensions = 8): number[] {
  const codes = typeof input === 'string' ? [...input].map((c) => c.codePointAt(0)!) : input;
  const out: number[] = [];
  for (let i = 0; i < dimensions; i++) out.push(Math.fround((((codes[i % codes.length] ?? 0) + 7 * i) % 101) / 101 - 0.5));
  return out;
}

/** Little-endian float32s in base64, as OpenAI encodes embeddings. */
export function fakeBase64(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}

/** The inputs of an embeddings body, one per vector. */
export function fakeInputs(input: unknown): Array<string | number[]> {
  if (typeof input === 'string') return [input];
  if (!Array.isArray(input)) return [];
  if (input.every((x) => typeof x === 'number')) return [input as number[]];
  return input as Array<string | number[]>;
}

/** OpenAI's 401 for a wrong Bearer key, the key shown masked as the API shows it. */
export function invalidApiKey(authorization: string | undefined): Record<string, unknown> {
  const shown = String(authorization ?? '').replace(/^Bearer\s+/, '');
  return {
    error: {
      message: `Incorrect API key provided: ${shown.slice(0, 3)}***${shown.slice(-4)}. You can find your API key at https://platform.example/account/api-keys.`,
      type: 'invalid_request_error',
      param: null,
      code: 'invalid_api_key',
    },
  };
}

export function sse(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
}

export function chunk(content: string, extra: Record<string, unknown> = {}): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }], ...extra })}\n\n`;
}
