import type http from 'node:http';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json, sse } from './fakes/openai-upstream.js';
import { eventsOf, FakeAnthropic, message as anthropicMessage } from './fakes/anthropic-upstream.js';
import { installNativeResponses, NATIVE_USAGE, type NativeResponses } from './fakes/openai-responses.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { logRow, usageRow } from './support/rows.js';

const KEY = 'sk-responses-key-000000001';
const OTHER_KEY = 'sk-responses-key-000000002';

type ApiError = InstanceType<typeof OpenAI.APIError>;
type Event = { type: string; sequence_number: number; [k: string]: unknown };

const weatherTool = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: false,
};

const post = (url: string, path: string, body: unknown, key = KEY) => postJson(url, path, body, key);

/** The event names of a stream, with runs of the same delta event collapsed to one. */
function shape(events: Event[]): string[] {
  const out: string[] = [];
  for (const e of events) if (!(e.type.endsWith('.delta') && out[out.length - 1] === e.type)) out.push(e.type);
  return out;
}

const TEXT_STREAM = [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.content_part.added',
  'response.output_text.delta',
  'response.output_text.done',
  'response.content_part.done',
  'response.output_item.done',
  'response.completed',
];

const CALL_STREAM = [
  'response.created',
  'response.in_progress',
  'response.output_item.added',
  'response.function_call_arguments.delta',
  'response.function_call_arguments.done',
  'response.output_item.done',
  'response.completed',
];

/** One chat chunk as the fake upstream streams it: a delta of choice 0 (and its finish reason). */
function writeChunk(res: http.ServerResponse, delta: unknown, finish: string | null = null): void {
  res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
}

function expectSequenced(events: Event[]): void {
  expect(events.map((e) => e.sequence_number)).to.deep.equal(events.map((_, i) => i));
}

