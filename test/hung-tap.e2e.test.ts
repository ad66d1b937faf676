import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { eventually, startGateway, writeConfig, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-hung-tap-key-0000000001';

/** What the test plugin counts: calls that reached a hanging tap, and responses closed. */
const probe = (): { reached: number; closed: number } => (globalThis as unknown as { hangProbe: { reached: number; closed: number } }).hangProbe;

/**
 * A third-party plugin whose request-hook tap never settles must not hold its request, and what
 * the request holds, once the client has left: here, the key's only concurrent slot. Before, the
 * slot stayed taken for good and every later call of the key was refused.
 */
describe('a request hook tap that never settles: the request ends when its client leaves', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    const file = writeConfig(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, ./hang.mjs, routing, metering, openai-chat]
auth:
  keys: [{ name: one-at-a-time, key: ${KEY}, maxConcurrent: 1 }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
    // Each request hook a plugin can tap with a promise hangs when the header names it. Listed
    // after rate-limit (whose onRequest takes the slot) and before routing (whose resolveTargets
    // answers, and ends that hook).
    writeFileSync(
      path.join(path.dirname(file), 'hang.mjs'),
      `const never = () => new Promise(() => {});
const probe = (globalThis.hangProbe = { reached: 0, closed: 0 });
export default {
  name: 'hang', version: '1.0.0',
  apply(api) {
    const at = (hook, ctx) => ctx.headers['x-hang-at'] === hook && ++probe.reached > 0;
    // After rate-limit's observer (stage 50), which frees the slot.
    api.hooks.onResponse.tap({ name: 'hang', stage: 100 }, () => { probe.closed++; });
    api.hooks.onRequest.tapPromise('hang', async (ctx) => { if (at('onRequest', ctx)) await never(); });
    api.hooks.validate.tapPromise('hang', async (ctx) => { if (at('validate', ctx)) await never(); });
    api.hooks.resolveTargets.tapPromise('hang', async (ctx) => { if (at('resolveTargets', ctx)) await never(); return undefined; });
    api.hooks.beforeUpstream.tapPromise('hang', async (request, ctx) => { if (at('beforeUpstream', ctx)) await never(); return request; });
    api.hooks.afterUpstream.tapPromise('hang', async (response, ctx) => { if (at('afterUpstream', ctx)) await never(); return response; });
  },
};
`,
    );
    gw = await startGateway(file);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
  });

  for (const hook of ['onRequest', 'validate', 'resolveTargets', 'beforeUpstream', 'afterUpstream']) {
    it(`hung in ${hook}: the client gives up, the call is logged as the client's leaving, and the key's slot is free again`, async () => {
      const leaving = new AbortController();
      const hung = client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] }, { signal: leaving.signal, headers: { 'x-hang-at': hook } });
      // The call holds the key's one slot while the tap hangs: another is refused meanwhile.
      let refused: unknown;
      const reached = probe().reached;
      await eventually(() => probe().reached > reached, 3000, 'the call to reach the hanging tap');
      await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'meanwhile' }] }).catch((error: unknown) => (refused = error));
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).to.equal(429);
      const closed = probe().closed;
      leaving.abort();
      await hung.catch(() => undefined);
      await eventually(() => probe().closed > closed, 3000, 'the hung call to end');
      const answer = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'after' }] });
      expect(answer.choices[0]!.message.content).to.equal('after');
      const page = await gw.gateway.stores.logs.query({ limit: 5 });
      expect(page.entries.map((e) => e.errorCode)).to.include('client_closed_request');
    });
  }
});
