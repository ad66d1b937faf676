import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { FAKE_USAGE, FakeAnthropic, anthropicError, eventsOf, message, type FakeEvent } from './fakes/anthropic-upstream.js';
import { extraAnswers, fakeCompletionText, installOpenAIExtras } from './fakes/openai-extra.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { logRow, usageRow } from './support/rows.js';
import { loadTokenizer } from '../plugins/metering/tokens.js';

const KEY = 'sk-completions-key-000001';
const NARROW = 'sk-completions-narrow-0001';
const THRIFTY = 'sk-completions-thrifty-001';

type ApiError = InstanceType<typeof OpenAI.APIError>;

const post = (url: string, path: string, body: unknown, key = KEY) => postJson(url, path, body, key);

/** The data lines of an SSE text, parsed (`[DONE]` kept as the string). */
function events(text: string): unknown[] {
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => block.slice('data: '.length))
    .map((data) => (data === '[DONE]' ? data : (JSON.parse(data) as unknown)));
}

/** Every spec constraint of the request, one bad value each: [what, body, param, code]. */
const VALIDATION: Array<[string, Record<string, unknown>, string, string]> = [
  ['no model', { prompt: 'x' }, 'model', 'missing_required_parameter'],
  ['a model that is not a string', { model: 7, prompt: 'x' }, 'model', 'invalid_type'],
  ['an empty model', { model: '', prompt: 'x' }, 'model', 'invalid_value'],
  ['no prompt', { model: 'text' }, 'prompt', 'missing_required_parameter'],
  ['a prompt that is a number', { model: 'text', prompt: 5 }, 'prompt', 'invalid_type'],
  ['a prompt that is null', { model: 'text', prompt: null }, 'prompt', 'invalid_type'],
  ['a prompt that is an object', { model: 'text', prompt: { text: 'x' } }, 'prompt', 'invalid_type'],
  ['an empty prompt array', { model: 'text', prompt: [] }, 'prompt', 'invalid_value'],
  ['more than 2048 prompts', { model: 'text', prompt: Array.from({ length: 2049 }, () => 'x') }, 'prompt', 'invalid_value'],
  ['more than 2048 token arrays', { model: 'text', prompt: Array.from({ length: 2049 }, () => [1]) }, 'prompt', 'invalid_value'],
  ['an object among the prompts', { model: 'text', prompt: ['a', { text: 'b' }] }, 'prompt[1]', 'invalid_type'],
  ['strings mixed with token ids', { model: 'text', prompt: ['a', 3] }, 'prompt', 'invalid_request'],
  ['a negative token id', { model: 'text', prompt: [1, -2] }, 'prompt[1]', 'invalid_value'],
  ['a fractional token id', { model: 'text', prompt: [1, 2.5] }, 'prompt[1]', 'invalid_type'],
  ['an empty token array', { model: 'text', prompt: [[1], []] }, 'prompt[1]', 'invalid_value'],
  ['a negative id in a token array', { model: 'text', prompt: [[1, -1]] }, 'prompt[0][1]', 'invalid_value'],
  ['max_tokens below 0', { model: 'text', prompt: 'x', max_tokens: -1 }, 'max_tokens', 'invalid_value'],
  ['fractional max_tokens', { model: 'text', prompt: 'x', max_tokens: 1.5 }, 'max_tokens', 'invalid_type'],
  ['max_tokens as a string', { model: 'text', prompt: 'x', max_tokens: '10' }, 'max_tokens', 'invalid_type'],
  ['temperature above 2', { model: 'text', prompt: 'x', temperature: 2.5 }, 'temperature', 'invalid_value'],
  ['temperature below 0', { model: 'text', prompt: 'x', temperature: -0.1 }, 'temperature', 'invalid_value'],
  ['temperature as a string', { model: 'text', prompt: 'x', temperature: 'hot' }, 'temperature', 'invalid_type'],
  ['top_p above 1', { model: 'text', prompt: 'x', top_p: 1.5 }, 'top_p', 'invalid_value'],
  ['top_p below 0', { model: 'text', prompt: 'x', top_p: -1 }, 'top_p', 'invalid_value'],
  ['n of 0', { model: 'text', prompt: 'x', n: 0 }, 'n', 'invalid_value'],
  ['n above 128', { model: 'text', prompt: 'x', n: 129 }, 'n', 'invalid_value'],
  ['fractional n', { model: 'text', prompt: 'x', n: 1.5 }, 'n', 'invalid_type'],
  ['best_of above 20', { model: 'text', prompt: 'x', best_of: 21 }, 'best_of', 'invalid_value'],
  ['best_of below n', { model: 'text', prompt: 'x', n: 3, best_of: 2 }, 'best_of', 'invalid_value'],
  ['best_of above 1 on a stream', { model: 'text', prompt: 'x', stream: true, best_of: 2 }, 'best_of', 'invalid_request'],
  ['stream as a string', { model: 'text', prompt: 'x', stream: 'yes' }, 'stream', 'invalid_type'],
  ['stream_options without stream', { model: 'text', prompt: 'x', stream_options: { include_usage: true } }, 'stream_options', 'invalid_request'],
  ['stream_options.include_usage not a boolean', { model: 'text', prompt: 'x', stream: true, stream_options: { include_usage: 1 } }, 'stream_options.include_usage', 'invalid_type'],
  ['stop as a number', { model: 'text', prompt: 'x', stop: 5 }, 'stop', 'invalid_value'],
  ['more than 4 stop sequences', { model: 'text', prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'invalid_value'],
  ['a stop sequence that is not a string', { model: 'text', prompt: 'x', stop: ['a', 1] }, 'stop[1]', 'invalid_type'],
  ['suffix as a number', { model: 'text', prompt: 'x', suffix: 3 }, 'suffix', 'invalid_type'],
  ['echo as a string', { model: 'text', prompt: 'x', echo: 'true' }, 'echo', 'invalid_type'],
  ['logprobs above 5', { model: 'text', prompt: 'x', logprobs: 6 }, 'logprobs', 'invalid_value'],
  ['logprobs as a boolean', { model: 'text', prompt: 'x', logprobs: true }, 'logprobs', 'invalid_type'],
  ['a logit_bias above 100', { model: 'text', prompt: 'x', logit_bias: { '50256': 101 } }, 'logit_bias.50256', 'invalid_value'],
  ['a logit_bias key that is not a token id', { model: 'text', prompt: 'x', logit_bias: { word: 1 } }, 'logit_bias', 'invalid_value'],
  ['presence_penalty above 2', { model: 'text', prompt: 'x', presence_penalty: 2.5 }, 'presence_penalty', 'invalid_value'],
  ['frequency_penalty below -2', { model: 'text', prompt: 'x', frequency_penalty: -3 }, 'frequency_penalty', 'invalid_value'],
  ['fractional seed', { model: 'text', prompt: 'x', seed: 1.5 }, 'seed', 'invalid_type'],
  ['a user that is not a string', { model: 'text', prompt: 'x', user: 42 }, 'user', 'invalid_type'],
];

describe('completions against the mock provider, through the completion -> chat bridge (official openai client)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys:
    - { name: completer, key: ${KEY} }
    - { name: narrow, key: ${NARROW}, tpm: 200 }
    - { name: thrifty, key: ${THRIFTY}, budget: 0.1 }
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1000, output: 2000 }
models:
  - name: text
    targets: [{ provider: mock, model: mock-chat }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it("a completion without max_tokens reserves the API's own default of 16 tokens against a key's tpm and budget, not a chat call's thousands", async () => {
    // tpm 200: 16 tokens and the prompt fit; a chat call without max_tokens reserves 1,024 and is refused alone.
    const narrow = await post(gw.url, '/v1/completions', { model: 'text', prompt: 'Say hi' }, NARROW);
    expect(narrow.status, narrow.text).to.equal(200);
    const chat = await post(gw.url, '/v1/chat/completions', { model: 'text', messages: [{ role: 'user', content: 'Say hi' }] }, NARROW);
    expect(chat.status, chat.text).to.equal(429);
    // A budget of 0.1 at 0.002 an output token: 16 tokens (0.032) fit, 4,096 (8.19) would not.
    const thrifty = await post(gw.url, '/v1/completions', { model: 'text', prompt: 'Say hi' }, THRIFTY);
    expect(thrifty.status, thrifty.text).to.equal(200);
    const long = await post(gw.url, '/v1/completions', { model: 'text', prompt: 'Say hi', max_tokens: 100 }, THRIFTY);
    expect(long.status, long.text).to.equal(429);
    expect(JSON.parse(long.text).error.message).to.match(/max_tokens/);
  });

  it('answers a text_completion: the chat answer as text, a cmpl- id, the finish reason and usage', async () => {
    const result = await client.completions.create({ model: 'text', prompt: 'hello there world' });
    expect(result.object).to.equal('text_completion');
    expect(result.id).to.match(/^cmpl-/);
    expect(result.model).to.equal('mock-chat');
    expect(result.created).to.be.a('number');
    expect(result.choices).to.deep.equal([{ text: 'hello there world', index: 0, logprobs: null, finish_reason: 'stop' }]);
    // the mock counts 3 words + 3 for the one user message; 3 words out
    expect(result.usage).to.deep.equal({ prompt_tokens: 6, completion_tokens: 3, total_tokens: 9 });
  });

  it('echo puts the prompt before the answer', async () => {
    const result = await client.completions.create({ model: 'text', prompt: 'say this', echo: true });
    expect(result.choices[0]!.text).to.equal('say thissay this');
  });

  it('defaults max_tokens to 16 as the completion API does, and honours a smaller one', async () => {
    const prompt = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
    const long = await client.completions.create({ model: 'text', prompt });
    expect(long.choices[0]!.text.split(' ')).to.have.length(16);
    expect(long.choices[0]!.finish_reason).to.equal('length');
    const short = await client.completions.create({ model: 'text', prompt, max_tokens: 2 });
    expect(short.choices[0]!.text).to.equal('w0 w1');
    expect(short.choices[0]!.finish_reason).to.equal('length');
    expect(short.usage!.completion_tokens).to.equal(2);
  });

  it('carries stop sequences', async () => {
    const result = await client.completions.create({ model: 'text', prompt: 'one two three four', stop: [' three'] });
    expect(result.choices[0]).to.include({ text: 'one two', finish_reason: 'stop' });
  });

  it('answers n choices for each prompt of an array, numbered prompt * n + choice, with the usage summed', async () => {
    const result = await client.completions.create({ model: 'text', prompt: ['alpha beta', 'gamma delta epsilon'], n: 2 });
    expect(result.choices.map((c) => [c.index, c.text])).to.deep.equal([
      [0, 'alpha beta'],
      [1, 'alpha beta'],
      [2, 'gamma delta epsilon'],
      [3, 'gamma delta epsilon'],
    ]);
    // (2 + 3) + (3 + 3) prompt tokens; 2 * 2 + 3 * 2 completion tokens
    expect(result.usage).to.deep.equal({ prompt_tokens: 11, completion_tokens: 10, total_tokens: 21 });
  });

  it('streams text_completion chunks and [DONE]; no usage unless include_usage asks', async () => {
    const stream = await client.completions.create({ model: 'text', prompt: 'stream these words', stream: true });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === 'text_completion' && c.id === chunks[0]!.id)).to.equal(true);
    expect(chunks[0]!.id).to.match(/^cmpl-/);
    expect(chunks.map((c) => c.choices[0]?.text ?? '').join('')).to.equal('stream these words');
    expect(chunks[chunks.length - 1]!.choices[0]!.finish_reason).to.equal('stop');
    expect(chunks.some((c) => 'usage' in c)).to.equal(false);

    const raw = await post(gw.url, '/v1/completions', { model: 'text', prompt: 'stream these words', stream: true });
    expect(raw.headers.get('content-type')).to.match(/^text\/event-stream/);
    const all = events(raw.text);
    expect(all[all.length - 1]).to.equal('[DONE]');
  });

  it('streams a usage chunk last with stream_options.include_usage, usage: null before it', async () => {
    const stream = await client.completions.create({ model: 'text', prompt: 'count me in', stream: true, stream_options: { include_usage: true } });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).to.deep.equal([]);
    expect(last.usage).to.deep.equal({ prompt_tokens: 6, completion_tokens: 3, total_tokens: 9 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).to.equal(true);
  });

  it('streams the echoed prompt first, and every prompt of an array in turn', async () => {
    const stream = await client.completions.create({ model: 'text', prompt: ['first one', 'then two'], echo: true, stream: true, stream_options: { include_usage: true } });
    const texts = new Map<number, string>();
    const finishes = new Map<number, string | null>();
    let usage: OpenAI.CompletionUsage | undefined | null;
    let firstText: string | undefined;
    for await (const chunk of stream) {
      // One entry per choice index in a chunk, as OpenAI streams them: a client reading choices[0] misses nothing.
      const indexes = chunk.choices.map((c) => c.index);
      expect(new Set(indexes).size, JSON.stringify(chunk.choices)).to.equal(indexes.length);
      for (const choice of chunk.choices) {
        firstText ??= choice.text;
        texts.set(choice.index, (texts.get(choice.index) ?? '') + choice.text);
        if (choice.finish_reason) finishes.set(choice.index, choice.finish_reason);
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(firstText).to.equal('first one');
    expect([...texts.entries()]).to.deep.equal([
      [0, 'first onefirst one'],
      [1, 'then twothen two'],
    ]);
    expect([...finishes.values()]).to.deep.equal(['stop', 'stop']);
    expect(usage).to.deep.equal({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 });
  });

  it('names suffix as a loss (header and request log), since chat cannot insert', async () => {
    const { data, response } = await client.completions.create({ model: 'text', prompt: 'before', suffix: 'after' }).withResponse();
    expect(data.choices[0]!.text).to.equal('before');
    expect(response.headers.get('x-switchyard-losses')).to.equal('suffix');
    const row = await logRow(gw, response.headers.get('x-request-id')!);
    expect(row.losses).to.deep.equal(['suffix']);
    const streamed = await post(gw.url, '/v1/completions', { model: 'text', prompt: 'before', suffix: 'after', best_of: 1, stream: true });
    expect(streamed.headers.get('x-switchyard-losses')).to.equal('suffix');
    const clean = await client.completions.create({ model: 'text', prompt: 'before' }).withResponse();
    expect(clean.response.headers.get('x-switchyard-losses')).to.equal(null);
  });

  it('refuses token-id prompts and max_tokens 0, which a chat back end cannot take, on their param', async () => {
    for (const prompt of [[1, 2, 3], [[1, 2], [3]]]) {
      const error = (await client.completions.create({ model: 'text', prompt }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('prompt');
      expect(error.code).to.equal('upstream_bad_request');
      expect(error.message).to.include('token ids');
    }
    const error = (await client.completions.create({ model: 'text', prompt: 'x', max_tokens: 0 }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.param).to.equal('max_tokens');
  });

  it('records one usage row with tokens and cost, streamed or not', async () => {
    const { response } = await client.completions.create({ model: 'text', prompt: 'price this call' }).withResponse();
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'completion', model: 'text', upstreamModel: 'mock-chat', provider: 'mock', keyName: 'completer' });
    expect(row).to.include({ promptTokens: 6, completionTokens: 3, source: 'provider', status: 200 });
    // 6 * 1000 + 3 * 2000 per million
    expect(row.cost).to.be.closeTo(0.012, 1e-12);
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.012, 1e-12);

    const streamed = await client.completions.create({ model: 'text', prompt: 'price this stream too', stream: true }).withResponse();
    for await (const _ of streamed.data) void _;
    const streamRow = await usageRow(gw, streamed.response.headers.get('x-request-id')!);
    expect(streamRow).to.include({ operation: 'completion', promptTokens: 7, completionTokens: 4, source: 'provider' });
    expect(streamRow.cost).to.be.closeTo(0.015, 1e-12);
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const error = (await client.completions.create({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.NotFoundError);
    expect(error.param).to.equal('model');
  });

  describe('validation: 400 in the OpenAI shape, with the param named', () => {
    for (const [what, body, param, code] of VALIDATION) {
      it(`${what} -> ${param}`, async () => {
        const res = await post(gw.url, '/v1/completions', body);
        expect(res.status, res.text).to.equal(400);
        const error = (JSON.parse(res.text) as { error: Record<string, unknown> }).error;
        expect(error, res.text).to.include({ type: 'invalid_request_error', param, code });
      });
    }

    it('surfaces as a BadRequestError with the param in the SDK', async () => {
      const error = (await client.completions.create({ model: 'text', prompt: 'x', temperature: 3 }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('temperature');
    });
  });
});

describe('completions in front of an OpenAI-compatible upstream (official openai client)', () => {
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
    models: [gpt-3.5-turbo-instruct]
  - id: wrongkey
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: sk-this-is-the-wrong-provider-key
    models: [bad-creds]
  - id: chatonly
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    completionsApi: false
    models: [gpt-4o-mini]
pricing:
  gpt-3.5-turbo-instruct: { input: 1500, output: 2000 }
models:
  - name: instruct
    targets: [{ provider: up, model: gpt-3.5-turbo-instruct }]
  - name: chat-then-native
    targets: [{ provider: chatonly, model: gpt-4o-mini }, { provider: up, model: gpt-3.5-turbo-instruct, priority: 1 }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    upstream.reset();
    installOpenAIExtras(upstream);
  });

  it("what a chat target cannot be asked (token-id prompts) moves on to the model's next target, which serves completions natively", async () => {
    const res = await post(gw.url, '/v1/completions', { model: 'chat-then-native', prompt: [[1, 2, 3]], max_tokens: 5 });
    expect(res.status, res.text).to.equal(200);
    expect(upstream.received.map((r) => r.url)).to.deep.equal(['/v1/completions']);
    expect(upstream.last().body).to.deep.include({ model: 'gpt-3.5-turbo-instruct', prompt: [[1, 2, 3]] });
    // Alone, the chat target's refusal is the call's 400, nothing sent.
    upstream.reset();
    installOpenAIExtras(upstream);
    const alone = await post(gw.url, '/v1/completions', { model: 'gpt-4o-mini', prompt: [[1, 2, 3]], max_tokens: 5 });
    expect(alone.status, alone.text).to.equal(400);
    expect(upstream.received).to.have.length(0);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('a provider with completionsApi: false (a chat-only back end) serves /v1/completions through its chat completions', async () => {
    const result = await client.completions.create({ model: 'gpt-4o-mini', prompt: 'Say hi', max_tokens: 5 });
    expect(result.object).to.equal('text_completion');
    expect(upstream.received.map((r) => r.url)).to.deep.equal(['/v1/chat/completions']);
    expect(upstream.last().body).to.deep.include({ model: 'gpt-4o-mini', max_tokens: 5 });
    expect(upstream.last().body!.messages).to.deep.equal([{ role: 'user', content: 'Say hi' }]);
  });

  it("sends the body up natively (suffix, token ids and all) with the back end's model and key, and relays the bytes exactly", async () => {
    const res = await post(gw.url, '/v1/completions', { model: 'instruct', prompt: [[1, 2, 3]], suffix: 'end', echo: false, max_tokens: 5, user: 'u-1' });
    expect(res.status).to.equal(200);
    const got = upstream.last();
    expect(got.url).to.equal('/v1/completions');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(JSON.stringify(got.headers)).to.not.include(KEY);
    expect(got.body).to.deep.equal({ model: 'gpt-3.5-turbo-instruct', prompt: [[1, 2, 3]], suffix: 'end', echo: false, max_tokens: 5, user: 'u-1' });
    expect(extraAnswers.last).to.include('\n  '); // pretty-printed: re-serialising would lose it
    expect(res.text).to.equal(extraAnswers.last);
    expect(res.headers.get('x-switchyard-losses')).to.equal(null);

    const result = await client.completions.create({ model: 'instruct', prompt: 'native call', echo: true });
    expect(result.choices).to.deep.equal([{ text: `native call${fakeCompletionText('native call')}`, index: 0, logprobs: null, finish_reason: 'stop' }]);
    expect(result.model).to.equal('gpt-3.5-turbo-instruct');
  });

  it('streams: asks the upstream for usage always, relays its events as they are when the client asked for usage too', async () => {
    const res = await post(gw.url, '/v1/completions', { model: 'instruct', prompt: 'stream it', stream: true, stream_options: { include_usage: true } });
    expect(upstream.last().body).to.include({ stream: true });
    expect(upstream.last().body!.stream_options).to.deep.equal({ include_usage: true });
    // Same format in and out: the upstream's event text, event for event.
    expect(res.text.replace(/\r/g, '')).to.equal(extraAnswers.last);
  });

  it("hides the usage the gateway asked for from a client that did not ask, and the SDK reads the stream", async () => {
    const stream = await client.completions.create({ model: 'instruct', prompt: 'quiet usage', stream: true });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(upstream.last().body!.stream_options).to.deep.equal({ include_usage: true });
    expect(chunks.map((c) => c.choices[0]?.text ?? '').join('')).to.equal(fakeCompletionText('quiet usage'));
    expect(chunks.some((c) => 'usage' in c)).to.equal(false);
    expect(chunks.every((c) => c.choices.length > 0)).to.equal(true);
  });

  it("records the upstream's usage with its cost, streamed or not", async () => {
    const { data, response } = await client.completions.create({ model: 'instruct', prompt: 'one two three' }).withResponse();
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'completion', model: 'instruct', upstreamModel: 'gpt-3.5-turbo-instruct', provider: 'up', source: 'provider' });
    expect(row).to.include({ promptTokens: data.usage!.prompt_tokens, completionTokens: data.usage!.completion_tokens });
    const expected = (data.usage!.prompt_tokens * 1500 + data.usage!.completion_tokens * 2000) / 1e6;
    expect(row.cost).to.be.closeTo(expected, 1e-12);

    const streamed = await client.completions.create({ model: 'instruct', prompt: 'one two three', stream: true }).withResponse();
    for await (const _ of streamed.data) void _;
    const streamRow = await usageRow(gw, streamed.response.headers.get('x-request-id')!);
    expect(streamRow).to.include({ promptTokens: 3, completionTokens: data.usage!.completion_tokens, source: 'provider' });
  });

  it('caps an array of prompts at 2048 (nothing sent up past it), not the token ids of one tokenised prompt', async () => {
    const refused = await post(gw.url, '/v1/completions', { model: 'instruct', prompt: Array.from({ length: 2049 }, (_, i) => `p${i}`) });
    expect(refused.status, refused.text).to.equal(400);
    expect(JSON.parse(refused.text).error).to.include({ param: 'prompt', code: 'invalid_value' });
    expect(upstream.received).to.have.length(0);
    const most = await client.completions.create({ model: 'instruct', prompt: Array.from({ length: 2048 }, (_, i) => `p${i}`), max_tokens: 1 });
    expect(most.choices).to.have.length(2048);
    expect(upstream.received).to.have.length(1); // a native back end takes them in one call
    const long = await client.completions.create({ model: 'instruct', prompt: Array.from({ length: 5000 }, (_, i) => i % 1000), max_tokens: 1 });
    expect(long.choices).to.have.length(1);
  });

  it("estimates a usage the upstream left out as the prompts' own tokens: no chat framing, nothing between the prompts", async () => {
    const tokenizer = await loadTokenizer('cl100k_base');
    upstream.handle('POST /v1/completions', (_req, res, body) => {
      const prompts = body!.prompt as string[];
      json(res, 200, { id: 'cmpl-n', object: 'text_completion', created: 1, model: 'm', choices: prompts.map((_, index) => ({ text: ' fine', index, logprobs: null, finish_reason: 'stop' })) });
    });
    const prompts = ['Once upon a time', 'there was a gateway that counted tokens'];
    const { data, response } = await client.completions.create({ model: 'instruct', prompt: prompts }).withResponse();
    const expected = tokenizer.count(prompts[0]!) + tokenizer.count(prompts[1]!);
    expect(data.usage).to.include({ prompt_tokens: expected });
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ source: 'estimated', promptTokens: expected });
  });

  it('keeps an upstream 400 message as a 400 and never shows the provider key', async () => {
    upstream.handle('POST /v1/completions', (_req, res) =>
      json(res, 400, { error: { message: `prompt too long (key ${upstream.apiKey})`, type: 'invalid_request_error', param: 'prompt' } }),
    );
    const error = (await client.completions.create({ model: 'instruct', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.code).to.equal('upstream_bad_request');
    expect(error.message).to.include('prompt too long');
    expect(error.message).to.not.include(upstream.apiKey);

    const refused = (await client.completions.create({ model: 'bad-creds', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(upstream.last().url).to.equal('/v1/completions');
    expect(refused.status).to.equal(502);
    expect(JSON.stringify(refused.error)).to.not.include('sk-this');
  });

  it('refuses an answer that is not a text completion, and a stream cut before it finished, with 502', async () => {
    upstream.handle('POST /v1/completions', (_req, res) => json(res, 200, { object: 'text_completion', choices: 'nope' }));
    const error = (await client.completions.create({ model: 'instruct', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error.status).to.equal(502);
    expect(error.code).to.equal('upstream_error');

    upstream.handle('POST /v1/completions', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'm', choices: [{ text: 'half', index: 0, logprobs: null, finish_reason: null }] })}\n\n`);
    });
    const raw = await post(gw.url, '/v1/completions', { model: 'instruct', prompt: 'x', stream: true });
    const all = events(raw.text) as Array<{ error?: { code?: string }; choices?: unknown }>;
    expect(all[0]).to.have.property('choices');
    expect(all[all.length - 1]).to.have.nested.property('error.code', 'upstream_error');
  });
});

describe('completions through the bridge in front of an Anthropic back end (official openai client)', () => {
  const upstream = new FakeAnthropic();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: claude-completer, key: ${KEY} }]
providers:
  - id: claude
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [claude-fake-1]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('sends the prompt as one user message with max_tokens 16 and the stops, and answers a text_completion with the usage', async () => {
    const result = await client.completions.create({ model: 'claude-fake-1', prompt: 'Once upon a time', stop: ['END'], temperature: 0.5, echo: true });
    const sent = upstream.last().body!;
    expect(upstream.last().url).to.equal('/v1/messages');
    expect(sent.messages).to.deep.equal([{ role: 'user', content: 'Once upon a time' }]);
    expect(sent).to.include({ model: 'claude-fake-1', max_tokens: 16, temperature: 0.5 });
    expect(sent.stop_sequences).to.deep.equal(['END']);
    expect(result.object).to.equal('text_completion');
    expect(result.choices).to.deep.equal([{ text: 'Once upon a timeupstream says: Once upon a time', index: 0, logprobs: null, finish_reason: 'stop' }]);
    expect(result.usage).to.include({ prompt_tokens: 18, completion_tokens: 7 });
  });

  it('fans an array of prompts out at most 8 at a time, and the first failure stops the rest and aborts those in flight', async () => {
    let inFlight = 0;
    let most = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let eight!: () => void;
    const eightIn = new Promise<void>((resolve) => (eight = resolve));
    upstream.script(async (body) => {
      const prompt = String((body.messages as Array<{ content: string }>)[0]!.content);
      inFlight++;
      most = Math.max(most, inFlight);
      if (inFlight === 8) eight();
      try {
        if (prompt === 'p3') {
          // Fails once the first eight are all in flight: the others are then held by the fake.
          await eightIn;
          return { status: 500, json: anthropicError('api_error', 'Internal server error') };
        }
        await held;
        return { json: message([{ type: 'text', text: 'ok' }]) };
      } finally {
        inFlight--;
      }
    });
    const prompts = Array.from({ length: 16 }, (_, i) => `p${i}`);
    const answer = await postJson(gw.url, '/v1/completions', { model: 'claude-fake-1', prompt: prompts }, KEY);
    expect(answer.status).to.be.at.least(500);
    expect(most).to.equal(8);
    expect(upstream.received.length).to.equal(8); // none started after the failure
    // The seven still waiting were aborted: their connections closed by the gateway.
    for (const deadline = Date.now() + 3000; upstream.received.filter((r) => r.aborted).length < 7 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10));
    expect(upstream.received.filter((r) => r.aborted)).to.have.length(7);
    release();
  });

  it("a back end's own refusal of a prompt too long, in a call of several prompts, is an attempt of that back end (logged with it), not a request refused unsent", async () => {
    upstream.script(() => ({ status: 400, json: anthropicError('invalid_request_error', 'prompt is too long: 300000 tokens > 200000 maximum') }));
    const answer = await postJson(gw.url, '/v1/completions', { model: 'claude-fake-1', prompt: ['p0', 'p1'] }, KEY);
    expect(answer.status).to.equal(400);
    expect(JSON.parse(answer.text).error.code).to.equal('context_length_exceeded');
    const row = await logRow(gw, answer.headers.get('x-request-id')!);
    expect(row.attempts).to.have.length(1);
    expect(row.provider).to.be.a('string').and.not.equal(null);
  });

  it("an empty prompt, which Anthropic takes no message for: a 400 on prompt, the field the client sent (not chat's messages), before any call, whole or streamed", async () => {
    for (const [prompt, stream] of [['', false], [['p0', ''], false], ['', true]] as const) {
      upstream.reset();
      const error = (await client.completions.create({ model: 'claude-fake-1', prompt: prompt as string, max_tokens: 1, stream }).catch((e: unknown) => e)) as ApiError;
      expect(error, JSON.stringify(prompt)).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('prompt');
      expect(error.message).to.include('empty prompt');
      expect(upstream.received.filter((r) => r.body?.messages?.[0]?.content === '')).to.have.length(0);
    }
  });

  it('fans one request out into at most 16 back-end calls: more prompts are a 400 on prompt, before any call', async () => {
    for (const stream of [false, true]) {
      upstream.reset();
      const error = (await client.completions
        .create({ model: 'claude-fake-1', prompt: Array.from({ length: 17 }, (_, i) => `p${i}`), max_tokens: 1, stream })
        .catch((e: unknown) => e)) as ApiError;
      expect(error, `stream: ${stream}`).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('prompt');
      expect(error.message).to.include('at most 16 prompts').and.to.include('has 17');
      expect(upstream.received, `stream: ${stream}`).to.have.length(0);
    }
    upstream.reset();
    const sixteen = await client.completions.create({ model: 'claude-fake-1', prompt: Array.from({ length: 16 }, (_, i) => `p${i}`), max_tokens: 1 });
    expect(sixteen.choices).to.have.length(16);
    expect(upstream.received).to.have.length(16);
  });

  describe('a client that leaves a streamed array of prompts is charged only the prompts its back end was sent', () => {
    const prompts = ['first prompt of three', 'the second prompt, a little longer than the first', 'third: '.repeat(400)];
    /** Stream each prompt's answer; the second's is held after its first text, its opening without usage when `reports` says so. */
    const scriptWith = (reports: (prompt: number) => boolean, hold: Promise<void>) =>
      upstream.script((body) => {
        const prompt = prompts.indexOf(String((body.messages as Array<{ content: string }>)[0]!.content));
        const events: FakeEvent[] = eventsOf(message([{ type: 'text', text: `answer ${prompt} in words` }], { model: body.model }));
        if (!reports(prompt)) {
          const start = events[0]![1] as { message: Record<string, unknown> };
          events[0] = ['message_start', { message: { ...start.message, usage: undefined } }];
        }
        // message_start, ping, content_block_start, the first text: then held.
        return prompt === 1 ? { events, holdAfter: 4, hold } : { events };
      });
    /** Read the stream until the second prompt's first text arrives, then leave; the usage row. */
    const leaveDuringSecond = async () => {
      const { data, response } = await client.completions
        .create({ model: 'claude-fake-1', prompt: prompts, stream: true, max_tokens: 50 })
        .withResponse();
      for await (const chunk of data) if (chunk.choices.some((c) => c.index === 1 && c.text)) break;
      return usageRow(gw, response.headers.get('x-request-id')!);
    };
    let release: () => void = () => undefined;
    afterEach(() => release());

    it('none reported (a back end that gives no usage before the end): the tokens of the prompts sent, counted', async () => {
      const tokenizer = await loadTokenizer('cl100k_base');
      scriptWith(() => false, new Promise<void>((resolve) => (release = resolve)));
      const row = await leaveDuringSecond();
      expect(upstream.received).to.have.length(2); // the third never went up
      expect(row).to.include({ source: 'estimated', endReason: 'client_gone' });
      expect(row.promptTokens).to.equal(tokenizer.count(prompts[0]!) + tokenizer.count(prompts[1]!));
    });

    it('some reported: those figures, and the others sent counted', async () => {
      const tokenizer = await loadTokenizer('cl100k_base');
      scriptWith((prompt) => prompt === 0, new Promise<void>((resolve) => (release = resolve)));
      const row = await leaveDuringSecond();
      expect(upstream.received).to.have.length(2);
      expect(row).to.include({ source: 'estimated', endReason: 'client_gone' });
      // The first as its back end reported it (11 input, 2 written to the cache, 5 read from it), the second counted.
      expect(row.promptTokens).to.equal(18 + tokenizer.count(prompts[1]!));
      expect(row.cachedTokens).to.equal(5);
    });

    /** The first prompt's answer: it thought (not text a completion delivers) and says its output was 40 tokens. */
    const thoughtFirst = () =>
      message(
        [
          { type: 'thinking', thinking: 'a long chain of thought the completion never shows', signature: 'sig-1' },
          { type: 'text', text: 'answer 0 in words' },
        ],
        { usage: { ...FAKE_USAGE, output_tokens: 40 } },
      );

    it('a finished prompt is charged as its back end reported it in full (its thinking too), and the one being answered counted', async () => {
      const tokenizer = await loadTokenizer('cl100k_base');
      let hold!: () => void;
      const held = new Promise<void>((resolve) => (hold = resolve));
      release = hold;
      upstream.script((body) => {
        const prompt = prompts.indexOf(String((body.messages as Array<{ content: string }>)[0]!.content));
        if (prompt === 0) return { events: eventsOf(thoughtFirst()) };
        const events = eventsOf(message([{ type: 'text', text: 'answer 1 in words' }]));
        events[0] = ['message_start', { message: { ...(events[0]![1] as { message: Record<string, unknown> }).message, usage: undefined } }];
        return { events, holdAfter: 4, hold: held };
      });
      const row = await leaveDuringSecond();
      expect(upstream.received).to.have.length(2);
      expect(row).to.include({ source: 'estimated', endReason: 'client_gone' });
      expect(row.promptTokens).to.equal(18 + tokenizer.count(prompts[1]!));
      expect(row.cachedTokens).to.equal(5);
      // 40 as reported for the first, not a count of its 4 words; the second's first word counted.
      expect(row.completionTokens).to.equal(40 + tokenizer.count('answer'));
    });

    it('a later prompt whose call fails: the stream ends in an error, the finished prompt charged as its back end reported it', async () => {
      upstream.script((body) => {
        const prompt = prompts.indexOf(String((body.messages as Array<{ content: string }>)[0]!.content));
        return prompt === 0 ? { events: eventsOf(thoughtFirst()) } : { status: 500, json: anthropicError('api_error', 'Internal server error') };
      });
      const { data, response } = await client.completions
        .create({ model: 'claude-fake-1', prompt: prompts, stream: true, max_tokens: 50 })
        .withResponse();
      let text = '';
      let finish: string | null = null;
      const error = await (async () => {
        for await (const chunk of data) for (const choice of chunk.choices) (text += choice.text), (finish = choice.finish_reason ?? finish);
      })().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(text).to.equal('answer 0 in words');
      expect(finish).to.equal('stop'); // the first prompt's finish reached the client before the failure
      expect(upstream.received).to.have.length(2);
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect(row).to.include({ source: 'estimated', promptTokens: 18, completionTokens: 40, cachedTokens: 5 });
    });
  });

  it('streams the translated answer as text_completion chunks with the usage last', async () => {
    const stream = await client.completions.create({ model: 'claude-fake-1', prompt: 'stream me', stream: true, stream_options: { include_usage: true } });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).to.equal('text_completion');
      for (const choice of chunk.choices) {
        text += choice.text;
        finish = choice.finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(upstream.last().body!.stream).to.equal(true);
    expect(text).to.equal('upstream says: stream me');
    expect(finish).to.equal('stop');
    expect(usage).to.include({ completion_tokens: 7 });
  });
});
