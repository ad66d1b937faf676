import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import net from 'node:net';
import { countTokens } from 'gpt-tokenizer/encoding/cl100k_base';
import { FakeOpenAI, json, sse } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { sendJson } from './support/calls.js';
import { jsonOrText, plain } from './support/json.js';

const CLIENT_KEY = 'sk-client-anthropic-abcdef123456';

type Json = Record<string, any>;

const weather: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

/** POST JSON with Anthropic's key and version headers (`headers` replace them); the answer's JSON as `body` (its text when it is an event stream). */
async function raw(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: any }> {
  const reply = await sendJson(url, body, { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', ...headers });
  return { ...reply, body: jsonOrText(reply.text) };
}

describe('anthropic-messages in front of the mock provider (official @anthropic-ai/sdk)', () => {
  let gw: RunningGateway;
  let client: Anthropic;

  before(async () => {
    // No plugins: list: the default order, which must include the anthropic-messages format.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
auth:
  keys:
    - { name: claude-user, key: ${CLIENT_KEY} }
providers:
  - id: mock
    type: mock
    models: [mock-chat]
models:
  - name: claude-echo
    targets: [{ provider: mock, model: mock-chat }]
  - name: vendor/claude-echo
    targets: [{ provider: mock, model: mock-chat }]
`);
    client = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it('messages.create: a text answer with end_turn and usage', async () => {
    const message = await client.messages.create({ model: 'claude-echo', max_tokens: 100, messages: [{ role: 'user', content: 'hello there gateway' }] });
    expect(message.id).to.match(/^msg_/);
    expect(message.type).to.equal('message');
    expect(message.role).to.equal('assistant');
    expect(plain(message.content)).to.deep.equal([{ type: 'text', text: 'hello there gateway' }]);
    expect(message.stop_reason).to.equal('end_turn');
    expect(message.usage.output_tokens).to.equal(3);
    expect(message.usage.input_tokens).to.be.greaterThan(0);
  });

  it('messages.create: max_tokens cuts the answer with stop_reason max_tokens', async () => {
    const message = await client.messages.create({ model: 'claude-echo', max_tokens: 2, messages: [{ role: 'user', content: 'one two three four' }] });
    expect(plain(message.content)).to.deep.equal([{ type: 'text', text: 'one two' }]);
    expect(message.stop_reason).to.equal('max_tokens');
  });

  it('messages.create with tools: a tool_use block with its input, stop_reason tool_use', async () => {
    const message = await client.messages.create({ model: 'claude-echo', max_tokens: 100, tools: [weather], messages: [{ role: 'user', content: 'Paris' }] });
    expect(message.stop_reason).to.equal('tool_use');
    expect(message.content).to.have.length(1);
    const block = message.content[0] as Anthropic.ToolUseBlock;
    expect(block.type).to.equal('tool_use');
    expect(block.name).to.equal('get_weather');
    expect(block.input).to.deep.equal({ city: 'Paris' });
    expect(block.id).to.be.a('string').and.not.equal('');
  });

  it('messages.stream: text assembled by the SDK, text events in order', async () => {
    const pieces: string[] = [];
    const stream = client.messages.stream({ model: 'claude-echo', max_tokens: 100, messages: [{ role: 'user', content: 'stream me these words' }] });
    stream.on('text', (delta) => pieces.push(delta));
    const message = await stream.finalMessage();
    expect(pieces.join('')).to.equal('stream me these words');
    expect(pieces.length).to.equal(4);
    expect(plain(message.content)).to.deep.equal([{ type: 'text', text: 'stream me these words' }]);
    expect(message.stop_reason).to.equal('end_turn');
    expect(message.usage.output_tokens).to.equal(4);
    expect(message.usage.input_tokens).to.be.greaterThan(0);
  });

  it('messages.stream with tools: tool_use input assembled from input_json_delta pieces', async () => {
    const partial: string[] = [];
    const stream = client.messages.stream({ model: 'claude-echo', max_tokens: 100, tools: [weather], messages: [{ role: 'user', content: 'Lyon' }] });
    stream.on('inputJson', (piece) => partial.push(piece));
    const message = await stream.finalMessage();
    expect(partial.length).to.be.greaterThan(1);
    expect(partial.join('')).to.equal('{"city":"Lyon"}');
    expect(message.stop_reason).to.equal('tool_use');
    const block = message.content[0] as Anthropic.ToolUseBlock;
    expect(block.type).to.equal('tool_use');
    expect(block.input).to.deep.equal({ city: 'Lyon' });
  });

  it('a tool round trip: tool_use -> tool_result -> the answer', async () => {
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
    const first = await client.messages.create({ model: 'claude-echo', max_tokens: 100, tools: [weather], messages });
    const call = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    expect(call, 'a tool_use block').to.not.equal(undefined);
    messages.push({ role: 'assistant', content: first.content });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call!.id, content: 'cold and clear' }] });
    const second = await client.messages.create({ model: 'claude-echo', max_tokens: 100, tools: [weather], messages });
    expect(second.stop_reason).to.equal('end_turn');
    expect(plain(second.content)).to.deep.equal([{ type: 'text', text: 'cold and clear' }]);
  });

  it('count_tokens: the metering tokenizer over the prompt, tools included', async () => {
    const counted = await client.messages.countTokens({ model: 'claude-echo', messages: [{ role: 'user', content: 'Hello there' }] });
    // cl100k_base over "role\ncontent", plus 4 tokens per message and 3 for the reply's priming.
    expect(counted).to.deep.equal({ input_tokens: countTokens('user\nHello there') + 4 + 3 });
    const withSystem = await client.messages.countTokens({ model: 'claude-echo', system: 'Be brief.', messages: [{ role: 'user', content: 'Hello there' }] });
    expect(withSystem.input_tokens).to.equal(countTokens('system\nBe brief.user\nHello there') + 8 + 3);
    const withTools = await client.messages.countTokens({ model: 'claude-echo', tools: [weather], messages: [{ role: 'user', content: 'Hello there' }] });
    expect(withTools.input_tokens).to.be.greaterThan(counted.input_tokens + 10);
  });

  it("count_tokens: a block the translation has no place for (a search result) is still counted, from its text, and named as no loss (an Anthropic back end would read it)", async () => {
    const words = 'the quick brown fox jumps over the lazy dog '.repeat(60);
    const plainCount = await client.messages.countTokens({ model: 'claude-echo', messages: [{ role: 'user', content: 'Summarise it' }] });
    const result = await raw(`${gw.url}/v1/messages/count_tokens`, {
      model: 'claude-echo',
      messages: [{ role: 'user', content: [{ type: 'search_result', source: 'https://example.com', title: 'Fox', content: [{ type: 'text', text: words }] }, { type: 'text', text: 'Summarise it' }] }],
    });
    expect(result.status).to.equal(200);
    // About four bytes a token of what it holds (540 words, 2,700 bytes).
    expect(result.body.input_tokens - plainCount.input_tokens).to.be.within(600, 720);
    expect(result.headers.get('x-switchyard-losses')).to.equal(null);
    // What is carried is not counted twice, and labels, ids, signatures and cache marks are no text.
    const history = (signature: string, cached: boolean) => ({
      model: 'claude-echo',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Weather?', ...(cached ? { cache_control: { type: 'ephemeral' } } : {}) }] },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'look it up', signature }, { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'sunny' }] },
      ],
      tools: [{ name: 'get_weather', input_schema: { type: 'object' } }],
    });
    const plainHistory = await raw(`${gw.url}/v1/messages/count_tokens`, history('s', false));
    const markedHistory = await raw(`${gw.url}/v1/messages/count_tokens`, history('x'.repeat(800), true));
    expect(markedHistory.body.input_tokens).to.equal(plainHistory.body.input_tokens);
  });

  it('count_tokens: unknown model 404, bad body 400, in the native shape', async () => {
    const unknown = await client.messages.countTokens({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
    expect(unknown).to.be.instanceOf(Anthropic.NotFoundError);
    const bad = await raw(`${gw.url}/v1/messages/count_tokens`, { model: 'claude-echo', messages: 'x' });
    expect(bad.status).to.equal(400);
    expect(bad.body).to.deep.include({ type: 'error' });
    expect(bad.body.error.type).to.equal('invalid_request_error');
  });

  it('a bad body is a 400 invalid_request_error the SDK raises as BadRequestError', async () => {
    const error = (await client.messages.create({ model: 'claude-echo', max_tokens: 0, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.BadRequestError);
    expect(error.status).to.equal(400);
    expect(error.type).to.equal('invalid_request_error');
    expect(error.error).to.deep.equal({
      type: 'error',
      error: { type: 'invalid_request_error', message: "Invalid value for 'max_tokens': expected a value >= 1, but got 0 instead." },
      request_id: error.requestID,
    });
    // A tool must be used, with none to choose from (was: answered with text).
    for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_weather' }] as Anthropic.ToolChoice[]) {
      const forced = (await client.messages.create({ model: 'claude-echo', max_tokens: 5, tool_choice, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(forced, tool_choice.type).to.be.instanceOf(Anthropic.BadRequestError);
      expect(forced.message).to.include("only allowed when 'tools' are specified");
    }
    expect((await client.messages.create({ model: 'claude-echo', max_tokens: 5, tool_choice: { type: 'auto' }, messages: [{ role: 'user', content: 'x' }] })).stop_reason).to.equal('end_turn');
    // (This SDK's types have no temperature: the body is built by hand.)
    const params = { model: 'claude-echo', max_tokens: 5, temperature: 1.5, messages: [{ role: 'user', content: 'x' }] } as Anthropic.MessageCreateParamsNonStreaming;
    const temperature = await client.messages.create(params).catch((e: unknown) => e);
    expect(temperature).to.be.instanceOf(Anthropic.BadRequestError);
  });

  it('a bad key is a 401 authentication_error (AuthenticationError), by x-api-key or Bearer', async () => {
    const bad = new Anthropic({ apiKey: 'sk-wrong-key-000000000000', baseURL: gw.url, maxRetries: 0 });
    const error = (await bad.messages.create({ model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.AuthenticationError);
    expect(error.type).to.equal('authentication_error');
    const bearer = new Anthropic({ apiKey: null, authToken: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const ok = await bearer.messages.create({ model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'bearer works' }] });
    expect(plain(ok.content)).to.deep.equal([{ type: 'text', text: 'bearer works' }]);
    const badBearer = new Anthropic({ apiKey: null, authToken: 'sk-wrong-key-000000000000', baseURL: gw.url, maxRetries: 0 });
    expect(await badBearer.messages.create({ model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)).to.be.instanceOf(
      Anthropic.AuthenticationError,
    );
    const none = await raw(`${gw.url}/v1/messages`, { model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': '' });
    expect(none.status).to.equal(401);
    expect(none.body.error.type).to.equal('authentication_error');
    // The message names the header Claude clients use, not only Bearer.
    expect(none.body.error.message).to.include('x-api-key');
    // The header twice (a proxy adding the key the client sent; node joins them with a comma):
    // the same key twice is that key, two different ones are neither.
    const twice = await raw(`${gw.url}/v1/messages`, { model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'twice' }] }, { 'x-api-key': `${CLIENT_KEY}, ${CLIENT_KEY}` });
    expect(twice.status).to.equal(200);
    const mixed = await raw(`${gw.url}/v1/messages`, { model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': `${CLIENT_KEY}, sk-wrong-key-000000000000` });
    expect(mixed.status).to.equal(401);
  });

  it("carries the request id where Anthropic's SDK reads it (request-id), on answers and on errors", async () => {
    const { response, request_id } = await client.messages
      .create({ model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'whose call' }] })
      .withResponse();
    const id = response.headers.get('x-request-id');
    expect(id).to.match(/^req_/);
    expect(request_id).to.equal(id);
    const error = (await client.messages.create({ model: 'no-such-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error.requestID).to.match(/^req_/).and.not.equal(id);
    // The body carries it too, at its top level, as Anthropic's error bodies do.
    expect(error.error).to.deep.include({ type: 'error', request_id: error.requestID });
    // Refused before the body was read (over the size limit): still the format's id header.
    const { port, hostname } = new URL(gw.url);
    const refused = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () =>
        socket.write('POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\nExpect: 100-continue\r\n\r\n'),
      );
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString('utf8')));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(refused).to.match(/^HTTP\/1\.1 413 /);
    const refusedId = /\r\nx-request-id: (req_\w+)\r\n/.exec(refused)?.[1];
    expect(refusedId).to.be.a('string');
    expect(refused).to.include(`\r\nrequest-id: ${refusedId}\r\n`);
    // A path of the format's own that no route serves (GET /v1/messages): its 404 too.
    const wrongMethod = await fetch(`${gw.url}/v1/messages`, { headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' } });
    expect(wrongMethod.status).to.equal(404);
    expect(((await wrongMethod.json()) as Json).type).to.equal('error');
    expect(wrongMethod.headers.get('request-id')).to.equal(wrongMethod.headers.get('x-request-id')).and.match(/^req_/);
    expect(refused.slice(refused.indexOf('\r\n\r\n') + 4)).to.include(`"request_id":"${refusedId}"`);
    // Refused as a gateway loop (too many hops) before its route runs: still the format's shape and header.
    const looped = await fetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'x-switchyard-via': 'a, b, c, d, e, f, g, h' },
      body: JSON.stringify({ model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(looped.status).to.equal(508);
    expect(((await looped.json()) as Json).type).to.equal('error');
    expect(looped.headers.get('request-id')).to.equal(looped.headers.get('x-request-id')).and.match(/^req_/);
    // Other formats' answers keep only x-request-id.
    const chat = await sendJson(`${gw.url}/v1/chat/completions`, { model: 'claude-echo', messages: [{ role: 'user', content: 'x' }] }, { authorization: `Bearer ${CLIENT_KEY}` });
    expect(chat.status).to.equal(200);
    expect(chat.headers.get('request-id')).to.equal(null);
  });

  it("models.list and models.retrieve: Anthropic's shape and pages for its clients (x-api-key, anthropic-version); OpenAI's without the version header", async () => {
    const first = await client.models.list({ limit: 1 });
    expect(first.data).to.have.length(1);
    expect(first.has_more).to.equal(true);
    const ids: string[] = [];
    for await (const model of client.models.list({ limit: 1 })) {
      expect(model.type).to.equal('model');
      expect(model.display_name).to.equal(model.id);
      expect(Date.parse(model.created_at)).to.be.a('number').and.not.NaN;
      ids.push(model.id);
    }
    expect(ids).to.include.members(['claude-echo', 'mock-chat']);
    expect(new Set(ids).size).to.equal(ids.length);
    const one = await client.models.retrieve('claude-echo');
    expect(plain(one)).to.deep.include({ type: 'model', id: 'claude-echo' });
    // Every field the SDK declares present is: the stage the SDK's docs filter on, nulls for what the gateway cannot know.
    expect(plain(one)).to.deep.include({ lifecycle: 'active', deprecated_at: null, retires_at: null, line: null, max_input_tokens: null, max_tokens: null, capabilities: null });
    const active: string[] = [];
    for await (const model of client.models.list({ lifecycle: ['active'] })) active.push(model.id);
    expect(active).to.have.members(ids);
    const retired = await client.models.list({ lifecycle: ['retired'] });
    expect(retired.data).to.deep.equal([]);
    expect(retired.has_more).to.equal(false);
    const commas = await fetch(`${gw.url}/v1/models?lifecycle=active,deprecated&limit=100`, { headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' } });
    expect(((await commas.json()) as Json).data.map((m: Json) => m.id)).to.have.members(ids);
    const badStage = await fetch(`${gw.url}/v1/models?lifecycle[]=gone`, { headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' } });
    expect(badStage.status).to.equal(400);
    // An id with a slash: encoded by the client, or sent as it is.
    expect(plain(await client.models.retrieve('vendor/claude-echo'))).to.deep.include({ id: 'vendor/claude-echo' });
    const slashed = await fetch(`${gw.url}/v1/models/vendor/claude-echo`, { headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' } });
    expect(((await slashed.json()) as Json).id).to.equal('vendor/claude-echo');
    const missing = (await client.models.retrieve('no-such-model').catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(missing).to.be.instanceOf(Anthropic.NotFoundError);
    expect(missing.type).to.equal('not_found_error');
    expect(missing.requestID).to.match(/^req_/);
    const badLimit = await fetch(`${gw.url}/v1/models?limit=0`, { headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' } });
    expect(badLimit.status).to.equal(400);
    expect(((await badLimit.json()) as Json).error.type).to.equal('invalid_request_error');
    // The same path for OpenAI's clients: Bearer, their list shape; x-api-key alone is not their key.
    const openai = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
    expect(((await openai.json()) as Json).object).to.equal('list');
    const noVersion = await fetch(`${gw.url}/v1/models`, { headers: { 'x-api-key': CLIENT_KEY } });
    expect(noVersion.status).to.equal(401);
  });

  it('an unknown model is a 404 not_found_error (NotFoundError)', async () => {
    const error = (await client.messages.create({ model: 'no-such-model', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.NotFoundError);
    expect(error.status).to.equal(404);
    expect(error.type).to.equal('not_found_error');
  });

  it('requires a version header: anthropic-version or provider-version; without one a native 400', async () => {
    const body = { model: 'claude-echo', max_tokens: 5, messages: [{ role: 'user', content: 'versioned' }] };
    const missing = await raw(`${gw.url}/v1/messages`, body, { 'anthropic-version': '' });
    expect(missing.status).to.equal(400);
    expect(missing.body).to.deep.equal({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' },
      request_id: missing.headers.get('x-request-id'),
    });
    expect(missing.headers.get('x-request-id')).to.be.a('string');
    const spec = await raw(`${gw.url}/v1/messages`, body, { 'anthropic-version': '', 'provider-version': '2023-06-01' });
    expect(spec.status).to.equal(200);
    expect(spec.body.content).to.deep.equal([{ type: 'text', text: 'versioned' }]);
    const count = await raw(`${gw.url}/v1/messages/count_tokens`, { model: 'claude-echo', messages: body.messages }, { 'anthropic-version': '' });
    expect(count.status).to.equal(400);
  });

  it('names what it could not carry (service_tier, cache_control, metadata) in a header and the log', async () => {
    const { response } = await client.messages
      .create({
        model: 'claude-echo',
        max_tokens: 20,
        service_tier: 'standard_only',
        metadata: { user_id: 'u-1', team: 'x' },
        system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: 'lossy' }],
      } as Anthropic.MessageCreateParamsNonStreaming)
      .withResponse();
    expect(response.headers.get('x-switchyard-losses')!.split(',')).to.have.members(['service_tier', 'cache_control', 'metadata.team']);
    await eventually(() => gw.logs.some((l) => l.message === 'translation losses'), 3000, 'the losses log line');
    const line = gw.logs.find((l) => l.message === 'translation losses')!;
    expect(line.losses).to.have.members(['service_tier', 'cache_control', 'metadata.team']);
    expect(line.format).to.equal('anthropic-messages');
    const clean = await client.messages.create({ model: 'claude-echo', max_tokens: 20, messages: [{ role: 'user', content: 'clean' }] }).withResponse();
    expect(clean.response.headers.get('x-switchyard-losses')).to.equal(null);
  });

  it('a prefill (a last assistant turn) over a chat back end is named: it is answered anew, not continued', async () => {
    const { response } = await client.messages
      .create({ model: 'claude-echo', max_tokens: 20, messages: [{ role: 'user', content: 'json please' }, { role: 'assistant', content: '{"a":' }] })
      .withResponse();
    expect(response.headers.get('x-switchyard-losses')).to.equal('assistant.prefill');
    const answered = await client.messages
      .create({ model: 'claude-echo', max_tokens: 20, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }, { role: 'user', content: 'q2' }] })
      .withResponse();
    expect(answered.response.headers.get('x-switchyard-losses')).to.equal(null);
    // Counting a prefilled conversation loses nothing.
    const counted = await raw(`${gw.url}/v1/messages/count_tokens`, { model: 'claude-echo', messages: [{ role: 'user', content: 'json please' }, { role: 'assistant', content: '{"a":' }] });
    expect(counted.status).to.equal(200);
    expect(counted.headers.get('x-switchyard-losses')).to.equal(null);
  });
});

describe('anthropic-messages in front of an OpenAI-compatible upstream (official @anthropic-ai/sdk)', () => {
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let client: Anthropic;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: claude-user, key: ${CLIENT_KEY} }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [gpt-4o-mini]
  - id: up-reasoning
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    maxTokensField: max_completion_tokens
    models: [o4-mini]
models:
  - name: claude-via-openai
    targets: [{ provider: up, model: gpt-4o-mini }]
  - name: claude-via-o4
    targets: [{ provider: up-reasoning, model: o4-mini }]
`);
    client = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it("structured output goes up strict only when OpenAI's strict mode takes the schema; one with an optional property goes up not strict, named", async () => {
    const optional = { type: 'object', properties: { name: { type: 'string' }, nick: { type: 'string' } }, required: ['name'], additionalProperties: false };
    const { response } = await client.messages
      .create({ model: 'claude-via-openai', max_tokens: 50, messages: [{ role: 'user', content: 'json' }], output_config: { format: { type: 'json_schema', schema: optional } } } as never)
      .withResponse();
    expect((upstream.last().body as Record<string, any>).response_format).to.deep.equal({ type: 'json_schema', json_schema: { name: 'output', schema: optional, strict: false } });
    expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('output_format.strict');

    const all = { type: 'object', properties: { name: { type: 'string' }, tags: { type: 'array', items: { type: 'object', properties: { t: { type: 'string' } }, required: ['t'], additionalProperties: false } } }, required: ['name', 'tags'], additionalProperties: false };
    const strict = await client.messages
      .create({ model: 'claude-via-openai', max_tokens: 50, messages: [{ role: 'user', content: 'json' }], output_config: { format: { type: 'json_schema', schema: all } } } as never)
      .withResponse();
    expect((upstream.last().body as Record<string, any>).response_format.json_schema.strict).to.equal(true);
    expect(strict.response.headers.get('x-switchyard-losses')).to.equal(null);
  });

  it('a PDF document goes up as a file part with the filename OpenAI requires: its title, else document.pdf', async () => {
    const pdf = Buffer.from('%PDF-1.4').toString('base64');
    const source = { type: 'base64' as const, media_type: 'application/pdf' as const, data: pdf };
    for (const [title, filename] of [['report.pdf', 'report.pdf'], [undefined, 'document.pdf']] as const) {
      const document = { type: 'document' as const, source, ...(title ? { title } : {}) };
      await client.messages.create({ model: 'claude-via-openai', max_tokens: 20, messages: [{ role: 'user', content: [document, { type: 'text', text: 'summarise' }] }] });
      const content = ((upstream.last().body as Record<string, any>).messages[0].content) as Array<Record<string, unknown>>;
      expect(content[0]).to.deep.equal({ type: 'file', file: { file_data: `data:application/pdf;base64,${pdf}`, filename } });
    }
  });

  it("a Claude Code request reaches a strict OpenAI-compatible server as it takes one: its 150-character user id hashed, text blocks as text, a turn of only server-tool blocks left out", async () => {
    // A server that takes text only (DeepSeek), with OpenAI's own rules on `user` and empty turns.
    upstream.textOnly = true;
    try {
      const userId = `user_${'ab12'.repeat(16)}_account_9f6c1d2e-0000-4000-8000-000000000001_session_1b2c3d4e-0000-4000-8000-000000000002`;
      const { data, response } = await client.messages
        .create({
          model: 'claude-via-openai',
          max_tokens: 100,
          metadata: { user_id: userId },
          system: [
            { type: 'text', text: 'You are a coding agent.' },
            { type: 'text', text: 'Work in the repository.', cache_control: { type: 'ephemeral' } },
          ],
          messages: [
            { role: 'user', content: [{ type: 'text', text: 'what is new in node 20?', cache_control: { type: 'ephemeral' } }] },
            {
              role: 'assistant',
              content: [
                { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'node 20' } },
                { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] },
              ],
            },
            { role: 'user', content: [{ type: 'text', text: 'and' }, { type: 'text', text: 'in short?' }] },
          ],
        } as never)
        .withResponse();
      expect(data.content[0]).to.deep.include({ type: 'text' });
      const sent = upstream.last().body as Record<string, any>;
      expect(userId.length).to.be.greaterThan(64);
      expect(sent.user).to.match(/^[0-9a-f]{64}$/);
      expect(sent.messages).to.deep.equal([
        { role: 'system', content: 'You are a coding agent.\nWork in the repository.' },
        { role: 'user', content: 'what is new in node 20?' },
        { role: 'user', content: 'and\nin short?' },
      ]);
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('messages.empty_assistant_turn');
      // The same user id hashes to the same value: the back end still sees one user.
      await client.messages.create({ model: 'claude-via-openai', max_tokens: 10, metadata: { user_id: userId }, messages: [{ role: 'user', content: 'again' }] });
      expect((upstream.last().body as Record<string, any>).user).to.equal(sent.user);
    } finally {
      upstream.textOnly = false;
    }
  });

  it('a strict tool goes up strict only when chat completions\' strict mode takes its schema; one with an optional property goes up not strict, named', async () => {
    const loose = { type: 'object', properties: { q: { type: 'string' }, limit: { type: 'integer' } }, required: ['q'] };
    const closed = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'], additionalProperties: false };
    const { response } = await client.messages
      .create({
        model: 'claude-via-openai',
        max_tokens: 50,
        tools: [
          { name: 'search', description: 'search the web', input_schema: loose, strict: true },
          { name: 'lookup', input_schema: closed, strict: true },
        ],
        messages: [{ role: 'user', content: 'find it' }],
      } as never)
      .withResponse();
    expect(response.status).to.equal(200);
    const tools = (upstream.last().body as Record<string, any>).tools;
    expect(tools[0].function).to.deep.include({ name: 'search', strict: false, parameters: loose });
    expect(tools[1].function).to.deep.include({ name: 'lookup', strict: true, parameters: closed });
    expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('tools.strict');
  });

  it('max_tokens goes up as max_completion_tokens to a back end set so (maxTokensField), as max_tokens otherwise', async () => {
    await client.messages.create({ model: 'claude-via-o4', max_tokens: 77, messages: [{ role: 'user', content: 'limit me' }] });
    const sent = upstream.last().body!;
    expect(sent.max_completion_tokens).to.equal(77);
    expect(sent).to.not.have.property('max_tokens');
    await client.messages.create({ model: 'claude-via-openai', max_tokens: 78, messages: [{ role: 'user', content: 'limit me' }] });
    expect(upstream.last().body).to.deep.include({ max_tokens: 78 });
    expect(upstream.last().body).to.not.have.property('max_completion_tokens');
    // A chat completions client's own field goes up as it chose it.
    const own = await sendJson(`${gw.url}/v1/chat/completions`, { model: 'claude-via-o4', max_tokens: 79, messages: [{ role: 'user', content: 'x' }] }, { authorization: `Bearer ${CLIENT_KEY}` });
    expect(own.status).to.equal(200);
    expect(upstream.last().body).to.deep.include({ max_tokens: 79 });
  });

  it('sends the system prompt first, the tools, max_tokens and stop; answers tool_use with usage', async () => {
    const message = await client.messages.create({
      model: 'claude-via-openai',
      max_tokens: 321,
      system: 'You are a weather bot.',
      stop_sequences: ['END'],
      temperature: 0.4,
      tools: [weather],
      tool_choice: { type: 'auto' },
      messages: [{ role: 'user', content: 'Weather in Paris?' }],
    } as Anthropic.MessageCreateParamsNonStreaming);
    const got = upstream.last();
    expect(got.url).to.equal('/v1/chat/completions');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(got.headers['x-api-key']).to.equal(undefined);
    expect(JSON.stringify(got.headers)).to.not.include(CLIENT_KEY);
    expect(got.body).to.deep.equal({
      model: 'gpt-4o-mini',
      max_tokens: 321,
      temperature: 0.4,
      stop: ['END'],
      messages: [
        { role: 'system', content: 'You are a weather bot.' },
        { role: 'user', content: 'Weather in Paris?' },
      ],
      tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weather.input_schema } }],
      tool_choice: 'auto',
    });
    expect(message.stop_reason).to.equal('tool_use');
    expect(plain(message.content)).to.deep.equal([{ type: 'tool_use', id: 'call_fake1', name: 'get_weather', input: { city: 'Paris' } }]);
    // The fake reports 11 prompt tokens of which 3 cached, and 7 completion tokens.
    expect(message.usage).to.deep.include({ input_tokens: 8, output_tokens: 7, cache_read_input_tokens: 3, cache_creation_input_tokens: 0 });
    expect(message.model).to.equal('gpt-4o-mini');
  });

  it('top_k, which chat completions does not have (OpenAI refuses the field), is not sent; the loss is named', async () => {
    const asked = { model: 'claude-via-openai', max_tokens: 50, top_k: 5, messages: [{ role: 'user', content: 'hi' }] } as Anthropic.MessageCreateParamsNonStreaming;
    const { response } = await client.messages.create(asked).withResponse();
    expect(upstream.last().body).to.not.have.property('top_k');
    expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('top_k');
  });

  it('more stop sequences than OpenAI takes (four): the first four go up, the loss is named', async () => {
    const { response } = await client.messages
      .create({ model: 'claude-via-openai', max_tokens: 50, stop_sequences: ['a', 'b', 'c', 'd', 'e', 'f'], messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(upstream.last().body!.stop).to.deep.equal(['a', 'b', 'c', 'd']);
    expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('stop.too_many');
  });

  it('sends tool results as role tool messages after the assistant tool_calls; end_turn answer', async () => {
    const message = await client.messages.create({
      model: 'claude-via-openai',
      max_tokens: 100,
      tools: [weather],
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me check.' },
            { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
            { type: 'tool_use', id: 'toolu_02', name: 'get_weather', input: { city: 'Rome' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_01', content: 'sunny' },
            { type: 'tool_result', tool_use_id: 'toolu_02', content: [{ type: 'text', text: 'rainy' }] },
          ],
        },
      ],
    });
    const sent = upstream.last().body!.messages as Json[];
    expect(sent).to.deep.equal([
      { role: 'user', content: 'Weather in Paris and Rome?' },
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'toolu_01', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'toolu_02', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_01', content: 'sunny' },
      { role: 'tool', tool_call_id: 'toolu_02', content: 'rainy' },
    ]);
    expect(message.stop_reason).to.equal('end_turn');
    expect(plain(message.content)).to.deep.equal([{ type: 'text', text: 'upstream says: rainy' }]);
  });

  it("a user turn as Claude Code sends it (a reminder before the results, a screenshot as a result, an empty result): tool messages first, the images after them", async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const { response } = await client.messages
      .create({
        model: 'claude-via-openai',
        max_tokens: 100,
        tools: [weather],
        messages: [
          { role: 'user', content: 'Look at the screen.' },
          {
            role: 'assistant',
            content: [
              { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
              { type: 'tool_use', id: 'toolu_02', name: 'get_weather', input: { city: 'Rome' } },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'text', text: '<system-reminder>x</system-reminder>' },
              { type: 'tool_result', tool_use_id: 'toolu_01', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] },
              { type: 'tool_result', tool_use_id: 'toolu_02', content: [] },
            ],
          },
        ],
      })
      .withResponse();
    expect(response.status).to.equal(200);
    expect(response.headers.get('x-switchyard-losses')).to.equal(null);
    const sent = upstream.last().body!.messages as Json[];
    expect(sent.slice(2)).to.deep.equal([
      { role: 'tool', tool_call_id: 'toolu_01', content: '' },
      { role: 'tool', tool_call_id: 'toolu_02', content: '' },
      {
        role: 'user',
        content: [
          { type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } },
          { type: 'text', text: '<system-reminder>x</system-reminder>' },
        ],
      },
    ]);
  });

  it('messages.stream: text, usage with cached tokens, and usage asked of the upstream', async () => {
    const stream = client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, messages: [{ role: 'user', content: 'hi there' }] });
    const message = await stream.finalMessage();
    expect(upstream.last().body).to.deep.include({ stream: true, stream_options: { include_usage: true }, max_tokens: 50 });
    expect(plain(message.content)).to.deep.equal([{ type: 'text', text: 'upstream says: hi there' }]);
    expect(message.stop_reason).to.equal('end_turn');
    expect(message.usage).to.deep.include({ input_tokens: 8, output_tokens: 7, cache_read_input_tokens: 3 });
  });

  it('messages.stream: a streamed tool call becomes a tool_use block', async () => {
    const message = await client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, tools: [weather], messages: [{ role: 'user', content: 'Paris?' }] }).finalMessage();
    expect(message.stop_reason).to.equal('tool_use');
    expect(plain(message.content)).to.deep.equal([{ type: 'tool_use', id: 'call_fake1', name: 'get_weather', input: { city: 'Paris' } }]);
  });

  it("a prompt too long for the back end's model reaches a Claude client in Anthropic's words (which Claude Code compacts on), streamed or not", async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } }));
    });
    for (const stream of [false, true]) {
      const error = (await client.messages.create({ model: 'claude-via-openai', max_tokens: 50, stream, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(error).to.be.instanceOf(Anthropic.BadRequestError);
      expect((error.error as { error: { type: string; message: string } }).error).to.deep.equal({ type: 'invalid_request_error', message: 'prompt is too long: 9000 tokens > 8192 maximum' });
    }
  });

  it('messages.stream: an upstream that leaves out the choice and tool-call index (Gemini-style) still gives text and separate tool_use blocks', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      const send = (delta: Json, finish: string | null = null) =>
        res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ delta, finish_reason: finish }] })}\n\n`);
      send({ role: 'assistant', content: 'Checking both.' });
      send({ tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
      send({ tool_calls: [{ id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] });
      send({}, 'tool_calls');
      res.end('data: [DONE]\n\n');
    });
    const message = await client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, tools: [weather], messages: [{ role: 'user', content: 'Paris and Rome?' }] }).finalMessage();
    expect(plain(message.content)).to.deep.equal([
      { type: 'text', text: 'Checking both.' },
      { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_b', name: 'get_weather', input: { city: 'Rome' } },
    ]);
    expect(message.stop_reason).to.equal('tool_use');
  });

  it('messages.stream: tool arguments that are not one JSON object reach the SDK as one (what was valid, completed), the loss named', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      const send = (delta: Json, finish: string | null = null) =>
        res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
      send({ role: 'assistant', content: '' });
      send({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: '"Paris",}' } }] });
      send({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: 'not json at all' } }] });
      send({ tool_calls: [{ index: 2, id: 'call_c', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] });
      send({}, 'tool_calls');
      res.end('data: [DONE]\n\n');
    });
    const stream = client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, tools: [weather], messages: [{ role: 'user', content: 'three cities?' }] });
    const message = await stream.finalMessage();
    expect(plain(message.content)).to.deep.equal([
      { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_b', name: 'get_weather', input: {} },
      { type: 'tool_use', id: 'call_c', name: 'get_weather', input: { city: 'Rome' } },
    ]);
    // Found mid-stream, after the headers: in the request log.
    const { response } = await stream.withResponse();
    const id = response.headers.get('x-request-id');
    let losses: string[] | undefined;
    for (const deadline = Date.now() + 3000; losses === undefined && Date.now() < deadline; ) {
      await gw.gateway.stores.flush();
      losses = (await gw.gateway.stores.logs.query({ limit: 200 })).entries.find((e) => e.requestId === id)?.losses;
      if (losses === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(losses).to.include('tool_use.input_not_json_object');
  });

  it('messages.stream: parallel calls whose argument pieces the back end interleaves each keep their own arguments, in consecutive blocks', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      const send = (delta: Json, finish: string | null = null) =>
        res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
      send({ role: 'assistant', content: '' });
      send({ tool_calls: [{ index: 0, id: 'call_I0', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] });
      send({ tool_calls: [{ index: 1, id: 'call_I1', type: 'function', function: { name: 'get_weather', arguments: '{"city":' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] });
      send({ tool_calls: [{ index: 2, id: 'call_I2', type: 'function', function: { name: 'get_weather', arguments: '{"ci' } }] });
      send({ tool_calls: [{ index: 1, function: { arguments: '"Rome"}' } }] });
      send({ tool_calls: [{ index: 2, function: { arguments: 'ty":"Oslo"}' } }] });
      send({}, 'tool_calls');
      res.end('data: [DONE]\n\n');
    });
    const reply = await raw(`${gw.url}/v1/messages`, { model: 'claude-via-openai', max_tokens: 50, stream: true, tools: [weather], messages: [{ role: 'user', content: 'three cities?' }] });
    // Each block's deltas come between its start and its stop, and one block at a time, as Anthropic streams them.
    const events = String(reply.body)
      .split('\n\n')
      .filter((e) => e.startsWith('event: content_block'))
      .map((e) => JSON.parse(e.slice(e.indexOf('data: ') + 6)) as Json);
    let openIndex: number | undefined;
    for (const e of events) {
      if (e.type === 'content_block_start') {
        expect(openIndex, 'a block starts while another is open').to.equal(undefined);
        openIndex = e.index;
      } else if (e.type === 'content_block_delta') expect(e.index, 'a delta outside its block').to.equal(openIndex);
      else if (e.type === 'content_block_stop') {
        expect(e.index).to.equal(openIndex);
        openIndex = undefined;
      }
    }
    const message = await client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, tools: [weather], messages: [{ role: 'user', content: 'three cities?' }] }).finalMessage();
    // Before: the first call was closed when the second began, its arguments completed as {"city":null}.
    expect(plain(message.content)).to.deep.equal([
      { type: 'tool_use', id: 'call_I0', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_I1', name: 'get_weather', input: { city: 'Rome' } },
      { type: 'tool_use', id: 'call_I2', name: 'get_weather', input: { city: 'Oslo' } },
    ]);
    expect(message.stop_reason).to.equal('tool_use');
  });

  it('messages.stream: arguments that break inside an escape are completed without it, making up no character', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      const send = (delta: Json, finish: string | null = null) =>
        res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
      send({ role: 'assistant', content: '' });
      send({ tool_calls: [{ index: 0, id: 'call_e', type: 'function', function: { name: 'get_weather', arguments: '{"city' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: '": "a\\qb"' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: ', "x": tr' } }] });
      send({}, 'tool_calls');
      res.end('data: [DONE]\n\n');
    });
    const message = await client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, tools: [weather], messages: [{ role: 'user', content: 'x' }] }).finalMessage();
    // Before: {"city":"a\n"}, a newline the back end never sent.
    expect(plain(message.content)).to.deep.equal([{ type: 'tool_use', id: 'call_e', name: 'get_weather', input: { city: 'a' } }]);
  });

  it('sends the upstream no tool_choice without tools, and no empty reasoning_signature back', async () => {
    await client.messages.create({
      model: 'claude-via-openai',
      max_tokens: 50,
      tool_choice: { type: 'none' },
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'unsigned', signature: '' }, { type: 'text', text: 'y' }] },
        { role: 'user', content: 'z' },
      ],
    });
    const body = upstream.last().body!;
    expect(body).to.not.have.property('tool_choice');
    // An empty signature never goes up (reasoning_content itself is the provider's call).
    expect((body.messages as Json[])[1]).to.deep.include({ role: 'assistant', content: 'y' });
    expect((body.messages as Json[])[1]).to.not.have.property('reasoning_signature');
  });

  it('a stream that breaks after it began ends with an error event the SDK raises', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.write(`data: ${JSON.stringify({ id: 'x', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta: { content: 'partial' }, finish_reason: null }] })}\n\n`);
      res.end('data: {not json\n\n');
    });
    const texts: string[] = [];
    const stream = client.messages.stream({ model: 'claude-via-openai', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] });
    stream.on('text', (t) => texts.push(t));
    const error = (await stream.finalMessage().catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.APIError);
    expect(error.type).to.equal('api_error');
    expect(texts).to.deep.equal(['partial']);
  });

  it('an upstream 400 before the answer is a native invalid_request_error', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 400, { error: { message: "Unsupported parameter: 'reasoning_effort'", type: 'invalid_request_error', param: 'reasoning_effort', code: null } }),
    );
    const error = (await client.messages
      .create({ model: 'claude-via-openai', max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.BadRequestError);
    expect(error.type).to.equal('invalid_request_error');
    expect(upstream.last().body).to.deep.include({ reasoning_effort: 'low' });
  });

  it('a Claude-Code-shaped request: long system prompt, 15 tools, thinking, streaming, multi-turn tool results', async () => {
    // The upstream reasons, says a word and calls two tools in parallel, streamed.
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      const send = (delta: Json, finish: string | null = null, extra: Json = {}) =>
        res.write(`data: ${JSON.stringify({ id: 'chatcmpl-cc', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
      send({ role: 'assistant', content: null });
      send({ reasoning_content: 'The tests fail in ' });
      send({ reasoning_content: 'two files; read both.' });
      send({ content: 'Reading both files.' });
      send({ tool_calls: [{ index: 0, id: 'call_r1', type: 'function', function: { name: 'Read', arguments: '' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: '{"file_path":' } }] });
      send({ tool_calls: [{ index: 0, function: { arguments: '"/repo/a.ts"}' } }] });
      send({ tool_calls: [{ index: 1, id: 'call_r2', type: 'function', function: { name: 'Read', arguments: '{"file_path":"/repo/b.ts"}' } }] });
      send({}, 'tool_calls');
      res.write(
        `data: ${JSON.stringify({ id: 'chatcmpl-cc', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 9000, completion_tokens: 120, total_tokens: 9120, prompt_tokens_details: { cached_tokens: 8000 }, completion_tokens_details: { reasoning_tokens: 40 } } })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    });

    const names = ['Task', 'Bash', 'Glob', 'Grep', 'LS', 'ExitPlanMode', 'Read', 'Edit', 'MultiEdit', 'Write', 'NotebookEdit', 'WebFetch', 'TodoWrite', 'WebSearch', 'BashOutput'];
    const tools: Anthropic.Tool[] = names.map((name, i) => ({
      name,
      description: `${name}: ${'Detailed instructions for the tool. '.repeat(20)}`,
      input_schema: { type: 'object', properties: { file_path: { type: 'string', description: 'absolute path' }, n: { type: 'integer' } }, required: i % 2 ? ['file_path'] : [] },
    }));
    const longSystem = `You are an interactive CLI tool that helps users with software engineering tasks. ${'Follow the repository conventions. '.repeat(400)}`;
    const stream = client.messages.stream({
      model: 'claude-via-openai',
      max_tokens: 32000,
      stream: true,
      thinking: { type: 'enabled', budget_tokens: 20000 },
      system: [
        { type: 'text', text: "You are Claude Code, Anthropic's official CLI for Claude." },
        { type: 'text', text: longSystem, cache_control: { type: 'ephemeral' } },
      ],
      tools,
      metadata: { user_id: 'user_abc_account_1_session_2' },
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Why do the tests fail?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Run the tests first.', signature: 'sig-earlier-turn' },
            { type: 'tool_use', id: 'toolu_bash1', name: 'Bash', input: { command: 'npm test' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_bash1', content: '2 failing: a.ts, b.ts', cache_control: { type: 'ephemeral' } },
            { type: 'text', text: 'Keep going.' },
          ],
        },
      ],
    } as Anthropic.MessageCreateParamsStreaming);
    const thinking: string[] = [];
    stream.on('thinking', (delta) => thinking.push(delta));
    const { response } = await stream.withResponse();
    const message = await stream.finalMessage();

    const sent = upstream.last().body!;
    expect(sent.model).to.equal('gpt-4o-mini');
    expect(sent.stream).to.equal(true);
    expect(sent.max_tokens).to.equal(32000);
    expect(sent.reasoning_effort).to.equal('high');
    expect(sent.user).to.equal('user_abc_account_1_session_2');
    expect(sent.tools).to.have.length(15);
    expect((sent.tools as Json[]).map((t) => t.function.name)).to.deep.equal(names);
    expect((sent.tools as Json[])[1].function.parameters).to.deep.equal(tools[1]!.input_schema);
    expect((sent.messages as Json[]).map((m) => m.role)).to.deep.equal(['system', 'user', 'assistant', 'tool', 'user']);
    // The system blocks as one text, a line apart (a server that takes only text takes it).
    expect((sent.messages as Json[])[0]).to.deep.equal({ role: 'system', content: `You are Claude Code, Anthropic's official CLI for Claude.\n${longSystem}` });
    // The canonical turn carries the thinking (reasoning_content, reasoning_signature; see the
    // request unit tests); whether the openai provider passes it on is the provider's call
    // (OpenAI refuses unknown message fields), so it is left out of this comparison.
    const { reasoning_content: _reasoning, reasoning_signature: _signature, ...assistantTurn } = (sent.messages as Json[])[2]!;
    expect(assistantTurn).to.deep.equal({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'toolu_bash1', type: 'function', function: { name: 'Bash', arguments: '{"command":"npm test"}' } }],
    });
    expect((sent.messages as Json[])[3]).to.deep.equal({ role: 'tool', tool_call_id: 'toolu_bash1', content: '2 failing: a.ts, b.ts' });
    expect((sent.messages as Json[])[4]).to.deep.equal({ role: 'user', content: 'Keep going.' });

    expect(thinking.join('')).to.equal('The tests fail in two files; read both.');
    expect(plain(message.content)).to.deep.equal([
      { type: 'thinking', thinking: 'The tests fail in two files; read both.', signature: '' },
      { type: 'text', text: 'Reading both files.' },
      { type: 'tool_use', id: 'call_r1', name: 'Read', input: { file_path: '/repo/a.ts' } },
      { type: 'tool_use', id: 'call_r2', name: 'Read', input: { file_path: '/repo/b.ts' } },
    ]);
    expect(message.stop_reason).to.equal('tool_use');
    expect(message.usage).to.deep.include({ input_tokens: 1000, cache_read_input_tokens: 8000, output_tokens: 120 });
    expect(response.headers.get('content-type')).to.match(/^text\/event-stream/);
    // Chat completions has no place for cache breakpoints, nor for the earlier turn's signed
    // thinking; the budget travels as its band (31,999 as high).
    expect(response.headers.get('x-switchyard-losses')).to.equal('cache_control,thinking.budget_tokens,messages.reasoning_content,messages.reasoning_signature');
  });
});

describe('anthropic-messages without openai-chat: the model listing is only for Anthropic clients', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
plugins: [anthropic-messages]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(async () => gw?.stop());

  it('GET /v1/models with a version header lists; without one no route serves it (404)', async () => {
    const listed = await fetch(`${gw.url}/v1/models`, { headers: { 'anthropic-version': '2023-06-01' } });
    expect(listed.status).to.equal(200);
    expect((((await listed.json()) as Json).data as Json[]).map((m) => m.id)).to.include('mock-chat');
    const unversioned = await fetch(`${gw.url}/v1/models`);
    expect(unversioned.status).to.equal(404);
    expect(unversioned.headers.get('x-request-id')).to.match(/^req_/);
  });
});
