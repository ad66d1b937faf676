import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { logRow } from './support/rows.js';

const KEY = 'sk-client-gone-admission-01';

/**
 * A tap after metering's admission (stage 50) that holds a call until its client has left, and
 * tells the test when it holds one: the window a budget's count of a long prompt opens (half a
 * second for a few megabytes), made as long as the test needs without timing.
 */
const PLUGIN = `
export default {
  name: 'hold-until-gone',
  version: '1.0.0',
  apply(api) {
    api.hooks.beforeUpstream.tapPromise({ name: 'hold-until-gone', stage: 50 }, async (request, ctx) => {
      if (request.model !== 'held-model') return request;
      const signal = ctx.signal;
      globalThis.__syHeld?.(ctx.id);
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      return request;
    });
  },
};
`;

/**
 * A client that leaves while its call is being admitted (before any back end is asked) is not
 * charged: before, the attempt that followed was recorded as tried, and metering charged a count
 * of the whole prompt (a probe saw 1.08 a call of a $10 budget for a 2.4 MB prompt no back end got).
 */
describe('a client that leaves while its call is admitted (before any back end is asked)', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let upstream: FakeOpenAI;
  let dir: string;

  before(async () => {
    upstream = new FakeOpenAI();
    await upstream.start();
    dir = mkdtempSync(path.join(tmpdir(), 'sy-hold-until-gone-'));
    writeFileSync(path.join(dir, 'hold.mjs'), PLUGIN);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: leaving, key: ${KEY}, budget: 10 }]
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, ${JSON.stringify(path.join(dir, 'hold.mjs'))}]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [held-model] }
pricing:
  held-model: { input: 3, output: 15 }
`);
  });
  after(async () => {
    delete (globalThis as { __syHeld?: unknown }).__syHeld;
    await gw?.stop();
    await upstream?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is no attempt: no back end gets it, no usage row, nothing spent, its log row says the client left', async () => {
    const held = new Promise<string>((resolve) => ((globalThis as { __syHeld?: (id: string) => void }).__syHeld = resolve));
    const client = new AbortController();
    const call = fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'held-model', max_tokens: 100, messages: [{ role: 'user', content: 'lorem ipsum dolor sit amet '.repeat(2000) }] }),
      signal: client.signal,
    }).catch((error: unknown) => error);
    const id = await held;
    client.abort();
    expect(await call).to.be.instanceOf(Error);
    const row = await logRow(gw, id);
    expect(row.status).to.equal(499);
    expect(row.attempts).to.deep.equal([]);
    await gw.gateway.stores.flush();
    expect(await gw.gateway.stores.usage.list({ requestId: id })).to.deep.equal([]);
    const keys = await gw.gateway.stores.keys.list();
    expect(keys.find((k) => k.name === 'leaving')!.spent).to.equal(0);
    expect(upstream.received).to.have.length(0);
  });
});
