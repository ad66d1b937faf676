import { expect } from 'chai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { FakeCohere, fakeRelevance, installOpenAIExtras } from './fakes/openai-extra.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { usageRow } from './support/rows.js';
import { overlapScore } from '../plugins/providers/mock/rerank.js';

const KEY = 'sk-rerank-key-00000000001';
const TPM_KEY = 'sk-rerank-key-tpm-000001';

interface RerankReply {
  id: string;
  results: Array<{ index: number; relevance_score: number; document?: Record<string, unknown> }>;
  meta: Record<string, unknown>;
}

async function rerank(url: string, body: unknown, key = KEY): Promise<{ status: number; json: any; headers: Headers; text: string }> {
  const reply = await postJson(url, '/v1/rerank', body, key);
  return { ...reply, json: JSON.parse(reply.text) };
}

const DOCS = ['Paris is the capital of France', 'Berlin has many bridges', 'The capital of Germany is Berlin', 'Bananas are yellow'];

/** Every constraint of the request, one bad value each: [what, body, param, code]. */
const VALIDATION: Array<[string, Record<string, unknown>, string, string]> = [
  ['no model', { query: 'q', documents: ['a'] }, 'model', 'missing_required_parameter'],
  ['a model that is not a string', { model: 1, query: 'q', documents: ['a'] }, 'model', 'invalid_type'],
  ['an empty model', { model: '', query: 'q', documents: ['a'] }, 'model', 'invalid_value'],
  ['no query', { model: 'ranker', documents: ['a'] }, 'query', 'missing_required_parameter'],
  ['a query that is not a string', { model: 'ranker', query: ['q'], documents: ['a'] }, 'query', 'invalid_type'],
  ['an empty query', { model: 'ranker', query: '', documents: ['a'] }, 'query', 'invalid_value'],
  ['no documents', { model: 'ranker', query: 'q' }, 'documents', 'missing_required_parameter'],
  ['documents that are a string', { model: 'ranker', query: 'q', documents: 'a' }, 'documents', 'invalid_type'],
  ['an empty documents array', { model: 'ranker', query: 'q', documents: [] }, 'documents', 'invalid_value'],
  ['a number among the documents', { model: 'ranker', query: 'q', documents: ['a', 5] }, 'documents[1]', 'invalid_type'],
  ['an array among the documents', { model: 'ranker', query: 'q', documents: [['a']] }, 'documents[0]', 'invalid_type'],
  ['top_n of 0', { model: 'ranker', query: 'q', documents: ['a'], top_n: 0 }, 'top_n', 'invalid_value'],
  ['fractional top_n', { model: 'ranker', query: 'q', documents: ['a'], top_n: 1.5 }, 'top_n', 'invalid_type'],
  ['top_n as a string', { model: 'ranker', query: 'q', documents: ['a'], top_n: '2' }, 'top_n', 'invalid_type'],
  ['return_documents as a string', { model: 'ranker', query: 'q', documents: ['a'], return_documents: 'yes' }, 'return_documents', 'invalid_type'],
];

describe('rerank against the mock provider', () => {
  let gw: RunningGateway;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: ranker, key: ${KEY} }, { name: ranker-tpm, key: ${TPM_KEY}, tpm: 1000 }]
providers:
  - { id: mock, type: mock, models: [mock-chat, mock-rerank] }
pricing:
  mock-rerank: { input: 1000, perRequest: 0.002 }
models:
  - name: ranker
    targets: [{ provider: mock, model: mock-rerank }]
