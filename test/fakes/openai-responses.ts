import type http from 'node:http';
import { json, type FakeOpenAI } from './openai-upstream.js';

/**
 * A back end with OpenAI's Responses API, installed on a FakeOpenAI (which checks the Bearer key
 * and records what it received): POST /v1/responses (JSON or its event stream) and POST
 * /v1/responses/compact. It keeps the responses it made, refuses an unknown
 * `previous_response_id` as OpenAI does (on both paths), and writes its JSON in its own spacing (`": "`), so a
 * gateway that parses and writes an answer again, instead of relaying its bytes, is caught.
 * Every body it sent is kept in `sent` (the JSON text, or the stream's text).
 */
export interface NativeResponses {
  /** The ids this back end made. */
  readonly made: Set<string>;
  /** What it answered, in order: the exact text. */
  readonly sent: string[];
  /** When set, a stream's connection stays open after its last event until this settles (or the gateway closes it). */
  linger?: Promise<void>;
}

type Json = Record<string, unknown>;

/** JSON in a spacing JSON.stringify never writes (a space after each key's colon). */
export function spaced(value: unknown): string {
  return JSON.stringify(value).replace(/"(\w+)":/g, '"$1": ');
}

function lastText(input: unknown): string {
  if (typeof input === 'string') return input;
  if (!Array.isArray(input)) return '';
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i] as Json;
    if (item.type === 'function_call_output') return String(item.output);
    if (item.role !== 'user') continue;
    if (typeof item.content === 'string') return item.content;
    if (Array.isArray(item.content)) return (item.content as Json[]).map((p) => String(p.text ?? '')).join('');
  }
  return '';
}

export const NATIVE_USAGE = {
  input_tokens: 21,
  input_tokens_details: { cached_tokens: 4 },
  output_tokens: 5,
  output_tokens_details: { reasoning_tokens: 2 },
  total_tokens: 26,
};

export function installNativeResponses(fake: FakeOpenAI): NativeResponses {
  const state: NativeResponses = { made: new Set(), sent: [] };
  let counter = 0;
  const handler = (_req: http.IncomingMessage, res: http.ServerResponse, body: Json | undefined) => {
    const request = body ?? {};
    const previous = request.previous_response_id;
    if (typeof previous === 'string' && !state.made.has(previous)) {
      return json(res, 400, {
        error: { message: `Previous response with id '${previous}' not found.`, type: 'invalid_request_error', param: 'previous_response_id', code: 'previous_response_not_found' },
      });
    }
    counter++;
    const id = `resp_native${String(counter).padStart(4, '0')}`;
    state.made.add(id);
    const text = `native says: ${lastText(request.input)}`;
    const message = { id: `msg_native${counter}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] };
    const base = {
      id,
      object: 'response',
      created_at: 1_700_000_000,
      status: 'in_progress',
      error: null,
      incomplete_details: null,
      instructions: request.instructions ?? null,
      model: request.model,
      output: [] as unknown[],
      previous_response_id: previous ?? null,
      usage: null as unknown,
    };
    if (request.stream !== true) {
      const text = JSON.stringify({ ...base, status: 'completed', output: [message], usage: NATIVE_USAGE }, null, 2);
      state.sent.push(text);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    let sequence = 0;
    let out = '';
    const send = (type: string, fields: Json) => {
      out += `event: ${type}\ndata: ${spaced({ type, sequence_number: sequence++, ...fields })}\n\n`;
    };
    const where = { item_id: message.id, output_index: 0, content_index: 0 };
    send('response.created', { response: base });
    send('response.in_progress', { response: base });
    send('response.output_item.added', { output_index: 0, item: { ...message, status: 'in_progress', content: [] } });
    send('response.content_part.added', { ...where, part: { type: 'output_text', text: '', annotations: [] } });
    for (const piece of text.split(/(?= )/)) send('response.output_text.delta', { ...where, delta: piece });
    send('response.output_text.done', { ...where, text });
    send('response.content_part.done', { ...where, part: message.content[0] });
    send('response.output_item.done', { output_index: 0, item: message });
    send('response.completed', { response: { ...base, status: 'completed', output: [message], usage: NATIVE_USAGE } });
    state.sent.push(out);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    if (state.linger) {
      res.write(out);
      void Promise.race([state.linger, new Promise((resolve) => res.once('close', resolve))]).then(() => res.end());
      return;
    }
    res.end(out);
  };
  fake.handle('POST /v1/responses', handler);
  fake.handle('POST /v1/responses/compact', (_req, res, body) => {
    // A conversation it no longer has (or never made) is refused as /v1/responses refuses it.
    const previous = body?.previous_response_id;
    if (typeof previous === 'string' && !state.made.has(previous)) {
      return json(res, 400, {
        error: { message: `Previous response with id '${previous}' not found.`, type: 'invalid_request_error', param: 'previous_response_id', code: 'previous_response_not_found' },
      });
    }
    const input = Array.isArray(body?.input) ? (body!.input as Json[]) : typeof body?.input === 'string' ? [{ role: 'user', content: body.input }] : [];
    const users = input.filter((item) => item.role === 'user').map((item, i) => ({ id: `msg_c${i}`, type: 'message', status: 'completed', role: 'user', content: item.content }));
    const text = JSON.stringify(
      {
        id: 'resp_compact0001',
        object: 'response.compaction',
        created_at: 1_700_000_000,
        output: [...users, { id: 'cmp_native1', type: 'compaction', encrypted_content: 'gAAAAnative-opaque-summary' }],
        usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 0 }, output_tokens: 9, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 39 },
      },
      null,
      2,
    );
    state.sent.push(text);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  });
  return state;
}
