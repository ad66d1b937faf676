import { expect } from 'chai';
import OpenAI from 'openai';
import { COMPACT_PROMPT } from '../plugins/formats/openai-chat/responses/bridge.js';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { BpeTokenizer, countPromptTokens } from '../plugins/metering/tokens.js';
import type { ChatRequest } from '../core/index.js';
import { installNativeResponses, type NativeResponses } from './fakes/openai-responses.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { usageRow } from './support/rows.js';

const KEY = 'sk-compact-key-0000000001';

type ApiError = InstanceType<typeof OpenAI.APIError>;
type Item = Record<string, unknown>;

const post = (url: string, path: string, body: unknown) => postJson(url, path, body, KEY);

const conversation = [
  { role: 'user' as const, content: 'My name is Ada and I like tea.' },
  { role: 'assistant' as const, content: 'Nice to meet you, Ada.' },
  { role: 'user' as const, content: [{ type: 'input_text' as const, text: 'I live in London.' }] },
  { role: 'assistant' as const, content: 'London is lovely.' },
];

describe('POST /v1/responses/compact', () => {
  let gw: RunningGateway;
  let fake: FakeOpenAI;
  let nativeFake: FakeOpenAI;
  let native: NativeResponses;
  let client: OpenAI;

  before(async () => {
    fake = new FakeOpenAI();
    await fake.start();
    nativeFake = new FakeOpenAI('sk-native-upstream-secret-77');
    await nativeFake.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: compactor, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
  - { id: chatonly, type: openai, baseUrl: ${fake.url}/v1, apiKey: ${fake.apiKey}, models: [gpt-4o-mini] }
  - { id: native, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-native] }
models:
  - name: native-then-chat
    targets: [{ provider: native, model: gpt-5-native }, { provider: chatonly, model: gpt-4o-mini, priority: 1 }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await fake?.stop();
    await nativeFake?.stop();
  });
  beforeEach(() => {
    fake.reset();
    nativeFake.reset();
    native = installNativeResponses(nativeFake);
  });

  it('through chat: the user messages, then one compaction item, and usage (mock)', async () => {
    const compacted = await client.responses.compact({ model: 'mock-chat', input: conversation });
    expect(compacted.object).to.equal('response.compaction');
    expect(compacted.id).to.match(/^resp_/);
    expect(compacted.created_at).to.be.a('number');
    expect(compacted.output).to.have.length(3);
    const [first, second, item] = compacted.output as unknown as Item[];
    expect(first).to.deep.include({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'My name is Ada and I like tea.' }] });
    expect(second).to.deep.include({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'I live in London.' }] });
    expect(item).to.include({ type: 'compaction' });
    expect(item!.encrypted_content).to.be.a('string').and.not.contain('Ada'); // opaque to the client
    expect(compacted.usage).to.include({ output_tokens: COMPACT_PROMPT.split(/\s+/).length });
    expect(compacted.usage.input_tokens).to.be.greaterThan(20);
    // Every field of the compaction result, `error` (null: it was made) among them.
    expect(Object.keys(compacted).sort()).to.deep.equal(['created_at', 'error', 'id', 'object', 'output', 'usage']);
    expect((compacted as unknown as Item).error).to.equal(null);
  });

  it('asks the routed chat model for a summary, and its output is accepted as the input of the next call', async () => {
    const compacted = await client.responses.compact({ model: 'gpt-4o-mini', input: conversation, instructions: 'Be helpful.' });
    const asked = fake.last().body as { messages: Array<{ role: string; content: unknown }>; stream?: unknown };
    expect(asked.messages).to.deep.equal([
      { role: 'system', content: 'Be helpful.' },
      { role: 'user', content: 'My name is Ada and I like tea.' },
      { role: 'assistant', content: 'Nice to meet you, Ada.' },
      { role: 'user', content: 'I live in London.' },
      { role: 'assistant', content: 'London is lovely.' },
      { role: 'user', content: COMPACT_PROMPT },
    ]);
    expect(asked).to.not.have.property('stream');
    expect(compacted.usage).to.include({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });

    const next = await client.responses.create({
      model: 'gpt-4o-mini',
      input: [...(compacted.output as unknown as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'What is my name?' }],
    });
    expect(next.output_text).to.equal('upstream says: What is my name?');
    expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
      { role: 'user', content: 'My name is Ada and I like tea.' },
      { role: 'user', content: 'I live in London.' },
      { role: 'user', content: `Summary of the earlier conversation:\nupstream says: ${COMPACT_PROMPT}` },
      { role: 'user', content: 'What is my name?' },
    ]);
  });

  it("gives a native back end this gateway's compaction item as the summary message it stands for", async () => {
    const compacted = await client.responses.compact({ model: 'gpt-4o-mini', input: conversation });
    await client.responses.create({
      model: 'gpt-5-native',
      input: [...(compacted.output as unknown as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: 'go on' }],
    });
    const sent = nativeFake.last().body as { input: Item[] };
    expect(sent.input.map((item) => item.type ?? item.role)).to.deep.equal(['message', 'message', 'message', 'user']);
    expect(sent.input[2]).to.deep.equal({ type: 'message', role: 'user', content: `Summary of the earlier conversation:\nupstream says: ${COMPACT_PROMPT}` });
  });

  it('compacts the conversation a previous_response_id names', async () => {
    const one = await client.responses.create({ model: 'gpt-4o-mini', input: 'remember the number 42' });
    await client.responses.compact({ model: 'gpt-4o-mini', previous_response_id: one.id, input: 'and 7' });
    expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
      { role: 'user', content: 'remember the number 42' },
      { role: 'assistant', content: 'upstream says: remember the number 42' },
      { role: 'user', content: 'and 7' },
      { role: 'user', content: COMPACT_PROMPT },
    ]);
    const missing = (await client.responses.compact({ model: 'mock-chat', previous_response_id: 'resp_unknown' }).catch((e) => e)) as ApiError;
    expect(missing.status).to.equal(400);
    expect(missing.error).to.deep.include({ code: 'previous_response_not_found', param: 'previous_response_id' });
  });

  it('a native back end that no longer has the previous response: previous_response_not_found, and the next target compacts the conversation the gateway kept', async () => {
    const one = await client.responses.create({ model: 'gpt-5-native', input: 'remember the number 42' });
    // The back end forgets it (OpenAI keeps responses for a while; a restarted server keeps none).
    native.made.clear();
    const error = (await client.responses.compact({ model: 'gpt-5-native', previous_response_id: one.id }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.error).to.deep.include({ code: 'previous_response_not_found', param: 'previous_response_id', type: 'invalid_request_error' });
    expect(error.message).to.contain(one.id);
    // An alias goes on to its next target, which gets the history instead of the id.
    const compacted = await client.responses.compact({ model: 'native-then-chat', previous_response_id: one.id, input: 'and 7' });
    expect(compacted.object).to.equal('response.compaction');
    expect(nativeFake.last().body).to.deep.include({ previous_response_id: one.id });
    expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
      { role: 'user', content: 'remember the number 42' },
      { role: 'assistant', content: 'native says: remember the number 42' },
      { role: 'user', content: 'and 7' },
      { role: 'user', content: COMPACT_PROMPT },
    ]);
  });

  it('refuses to compact nothing', async () => {
    const res = await post(gw.url, '/v1/responses/compact', { model: 'mock-chat' });
    expect(res.status).to.equal(400);
    expect(JSON.parse(res.text).error.param).to.equal('input');
  });

  it('passes through to a back end with the Responses API, byte for byte', async () => {
    const res = await post(gw.url, '/v1/responses/compact', { model: 'gpt-5-native', input: conversation });
    expect(res.status).to.equal(200);
    expect(res.text).to.equal(native.sent[0]);
    expect(nativeFake.last().url).to.equal('/v1/responses/compact');
    expect(nativeFake.last().body).to.deep.equal({ model: 'gpt-5-native', input: conversation });
    const compacted = await client.responses.compact({ model: 'gpt-5-native', input: conversation });
    expect(compacted.object).to.equal('response.compaction');
    expect(compacted.usage).to.include({ input_tokens: 30, output_tokens: 9 });
  });

  it("names a compaction item it cannot read (another back end's) as a loss", async () => {
    const res = await post(gw.url, '/v1/responses', {
      model: 'mock-chat',
      input: [{ type: 'compaction', encrypted_content: 'gAAAAnative-opaque-summary' }, { role: 'user', content: 'go on' }],
    });
    expect(res.status).to.equal(200);
    expect(res.headers.get('x-switchyard-losses')).to.equal('input.compaction');
  });

  it('records the usage of a compaction', async () => {
    const res = await post(gw.url, '/v1/responses/compact', { model: 'gpt-4o-mini', input: 'short talk' });
    const row = await usageRow(gw, res.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'compact', promptTokens: 11, completionTokens: 7, cachedTokens: 3, source: 'provider' });
  });

  it('counts a compaction whose chat back end reports no usage: the summarising prompt sent and the summary, not the echoed messages', async () => {
    const summary = 'one two three four five six seven eight nine ten';
    fake.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 200, { id: 'x', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: summary }, finish_reason: 'stop' }] }),
    );
    const { data: compacted, response } = await client.responses.compact({ model: 'gpt-4o-mini', input: conversation }).withResponse();
    const sent = fake.last().body as Partial<ChatRequest>;
    expect(sent.messages!.at(-1)).to.deep.equal({ role: 'user', content: COMPACT_PROMPT });
    const tokenizer = new BpeTokenizer('cl100k_base');
    const prompt = await countPromptTokens(tokenizer, sent);
    const output = await tokenizer.count(summary);
    expect(compacted.usage).to.deep.include({ input_tokens: prompt, output_tokens: output, total_tokens: prompt + output });
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'compact', promptTokens: prompt, completionTokens: output, source: 'estimated' });
  });

  describe('validation (400 with the param named)', () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['model missing', { input: 'x' }, 'model'],
      ['model not a string', { model: [], input: 'x' }, 'model'],
      ['input a number', { model: 'mock-chat', input: 3 }, 'input'],
      ['input item without content', { model: 'mock-chat', input: [{ role: 'user' }] }, 'input[0].content'],
      ['instructions not a string', { model: 'mock-chat', input: 'x', instructions: false }, 'instructions'],
      ['previous_response_id not a string', { model: 'mock-chat', input: 'x', previous_response_id: 9 }, 'previous_response_id'],
    ];
    for (const [name, body, param] of cases) {
      it(`${name} -> 400, param ${param}`, async () => {
        const res = await post(gw.url, '/v1/responses/compact', body);
        expect(res.status, res.text).to.equal(400);
        expect(JSON.parse(res.text).error).to.include({ param, type: 'invalid_request_error' });
      });
    }
  });
});

