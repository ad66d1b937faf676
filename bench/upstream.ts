/**
 * The fake OpenAI-compatible back end of the benchmark: it answers at once, with bodies built
 * once at start so that it costs as little CPU as possible per call.
 *
 * - POST /v1/chat/completions: a ~1 KB chat completion; with `stream: true`, 20 SSE chunks, each
 *   written on its own turn of the event loop (as a model emits tokens: separate writes, not one
 *   burst), then the usage chunk when `stream_options.include_usage` asks for it, then [DONE].
 * - POST /v1/embeddings: one 1536-dimension embedding per input, as floats or base64.
 *
 * Run as a process: `node dist/bench/upstream.js [--port N]` prints `READY <url>`, and runs the
 * benchmark's concurrency-1 measurement when asked on stdin (see serveCommands).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { createInterface } from 'node:readline';
import type { SequentialSpec } from './load.js';
import { isMain } from './proc.js';

const CREATED = 1_760_000_000;
const REPLY =
  'A dead battery after one year is covered: the DR-1204 carries a two-year warranty on the tool and ' +
  'its pack, so bring the receipt to any of our shops or open a claim online and we will replace it at ' +
  'no cost. The matching pack is the BP-1220 (12 V, 2.0 Ah lithium-ion); it also fits the rest of the ' +
  'DR-12xx range, charges in about 45 minutes on the CH-12 charger, and the higher-capacity BP-1240 ' +
  '(4.0 Ah) fits too if you want longer sessions. Until the replacement arrives, keep the old pack out ' +
  'of the cold and avoid leaving it fully drained, which is what wears lithium cells out fastest.';
const USAGE = { prompt_tokens: 86, completion_tokens: 142, total_tokens: 228, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } };
export const STREAM_CHUNKS = 20;
const DIMENSIONS = 1536;

/** The reply split into exactly `parts` pieces at spaces (as even as the words allow). */
function pieces(text: string, parts: number): string[] {
  const words = text.split(/(?= )/);
  const out: string[] = [];
  for (let i = 0; i < parts; i++) out.push(words.slice(Math.floor((i * words.length) / parts), Math.floor(((i + 1) * words.length) / parts)).join(''));
  return out;
}

interface Prebuilt {
  completion: Buffer;
  /** The 20 chunks (role, content..., finish), with and without `usage: null`. */
  chunks: Buffer[];
  chunksWithUsage: Buffer[];
  usageChunk: Buffer;
}

const DONE = Buffer.from('data: [DONE]\n\n');

