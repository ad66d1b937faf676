import http from 'node:http';
import { jsonOrUndefined } from '../support/json.js';
import { FakeServer, json as jsonAnswer, readBody, recordAborts } from './server.js';

type Json = Record<string, any>;

/** What the fake upstream received, one entry per request. */
export interface GeminiReceived {
  method: string;
  /** The path and query as sent. */
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Json | undefined;
  /** The request's body as its text came (numbers JSON.parse cannot hold exactly included). */
  text: string;
  /** Set when the caller closed the connection before the response ended. */
  aborted: boolean;
  /** The text of a successful answer as written: the JSON body, or every event's bytes in order. */
  sent: string;
}

/** What a scripted call answers: JSON, or the data of SSE events (each a GenerateContentResponse). */
export type FakeReply =
  | { status?: number; headers?: Record<string, string>; json: unknown }
  | {
      events: Json[];
      /** Close the connection after this many events (a stream cut short). */
      cutAfter?: number;
      /** Raw text written after the events (a malformed line, say). */
      tail?: string;
      /** After the last event, keep the connection open (the body not ended) until this settles or the caller closes it. */
      linger?: Promise<void>;
      /** Events sent once `linger` settles, before the body ends (a usage that comes a while after the finish). */
      afterLinger?: Json[];
    };

export type Script = (body: Json, received: GeminiReceived) => FakeReply | Promise<FakeReply>;

export const FAKE_USAGE = { promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18 };

/** Google's error body (google.rpc.Status as the REST API sends it). */
export function googleError(code: number, status: string, message: string, details?: Json[]): Json {
  return { error: { code, message, status, ...(details ? { details } : {}) } };
}

/** What Google answers a missing or wrong API key with: 400 INVALID_ARGUMENT, reason API_KEY_INVALID. */
export const API_KEY_INVALID = googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
  { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com', metadata: { service: 'generativelanguage.googleapis.com' } },
  { '@type': 'type.googleapis.com/google.rpc.LocalizedMessage', locale: 'en-US', message: 'API key not valid. Please pass a valid API key.' },
]);

function lastUserText(body: Json): string {
  const last = [...((body.contents as Json[] | undefined) ?? [])].reverse().find((c) => c.role !== 'model');
  return ((last?.parts as Json[] | undefined) ?? [])
    .map((p) => (typeof p.text === 'string' ? p.text : p.functionResponse ? JSON.stringify(p.functionResponse.response) : ''))
    .join(' ')
    .trim();
}

/** A complete GenerateContentResponse with one candidate. */
export function answer(parts: Json[], extra: Json = {}): Json {
  return {
    candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
    usageMetadata: { ...FAKE_USAGE },
    modelVersion: 'gemini-fake-1',
    responseId: 'fakeResponseId0123456789',
    ...extra,
  };
}

/**
 * The SSE events Google sends for an answer: text in words (one event each, with the running
 * usageMetadata's prompt count), thoughts likewise, each functionCall whole in its own event, and
 * the last event with finishReason and the full usageMetadata.
 */
export function eventsOf(full: Json): Json[] {
  const candidate = full.candidates[0] as Json;
  const base = { modelVersion: full.modelVersion, responseId: full.responseId };
  const partial = { promptTokenCount: full.usageMetadata.promptTokenCount, totalTokenCount: full.usageMetadata.promptTokenCount };
  const events: Json[] = [];
  for (const part of candidate.content.parts as Json[]) {
    const pieces: Json[] = typeof part.text === 'string' ? (part.text as string).split(/(?= )/).map((text) => ({ ...part, text })) : [part];
    for (const piece of pieces) events.push({ candidates: [{ content: { role: 'model', parts: [piece] }, index: 0 }], usageMetadata: partial, ...base });
  }
  events.push({ candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: candidate.finishReason, index: 0 }], usageMetadata: full.usageMetadata, ...base });
  return events;
}

/**
 * Google's generateContent API (v1beta) for tests. It checks the key as Google does: a missing or
 * wrong `x-goog-api-key` is 400 INVALID_ARGUMENT "API key not valid" (reason API_KEY_INVALID) in
 * Google's error shape. It records every request and answers
 * POST /v1beta/models/{model}:generateContent with JSON and :streamGenerateContent?alt=sse with
 * events framed `\r\n\r\n`: by default an echo of the last user text (a functionCall of the first
 * declared function, without an id as Gemini sends it, when tools are given and the last turn is
 * the user's text), or what a test scripts with `script()`.
 */
