import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { extraAnswers, installOpenAIExtras } from './fakes/openai-extra.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { usageRow } from './support/rows.js';
import { MODERATION_CATEGORIES } from '../plugins/providers/mock/moderations.js';

const KEY = 'sk-moderations-key-000001';

type ApiError = InstanceType<typeof OpenAI.APIError>;

const post = (url: string, body: unknown, key = KEY) => postJson(url, '/v1/moderations', body, key);

/** Every constraint of the request, one bad value each: [what, body, param, code]. */
const VALIDATION: Array<[string, Record<string, unknown>, string, string]> = [
  ['no input', { model: 'omni-moderation-latest' }, 'input', 'missing_required_parameter'],
  ['an input that is a number', { input: 5 }, 'input', 'invalid_type'],
  ['an input that is null', { input: null }, 'input', 'invalid_type'],
  ['an input that is an object', { input: { text: 'x' } }, 'input', 'invalid_type'],
  ['an empty input array', { input: [] }, 'input', 'invalid_value'],
  ['a number among the inputs', { input: ['ok', 3] }, 'input[1]', 'invalid_type'],
  ['a multimodal object (not in the spec)', { input: [{ type: 'text', text: 'x' }] }, 'input[0]', 'invalid_type'],
  ['a model that is not a string', { input: 'x', model: 7 }, 'model', 'invalid_type'],
  ['an empty model', { input: 'x', model: '' }, 'model', 'invalid_value'],
];

describe('moderations against the mock provider (official openai client)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: moderator, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat, omni-moderation-latest, text-moderation-stable] }
pricing:
  omni-moderation-latest: { perRequest: 0.0005 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it('uses the default model when none is named, and flags a text with a listed word', async () => {
    const result = await client.moderations.create({ input: 'I will kill the process' });
    expect(result.id).to.match(/^modr-/);
    expect(result.model).to.equal('omni-moderation-latest');
    expect(result.results).to.have.length(1);
    const [only] = result.results;
    expect(only!.flagged).to.equal(true);
    expect(only!.categories.violence).to.equal(true);
    expect(only!.categories.hate).to.equal(false);
    expect(only!.category_scores.violence).to.be.above(0.9);
    expect(only!.category_scores.hate).to.be.below(0.01);
    // Every category OpenAI reports, in all three maps.
    for (const map of [only!.categories, only!.category_scores, only!.category_applied_input_types]) {
      expect(Object.keys(map).sort()).to.deep.equal([...MODERATION_CATEGORIES].sort());
    }
  });

  it('answers one result per input, in order, deterministically', async () => {
    const result = await client.moderations.create({ model: 'text-moderation-stable', input: ['a kind word', 'you idiot', 'build a bomb'] });
    expect(result.model).to.equal('text-moderation-stable');
    expect(result.results.map((r) => r.flagged)).to.deep.equal([false, true, true]);
    expect(result.results[1]!.categories.harassment).to.equal(true);
    expect(result.results[2]!.categories['illicit/violent']).to.equal(true);
    const again = await client.moderations.create({ model: 'text-moderation-stable', input: ['a kind word', 'you idiot', 'build a bomb'] });
    expect(again.results).to.deep.equal(result.results);
  });

  it('records the call priced per request', async () => {
    const { response } = await client.moderations.create({ input: 'nothing to see' }).withResponse();
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.0005, 1e-12);
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'moderation', model: 'omni-moderation-latest', provider: 'mock', keyName: 'moderator', status: 200 });
    expect(row.cost).to.be.closeTo(0.0005, 1e-12);
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const error = (await client.moderations.create({ model: 'no-such-model', input: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.NotFoundError);
    expect(error.param).to.equal('model');
  });

  describe('validation: 400 in the OpenAI shape, with the param named', () => {
    for (const [what, body, param, code] of VALIDATION) {
      it(`${what} -> ${param}`, async () => {
        const res = await post(gw.url, body);
        expect(res.status, res.text).to.equal(400);
        const error = (JSON.parse(res.text) as { error: Record<string, unknown> }).error;
        expect(error, res.text).to.include({ type: 'invalid_request_error', param, code });
      });
    }
  });
});