function prebuild(model: string): Prebuilt {
  const id = 'chatcmpl-bench0000000000000000000000';
  const completion = Buffer.from(
    JSON.stringify({
      id,
      object: 'chat.completion',
      created: CREATED,
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: REPLY, refusal: null, annotations: [] }, logprobs: null, finish_reason: 'stop' }],
      usage: USAGE,
      service_tier: 'default',
      system_fingerprint: 'fp_bench01',
    }),
  );
  const deltas: Array<{ delta: Record<string, unknown>; finish: string | null }> = [{ delta: { role: 'assistant', content: '', refusal: null }, finish: null }];
  for (const piece of pieces(REPLY, STREAM_CHUNKS - 2)) deltas.push({ delta: { content: piece }, finish: null });
  deltas.push({ delta: {}, finish: 'stop' });
  if (deltas.length !== STREAM_CHUNKS) throw new Error(`built ${deltas.length} chunks, expected ${STREAM_CHUNKS}`);
  const chunk = (d: (typeof deltas)[number], withUsage: boolean) =>
    Buffer.from(
      `data: ${JSON.stringify({
        id,
        object: 'chat.completion.chunk',
        created: CREATED,
        model,
        service_tier: 'default',
        system_fingerprint: 'fp_bench01',
        choices: [{ index: 0, delta: d.delta, logprobs: null, finish_reason: d.finish }],
        ...(withUsage ? { usage: null } : {}),
      })}\n\n`,
    );
  const usageChunk = Buffer.from(
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: CREATED, model, service_tier: 'default', system_fingerprint: 'fp_bench01', choices: [], usage: USAGE })}\n\n`,
  );
  return { completion, chunks: deltas.map((d) => chunk(d, false)), chunksWithUsage: deltas.map((d) => chunk(d, true)), usageChunk };
}

/** A deterministic unit-length-ish vector, as floats (JSON) and as base64 float32. */
function embedding(): { floats: string; base64: string } {
  const values = new Float32Array(DIMENSIONS);
  let seed = 42;
  for (let i = 0; i < DIMENSIONS; i++) {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    values[i] = (seed / 2_147_483_648 - 0.5) * 0.08;
  }
  const floats = `[${Array.from(values, (v) => v.toPrecision(8).replace(/0+$/, '')).join(',')}]`;
  return { floats, base64: Buffer.from(values.buffer).toString('base64') };
}

export interface FakeUpstream {
  url: string;
  server: http.Server;
  close(): Promise<void>;
}

export async function startUpstream(port = 0, host = '127.0.0.1'): Promise<FakeUpstream> {
  const built = new Map<string, Prebuilt>();
  const forModel = (model: string): Prebuilt => {
    let b = built.get(model);
    if (!b) {
      b = prebuild(model);
      built.set(model, b);
    }
    return b;
  };
  const vector = embedding();

  const send = (res: http.ServerResponse, status: number, body: Buffer | string) => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'openai-processing-ms': '1' });
    res.end(body);
  };

  const stream = (res: http.ServerResponse, b: Prebuilt, withUsage: boolean) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'openai-processing-ms': '1' });
    const chunks = withUsage ? [...b.chunksWithUsage, b.usageChunk, DONE] : [...b.chunks, DONE];
    let i = 0;
    const next = () => {
      if (res.destroyed) return;
      const last = i === chunks.length - 1;
      if (last) res.end(chunks[i]);
      else {
        res.write(chunks[i]);
        i++;
        setImmediate(next);
      }
    };
    next();
  };

  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>;
      } catch {
        return send(res, 400, JSON.stringify({ error: { message: 'invalid JSON', type: 'invalid_request_error', param: null, code: null } }));
      }
      const path = (req.url ?? '').split('?')[0];
      const model = typeof body.model === 'string' ? body.model : 'unknown';
      if (req.method === 'POST' && path === '/v1/chat/completions') {
        const b = forModel(model);
        if (body.stream === true) {
          const options = body.stream_options as { include_usage?: boolean } | undefined;
          return stream(res, b, options?.include_usage === true);
        }
        return send(res, 200, b.completion);
      }
      if (req.method === 'POST' && path === '/v1/embeddings') {
        const inputs = Array.isArray(body.input) ? body.input : [body.input];
        const asBase64 = body.encoding_format === 'base64';
        const data = inputs.map((_, index) => `{"object":"embedding","index":${index},"embedding":${asBase64 ? `"${vector.base64}"` : vector.floats}}`).join(',');
        const tokens = 40 * inputs.length;
        return send(res, 200, `{"object":"list","data":[${data}],"model":${JSON.stringify(model)},"usage":{"prompt_tokens":${tokens},"total_tokens":${tokens}}}`);
      }
      return send(res, 404, JSON.stringify({ error: { message: `Invalid URL (${req.method} ${path})`, type: 'invalid_request_error', param: null, code: null } }));
    });
  });
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const url = `http://${host}:${(server.address() as AddressInfo).port}`;
  return {
    url,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * The benchmark's concurrency-1 measurement runs here, in the upstream's own process and event
 * loop, when the parent writes `SEQUENTIAL <json spec>` on stdin (see sequentialPair in run.ts):
 * it prints `MEASURE_START`, `MEASURE_END`, then `RESULT <json>` (or `FAILED <message>`).
 */
function serveCommands(): void {
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (!line.startsWith('SEQUENTIAL ')) return;
    // The load code (and autocannon with it) is loaded on the first command, not by every upstream;
    // a spec that is not JSON fails like any other measurement instead of ending the process.
    import('./load.js')
      .then(({ sequential }) => sequential(JSON.parse(line.slice('SEQUENTIAL '.length)) as SequentialSpec))
      .then(
        (result) => process.stdout.write(`RESULT ${JSON.stringify(result)}\n`),
        (error: unknown) => process.stdout.write(`FAILED ${String((error as Error)?.message ?? error).replace(/\n/g, ' ')}\n`),
      );
  });
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } } });
  const upstream = await startUpstream(Number(values.port));
  serveCommands();
  process.stdout.write(`READY ${upstream.url}\n`);
  const stop = () => void upstream.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