describe('POST /v1/responses', () => {
  let gw: RunningGateway;
  let fake: FakeOpenAI;
  let nativeFake: FakeOpenAI;
  let native: NativeResponses;
  const claude = new FakeAnthropic();
  let client: OpenAI;
  let other: OpenAI;

  before(async () => {
    fake = new FakeOpenAI();
    await fake.start();
    nativeFake = new FakeOpenAI('sk-native-upstream-secret-99');
    await nativeFake.start();
    await claude.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: alice, key: ${KEY} }, { name: bob, key: ${OTHER_KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
  - { id: chatonly, type: openai, baseUrl: ${fake.url}/v1, apiKey: ${fake.apiKey}, models: [gpt-4o-mini] }
  - { id: native, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-native] }
  # The same back end under another id: the failures one test provokes cool down only this one.
  - { id: native-faults, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-faults] }
  - { id: claude, type: anthropic, baseUrl: ${claude.url}, apiKey: ${claude.apiKey}, models: [claude-fake-1] }
models:
  - name: native-alias
    targets: [{ provider: native, model: gpt-5-native }]
  - name: chat-then-native
    targets: [{ provider: chatonly, model: gpt-4o-mini }, { provider: native, model: gpt-5-native, priority: 1 }]
  - name: chat-then-mock
    targets: [{ provider: chatonly, model: gpt-4o-mini }, { provider: mock, model: mock-chat, priority: 1 }]
  - name: native-then-mock
    targets: [{ provider: native, model: gpt-5-native }, { provider: mock, model: mock-chat, priority: 1 }]
pricing:
  mock-chat: { input: 1000000, output: 2000000 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    other = new OpenAI({ apiKey: OTHER_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await fake?.stop();
    await nativeFake?.stop();
    await claude.stop();
  });
  beforeEach(() => {
    claude.reset();
    fake.reset();
    nativeFake.reset();
    native = installNativeResponses(nativeFake);
  });

  describe('against the mock provider (through the chat bridge)', () => {
    it('answers a string input with one message of output_text, status completed and usage', async () => {
      const response = await client.responses.create({ model: 'mock-chat', input: 'hello there gateway', instructions: 'Be brief.' });
      expect(response.object).to.equal('response');
      expect(response.id).to.match(/^resp_/);
      expect(response.status).to.equal('completed');
      expect(response.model).to.equal('mock-chat');
      expect(response.instructions).to.equal('Be brief.');
      expect(response.output).to.have.length(1);
      const message = response.output[0] as OpenAI.Responses.ResponseOutputMessage;
      expect(message).to.include({ type: 'message', role: 'assistant', status: 'completed' });
      expect(message.id).to.match(/^msg_/);
      expect(message.content[0]).to.include({ type: 'output_text', text: 'hello there gateway' });
      expect(response.output_text).to.equal('hello there gateway');
      expect(response.usage).to.deep.equal({
        input_tokens: 11,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 14,
      });
    });

    it('takes a message list with input_text parts and a developer message', async () => {
      const response = await client.responses.create({
        model: 'mock-chat',
        input: [
          { role: 'developer', content: 'Answer plainly.' },
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'first part' }, { type: 'input_text', text: ' second part' }] },
        ],
      });
      expect(response.output_text).to.equal('first part second part');
    });

    it('streams the real event sequence, numbered from 0, ending with the whole response and its usage', async () => {
      const stream = await client.responses.create({ model: 'mock-chat', input: 'one two three four', stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      expect(shape(events)).to.deep.equal(TEXT_STREAM);
      expectSequenced(events);
      const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta);
      expect(deltas.join('')).to.equal('one two three four');
      const created = events[0] as unknown as { response: OpenAI.Responses.Response };
      expect(created.response.status).to.equal('in_progress');
      const done = events[events.length - 1] as unknown as { response: OpenAI.Responses.Response };
      expect(done.response.status).to.equal('completed');
      expect(done.response.id).to.equal(created.response.id);
      expect(done.response.usage).to.include({ input_tokens: 7, output_tokens: 4, total_tokens: 11 });
      expect((done.response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).to.include({ text: 'one two three four' });
    });

    it('serves client.responses.stream() and its finalResponse()', async () => {
      const stream = client.responses.stream({ model: 'mock-chat', input: 'streamed helper text' });
      const deltas: string[] = [];
      stream.on('response.output_text.delta', (event) => deltas.push(event.delta));
      const final = await stream.finalResponse();
      expect(final.output_text).to.equal('streamed helper text');
      expect(final.status).to.equal('completed');
      expect(deltas.join('')).to.equal('streamed helper text');
    });

    it('makes a tool call a function_call item and answers the function_call_output that follows', async () => {
      const first = await client.responses.create({ model: 'mock-chat', input: 'Weather in Paris?', tools: [weatherTool] });
      expect(first.output).to.have.length(1);
      const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
      expect(call).to.include({ type: 'function_call', name: 'get_weather', status: 'completed' });
      expect(call.call_id).to.match(/^call_/);
      expect(JSON.parse(call.arguments)).to.deep.equal({ city: 'Weather in Paris?' });
      const second = await client.responses.create({
        model: 'mock-chat',
        tools: [weatherTool],
        input: [
          { role: 'user', content: 'Weather in Paris?' },
          { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
          { type: 'function_call_output', call_id: call.call_id, output: 'sunny and 21 degrees' },
        ],
      });
      expect(second.output_text).to.equal('sunny and 21 degrees');
    });

    it('streams a tool call as function_call_arguments events', async () => {
      const stream = await client.responses.create({ model: 'mock-chat', input: 'Berlin', tools: [weatherTool], stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      expect(shape(events)).to.deep.equal(CALL_STREAM);
      expectSequenced(events);
      const added = events[2] as unknown as { item: { type: string; call_id: string; name: string } };
      expect(added.item).to.include({ type: 'function_call', name: 'get_weather' });
      const done = events.find((e) => e.type === 'response.function_call_arguments.done') as unknown as { arguments: string };
      expect(JSON.parse(done.arguments)).to.deep.equal({ city: 'Berlin' });
      const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
      expect(deltas.join('')).to.equal(done.arguments);
    });

    it('is incomplete (max_output_tokens) when the answer is cut by max_output_tokens', async () => {
      const response = await client.responses.create({ model: 'mock-chat', input: 'a b c d e f g', max_output_tokens: 3 });
      expect(response.status).to.equal('incomplete');
      expect(response.incomplete_details).to.deep.equal({ reason: 'max_output_tokens' });
      expect(response.output_text).to.equal('a b c');
      const stream = await client.responses.create({ model: 'mock-chat', input: 'a b c d e f g', max_output_tokens: 2, stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      const last = events[events.length - 1] as unknown as { type: string; response: OpenAI.Responses.Response };
      expect(last.type).to.equal('response.incomplete');
      expect(last.response.incomplete_details).to.deep.equal({ reason: 'max_output_tokens' });
    });

    it('carries a three-turn conversation through previous_response_id (the history grows the prompt)', async () => {
      const one = await client.responses.create({ model: 'mock-chat', input: 'my name is Ada', instructions: 'Remember names.' });
      const two = await client.responses.create({ model: 'mock-chat', input: 'I live in London', previous_response_id: one.id });
      expect(two.previous_response_id).to.equal(one.id);
      const three = await client.responses.create({ model: 'mock-chat', input: 'what do you know?', previous_response_id: two.id });
      expect(three.output_text).to.equal('what do you know?');
      // The mock counts every message it is given: turn 3 saw both earlier turns.
      const alone = await client.responses.create({ model: 'mock-chat', input: 'what do you know?' });
      expect(three.usage!.input_tokens).to.be.greaterThan(alone.usage!.input_tokens + 10);
    });

    it('keeps a streamed response for the next turn too', async () => {
      const stream = client.responses.stream({ model: 'mock-chat', input: 'streamed first turn' });
      const first = await stream.finalResponse();
      const next = await client.responses.create({ model: 'mock-chat', input: 'and then', previous_response_id: first.id });
      expect(next.usage!.input_tokens).to.be.greaterThan(8);
    });

    it('refuses an unknown previous_response_id, and another key cannot read a conversation', async () => {
      const missing = (await client.responses.create({ model: 'mock-chat', input: 'x', previous_response_id: 'resp_nope' }).catch((e) => e)) as ApiError;
      expect(missing.status).to.equal(400);
      expect(missing.error).to.deep.include({ code: 'previous_response_not_found', param: 'previous_response_id', type: 'invalid_request_error' });
      expect(missing.message).to.contain("Previous response with id 'resp_nope' not found.");
      const mine = await client.responses.create({ model: 'mock-chat', input: 'secret' });
      const theirs = (await other.responses.create({ model: 'mock-chat', input: 'x', previous_response_id: mine.id }).catch((e) => e)) as ApiError;
      expect(theirs.status).to.equal(400);
      expect(theirs.error).to.deep.include({ code: 'previous_response_not_found' });
      // The owner can.
      const ok = await client.responses.create({ model: 'mock-chat', input: 'x', previous_response_id: mine.id });
      expect(ok.status).to.equal('completed');
    });

    it("an item_reference to an item of an earlier stored turn (the AI SDK's way of sending its history) is that item, for this key only", async () => {
      const first = await client.responses.create({ model: 'gpt-4o-mini', input: 'My name is Zed.' });
      const said = first.output.find((item) => item.type === 'message')!;
      fake.reset();
      const { data: second, response } = await client.responses
        .create({
          model: 'gpt-4o-mini',
          input: [{ role: 'user', content: 'My name is Zed.' }, { type: 'item_reference', id: said.id } as never, { role: 'user', content: 'What did you just say?' }],
        })
        .withResponse();
      expect(second.status).to.equal('completed');
      const messages = (fake.last().body as { messages: Array<{ role: string; content: unknown }> }).messages;
      expect(messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'user']);
      expect(messages[1]!.content).to.equal('upstream says: My name is Zed.');
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      // Another key's reference names nothing it may read: named as lost, not served from Alice's turn.
      fake.reset();
      const { response: theirs } = await other.responses
        .create({ model: 'gpt-4o-mini', input: [{ type: 'item_reference', id: said.id } as never, { role: 'user', content: 'and?' }] })
        .withResponse();
      expect((fake.last().body as { messages: unknown[] }).messages).to.have.length(1);
      expect(theirs.headers.get('x-switchyard-losses')).to.include('input.item_reference');
    });

    it('item references over three turns and more: each names the item, never a later turn that named it', async () => {
      const history: Array<Record<string, unknown>> = [];
      for (const said of ['I am Zed.', 'I live in Oslo.', 'What do you know?']) {
        history.push({ role: 'user', content: said });
        fake.reset();
        const turn = await client.responses.create({ model: 'gpt-4o-mini', input: history as never });
        const messages = (fake.last().body as { messages: Array<{ role: string; content: unknown }> }).messages;
        expect(messages.map((m) => m.role)).to.deep.equal(history.map((h) => (h.type === 'item_reference' ? 'assistant' : 'user')));
        history.push({ type: 'item_reference', id: turn.output.find((item) => item.type === 'message')!.id });
      }
      const last = (fake.last().body as { messages: Array<{ role: string; content: unknown }> }).messages;
      expect(last.filter((m) => m.role === 'assistant').map((m) => m.content)).to.deep.equal(['upstream says: I am Zed.', 'upstream says: I live in Oslo.']);
    });

    it('does not keep a response made with store: false', async () => {
      const unstored = await client.responses.create({ model: 'mock-chat', input: 'forget me', store: false });
      expect((unstored as unknown as { store: boolean }).store).to.equal(false);
      const later = (await client.responses.create({ model: 'mock-chat', input: 'x', previous_response_id: unstored.id }).catch((e) => e)) as ApiError;
      expect(later.status).to.equal(400);
      expect(later.error).to.deep.include({ code: 'previous_response_not_found' });
    });

    it('names what chat cannot carry in x-switchyard-losses (hosted tools, include)', async () => {
      const res = await post(gw.url, '/v1/responses', {
        model: 'mock-chat',
        input: 'hi',
        tools: [{ type: 'web_search_preview' }],
        include: ['reasoning.encrypted_content', 'file_search_call.results'],
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get('x-switchyard-losses')).to.equal('tools.web_search_preview,include');
      // Reasoning items' signatures the bridge does give (as their encrypted_content): not lost.
      const carried = await post(gw.url, '/v1/responses', { model: 'mock-chat', input: 'hi', include: ['reasoning.encrypted_content', 'message.output_text.logprobs'] });
      expect(carried.status).to.equal(200);
      expect(carried.headers.get('x-switchyard-losses')).to.equal(null);
      const requestId = res.headers.get('x-request-id');
      await eventually(() => gw.logs.some((l) => l.message === 'translation losses' && l.requestId === requestId), 3000, 'the losses log line');
      const page = await gw.gateway.stores.logs.query({ limit: 50 });
      expect(page.entries.find((e) => e.requestId === requestId)?.losses).to.deep.equal(['tools.web_search_preview', 'include']);
      // Server-side compaction and a cache retention the bridge cannot ask of a chat back end.
      const more = await post(gw.url, '/v1/responses', {
        model: 'mock-chat',
        input: 'hi',
        context_management: [{ type: 'compaction', compact_threshold: 200000 }],
        prompt_cache_retention: '24h',
      });
      expect(more.status).to.equal(200);
      expect(more.headers.get('x-switchyard-losses')).to.equal('prompt_cache_retention,context_management');
    });

    it('records usage for a non-streamed and a streamed call, priced', async () => {
      const plain = await post(gw.url, '/v1/responses', { model: 'mock-chat', input: 'count these words' });
      const row = await usageRow(gw, plain.headers.get('x-request-id')!);
      expect(row).to.include({ operation: 'responses', promptTokens: 6, completionTokens: 3, source: 'provider', model: 'mock-chat' });
      expect(row.cost).to.be.closeTo(6 + 3 * 2, 1e-9);
      const streamed = await post(gw.url, '/v1/responses', { model: 'mock-chat', input: 'count these words', stream: true });
      expect(streamed.text).to.contain('event: response.completed');
      const streamedRow = await usageRow(gw, streamed.headers.get('x-request-id')!);
      expect(streamedRow).to.include({ operation: 'responses', promptTokens: 6, completionTokens: 3, source: 'provider' });
    });

    it('writes each event as event: <type> and data: <json>', async () => {
      const res = await post(gw.url, '/v1/responses', { model: 'mock-chat', input: 'hi', stream: true });
      expect(res.headers.get('content-type')).to.contain('text/event-stream');
      const blocks = res.text.trim().split('\n\n');
      for (const block of blocks) {
        const [event, data] = block.split('\n');
        expect(event).to.match(/^event: response\./);
        expect(JSON.parse(data!.slice('data: '.length)).type).to.equal(event!.slice('event: '.length));
      }
    });
  });

  describe('against a chat-only OpenAI-compatible upstream', () => {
    it('sends a chat completion upstream and answers a response (usage with cached tokens)', async () => {
      const response = await client.responses.create({
        model: 'gpt-4o-mini',
        input: 'hello upstream',
        instructions: 'Be kind.',
        max_output_tokens: 50,
        temperature: 0.5,
        reasoning: { effort: 'low' },
      });
      expect(response.output_text).to.equal('upstream says: hello upstream');
      expect(response.usage).to.deep.include({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
      expect(response.usage!.input_tokens_details).to.deep.equal({ cached_tokens: 3 });
      const sent = fake.last();
      expect(sent.url).to.equal('/v1/chat/completions');
      expect(sent.body).to.deep.include({
        model: 'gpt-4o-mini',
        messages: [
          { role: 'system', content: 'Be kind.' },
          { role: 'user', content: 'hello upstream' },
        ],
        max_tokens: 50,
        temperature: 0.5,
        reasoning_effort: 'low',
      });
    });

    it('streams from the upstream chat stream', async () => {
      const stream = await client.responses.create({ model: 'gpt-4o-mini', input: 'stream me', stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      expect(shape(events)).to.deep.equal(TEXT_STREAM);
      expectSequenced(events);
      const done = events[events.length - 1] as unknown as { response: OpenAI.Responses.Response };
      expect(done.response.output_text ?? (done.response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).to.exist;
      expect(done.response.usage).to.deep.include({ input_tokens: 11, output_tokens: 7 });
      expect(fake.last().body).to.deep.include({ stream: true, stream_options: { include_usage: true } });
    });

    it('round-trips a tool call: function_call -> function_call_output -> answer, with tool_calls and tool messages upstream', async () => {
      const first = await client.responses.create({ model: 'gpt-4o-mini', input: 'weather?', tools: [weatherTool], tool_choice: 'auto' });
      const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
      expect(call).to.include({ call_id: 'call_fake1', name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(fake.last().body).to.deep.include({
        tools: [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherTool.parameters, strict: false } }],
        tool_choice: 'auto',
      });
      const second = await client.responses.create({
        model: 'gpt-4o-mini',
        tools: [weatherTool],
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: '21 degrees' }],
      });
      expect(second.output_text).to.equal('upstream says: 21 degrees');
      expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_fake1', content: '21 degrees' },
      ]);
    });

    it('prompt_cache_key, safety_identifier and service_tier go up to a chat back end, which takes them too; nothing is named lost', async () => {
      const { response } = await client.responses
        .create({ model: 'gpt-4o-mini', input: 'hi', prompt_cache_key: 'codex-session-1', safety_identifier: 'user-hash-1', service_tier: 'flex' })
        .withResponse();
      expect(fake.last().body).to.deep.include({ prompt_cache_key: 'codex-session-1', safety_identifier: 'user-hash-1', service_tier: 'flex' });
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      // And echoed on the response object, as OpenAI echoes them.
      const echoed = await post(gw.url, '/v1/responses', { model: 'gpt-4o-mini', input: 'hi', prompt_cache_key: 'codex-session-1', safety_identifier: 'user-hash-1', max_tool_calls: 3 });
      expect(JSON.parse(echoed.text)).to.deep.include({ prompt_cache_key: 'codex-session-1', safety_identifier: 'user-hash-1', max_tool_calls: 3 });
    });

    it('no conversation to answer (no input, or only a tool output, and no previous response): 400 param input, the back end not called, no attempt and no usage row', async () => {
      const ids: string[] = [];
      for (const input of [[], [{ type: 'function_call_output', call_id: 'call_zz', output: 'x' }]]) {
        const error = (await client.responses.create({ model: 'gpt-4o-mini', input: input as OpenAI.Responses.ResponseInput }).catch((e: unknown) => e)) as ApiError;
        expect(error.status).to.equal(400);
        expect(error.error).to.deep.include({ type: 'invalid_request_error', param: 'input' });
        ids.push(error.requestID!);
      }
      const compact = await post(gw.url, '/v1/responses/compact', { model: 'gpt-4o-mini', input: [] });
      expect(compact.status).to.equal(400);
      expect(JSON.parse(compact.text).error).to.include({ param: 'input' });
      expect(JSON.parse(compact.text).error.message).to.include('no conversation to compact');
      ids.push(compact.headers.get('x-request-id')!);
      expect(fake.received).to.have.length(0);
      for (const id of ids) {
        const row = await logRow(gw, id);
        expect(row.attempts, id).to.deep.equal([]);
        expect(row.provider, id).to.equal(null);
        expect(await gw.gateway.stores.usage.list({ requestId: id }), id).to.deep.equal([]);
      }
    });

    it('a function_call_output in several text parts goes up as one tool message, a line each', async () => {
      const first = await client.responses.create({ model: 'gpt-4o-mini', input: 'weather?', tools: [weatherTool] });
      const call = first.output.find((o) => o.type === 'function_call') as OpenAI.Responses.ResponseFunctionToolCall;
      await client.responses.create({
        model: 'gpt-4o-mini',
        tools: [weatherTool],
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: [{ type: 'input_text', text: 'line1' }, { type: 'input_text', text: 'line2' }] }],
      });
      expect((fake.last().body as { messages: unknown[] }).messages[2]).to.deep.equal({ role: 'tool', tool_call_id: 'call_fake1', content: 'line1\nline2' });
    });

    it('rebuilds the whole history for the third turn, with only the latest instructions', async () => {
      const one = await client.responses.create({ model: 'gpt-4o-mini', input: 'turn one', instructions: 'First instructions.' });
      const two = await client.responses.create({ model: 'gpt-4o-mini', input: [{ role: 'user', content: [{ type: 'input_text', text: 'turn two' }] }], previous_response_id: one.id });
      const stream = client.responses.stream({ model: 'gpt-4o-mini', input: 'turn three', previous_response_id: two.id, instructions: 'Third instructions.' });
      const three = await stream.finalResponse();
      expect(three.output_text).to.equal('upstream says: turn three');
      expect(three.previous_response_id).to.equal(two.id);
      expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
        { role: 'system', content: 'Third instructions.' },
        { role: 'user', content: 'turn one' },
        { role: 'assistant', content: 'upstream says: turn one' },
        { role: 'user', content: 'turn two' },
        { role: 'assistant', content: 'upstream says: turn two' },
        { role: 'user', content: 'turn three' },
      ]);
      // A fourth turn from the streamed third.
      await client.responses.create({ model: 'gpt-4o-mini', input: 'turn four', previous_response_id: three.id });
      expect((fake.last().body as { messages: unknown[] }).messages).to.have.length(7);
    });

    it("turns the upstream's reasoning_content into a reasoning item (JSON and streamed), which another back end is not given", async () => {
      fake.handle('POST /v1/chat/completions', (_req, res, body) => {
        const usage = { prompt_tokens: 8, completion_tokens: 6, total_tokens: 14, completion_tokens_details: { reasoning_tokens: 4 } };
        if (body?.stream !== true) {
          return json(res, 200, {
            id: 'c1',
            object: 'chat.completion',
            created: 1,
            model: 'gpt-4o-mini',
            choices: [{ index: 0, message: { role: 'assistant', content: 'Four.', reasoning_content: 'two plus two' }, finish_reason: 'stop' }],
            usage,
          });
        }
        sse(res);
        const send = (delta: unknown, finish: string | null = null) => writeChunk(res, delta, finish);
        send({ role: 'assistant', reasoning_content: 'two plus ' });
        send({ reasoning_content: 'two' });
        send({ content: 'Four.' });
        send({}, 'stop');
        res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [], usage })}\n\n`);
        res.end('data: [DONE]\n\n');
      });
      const plain = await client.responses.create({ model: 'gpt-4o-mini', input: '2+2?', reasoning: { effort: 'medium', summary: 'auto' } });
      expect(plain.output.map((o) => o.type)).to.deep.equal(['reasoning', 'message']);
      expect((plain.output[0] as OpenAI.Responses.ResponseReasoningItem).summary).to.deep.equal([{ type: 'summary_text', text: 'two plus two' }]);
      expect(plain.usage!.output_tokens_details).to.deep.equal({ reasoning_tokens: 4 });
      const stream = await client.responses.create({ model: 'gpt-4o-mini', input: '2+2?', stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      expect(shape(events)).to.deep.equal([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.reasoning_summary_part.added',
        'response.reasoning_summary_text.delta',
        'response.reasoning_summary_text.done',
        'response.reasoning_summary_part.done',
        'response.output_item.done',
        ...TEXT_STREAM.slice(2),
      ]);
      // Continued on a back end that did not make it: the reasoning item stays behind.
      await client.responses.create({ model: 'gpt-5-native', input: 'and 3+3?', previous_response_id: plain.id });
      const sent = nativeFake.last().body as { input: Array<{ type?: string }> };
      expect(sent.input.map((item) => item.type)).to.deep.equal(['message', 'message', 'message']);
    });

    it('maps text.format json_schema to response_format', async () => {
      await client.responses.create({
        model: 'gpt-4o-mini',
        input: 'json please',
        text: { format: { type: 'json_schema', name: 'answer', schema: { type: 'object', properties: {} }, strict: true } },
      });
      expect(fake.last().body).to.deep.include({
        response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: {} }, strict: true } },
      });
    });

    it('text.verbosity goes up as verbosity; include message.output_text.logprobs brings the tokens back in output_text.logprobs, JSON and streamed', async () => {
      // Two tokens, each with its two likeliest alternatives, as chat completions gives them.
      const tokens = [
        { token: 'Hi', logprob: -0.01, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.01, bytes: [72, 105] }, { token: 'Hey', logprob: -4.6, bytes: [72, 101, 121] }] },
        { token: '!', logprob: -0.2, bytes: [33], top_logprobs: [{ token: '!', logprob: -0.2, bytes: [33] }, { token: '.', logprob: -1.7, bytes: [46] }] },
      ];
      fake.handle('POST /v1/chat/completions', (_req, res, body) => {
        // As OpenAI: log probabilities only when asked for.
        const logprobs = body?.logprobs === true ? { content: tokens, refusal: null } : null;
        if (body?.stream !== true) {
          json(res, 200, {
            id: 'c1', object: 'chat.completion', created: 1, model: 'gpt-4o-mini',
            choices: [{ index: 0, message: { role: 'assistant', content: 'Hi!' }, logprobs, finish_reason: 'stop' }],
            usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
          });
          return;
        }
        sse(res);
        const chunk = (delta: object, logprobs: unknown, finish: string | null = null) =>
          `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, logprobs, finish_reason: finish }] })}\n\n`;
        res.write(chunk({ role: 'assistant', content: '' }, null));
        res.write(chunk({ content: 'Hi' }, { content: [tokens[0]], refusal: null }));
        res.write(chunk({ content: '!' }, { content: [tokens[1]], refusal: null }));
        res.end(`${chunk({}, null, 'stop')}data: [DONE]\n\n`);
      });
      const asked = { model: 'gpt-4o-mini', input: 'greet me', text: { verbosity: 'low' as const }, include: ['message.output_text.logprobs' as const], top_logprobs: 2 };
      const { data: whole, response } = await client.responses.create(asked).withResponse();
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      expect(fake.last().body).to.deep.include({ verbosity: 'low', logprobs: true, top_logprobs: 2 });
      expect(fake.last().body).to.not.have.property('text');
      const text = (whole.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
      expect(text.text).to.equal('Hi!');
      expect(text.logprobs).to.deep.equal(tokens);
      expect(whole.text).to.deep.include({ verbosity: 'low' });
      expect(whole.top_logprobs).to.equal(2);

      const stream = await client.responses.create({ ...asked, stream: true });
      const deltas: unknown[] = [];
      let done: unknown;
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of stream) {
        if (event.type === 'response.output_text.delta') deltas.push(event.logprobs);
        if (event.type === 'response.output_text.done') done = event.logprobs;
        if (event.type === 'response.completed') completed = event.response;
      }
      expect(fake.last().body).to.deep.include({ stream: true, verbosity: 'low', logprobs: true, top_logprobs: 2 });
      expect(deltas).to.deep.equal([[tokens[0]], [tokens[1]]]);
      expect(done).to.deep.equal(tokens);
      expect(((completed!.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).logprobs).to.deep.equal(tokens);

      // Without include, no logprobs are asked for, and output_text.logprobs stays empty.
      const plain = await client.responses.create({ model: 'gpt-4o-mini', input: 'greet me', top_logprobs: 2 });
      expect(fake.last().body).to.not.have.any.keys('logprobs', 'top_logprobs', 'verbosity');
      const plainText = (plain.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText;
      expect(plainText.text).to.equal('Hi!');
      expect(plainText.logprobs).to.deep.equal([]);
    });
  });

    it("streams interleaved tool calls with each call's own arguments in its done events (SDK stream helper)", async () => {
      fake.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        const send = (delta: unknown, finish: string | null = null) => writeChunk(res, delta, finish);
        // Both calls begin before either's arguments arrive: valid chat streaming, keyed by index.
        send({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] });
        send({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '' } }] });
        send({ tool_calls: [{ index: 0, function: { arguments: '{"city":"Paris"}' } }] });
        send({ tool_calls: [{ index: 1, function: { arguments: '{"city":"Rome"}' } }] });
        send({}, 'tool_calls');
        res.end('data: [DONE]\n\n');
      });
      const stream = client.responses.stream({ model: 'gpt-4o-mini', input: 'weather in two cities?', tools: [weatherTool] });
      const done: Array<[string, string]> = [];
      stream.on('response.output_item.done', (event) => {
        const item = event.item as OpenAI.Responses.ResponseFunctionToolCall;
        done.push([item.call_id, item.arguments]);
      });
      const final = await stream.finalResponse();
      expect(done).to.deep.equal([
        ['call_a', '{"city":"Paris"}'],
        ['call_b', '{"city":"Rome"}'],
      ]);
      expect(final.output.map((o) => (o as OpenAI.Responses.ResponseFunctionToolCall).arguments)).to.deep.equal(['{"city":"Paris"}', '{"city":"Rome"}']);
    });

    it('a stream the back end breaks off ends with response.failed: the response as far as it got, status failed, its error', async () => {
      fake.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        const send = (delta: unknown, finish: string | null = null) => writeChunk(res, delta, finish);
        send({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_x', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] });
        send({ content: 'Half an ans' });
        // The connection dies mid-answer, once what was written has reached the socket.
        res.socket!.write('', () => res.socket!.destroy());
      });
      const stream = await client.responses.create({ model: 'gpt-4o-mini', input: 'break', tools: [weatherTool], stream: true });
      const events: Event[] = [];
      for await (const event of stream) events.push(event as unknown as Event);
      expectSequenced(events);
      const last = events[events.length - 1] as unknown as { type: string; response: OpenAI.Responses.Response };
      expect(last.type).to.equal('response.failed');
      expect(last.response.status).to.equal('failed');
      expect(last.response.error).to.deep.include({ code: 'server_error' });
      expect(last.response.error!.message).to.match(/upstream/i);
      expect(last.response.id).to.equal((events[0] as unknown as { response: { id: string } }).response.id);
      // The call finished before the text began; the text's message never finished.
      expect(last.response.output.map((o) => o.type)).to.deep.equal(['function_call']);
      expect(events.some((e) => e.type === 'response.output_text.delta')).to.equal(true);
    });

    it("a custom (freeform) tool, as Codex's apply_patch: a function taking its input upstream, and its calls back as custom_tool_call items, JSON and streamed", async () => {
      const patch = '*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch';
      const args = JSON.stringify({ input: patch });
      fake.handle('POST /v1/chat/completions', (_req, res, body) => {
        const call = { id: 'call_patch', type: 'function', function: { name: 'apply_patch', arguments: args } };
        if (body?.stream !== true) {
          return json(res, 200, { id: 'c4', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [call] }, finish_reason: 'tool_calls' }] });
        }
        sse(res);
        const send = (delta: unknown, finish: string | null = null) => writeChunk(res, delta, finish);
        send({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_patch', type: 'function', function: { name: 'apply_patch', arguments: '' } }] });
        for (const piece of [args.slice(0, 10), args.slice(10, 30), args.slice(30)]) send({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
        send({}, 'tool_calls');
        res.end('data: [DONE]\n\n');
      });
      const tools = [{ type: 'custom' as const, name: 'apply_patch', description: 'Edit files with a patch.' }];
      const { data: plainResponse, response: raw } = await client.responses.create({ model: 'gpt-4o-mini', input: 'add a.txt', tools, tool_choice: 'auto' }).withResponse();
      expect(raw.headers.get('x-switchyard-losses')).to.equal(null);
      expect((fake.last().body as { tools: unknown[] }).tools).to.deep.equal([
        {
          type: 'function',
          function: {
            name: 'apply_patch',
            description: 'Edit files with a patch.',
            parameters: { type: 'object', properties: { input: { type: 'string', description: 'The raw text input of the tool.' } }, required: ['input'], additionalProperties: false },
          },
        },
      ]);
      expect(plainResponse.output).to.have.length(1);
      expect(plainResponse.output[0]).to.deep.include({ type: 'custom_tool_call', call_id: 'call_patch', name: 'apply_patch', input: patch });

      const stream = client.responses.stream({ model: 'gpt-4o-mini', input: 'add a.txt', tools });
      const seen: string[] = [];
      stream.on('event', (event) => seen.push(event.type));
      const final = await stream.finalResponse();
      expect(seen).to.include('response.custom_tool_call_input.done');
      expect(seen).to.not.include('response.function_call_arguments.delta');
      expect(final.output[0]).to.deep.include({ type: 'custom_tool_call', call_id: 'call_patch', name: 'apply_patch', input: patch });
    });

    it("carries Codex's shell and freeform tool calls as function calls, so their outputs are answers the back end accepts; an output of a dropped call is a loss", async () => {
      const response = await client.responses.create({
        model: 'gpt-4o-mini',
        store: false,
        input: [
          { role: 'user', content: 'list the files, then patch one' },
          { type: 'local_shell_call', id: 'lsh_1', call_id: 'call_ls', status: 'completed', action: { type: 'exec', command: ['ls'], env: {} } },
          { type: 'function_call_output', call_id: 'call_ls', output: 'a.txt' },
          { type: 'custom_tool_call', call_id: 'call_patch', name: 'apply_patch', input: '*** Begin Patch' },
          { type: 'custom_tool_call_output', call_id: 'call_patch', output: 'Done!' },
          { type: 'web_search_call', id: 'ws_1', status: 'completed' },
          { type: 'function_call_output', call_id: 'call_web', output: 'orphan' },
          { role: 'user', content: 'thanks' },
        ] as unknown as OpenAI.Responses.ResponseInput,
      });
      expect(response.output_text).to.equal('upstream says: thanks');
      expect((fake.last().body as { messages: unknown[] }).messages).to.deep.equal([
        { role: 'user', content: 'list the files, then patch one' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_ls', type: 'function', function: { name: 'local_shell', arguments: '{"type":"exec","command":["ls"],"env":{}}' } }] },
        { role: 'tool', tool_call_id: 'call_ls', content: 'a.txt' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_patch', type: 'function', function: { name: 'apply_patch', arguments: '{"input":"*** Begin Patch"}' } }] },
        { role: 'tool', tool_call_id: 'call_patch', content: 'Done!' },
        { role: 'user', content: 'thanks' },
      ]);
      const { response: raw } = await client.responses.create({ model: 'gpt-4o-mini', input: [{ type: 'function_call_output', call_id: 'nowhere', output: 'x' }, { role: 'user', content: 'hi' }] as unknown as OpenAI.Responses.ResponseInput }).withResponse();
      expect(raw.headers.get('x-switchyard-losses')).to.equal('input.function_call_output');
    });

  describe('against the anthropic provider (through the chat bridge)', () => {
    it('thinking becomes a reasoning item whose encrypted_content is the signature, handed back on the next turn', async () => {
      const reply = anthropicMessage([
        { type: 'thinking', thinking: 'ponder this', signature: 'sig-abc' },
        { type: 'text', text: 'Hello from Claude.' },
      ]);
      claude.script((body) => (body.stream === true ? { events: eventsOf(reply) } : { json: reply }));
      const one = await client.responses.create({ model: 'claude-fake-1', input: 'hi claude', reasoning: { effort: 'low' } });
      expect(one.output.map((o) => o.type)).to.deep.equal(['reasoning', 'message']);
      // The signature, tagged with the type of back end that made it (only such a back end is handed it back).
      expect(one.output[0]).to.deep.include({ summary: [{ type: 'summary_text', text: 'ponder this' }], encrypted_content: 'sy1.sig.anthropic.sig-abc' });
      expect(one.output_text).to.equal('Hello from Claude.');
      expect(one.usage).to.deep.include({ input_tokens: 11 + 2 + 5, output_tokens: 7 });
      expect(claude.last().body).to.have.property('thinking');

      const two = await client.responses.stream({ model: 'claude-fake-1', input: 'again', previous_response_id: one.id }).finalResponse();
      expect(two.output[0]).to.deep.include({ type: 'reasoning', encrypted_content: 'sy1.sig.anthropic.sig-abc' });
      expect(claude.last().body!.messages).to.deep.equal([
        { role: 'user', content: 'hi claude' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'ponder this', signature: 'sig-abc' },
            { type: 'text', text: 'Hello from Claude.' },
          ],
        },
        { role: 'user', content: 'again' },
      ]);
    });

    it("a tool output's image reaches Claude inside its tool_result (which call returned it stays known), its text beside it", async () => {
      claude.script(() => ({ json: anthropicMessage([{ type: 'text', text: 'a red dot' }]) }));
      const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
      await client.responses.create({
        model: 'claude-fake-1',
        input: [
          { role: 'user', content: 'take a screenshot' },
          { type: 'function_call', call_id: 'call_shot', name: 'screenshot', arguments: '{}' },
          { type: 'function_call_output', call_id: 'call_shot', output: [{ type: 'input_text', text: 'the screen:' }, { type: 'input_image', image_url: `data:image/png;base64,${png}`, detail: 'auto' }] },
        ] as unknown as OpenAI.Responses.ResponseInput,
        tools: [{ type: 'function', name: 'screenshot', parameters: { type: 'object', properties: {} }, strict: false }],
      });
      const messages = claude.last().body!.messages as any[];
      expect(messages).to.have.length(3);
      expect(messages[2]).to.deep.equal({
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'call_shot',
            content: [
              { type: 'text', text: 'the screen:' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
            ],
          },
        ],
      });
    });

    it("a replayed reasoning item (store: false) is handed back with its signature only to the type of back end that made it; another's is left out, named", async () => {
      claude.script(() => ({ json: anthropicMessage([{ type: 'text', text: 'ok' }]) }));
      const replay = (encrypted: string) =>
        client.responses
          .create({
            model: 'claude-fake-1',
            store: false,
            reasoning: { effort: 'low' },
            input: [
              { role: 'user', content: 'hi' },
              { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'pondering' }], encrypted_content: encrypted },
              { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hello', annotations: [] }] } as never,
              { role: 'user', content: 'go on' },
            ] as unknown as OpenAI.Responses.ResponseInput,
          })
          .withResponse();
      const own = await replay('sy1.sig.anthropic.sig-own');
      expect((claude.last().body!.messages as any[])[1].content[0]).to.deep.equal({ type: 'thinking', thinking: 'pondering', signature: 'sig-own' });
      expect(own.response.headers.get('x-switchyard-losses') ?? '').to.not.include('reasoning_signature.other_back_end');
      // Gemini's, replayed to Claude (a fallback, or the client switching models): Anthropic would refuse it.
      const foreign = await replay('sy1.sig.gemini.R1NJRw==');
      expect(JSON.stringify(claude.last().body!.messages)).to.not.include('R1NJRw==');
      expect(foreign.response.headers.get('x-switchyard-losses')?.split(',')).to.include('reasoning_signature.other_back_end');
      // Untagged: OpenAI's own (a back end with the Responses API of its own, relayed as it was), which Anthropic would refuse too.
      const openai = await replay('gAAAAB-openai-own');
      expect(JSON.stringify(claude.last().body!.messages)).to.not.include('gAAAAB-openai-own');
      expect(openai.response.headers.get('x-switchyard-losses')?.split(',')).to.include('reasoning_signature.other_back_end');
    });
  });

  describe('against a back end with the Responses API itself (responsesApi: true)', () => {
    it('passes the body up with the back end model name and relays the answer byte for byte', async () => {
      const body = { model: 'native-alias', input: 'hi native', instructions: 'Be native.', tools: [{ type: 'web_search_preview' }], include: ['reasoning.encrypted_content'] };
      const res = await post(gw.url, '/v1/responses', body);
      expect(res.status).to.equal(200);
      expect(res.text).to.equal(native.sent[0]);
      expect(res.headers.get('x-switchyard-losses')).to.equal(null);
      const sent = nativeFake.last();
      expect(sent.url).to.equal('/v1/responses');
      expect(sent.body).to.deep.equal({ ...body, model: 'gpt-5-native' });
      const response = await client.responses.create({ model: 'native-alias', input: 'through the client' });
      expect(response.output_text).to.equal('native says: through the client');
      expect(response.usage).to.deep.equal(NATIVE_USAGE);
    });

    it('background: true runs in the foreground, named lost (the gateway serves no GET /v1/responses/{id} to read a queued response from)', async () => {
      const res = await post(gw.url, '/v1/responses', { model: 'native-alias', input: 'in the background', background: true });
      expect(res.status).to.equal(200);
      expect(nativeFake.last().body).to.not.have.property('background');
      expect(res.headers.get('x-switchyard-losses')).to.equal('background');
      expect((JSON.parse(res.text) as { status: string }).status).to.equal('completed');
    });

    it("a replayed reasoning item another back end made (its signature tagged sy1.sig.) is left out of what goes to OpenAI, named; OpenAI's own go as they came", async () => {
      const input = [
        { role: 'user', content: 'hi' },
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'sy1.sig.anthropic.sig-abc' },
        { type: 'reasoning', id: 'rs_2', summary: [], encrypted_content: 'gAAAAB-openai-own' },
        { role: 'user', content: 'go on' },
      ];
      const res = await post(gw.url, '/v1/responses', { model: 'native-alias', store: false, input });
      expect(res.status).to.equal(200);
      expect((nativeFake.last().body as { input: unknown[] }).input).to.deep.equal([input[0], input[2], input[3]]);
      expect(res.headers.get('x-switchyard-losses')).to.equal('reasoning.other_back_end');
    });

    it('a conversation replayed with store: false that began on another back end: the ids the gateway gave its items do not go to OpenAI, which made none of them; its own ids do', async () => {
      const first = await client.responses.create({ model: 'mock-chat', input: 'hi', store: false });
      const made = first.output[0] as { id: string };
      expect(made.id).to.match(/^msg_sy[0-9a-f]{32}$/);
      const own = { id: 'msg_0de7178170ebf7c1016932eaf3248c8193ba477393a000306e', type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'earlier', annotations: [] }] };
      const input = [{ role: 'user', content: 'hi' }, ...first.output, own, { role: 'user', content: 'go on' }];
      const res = await post(gw.url, '/v1/responses', { model: 'native-alias', store: false, input });
      expect(res.status, res.text).to.equal(200);
      const { id: _id, ...withoutId } = made as Record<string, unknown>;
      expect((nativeFake.last().body as { input: unknown[] }).input).to.deep.equal([input[0], withoutId, own, input[3]]);
      expect(res.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it('a stream whose back end is cut right after its headers goes to the next target: the client sees only the answer', async () => {
      fake.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        res.flushHeaders();
        setImmediate(() => res.socket?.destroy());
      });
      const stream = await client.responses.create({ model: 'chat-then-mock', input: 'fall back please', stream: true });
      const types: string[] = [];
      let text = '';
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.output_text.delta') text += event.delta;
      }
      expect(fake.received).to.have.length(1);
      expect(text).to.equal('fall back please');
      expect(types[0]).to.equal('response.created');
      expect(types.at(-1)).to.equal('response.completed');
      expect(types).to.not.include('response.failed');
    });

    it('a chat back end that reports no usage: the client gets the counted usage the ledger charges, JSON and streamed', async () => {
      fake.handle('POST /v1/chat/completions', (_req, res, body) => {
        const words = 'one two three four five';
        if (body?.stream !== true) {
          json(res, 200, { id: 'c1', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: words }, finish_reason: 'stop' }] });
          return;
        }
        sse(res);
        const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.write(chunk({ role: 'assistant', content: '' }));
        for (const [i, word] of words.split(' ').entries()) res.write(chunk({ content: i === 0 ? word : ` ${word}` }));
        res.end(`${chunk({}, 'stop')}data: [DONE]\n\n`);
      });
      const { data: whole, response } = await client.responses.create({ model: 'gpt-4o-mini', input: 'count to five' }).withResponse();
      expect(whole.usage?.output_tokens).to.equal(5);
      expect(whole.usage?.input_tokens).to.be.greaterThan(0);
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect([row.source, row.promptTokens, row.completionTokens]).to.deep.equal(['estimated', whole.usage!.input_tokens, 5]);
      const stream = await client.responses.create({ model: 'gpt-4o-mini', input: 'count to five', stream: true });
      let completed: OpenAI.Responses.Response | undefined;
      const types: string[] = [];
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === 'response.completed') completed = event.response;
      }
      expect(types.at(-1)).to.equal('response.completed');
      expect(types.filter((t) => t === 'response.completed')).to.have.length(1);
      expect(completed!.usage?.output_tokens).to.equal(5);
      expect(completed!.output_text ?? completed!.output.length).to.not.equal(undefined);
    });

    for (const [what, failure] of [
      ['an error event', { type: 'error', code: 'rate_limit_exceeded', message: 'Rate limit reached', param: null }],
      ['response.failed', { type: 'response.failed', response: { id: 'resp_x', object: 'response', status: 'failed', error: { code: 'server_error', message: 'The server had an error' }, output: [] } }],
    ] as const) {
      it(`a native stream whose first event after response.created is ${what} goes to the next target; the client sees only the answer`, async () => {
        nativeFake.handle('POST /v1/responses', (_req, res) => {
          sse(res);
          const base = { id: 'resp_x', object: 'response', status: 'in_progress', output: [] };
          res.write(`event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: base })}\n\n`);
          res.write(`event: response.in_progress\ndata: ${JSON.stringify({ type: 'response.in_progress', sequence_number: 1, response: base })}\n\n`);
          res.end(`event: ${failure.type}\ndata: ${JSON.stringify({ ...failure, sequence_number: 2 })}\n\n`);
        });
        const stream = await client.responses.create({ model: 'native-then-mock', input: 'fall back please', stream: true });
        const types: string[] = [];
        let text = '';
        for await (const event of stream) {
          types.push(event.type);
          if (event.type === 'response.output_text.delta') text += event.delta;
        }
        expect(text).to.equal('fall back please');
        expect(types.at(-1)).to.equal('response.completed');
        expect(types.filter((t) => t === 'response.created')).to.have.length(1);
        expect(types).to.not.include('response.failed');
        expect(types).to.not.include('error');
      });
    }

    it("a native stream that fails for the request's own fault (invalid_prompt): a 400 with its message and code, before or after the answer began; the back end stays in service for everyone", async () => {
      const base = { id: 'resp_bad', object: 'response', status: 'in_progress', output: [] };
      const failed = { type: 'response.failed', response: { ...base, status: 'failed', error: { code: 'invalid_prompt', message: 'Invalid prompt: your prompt was flagged as potentially violating our usage policy.' } } };
      let midway = false;
      nativeFake.handle('POST /v1/responses', (_req, res) => {
        sse(res);
        const events: object[] = [{ type: 'response.created', response: base }, { type: 'response.in_progress', response: base }];
        if (midway) {
          const item = { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] };
          events.push(
            { type: 'response.output_item.added', output_index: 0, item },
            { type: 'response.content_part.added', item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
            { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Sure, ' },
          );
        }
        events.push(failed);
        res.end(events.map((e, i) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`).join(''));
      });
      // More than the breaker's three failures in a row: none of them is held against the back end.
      for (let i = 0; i < 4; i++) {
        const error = (await client.responses.create({ model: 'native-alias', input: 'something flagged', stream: true }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
        expect(error).to.be.instanceOf(OpenAI.BadRequestError);
        expect(error.message).to.include('Invalid prompt').and.to.include('invalid_prompt');
        expect(error.message).to.not.include(nativeFake.url);
      }
      midway = true;
      const stream = await client.responses.create({ model: 'native-alias', input: 'something flagged', stream: true });
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of stream) events.push(event);
      const last = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
      expect(last.type).to.equal('response.failed');
      expect(last.response.error?.code).to.not.equal('server_error');
      expect(last.response.error?.message).to.include('Invalid prompt').and.to.include('invalid_prompt');
      nativeFake.reset();
      native = installNativeResponses(nativeFake);
      const fine = await other.responses.create({ model: 'native-alias', input: 'a harmless question' });
      expect(fine.output_text).to.equal('native says: a harmless question');
    });

    it("a native stream's failure keeps the codes clients act on: context_length_exceeded (Codex compacts), insufficient_quota as the back end's account, a rate limit's wait as Retry-After", async () => {
      const base = { id: 'resp_f', object: 'response', status: 'in_progress', output: [] };
      let error: Record<string, unknown> = {};
      let midway = false;
      nativeFake.handle('POST /v1/responses', (_req, res) => {
        sse(res);
        const events: object[] = [{ type: 'response.created', response: base }];
        if (midway) {
          const item = { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] };
          events.push(
            { type: 'response.output_item.added', output_index: 0, item },
            { type: 'response.content_part.added', item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
            { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Reading ' },
          );
        }
        events.push({ type: 'response.failed', response: { ...base, status: 'failed', error } });
        res.end(events.map((e, i) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`).join(''));
      });
      const fail = async () => (await client.responses.create({ model: 'gpt-5-faults', input: 'a long conversation', stream: true }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      error = { code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model. Please adjust your input and try again.' };
      const tooLong = await fail();
      expect(tooLong.status).to.equal(400);
      expect(tooLong.code).to.equal('context_length_exceeded');
      midway = true;
      const events: OpenAI.Responses.ResponseStreamEvent[] = [];
      for await (const event of await client.responses.create({ model: 'gpt-5-faults', input: 'a long conversation', stream: true })) events.push(event);
      const last = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
      expect(last.type).to.equal('response.failed');
      expect(last.response.error?.code).to.equal('context_length_exceeded');
      midway = false;
      error = { code: 'insufficient_quota', message: 'You exceeded your current quota, please check your plan and billing details.' };
      const broke = await fail();
      expect(broke.status).to.equal(429);
      expect((broke.error as Record<string, unknown>).type).to.equal('insufficient_quota');
      expect(broke.headers?.get('x-should-retry')).to.equal('false');
      error = { code: 'rate_limit_exceeded', message: 'Rate limit reached for gpt-5 in organization org-x on tokens per min (TPM). Please try again in 1.5s.' };
      const limited = await fail();
      expect(limited.status).to.equal(429);
      expect(limited.headers?.get('retry-after')).to.equal('2');
      nativeFake.reset();
      native = installNativeResponses(nativeFake);
    });

    it("a reasoning item a gateway made from a chat back end's answer (its id rs_sy…, unsigned) is not replayed to OpenAI, which could not know it; named", async () => {
      const input = [
        { role: 'user', content: 'hi' },
        { type: 'reasoning', id: `rs_sy${'0'.repeat(32)}`, summary: [{ type: 'summary_text', text: 'think' }] },
        { role: 'user', content: 'go on' },
      ];
      const res = await post(gw.url, '/v1/responses', { model: 'native-alias', store: false, input });
      expect(res.status, res.text).to.equal(200);
      expect((nativeFake.last().body as { input: unknown[] }).input).to.deep.equal([input[0], input[2]]);
      expect(res.headers.get('x-switchyard-losses')).to.equal('reasoning.other_back_end');
    });

    it("a bridged attempt that failed names no losses: the native back end that answered got the whole body", async () => {
      fake.handle('POST /v1/chat/completions', (_req, res) => json(res, 500, { error: { message: 'down', type: 'server_error' } }));
      const body = { model: 'chat-then-native', input: 'hi', tools: [{ type: 'web_search_preview' }], text: { verbosity: 'low' } };
      const res = await post(gw.url, '/v1/responses', body);
      expect(res.status, res.text).to.equal(200);
      expect(fake.received).to.have.length(1);
      expect(nativeFake.last().body).to.deep.equal({ ...body, model: 'gpt-5-native' });
      expect(res.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it('a bridged stream that fails before its first answer names no losses either, when a native back end answers it', async () => {
      fake.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        res.flushHeaders();
        setImmediate(() => res.socket?.destroy());
      });
      const res = await fetch(`${gw.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
        body: JSON.stringify({ model: 'chat-then-native', input: 'hi', truncation: 'auto', stream: true }),
      });
      const text = await res.text();
      expect(res.status, text).to.equal(200);
      expect(text).to.include('response.completed');
      expect(fake.received).to.have.length(1);
      expect(res.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it("continuing another back end's turn: the native back end gets the history, and its answer names the previous response as the client gave it", async () => {
      const first = await client.responses.create({ model: 'mock-chat', input: 'remember the word kiwi' });
      const second = await client.responses.create({ model: 'native-alias', input: 'which word?', previous_response_id: first.id });
      expect(nativeFake.last().body).to.not.have.property('previous_response_id');
      expect(second.previous_response_id).to.equal(first.id);
      const stream = await client.responses.create({ model: 'native-alias', input: 'again?', previous_response_id: first.id, stream: true });
      const seen: Array<string | null | undefined> = [];
      for await (const event of stream) {
        if (event.type === 'response.created' || event.type === 'response.completed') seen.push(event.response.previous_response_id);
      }
      expect(seen).to.deep.equal([first.id, first.id]);
    });

    it('relays a stream event for event, the data lines exactly as the back end wrote them', async () => {
      const res = await post(gw.url, '/v1/responses', { model: 'gpt-5-native', input: 'stream natively', stream: true });
      expect(res.status).to.equal(200);
      expect(res.text).to.equal(native.sent[0]);
      expect(nativeFake.last().body).to.include({ stream: true, model: 'gpt-5-native' });
      const stream = client.responses.stream({ model: 'gpt-5-native', input: 'helper' });
      const final = await stream.finalResponse();
      expect(final.output_text).to.equal('native says: helper');
    });

    it('meters the usage of a native answer, JSON and streamed (cached and reasoning tokens)', async () => {
      const plain = await post(gw.url, '/v1/responses', { model: 'gpt-5-native', input: 'meter me' });
      const row = await usageRow(gw, plain.headers.get('x-request-id')!);
      expect(row).to.include({ operation: 'responses', provider: 'native', promptTokens: 21, completionTokens: 5, cachedTokens: 4, reasoningTokens: 2, source: 'provider' });
      const streamed = await post(gw.url, '/v1/responses', { model: 'gpt-5-native', input: 'meter me', stream: true });
      const streamedRow = await usageRow(gw, streamed.headers.get('x-request-id')!);
      expect(streamedRow).to.include({ operation: 'responses', promptTokens: 21, completionTokens: 5, cachedTokens: 4, reasoningTokens: 2, source: 'provider' });
    });

    it('passes previous_response_id on as it is when that back end made the response', async () => {
      const one = await client.responses.create({ model: 'gpt-5-native', input: 'first' });
      const streamOne = await client.responses.stream({ model: 'gpt-5-native', input: 'second', previous_response_id: one.id }).finalResponse();
      expect(nativeFake.last().body).to.deep.include({ previous_response_id: one.id, input: 'second' });
      await client.responses.create({ model: 'gpt-5-native', input: 'third', previous_response_id: streamOne.id });
      expect(nativeFake.last().body).to.deep.include({ previous_response_id: streamOne.id, input: 'third' });
    });

    it('a back end that no longer has the previous response: the client gets previous_response_not_found, and another target answers from the history the gateway kept', async () => {
      const one = await client.responses.create({ model: 'gpt-5-native', input: 'first' });
      // The back end forgets it (OpenAI keeps responses for a while; a restarted server keeps none).
      native.made.clear();
      const error = (await client.responses.create({ model: 'gpt-5-native', input: 'second', previous_response_id: one.id }).catch((e: unknown) => e)) as ApiError;
      expect(error.status).to.equal(400);
      expect(error.error).to.deep.include({ code: 'previous_response_not_found', param: 'previous_response_id' });
      expect(error.message).to.contain(one.id);
      // With a target after it, that one answers with the conversation so far.
      const two = await client.responses.create({ model: 'native-then-mock', input: 'second', previous_response_id: one.id });
      expect(two.status).to.equal('completed');
    });

    it('gives it the history (no previous_response_id) when another back end made the previous response', async () => {
      const one = await client.responses.create({ model: 'mock-chat', input: 'said to the mock' });
      const two = await client.responses.create({ model: 'gpt-5-native', input: 'now to native', previous_response_id: one.id });
      expect(two.output_text).to.equal('native says: now to native');
      const sent = nativeFake.last().body!;
      expect(sent).to.not.have.property('previous_response_id');
      expect(sent.input).to.deep.equal([
        { type: 'message', role: 'user', content: 'said to the mock' },
        { type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'said to the mock', annotations: [], logprobs: [] }] },
        { type: 'message', role: 'user', content: 'now to native' },
      ]);
      // And back: the mock continues the native conversation from the gateway's copy.
      const three = await client.responses.create({ model: 'mock-chat', input: 'back to the mock', previous_response_id: two.id });
      expect(three.usage!.input_tokens).to.be.greaterThan(15);
    });

    it('refuses a previous_response_id this key never got from the gateway, before calling the back end', async () => {
      const error = (await client.responses.create({ model: 'gpt-5-native', input: 'x', previous_response_id: 'resp_native9999' }).catch((e) => e)) as ApiError;
      expect(error.status).to.equal(400);
      expect(error.error).to.deep.include({ code: 'previous_response_not_found', param: 'previous_response_id' });
      expect(nativeFake.received).to.have.length(0);
    });
  });

  describe('validation (400 with the param named)', () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['model missing', { input: 'x' }, 'model'],
      ['model not a string', { model: 5, input: 'x' }, 'model'],
      ['input neither string nor array', { model: 'mock-chat', input: 5 }, 'input'],
      ['input item not an object', { model: 'mock-chat', input: ['x'] }, 'input[0]'],
      ['message without content', { model: 'mock-chat', input: [{ role: 'user' }] }, 'input[0].content'],
      ['message with a bad role', { model: 'mock-chat', input: [{ role: 'robot', content: 'x' }] }, 'input[0].role'],
      ['function_call_output without call_id', { model: 'mock-chat', input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
      ['instructions not a string', { model: 'mock-chat', input: 'x', instructions: 7 }, 'instructions'],
      ['max_output_tokens not an integer', { model: 'mock-chat', input: 'x', max_output_tokens: 1.5 }, 'max_output_tokens'],
      ['max_output_tokens below 1', { model: 'mock-chat', input: 'x', max_output_tokens: 0 }, 'max_output_tokens'],
      ['temperature not a number', { model: 'mock-chat', input: 'x', temperature: 'hot' }, 'temperature'],
      ['temperature above 2', { model: 'mock-chat', input: 'x', temperature: 2.5 }, 'temperature'],
      ['top_p above 1', { model: 'mock-chat', input: 'x', top_p: 1.5 }, 'top_p'],
      ['stream not a boolean', { model: 'mock-chat', input: 'x', stream: 'yes' }, 'stream'],
      ['tools not an array', { model: 'mock-chat', input: 'x', tools: {} }, 'tools'],
      ['tool not an object', { model: 'mock-chat', input: 'x', tools: ['get_weather'] }, 'tools[0]'],
      ['function tool without a name', { model: 'mock-chat', input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
      ['tool_choice a number', { model: 'mock-chat', input: 'x', tool_choice: 3 }, 'tool_choice'],
      ['tool_choice an unknown string', { model: 'mock-chat', input: 'x', tool_choice: 'sometimes' }, 'tool_choice'],
      ['tool_choice required without tools (was: dropped, a text answer)', { model: 'mock-chat', input: 'x', tool_choice: 'required' }, 'tool_choice'],
      ['a named tool_choice with no tools', { model: 'mock-chat', input: 'x', tools: [], tool_choice: { type: 'function', name: 'f' } }, 'tool_choice'],
      ['reasoning not an object', { model: 'mock-chat', input: 'x', reasoning: 'high' }, 'reasoning'],
      ['reasoning.effort outside the enum', { model: 'mock-chat', input: 'x', reasoning: { effort: 'extreme' } }, 'reasoning.effort'],
      ['reasoning.summary not a string', { model: 'mock-chat', input: 'x', reasoning: { summary: 5 } }, 'reasoning.summary'],
      ['previous_response_id not a string', { model: 'mock-chat', input: 'x', previous_response_id: 12 }, 'previous_response_id'],
      ['truncation outside the enum', { model: 'mock-chat', input: 'x', truncation: 'sometimes' }, 'truncation'],
      ['store not a boolean', { model: 'mock-chat', input: 'x', store: 'no' }, 'store'],
      ['metadata value not a string', { model: 'mock-chat', input: 'x', metadata: { a: 1 } }, 'metadata.a'],
      ['text.format type unknown', { model: 'mock-chat', input: 'x', text: { format: { type: 'xml' } } }, 'text.format.type'],
      ['parallel_tool_calls not a boolean', { model: 'mock-chat', input: 'x', parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
      [
        'an input_image URL that is not http(s) or data:',
        { model: 'mock-chat', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'file:///etc/passwd' }] }] },
        'input[0].content[0].image_url',
      ],
    ];
    for (const [name, body, param] of cases) {
      it(`${name} -> 400, param ${param}`, async () => {
        const res = await post(gw.url, '/v1/responses', body);
        expect(res.status, res.text).to.equal(400);
        const error = (JSON.parse(res.text) as { error: { param: string; type: string } }).error;
        expect(error.type).to.equal('invalid_request_error');
        expect(error.param).to.equal(param);
      });
    }
  });
});

describe('POST /v1/responses: a budget counts the earlier turns a previous_response_id brings', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  const KEY = 'sk-responses-budget-000001';

  before(async () => {
    // Input costs 0.001 a token, output nothing: the key's 5 pays for about 5,000 tokens read.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: thrifty, key: ${KEY}, budget: 5 }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1000, output: 0 }
`);
  });
  after(async () => gw?.stop());

  it('refuses a turn whose conversation so far does not fit, though its own input is a word; a chat call of the same conversation is refused alike', async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    // The mock echoes the input: the first turn leaves about 2 x 1,250 tokens of conversation behind.
    const long = 'word '.repeat(1250).trim();
    const first = await client.responses.create({ model: 'mock-chat', input: long, max_output_tokens: 2000 });
    expect(first.status).to.equal('completed');
    await gw.gateway.stores.flush();
    const spent = (await gw.gateway.stores.keys.get('thrifty'))!.spent;
    expect(spent).to.be.within(1.2, 1.4);
    // Next turn: a word of its own, the two earlier messages (about 2,500 tokens, 2.5) in front
    // of it, twice over (2 x 2.5 > what is left, about 3.7).
    const second = await client.responses.create({ model: 'mock-chat', input: long.slice(0, 4), previous_response_id: first.id, max_output_tokens: 16 });
    expect(second.status).to.equal('completed');
    const third = await client.responses.create({ model: 'mock-chat', input: 'more', previous_response_id: second.id, max_output_tokens: 16 }).catch((e: unknown) => e);
    expect(third).to.be.instanceOf(OpenAI.RateLimitError);
    expect((third as InstanceType<typeof OpenAI.RateLimitError>).code).to.equal('insufficient_quota');
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.keys.get('thrifty'))!.spent).to.be.at.most(5);
  });
});

describe('POST /v1/responses: a tokens-per-minute limit counts the earlier turns a native back end keeps', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let nativeFake: FakeOpenAI;
  const OWN = 'sk-responses-tpm-0000001';
  const DEFAULTED = 'sk-responses-tpm-0000002';

  before(async () => {
    nativeFake = new FakeOpenAI('sk-native-upstream-secret-55');
    await nativeFake.start();
    installNativeResponses(nativeFake);
    // Neither key has a budget: only their tokens per minute count the prompt, one the key's own,
    // the other the plugin's default.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, { name: rate-limit, options: { tpm: 1000000 } }, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: own, key: ${OWN}, tpm: 100000 }, { name: defaulted, key: ${DEFAULTED} }]
providers:
  - { id: native, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-native] }
`);
  });
  after(async () => {
    await gw?.stop();
    await nativeFake?.stop();
  });

  for (const [name, key, limit] of [
    ['its own', OWN, 100_000],
    ['the plugin default', DEFAULTED, 1_000_000],
  ] as const) {
    it(`a key with ${name} tokens per minute and no budget: the second turn's estimate holds the first turn, which the back end keeps and bills, not only its own word`, async () => {
      const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const turn = 'hello world '.repeat(400);
      const one = await client.responses.create({ model: 'gpt-5-native', input: turn, max_output_tokens: 16 });
      const two = await client.responses.create({ model: 'gpt-5-native', input: 'again', max_output_tokens: 16, previous_response_id: one.id }).withResponse();
      // The back end was given the id, not the history: it keeps the conversation itself.
      expect(nativeFake.last().body).to.deep.include({ previous_response_id: one.id, input: 'again' });
      expect(two.response.headers.get('x-ratelimit-limit-tokens')).to.equal(String(limit));
      // What the second turn reserved: the first turn's input and answer (about 1,200 tokens each), its own word, its 16.
      const reserved = limit - Number(two.response.headers.get('x-ratelimit-remaining-tokens')) - one.usage!.total_tokens;
      expect(reserved).to.be.within(2 * 1200, 2 * 1200 + 100);
    });
  }
});

