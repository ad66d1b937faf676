import { expect } from 'chai';
import http from 'node:http';
import { eventsOf as anthropicEvents, FakeAnthropic, message as anthropicMessage } from './fakes/anthropic-upstream.js';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { FakeOpenAI, sse } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-meter-key-000001';

/**
 * The metered pipeline with the client format `format` in front of one back end of provider
 * type `type` at `baseUrl`, serving `model` at `price` (YAML), the key KEY unlimited.
 */
function meteredGateway(upstream: { url: string; apiKey: string }, model: string, price: string, type = 'openai', format = 'openai-chat'): Promise<RunningGateway> {
  const baseUrl = { openai: `${upstream.url}/v1`, gemini: `${upstream.url}/v1beta` }[type] ?? upstream.url;
  return startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, ${format}]
auth:
  keys: [{ name: meter, key: ${KEY} }]
providers:
  - { id: up, type: ${type}, baseUrl: ${baseUrl}, apiKey: ${upstream.apiKey}, models: [${model}] }
pricing:
  ${model}: ${price}
`);
}

/** Stream a call and leave once the answer's text holds `until`; the call's request id. */
async function leaveWhen(url: string, headers: Record<string, string>, body: unknown, until: string): Promise<string> {
  const controller = new AbortController();
  const res = await fetch(url, { method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const requestId = res.headers.get('x-request-id')!;
  const decoder = new TextDecoder();
  let text = '';
  for await (const piece of res.body!) {
    text += decoder.decode(piece as Uint8Array, { stream: true });
    if (text.includes(until)) break;
  }
  controller.abort();
  return requestId;
}

/** The usage row of a call, once metering has written it. */
async function usageRow(gw: RunningGateway, requestId: string) {
  for (;;) {
    await gw.gateway.stores.flush();
    const row = (await gw.gateway.stores.usage.list({ limit: 50 })).find((r) => r.requestId === requestId);
    if (row) return row;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A seeded random source, so a failing run can be replayed. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

interface Plan {
  tokens: number;
  /** Leave after receiving this many tokens; undefined = read to the end. */
  leaveAfter?: number;
}

/**
 * The upstream sends one token per chunk (" hello", one token in the usual BPE encodings) and
 * sends the next only once the test's client has received the previous one, so "what it sent"
 * and "what the client got" are the same count whenever the client leaves.
 */
describe('metering of streams with clients that leave (fake upstream that counts what it sent)', function () {
  this.timeout(120_000);
  const upstream = new FakeOpenAI();
  const sent = new Map<string, number>();
  const next = new Map<string, () => void>();
  let gw: RunningGateway;

  before(async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res, body) => {
      const marker = String((body?.messages as Array<{ content: string }>)[0]!.content);
      const total = Number(marker.split(':')[1]);
      const id = marker;
      sent.set(id, 0);
      sse(res);
      const write = (payload: unknown) => res.write(`data: ${JSON.stringify(payload)}\n\n`);
      const chunk = (delta: unknown, finish: string | null = null) => ({
        id: 'chatcmpl-m',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'counted',
        choices: [{ index: 0, delta, finish_reason: finish }],
        usage: null,
      });
      write(chunk({ role: 'assistant', content: '' }));
      let wake: () => void = () => undefined;
      res.once('close', () => wake());
      for (let i = 0; i < total; i++) {
        if (i > 0) {
          await new Promise<void>((resolve) => {
            wake = resolve;
            next.set(id, resolve);
          });
          if (res.destroyed || res.writableEnded) return;
        }
        write(chunk({ content: ' hello' }));
        sent.set(id, i + 1);
      }
      write(chunk({}, 'stop'));
      write({ id: 'chatcmpl-m', object: 'chat.completion.chunk', created: 1, model: 'counted', choices: [], usage: { prompt_tokens: 9, completion_tokens: total, total_tokens: 9 + total } });
      res.end('data: [DONE]\n\n');
    });
    await upstream.start();
    gw = await meteredGateway(upstream, 'counted', '{ input: 1, output: 2 }');
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  /** Stream one call; after each token either ask the upstream for the next or leave. */
  function run(marker: string, plan: Plan): Promise<{ requestId: string; received: number }> {
    return new Promise((resolve, reject) => {
      const body = JSON.stringify({ model: 'counted', stream: true, messages: [{ role: 'user', content: marker }] });
      const req = http.request(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'content-length': Buffer.byteLength(body) },
      });
      req.on('error', () => undefined);
      req.on('response', (res) => {
        const requestId = String(res.headers['x-request-id']);
        let buffer = '';
        let received = 0;
        let done = false;
        const finish = () => {
          if (done) return;
          done = true;
          resolve({ requestId, received });
        };
        res.on('data', (data: Buffer) => {
          buffer += data.toString('utf8');
          let at: number;
          while ((at = buffer.indexOf('\n\n')) !== -1) {
            const event = buffer.slice(0, at);
            buffer = buffer.slice(at + 2);
            if (done || !event.startsWith('data: ') || event === 'data: [DONE]') continue;
            const parsed = JSON.parse(event.slice(6)) as { choices: Array<{ delta: { content?: string } }> };
            if (parsed.choices[0]?.delta.content !== ' hello') continue;
            received++;
            if (plan.leaveAfter !== undefined && received >= plan.leaveAfter) {
              res.destroy();
              req.destroy();
              finish();
              return;
            }
            next.get(marker)?.();
          }
        });
        res.on('end', finish);
        res.on('close', finish);
        res.on('error', () => finish());
      });
      req.end(body);
      setTimeout(() => reject(new Error(`${marker} did not finish`)), 20_000).unref();
    });
  }

  it('records exactly one usage row per request, with the tokens the upstream sent', async () => {
    const random = seeded(20261122);
    const plans: Array<{ marker: string; plan: Plan }> = [];
    for (let i = 0; i < 200; i++) {
      const tokens = 1 + Math.floor(random() * 12);
      const leave = random() < 0.6 ? 1 + Math.floor(random() * tokens) : undefined;
      plans.push({ marker: `m${i}:${tokens}`, plan: { tokens, leaveAfter: leave === tokens ? undefined : leave } });
    }
    const results: Array<{ marker: string; requestId: string; received: number; left: boolean }> = [];
    for (let i = 0; i < plans.length; i += 20) {
      const batch = plans.slice(i, i + 20);
      const done = await Promise.all(batch.map(({ marker, plan }) => run(marker, plan)));
      done.forEach((r, j) => results.push({ marker: batch[j]!.marker, ...r, left: batch[j]!.plan.leaveAfter !== undefined }));
    }

    // Every left stream's upstream request was aborted, and sent exactly what the client got.
    await eventually(() => upstream.received.filter((r) => r.aborted).length === results.filter((r) => r.left).length, 5000, 'upstream aborts');
    for (const r of results) expect(sent.get(r.marker), r.marker).to.equal(r.received);

    await eventually(() => gw.logs.filter((l) => l.message === 'request').length >= 200, 5000, 'access lines');
    // A stream cut short is recorded once metering has counted it (on its tokenizer thread).
    let rows = await gw.gateway.stores.usage.list({ limit: 1000 });
    for (const deadline = Date.now() + 10_000; rows.length < 200 && Date.now() < deadline; ) {
      await gw.gateway.stores.flush();
      rows = await gw.gateway.stores.usage.list({ limit: 1000 });
      if (rows.length < 200) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(rows).to.have.length(200);
    // The request log's row of each call says what its usage row says, estimated or not.
    await gw.gateway.stores.flush();
    const logged = new Map<string, { promptTokens: number | null; completionTokens: number | null }>();
    for (let cursor: string | undefined, page = 0; page < 20; page++) {
      const result = await gw.gateway.stores.logs.query({ limit: 100, cursor });
      for (const entry of result.entries) logged.set(entry.requestId, entry);
      cursor = result.nextCursor ?? undefined;
      if (!cursor) break;
    }
    for (const row of rows) {
      expect(logged.get(row.requestId)?.completionTokens, row.requestId).to.equal(row.completionTokens);
      expect(logged.get(row.requestId)?.promptTokens, row.requestId).to.equal(row.promptTokens);
    }
    const byId = new Map(rows.map((row) => [row.requestId, row]));
    expect(byId.size).to.equal(200);
    let upstreamTotal = 0;
    let recordedTotal = 0;
    for (const r of results) {
      const row = byId.get(r.requestId);
      expect(row, r.requestId).to.exist;
      expect(row!.completionTokens, r.marker).to.equal(sent.get(r.marker));
      if (r.left) {
        expect(row!.endReason).to.equal('client_gone');
        expect(row!.source).to.equal('estimated');
      } else {
        expect(row!.endReason).to.equal('done');
        expect(row!.source).to.equal('provider');
      }
      expect(row!.cost).to.be.greaterThan(0);
      upstreamTotal += sent.get(r.marker)!;
      recordedTotal += row!.completionTokens!;
    }
    expect(recordedTotal).to.equal(upstreamTotal);
    const totals = await gw.gateway.stores.usage.totals({});
    expect(totals[0]!.requests).to.equal(200);
    expect(totals[0]!.completionTokens).to.equal(upstreamTotal);
  });
});

/**
 * A chat back end sends its usage in a chunk of its own after the finish: a client that stops at
 * the finish leaves before it. The upstream here sends that chunk only once the gateway has
 * learnt that its client left (a watcher of the client, told before the attempt's), so the
 * usage always comes after the leaving; or never, for a back end that goes quiet.
 */
describe('metering of a stream whose client leaves at the finish, before the usage chunk', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let left: () => void = () => undefined;

  before(async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res, body) => {
      const said = String((body?.messages as Array<{ content: string }>)[0]!.content);
      const quiet = said === 'quiet';
      sse(res);
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        res.write(`data: ${JSON.stringify({ id: 'chatcmpl-f', object: 'chat.completion.chunk', created: 1, model: 'finished', choices, usage: null, ...extra })}\n\n`);
      const gone = new Promise<void>((resolve) => (left = resolve));
      chunk([{ index: 0, delta: { role: 'assistant', content: 'all of it' }, finish_reason: null }]);
      chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]);
      await gone;
      // n = 2, the choices one after another: the second begins only now.
      if (said === 'two' && !res.destroyed) {
        chunk([{ index: 1, delta: { role: 'assistant', content: 'the other' }, finish_reason: 'stop' }]);
        chunk([], { usage: { prompt_tokens: 1000, completion_tokens: 300, total_tokens: 1300 } });
        return;
      }
      if (quiet || res.destroyed) return; // says nothing more, its connection open
      chunk([], { usage: { prompt_tokens: 1000, completion_tokens: 300, total_tokens: 1300, prompt_tokens_details: { cached_tokens: 400 }, completion_tokens_details: { reasoning_tokens: 120 } } });
      res.end('data: [DONE]\n\n');
    });
    await upstream.start();
    gw = await meteredGateway(upstream, 'finished', '{ input: 2, output: 10, cachedInput: 0.5 }');
    gw.gateway.hooks.onRequest.tap('test-left', (ctx) => ctx.client?.watch(() => left()));
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  /** Stream a call and leave once the finish came; its request id. */
  const leaveAtFinish = (content: string, n = 1) =>
    leaveWhen(`${gw.url}/v1/chat/completions`, { authorization: `Bearer ${KEY}` }, { model: 'finished', stream: true, n, stream_options: { include_usage: true }, messages: [{ role: 'user', content }] }, '"finish_reason":"stop"');
  const rowOf = (requestId: string) => usageRow(gw, requestId);

  it('is charged the usage the back end reports after it, not a count of what was delivered', async () => {
    const row = await rowOf(await leaveAtFinish('usage follows'));
    expect(row).to.deep.include({ promptTokens: 1000, completionTokens: 300, cachedTokens: 400, reasoningTokens: 120, source: 'provider' });
    expect(row.cost).to.be.closeTo((600 * 2 + 400 * 0.5 + 300 * 10) / 1e6, 1e-9);
    // The back end's stream was read to its end, not cut.
    expect(upstream.last().aborted).to.not.equal(true);
  });

  it('with n = 2, a client that leaves when the first choice finished leaves mid-answer: the back end is cut at once', async () => {
    // Had the gateway taken the answer for over, it would have read on and found the usage chunk.
    const row = await rowOf(await leaveAtFinish('two', 2));
    expect(row.source).to.equal('estimated');
    await eventually(() => upstream.last().aborted === true, 10_000, 'the back end cut');
  });

  it('a back end that then goes quiet is let go after a short while and the call is counted', async () => {
    const row = await rowOf(await leaveAtFinish('quiet'));
    expect(row.source).to.equal('estimated');
    expect(row.completionTokens).to.be.greaterThan(0);
    await eventually(() => upstream.last().aborted === true, 10_000, 'the back end let go');
  });
});

describe('metering of a Gemini back end stream whose client leaves at the finish', function () {
  this.timeout(30_000);
  const upstream = new FakeGemini();
  let gw: RunningGateway;
  let left: () => void = () => undefined;

  before(async () => {
    await upstream.start();
    gw = await meteredGateway(upstream, 'thinker', '{ input: 2, output: 10, cachedInput: 0.5 }', 'gemini');
    gw.gateway.hooks.onRequest.tap('test-left', (ctx) => ctx.client?.watch(() => left()));
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it("is charged the usage of Google's last event, which the gateway hands on once the body ends", async () => {
    // The last event has the finish and the whole usage; the back end ends its body only after
    // the client left (Gemini has no closing event: the usage goes out when the body ends).
    upstream.script(() => ({
      events: [
        { candidates: [{ content: { role: 'model', parts: [{ text: 'all of it' }] }, index: 0 }], usageMetadata: { promptTokenCount: 1000, totalTokenCount: 1000 } },
        { candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 1000, candidatesTokenCount: 180, thoughtsTokenCount: 120, cachedContentTokenCount: 400, totalTokenCount: 1300 } },
      ],
      linger: new Promise<void>((resolve) => (left = resolve)),
    }));
    const requestId = await leaveWhen(`${gw.url}/v1/chat/completions`, { authorization: `Bearer ${KEY}` }, { model: 'thinker', stream: true, messages: [{ role: 'user', content: 'think' }] }, '"finish_reason":"stop"');
    const row = await usageRow(gw, requestId);
    expect(row).to.deep.include({ promptTokens: 1000, completionTokens: 300, cachedTokens: 400, reasoningTokens: 120, source: 'provider' });
  });

  it('a client that leaves mid-answer is charged what Google had counted so far, its thoughts included', async () => {
    // Google's counts grow event by event: the thinking it billed before the first text is in them.
    upstream.script(() => ({
      events: [{ candidates: [{ content: { role: 'model', parts: [{ text: 'first words' }] }, index: 0 }], usageMetadata: { promptTokenCount: 1000, candidatesTokenCount: 2, thoughtsTokenCount: 120, totalTokenCount: 1122 } }],
      linger: new Promise<void>((resolve) => (left = resolve)),
    }));
    const requestId = await leaveWhen(`${gw.url}/v1/chat/completions`, { authorization: `Bearer ${KEY}` }, { model: 'thinker', stream: true, messages: [{ role: 'user', content: 'think' }] }, 'first words');
    const row = await usageRow(gw, requestId);
    expect(row).to.deep.include({ promptTokens: 1000, completionTokens: 122, reasoningTokens: 120, source: 'provider' });
  });
});

describe('metering of a Claude client that leaves at the message_delta, before message_stop (Anthropic back end)', function () {
  this.timeout(30_000);
  const upstream = new FakeAnthropic();
  let gw: RunningGateway;
  let left: () => void = () => undefined;

  before(async () => {
    await upstream.start();
    gw = await meteredGateway(upstream, 'claude-metered', '{ input: 2, output: 10, cachedInput: 0.5 }', 'anthropic', 'anthropic-messages');
    gw.gateway.hooks.onRequest.tap('test-left', (ctx) => ctx.client?.watch(() => left()));
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('is charged the usage its message_delta reported, which the client had read', async () => {
    const events = anthropicEvents(anthropicMessage([{ type: 'text', text: 'all of it' }], { usage: { input_tokens: 15, output_tokens: 33, cache_read_input_tokens: 5, cache_creation_input_tokens: 2 } }));
    // message_stop only once the client left (it stops at the stop_reason).
    upstream.script(() => ({ events, holdAfter: events.length - 1, hold: new Promise<void>((resolve) => (left = resolve)) }));
    const requestId = await leaveWhen(`${gw.url}/v1/messages`, { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' }, { model: 'claude-metered', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'say it' }] }, '"stop_reason":"end_turn"');
    const row = await usageRow(gw, requestId);
    expect(row).to.deep.include({ completionTokens: 33, cachedTokens: 5, source: 'provider' });
  });
});