describe('moderations with a configured default model (openai-chat option moderationModel)', () => {
  let gw: RunningGateway;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, routing, metering, { name: openai-chat, options: { moderationModel: house-moderation } }]
auth:
  keys: [{ name: moderator, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
models:
  - name: house-moderation
    targets: [{ provider: mock, model: mock-moderation-v2 }]
`);
  });
  after(async () => gw?.stop());

  it('routes a body without a model to the configured one', async () => {
    const res = await post(gw.url, { input: 'hello' });
    expect(res.status, res.text).to.equal(200);
    expect(JSON.parse(res.text).model).to.equal('mock-moderation-v2');
  });
});

describe('moderations in front of an OpenAI-compatible upstream (official openai client)', () => {
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    installOpenAIExtras(upstream);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
auth:
  keys: [{ name: upstreamer, key: ${KEY} }]
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [omni-moderation-latest, tokens-moderation]
  - id: wrongkey
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: sk-this-is-the-wrong-provider-key
    models: [bad-creds]
pricing:
  omni-moderation-latest: { perRequest: 0.001 }
  tokens-moderation: { input: 100, perRequest: 0.001 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    upstream.reset();
    installOpenAIExtras(upstream);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('sends the default model up with the key, and relays the answer byte for byte', async () => {
    const res = await post(gw.url, { input: ['fine', 'kill it'] });
    expect(res.status).to.equal(200);
    const got = upstream.last();
    expect(got.url).to.equal('/v1/moderations');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(got.body).to.deep.equal({ input: ['fine', 'kill it'], model: 'omni-moderation-latest' });
    expect(extraAnswers.last).to.include('\n  ');
    expect(res.text).to.equal(extraAnswers.last);

    const result = await client.moderations.create({ input: 'kill' });
    expect(result.results[0]!.flagged).to.equal(true);
    expect(result.results[0]!.categories.violence).to.equal(true);
  });

  it('prices a call per request, and by input tokens too when the upstream reports usage', async () => {
    const plain = await client.moderations.create({ input: 'x' }).withResponse();
    const row = await usageRow(gw, plain.response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'moderation', provider: 'up', status: 200 });
    expect(row.cost).to.be.closeTo(0.001, 1e-12);

    upstream.handle('POST /v1/moderations', (_req, res, body) =>
      json(res, 200, { id: 'modr-1', model: body!.model, results: [{ flagged: false, categories: {}, category_scores: {} }], usage: { prompt_tokens: 40, total_tokens: 40 } }),
    );
    const counted = await client.moderations.create({ model: 'tokens-moderation', input: 'x' }).withResponse();
    const tokenRow = await usageRow(gw, counted.response.headers.get('x-request-id')!);
    expect(tokenRow).to.include({ promptTokens: 40, completionTokens: 0, source: 'provider' });
    // 40 tokens at 100 per million, plus the request fee
    expect(tokenRow.cost).to.be.closeTo(0.001 + 0.004, 1e-12);
  });

  it('refuses an answer with the wrong number of results, or not a moderation, with 502', async () => {
    upstream.handle('POST /v1/moderations', (_req, res) => json(res, 200, { id: 'modr-1', model: 'm', results: [{ flagged: false }] }));
    const short = (await client.moderations.create({ input: ['a', 'b'] }).catch((e: unknown) => e)) as ApiError;
    expect(short.status).to.equal(502);
    expect(short.message).to.include('1 result(s) for 2 input(s)');
    upstream.handle('POST /v1/moderations', (_req, res) => json(res, 200, { results: 'none' }));
    const broken = (await client.moderations.create({ input: 'a' }).catch((e: unknown) => e)) as ApiError;
    expect(broken.status).to.equal(502);
    expect(broken.code).to.equal('upstream_error');
  });

  it('never shows a client the provider key when the upstream refuses it', async () => {
    const error = (await client.moderations.create({ model: 'bad-creds', input: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(upstream.last().url).to.equal('/v1/moderations');
    expect(error.status).to.equal(502);
    expect(JSON.stringify(error.error)).to.not.include('sk-this');
    expect(gw.logText()).to.not.include('sk-this-is-the-wrong-provider-key');
  });
});
