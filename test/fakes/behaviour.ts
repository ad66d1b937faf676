import type http from 'node:http';
import type { FakeOpenAI } from './openai-upstream.js';
import { drainedOrClosed } from './server.js';

/**
 * What a fake upstream does with one chat completion, set per test (and per upstream model name,
 * so one fake can play several back ends). Everything left out behaves like a healthy back end.
 */
export interface Behaviour {
  /** Answer with this status and an OpenAI-shaped error body (any status >= 400). */
  status?: number;
  /** Extra response headers (Retry-After...). */
  headers?: Record<string, string>;
  /** The error body to send with `status` (default: an OpenAI error naming the host and the key). */
  errorBody?: unknown;
  /** Wait this long before the response headers. */
  headerDelayMs?: number;
  /** Wait for `fake.release()` before the response headers. */
  holdHeaders?: boolean;
  /** Non-streamed: send the headers, half the body, then wait for `fake.release()`. */
  holdBody?: boolean;
  /** Streamed: content chunks to send (default 3). */
  chunks?: number;
  /** Streamed: wait this long between chunks. */
  chunkDelayMs?: number;
  /** Streamed: pad each chunk's content to about this many bytes. */
  chunkBytes?: number;
  /** Streamed: destroy the socket after this many chunks. */
  resetAfter?: number;
  /** Streamed: send an event that is not JSON after this many chunks, then end. */
  malformedAfter?: number;
  /** Streamed: after this many chunks send nothing more and keep the connection open. */
  stallAfter?: number;
  /** Streamed: after this many chunks send this error event (`data: {"error": …}`), then end. */
  errorAfter?: number;
  errorEvent?: unknown;
  /** Streamed: while waiting chunkDelayMs, send an SSE comment (`: keep-alive`) this often, as servers do while a model thinks. */
  keepAliveEveryMs?: number;
}

/** What a scripted fake did, for assertions. */
export interface ScriptStats {
  /** Response bytes the fake managed to hand to its socket (streams wait for 'drain'). */
  bytesWritten: number;
  /** Chunks it wrote. */
  chunksWritten: number;
  /** Whether the stream's writes are waiting for the reader ('drain' pending). */
  waitingForDrain: boolean;
  /** Streams that ran to their end. */
  completed: number;
}

/** Wait `ms`, or less if the connection closes first. */
const sleep = (ms: number, res: http.ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      res.off('close', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    res.on('close', done);
  });

/** Wait until what was written so far has left for the socket (so a reset cannot swallow it). */
const flushed = (res: http.ServerResponse) =>
  new Promise<void>((resolve) => {
    if (res.destroyed) return resolve();
    res.write('', () => resolve());
  });

function chunkEvent(model: string, content: string): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
}

/**
 * Install a scripted chat handler on `fake`. `name` goes into every answer (`<name>: ok`), so a
 * test can tell which back end answered. Returns the script: `set(behaviour)` for every model,
 * `set(behaviour, model)` for one upstream model name, `clear()` back to healthy.
 */
export function script(fake: FakeOpenAI, name: string) {
  const byModel = new Map<string, Behaviour>();
  let fallback: Behaviour = {};
  const stats: ScriptStats = { bytesWritten: 0, chunksWritten: 0, waitingForDrain: false, completed: 0 };

  const write = async (res: http.ServerResponse, text: string): Promise<boolean> => {
    if (res.destroyed) return false;
    const ok = res.write(text);
    stats.bytesWritten += Buffer.byteLength(text);
    if (!ok) {
      stats.waitingForDrain = true;
      await drainedOrClosed(res);
      stats.waitingForDrain = false;
    }
    return !res.destroyed;
  };

  fake.handle('POST /v1/chat/completions', async (_req, res, body) => {
    const model = typeof body?.model === 'string' ? body.model : 'unknown';
    const b = byModel.get(model) ?? fallback;
    if (b.holdHeaders) await fake.gate();
    if (b.headerDelayMs) await sleep(b.headerDelayMs, res);
    if (res.destroyed) return;
    if (b.status && b.status >= 400) {
      const errorBody = b.errorBody ?? {
        error: {
          message: `backend ${name} failed at ${fake.url}/internal (host db-7.internal.example, key ${fake.apiKey})`,
          type: 'server_error',
          param: null,
          code: null,
        },
      };
      const text = JSON.stringify(errorBody);
      res.writeHead(b.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...b.headers });
      res.end(text);
      return;
    }
    if (body?.stream !== true) {
      const text = JSON.stringify({
        id: 'chatcmpl-s',
        object: 'chat.completion',
        created: 1,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: `${name}: ok` }, finish_reason: 'stop', logprobs: null }],
        usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...b.headers });
      if (b.holdBody) {
        const half = Math.floor(text.length / 2);
        res.write(text.slice(0, half));
        await fake.gate();
        if (!res.destroyed) res.end(text.slice(half));
        return;
      }
      res.end(text);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...b.headers });
    // Headers go out at once, as a real streaming back end's do, even before the first chunk.
    res.flushHeaders();
    const count = b.chunks ?? 3;
    const pad = b.chunkBytes ? 'x'.repeat(b.chunkBytes) : '';
    for (let i = 0; i < count; i++) {
      if (b.resetAfter !== undefined && i === b.resetAfter) {
        await flushed(res);
        res.socket?.destroy();
        return;
      }
      if (b.malformedAfter !== undefined && i === b.malformedAfter) {
        res.end('data: {"id": "chatcmpl-s", "choices": [ this is not json\n\n');
        return;
      }
      if (b.errorAfter !== undefined && i === b.errorAfter) {
        res.end(`data: ${JSON.stringify(b.errorEvent ?? { error: { message: 'stream error', type: 'server_error' } })}\n\n`);
        return;
      }
      if (b.stallAfter !== undefined && i === b.stallAfter) {
        await new Promise<void>((resolve) => res.once('close', () => resolve()));
        return;
      }
      if (i > 0 && b.chunkDelayMs) {
        if (b.keepAliveEveryMs) {
          for (let waited = 0; waited < b.chunkDelayMs && !res.destroyed; waited += b.keepAliveEveryMs) {
            await sleep(Math.min(b.keepAliveEveryMs, b.chunkDelayMs - waited), res);
            if (!res.destroyed) res.write(': keep-alive\n\n');
          }
        } else await sleep(b.chunkDelayMs, res);
      }
      if (!(await write(res, chunkEvent(model, i === 0 ? `${name}: ` : `${i}${pad}`)))) return;
      stats.chunksWritten++;
    }
    if (res.destroyed) return;
    res.end('data: [DONE]\n\n');
    stats.completed++;
  });

  return {
    stats,
    /** Behave like this for `model` (or, without one, for every model without its own). */
    set(behaviour: Behaviour, model?: string) {
      if (model) byModel.set(model, behaviour);
      else fallback = behaviour;
    },
    /** Back to healthy for every model; the counters start again. */
    clear() {
      byModel.clear();
      fallback = {};
      Object.assign(stats, { bytesWritten: 0, chunksWritten: 0, waitingForDrain: false, completed: 0 });
    },
  };
}

export type Script = ReturnType<typeof script>;