describe('POST /v1/responses: a native back end that reports no usage, for a key nobody counts before the call', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let nativeFake: FakeOpenAI;
  const KEY = 'sk-responses-unmetered-0001';

  before(async () => {
    nativeFake = new FakeOpenAI('sk-native-upstream-secret-66');
    await nativeFake.start();
    // A back end that keeps its conversations and reports no usage (some OpenAI-compatible servers).
    let made = 0;
    nativeFake.handle('POST /v1/responses', (_req, res, body) => {
      made++;
      const request = (body ?? {}) as Record<string, unknown>;
      const message = { id: `msg_${made}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'noted', annotations: [] }] };
      json(res, 200, { id: `resp_unmetered${made}`, object: 'response', created_at: 1_700_000_000, status: 'completed', error: null, incomplete_details: null, model: request.model, output: [message], previous_response_id: request.previous_response_id ?? null });
    });
    // No rate limit and no budget: nothing counts a call's prompt before it goes up.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: free, key: ${KEY} }]
providers:
  - { id: native, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-native] }
pricing:
  gpt-5-native: { input: 1, output: 1 }
`);
  });
  after(async () => {
    await gw?.stop();
    await nativeFake?.stop();
  });

  it("a later turn is charged the gateway's count of the earlier turns the back end keeps and bills, as a key with a budget is (it was charged its own input alone)", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const turn = 'hello world '.repeat(400);
    const one = await client.responses.create({ model: 'gpt-5-native', input: turn }).withResponse();
    const two = await client.responses.create({ model: 'gpt-5-native', input: 'again', previous_response_id: one.data.id }).withResponse();
    // The back end was given the id, not the history.
    expect(nativeFake.received.at(-1)!.body).to.deep.include({ previous_response_id: one.data.id, input: 'again' });
    const first = await usageRow(gw, one.response.headers.get('x-request-id')!);
    const second = await usageRow(gw, two.response.headers.get('x-request-id')!);
    expect(first.source).to.equal('estimated');
    expect(first.promptTokens).to.be.within(800, 1000);
    expect(second.source).to.equal('estimated');
    // The first turn's input and answer, and its own word.
    expect(second.promptTokens).to.be.within(first.promptTokens! + 1, first.promptTokens! + 30);
    expect(two.data.usage!.input_tokens).to.equal(second.promptTokens);
  });
});

