import { expect } from 'chai';
import net from 'node:net';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const CANARY_CLIENT = 'sk-canary-client-7f3a9b2c4d5e6f708192';
const CANARY_PROVIDER = 'sk-canary-provider-0a1b2c3d4e5f60718293';
const ADMIN = 'admin-key-for-secrets-test-0001';
/** A key of the file's own choosing, not shaped like `sk-…`. */
const CANARY_PLAIN = 'plain-canary-key-ABCDEFGH-123456';
/** A key that holds another, and one with characters a URL escapes. */
const CANARY_LONGER = `${CANARY_PLAIN}-and-more-XYZ`;
const CANARY_ESCAPED = 'esc+canary/key=ABCDEFGH12';

/**
 * Canary keys go through every path the suite can think of; afterwards neither may appear in
 * any log line, request-log row, usage row, error body or response header.
 */
describe('secrets never leak (canary keys)', function () {
  this.timeout(60_000);
  const upstream = new FakeOpenAI(CANARY_PROVIDER);
  let gw: RunningGateway;
  const seen: string[] = [];

  async function capture(res: Response): Promise<void> {
    seen.push(JSON.stringify([...res.headers.entries()]));
    seen.push(await res.text());
  }

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
logging: { level: debug }
plugins: [request-log, auth, rate-limit, validation, routing, metering, admin, openai-chat]
auth:
  adminKey: ${ADMIN}
  keys: [{ name: canary, key: ${CANARY_CLIENT}, rpm: 1000 }, { name: plain, key: ${CANARY_PLAIN} }, { name: longer, key: ${CANARY_LONGER} }, { name: escaped, key: '${CANARY_ESCAPED}' }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${CANARY_PROVIDER}, models: [gpt-4o-mini, leaky] }
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  gpt-4o-mini: { input: 1, output: 1 }
`);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('keeps both canaries out of everything the gateway says or writes', async () => {
    // An upstream that quotes the provider key back in every kind of error.
    upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
      const mode = String((body?.messages as Array<{ content: string }>)?.[0]?.content ?? '');
      if (mode === 'fail-400') return json(res, 400, { error: { message: `bad request with key ${CANARY_PROVIDER}` } });
      if (mode === 'fail-500') return json(res, 500, { error: { message: `boom ${CANARY_PROVIDER}` } });
      if (mode === 'fail-429') return json(res, 429, { error: { message: `slow down ${CANARY_PROVIDER}` } }, { 'retry-after': '1' });
      if (mode === 'stream-error') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return res.end(`data: ${JSON.stringify({ error: { message: `mid-stream ${CANARY_PROVIDER}` } })}\n\n`);
      }
      return json(res, 200, {
        id: 'x',
        object: 'chat.completion',
        created: 1,
        model: 'gpt-4o-mini',
        choices: [{ index: 0, message: { role: 'assistant', content: 'fine' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    });
    const post = (body: unknown, key = CANARY_CLIENT, query = '') =>
      fetch(`${gw.url}/v1/chat/completions${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify(body),
      });
    const ask = (content: string, model = 'gpt-4o-mini', stream = false) => post({ model, stream, messages: [{ role: 'user', content }] });

    for (const mode of ['ok', 'fail-400', 'fail-500', 'fail-429', 'stream-error']) await capture(await ask(mode, 'gpt-4o-mini', mode === 'stream-error'));
    await capture(await ask('stream ok', 'mock-chat', true));
    await capture(await post({ model: 'gpt-4o-mini', messages: 'not-a-list' }));
    await capture(await post({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }));
    // The canary as a wrong key (with extra text) and in a query string.
    await capture(await ask('x', 'gpt-4o-mini').then(() => post({ model: 'gpt-4o-mini', messages: [] }, `${CANARY_CLIENT}x`)));
    await capture(await post({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'q' }] }, CANARY_CLIENT, `?key=${CANARY_CLIENT}`));
    // Through the official client too.
    const client = new OpenAI({ apiKey: CANARY_CLIENT, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'fail-500' }] }).catch((e: unknown) => e);
    seen.push(String((error as Error).message), JSON.stringify((error as { error?: unknown }).error));
    // What an operator reads back.
    for (const path of ['/admin/logs?limit=1000', '/admin/usage', '/admin/keys']) {
      await capture(await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${ADMIN}` } }));
    }
    await gw.gateway.stores.flush();
    const logRows = await gw.gateway.stores.logs.query({ limit: 1000 });
    const usageRows = await gw.gateway.stores.usage.list({ limit: 1000 });
    expect(logRows.entries.length).to.be.greaterThan(8);
    expect(usageRows.length).to.be.greaterThan(3);

    const everything = [...seen, gw.logText(), JSON.stringify(logRows), JSON.stringify(usageRows)].join('\n');
    const where = everything.indexOf(CANARY_CLIENT);
    expect(where, everything.slice(Math.max(0, where - 300), where + 100)).to.equal(-1);
    expect(everything).to.not.include(CANARY_PROVIDER);
    // Not even long pieces of them.
    for (const canary of [CANARY_CLIENT, CANARY_PROVIDER]) {
      for (let i = 0; i + 16 <= canary.length; i += 4) expect(everything).to.not.include(canary.slice(i, i + 16));
    }
  });

  it('keeps a key of any shape out of the logged path when it is sent as a model name or an id (the file\'s keys, the provider\'s)', async () => {
    const before = gw.logText().length;
    const ids: string[] = [];
    for (const [path, key] of [
      [`/v1/models/${CANARY_PLAIN}`, CANARY_CLIENT],
      [`/v1/models/${CANARY_PROVIDER}x`, CANARY_CLIENT],
      [`/admin/keys/${CANARY_PLAIN}`, ADMIN],
      [`/v1/models/${CANARY_LONGER}`, CANARY_CLIENT],
      [`/v1/models/${encodeURIComponent(CANARY_ESCAPED)}`, CANARY_CLIENT],
      // Spelled with escapes a client (or an operator's tool) may use: a secret all the same.
      [`/admin/keys/%${CANARY_PLAIN.charCodeAt(0).toString(16)}${CANARY_PLAIN.slice(1)}`, ADMIN],
      [`/v1/models/%${CANARY_PROVIDER.charCodeAt(0).toString(16)}${CANARY_PROVIDER.slice(1)}`, CANARY_CLIENT],
      [`/admin/keys/Bearer%20${CANARY_CLIENT}`, ADMIN],
      [`/v1/models/x.${CANARY_CLIENT}`, CANARY_CLIENT],
    ] as const) {
      const res = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
      expect(res.status, path).to.equal(404);
      expect(await res.text()).to.not.include(CANARY_PLAIN);
      ids.push(res.headers.get('x-request-id')!);
    }
    await gw.gateway.stores.flush();
    const rows = (await gw.gateway.stores.logs.query({ limit: 1000 })).entries.filter((row) => ids.includes(row.requestId));
    expect(rows.map((row) => row.path).sort()).to.deep.equal([
      '/admin/keys/Bearer%20[redacted]',
      '/admin/keys/[redacted]',
      '/admin/keys/[redacted]',
      '/v1/models/[redacted]',
      '/v1/models/[redacted]',
      '/v1/models/[redacted]',
      '/v1/models/[redacted]',
      '/v1/models/[redacted]x',
      '/v1/models/x.[redacted]',
    ]);
    const logged = gw.logText().slice(before);
    expect(logged).to.include('/admin/keys/[redacted]');
    for (const canary of [CANARY_PLAIN, CANARY_PROVIDER, CANARY_CLIENT, CANARY_PLAIN.slice(1), CANARY_PROVIDER.slice(1), 'and-more-XYZ', encodeURIComponent(CANARY_ESCAPED)]) {
      expect(logged).to.not.include(canary);
    }
  });

  it("keeps the provider key out of the log when a plugin's tap throws an error that quotes it", async () => {
    // A plugin with a bug: its taps throw errors whose text holds the provider's key.
    gw.gateway.hooks.onRequest.tap('buggy-plugin', (ctx) => {
      if (ctx.headers['x-buggy'] === 'request') throw new Error(`could not use ${CANARY_PROVIDER} here`);
    });
    gw.gateway.hooks.onResponse.tap('buggy-plugin', (ctx) => {
      if (ctx.headers['x-buggy'] === 'response') throw new Error(`observer saw ${CANARY_PROVIDER.slice(3)}`);
    });
    const before = gw.logText().length;
    const call = (mode: string) =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CANARY_CLIENT}`, 'content-type': 'application/json', 'x-buggy': mode },
        body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
    const failed = await call('request');
    expect(failed.status).to.equal(500);
    expect(await failed.text()).to.not.include(CANARY_PROVIDER);
    expect((await call('response')).status).to.equal(200);
    await eventually(() => gw.logText().includes('onResponse tap failed'), 2000, 'the failing observer to be logged');
    const logged = gw.logText().slice(before);
    expect(logged).to.include('unhandled error');
    expect(logged).to.include('[redacted]');
    expect(logged).to.not.include(CANARY_PROVIDER);
    expect(logged).to.not.include(CANARY_PROVIDER.slice(3, 20));
  });

  it('answers malformed keys with 401 (or 400 for bytes HTTP forbids), never 500', async () => {
    const keys = [
      "' OR '1'='1",
      "sk-x'; DROP TABLE keys; --",
      'sk-%00-nul-text',
      'k'.repeat(64 * 1024),
      'sk-ключ-密钥-🔑',
      '\\x00\\x01',
    ];
    for (const key of keys) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${encodeURIComponent(key).length === key.length ? key : encodeURIComponent(key)}` },
        body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status, key.slice(0, 20)).to.equal(401);
      const body = (await res.json()) as { error: { code: string } };
      expect(body.error.code).to.equal('invalid_api_key');
    }
    // Raw bytes no client library will send: a NUL and non-ASCII bytes straight into the header.
    for (const raw of [Buffer.from('sk-\u0000nul'), Buffer.from([0x73, 0x6b, 0x2d, 0xe9, 0xff, 0xfe])]) {
      const answer = await rawRequest(new URL(gw.url), raw);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]);
      expect([400, 401], answer.slice(0, 80)).to.include(status);
      expect(answer).to.match(/\r\n\r\n\{"error":/);
      expect(answer.toLowerCase()).to.include('x-request-id');
    }
    // Still healthy afterwards, and those requests are in the request log too.
    expect((await fetch(`${gw.url}/healthz`)).status).to.equal(200);
    await gw.gateway.stores.flush();
    const malformed = await gw.gateway.stores.logs.query({ status: 400 });
    expect(malformed.entries.some((e) => e.errorCode === 'malformed_http')).to.equal(true);
  });
});

function rawRequest(url: URL, key: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname);
    const body = '{"model":"mock-chat","messages":[{"role":"user","content":"x"}]}';
    let answer = '';
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('end', () => resolve(answer));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write(
      Buffer.concat([
        Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nAuthorization: Bearer '),
        key,
        Buffer.from(`\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
      ]),
    );
    setTimeout(() => socket.destroy(), 5000).unref();
  });
}
