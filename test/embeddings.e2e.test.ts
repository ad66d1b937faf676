import { expect } from 'chai';
import OpenAI from 'openai';
import { fakeBase64, fakeVector, FakeOpenAI, json } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { usageRow } from './support/rows.js';
import { mockVector } from '../plugins/providers/mock/embeddings.js';
import { loadTokenizer } from '../plugins/metering/tokens.js';

const KEY = 'sk-embeddings-key-0000001';

type ApiError = InstanceType<typeof OpenAI.APIError>;

/** Little-endian float32s in base64, written here independently of the gateway's code. */
function base64Of(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}

function norm(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0));
}

const post = (url: string, path: string, body: unknown, key = KEY) => postJson(url, path, body, key);

describe('embeddings against the mock provider (official openai client)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: embedder, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat, mock-embedding] }
pricing:
  mock-embedding: { input: 1000 }
models:
  - name: embed
    targets: [{ provider: mock, model: mock-embedding }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it('answers float vectors: one unit vector of 1536 values, the model, and usage', async () => {
    const result = await client.embeddings.create({ model: 'mock-embedding', input: 'hello embedding world', encoding_format: 'float' });
    expect(result.object).to.equal('list');
    expect(result.model).to.equal('mock-embedding');
    expect(result.data).to.have.length(1);
    expect(result.data[0]).to.include({ object: 'embedding', index: 0 });
    const vector = result.data[0]!.embedding;
    expect(vector).to.have.length(1536);
    expect(norm(vector)).to.be.closeTo(1, 1e-5);
    expect(result.usage).to.deep.equal({ prompt_tokens: 3, total_tokens: 3 });
    // Deterministic: the same input gives the same vector, another input another one.
    const again = await client.embeddings.create({ model: 'mock-embedding', input: 'hello embedding world', encoding_format: 'float' });
    expect(again.data[0]!.embedding).to.deep.equal(vector);
    const other = await client.embeddings.create({ model: 'mock-embedding', input: 'something else', encoding_format: 'float' });
    expect(other.data[0]!.embedding).to.not.deep.equal(vector);
  });

  it("decodes the SDK's default base64 to the same vectors as float", async () => {
    const floats = await client.embeddings.create({ model: 'embed', input: 'base64 please', encoding_format: 'float' });
    const decoded = await client.embeddings.create({ model: 'embed', input: 'base64 please' });
    expect(decoded.data[0]!.embedding).to.have.length(1536);
    expect(decoded.data[0]!.embedding).to.deep.equal(floats.data[0]!.embedding);
    // On the wire it really is base64: little-endian float32s of the float answer.
    const raw = await post(gw.url, '/v1/embeddings', { model: 'embed', input: 'base64 please', encoding_format: 'base64' });
    expect(raw.status).to.equal(200);
    const wire = JSON.parse(raw.text) as { data: Array<{ embedding: unknown }> };
    expect(wire.data[0]!.embedding).to.be.a('string');
    expect(wire.data[0]!.embedding).to.equal(base64Of(floats.data[0]!.embedding));
  });

  it('honours dimensions: the first values of the full vector, normalised again', async () => {
    const full = (await client.embeddings.create({ model: 'embed', input: 'short vector', encoding_format: 'float' })).data[0]!.embedding;
    const short = (await client.embeddings.create({ model: 'embed', input: 'short vector', encoding_format: 'float', dimensions: 256 })).data[0]!.embedding;
    expect(short).to.have.length(256);
    expect(norm(short)).to.be.closeTo(1, 1e-5);
    const scale = norm(full.slice(0, 256));
    short.forEach((v, i) => expect(v).to.be.closeTo(full[i]! / scale, 1e-6));
    const viaBase64 = (await client.embeddings.create({ model: 'embed', input: 'short vector', dimensions: 256 })).data[0]!.embedding;
    expect(viaBase64).to.deep.equal(short);
  });

  it('gives one item per input, in order, with the right index, for strings and token ids', async () => {
    const inputs = ['alpha', 'beta gamma', 'delta epsilon zeta'];
    const result = await client.embeddings.create({ model: 'embed', input: inputs });
    expect(result.data.map((d) => d.index)).to.deep.equal([0, 1, 2]);
    for (const [i, input] of inputs.entries()) {
      const single = await client.embeddings.create({ model: 'embed', input, encoding_format: 'float' });
      expect(result.data[i]!.embedding, input).to.deep.equal(single.data[0]!.embedding);
    }
    expect(result.data[0]!.embedding).to.not.deep.equal(result.data[1]!.embedding);
    expect(result.usage).to.deep.equal({ prompt_tokens: 6, total_tokens: 6 });
    // The same vectors the mock computes for those inputs, independently of the wire.
    expect(result.data[2]!.embedding).to.deep.equal(mockVector('mock-embedding', 'delta epsilon zeta'));

    const tokens = await client.embeddings.create({ model: 'embed', input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
    expect(tokens.data.map((d) => d.index)).to.deep.equal([0, 1]);
    expect(tokens.usage.prompt_tokens).to.equal(5);
    const oneArray = await client.embeddings.create({ model: 'embed', input: [1, 2, 3], encoding_format: 'float' });
    expect(oneArray.data).to.have.length(1);
    expect(oneArray.data[0]!.embedding).to.deep.equal(tokens.data[0]!.embedding);
  });

  it('serves /v1/engines/{model}/embeddings with the model from the path', async () => {
    const viaEngine = await client.post<OpenAI.CreateEmbeddingResponse>('/engines/embed/embeddings', {
      body: { model: 'not-this-one', input: 'engine path', encoding_format: 'float' },
    });
    expect(viaEngine.model).to.equal('mock-embedding');
    const plain = await client.embeddings.create({ model: 'embed', input: 'engine path', encoding_format: 'float' });
    expect(viaEngine.data[0]!.embedding).to.deep.equal(plain.data[0]!.embedding);
    expect(viaEngine.usage).to.deep.equal(plain.usage);

    const unknown = await post(gw.url, '/v1/engines/no-such-engine/embeddings', { model: 'embed', input: 'x' });
    expect(unknown.status).to.equal(404);
    expect(JSON.parse(unknown.text)).to.deep.equal({
      error: { message: 'The model `no-such-engine` does not exist or you do not have access to it.', type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    });
    const missing = await post(gw.url, '/v1/engines/embed/embeddings', { model: 'embed' });
    expect(missing.status).to.equal(400);
    expect(JSON.parse(missing.text).error).to.include({ param: 'input', code: 'missing_required_parameter' });
  });

  it('records one usage row with the tokens and the cost from pricing', async () => {
    const { data, response } = await client.embeddings.create({ model: 'mock-embedding', input: ['one two', 'three four five'] }).withResponse();
    expect(data.usage.prompt_tokens).to.equal(5);
    const requestId = response.headers.get('x-request-id')!;
    // 5 tokens at 1000 per million
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.005, 1e-12);
    const row = await usageRow(gw, requestId);
    expect(row).to.include({ operation: 'embeddings', model: 'mock-embedding', upstreamModel: 'mock-embedding', provider: 'mock', keyName: 'embedder' });
    expect(row).to.include({ promptTokens: 5, completionTokens: 0, source: 'provider', status: 200 });
    expect(row.cost).to.be.closeTo(0.005, 1e-12);
    await eventually(() => gw.logs.some((l) => l.message === 'request' && l.requestId === requestId && l.path === '/v1/embeddings'), 3000, 'the access line');
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const error = (await client.embeddings.create({ model: 'no-such-model', input: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.NotFoundError);
    expect(error.code).to.equal('model_not_found');
    expect(error.param).to.equal('model');
  });

  it('refuses dimensions larger than the mock model has', async () => {
    const error = (await client.embeddings.create({ model: 'embed', input: 'x', dimensions: 4096 }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.param).to.equal('dimensions');
  });

  describe('validation: 400 in the OpenAI shape, with the param named', () => {
    const cases: Array<[string, Record<string, unknown>, string, string]> = [
      ['no input', { model: 'embed' }, 'input', 'missing_required_parameter'],
      ['no model', { input: 'x' }, 'model', 'missing_required_parameter'],
      ['a model that is not a string', { model: 7, input: 'x' }, 'model', 'invalid_type'],
      ['an empty model', { model: '', input: 'x' }, 'model', 'invalid_value'],
      ['an empty string input', { model: 'embed', input: '' }, 'input', 'invalid_value'],
      ['an empty array input', { model: 'embed', input: [] }, 'input', 'invalid_value'],
      ['an input that is a number', { model: 'embed', input: 5 }, 'input', 'invalid_type'],
      ['an input that is an object', { model: 'embed', input: { text: 'x' } }, 'input', 'invalid_type'],
      ['an input that is null', { model: 'embed', input: null }, 'input', 'invalid_type'],
      ['an object among the inputs', { model: 'embed', input: ['a', { text: 'b' }] }, 'input[1]', 'invalid_type'],
      ['an empty string among the inputs', { model: 'embed', input: ['a', ''] }, 'input[1]', 'invalid_value'],
      ['strings mixed with token ids', { model: 'embed', input: ['a', 3] }, 'input', 'invalid_request'],
      ['token arrays mixed with strings', { model: 'embed', input: [[1], 'a'] }, 'input', 'invalid_request'],
      ['an empty token array among the inputs', { model: 'embed', input: [[1], []] }, 'input[1]', 'invalid_value'],
      ['a negative token id', { model: 'embed', input: [1, -2] }, 'input[1]', 'invalid_value'],
      ['a fractional token id', { model: 'embed', input: [1, 2.5] }, 'input[1]', 'invalid_type'],
      ['a negative token id in a token array', { model: 'embed', input: [[1, -1]] }, 'input[0][1]', 'invalid_value'],
      ['more than 2048 inputs', { model: 'embed', input: Array.from({ length: 2049 }, () => 'x') }, 'input', 'invalid_value'],
      ['an unknown encoding_format', { model: 'embed', input: 'x', encoding_format: 'int8' }, 'encoding_format', 'invalid_value'],
      ['dimensions 0', { model: 'embed', input: 'x', dimensions: 0 }, 'dimensions', 'invalid_value'],
      ['fractional dimensions', { model: 'embed', input: 'x', dimensions: 1.5 }, 'dimensions', 'invalid_type'],
      ['dimensions as a string', { model: 'embed', input: 'x', dimensions: '8' }, 'dimensions', 'invalid_type'],
      ['a user that is not a string', { model: 'embed', input: 'x', user: 42 }, 'user', 'invalid_type'],
    ];
    for (const [what, body, param, code] of cases) {
      it(`${what} -> ${param}`, async () => {
        for (const path of ['/v1/embeddings', '/v1/engines/embed/embeddings']) {
          const res = await post(gw.url, path, body);
          expect(res.status, `${path}: ${res.text}`).to.equal(400);
          const error = (JSON.parse(res.text) as { error: Record<string, unknown> }).error;
          expect(error, path).to.include({ type: 'invalid_request_error', param, code });
          expect(error.message, path).to.be.a('string').and.to.include(param);
        }
      });
    }

    it('surfaces as a BadRequestError with the param in the SDK', async () => {
      const error = (await client.embeddings.create({ model: 'embed', input: 'x', dimensions: 0 }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('dimensions');
    });
  });
});

describe('embeddings in front of an OpenAI-compatible upstream (official openai client)', () => {
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
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
    models: [text-embedding-3-small]
  - id: wrongkey
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: sk-this-is-the-wrong-provider-key
    models: [bad-creds]
  - { id: mock, type: mock, models: [mock-embedding] }
pricing:
  text-embedding-3-small: { input: 20 }
models:
  - name: embed
    targets: [{ provider: up, model: text-embedding-3-small }]
  - name: embed-or-mock
    targets:
      - { provider: up, model: text-embedding-3-small, priority: 0 }
      - { provider: mock, model: mock-embedding, priority: 1 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it("sends the body up with the back end's model name and the provider's key, and relays the vectors", async () => {
    const result = await client.embeddings.create({ model: 'embed', input: 'hello upstream', encoding_format: 'float', user: 'u-1' });
    const got = upstream.last();
    expect(got.url).to.equal('/v1/embeddings');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(JSON.stringify(got.headers)).to.not.include(KEY);
    expect(got.body).to.deep.equal({ model: 'text-embedding-3-small', input: 'hello upstream', encoding_format: 'float', user: 'u-1' });
    expect(result.model).to.equal('text-embedding-3-small');
    expect(result.data[0]!.embedding).to.deep.equal(fakeVector('hello upstream'));
    expect(result.usage).to.deep.equal({ prompt_tokens: 2, total_tokens: 2 });
  });

  it("sends the client's own text up, byte for byte, when it names the back end's model", async () => {
    // Spacing and key order no serialiser would produce: only the client's own bytes have them.
    const text = '{ "input" : ["as sent", "é"],\n  "model":"text-embedding-3-small" ,"encoding_format":"float"}';
    const res = await fetch(`${gw.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: text,
    });
    expect(res.status).to.equal(200);
    expect(upstream.last().raw.toString('utf8')).to.equal(text);
    // Another name for it: the body is written again, with the back end's name.
    await post(gw.url, '/v1/embeddings', { input: 'aliased', model: 'embed', encoding_format: 'float' });
    expect(upstream.last().raw.toString('utf8')).to.equal('{"input":"aliased","model":"text-embedding-3-small","encoding_format":"float"}');
  });

  it("passes the SDK's default base64 up unchanged and the SDK decodes the upstream's vectors", async () => {
    const result = await client.embeddings.create({ model: 'embed', input: ['first one', 'second'], dimensions: 16 });
    const got = upstream.last();
    expect(got.body).to.deep.equal({ model: 'text-embedding-3-small', input: ['first one', 'second'], dimensions: 16, encoding_format: 'base64' });
    expect(JSON.parse(got.answer!).data[0].embedding).to.be.a('string');
    expect(result.data.map((d) => d.index)).to.deep.equal([0, 1]);
    expect(result.data[0]!.embedding).to.deep.equal(fakeVector('first one', 16));
    expect(result.data[1]!.embedding).to.deep.equal(fakeVector('second', 16));
  });

  it("gives the client the upstream's bytes exactly, float or base64", async () => {
    for (const encoding_format of ['float', 'base64']) {
      const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input: ['bytes', 'as sent'], encoding_format });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      const answer = upstream.last().answer!;
      expect(answer).to.include('\n  '); // the fake pretty-prints: re-serialising would lose it
      expect(res.text, encoding_format).to.equal(answer);
    }
  });

  it('serves /v1/engines/{model}/embeddings: the path picks the back end, whose name goes up', async () => {
    const result = await client.post<OpenAI.CreateEmbeddingResponse>('/engines/embed/embeddings', {
      body: { model: 'embed', input: [[5, 6, 7]], encoding_format: 'float' },
    });
    expect(upstream.last().url).to.equal('/v1/embeddings');
    expect(upstream.last().body).to.deep.equal({ model: 'text-embedding-3-small', input: [[5, 6, 7]], encoding_format: 'float' });
    expect(result.data[0]!.embedding).to.deep.equal(fakeVector([5, 6, 7]));
  });

  it('converts floats to base64 on the gateway when the upstream ignores encoding_format', async () => {
    upstream.handle('POST /v1/embeddings', (_req, res, body) => {
      const inputs = body!.input as string[];
      json(res, 200, {
        object: 'list',
        data: inputs.map((input, index) => ({ object: 'embedding', index, embedding: fakeVector(input) })),
        model: 'text-embedding-3-small',
        usage: { prompt_tokens: 2, total_tokens: 2 },
      });
    });
    const raw = await post(gw.url, '/v1/embeddings', { model: 'embed', input: ['floats only', 'here'], encoding_format: 'base64' });
    const wire = JSON.parse(raw.text) as { data: Array<{ embedding: unknown; index: number }>; usage: unknown };
    expect(wire.data.map((d) => d.embedding)).to.deep.equal([fakeBase64(fakeVector('floats only')), fakeBase64(fakeVector('here'))]);
    expect(wire.data.map((d) => d.index)).to.deep.equal([0, 1]);
    expect(wire.usage).to.deep.equal({ prompt_tokens: 2, total_tokens: 2 });
    const decoded = await client.embeddings.create({ model: 'embed', input: ['floats only', 'here'] });
    expect(decoded.data[1]!.embedding).to.deep.equal(fakeVector('here'));
  });

  it('converts base64 to floats when the upstream answers base64 to a float request', async () => {
    upstream.handle('POST /v1/embeddings', (_req, res) =>
      json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: fakeBase64(fakeVector('b')) }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }),
    );
    const result = await client.embeddings.create({ model: 'embed', input: 'b', encoding_format: 'float' });
    expect(result.data[0]!.embedding).to.deep.equal(fakeVector('b'));
  });

  it("records the upstream's usage with its cost", async () => {
    const { response } = await client.embeddings.create({ model: 'embed', input: 'one two three four' }).withResponse();
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'embeddings', model: 'embed', upstreamModel: 'text-embedding-3-small', provider: 'up' });
    expect(row).to.include({ promptTokens: 4, completionTokens: 0, source: 'provider' });
    // 4 tokens at 20 per million
    expect(row.cost).to.be.closeTo(0.00008, 1e-12);
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.00008, 1e-12);
  });

  it('a usage of a total alone (Voyage\'s shape): the client gets its prompt_tokens too, the count it is charged', async () => {
    upstream.handle('POST /v1/embeddings', (_req, res) =>
      json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5] }], model: 'm', usage: { total_tokens: 9 } }),
    );
    const { data, response } = await client.embeddings.create({ model: 'embed', input: 'a', encoding_format: 'float' }).withResponse();
    expect(data.usage).to.deep.equal({ prompt_tokens: 9, total_tokens: 9 });
    expect(await usageRow(gw, response.headers.get('x-request-id')!)).to.include({ source: 'provider', promptTokens: 9 });
  });

  it('estimates the input tokens when the upstream reports no usage, and gives the client that count as its usage', async () => {
    upstream.handle('POST /v1/embeddings', (_req, res) =>
      json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5] }], model: 'm' }),
    );
    const input = 'one two three four five six seven eight nine ten eleven twelve';
    const { data, response } = await client.embeddings.create({ model: 'embed', input, encoding_format: 'float' }).withResponse();
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row.source).to.equal('estimated');
    expect(row.promptTokens).to.be.at.least(12);
    expect(row.completionTokens).to.equal(0);
    expect(data.usage).to.deep.equal({ prompt_tokens: row.promptTokens, total_tokens: row.promptTokens });
    expect(data.data[0]!.embedding).to.deep.equal([0.5]);
  });

  it("estimates a list of inputs as the sum of each input's tokens: nothing added between them", async () => {
    const tokenizer = await loadTokenizer('cl100k_base');
    upstream.handle('POST /v1/embeddings', (_req, res, body) =>
      json(res, 200, { object: 'list', data: (body!.input as unknown[]).map((_, index) => ({ object: 'embedding', index, embedding: [0.5] })), model: 'm' }),
    );
    const inputs = ['alpha', 'beta gamma', 'delta', 'one two three four'];
    const { data, response } = await client.embeddings.create({ model: 'embed', input: inputs, encoding_format: 'float' }).withResponse();
    const expected = inputs.reduce((sum, text) => sum + tokenizer.count(text), 0);
    expect(data.usage).to.deep.equal({ prompt_tokens: expected, total_tokens: expected });
    expect(await usageRow(gw, response.headers.get('x-request-id')!)).to.include({ source: 'estimated', promptTokens: expected });
    // Token ids are a token each.
    const ids = await client.embeddings.create({ model: 'embed', input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
    expect(ids.usage).to.deep.equal({ prompt_tokens: 5, total_tokens: 5 });
  });

  describe('upstream errors, mapped as for chat', () => {
    it('keeps an upstream 400 message, scrubbed, as a 400 (a too-long input as context_length_exceeded, the field it names as param)', async () => {
      upstream.handle('POST /v1/embeddings', (_req, res) =>
        json(res, 400, { error: { message: `This model's maximum context length is 8192 tokens (key ${upstream.apiKey})`, type: 'invalid_request_error', param: 'input' } }),
      );
      const error = (await client.embeddings.create({ model: 'embed', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.code).to.equal('context_length_exceeded');
      expect(error.param).to.equal('input');
      expect(error.message).to.include('maximum context length');
      expect(error.message).to.not.include(upstream.apiKey);
    });

    it('turns an upstream 5xx into a 502 without its body or address', async () => {
      upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 500, { error: { message: `db at ${upstream.url} exploded`, type: 'server_error' } }));
      const error = (await client.embeddings.create({ model: 'embed', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.InternalServerError);
      expect(error.status).to.equal(502);
      expect(error.code).to.equal('upstream_error');
      expect(error.message).to.not.include('exploded');
      expect(error.message).to.not.include('127.0.0.1');
    });

    it('turns an upstream 429 into a 429', async () => {
      upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 429, { error: { message: 'slow down', type: 'rate_limit_error' } }));
      const error = (await client.embeddings.create({ model: 'embed', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.RateLimitError);
      expect(error.code).to.equal('upstream_rate_limited');
    });

    it('never shows a client the provider key when the upstream refuses it', async () => {
      const error = (await client.embeddings.create({ model: 'bad-creds', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(upstream.last().url).to.equal('/v1/embeddings');
      expect(error.status).to.equal(502);
      expect(JSON.stringify(error.error)).to.not.include('sk-this');
      expect(gw.logText()).to.not.include('sk-this-is-the-wrong-provider-key');
    });

    it('refuses an answer that is not an embedding list with a 502', async () => {
      upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 200, { object: 'list', data: 'nope' }));
      const error = (await client.embeddings.create({ model: 'embed', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(error.status).to.equal(502);
      expect(error.code).to.equal('upstream_error');
      upstream.handle('POST /v1/embeddings', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"object": "list", "data": [');
      });
      const cut = (await client.embeddings.create({ model: 'embed', input: 'x' }).catch((e: unknown) => e)) as ApiError;
      expect(cut.status).to.equal(502);
    });

    it('refuses vectors that are not finite numbers or whole float32 base64 with a 502, float or base64 asked', async () => {
      const answers: unknown[] = [[0.1, 'x', null], 'not-base64!!', 'AAAA', 'AACAPwAAwH8A'];
      for (const embedding of answers) {
        upstream.handle('POST /v1/embeddings', (_req, res) =>
          json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }),
        );
        for (const encoding_format of ['float', 'base64'] as const) {
          const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input: 'x', encoding_format });
          expect(res.status, `${JSON.stringify(embedding)} as ${encoding_format}`).to.equal(502);
          expect(JSON.parse(res.text).error.code).to.equal('upstream_error');
        }
      }
    });

    it('refuses base64 vectors holding NaN or an infinity as it refuses them as floats: 502, float or base64 asked, from the openai client too', async () => {
      const finite = [0.25, -1.5, 3];
      for (const bad of [NaN, Infinity, -Infinity]) {
        for (const as of ['floats', 'base64'] as const) {
          const vector = [...finite, bad];
          const embedding = as === 'floats' ? vector : base64Of(vector);
          // JSON has no NaN nor infinities: floats go up as an upstream writing them would write
          // them (1e999 parses as Infinity; NaN is no JSON at all).
          const floats = `[${vector.map((v) => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '1e999' : v === -Infinity ? '-1e999' : String(v))).join(',')}]`;
          upstream.handle('POST /v1/embeddings', (_req, res) => {
            const text = JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: 'VECTOR' }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } });
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(text.replace('"VECTOR"', as === 'floats' ? floats : JSON.stringify(embedding)));
          });
          for (const encoding_format of ['float', 'base64'] as const) {
            const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input: 'x', encoding_format });
            expect(res.status, `${bad} as ${as}, ${encoding_format} asked: ${res.text}`).to.equal(502);
            expect(JSON.parse(res.text).error.code).to.equal('upstream_error');
          }
          if (as === 'base64') {
            const error = (await client.embeddings.create({ model: 'embed', input: 'x', encoding_format: 'float' }).catch((e: unknown) => e)) as ApiError;
            expect(error.status, `${bad}`).to.equal(502);
          }
        }
      }
      // Finite base64 is relayed as it came.
      upstream.handle('POST /v1/embeddings', (_req, res) =>
        json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: base64Of([...finite, -0, 3.4e38]) }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }),
      );
      const ok = await client.embeddings.create({ model: 'embed', input: 'x', encoding_format: 'float' });
      expect(ok.data[0]!.embedding.slice(0, 3)).to.deep.equal(finite);
    });

    it('refuses a list whose items do not each carry a different index of an input with a 502, retryable (another target answers)', async () => {
      const item = (index: unknown, i: number) => ({ object: 'embedding', ...(index === undefined ? {} : { index }), embedding: [i, 0.5] });
      const lists: Array<[string, unknown[]]> = [
        ['a missing index', [undefined, 1]],
        ['no index at all', [undefined, undefined]],
        ['a duplicate index', [0, 0]],
        ['an index past the inputs', [0, 2]],
        ['an index that is not a whole number', [0, '1']],
      ];
      for (const [what, indexes] of lists) {
        upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 200, { object: 'list', data: indexes.map(item), model: 'm', usage: { prompt_tokens: 2, total_tokens: 2 } }));
        for (const encoding_format of ['float', 'base64'] as const) {
          const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input: ['a', 'b'], encoding_format });
          expect(res.status, `${what}, ${encoding_format}: ${res.text}`).to.equal(502);
          expect(JSON.parse(res.text).error.code).to.equal('upstream_error');
        }
        // Retryable: the next target of the alias answers.
        const fallback = await client.embeddings.create({ model: 'embed-or-mock', input: ['a', 'b'], encoding_format: 'float' });
        expect(fallback.model, what).to.equal('mock-embedding');
      }
      // Any order is an answer, given in the inputs' order as OpenAI gives it (code pairs vectors by position).
      upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 200, { object: 'list', data: [item(1, 1), item(0, 0)], model: 'm', usage: { prompt_tokens: 2, total_tokens: 2 } }));
      const reversed = await client.embeddings.create({ model: 'embed', input: ['a', 'b'], encoding_format: 'float' });
      expect(reversed.data.map((d) => [d.index, d.embedding[0]])).to.deep.equal([[0, 0], [1, 1]]);
      const inBase64 = await client.embeddings.create({ model: 'embed', input: ['a', 'b'] });
      expect(inBase64.data.map((d) => [d.index, d.embedding[0]])).to.deep.equal([[0, 0], [1, 1]]);
    });

    it('refuses a list with fewer or more vectors than inputs with a 502 (vectors are paired with inputs by position)', async () => {
      const vectors = (n: number) => Array.from({ length: n }, (_, index) => ({ object: 'embedding', index, embedding: [0.5, 0.5] }));
      for (const [input, n] of [[['a', 'b'], 1], ['a', 0], ['a', 2], [[1, 2, 3], 3], [[[1], [2]], 1]] as const) {
        upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 200, { object: 'list', data: vectors(n), model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }));
        const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input, encoding_format: 'float' });
        expect(res.status, `${n} vectors for ${JSON.stringify(input)}`).to.equal(502);
        expect(JSON.parse(res.text).error.message).to.include(`answered ${n} embedding(s)`);
      }
      // A token-id array is one input: one vector is right.
      upstream.handle('POST /v1/embeddings', (_req, res) => json(res, 200, { object: 'list', data: vectors(1), model: 'm', usage: { prompt_tokens: 3, total_tokens: 3 } }));
      expect((await post(gw.url, '/v1/embeddings', { model: 'embed', input: [1, 2, 3], encoding_format: 'float' })).status).to.equal(200);
    });

    it('sends nothing up for a body that fails validation', async () => {
      const res = await post(gw.url, '/v1/embeddings', { model: 'embed', input: [] });
      expect(res.status).to.equal(400);
      expect(upstream.received).to.have.length(0);
    });
  });
});
