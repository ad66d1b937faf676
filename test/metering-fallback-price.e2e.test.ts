import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { usageRow } from './support/rows.js';

const KEY = 'sk-fallback-price-key-0001';
const POOR = 'sk-fallback-price-poor-001';

/**
 * A public name without a price of its own whose fallback is a priced public name: a call the
 * fallback answers costs the fallback's price, and a budget reserves it, instead of costing 0.
 */
describe('metering: the price of a fallback reached through its public name', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
auth:
  keys:
    - { name: rich, key: ${KEY}, budget: 100 }
    - { name: poor, key: ${POOR}, budget: 0.000001 }
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [broken-internal] }
  - { id: mock, type: mock, models: [mock-chat] }
models:
  - { name: priced-alias, targets: [{ provider: mock, model: mock-chat }] }
  - { name: primary, targets: [{ provider: up, model: broken-internal }], fallbacks: [priced-alias] }
pricing:
  priced-alias: { input: 1000, output: 2000 }
`);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it("a call its fallback answers is charged the fallback's price, in the header and the ledger", async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 500, { error: { message: 'down', type: 'server_error', param: null, code: null } }));
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data, response } = await client.chat.completions.create({ model: 'primary', messages: [{ role: 'user', content: 'hello there' }] }).withResponse();
    expect(data.model).to.equal('mock-chat');
    const { prompt_tokens, completion_tokens } = data.usage!;
    const expected = (prompt_tokens * 1000 + completion_tokens * 2000) / 1e6;
    expect(expected).to.be.greaterThan(0);
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(expected, 1e-12);
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row.cost).to.be.closeTo(expected, 1e-12);
    expect(row).to.include({ model: 'primary', provider: 'mock' });
  });

  it("a budget reserves the fallback's price: a key that cannot afford it is refused before anything goes up", async () => {
    const seen = upstream.received.length;
    const client = new OpenAI({ apiKey: POOR, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = (await client.chat.completions.create({ model: 'primary', messages: [{ role: 'user', content: 'hello there' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect(error.status).to.equal(429);
    expect((error.error as { code?: string }).code).to.equal('insufficient_quota');
    expect(upstream.received.length).to.equal(seen);
  });
});
