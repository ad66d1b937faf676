import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { logRow, usageRow } from './support/rows.js';

const CLIENT_KEY = 'sk-plugin-tap-failures-0001';

/** An output check, as a third party writes one: it refuses an answer that says a word, or fails (a bug) on another. */
const PLUGIN = `
export default {
  name: 'output-check',
  version: '1.0.0',
  apply(api) {
    api.hooks.afterUpstream.tap('output-check', (response) => {
      if (response.kind !== 'json') return response;
      const text = JSON.stringify(response.body);
      if (text.includes('forbidden')) throw api.error('forbidden', { params: { detail: 'The answer did not pass the output check.' } });
      if (text.includes('crash')) throw new TypeError('the check broke');
      return response;
    });
    // Headers of its own on every reply, some that HTTP cannot carry (a plugin's bug) when asked.
    api.hooks.onRequest.tap('output-check', (ctx) => {
      ctx.responseHeaders['x-checked'] = 'yes';
      if (ctx.headers['x-bad-headers'] === 'yes') {
        ctx.responseHeaders['x-note'] = 'snow \u2603';
        ctx.responseHeaders['x-split'] = 'a\\r\\nset-cookie: b=c';
        ctx.responseHeaders['bad name'] = 'x';
        ctx.responseHeaders['content-length'] = '5';
      }
      if (ctx.headers['x-bad-error'] === 'yes') throw api.error('forbidden', { params: { detail: 'no' }, headers: { 'x-why': 'a\\r\\nb' } });
    });
    // A request rewrite that answers null by mistake, when asked.
    api.hooks.beforeUpstream.tap('output-check', (request, ctx) => (ctx.headers['x-null'] === 'yes' ? null : request));
    // A bug in an observer of attempts, on the calls of one model.
    api.hooks.onAttempt.tap('output-check', (outcome, ctx) => {
      if (ctx.model === 'buggy-observer' && outcome.status === 200) throw new TypeError('the observer broke');
    });
  },
};
`;

/**
 * A plugin's afterUpstream tap that refuses an answer (or fails) after the back end gave it whole:
 * the client gets the tap's error, and the key is charged what the back end reported, as the back
 * end billed it (before, the usage row had no tokens and cost 0: a key could spend without being
 * charged).
 */
describe('an afterUpstream tap that refuses or fails after the back end answered (official openai client, mock back end)', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let dir: string;
  let client: OpenAI;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sy-output-check-'));
    writeFileSync(path.join(dir, 'output-check.mjs'), PLUGIN);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys:
    - { name: checked, key: ${CLIENT_KEY} }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, ${JSON.stringify(path.join(dir, 'output-check.mjs'))}]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
  - { id: mock2, type: mock, models: [mock-chat-2] }
models:
  - name: buggy-observer
    targets: [{ provider: mock, model: mock-chat }, { provider: mock2, model: mock-chat-2, priority: 1 }]
pricing:
  mock-chat: { input: 1, output: 2 }
