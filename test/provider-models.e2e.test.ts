import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { ConfigErrors } from '../config/validate.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

/**
 * A provider instance may serve model names of its own besides those its `providers:` entry
 * lists (a vendor whose model list it reads at start). Such a name is routed and listed, and it
 * can be priced: a budget then holds for it as for any other model.
 */
const PLUGIN = `
export default {
  name: 'lister',
  version: '1.0.0',
  apply(api) {
    api.registerProviderType({
      type: 'lister',
      create(config) {
        return {
          id: config.id,
          type: config.type,
          models: [...config.models, 'found-at-start'],
          operations: {
            async chat(request) {
              return {
                kind: 'json',
                status: 200,
                body: {
                  id: 'chatcmpl-lister',
                  object: 'chat.completion',
                  created: 1,
                  model: request.model,
                  choices: [{ index: 0, message: { role: 'assistant', content: 'found' }, finish_reason: 'stop' }],
                  usage: { prompt_tokens: 100000, completion_tokens: 50000, total_tokens: 150000 },
                },
              };
            },
          },
        };
      },
    });
  },
};
`;

describe('a model name a provider instance adds to those its entry lists', () => {
  let dir: string;
  let gw: RunningGateway;
  const config = (pricing: string) => `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, ${JSON.stringify(path.join(dir, 'lister.mjs'))}]
auth:
  keys:
    - { name: rich, key: sk-provider-models-rich-01, budget: 100 }
    - { name: poor, key: sk-provider-models-poor-01, budget: 0.01 }
providers:
  - { id: lister, type: lister, models: [listed] }
pricing:
${pricing}
`;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sy-lister-'));
    writeFileSync(path.join(dir, 'lister.mjs'), PLUGIN);
    gw = await startGateway(config('  found-at-start: { input: 1, output: 2 }'));
  });
  after(async () => {
    await gw?.stop();
  });

  it('can be priced: its calls are charged, and a key whose budget does not cover one is refused', async () => {
    const rich = new OpenAI({ apiKey: 'sk-provider-models-rich-01', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    expect((await rich.models.list()).data.map((m) => m.id)).to.include('found-at-start');
    const { data, response } = await rich.chat.completions.create({ model: 'found-at-start', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    expect(data.choices[0]!.message.content).to.equal('found');
    // 100,000 in at 1 and 50,000 out at 2 per million.
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.2, 1e-12);
    const poor = new OpenAI({ apiKey: 'sk-provider-models-poor-01', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const refused = (await poor.chat.completions.create({ model: 'found-at-start', max_tokens: 100000, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(refused).to.be.instanceOf(OpenAI.APIError);
    expect(refused.status).to.equal(429);
    expect(refused.code).to.equal('insufficient_quota');
  });

  it('a price for a name that neither the entries nor the instances serve is still refused at start, naming it', async () => {
    const error = await startGateway(config('  found-at-strat: { input: 1, output: 2 }')).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ConfigErrors);
    expect(String((error as Error).message)).to.include('pricing.found-at-strat').and.include("no provider serves a model 'found-at-strat'");
  });
});
