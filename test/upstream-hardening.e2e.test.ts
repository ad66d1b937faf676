import { expect } from 'chai';
import OpenAI from 'openai';
import { readSse, SseLineTooLong } from '../core/http/sse.js';
import { scrub } from '../core/http/upstream.js';
import { FakeOpenAI, json, sse } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

describe('hardening against broken upstreams', function () {
  this.timeout(30_000);
  const up = new FakeOpenAI();
  const spare = new FakeOpenAI('sk-spare-upstream-000000001');
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await up.start();
    await spare.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
providers:
  - { id: up, type: openai, baseUrl: ${up.url}/v1, apiKey: ${up.apiKey}, models: [m] }
  - { id: spare, type: openai, baseUrl: ${spare.url}/v1, apiKey: ${spare.apiKey}, models: [m2] }
models:
  - name: pair
    targets: [{ provider: up, model: m, priority: 0 }, { provider: spare, model: m2, priority: 1 }]
`);
    client = new OpenAI({ apiKey: 'sk-anything', baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    up.reset();
    spare.reset();
  });
  after(async () => {
    await gw?.stop();
    await up.stop();
    await spare.stop();
  });

  async function streamError(model = 'm'): Promise<{ text: string; error: unknown }> {
    const stream = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'x' }] });
    let text = '';
    const error = await (async () => {
      for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    return { text, error };
  }

  it('turns malformed stream events into upstream_error events, never internal_error', async () => {
    for (const bad of ['{"choices":[null]}', 'null', '"x"', '42', '[1,2]', '{"choices":null}']) {
      up.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'ok' }, finish_reason: null }] })}\n\n`);
        res.end(`data: ${bad}\n\ndata: [DONE]\n\n`);
      });
      const { text, error } = await streamError();
      expect(text, bad).to.equal('ok');
      expect(error, bad).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message), bad).to.include('malformed');
    }
    const lines = gw.logs.filter((l) => l.message === 'unhandled error');
    expect(lines, JSON.stringify(lines)).to.have.length(0);
  });

  it('reports a stream that closes before any choice finished as cut, not complete', async () => {
    up.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.end(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'half' }, finish_reason: null }] })}\n\n`);
    });
    const { text, error } = await streamError();
    expect(text).to.equal('half');
    expect(String((error as Error).message)).to.include('ended before the answer did');
  });

  it('a stream that ends having said nothing (a lone [DONE]) is no answer: the next target answers; without one, a 502', async () => {
    for (const target of [up, spare]) {
      target.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        res.end('data: [DONE]\n\n');
      });
    }
    const failed = await client.chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(failed).to.be.instanceOf(OpenAI.APIError);
    expect((failed as InstanceType<typeof OpenAI.APIError>).status).to.equal(502);
    expect(String((failed as Error).message)).to.include('without any answer');
    spare.reset();
    const { text, error } = await streamError('pair');
    expect(error).to.equal(undefined);
    expect(text.length, 'the spare answered').to.be.greaterThan(0);
    expect(spare.received.length).to.equal(1);
  });

  it('keeps host names out of upstream messages', async () => {
    up.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 422, { error: { message: 'bad seed on gpu-node-7.corp.internal and api.vendor.example:443' } }),
    );
    const error = (await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as Error;
    expect(error.message).to.include('bad seed');
    expect(error.message).to.not.match(/gpu-node-7|corp\.internal|vendor\.example/);
    expect(scrub('see node-3.cluster.local or db.internal.example:5432 now')).to.not.match(/cluster|internal|5432/);
  });

  it('tells SDKs not to retry a 5xx the gateway already retried, and passes only a sane Retry-After', async () => {
    up.handle('POST /v1/chat/completions', (_req, res) => json(res, 503, { error: { message: 'busy' } }, { 'retry-after': 'garbage' }));
    spare.handle('POST /v1/chat/completions', (_req, res) => json(res, 500, { error: { message: 'also busy' } }));
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'pair', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).to.equal(502);
    expect(res.headers.get('x-should-retry')).to.equal('false');
    expect(res.headers.get('retry-after')).to.equal(null);
  });

  it('moves on to the next target when one loops back (508)', async () => {
    up.handle('POST /v1/chat/completions', (_req, res) => json(res, 508, { error: { message: 'loop' } }));
    const completion = await client.chat.completions.create({ model: 'pair', messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: hello');
    expect(spare.received).to.have.length(1);
  });

  it('an event of endless data: lines (no blank line to end it) is refused at the line limit, not held whole; the back end is let go', async () => {
    let written = 0;
    let closed = false;
    up.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'ok' }, finish_reason: null }] })}\n\n`);
      const line = `data: ${'x'.repeat(1023)}\n`;
      res.on('close', () => (closed = true));
      const more = () => {
        while (!closed && written < 64 * 1024 * 1024) {
          written += line.length;
          if (!res.write(line)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    const { text, error } = await streamError();
    expect(text).to.equal('ok');
    expect(String((error as Error).message)).to.include('stream event that is too long');
    // Refused at 16 MB of one event's data (and what the sockets held): the back end did not get to send its 64 MB.
    expect(written).to.be.lessThan(40 * 1024 * 1024);
  });

  it('refuses an endless stream line instead of buffering it', async () => {
    async function* endless() {
      yield 'data: "';
      for (let i = 0; i < 100; i++) yield 'x'.repeat(1024);
    }
    const error = await (async () => {
      for await (const _ of readSse(endless(), 32 * 1024)) void _;
    })().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(SseLineTooLong);
  });
});

