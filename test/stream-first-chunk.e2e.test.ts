import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, sse } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-first-chunk-key-0001';

/** One chat completion chunk's data line, as OpenAI writes it. */
function line(delta: Record<string, unknown>, finish: string | null = null): string {
  return `data: ${JSON.stringify({ id: 'chatcmpl-f', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
}
const ROLE = line({ role: 'assistant', content: '', refusal: null });

/**
 * A streamed chat call to an OpenAI-compatible back end is the client's once its first chunk
 * arrived (the role chunk included), as the back end sent it: the client's first byte does not
 * wait for the back end's next chunk.
 */
describe('a stream from an OpenAI-compatible back end is the client\'s from its first chunk', function () {
  this.timeout(20_000);
  const first = new FakeOpenAI();
  const second = new FakeOpenAI();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await first.start();
    await second.start();
    // idleMs is under the second a stream may be read before it is the client's: a gateway that
    // held the role chunk until the next one would time the call out before the client saw a byte.
    // (A chat completions client gets the role chunk as an event; a Gemini client has none for it.)
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  # the failures these tests make on purpose must not take the first back end out of rotation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
  - gemini
auth:
  keys: [{ name: t, key: ${KEY} }]
providers:
  - { id: one, type: openai, baseUrl: ${first.url}/v1, apiKey: ${first.apiKey}, models: [m-one], timeouts: { idleMs: 700 } }
  - { id: two, type: openai, baseUrl: ${second.url}/v1, apiKey: ${second.apiKey}, models: [m-two] }
models:
  - name: pair
    targets: [{ provider: one, model: m-one }, { provider: two, model: m-two, priority: 1 }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  beforeEach(() => {
    second.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.end(`${ROLE}${line({ content: 'from the second' })}${line({}, 'stop')}data: [DONE]\n\n`);
    });
  });
  afterEach(() => {
    first.reset();
    second.reset();
  });
  after(async () => {
    await gw?.stop();
    await first.stop();
    await second.stop();
  });

  it('the role chunk reaches the client while the back end holds its next one', async () => {
    const gate = first.gate();
    first.handle('POST /v1/chat/completions', async (_req, res) => {
      sse(res);
      res.write(ROLE);
      // Nothing more until the client has the role chunk.
      await gate;
      res.end(`${line({ content: 'hello' })}${line({}, 'stop')}data: [DONE]\n\n`);
    });
    const stream = await client.chat.completions.create({ model: 'pair', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const seen: string[] = [];
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta;
      if (seen.length === 0) {
        expect(delta).to.include({ role: 'assistant', content: '' });
        first.release();
      }
      seen.push(delta?.content ?? '');
    }
    expect(seen.join('')).to.equal('hello');
    expect(second.received).to.have.length(0);
  });

  it('a back end that fails after its first chunk: the client has the stream, and gets the error in it (the next target is not tried)', async () => {
    first.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.end(`${ROLE}data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request.', type: 'server_error' } })}\n\n`);
    });
    const stream = await client.chat.completions.create({ model: 'pair', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const roles: unknown[] = [];
    let failure: unknown;
    try {
      for await (const chunk of stream) roles.push(chunk.choices[0]?.delta?.role);
    } catch (error) {
      failure = error;
    }
    expect(roles).to.deep.equal(['assistant']);
    expect(failure).to.be.instanceOf(OpenAI.APIError);
    expect((failure as InstanceType<typeof OpenAI.APIError>).message).to.match(/error/i);
    expect(second.received).to.have.length(0);
  });

  it('a messages client has message_start at once, and the error in its stream when the back end fails after its role chunk', async () => {
    const gate = first.gate();
    first.handle('POST /v1/chat/completions', async (_req, res) => {
      sse(res);
      res.write(ROLE);
      await gate;
      res.end(`data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request.', type: 'server_error' } })}\n\n`);
    });
    const claude = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const stream = await claude.messages.create({ model: 'pair', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const types: string[] = [];
    let failure: unknown;
    try {
      for await (const event of stream) {
        types.push(event.type);
        // The back end says nothing more until the client has the opening event.
        if (event.type === 'message_start') first.release();
      }
    } catch (error) {
      failure = error;
    }
    expect(types[0]).to.equal('message_start');
    expect(failure).to.be.instanceOf(Anthropic.APIError);
    expect(second.received).to.have.length(0);
  });

  it('a Gemini-format client, whose stream has no event for a role chunk, still gets the next target when the back end fails after one', async () => {
    first.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.end(`${ROLE}data: ${JSON.stringify({ error: { message: 'The server had an error while processing your request.', type: 'server_error' } })}\n\n`);
    });
    const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } });
    let text = '';
    for await (const chunk of await ai.models.generateContentStream({ model: 'pair', contents: 'hi' })) text += chunk.text ?? '';
    expect(text).to.equal('from the second');
    expect(first.received).to.have.length(1);
    expect(second.received).to.have.length(1);
  });

  it('a back end that fails before its first chunk: the next target answers, and the client sees only its stream', async () => {
    first.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.end(`data: ${JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } })}\n\n`);
    });
    const stream = await client.chat.completions.create({ model: 'pair', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text).to.equal('from the second');
    expect(first.received).to.have.length(1);
    expect(second.received).to.have.length(1);
  });
});