describe("POST /v1/responses: a native stream's failure after the answer began, in OpenAI's codes", function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  let nativeFake: FakeOpenAI;
  const KEY = 'sk-responses-failed-000001';
  /** The back end's failure after its first words: a `response.failed`, or an `error` event. */
  let failure: { type: 'response.failed' | 'error'; error: Record<string, unknown>; usage?: Record<string, unknown>; early?: boolean };

  before(async () => {
    nativeFake = new FakeOpenAI('sk-native-upstream-secret-44');
    await nativeFake.start();
    nativeFake.handle('POST /v1/responses', (_req, res) => {
      sse(res);
      const base = { id: 'resp_mid', object: 'response', status: 'in_progress', output: [] };
      const item = { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] };
      const answer: object[] = [
        { type: 'response.output_item.added', output_index: 0, item },
        { type: 'response.content_part.added', item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } },
        { type: 'response.output_text.delta', item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Reading ' },
      ];
      const events: object[] = [
        { type: 'response.created', response: base },
        { type: 'response.in_progress', response: base },
        ...(failure.early ? [] : answer),
        failure.type === 'error'
          ? { type: 'error', ...failure.error, param: null }
          : { type: 'response.failed', response: { ...base, status: 'failed', error: failure.error, ...(failure.usage ? { usage: failure.usage } : {}) } },
      ];
      res.end(events.map((e, i) => `event: ${(e as { type: string }).type}\ndata: ${JSON.stringify({ ...e, sequence_number: i })}\n\n`).join(''));
    });
    // No breaker in the way: every call here fails on purpose.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
auth:
  keys: [{ name: failing, key: ${KEY} }]
providers:
  - { id: native, type: openai, responsesApi: true, baseUrl: ${nativeFake.url}/v1, apiKey: ${nativeFake.apiKey}, models: [gpt-5-native] }
`);
  });
  after(async () => {
    await gw?.stop();
    await nativeFake?.stop();
  });

  /** The stream's last event (through the official client) and the call's request-log row. */
  const failedStream = async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.responses.create({ model: 'gpt-5-native', input: 'read the repository', stream: true }).withResponse();
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const last = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
    expect(last.type).to.equal('response.failed');
    expect(last.response.status).to.equal('failed');
    const row = await logRow(gw, response.headers.get('x-request-id')!);
    return { error: last.response.error!, row, usage: last.response.usage };
  };
  /** How Codex reads a rate limit's wait from a failed response's message. */
  const codexDelay = (message: string) => /try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)/i.exec(message)?.slice(1, 3);

  it("a rate limit: rate_limit_exceeded with the wait in the words the client's retry reads (not the rest of the back end's message); the request log keeps upstream_rate_limited", async () => {
    failure = { type: 'response.failed', error: { code: 'rate_limit_exceeded', message: 'Rate limit reached for gpt-5 in organization org-secretorg on tokens per min (TPM): Limit 30000, Used 29000. Please try again in 1.5s. Visit https://platform.openai.com/account/rate-limits to learn more.' } };
    const { error, row } = await failedStream();
    expect(error.code).to.equal('rate_limit_exceeded');
    expect(codexDelay(error.message)).to.deep.equal(['1.5', 's']);
    expect(error.message).to.not.include('org-secretorg').and.not.include('30000').and.not.include('openai.com');
    expect(row.errorCode).to.equal('upstream_rate_limited');
    // The same from an `error` event, and a wait in milliseconds.
    failure = { type: 'error', error: { code: 'rate_limit_exceeded', message: 'Rate limit reached. Please try again in 20ms.' } };
    const fromEvent = await failedStream();
    expect(fromEvent.error.code).to.equal('rate_limit_exceeded');
    expect(codexDelay(fromEvent.error.message)).to.deep.equal(['20', 'ms']);
  });

  it("the back end's account out of credit: insufficient_quota (the request log keeps upstream_quota_exhausted)", async () => {
    failure = { type: 'response.failed', error: { code: 'insufficient_quota', message: 'You exceeded your current quota, please check your plan and billing details.' } };
    const { error, row } = await failedStream();
    expect(error.code).to.equal('insufficient_quota');
    expect(error.message).to.include('account has no quota left');
    expect(row.errorCode).to.equal('upstream_quota_exhausted');
  });

  it("the request's own fault: the back end's code (invalid_prompt) with its message; the request log keeps upstream_bad_request", async () => {
    failure = { type: 'response.failed', error: { code: 'invalid_prompt', message: 'Invalid prompt: your prompt was flagged as potentially violating our usage policy.' } };
    const { error, row } = await failedStream();
    expect(error.code).to.equal('invalid_prompt');
    expect(error.message).to.include('Invalid prompt: your prompt was flagged');
    expect(row.errorCode).to.equal('upstream_bad_request');
  });

  it('the back end failing (server_error) or saying the prompt is too long keep their codes', async () => {
    failure = { type: 'response.failed', error: { code: 'server_error', message: 'The model had an error.' } };
    const failed = await failedStream();
    expect(failed.error.code).to.equal('server_error');
    expect(failed.row.errorCode).to.equal('upstream_error');
    failure = { type: 'response.failed', error: { code: 'context_length_exceeded', message: 'Your input exceeds the context window of this model.' } };
    const tooLong = await failedStream();
    expect(tooLong.error.code).to.equal('context_length_exceeded');
  });

  const billed = { input_tokens: 1000, input_tokens_details: { cached_tokens: 600 }, output_tokens: 200, output_tokens_details: { reasoning_tokens: 150 }, total_tokens: 1200 };

  it('a failed response that carries the usage its back end billed: the call is charged that usage, not a count of what it delivered, and the client\'s failed response carries it', async () => {
    failure = { type: 'response.failed', error: { code: 'server_error', message: 'The model had an error.' }, usage: billed };
    const { row, usage: told } = await failedStream();
    const usage = await usageRow(gw, row.requestId);
    expect(usage).to.include({ source: 'provider', promptTokens: 1000, cachedTokens: 600, completionTokens: 200, reasoningTokens: 150, endReason: 'upstream_error' });
    expect(told).to.deep.equal(billed);
    // A failure that billed nothing says so: no usage.
    failure = { type: 'response.failed', error: { code: 'server_error', message: 'The model had an error.' } };
    const unbilled = await failedStream();
    expect(unbilled.usage ?? null).to.equal(null);
  });

  it('a failed response with its usage before any answer (an error status to the client) is charged that usage too, the request\'s fault or the back end\'s (no other target to try)', async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    for (const [error, status] of [
      [{ code: 'invalid_prompt', message: 'Invalid prompt: flagged.' }, 400],
      [{ code: 'server_error', message: 'The model had an error.' }, 502],
    ] as const) {
      failure = { type: 'response.failed', error, usage: { ...billed, output_tokens: 0, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 1000 }, early: true };
      const refused = (await client.responses.create({ model: 'gpt-5-native', input: 'read the repository', stream: true }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(refused.status, error.code).to.equal(status);
      const usage = await usageRow(gw, refused.requestID!);
      expect(usage, error.code).to.include({ source: 'provider', promptTokens: 1000, cachedTokens: 600, completionTokens: 0, status });
    }
  });
});