`);
  });
  after(async () => gw?.stop());

  it('scores every document by word overlap, highest first, without documents by default', async () => {
    const res = await rerank(gw.url, { model: 'ranker', query: 'capital of Germany', documents: DOCS });
    expect(res.status, res.text).to.equal(200);
    const reply = res.json as RerankReply;
    expect(reply.id).to.be.a('string').and.not.equal('');
    expect(reply.meta).to.be.an('object');
    expect(reply.results.map((r) => r.index)).to.deep.equal([2, 0, 1, 3]);
    expect(reply.results[0]!.relevance_score).to.equal(overlapScore('capital of Germany', DOCS[2]!));
    expect(reply.results[3]!.relevance_score).to.equal(0);
    expect(reply.results.every((r) => !('document' in r))).to.equal(true);
  });

  it('cuts to top_n and returns documents as objects when asked (strings as {text}, objects as sent)', async () => {
    const documents = [{ text: 'bananas and apples', id: 'fruit-1' }, 'apples only', 'nothing here'];
    const res = await rerank(gw.url, { model: 'ranker', query: 'apples', documents, top_n: 2, return_documents: true });
    const reply = res.json as RerankReply;
    expect(reply.results.map((r) => r.index)).to.deep.equal([1, 0]);
    expect(reply.results.map((r) => r.document)).to.deep.equal([{ text: 'apples only' }, { text: 'bananas and apples', id: 'fruit-1' }]);
  });

  it('records input tokens and the per-request fee', async () => {
    const res = await rerank(gw.url, { model: 'ranker', query: 'two words', documents: ['one', 'three more words'] });
    // (2 + 1) + (2 + 3) mock tokens
    expect(res.json.meta.tokens).to.deep.equal({ input_tokens: 8, output_tokens: 0 });
    const row = await usageRow(gw, res.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'rerank', model: 'ranker', upstreamModel: 'mock-rerank', provider: 'mock', keyName: 'ranker' });
    expect(row).to.include({ promptTokens: 8, completionTokens: 0, source: 'provider', status: 200 });
    expect(row.cost).to.be.closeTo(0.002 + 0.008, 1e-12);
    expect(Number(res.headers.get('x-switchyard-cost'))).to.be.closeTo(0.01, 1e-12);
  });

  it("counts a rerank's query and documents against the key's tokens per minute before the call: one larger than the limit alone is refused, not answered", async () => {
    const documents = Array.from({ length: 50 }, (_, i) => `document ${i}: ${'word '.repeat(100)}`);
    const big = await rerank(gw.url, { model: 'ranker', query: 'which document', documents }, TPM_KEY);
    expect(big.status).to.equal(429);
    expect(big.json.error.message).to.include('fewer or shorter documents');
    expect(big.headers.get('x-should-retry')).to.equal('false');
    const small = await rerank(gw.url, { model: 'ranker', query: 'capital', documents: DOCS }, TPM_KEY);
    expect(small.status).to.equal(200);
    // Reserved before the call (about a token for four characters), settled to the tokens reported.
    const remaining = Number(small.headers.get('x-ratelimit-remaining-tokens'));
    const chars = 'capital'.length + DOCS.join('').length;
    expect(remaining).to.equal(1000 - Math.ceil(chars / 4));
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const res = await rerank(gw.url, { model: 'no-such-model', query: 'q', documents: ['a'] });
    expect(res.status).to.equal(404);
    expect(res.json.error).to.include({ param: 'model', code: 'model_not_found' });
  });

  describe('validation: 400 in the OpenAI shape, with the param named', () => {
    for (const [what, body, param, code] of VALIDATION) {
      it(`${what} -> ${param}`, async () => {
        const res = await rerank(gw.url, body);
        expect(res.status, res.text).to.equal(400);
        expect(res.json.error, res.text).to.include({ type: 'invalid_request_error', param, code });
      });
    }
  });
});

describe('rerank in front of a Jina-style OpenAI-compatible upstream and a Cohere-style one', () => {
  const upstream = new FakeOpenAI();
  const cohere = new FakeCohere();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    await cohere.start();
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
  - id: jina
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [jina-reranker-v2]
  - id: cohere1
    type: openai
    baseUrl: ${cohere.url}/v1
    apiKey: ${cohere.apiKey}
    models: [rerank-english-v3.0]
  - id: cohere2
    type: openai
    baseUrl: ${cohere.url}/v1
    apiKey: ${cohere.apiKey}
    rerankPath: /v2/rerank
    models: [rerank-v3.5]
  - id: cohere-wrongkey
    type: openai
    baseUrl: ${cohere.url}/v1
    apiKey: co-this-is-the-wrong-key
    models: [bad-creds]
pricing:
  jina-reranker-v2: { input: 20 }
  rerank-v3.5: { perRequest: 0.002 }
`);
  });
  afterEach(() => {
    upstream.reset();
    installOpenAIExtras(upstream);
    cohere.override = undefined;
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
    await cohere.stop();
  });

  it('Jina-style: POST {basePath}/rerank with the key and the body, results and documents mapped, tokens metered', async () => {
    const res = await rerank(gw.url, { model: 'jina-reranker-v2', query: 'capital Berlin', documents: DOCS, top_n: 2, return_documents: true });
    expect(res.status, res.text).to.equal(200);
    const got = upstream.last();
    expect(got.url).to.equal('/v1/rerank');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(got.body).to.deep.equal({ model: 'jina-reranker-v2', query: 'capital Berlin', documents: DOCS, top_n: 2, return_documents: true });
    const reply = res.json as RerankReply;
    expect(reply.results).to.deep.equal([
      { index: 2, relevance_score: fakeRelevance('capital Berlin', DOCS[2]!), document: { text: DOCS[2] } },
      // a tie with document 1 (one shared word each): the earlier document first
      { index: 0, relevance_score: fakeRelevance('capital Berlin', DOCS[0]!), document: { text: DOCS[0] } },
    ]);
    expect(reply.id).to.match(/^rerank-/);
    // 2 query words x 4 documents + 19 document words
    expect(reply.meta.tokens).to.deep.equal({ input_tokens: 27, output_tokens: 0 });
    const row = await usageRow(gw, res.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'rerank', provider: 'jina', promptTokens: 27, completionTokens: 0, source: 'provider' });
    expect(row.cost).to.be.closeTo((27 * 20) / 1e6, 1e-12);
  });

  it('Cohere v1: documents as {text}, meta and id kept', async () => {
    const res = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'Paris France', documents: DOCS, return_documents: true });
    expect(res.status, res.text).to.equal(200);
    expect(cohere.last().url).to.equal('/v1/rerank');
    expect(cohere.last().headers.authorization).to.equal(`Bearer ${cohere.apiKey}`);
    const reply = res.json as RerankReply;
    expect(reply.id).to.equal('co-rerank-0001');
    expect(reply.meta).to.deep.equal({ api_version: { version: '1' }, billed_units: { search_units: 1 } });
    expect(reply.results[0]).to.deep.equal({ index: 0, relevance_score: fakeRelevance('Paris France', DOCS[0]!), document: { text: DOCS[0] } });
    expect(reply.results.map((r) => r.index)).to.deep.equal([0, 1, 2, 3]);
  });

  it('Cohere v2 through rerankPath: the path from the origin; documents the back end left out filled from the request; search units priced per request', async () => {
    const res = await rerank(gw.url, { model: 'rerank-v3.5', query: 'Bananas', documents: DOCS, top_n: 1, return_documents: true });
    expect(res.status, res.text).to.equal(200);
    expect(cohere.last().url).to.equal('/v2/rerank');
    expect(cohere.last().body).to.deep.include({ model: 'rerank-v3.5', top_n: 1 });
    const reply = res.json as RerankReply;
    expect(reply.results).to.deep.equal([{ index: 3, relevance_score: fakeRelevance('Bananas', DOCS[3]!), document: { text: DOCS[3] } }]);
    expect(reply.meta).to.deep.equal({ api_version: { version: '2' }, billed_units: { search_units: 1 } });
    const row = await usageRow(gw, res.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'rerank', provider: 'cohere2', promptTokens: null, status: 200 });
    expect(row.cost).to.be.closeTo(0.002, 1e-12);
  });

  it('orders, cuts to top_n and drops documents when the back end ignored those fields', async () => {
    cohere.override = (res) =>
      json(res, 200, {
        id: 'x',
        results: [
          { index: 0, relevance_score: 0.1, document: 'zero' },
          { index: 1, relevance_score: 0.9, document: 'one' },
          { index: 2, relevance_score: 0.5, document: 'two' },
        ],
        meta: {},
      });
    const res = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['zero', 'one', 'two'], top_n: 2 });
    expect(res.json.results).to.deep.equal([
      { index: 1, relevance_score: 0.9 },
      { index: 2, relevance_score: 0.5 },
    ]);
    const withDocs = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['zero', 'one', 'two'], return_documents: true });
    expect(withDocs.json.results.map((r: { document: unknown }) => r.document)).to.deep.equal([{ text: 'one' }, { text: 'two' }, { text: 'zero' }]);
    // Object documents come back as sent, every field, though the back end gives their text alone.
    const objects = [{ text: 'zero', title: 'T0', id: 'doc-0' }, { text: 'one', title: 'T1', id: 'doc-1' }, { text: 'two' }];
    const asSent = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: objects, top_n: 2, return_documents: true });
    expect(asSent.json.results.map((r: { document: unknown }) => r.document)).to.deep.equal([objects[1], objects[2]]);
  });

  it('refuses results for documents that do not exist, without a score, or two for one document, with 502', async () => {
    cohere.override = (res) => json(res, 200, { id: 'x', results: [{ index: 7, relevance_score: 0.5 }], meta: {} });
    const missing = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['a'] });
    expect(missing.status).to.equal(502);
    expect(missing.json.error.code).to.equal('upstream_error');
    cohere.override = (res) => json(res, 200, { id: 'x', results: [{ index: 0, relevance_score: 'high' }] });
    const unscored = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['a'] });
    expect(unscored.status).to.equal(502);
    cohere.override = (res) => json(res, 200, { id: 'x', results: [{ index: 0, relevance_score: 0.9 }, { index: 0, relevance_score: 0.8 }], meta: {} });
    const twice = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['a', 'b'], return_documents: true });
    expect(twice.status).to.equal(502);
    expect(twice.json.error.code).to.equal('upstream_error');
  });

  it("keeps a Cohere 400 as a 400, and never shows the provider key when Cohere refuses it", async () => {
    cohere.override = (res) => json(res, 400, { message: 'invalid request: too many documents' });
    const refused = await rerank(gw.url, { model: 'rerank-english-v3.0', query: 'q', documents: ['a'] });
    expect(refused.status).to.equal(400);
    expect(refused.json.error.code).to.equal('upstream_bad_request');
    cohere.override = undefined;

    const res = await rerank(gw.url, { model: 'bad-creds', query: 'q', documents: ['a'] });
    expect(cohere.last().headers.authorization).to.equal('Bearer co-this-is-the-wrong-key');
    expect(res.status).to.equal(502);
    expect(res.text).to.not.include('co-this');
    expect(gw.logText()).to.not.include('co-this-is-the-wrong-key');
  });
});