export class FakeGemini extends FakeServer<GeminiReceived, Script> {
  constructor(apiKey = 'AIzaSyFake-upstream-secret-0123456789abcd') {
    super(apiKey);
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const text = (await readBody(req)).toString('utf8');
    const body = jsonOrUndefined<Json>(text);
    const entry: GeminiReceived = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body, text, aborted: false, sent: '' };
    recordAborts(this.received, entry, res);

    const key = req.headers['x-goog-api-key'];
    if (typeof key !== 'string' || key !== this.apiKey) return json(res, 400, API_KEY_INVALID);
    const url = new URL(req.url ?? '/', 'http://fake');
    const match = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/.exec(decodeURIComponent(url.pathname));
    if (req.method !== 'POST' || !match) return json(res, 404, googleError(404, 'NOT_FOUND', 'Requested entity was not found.'));
    const streaming = match[2] === 'streamGenerateContent';
    if (streaming && url.searchParams.get('alt') !== 'sse') return json(res, 400, googleError(400, 'INVALID_ARGUMENT', 'this fake only streams with alt=sse'));
    if (!body || !Array.isArray(body.contents) || body.contents.length === 0) {
      return json(res, 400, googleError(400, 'INVALID_ARGUMENT', '* GenerateContentRequest.contents: contents is not specified'));
    }
    // Google's rule for a function's name: a letter or `_` first, then letters, digits, `_`, `.`, `:` or `-`, 64 at most.
    for (const [t, tool] of (Array.isArray(body.tools) ? (body.tools as Json[]) : []).entries()) {
      for (const [d, declaration] of (Array.isArray(tool?.functionDeclarations) ? (tool.functionDeclarations as Json[]) : []).entries()) {
        if (!/^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/.test(String(declaration?.name))) {
          return json(res, 400, googleError(400, 'INVALID_ARGUMENT', `* GenerateContentRequest.tools[${t}].function_declarations[${d}].name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:) or dashes (-), with a maximum length of 64.`));
        }
      }
    }

    const reply = this.scripted ? await this.scripted(body, entry) : this.defaultReply(body, match[1]!, streaming);
    if ('json' in reply) {
      entry.sent = JSON.stringify(reply.json);
      return json(res, reply.status ?? 200, reply.json, reply.headers);
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const events = reply.cutAfter === undefined ? reply.events : reply.events.slice(0, reply.cutAfter);
    for (const event of events) {
      const text = `data: ${JSON.stringify(event)}\r\n\r\n`;
      entry.sent += text;
      res.write(text);
    }
    if (reply.tail) res.write(reply.tail);
    if (reply.linger) {
      await Promise.race([reply.linger, new Promise((resolve) => res.once('close', resolve))]);
      if (res.destroyed) return;
      for (const event of reply.afterLinger ?? []) {
        const text = `data: ${JSON.stringify(event)}\r\n\r\n`;
        entry.sent += text;
        res.write(text);
      }
    }
    if (reply.cutAfter !== undefined) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      res.socket?.destroy();
      return;
    }
    res.end();
  }

  private defaultReply(body: Json, model: string, streaming: boolean): FakeReply {
    const contents = body.contents as Json[];
    const last = contents[contents.length - 1];
    const lastIsResponse = ((last?.parts as Json[] | undefined) ?? []).some((p) => p.functionResponse);
    const declaration = last?.role !== 'model' && !lastIsResponse ? body.tools?.[0]?.functionDeclarations?.[0] : undefined;
    const parts: Json[] = declaration ? [{ functionCall: { name: declaration.name, args: { city: 'Paris' } } }] : [{ text: `upstream says: ${lastUserText(body)}` }];
    const full = answer(parts, { modelVersion: model });
    return streaming ? { events: eventsOf(full) } : { json: full };
  }
}

/** Answer JSON as Google does, with `charset=UTF-8` in the content-type. */
export function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  jsonAnswer(res, status, body, { 'content-type': 'application/json; charset=UTF-8', ...headers });
}