describe('what non-streamed answers may hold in memory, all calls together (server.answerMemoryLimit)', function () {
  this.timeout(30_000);
  const up = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await up.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, answerMemoryLimit: 1mb }
storage: { url: ':memory:' }
plugins: [request-log, routing, openai-chat]
providers:
  - { id: up, type: openai, baseUrl: ${up.url}/v1, apiKey: ${up.apiKey}, models: [big] }
`);
  });
  after(async () => {
    await gw?.stop();
    await up.stop();
  });

  it('answers 503 gateway_overloaded to the call whose answer would pass it, and counts an answer no more once it is read', async () => {
    // 700 KB answers: one fits in 1 MB, two do not. The first 600 KB of each go out at once, the
    // rest only when released: both answers are held unfinished, 1.2 MB together, before either
    // can end, so the gateway must give one up while the other is still arriving.
    const text = JSON.stringify({
      id: 'chatcmpl-big',
      object: 'chat.completion',
      created: 1,
      model: 'big',
      choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(700 * 1024) }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
    up.handle('POST /v1/chat/completions', async (_req, res, _body, fake) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) });
      res.write(text.slice(0, 600 * 1024));
      await fake.gate();
      if (!res.destroyed) res.end(text.slice(600 * 1024));
    });
    const call = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'big', messages: [{ role: 'user', content: 'a long answer' }] }),
      });
    const first = call();
    const second = call();
    // Nothing can end before the release but the call given up.
    const refused = await Promise.race([first, second]);
    expect(refused.status).to.equal(503);
    expect(((await refused.json()) as { error: { code: string; type: string } }).error).to.include({ code: 'gateway_overloaded', type: 'overloaded_error' });
    up.release();
    const served = (await Promise.all([first, second])).find((a) => a !== refused)!;
    expect(served.status).to.equal(200);
    expect(((await served.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message.content).to.have.length(700 * 1024);
    // Read and released: the next calls, one after the other, fit again.
    up.handle('POST /v1/chat/completions', (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(text));
    for (let i = 0; i < 3; i++) expect((await call()).status).to.equal(200);
    // An answer larger than the limit by itself can never fit: a 502, not a 503 to come back to.
    const huge = text.replace('x'.repeat(700 * 1024), 'x'.repeat(1200 * 1024));
    up.handle('POST /v1/chat/completions', (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(huge));
    const alone = await call();
    expect(alone.status).to.equal(502);
    expect(((await alone.json()) as { error: { code: string } }).error.code).to.equal('upstream_error');
    expect((await call()).status, 'the accounting let go of it').to.equal(502);
    up.handle('POST /v1/chat/completions', (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(text));
    expect((await call()).status).to.equal(200);
  });
});