describe('Responses over an anthropic back end: a conversation that called tools, continued and compacted without its tools', () => {
  let gw: RunningGateway;
  const claude = new FakeAnthropic();

  before(async () => {
    await claude.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: compactor, key: ${KEY} }]
providers:
  - { id: claude, type: anthropic, baseUrl: ${claude.url}, apiKey: ${claude.apiKey}, models: [claude-x] }
`);
  });
  after(async () => {
    await gw?.stop();
    await claude.stop();
  });

  it("a later turn and a compaction that leave the tools out reach Claude with the history's tools declared and none to be called (Claude refuses tool_use blocks without tools)", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const tools: OpenAI.Responses.Tool[] = [{ type: 'function', name: 'get_weather', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
    const first = await client.responses.create({ model: 'claude-x', input: 'Weather in Paris?', tools });
    const call = first.output.find((item) => item.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
    expect(call.name).to.equal('get_weather');
    // The result, on a turn that names the previous response and offers no tools (as Codex does when it compacts).
    const second = await client.responses.create({ model: 'claude-x', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }] });
    expect(second.output_text).to.match(/^upstream says/);
    const sent = claude.last().body as Record<string, any>;
    expect(sent.tools).to.deep.equal([{ name: 'get_weather', input_schema: { type: 'object' } }]);
    expect(sent.tool_choice).to.deep.equal({ type: 'none' });

    const compacted = await client.responses.compact({ model: 'claude-x', previous_response_id: second.id });
    expect(compacted.output.some((item) => item.type === 'compaction')).to.equal(true);
    const summarising = claude.last().body as Record<string, any>;
    expect(summarising.messages.some((m: { content: unknown }) => Array.isArray(m.content) && m.content.some((b: { type: string }) => b.type === 'tool_use'))).to.equal(true);
    expect(summarising.tool_choice).to.deep.equal({ type: 'none' });
  });
});
