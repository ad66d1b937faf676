import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-relayed-answer-000001';

/**
 * A non-streamed chat answer relayed in its own format: parsed and checked inside the attempt
 * (readRelayable in core/http/json.ts), its bytes sent as they came. These tests check, through
 * the front door, what a client, a tap and the ledger see, and that an answer that is not a chat
 * completion never reaches the client.
 */
describe('a chat answer relayed as the back end wrote it', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  const second = new FakeOpenAI('sk-second-upstream-relay-77');
  let gw: RunningGateway;
  let client: OpenAI;

  // A plugin whose afterUpstream tap reads, replaces, or changes in place the answer's body,
  // by the model asked for; what it read is kept on globalThis for the test to see.
  const pluginFile = (): string => {
    const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-relay-'));
    const core = new URL('../core/index.js', import.meta.url).href;
    const file = path.join(dir, 'body-tap.mjs');
    writeFileSync(
      file,
      `import { dropUpstreamBytes } from '${core}';
export default {
  name: 'body-tap',
  version: '1.0.0',
  apply(api) {
    api.hooks.afterUpstream.tap('body-tap', (response, ctx) => {
      if (response.kind !== 'json') return response;
      if (ctx.model === 'read') globalThis.__tapRead = response.body.choices[0].message.content;
      if (ctx.model === 'replace') {
        const body = response.body;
        return { ...response, body: { ...body, choices: [{ ...body.choices[0], message: { role: 'assistant', content: 'replaced' } }], usage: { prompt_tokens: 100, completion_tokens: 200, total_tokens: 300 } } };
      }
      if (ctx.model === 'in-place') {
        response.body.usage.completion_tokens = 70;
        response.body.usage.total_tokens = 81;
        dropUpstreamBytes(response.body);
      }
      return response;
    });
  },
};
`,
    );
    return file;
  };

  before(async () => {
    await upstream.start();
    await second.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat, anthropic-messages, ${pluginFile()}]
auth:
  keys: [{ name: relay, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [gpt-4o-mini] }
  - { id: up2, type: openai, baseUrl: ${second.url}/v1, apiKey: ${second.apiKey}, models: [gpt-4o-mini] }
pricing:
  gpt-4o-mini: { input: 1000000, output: 2000000 }
models:
  - { name: relay, targets: [{ provider: up, model: gpt-4o-mini }] }
  - { name: read, targets: [{ provider: up, model: gpt-4o-mini }] }
  - { name: replace, targets: [{ provider: up, model: gpt-4o-mini }] }
  - { name: in-place, targets: [{ provider: up, model: gpt-4o-mini }] }
  - name: failover
    targets:
      - { provider: up, model: gpt-4o-mini, priority: 0 }
      - { provider: up2, model: gpt-4o-mini, priority: 1 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    upstream.reset();
    second.reset();
    delete (globalThis as Record<string, unknown>).__tapRead;
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
    await second.stop();
  });

  /** The usage row of the call that answered with `requestId`. */
  const row = async (requestId: string) => {
    await gw.gateway.stores.flush();
    return (await gw.gateway.stores.usage.list({ limit: 1000 })).find((r) => r.requestId === requestId)!;
  };

  /** Answer chat calls with exactly these bytes. */
  const answerWith = (fake: FakeOpenAI, bytes: Buffer | string, type = 'application/json') =>
    fake.handle('POST /v1/chat/completions', (_req, res) => {
      res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(bytes) });
      res.end(bytes);
    });

  const post = (model: string) =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });

  it('meters the usage at the end of the answer, in every detail, and relays the bytes as they came', async () => {
    // Members after usage, spaces and a usage-looking string earlier on.
    const text =
      '{"id":"chatcmpl-r","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"say \\"usage\\":{\\"prompt_tokens\\":999}"},"finish_reason":"stop"}],\n' +
      ' "usage" : {"prompt_tokens":40,"completion_tokens":12,"total_tokens":52,"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":5}},\n "service_tier":"default","system_fingerprint":"fp_x"}';
    answerWith(upstream, text);
    const res = await post('relay');
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal(text);
    // 40 in at $1 a token, 12 out at $2 (cached input priced as input: no cached price set).
    expect(Number(res.headers.get('x-switchyard-cost'))).to.be.closeTo(64, 1e-9);
    const r = await row(res.headers.get('x-request-id')!);
    expect(r).to.deep.include({ source: 'provider', promptTokens: 40, completionTokens: 12, cachedTokens: 8, reasoningTokens: 5 });
  });

  it('a tap that reads the body gets it parsed, and the client still gets the bytes as they came', async () => {
    const completion = await client.chat.completions.create({ model: 'read', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    expect((globalThis as Record<string, unknown>).__tapRead).to.equal('upstream says: hello');
    expect(completion.data.choices[0]!.message.content).to.equal('upstream says: hello');
    const r = await row(completion.response.headers.get('x-request-id')!);
    expect(r).to.deep.include({ promptTokens: 11, completionTokens: 7 });
  });

  it('a tap that replaces the body, or changes it in place, is what the client gets and what is charged', async () => {
    const replaced = await client.chat.completions.create({ model: 'replace', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(replaced.data.choices[0]!.message.content).to.equal('replaced');
    expect(replaced.data.usage).to.deep.include({ prompt_tokens: 100, completion_tokens: 200 });
    expect(Number(replaced.response.headers.get('x-switchyard-cost'))).to.be.closeTo(500, 1e-9);
    expect(await row(replaced.response.headers.get('x-request-id')!)).to.deep.include({ promptTokens: 100, completionTokens: 200 });

    const changed = await client.chat.completions.create({ model: 'in-place', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(changed.data.choices[0]!.message.content).to.equal('upstream says: hi');
    expect(changed.data.usage).to.deep.include({ prompt_tokens: 11, completion_tokens: 70, total_tokens: 81 });
    expect(await row(changed.response.headers.get('x-request-id')!)).to.deep.include({ promptTokens: 11, completionTokens: 70 });
  });

  // What a Python server writes for a log-probability of minus infinity (json.dumps allows it).
  const notQuiteJson =
    '{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"token":"x","logprob":-Infinity}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}';

  it("relays an answer with Python's -Infinity in it as the back end wrote it, and meters it", async () => {
    answerWith(upstream, notQuiteJson);
    const res = await post('failover');
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal(notQuiteJson);
    expect(second.received).to.have.length(0);
    expect(await row(res.headers.get('x-request-id')!)).to.deep.include({ status: 200, promptTokens: 5, completionTokens: 5 });
    // A client of another format gets it translated.
    answerWith(upstream, notQuiteJson);
    const anthropic = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const message = await anthropic.messages.create({ model: 'failover', max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] });
    expect(message.content[0]).to.deep.include({ type: 'text', text: 'x' });
    expect(second.received).to.have.length(0);
  });

  it("relays a stream with Python's -Infinity in an event as the back end wrote it (the stream was cut there as malformed), and meters it", async () => {
    const chunk = (delta: string, logprob: string) =>
      `{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"${delta}"},"logprobs":{"content":[{"token":"${delta}","logprob":${logprob}}]},"finish_reason":null}]}`;
    const events = [chunk('A', '-0.1'), chunk('B', '-Infinity'), chunk('C', 'NaN'),
      '{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}',
      '{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}'];
    const body = events.map((e) => `data: ${e}\n\n`).join('') + 'data: [DONE]\n\n';
    answerWith(upstream, body, 'text/event-stream');
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'relay', stream: true, stream_options: { include_usage: true }, logprobs: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).to.equal(200);
    expect(await res.text()).to.equal(body);
    expect(await row(res.headers.get('x-request-id')!)).to.deep.include({ status: 200, promptTokens: 5, completionTokens: 3 });
  });

  it('an answer that is not JSON between its ends is refused, never relayed (it may hold anything, a key too), and the next back end tried', async () => {
    const leaky = `{"id":"x", <html>upstream debug: key=Bearer ${upstream.apiKey}</html> ,"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`;
    answerWith(upstream, leaky);
    const completion = await client.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'again' }] });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: again');
    expect(upstream.received).to.have.length(1);
    expect(second.received).to.have.length(1);
    // With no other back end: a 502 in the client's shape, nothing of the body.
    answerWith(upstream, leaky);
    const res = await post('relay');
    expect(res.status).to.equal(502);
    const text = await res.text();
    expect(text).to.not.include(upstream.apiKey);
    expect(text).to.not.include('upstream debug');
    expect(JSON.parse(text)).to.deep.include({ error: { message: 'The upstream service failed to answer: the back end answered with something that is not JSON', type: 'api_error', param: null, code: 'upstream_error' } });
  });

  it('a 200 that is JSON but not a chat completion (an error object, a list) is refused and fails over; nothing is charged for it', async () => {
    for (const body of [`{"error":{"message":"quota exceeded for ${upstream.apiKey}","type":"server_error"}}`, '[1,2,3]', '{"choices":[{"index":0}]}']) {
      upstream.received.length = 0;
      second.received.length = 0;
      answerWith(upstream, body);
      const completion = await client.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'once more' }] });
      expect(completion.choices[0]!.message.content).to.equal('upstream says: once more');
      expect(second.received).to.have.length(1);
      answerWith(upstream, body);
      const res = await post('relay');
      expect(res.status).to.equal(502);
      const error = (await res.json()) as { error: { message: string; code: string } };
      expect(error.error).to.deep.include({ code: 'upstream_error', message: 'The upstream service failed to answer: the back end did not answer with a chat completion' });
      expect(JSON.stringify(error)).to.not.include(upstream.apiKey);
      expect(await row(res.headers.get('x-request-id')!)).to.deep.include({ status: 502, promptTokens: null, cost: 0 });
    }
  });

  it('an answer that is not JSON at all is refused at once and the next back end tried', async () => {
    answerWith(upstream, '<html><body>"usage":{}</body></html>', 'text/html');
    const completion = await client.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'again' }] });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: again');
    expect(upstream.received).to.have.length(1);
    expect(second.received).to.have.length(1);
  });

  it('an answer whose usage is not where it can be read safely is parsed whole, as before', async () => {
    // An escaped member name after usage: it could spell "usage" another way.
    const text = '{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"us\\u0061ge":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}';
    answerWith(upstream, text);
    const res = await post('relay');
    expect(await res.text()).to.equal(text);
    // JSON.parse keeps the last member of a name: the escaped one.
    expect(await row(res.headers.get('x-request-id')!)).to.deep.include({ promptTokens: 3, completionTokens: 4 });
  });
});
