import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-edges-key-00000001';

describe('metering edge cases', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: edges, key: ${KEY}, budget: 3.5 }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [silent, slow] }
  - { id: narrow, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, connections: 1, models: [queued] }
pricing:
  silent: { input: 1, output: 1 }
  queued: { input: 1, output: 1 }
  slow: { perRequest: 1 }
`);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  const rows = async () => {
    await gw.gateway.stores.flush();
    return gw.gateway.stores.usage.list({ limit: 1000 });
  };

  it('counts a non-streamed reply that carries no usage, instead of recording zero', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 200, {
        id: 'x',
        object: 'chat.completion',
        created: 1,
        model: 'silent',
        choices: [{ index: 0, message: { role: 'assistant', content: 'one two three four five six seven eight nine ten' }, finish_reason: 'stop' }],
      }),
    );
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { response } = await client.chat.completions.create({ model: 'silent', messages: [{ role: 'user', content: 'count' }] }).withResponse();
    const requestId = response.headers.get('x-request-id')!;
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.greaterThan(0);
    const row = (await rows()).find((r) => r.requestId === requestId)!;
    expect(row.source).to.equal('estimated');
    expect(row.completionTokens).to.equal(10);
    expect(row.promptTokens).to.be.greaterThan(0);
  });

  it('never counts more output than the call allowed (max_tokens × n) for a back end that reports no usage, streamed or not', async () => {
    // Ten words, and a back end that gives no usage: the gateway's tokenizer counts 10 tokens,
    // but the call allowed 4 (2 choices of 2): the back end cannot have written more.
    const text = 'one two three four five six seven eight nine ten';
    upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
      if (body?.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (delta: object, finish: string | null) => `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'silent', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.end(chunk({ role: 'assistant', content: text }, null) + chunk({}, 'length') + 'data: [DONE]\n\n');
        return;
      }
      json(res, 200, { id: 'x', object: 'chat.completion', created: 1, model: 'silent', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'length' }] });
    });
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const plain = await client.chat.completions.create({ model: 'silent', max_tokens: 2, n: 2, messages: [{ role: 'user', content: 'count' }] }).withResponse();
    expect(plain.data.usage?.completion_tokens).to.equal(4);
    const plainRow = (await rows()).find((r) => r.requestId === plain.response.headers.get('x-request-id'))!;
    expect(plainRow).to.include({ source: 'estimated', completionTokens: 4 });
    expect(Number(plain.response.headers.get('x-switchyard-cost'))).to.be.closeTo(((plainRow.promptTokens ?? 0) + 4) / 1e6, 1e-12);

    const stream = await client.chat.completions
      .create({ model: 'silent', stream: true, stream_options: { include_usage: true }, max_completion_tokens: 3, messages: [{ role: 'user', content: 'count' }] })
      .withResponse();
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream.data) usage = chunk.usage ?? usage;
    expect(usage?.completion_tokens).to.equal(3);
    const streamRow = (await rows()).find((r) => r.requestId === stream.response.headers.get('x-request-id'))!;
    expect(streamRow).to.include({ source: 'estimated', completionTokens: 3 });
  });

  it('counts a reply whose usage says nothing ({} or only total_tokens), streamed or not, instead of charging nothing', async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const text = 'one two three four five six seven eight nine ten';
    for (const usage of [{}, { total_tokens: 50 }]) {
      upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
        if (body?.stream) {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const chunk = (delta: object, finish: string | null, extra = {}) => `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'silent', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
          res.end(chunk({ role: 'assistant', content: text }, null) + chunk({}, 'stop') + `data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'silent', choices: [], usage })}\n\ndata: [DONE]\n\n`);
          return;
        }
        json(res, 200, { id: 'x', object: 'chat.completion', created: 1, model: 'silent', choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage });
      });
      const { response } = await client.chat.completions.create({ model: 'silent', messages: [{ role: 'user', content: 'count' }] }).withResponse();
      // Before, the call was recorded as 0 tokens from the back end and cost nothing.
      expect(Number(response.headers.get('x-switchyard-cost')), JSON.stringify(usage)).to.be.greaterThan(0);
      const plain = (await rows()).find((r) => r.requestId === response.headers.get('x-request-id'))!;
      expect(plain.source).to.equal('estimated');
      expect(plain.completionTokens).to.equal(10);
      const stream = await client.chat.completions.create({ model: 'silent', stream: true, messages: [{ role: 'user', content: 'count' }] }).withResponse();
      for await (const _ of stream.data) void _;
      const streamed = (await rows()).find((r) => r.requestId === stream.response.headers.get('x-request-id'))!;
      expect(streamed.source, JSON.stringify(usage)).to.equal('estimated');
      expect(streamed.completionTokens).to.equal(10);
      expect(streamed.cost).to.be.greaterThan(0);
    }
  });

  it('charges nothing for a call whose client left while it waited for a connection to the back end (which never saw it)', async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res) => {
      // The one connection stays busy until the test lets it go.
      await upstream.gate();
      json(res, 200, { id: 'x', object: 'chat.completion', created: 1, model: 'queued', choices: [{ index: 0, message: { role: 'assistant', content: 'done' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } });
    });
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const received = upstream.received.length;
    const first = client.chat.completions.create({ model: 'queued', messages: [{ role: 'user', content: 'first' }] }).withResponse();
    await eventually(() => upstream.received.length === received + 1, 5000, 'the first call at the back end');
    const leaving = new AbortController();
    const second = client.chat.completions.create({ model: 'queued', messages: [{ role: 'user', content: 'second, queued' }] }, { signal: leaving.signal }).catch((e: unknown) => e);
    // Queued behind the first call for a while, then the client gives up.
    await new Promise((resolve) => setTimeout(resolve, 300));
    leaving.abort();
    await second;
    upstream.release();
    const { response } = await first;
    await gw.gateway.stores.flush();
    // One row, the first's. Before, the queued call was charged an estimated prompt too.
    const queued = (await rows()).filter((r) => r.model === 'queued');
    expect(queued.map((r) => r.requestId)).to.deep.equal([response.headers.get('x-request-id')]);
    const logged = (await gw.gateway.stores.logs.query({ limit: 100 })).entries.find((e) => e.status === 499 && e.model === 'queued')!;
    expect(logged.attempts).to.have.length(1);
    expect(logged.attempts[0]).to.include({ error: 'client_closed_request', unsent: true });
  });

  it('records a client that leaves before the answer begins: one row, client_gone, charged, logged as 499', async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, _res, _body, fake) => {
      await fake.gate(); // never answers until released
    });
    const before = (await rows()).length;
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const controller = new AbortController();
      const pending = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'wait for me' }] }),
        signal: controller.signal,
      }).catch(() => undefined);
      const seen = upstream.received.length;
      await eventually(() => upstream.received.length > seen, 3000, 'the upstream to get the call');
      controller.abort();
      await pending;
    }
    const leftSlow = () => gw.logs.filter((l) => l.message === 'request' && l.status === 499 && l.model === 'slow');
    await eventually(() => leftSlow().length >= 2, 3000, 'two 499 access lines');
    for (const line of leftSlow()) ids.push(String(line.requestId));
    upstream.release();
    // The rows are written once metering has counted each prompt (on its tokenizer thread).
    let all = await rows();
    for (const deadline = Date.now() + 5000; all.length - before < 2 && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      all = await rows();
    }
    expect(all.length - before).to.equal(2);
    for (const id of ids) {
      const row = all.find((r) => r.requestId === id)!;
      expect(row, id).to.exist;
      expect(row.endReason).to.equal('client_gone');
      expect(row.cost).to.equal(1);
    }
    const logged = await gw.gateway.stores.logs.query({ status: 499 });
    expect(logged.entries.map((e) => e.errorCode)).to.include('client_closed_request');
    // The budget saw both (plus the few millionths of the first test).
    expect((await gw.gateway.stores.keys.get('edges'))!.spent).to.be.closeTo(2, 0.001);
  });

  it('never reuses a client-chosen request id, so repeated ids are each metered and charged', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 200, {
        id: 'x',
        object: 'chat.completion',
        created: 1,
        model: 'slow',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      }),
    );
    const ask = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'x-request-id': 'same-id-every-time' },
        body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'x' }] }),
      });
    const first = await ask();
    expect(first.status).to.equal(200);
    expect(first.headers.get('x-request-id')).to.not.equal('same-id-every-time');
    // 3 of 3.5 spent now: the same id again is charged again, so a fourth call does not fit.
    expect((await gw.gateway.stores.keys.get('edges'))!.spent).to.be.closeTo(3, 0.001);
    const second = await ask();
    expect(second.status).to.equal(429);
    expect(((await second.json()) as { error: { code: string } }).error.code).to.equal('insufficient_quota');
  });
});

describe('open gateway', function () {
  this.timeout(30_000);
  it("refuses a web page's call while open (Origin), in the client's shape, and serves it once a key exists and is sent", async () => {
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, routing, openai-chat, anthropic-messages]
providers: [{ id: mock, type: mock, models: [mock-chat] }]
`);
    try {
      // What a page can send with no preflight: a POST whose body has no type (a Blob without one).
      const page = (path: string, body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${gw.url}${path}`, { method: 'POST', headers: { origin: 'https://attacker.example', ...headers }, body: new Blob([JSON.stringify(body)]) });
      const chat = { model: 'mock-chat', messages: [{ role: 'user', content: 'drive-by' }] };
      const refused = await page('/v1/chat/completions', chat);
      expect(refused.status).to.equal(403);
      expect(((await refused.json()) as { error: { code: string; type: string } }).error).to.deep.include({ code: 'open_to_web_pages', type: 'permission_error' });
      const claude = await page('/v1/messages', { ...chat, max_tokens: 5 }, { 'anthropic-version': '2023-06-01' });
      expect(claude.status).to.equal(403);
      expect(((await claude.json()) as { type: string; error: { type: string } }).error.type).to.equal('permission_error');
      // The same call from a program (no Origin) is served, as the open gateway promises.
      const program = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', body: new Blob([JSON.stringify(chat)]) });
      expect(program.status).to.equal(200);
      // With a key, a page that sends it is a client like another (a browser preflights that call).
      await gw.gateway.stores.keys.create({ name: 'web', secret: 'sk-web-key-000000000001', source: 'cli' });
      expect((await page('/v1/chat/completions', chat, { authorization: 'Bearer sk-web-key-000000000001' })).status).to.equal(200);
      expect((await page('/v1/chat/completions', chat)).status).to.equal(401);
    } finally {
      await gw.stop();
    }
  });

  it('stays closed once a key existed, even when every key is revoked', async () => {
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [auth, validation, routing, openai-chat]
providers: [{ id: mock, type: mock, models: [mock-chat] }]
`);
    try {
      const ask = (key?: string) =>
        fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
          body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }),
        });
      expect((await ask()).status).to.equal(200);
      const made = await gw.gateway.stores.keys.create({ name: 'only', secret: 'sk-only-key-00000001', source: 'cli' });
      expect((await ask()).status).to.equal(401);
      expect((await ask('sk-only-key-00000001')).status).to.equal(200);
      await gw.gateway.stores.keys.revoke(made.id);
      expect((await ask()).status).to.equal(401);
      expect((await ask('sk-junk-key-000000001')).status).to.equal(401);
      const revoked = await ask('sk-only-key-00000001');
      expect(revoked.status).to.equal(401);
      expect(((await revoked.json()) as { error: { code: string } }).error.code).to.equal('revoked_api_key');
    } finally {
      await gw.stop();
    }
  });
});

describe('a model named after a short placeholder credential', function () {
  this.timeout(30_000);
  it("is priced, and held to the key's budget: a local back end's `apiKey: ollama` is no reason to hide `ollama/llama3`", async () => {
    const local = new FakeOpenAI('ollama');
    await local.start();
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: local, key: sk-local-0000000000000001, budget: 0.5 }]
providers:
  - { id: local, type: openai, baseUrl: ${local.url}/v1, apiKey: ollama, models: [ollama/llama3] }
pricing:
  ollama/llama3: { perRequest: 0.3 }
`);
    try {
      const client = new OpenAI({ apiKey: 'sk-local-0000000000000001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const first = await client.chat.completions.create({ model: 'ollama/llama3', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      expect(first.response.headers.get('x-switchyard-cost')).to.equal('0.3');
      const refused = await client.chat.completions.create({ model: 'ollama/llama3', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
      await gw.gateway.stores.flush();
      const rows = await gw.gateway.stores.usage.list({ limit: 10 });
      expect(rows.map((r) => [r.model, r.cost])).to.deep.equal([['ollama/llama3', 0.3]]);
    } finally {
      await gw.stop();
      await local.stop();
    }
  });
});