`);
    client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const [word, status] of [
    ['forbidden', 403],
    ['crash', 500],
  ] as const) {
    it(`an answer the tap ${word === 'forbidden' ? 'refuses' : 'fails on'}: ${status} to the client, the back end's usage charged`, async () => {
      const error = (await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: `say ${word} please` }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(error.status).to.equal(status);
      const id = error.headers?.get('x-request-id');
      expect(id).to.be.a('string');
      const row = await usageRow(gw, id!);
            // The mock's usage for "say <word> please" answered with the same words.
      expect(row.promptTokens).to.be.greaterThan(0);
      expect(row.completionTokens).to.equal(3);
      expect(row.cost).to.be.closeTo((row.promptTokens! * 1 + 3 * 2) / 1_000_000, 1e-12);
      if (status === 500) {
        // The log line of a plugin's bug names the plugin (its stack passes through its file).
        const line = gw.logs.find((l) => l.message === 'unhandled error' && l.requestId === id);
        expect(line?.plugin).to.equal('output-check');
      }
    });
  }
  it('headers a plugin set that HTTP cannot carry, or that frame the reply, are left out and told once: the answer and an error reply still go out', async () => {
    const ids: string[] = [];
    for (const stream of [false, true]) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'x-bad-headers': 'yes' },
        body: JSON.stringify({ model: 'mock-chat', stream, messages: [{ role: 'user', content: 'hello there' }] }),
        signal: AbortSignal.timeout(10_000),
      });
      expect(res.status).to.equal(200);
      ids.push(res.headers.get('x-request-id')!);
      expect(res.headers.get('x-checked')).to.equal('yes');
      expect(res.headers.get('x-note')).to.equal(null);
      expect(res.headers.get('set-cookie')).to.equal(null);
      const text = await res.text();
      expect(text).to.include(stream ? '[DONE]' : '"choices"');
      if (!stream) expect(res.headers.get('content-length')).to.equal(String(Buffer.byteLength(text)));
    }
    const refused = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'x-bad-headers': 'yes' },
      body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(refused.status).to.equal(404);
    ids.push(refused.headers.get('x-request-id')!);
    expect(refused.headers.get('x-checked')).to.equal('yes');
    const told = gw.logs.filter((l) => String(l.message).startsWith('a plugin set a response header the gateway cannot send'));
    expect(told.map((l) => l.header).sort()).to.deep.equal(['"bad name"', '"content-length"', '"x-note"', '"x-split"']);
    expect(gw.logs.some((l) => l.message === 'unhandled error' && ids.includes(String(l.requestId)))).to.equal(false);
  });

  it("a plugin's error with a header no HTTP carries: the error reply goes out without it, told once", async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'x-bad-error': 'yes' },
      body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).to.equal(403);
    expect(res.headers.get('x-why')).to.equal(null);
    expect(((await res.json()) as { error: { code: string } }).error.code).to.equal('forbidden');
    expect(gw.logs.some((l) => String(l.message).startsWith('a plugin set a response header the gateway cannot send') && l.header === '"x-why"')).to.equal(true);
  });

  it("a beforeUpstream tap that answers null: a 500 blamed on that tap's plugin, not on the code after it", async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json', 'x-null': 'yes' },
      body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).to.equal(500);
    const id = res.headers.get('x-request-id');
    const line = gw.logs.find((l) => l.message === 'unhandled error' && l.requestId === id);
    expect(line?.plugin).to.equal('output-check');
    expect(String(line?.error)).to.include("the tap 'output-check' answered null");
  });

  it('an onAttempt tap that throws on an answered attempt: a 500, one attempt recorded as answered, no other target tried, the usage charged', async () => {
    const error = (await client.chat.completions.create({ model: 'buggy-observer', messages: [{ role: 'user', content: 'hello there' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.InternalServerError);
    const id = error.headers?.get('x-request-id')!;
    const log = await logRow(gw, id);
    // Before: two attempts, the answered one and an invented failure of the same back end, told to onAttempt again.
    expect(log.attempts.map((a) => [a.provider, a.status])).to.deep.equal([['mock', 200]]);
    const row = await usageRow(gw, id);
    expect(row.completionTokens).to.equal(2);
    expect(row.cost).to.be.greaterThan(0);
  });
});

/**
 * A plugin installed as a package (its entry in a subfolder, its check in another file of the
 * package): a bug in it is logged with its name, found by the package's folder in the stack.
 */
describe('an unhandled error from a plugin installed as a package names the plugin (official openai client, mock back end)', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sy-blamed-pkg-'));
    const pkg = path.join(dir, 'node_modules', 'sy-blamed-pkg');
    mkdirSync(path.join(pkg, 'lib'), { recursive: true });
    writeFileSync(path.join(pkg, 'package.json'), JSON.stringify({ name: 'sy-blamed-pkg', version: '1.0.0', type: 'module', main: 'lib/index.js' }));
    // The tap itself lives outside the entry's folder: only the package's folder finds it in the stack.
    writeFileSync(
      path.join(pkg, 'check.js'),
      "export function check(response) { if (response.kind === 'json' && JSON.stringify(response.body).includes('crash')) throw new TypeError('the packaged check broke'); return response; }\n",
    );
    writeFileSync(
      path.join(pkg, 'lib', 'index.js'),
      "import { check } from '../check.js';\nexport default { name: 'packaged-check', version: '1.0.0', apply(api) { api.hooks.afterUpstream.tap('packaged-check', check); } };\n",
    );
    const file = path.join(dir, 'gateway.config.yaml');
    writeFileSync(
      file,
      `server: { host: 127.0.0.1, port: 0 }\nstorage: { url: ':memory:' }\nplugins: [request-log, auth, routing, metering, openai-chat, sy-blamed-pkg]\nproviders:\n  - { id: mock, type: mock, models: [mock-chat] }\n`,
    );
    gw = await startGateway(file);
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("logs the package's plugin name with the error, whichever of its files threw", async () => {
    const client = new OpenAI({ apiKey: 'sk-unused-no-keys-0000', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = (await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'crash now' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.InternalServerError);
    const id = error.headers?.get('x-request-id');
    const line = gw.logs.find((l) => l.message === 'unhandled error' && l.requestId === id);
    expect(line?.plugin).to.equal('packaged-check');
  });
});

/** An observer that waits on a webhook that never answers, as a third party may write one. */
const HANGING = `
export default {
  name: 'slow-webhook',
  version: '1.0.0',
  apply(api) {
    api.hooks.onResponse.tapPromise('slow-webhook', async (ctx) => {
      if (ctx.headers['x-hang'] === 'yes') await new Promise(() => {});
    });
  },
};
`;

/**
 * An onResponse tap that never settles, listed before the built-in ones: the call is still
 * charged, its concurrency slot freed and its log row written, once the tap has had its time.
 */
describe('an onResponse tap that never settles (a hung webhook), listed before metering', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sy-slow-webhook-'));
    writeFileSync(path.join(dir, 'slow-webhook.mjs'), HANGING);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys:
    - { name: one-at-a-time, key: ${CLIENT_KEY}, maxConcurrent: 1 }
plugins: [request-log, auth, rate-limit, validation, routing, ${JSON.stringify(path.join(dir, 'slow-webhook.mjs'))}, metering, openai-chat]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1, output: 2 }
`);
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('after 5 s the taps after it run: the call charged, its slot free, its row written; the tap named', async () => {
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0, defaultHeaders: { 'x-hang': 'yes' } });
    const { response } = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello there' }] }).withResponse();
    const id = response.headers.get('x-request-id')!;
    await eventually(() => gw.logs.some((l) => l.message === 'onResponse tap failed' && l.plugin === 'slow-webhook'), 8000, 'the hung tap to be told');
    const row = await usageRow(gw, id);
    expect(row.cost).to.be.greaterThan(0);
    expect((await logRow(gw, id)).status).to.equal(200);
    // The slot of the first call is free: a key limited to one call at a time calls again.
    const again = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'again' }] });
    expect(again.choices[0]!.message.content).to.be.a('string');
  });
});
