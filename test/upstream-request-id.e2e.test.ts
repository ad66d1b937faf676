import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-upstream-id-key-000000001';
const HEADER = 'x-switchyard-upstream-request-id';

/**
 * The back end's own id for its answer (OpenAI's `x-request-id`, Anthropic's `request-id`) is
 * what its support asks for: the client gets it in `x-switchyard-upstream-request-id`, errors
 * included, and the request log keeps it on each attempt, so a failed-over call names every
 * back end's id.
 */
describe('the back end\'s request id reaches the client and the request log', function () {
  this.timeout(30_000);
  const openai = new FakeOpenAI();
  const failing = new FakeOpenAI('sk-failing-upstream-0000001');
  const claude = new FakeAnthropic();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await openai.start();
    await failing.start();
    await claude.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: ids, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${openai.url}/v1, apiKey: ${openai.apiKey}, models: [gpt-4o-mini] }
  - { id: down, type: openai, baseUrl: ${failing.url}/v1, apiKey: ${failing.apiKey}, models: [flaky] }
  - { id: claude, type: anthropic, baseUrl: ${claude.url}, apiKey: ${claude.apiKey}, models: [claude-fake-1] }
models:
  - name: flaky-then-up
    targets:
      - { provider: down, model: flaky, priority: 0 }
      - { provider: up, model: gpt-4o-mini, priority: 1 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await openai.stop();
    await failing.stop();
    await claude.stop();
  });
  beforeEach(() => {
    openai.reset();
    failing.reset();
    claude.reset();
  });

  async function logEntry(requestId: string) {
    const page = await gw.gateway.stores.logs.query({ limit: 50 });
    const entry = page.entries.find((e) => e.requestId === requestId);
    expect(entry, `the log entry of ${requestId}`).to.exist;
    return entry!;
  }

  it('a JSON and a streamed chat answer carry the OpenAI back end\'s x-request-id; the log keeps it on the attempt', async () => {
    const { response } = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const vendorId = openai.last().requestId;
    expect(response.headers.get(HEADER)).to.equal(vendorId);
    // The gateway's own id stays the client's request id.
    expect(response.headers.get('x-request-id')).to.not.equal(vendorId);
    const entry = await logEntry(response.headers.get('x-request-id')!);
    expect(entry.attempts).to.have.length(1);
    expect(entry.attempts[0]).to.include({ provider: 'up', status: 200, upstreamRequestId: vendorId });

    const { data: stream, response: streamed } = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], stream: true }).withResponse();
    for await (const _chunk of stream);
    expect(streamed.headers.get(HEADER)).to.equal(openai.last().requestId);
  });

  it('failed over: the answer names the back end that answered; the log names both back ends\' ids', async () => {
    failing.handle('POST /v1/chat/completions', (_req, res) => json(res, 500, { error: { message: 'boom', type: 'server_error', param: null, code: null } }));
    const { response } = await client.chat.completions.create({ model: 'flaky-then-up', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(response.headers.get(HEADER)).to.equal(openai.last().requestId);
    const entry = await logEntry(response.headers.get('x-request-id')!);
    expect(entry.attempts.map((a) => [a.provider, a.status, a.upstreamRequestId])).to.deep.equal([
      ['down', 500, failing.last().requestId],
      ['up', 200, openai.last().requestId],
    ]);
  });

  it('an error the back end gave carries its id to the client, in the client\'s error shape', async () => {
    openai.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 400, { error: { message: "Invalid value for 'temperature'", type: 'invalid_request_error', param: 'temperature', code: null } }),
    );
    const error = (await client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect(error.status).to.equal(400);
    expect(error.headers?.get(HEADER)).to.equal(openai.last().requestId);
    const entry = await logEntry(error.requestID!);
    expect(entry.attempts[0]).to.include({ status: 400, upstreamRequestId: openai.last().requestId });
  });

  it('an Anthropic client: request-id is the gateway\'s (the SDK\'s _request_id), the back end\'s request-id comes in the other header', async () => {
    const anthropic = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const { response, request_id } = await anthropic.messages.create({ model: 'claude-fake-1', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    const vendorId = claude.received[claude.received.length - 1]!.requestId;
    expect(response.headers.get(HEADER)).to.equal(vendorId);
    expect(request_id).to.equal(response.headers.get('x-request-id'));
    expect(request_id).to.not.equal(vendorId);
  });

  it('an id that is not one (spaces, too long) is not passed on, and a back end without one gives no header', async () => {
    let id = 'not an id';
    openai.handle('POST /v1/chat/completions', (_req, res) => {
      res.setHeader('x-request-id', id);
      json(res, 200, { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });
    });
    const call = () => client.chat.completions.create({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect((await call()).response.headers.get(HEADER)).to.equal(null);
    id = `req_${'a'.repeat(200)}`;
    expect((await call()).response.headers.get(HEADER)).to.equal(null);
    // A bad x-request-id does not hide a good request-id.
    openai.handle('POST /v1/chat/completions', (_req, res) => {
      res.setHeader('x-request-id', 'not an id');
      res.setHeader('request-id', 'req_good-1');
      json(res, 200, { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });
    });
    expect((await call()).response.headers.get(HEADER)).to.equal('req_good-1');
    openai.handle('POST /v1/chat/completions', (_req, res) => {
      res.removeHeader('x-request-id');
      json(res, 200, { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }] });
    });
    const { response } = await call();
    expect(response.headers.get(HEADER)).to.equal(null);
    const entry = await logEntry(response.headers.get('x-request-id')!);
    expect(entry.attempts[0]).to.not.have.property('upstreamRequestId');
  });
});
