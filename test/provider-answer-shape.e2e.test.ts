import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { usageRows } from './support/rows.js';

/**
 * A third party's provider that answers a call with the wrong thing: a body that is not a chat
 * completion, a stream for a call asked for whole, an answer whole for a call asked to stream.
 * The attempt fails like a back end's bad answer: the next target answers, and alone it is a
 * 502 in the client's own shape, never the wrong thing relayed.
 */
const CLIENT_KEY = 'sk-answer-shape-client-01';
const PLUGIN = `
// The stream's iterator, with a return() that counts how often a reader let it go.
function chunks() {
  const items = [
    { id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: 'streamed' }, finish_reason: null }] },
    { id: 'x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
  ];
  const iterator = {
    next: async () => (items.length ? { done: false, value: items.shift() } : { done: true, value: undefined }),
    return: async () => {
      globalThis.__wrongStreamsLetGo = (globalThis.__wrongStreamsLetGo ?? 0) + 1;
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() { return iterator; },
  };
  return iterator;
}
export default {
  name: 'wrong',
  version: '1.0.0',
  apply(api) {
    // A tap that answers a call with a bare string instead of the answer.
    api.hooks.afterUpstream.tap('wrong', (response, ctx) => (ctx.model === 'replaced' ? { kind: 'json', status: 200, body: 'a string' } : undefined));
    api.registerProviderType({
      type: 'wrong',
      create(config) {
        return {
          id: config.id,
          type: config.type,
          models: config.models,
          operations: {
            async chat(request) {
              if (request.model === 'nonsense') return { kind: 'json', status: 200, body: { nonsense: true } };
              // Always a stream, or always whole, whatever was asked.
              if (request.model === 'streams') return { kind: 'stream', status: 200, chunks: chunks() };
              return { kind: 'json', status: 200, body: { id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'whole' }, finish_reason: 'stop' }] } };
            },
          },
        };
      },
    });
  },
};
`;

describe("a provider plugin's answer of the wrong shape", () => {
  let gw: RunningGateway;
  let openai: OpenAI;

  before(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sy-wrong-'));
    writeFileSync(path.join(dir, 'wrong.mjs'), PLUGIN);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: c, key: ${CLIENT_KEY} }]
plugins:
  - request-log
  - auth
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
  - ${JSON.stringify(path.join(dir, 'wrong.mjs'))}
providers:
  - { id: wrong, type: wrong, models: [nonsense, streams, whole, replaced] }
  - { id: mock, type: mock, models: [mock-chat] }
models:
  - name: nonsense-then-mock
    targets:
      - { provider: wrong, model: nonsense, priority: 0 }
      - { provider: mock, model: mock-chat, priority: 1 }
`);
    openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
  });

  it('a body that is not a chat completion fails the attempt: the next target answers, and alone it is a 502 for OpenAI and Anthropic clients', async () => {
    const answered = await openai.chat.completions.create({ model: 'nonsense-then-mock', messages: [{ role: 'user', content: 'hello' }] }).withResponse();
    expect(answered.data.model).to.equal('mock-chat');
    expect(answered.data.choices[0]!.message.content).to.be.a('string');
    const [row] = await usageRows(gw, answered.response.headers.get('x-request-id')!);
    expect(row).to.deep.include({ provider: 'mock' });

    const alone = (await openai.chat.completions.create({ model: 'nonsense', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(alone).to.be.instanceOf(OpenAI.APIError);
    expect(alone.status).to.equal(502);
    expect(alone.message).to.include('did not answer with a chat completion');
    const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const fromClaude = (await claude.messages.create({ model: 'nonsense', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(fromClaude).to.be.instanceOf(Anthropic.APIError);
    expect(fromClaude.status).to.equal(502);
  });

  it("an afterUpstream tap's answer of the wrong shape is a 500 in the client's own shape, logged, not relayed", async () => {
    const error = (await openai.chat.completions.create({ model: 'replaced', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect(error.status).to.equal(500);
    expect((error.error as { code?: string }).code).to.equal('internal_error');
    const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const fromClaude = (await claude.messages.create({ model: 'replaced', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(fromClaude).to.be.instanceOf(Anthropic.APIError);
    expect(fromClaude.status).to.equal(500);
    expect(gw.logs.filter((l) => l.message === 'an afterUpstream tap answered in the wrong shape')).to.have.length(2);
  });

  it('a stream for a call asked for whole, and an answer whole for a call asked to stream, are 502s, not a reply the client cannot read', async () => {
    const whole = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ model: 'streams', messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(whole.status).to.equal(502);
    expect(whole.headers.get('content-type')).to.include('application/json');
    expect(((await whole.json()) as { error: { message: string } }).error.message).to.include('streamed an answer it was asked for whole');
    // The stream nobody will read is let go (its connection released), not left open.
    expect((globalThis as { __wrongStreamsLetGo?: number }).__wrongStreamsLetGo).to.equal(1);

    const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ model: 'whole', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(streamed.status).to.equal(502);
    expect(((await streamed.json()) as { error: { message: string } }).error.message).to.include('answered whole a call it was asked to stream');

    // Asked as it answers, each is served.
    const ok = await openai.chat.completions.create({ model: 'whole', messages: [{ role: 'user', content: 'x' }] });
    expect(ok.choices[0]!.message.content).to.equal('whole');
    let text = '';
    for await (const chunk of await openai.chat.completions.create({ model: 'streams', stream: true, messages: [{ role: 'user', content: 'x' }] })) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).to.equal('streamed');
  });
});
