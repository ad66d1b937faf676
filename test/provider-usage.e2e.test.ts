import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { usageRow } from './support/rows.js';

const CLIENT_KEY = 'sk-provider-usage-client-01';

/**
 * A third party's provider that gives its usage beside its answer (`usage`, in the gateway's own
 * shape, as docs/writing-a-provider.md says), an answer whose body has none. The model name says
 * which usage: `good` the figures of its vendor's meter; `broken-*` figures that are not figures
 * (a vendor's meter that left a count out, or a bug).
 */
const PLUGIN = `
const USAGE = {
  good: { inputTokens: 11, outputTokens: 7, totalTokens: 18, cachedInputTokens: 4, cacheWriteTokens: 2, webSearches: 1 },
  'broken-nan': { inputTokens: 11, outputTokens: undefined, totalTokens: NaN },
  'broken-negative': { inputTokens: -1000000, outputTokens: 5, totalTokens: -999995 },
  'broken-huge': { inputTokens: 1e308, outputTokens: 5, totalTokens: 1e308 },
  'broken-text': { inputTokens: '11', outputTokens: 'abc', totalTokens: 11 },
  'broken-seconds': { inputTokens: 11, outputTokens: 7, totalTokens: 18, seconds: Infinity },
};
export default {
  name: 'metered',
  version: '1.0.0',
  apply(api) {
    api.registerProviderType({
      type: 'metered',
      create(config) {
        return {
          id: config.id,
          type: config.type,
          models: config.models,
          operations: {
            async chat(request) {
              const body = { id: 'chatcmpl-m', object: 'chat.completion', created: 1, model: request.model, choices: [{ index: 0, message: { role: 'assistant', content: 'four words of answer' }, finish_reason: 'stop' }] };
              return { kind: 'json', status: 200, body, usage: USAGE[request.model] };
            },
          },
        };
      },
    });
  },
};
`;

describe("a provider plugin's usage given beside its answer (its `usage`, in the gateway's shape)", function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let dir: string;
  let openai: OpenAI;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sy-provider-usage-'));
    writeFileSync(path.join(dir, 'metered.mjs'), PLUGIN);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: c, key: ${CLIENT_KEY} }]
plugins: [request-log, auth, validation, routing, metering, openai-chat, anthropic-messages, ${JSON.stringify(path.join(dir, 'metered.mjs'))}]
providers:
  - { id: m, type: metered, models: [good, broken-nan, broken-negative, broken-huge, broken-text, broken-seconds] }
pricing:
  good: { input: 1, output: 2, cachedInput: 0.5 }
  broken-nan: { input: 1, output: 2 }
  broken-negative: { input: 1, output: 2 }
  broken-huge: { input: 1, output: 2 }
  broken-text: { input: 1, output: 2 }
  broken-seconds: { input: 1, output: 2, perSecond: 1 }
`);
    openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is what the client sees in its answer (an OpenAI and a Claude client), as charged', async () => {
    const { data: completion, response } = await openai.chat.completions.create({ model: 'good', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(completion.usage).to.deep.include({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    expect(completion.usage!.prompt_tokens_details).to.deep.equal({ cached_tokens: 4, cache_creation_tokens: 2 });
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ source: 'provider', promptTokens: 11, completionTokens: 7, cachedTokens: 4 });
    // (5 input and 2 written to the cache at 1, 4 cached at 0.5, 7 output at 2) per million
    expect(row.cost).to.be.closeTo(23e-6, 1e-12);
    const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const message = await claude.messages.create({ model: 'good', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    // Anthropic's input_tokens leave out the tokens read from the cache.
    expect(message.usage).to.include({ input_tokens: 5, cache_read_input_tokens: 4, cache_creation_input_tokens: 2, output_tokens: 7 });
    expect(message.usage.server_tool_use).to.deep.include({ web_search_requests: 1 });
  });

  it('whose figures are not figures (NaN, negative, 1e308, text, Infinity seconds) is not believed: the call is charged the gateway\'s count, and the calls written with it keep their rows', async () => {
    const models = ['broken-nan', 'broken-negative', 'broken-huge', 'broken-text', 'broken-seconds'];
    // Good calls in flight with the broken ones: their rows go to the store in the same batch.
    const calls = [...models, ...Array.from({ length: 8 }, () => 'good')].map((model) =>
      openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'count these words please' }] }).withResponse(),
    );
    const answers = await Promise.all(calls);
    for (const [i, { data, response }] of answers.entries()) {
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect(Number.isFinite(row.cost), `${data.model}: ${row.cost}`).to.equal(true);
      if (i >= models.length) {
        expect(row).to.include({ source: 'provider', promptTokens: 11, completionTokens: 7 });
        continue;
      }
      // The gateway's count of the prompt and the answer ("four words of answer"), as the client sees it.
      expect(row.source, data.model).to.equal('estimated');
      expect(row.promptTokens, data.model).to.be.within(5, 30);
      expect(row.completionTokens, data.model).to.equal(4);
      expect(row.seconds, data.model).to.equal(null);
      expect(data.usage, data.model).to.include({ prompt_tokens: row.promptTokens, completion_tokens: 4 });
    }
    const totals = await gw.gateway.stores.usage.totals({ groupBy: ['model'] });
    expect(totals.map((t) => t.model).sort()).to.deep.equal([...models, 'good'].sort());
    for (const t of totals) expect(Number.isFinite(t.cost) && t.cost >= 0 && t.promptTokens >= 0, t.model).to.equal(true);
  });
});
