import Anthropic from '@anthropic-ai/sdk';
import { betaTool } from '@anthropic-ai/sdk/helpers/beta/json-schema';
import { expect } from 'chai';
import OpenAI from 'openai';
import { anthropicError, eventsOf, FakeAnthropic, FAKE_USAGE, message, type FakeEvent } from './fakes/anthropic-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { chatStreamEvents } from './support/calls.js';
import { plain } from './support/json.js';
import { logRow, usageRows } from './support/rows.js';

const CLIENT_KEY = 'sk-client-anthropic-provider-abc123';
const WRONG_KEY = 'sk-ant-api03-this-is-the-wrong-provider-key';

type Json = Record<string, any>;

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

const weather: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

/** A raw chat-completions stream: the parsed `data:` events (without [DONE]). */
const rawStream = (url: string, body: Json) => chatStreamEvents<Json>(url, body, CLIENT_KEY);

describe('the anthropic provider behind the gateway (fake Anthropic upstream)', () => {
  const upstream = new FakeAnthropic();
  let gw: RunningGateway;
  let openai: OpenAI;
  let claude: Anthropic;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
# Several tests make the back end fail on purpose: the breaker must not open between them.
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
  - id: claude
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    headers: { anthropic-beta: interleaved-thinking-2025-05-14 }
    models: [claude-fake-1]
  - id: claude-v1-base
    type: anthropic
    baseUrl: ${upstream.url}/v1/
    apiKey: ${upstream.apiKey}
    version: '2024-01-01'
    defaultMaxTokens: 1000
    models: [claude-fake-2]
  # A 429 with retry-after cools its target for that long: each 429 call gets its own.
  - id: limited-a
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-1]
  - id: limited-b
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-2]
  - id: claude-idle
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    timeouts: { idleMs: 300 }
    models: [claude-idle-1]
  - id: wrongkey
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${WRONG_KEY}
    models: [bad-creds]
  - id: mock
    type: mock
    models: [mock-chat]
models:
  - name: sonnet
    targets: [{ provider: claude, model: claude-fake-1 }]
  - name: failover
    targets:
      - { provider: claude, model: claude-fake-1, priority: 0 }
      - { provider: mock, model: mock-chat, priority: 1 }
`);
    openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  describe('the fake upstream checks credentials as Anthropic does', () => {
    it('refuses a missing or wrong x-api-key with 401 authentication_error and a missing version with 400', async () => {
      const post = (headers: Record<string, string>) =>
        fetch(`${upstream.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
        });
      const none = await post({ 'anthropic-version': '2023-06-01', authorization: `Bearer ${upstream.apiKey}` });
      expect(none.status).to.equal(401);
      expect(await none.json()).to.deep.include({ type: 'error' }).and.have.nested.property('error.type', 'authentication_error');
      const wrong = await post({ 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-nope' });
      expect(wrong.status).to.equal(401);
      const noVersion = await post({ 'x-api-key': upstream.apiKey });
      expect(noVersion.status).to.equal(400);
      expect(await noVersion.json()).to.have.nested.property('error.type', 'invalid_request_error');
      const ok = await post({ 'x-api-key': upstream.apiKey, 'anthropic-version': '2023-06-01' });
      expect(ok.status).to.equal(200);
    });
  });

  describe('official openai client (openai-chat format)', () => {
    it('chat: x-api-key and anthropic-version upstream (never Authorization), system on top, a default max_tokens, stop_sequences', async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hello claude' },
        ],
        stop: ['END'],
        temperature: 0.5,
      });
      const got = upstream.last();
      expect(got.url).to.equal('/v1/messages');
      expect(got.headers['x-api-key']).to.equal(upstream.apiKey);
      expect(got.headers['anthropic-version']).to.equal('2023-06-01');
      expect(got.headers['anthropic-beta']).to.equal('interleaved-thinking-2025-05-14');
      expect(got.headers.authorization).to.equal(undefined);
      expect(JSON.stringify(got.headers)).to.not.include(CLIENT_KEY);
      expect(got.body).to.deep.equal({
        model: 'claude-fake-1',
        system: 'Be brief.',
        messages: [{ role: 'user', content: 'hello claude' }],
        max_tokens: 4096,
        temperature: 0.5,
        stop_sequences: ['END'],
      });
      expect(completion.choices[0]!.message.content).to.equal('upstream says: hello claude');
      expect(completion.choices[0]!.finish_reason).to.equal('stop');
      expect(completion.model).to.equal('claude-fake-1');
      // prompt = input 11 + cache read 5 + cache write 2.
      expect(completion.usage).to.deep.include({ prompt_tokens: 18, completion_tokens: 7, total_tokens: 25 });
      expect(completion.usage!.prompt_tokens_details).to.deep.include({ cached_tokens: 5, cache_creation_tokens: 2 });
    });

    it('files: a PDF as a base64 document, text as a text document, an image as an image block, anything else named (a base64 document takes PDFs only)', async () => {
      const file = (mime: string, data: string, filename: string) => ({ type: 'file' as const, file: { filename, file_data: `data:${mime};base64,${Buffer.from(data).toString('base64')}` } });
      const { response } = await openai.chat.completions
        .create({
          model: 'sonnet',
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'read' },
                file('application/pdf', '%PDF-1.4', 'a.pdf'),
                file('text/plain', 'hello text file', 'a.txt'),
                file('image/png', 'png-bytes', 'a.png'),
                file('application/zip', 'PK', 'a.zip'),
              ],
            },
          ],
        })
        .withResponse();
      expect(response.status).to.equal(200);
      expect((upstream.last().body!.messages as Json[])[0]!.content).to.deep.equal([
        { type: 'text', text: 'read' },
        { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: Buffer.from('%PDF-1.4').toString('base64') }, title: 'a.pdf' },
        { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'hello text file' }, title: 'a.txt' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from('png-bytes').toString('base64') } },
      ]);
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('file.application/zip');
    });

    it('an empty text part does not go up (Anthropic refuses empty text blocks); a system prompt alone is a clear 400 before the back end', async () => {
      const { response } = await openai.chat.completions
        .create({ model: 'sonnet', messages: [{ role: 'user', content: [{ type: 'text', text: '' }, { type: 'text', text: 'hi' }] }] })
        .withResponse();
      expect(response.status).to.equal(200);
      expect(upstream.last().body!.messages).to.deep.equal([{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
      // An empty user message right after tool results adds no empty block to their turn.
      await openai.chat.completions.create({
        model: 'sonnet',
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'w', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sun' },
          { role: 'user', content: '' },
        ],
        tools: [{ type: 'function', function: { name: 'w', parameters: { type: 'object' } } }],
      });
      expect((upstream.last().body!.messages as Json[])[2]).to.deep.equal({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sun' }] });
      upstream.reset();
      const error = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'system', content: 'You are X' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.error as Json).to.deep.include({ code: 'invalid_request', param: 'messages' });
      expect(upstream.received).to.have.length(0);
    });

    it('a turn that is empty or only whitespace does not go up (Anthropic refuses it); one that ends the conversation is a clear 400 before the back end', async () => {
      // In the middle: left out (it says nothing; Anthropic joins the turns around it).
      const { response } = await openai.chat.completions
        .create({
          model: 'sonnet',
          messages: [
            { role: 'user', content: 'first' },
            { role: 'assistant', content: '   ' },
            { role: 'user', content: [{ type: 'text', text: ' ' }, { type: 'text', text: '\n' }] },
            { role: 'user', content: 'second' },
          ],
        })
        .withResponse();
      expect(response.status).to.equal(200);
      expect(upstream.last().body!.messages).to.deep.equal([
        { role: 'user', content: 'first' },
        { role: 'user', content: 'second' },
      ]);
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      // Last: the conversation would end on the model's turn (a prefill to continue): refused.
      upstream.reset();
      for (const last of ['', '   ', [{ type: 'text' as const, text: '\t' }]]) {
        const error = (await openai.chat.completions
          .create({ model: 'sonnet', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: last }] })
          .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
        expect(error, JSON.stringify(last)).to.be.instanceOf(OpenAI.BadRequestError);
        expect(error.error as Json).to.deep.include({ code: 'invalid_request', param: 'messages' });
        expect(error.message).to.include('The last message has nothing');
      }
      // Only whitespace, alone: nothing to answer.
      const alone = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: '  ' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(alone).to.be.instanceOf(OpenAI.BadRequestError);
      expect(upstream.received).to.have.length(0);
    });

    it('what Claude cannot take is named to the chat client too (x-switchyard-losses), streamed or not; nothing is named when nothing is lost', async () => {
      const asked = { model: 'sonnet', messages: [{ role: 'user' as const, content: 'hello claude' }], seed: 7, stop: ['\n', 'END'] };
      const { response } = await openai.chat.completions.create(asked).withResponse();
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.have.members(['seed', 'stop.whitespace']);
      expect(upstream.last().body!.stop_sequences).to.deep.equal(['END']);
      const streamed = await openai.chat.completions.create({ ...asked, stream: true }).withResponse();
      for await (const _chunk of streamed.data) void _chunk;
      expect(streamed.response.headers.get('x-switchyard-losses')?.split(',')).to.have.members(['seed', 'stop.whitespace']);
      const clean = await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
      expect(clean.response.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it('an earlier assistant turn goes up a text block for each of its text parts, none run into another', async () => {
      await openai.chat.completions.create({
        model: 'sonnet',
        messages: [
          { role: 'user', content: 'first' },
          { role: 'assistant', content: [{ type: 'text', text: 'line1' }, { type: 'text', text: 'line2' }, { type: 'refusal', refusal: 'not that' }] },
          { role: 'user', content: 'second' },
        ],
      });
      expect((upstream.last().body!.messages as Json[])[1]).to.deep.equal({
        role: 'assistant',
        content: [{ type: 'text', text: 'line1' }, { type: 'text', text: 'line2' }, { type: 'text', text: 'not that' }],
      });
    });

    it("a chat client's prompt-cache breakpoints on its parts (cache_control, as OpenRouter and LiteLLM take them) go up on the blocks, so the prompt is cached", async () => {
      const long = 'You are a careful assistant. '.repeat(50);
      const { response } = await openai.chat.completions
        .create({
          model: 'sonnet',
          messages: [
            { role: 'system', content: [{ type: 'text', text: long, cache_control: { type: 'ephemeral' } } as never] },
            { role: 'user', content: [{ type: 'text', text: 'the question', cache_control: { type: 'ephemeral', ttl: '1h' } } as never, { type: 'text', text: 'and more' }] },
          ],
        })
        .withResponse();
      const body = upstream.last().body as Record<string, any>;
      expect(body.system).to.deep.equal([{ type: 'text', text: long, cache_control: { type: 'ephemeral' } }]);
      expect(body.messages[0].content).to.deep.equal([
        { type: 'text', text: 'the question', cache_control: { type: 'ephemeral', ttl: '1h' } },
        { type: 'text', text: 'and more' },
      ]);
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it('web_search_options: {} (web search on, with its defaults) is named as lost, not taken as asking for nothing', async () => {
      const { response } = await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'news?' }], web_search_options: {} }).withResponse();
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('web_search_options');
    });

    it('a thinking signature a client joined from several signature deltas is no signature: left out and named, never sent to Anthropic run together', async () => {
      const joined = 'sy1.sig.anthropic.SIGAAAA111sy1.sig.anthropic.SIGBBBB222';
      const { response } = await openai.chat.completions
        .create({
          model: 'sonnet',
          messages: [
            { role: 'user', content: 'think' },
            { role: 'assistant', content: 'done', reasoning_content: 'First.Second.', reasoning_signature: joined } as never,
            { role: 'user', content: 'again' },
          ],
        })
        .withResponse();
      expect(JSON.stringify(upstream.last().body)).to.not.include('SIGBBBB222').and.not.include('SIGAAAA111');
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('reasoning_signature.joined');
    });

    it("the client's max_tokens, a base URL ending in /v1 and the configured version and default", async () => {
      await openai.chat.completions.create({ model: 'claude-fake-2', max_tokens: 77, messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.last().url).to.equal('/v1/messages');
      expect(upstream.last().headers['anthropic-version']).to.equal('2024-01-01');
      expect(upstream.last().body!.max_tokens).to.equal(77);
      await openai.chat.completions.create({ model: 'claude-fake-2', messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.last().body!.max_tokens).to.equal(1000);
    });

    it('stop reasons: stop_sequence -> stop (the sequence carried), max_tokens -> length', async () => {
      upstream.script(() => ({ json: message([{ type: 'text', text: 'one two' }], { stop_reason: 'stop_sequence', stop_sequence: 'END' }) }));
      const stopped = await openai.chat.completions.create({ model: 'sonnet', stop: 'END', messages: [{ role: 'user', content: 'x' }] });
      expect(stopped.choices[0]!.finish_reason).to.equal('stop');
      expect((stopped.choices[0] as Json).stop_sequence).to.equal('END');
      upstream.script(() => ({ json: message([{ type: 'text', text: 'one two' }], { stop_reason: 'max_tokens' }) }));
      const cut = await openai.chat.completions.create({ model: 'sonnet', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] });
      expect(cut.choices[0]!.finish_reason).to.equal('length');
    });

    it('stream with include_usage: role, text pieces, finish, then a usage chunk with cache tokens', async () => {
      const stream = await openai.chat.completions.create({
        model: 'sonnet',
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'stream these words please' }],
      });
      let text = '';
      const finishes: Array<string | null> = [];
      let usage: OpenAI.CompletionUsage | undefined;
      let pieces = 0;
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (choice?.delta.content) {
          text += choice.delta.content;
          pieces++;
        }
        if (choice?.finish_reason) finishes.push(choice.finish_reason);
        if (chunk.usage) {
          expect(chunk.choices).to.deep.equal([]);
          usage = chunk.usage;
        }
      }
      expect(upstream.last().body!.stream).to.equal(true);
      expect(upstream.last().headers.accept).to.equal('text/event-stream');
      expect(text).to.equal('upstream says: stream these words please');
      expect(pieces).to.be.greaterThan(1);
      expect(finishes).to.deep.equal(['stop']);
      expect(usage).to.deep.include({ prompt_tokens: 18, completion_tokens: 7, total_tokens: 25 });
      expect(usage!.prompt_tokens_details).to.deep.include({ cached_tokens: 5 });
    });

    it('stream without include_usage: no usage chunk and no usage field', async () => {
      const events = await rawStream(gw.url, { model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'a b' }] });
      expect(events.length).to.be.greaterThan(2);
      expect(events.every((e) => !('usage' in e))).to.equal(true);
      expect(events[0]!.choices[0].delta.role).to.equal('assistant');
      expect(events[events.length - 1]!.choices[0].finish_reason).to.equal('stop');
    });

    it('stream with include_usage: every chunk has usage, null until the last one, which has the counts and no choices (as OpenAI streams it)', async () => {
      const events = await rawStream(gw.url, { model: 'sonnet', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'a b' }] });
      expect(events.length).to.be.greaterThan(2);
      const last = events[events.length - 1]!;
      expect(last.choices).to.deep.equal([]);
      expect(last.usage).to.include({ total_tokens: last.usage.prompt_tokens + last.usage.completion_tokens });
      for (const event of events.slice(0, -1)) expect(event).to.have.property('usage', null);
    });

    it('tools: definitions and tool_choice go up as Anthropic tools; a tool_use comes back as tool_calls', async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        tools: [weatherTool],
        tool_choice: 'required',
        parallel_tool_calls: false,
        messages: [{ role: 'user', content: 'weather in Paris?' }],
      });
      const body = upstream.last().body!;
      expect(body.tools).to.deep.equal([{ name: 'get_weather', description: 'Weather for a city', input_schema: weatherTool.function.parameters }]);
      expect(body.tool_choice).to.deep.equal({ type: 'any', disable_parallel_tool_use: true });
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).to.equal('tool_calls');
      expect(plain(choice.message.tool_calls)).to.deep.equal([{ id: 'toolu_fake01', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }]);
    });

    it("tool_choice none with parallel_tool_calls false is Anthropic's bare {type: none} (it takes no other field); a json_schema without a schema is named as a loss", async () => {
      await openai.chat.completions.create({ model: 'sonnet', tools: [weatherTool], tool_choice: 'none', parallel_tool_calls: false, messages: [{ role: 'user', content: 'just talk' }] });
      expect(upstream.last().body!.tool_choice).to.deep.equal({ type: 'none' });
      const { response } = await openai.chat.completions
        .create({ model: 'sonnet', response_format: { type: 'json_schema', json_schema: { name: 'bare' } }, messages: [{ role: 'user', content: 'x' }] })
        .withResponse();
      expect(upstream.last().body!).to.not.have.property('output_config');
      const row = await logRow(gw, response.headers.get('x-request-id')!);
      expect(row.losses).to.include('response_format.json_schema');
    });

    it("a response schema with constraints structured outputs refuse (zod's int bounds, minLength) goes up with them in descriptions, and is answered", async () => {
      upstream.script(() => ({ json: message([{ type: 'text', text: '{"age":3,"name":"Ada"}' }]) }));
      const schema = { type: 'object', properties: { age: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 }, name: { type: 'string', minLength: 1 } }, required: ['age', 'name'], additionalProperties: false };
      const completion = await openai.chat.completions.create({ model: 'sonnet', response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } }, messages: [{ role: 'user', content: 'x' }] });
      expect(JSON.parse(completion.choices[0]!.message.content!)).to.deep.equal({ age: 3, name: 'Ada' });
      const sent = (upstream.last().body!.output_config as { format: { schema: Record<string, any> } }).format.schema;
      expect(sent.properties.age).to.deep.equal({ type: 'integer', description: '{minimum: -9007199254740991, maximum: 9007199254740991}' });
      expect(sent.properties.name).to.deep.equal({ type: 'string', description: '{minLength: 1}' });
    });

    it('streamed tool calls: two parallel calls, arguments in pieces by index, assembled by the client', async () => {
      upstream.script(() => ({
        events: eventsOf(
          message([
            { type: 'text', text: 'Checking both.' },
            { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Paris' } },
            { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Lyon, France' } },
          ]),
        ),
      }));
      const stream = await openai.chat.completions.create({ model: 'sonnet', stream: true, tools: [weatherTool], messages: [{ role: 'user', content: 'both' }] });
      const calls: Record<number, { id?: string; name?: string; args: string; pieces: number }> = {};
      let finish: string | null = null;
      let text = '';
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (!choice) continue;
        text += choice.delta.content ?? '';
        for (const call of choice.delta.tool_calls ?? []) {
          const entry = (calls[call.index] ??= { args: '', pieces: 0 });
          if (call.id) entry.id = call.id;
          if (call.function?.name) entry.name = call.function.name;
          if (call.function?.arguments) {
            entry.args += call.function.arguments;
            entry.pieces++;
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      expect(text).to.equal('Checking both.');
      expect(finish).to.equal('tool_calls');
      expect(Object.keys(calls)).to.deep.equal(['0', '1']);
      expect(calls[0]).to.include({ id: 'toolu_a', name: 'get_weather', args: '{"city":"Paris"}' });
      expect(calls[1]).to.include({ id: 'toolu_b', name: 'get_weather', args: '{"city":"Lyon, France"}' });
      expect(calls[1]!.pieces).to.be.greaterThan(1);
    });

    it('a tool round trip: the assistant tool call and the tool result go up as tool_use and tool_result blocks', async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        tools: [weatherTool],
        messages: [
          { role: 'user', content: 'weather in Paris?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny, 21C' },
        ],
      });
      expect(upstream.last().body!.messages).to.deep.equal([
        { role: 'user', content: 'weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny, 21C' }] },
      ]);
      expect(completion.choices[0]!.message.content).to.equal('upstream says: sunny, 21C');
    });

    it('the older function calling (functions, function_call): tools and a tool choice go up; the call comes back as message.function_call, finish function_call', async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        functions: [weatherTool.function],
        function_call: { name: 'get_weather' },
        messages: [{ role: 'user', content: 'weather in Paris?' }],
      });
      const body = upstream.last().body!;
      expect(body.tools).to.deep.equal([{ name: 'get_weather', description: 'Weather for a city', input_schema: weatherTool.function.parameters }]);
      // One call a turn, as the older shape holds.
      expect(body.tool_choice).to.deep.equal({ type: 'tool', name: 'get_weather', disable_parallel_tool_use: true });
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).to.equal('function_call');
      expect(plain(choice.message.function_call)).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(choice.message).to.not.have.property('tool_calls');
    });

    it('the older function calling, streamed: the call arrives as function_call pieces (name, then arguments), finish function_call', async () => {
      upstream.script(() => ({ events: eventsOf(message([{ type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Lyon, France' } }])) }));
      const events = await rawStream(gw.url, {
        model: 'sonnet',
        stream: true,
        functions: [weatherTool.function],
        messages: [{ role: 'user', content: 'weather in Lyon?' }],
      });
      let name = '';
      let args = '';
      let finish: string | null = null;
      for (const event of events) {
        const delta = event.choices?.[0]?.delta ?? {};
        expect(delta).to.not.have.property('tool_calls');
        if (delta.function_call?.name) name += delta.function_call.name;
        args += delta.function_call?.arguments ?? '';
        finish = event.choices?.[0]?.finish_reason ?? finish;
      }
      expect(name).to.equal('get_weather');
      expect(JSON.parse(args)).to.deep.equal({ city: 'Lyon, France' });
      expect(finish).to.equal('function_call');
    });

    it('the older function calling answered with two calls: the first is the function_call, the other left out and named (function_call.after_the_first)', async () => {
      upstream.script(() => ({
        json: message([
          { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Rome' } },
        ]),
      }));
      const { data, response } = await openai.chat.completions
        .create({ model: 'sonnet', functions: [weatherTool.function], messages: [{ role: 'user', content: 'Paris and Rome?' }] })
        .withResponse();
      expect(plain(data.choices[0]!.message.function_call)).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('function_call.after_the_first');
    });

    it('a function message that answers no call is left out (Anthropic refuses a tool_result without its tool_use) and named', async () => {
      const { response } = await openai.chat.completions
        .create({
          model: 'sonnet',
          functions: [weatherTool.function],
          messages: [
            { role: 'user', content: 'weather in Paris?' },
            { role: 'function', name: 'get_weather', content: 'sunny' },
          ],
        })
        .withResponse();
      expect(upstream.last().body!.messages).to.deep.equal([{ role: 'user', content: 'weather in Paris?' }]);
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('messages.role.function.without_call');
    });

    it('an older-style history (assistant function_call, then a function message) goes up as a tool_use and its tool_result, not an empty turn', async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        functions: [weatherTool.function],
        messages: [
          { role: 'user', content: 'weather in Paris?' },
          { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { role: 'function', name: 'get_weather', content: 'sunny, 21C' },
        ],
      });
      const [, call, result] = upstream.last().body!.messages as Array<{ role: string; content: Array<Record<string, unknown>> }>;
      expect(call!.role).to.equal('assistant');
      expect(call!.content).to.have.length(1);
      expect(call!.content[0]).to.deep.include({ type: 'tool_use', name: 'get_weather', input: { city: 'Paris' } });
      expect(result!.role).to.equal('user');
      expect(result!.content).to.deep.equal([{ type: 'tool_result', tool_use_id: call!.content[0]!.id, content: 'sunny, 21C' }]);
      expect(completion.choices[0]!.message.content).to.equal('upstream says: sunny, 21C');
      expect(completion.choices[0]!.finish_reason).to.equal('stop');
    });

    it("a history whose call ids another back end made (functions.get_weather:0, which Anthropic refuses) goes up with ids in Anthropic's pattern, each call matched to its result", async () => {
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        tools: [weatherTool],
        messages: [
          { role: 'user', content: 'weather in Paris and Rome?' },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'functions.get_weather:0', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'functions.get_weather:1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
            ],
          },
          { role: 'tool', tool_call_id: 'functions.get_weather:0', content: 'sunny' },
          { role: 'tool', tool_call_id: 'functions.get_weather:1', content: 'rain' },
        ],
      });
      expect(completion.choices[0]!.message.content).to.equal('upstream says: sunny rain');
      const [, calls, results] = upstream.last().body!.messages as Array<{ content: Array<Record<string, string>> }>;
      const ids = calls!.content.map((block) => block.id!);
      expect(results!.content.map((block) => block.tool_use_id)).to.deep.equal(ids);
      expect(new Set(ids).size).to.equal(2);
    });

    it('images: a data URL becomes a base64 image block, an https URL a url image block', async () => {
      await openai.chat.completions.create({
        model: 'sonnet',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'compare' },
              { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
            ],
          },
        ],
      });
      expect(upstream.last().body!.messages[0].content).to.deep.equal([
        { type: 'text', text: 'compare' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
        { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
      ]);
    });

    it('reasoning_effort: a thinking budget below max_tokens, temperature left out; reasoning comes back with its signature', async () => {
      upstream.script(() => ({
        json: message([
          { type: 'thinking', thinking: 'Let me think.', signature: 'sig-abc' },
          { type: 'text', text: '42' },
        ]),
      }));
      const completion = await openai.chat.completions.create({
        model: 'sonnet',
        reasoning_effort: 'medium',
        temperature: 0.2,
        messages: [{ role: 'user', content: 'answer?' }],
      });
      const body = upstream.last().body!;
      expect(body.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 8192 });
      expect(body.max_tokens).to.be.greaterThan(8192);
      expect(body).to.not.have.property('temperature');
      const msg = completion.choices[0]!.message as Json;
      expect(msg.content).to.equal('42');
      expect(msg.reasoning_content).to.equal('Let me think.');
      // Tagged with the type of back end that made it: handed back, it goes only to one of that type.
      expect(msg.reasoning_signature).to.equal('sy1.sig.anthropic.sig-abc');
    });
  });

  describe('official @anthropic-ai/sdk (anthropic-messages format)', () => {
    it("the SDK's tool runner (message threads by default) is told threads are not kept (thread_unsupported_request), goes on without one, and finishes its loop", async () => {
      const ran: unknown[] = [];
      const weather = betaTool({
        name: 'get_weather',
        description: 'Weather for a city',
        inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        run: (input) => {
          ran.push(input);
          return 'sunny';
        },
      });
      const final = await claude.beta.messages.toolRunner({ model: 'sonnet', max_tokens: 100, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather] });
      expect(ran).to.deep.equal([{ city: 'Paris' }]);
      expect(final.content.map((b) => b.type)).to.deep.equal(['text']);
      // What reached the back end: no thread, and the second turn's whole conversation.
      const sent = upstream.received.map((r) => r.body as Record<string, any>);
      for (const body of sent) expect(body).to.not.have.property('thread');
      const last = sent.at(-1)!;
      expect(last.messages.map((m: { role: string }) => m.role)).to.deep.equal(['user', 'assistant', 'user']);
      expect(last.messages[2].content[0]).to.include({ type: 'tool_result', tool_use_id: 'toolu_fake01' });
      // The refusal itself, as the SDK reads it.
      const refused = await fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sonnet', max_tokens: 10, thread: { type: 'create' }, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(refused.status).to.equal(400);
      expect(((await refused.json()) as { error: Record<string, unknown> }).error).to.deep.include({ type: 'invalid_request_error', details: { error_code: 'thread_unsupported_request', unsupported: ['thread'] } });
    });

    it('messages.create: system blocks, tools, thinking and max_tokens go up; thinking, tool_use, stop reason and cache usage come back', async () => {
      upstream.script(() => ({
        json: message([
          { type: 'thinking', thinking: 'The user wants weather.', signature: 'EqQBCkYIBxgCKkA-sig' },
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_x1', name: 'get_weather', input: { city: 'Paris' } },
        ]),
      }));
      const { data: result, response } = await claude.messages
        .create({
          model: 'sonnet',
          max_tokens: 20000,
          system: [{ type: 'text', text: 'You are a weather bot.' }],
          thinking: { type: 'enabled', budget_tokens: 16000 },
          tools: [weather],
          messages: [{ role: 'user', content: 'Weather in Paris?' }],
        })
        .withResponse();
      const body = upstream.last().body!;
      expect(upstream.last().headers['x-api-key']).to.equal(upstream.apiKey);
      // Same format in and out: the body goes up as it is (no effort band in between), nothing lost.
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      expect(body.system).to.deep.equal([{ type: 'text', text: 'You are a weather bot.' }]);
      expect(body.max_tokens).to.equal(20000);
      expect(body.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 16000 });
      expect(body.tools).to.deep.equal([{ name: 'get_weather', description: 'Weather for a city', input_schema: weather.input_schema }]);
      expect(plain(result.content)).to.deep.equal([
        { type: 'thinking', thinking: 'The user wants weather.', signature: 'EqQBCkYIBxgCKkA-sig' },
        { type: 'text', text: 'Let me check.' },
        { type: 'tool_use', id: 'toolu_x1', name: 'get_weather', input: { city: 'Paris' } },
      ]);
      expect(result.stop_reason).to.equal('tool_use');
      expect(result.usage).to.deep.include({ input_tokens: 11, output_tokens: 7, cache_read_input_tokens: 5, cache_creation_input_tokens: 2 });
    });

    it('messages.stream with tools and thinking: thinking with its signature, tool input from pieces, usage in message_delta', async () => {
      upstream.script(() => ({
        events: eventsOf(
          message([
            { type: 'thinking', thinking: 'Paris is in France, so I call the tool.', signature: 'sig-stream-1' },
            { type: 'tool_use', id: 'toolu_s1', name: 'get_weather', input: { city: 'Paris' } },
          ]),
        ),
      }));
      const stream = claude.messages.stream({
        model: 'sonnet',
        max_tokens: 4000,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        tools: [weather],
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
      });
      const thinking: string[] = [];
      const json: string[] = [];
      stream.on('thinking', (delta) => thinking.push(delta));
      stream.on('inputJson', (piece) => json.push(piece));
      const final = await stream.finalMessage();
      expect(upstream.last().body!.stream).to.equal(true);
      expect(upstream.last().body!.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2000 });
      expect(thinking.join('')).to.equal('Paris is in France, so I call the tool.');
      expect(json.length).to.be.greaterThan(1);
      expect(plain(final.content)).to.deep.equal([
        { type: 'thinking', thinking: 'Paris is in France, so I call the tool.', signature: 'sig-stream-1' },
        { type: 'tool_use', id: 'toolu_s1', name: 'get_weather', input: { city: 'Paris' } },
      ]);
      expect(final.stop_reason).to.equal('tool_use');
      expect(final.usage).to.deep.include({ output_tokens: 7, cache_read_input_tokens: 5, cache_creation_input_tokens: 2 });
    });

    it('a second turn hands the signed thinking block and the tool result back to Anthropic', async () => {
      const result = await claude.messages.create({
        model: 'sonnet',
        max_tokens: 4000,
        thinking: { type: 'enabled', budget_tokens: 2000 },
        tools: [weather],
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'I call the tool.', signature: 'sig-turn-1' },
              { type: 'tool_use', id: 'toolu_t1', name: 'get_weather', input: { city: 'Paris' } },
            ],
          },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_t1', content: 'rain' }] },
        ],
      });
      expect(upstream.last().body!.messages).to.deep.equal([
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'I call the tool.', signature: 'sig-turn-1' },
            { type: 'tool_use', id: 'toolu_t1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_t1', content: 'rain' }] },
      ]);
      expect(plain(result.content)).to.deep.equal([{ type: 'text', text: 'upstream says: rain' }]);
      expect(result.stop_reason).to.equal('end_turn');
    });

    it('a stop_sequence stop keeps its sequence', async () => {
      upstream.script(() => ({ json: message([{ type: 'text', text: 'a b' }], { stop_reason: 'stop_sequence', stop_sequence: '###' }) }));
      const result = await claude.messages.create({ model: 'sonnet', max_tokens: 50, stop_sequences: ['###'], messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.last().body!.stop_sequences).to.deep.equal(['###']);
      expect(result.stop_reason).to.equal('stop_sequence');
      expect(result.stop_sequence).to.equal('###');
    });

    it('a model that thinks before its first word: the client hears the stream begin (headers, message_start) before the first delta', async () => {
      let release!: () => void;
      const hold = new Promise<void>((resolve) => (release = resolve));
      const events = eventsOf(message([{ type: 'thinking', thinking: 'hmm', signature: 'sig-1' }, { type: 'text', text: 'done thinking' }]));
      // message_start and the thinking block's start, then nothing until the test lets go.
      upstream.script(() => ({ events, holdAfter: 2, hold }));
      try {
        const response = await fetch(`${gw.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
          body: JSON.stringify({ model: 'sonnet', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'think first' }] }),
        });
        expect(response.status).to.equal(200);
        const reader = response.body!.getReader();
        const first = new TextDecoder().decode((await reader.read()).value);
        expect(first).to.include('event: message_start');
        expect(first).to.not.include('thinking_delta');
        release();
        let rest = first;
        for (let piece = await reader.read(); !piece.done; piece = await reader.read()) rest += new TextDecoder().decode(piece.value);
        expect(rest).to.include(`"thinking":"hmm"`).and.include(`"text":"done`).and.include("event: message_stop");
      } finally {
        release();
      }
    });
  });

  describe('metering', () => {
    it("records the back end's usage (cache reads as cached tokens) for a JSON answer and for a stream", async () => {
      const json = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'sonnet', messages: [{ role: 'user', content: 'meter me' }] }),
      });
      expect(json.status).to.equal(200);
      await json.text();
      const streamed = await fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'sonnet', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'meter me too' }] }),
      });
      expect(streamed.status).to.equal(200);
      const events = await streamed.text();
      expect(events).to.include('event: message_stop');
      expect(events).to.include('"cache_read_input_tokens":5');
      for (const response of [json, streamed]) {
        const requestId = response.headers.get('x-request-id')!;
        const rows = await usageRows(gw, requestId);
        expect(rows, requestId).to.have.length(1);
        expect(rows[0]).to.deep.include({ provider: 'claude', upstreamModel: 'claude-fake-1', promptTokens: 18, completionTokens: 7, cachedTokens: 5, source: 'provider' });
      }
    });
  });

  describe('upstream failures', () => {
    it('401: the back end refused the provider key; the client gets a 502 that never shows it, nor does the log', async () => {
      const error = (await openai.chat.completions.create({ model: 'bad-creds', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<
        typeof OpenAI.APIError
      >;
      expect(upstream.last().headers['x-api-key']).to.equal(WRONG_KEY);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(error.status).to.equal(502);
      expect(error.code).to.equal('upstream_error');
      expect(JSON.stringify(error.error)).to.not.include('wrong-provider-key');
      expect(error.message).to.include('credentials');
      expect(gw.logText()).to.not.include(WRONG_KEY);
      expect(gw.logText()).to.not.include(upstream.apiKey);
    });

    it('429 with retry-after: a 429 the client sees with the retry-after', async () => {
      upstream.script(() => ({ status: 429, headers: { 'retry-after': '17' }, json: anthropicError('rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit') }));
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'limited-1', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(429);
      expect(response.headers.get('retry-after')).to.equal('17');
      expect(((await response.json()) as Json).error.code).to.equal('upstream_rate_limited');
      const error = (await claude.messages.create({ model: 'limited-2', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(error).to.be.instanceOf(Anthropic.RateLimitError);
      expect(error.headers?.get('retry-after')).to.equal('17');
      expect((error.error as Json).error.type).to.equal('rate_limit_error');
    });

    it('529 overloaded: a 503 overloaded_error naming Anthropic\'s request-id (529 to Claude clients, as Anthropic answers it), which clients may retry; retried on the next target first', async () => {
      upstream.script(() => ({ status: 529, headers: { 'request-id': 'req_011CTestOverload' }, json: anthropicError('overloaded_error', 'Overloaded') }));
      const error = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error.status).to.equal(503);
      expect(error.message).to.include('overloaded (status 529); try again later. (request-id req_011CTestOverload)');
      // Waiting and trying again is what an overloaded back end's clients are meant to do.
      expect(error.headers?.get('x-should-retry')).to.equal(null);
      // (Another target, so this one's breaker is not opened by a second failure.)
      const fromClaude = (await claude.messages.create({ model: 'claude-fake-2', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
      expect(fromClaude).to.be.instanceOf(Anthropic.OverloadedError);
      expect(fromClaude.status).to.equal(529);
      expect(fromClaude.type).to.equal('overloaded_error');
      // Its status line has a reason phrase (Node's table has none for 529: it said "unknown").
      const raw = await fetch(`${gw.url}/v1/messages`, { method: 'POST', headers: { 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'claude-fake-2', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }) });
      expect([raw.status, raw.statusText]).to.deep.equal([529, 'Site Overloaded']);

      // Retryable: a model with a second target (the mock) is answered by it.
      upstream.received.length = 0;
      const answer = await openai.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.received).to.have.length(1);
      expect(answer.model).to.equal('mock-chat');
    });

    it("out of credit (402 billing_error, or a 400 saying the credit balance is too low): upstream_quota_exhausted, not the client's bad request; the next target answers", async () => {
      for (const [status, type, message] of [
        [402, 'billing_error', 'Your account has an outstanding balance.'],
        [400, 'invalid_request_error', 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.'],
      ] as const) {
        upstream.script(() => ({ status, json: anthropicError(type, message) }));
        const refused = await fetch(`${gw.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
          body: JSON.stringify({ model: 'claude-fake-1', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
        });
        expect(refused.status, `${status}`).to.equal(429);
        expect(refused.headers.get('x-should-retry')).to.equal('false');
        const body = (await refused.json()) as Json;
        expect(body.error.type).to.equal('rate_limit_error');
        expect(JSON.stringify(body)).to.not.include('credit balance').and.not.include('outstanding');
        upstream.received.length = 0;
        const answer = await openai.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'x' }] });
        expect(upstream.received, `${status}: the back end was asked first`).to.have.length(1);
        expect(answer.model).to.equal('mock-chat');
      }
    });

    it('an error answer carries Anthropic\'s request-id (a diagnostic, not a secret); a malformed one is left out', async () => {
      upstream.script(() => ({ status: 500, headers: { 'request-id': 'req_011CTest500' }, json: anthropicError('api_error', 'Internal') }));
      const error = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error.message).to.include('(request-id req_011CTest500)');
      upstream.script(() => ({ status: 500, headers: { 'request-id': 'req <script>' }, json: anthropicError('api_error', 'Internal') }));
      const odd = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(odd.message).to.not.include('request-id');
    });

    it('500: a 502 without the upstream body or address', async () => {
      upstream.script(() => ({ status: 500, json: anthropicError('api_error', `internal failure at 10.0.0.7 key ${upstream.apiKey}`) }));
      const error = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.InternalServerError);
      expect(error.status).to.equal(502);
      expect(error.message).to.not.include('10.0.0.7');
      expect(error.message).to.not.include('internal failure');
      expect(JSON.stringify(error.error)).to.not.include(upstream.apiKey);
    });

    it('400: the upstream message, scrubbed of the key, as a 400', async () => {
      upstream.script(() => ({ status: 400, json: anthropicError('invalid_request_error', `temperature: Input should be less than or equal to 1 (key ${upstream.apiKey})`) }));
      const error = (await openai.chat.completions.create({ model: 'sonnet', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.message).to.include('temperature: Input should be less than or equal to 1');
      expect(error.message).to.not.include(upstream.apiKey);
    });

    it("a failed attempt's changes are not the call's losses when the next target answers", async () => {
      upstream.script(() => ({ status: 500, json: anthropicError('api_error', 'Internal server error') }));
      const { data, response } = await claude.messages
        .create({ model: 'failover', max_tokens: 20000, thinking: { type: 'enabled', budget_tokens: 16000 }, messages: [{ role: 'user', content: 'hello mock' }] })
        .withResponse();
      // The anthropic target was tried (it got the body as it is), then the mock answered.
      expect(upstream.last().body!.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 16000 });
      expect(plain(data.content)).to.deep.equal([{ type: 'text', text: 'hello mock' }]);
      expect(response.headers.get('x-switchyard-losses') ?? '').to.not.include('budget_capped');
    });

    const cut = (): FakeEvent[] => eventsOf(message([{ type: 'text', text: 'one two three four five six' }]));

    it('a stream cut midway: the openai client gets the text so far, then an error it raises', async () => {
      upstream.script(() => ({ events: cut(), cutAfter: 5 }));
      const stream = await openai.chat.completions.create({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] });
      let text = '';
      let finish: string | null = null;
      const error = await (async () => {
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
      })().catch((e: unknown) => e);
      expect(text).to.equal('one two');
      expect(finish).to.equal(null);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('The upstream service failed to answer');
    });

    it('a stream that ends cleanly but before message_stop is an error, not a short answer', async () => {
      upstream.script(() => ({ events: cut().slice(0, 5) }));
      const stream = await openai.chat.completions.create({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().catch((e: unknown) => e);
      expect(text).to.equal('one two');
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('ended before the answer did');
    });

    it('a stream cut after it began, before any text, is still charged the prompt message_start reported, for either client', async function () {
      this.timeout(15_000); // each stream waits out the priming window first
      for (const [model, path, body] of [
        ['sonnet', '/v1/chat/completions', { model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] }],
        ['claude-fake-2', '/v1/messages', { model: 'claude-fake-2', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'x' }] }],
      ] as const) {
        // message_start and ping, then nothing until the gateway has given up waiting for an answer
        // and begun the client's stream (PRIME_WINDOW_MS); then an empty text block, and the cut.
        let resume!: () => void;
        const hold = new Promise<void>((resolve) => (resume = resolve));
        upstream.script(() => ({ events: cut(), holdAfter: 2, hold, cutAfter: 3 }));
        const response = await fetch(`${gw.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}`, 'anthropic-version': '2023-06-01' },
          body: JSON.stringify(body),
        });
        resume();
        expect(response.status, model).to.equal(200);
        expect(await response.text(), model).to.include('error');
        const [row] = await usageRows(gw, response.headers.get('x-request-id')!);
        const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens } = FAKE_USAGE;
        expect(row, model).to.deep.include({
          source: 'estimated',
          promptTokens: input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
          cachedTokens: cache_read_input_tokens,
          completionTokens: 0,
        });
      }
    });

    it("a stream cut after message_delta (its output reported) but before message_stop is charged the usage it reported, for either client, not the gateway's count", async () => {
      for (const [path, body] of [
        ['/v1/chat/completions', { model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] }],
        ['/v1/messages', { model: 'claude-fake-2', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'x' }] }],
      ] as const) {
        const events = eventsOf(message([{ type: 'text', text: 'one two three four five six' }], { usage: { ...FAKE_USAGE, output_tokens: 40 } }));
        // Everything but message_stop, then the connection drops.
        upstream.script(() => ({ events, cutAfter: events.length - 1 }));
        const response = await fetch(`${gw.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}`, 'anthropic-version': '2023-06-01' },
          body: JSON.stringify(body),
        });
        expect(response.status, path).to.equal(200);
        const text = await response.text();
        expect(text, path).to.include(' six').and.include('error');
        const [row] = await usageRows(gw, response.headers.get('x-request-id')!);
        const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens } = FAKE_USAGE;
        expect(row, path).to.deep.include({ source: 'provider', promptTokens: input_tokens + cache_read_input_tokens + cache_creation_input_tokens, completionTokens: 40 });
      }
    });

    it('a stream cut midway: the Anthropic SDK raises an error event instead of a final message', async () => {
      upstream.script(() => ({ events: cut(), cutAfter: 6 }));
      const stream = claude.messages.stream({ model: 'sonnet', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] });
      const error = await stream.finalMessage().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(Anthropic.APIError);
      expect((error as InstanceType<typeof Anthropic.APIError>).type).to.equal('api_error');
    });

    it('a stream with an error event: the client sees the error, scrubbed', async () => {
      const events = cut().slice(0, 5);
      events.push(['error', { error: { type: 'overloaded_error', message: `Overloaded (${upstream.apiKey})` } }]);
      upstream.script(() => ({ events }));
      const stream = await openai.chat.completions.create({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] });
      const error = await (async () => {
        for await (const _chunk of stream) {
          // read on
        }
      })().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('overloaded (Overloaded (');
      expect(String((error as Error).message)).to.not.include(upstream.apiKey);
      // A Claude client hears the kind it knows, as Anthropic sends it.
      upstream.script(() => ({ events }));
      const fromClaude = await claude.messages.stream({ model: 'claude-fake-2', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] }).finalMessage().catch((e: unknown) => e);
      expect(fromClaude).to.be.instanceOf(Anthropic.APIError);
      expect((fromClaude as InstanceType<typeof Anthropic.APIError>).type).to.equal('overloaded_error');
    });

    it('a rate_limit_error or billing_error event before any content is that error (429, its kind), not a 502 the client may not retry', async () => {
      for (const [type, code] of [
        ['rate_limit_error', 'upstream_rate_limited'],
        ['billing_error', 'upstream_quota_exhausted'],
      ] as const) {
        upstream.script(() => ({ events: [...cut().slice(0, 2), ['error', { error: { type, message: 'no' } }]] }));
        const raw = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'claude-fake-2', stream: true, messages: [{ role: 'user', content: 'x' }] }),
        });
        const body = (await raw.json()) as { error: { code: string } };
        expect([raw.status, body.error.code], type).to.deep.equal([429, code]);
      }
    });

    it('an overloaded_error event before any content fails the attempt: the next target answers the stream', async () => {
      upstream.script(() => ({ events: [...cut().slice(0, 2), ['error', { error: { type: 'overloaded_error', message: 'Overloaded' } }]] }));
      upstream.received.length = 0;
      const stream = await openai.chat.completions.create({ model: 'failover', stream: true, messages: [{ role: 'user', content: 'hello' }] });
      let text = '';
      let model = '';
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        model = chunk.model;
      }
      expect(upstream.received).to.have.length(1);
      expect(model).to.equal('mock-chat');
      expect(text).to.not.equal('');

      // A completions client that asked for its prompt echoed: the echo waits for the answer, so
      // the overload still moves the call on.
      upstream.received.length = 0;
      const echoed = await openai.completions.create({ model: 'failover', prompt: 'hello', echo: true, stream: true });
      let completion = '';
      let completionModel = '';
      for await (const chunk of echoed) {
        completion += chunk.choices[0]?.text ?? '';
        completionModel = chunk.model;
      }
      expect(upstream.received).to.have.length(1);
      expect(completionModel).to.equal('mock-chat');
      expect(completion.startsWith('hello')).to.equal(true);

      // With no other target the client gets the overload as an error.
      const alone = await openai.chat.completions.create({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(alone).to.be.instanceOf(OpenAI.APIError);
      expect(String((alone as Error).message)).to.include('overloaded (Overloaded)');
      expect((alone as InstanceType<typeof OpenAI.APIError>).status).to.equal(503);
    });

    it("Anthropic's ping events while the model works are not silence: a pause of three idleMs mid-stream completes", async () => {
      let release!: () => void;
      const hold = new Promise<void>((resolve) => (release = resolve));
      upstream.script(() => ({ events: eventsOf(message([{ type: 'text', text: 'one two three' }])), holdAfter: 4, hold, pingEveryMs: 100 }));
      const timer = setTimeout(() => release(), 900);
      try {
        const stream = await openai.chat.completions.create({ model: 'claude-idle-1', stream: true, messages: [{ role: 'user', content: 'think first' }] });
        let text = '';
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
        expect(text).to.equal('one two three');
      } finally {
        clearTimeout(timer);
        release();
      }
    });

    it('a malformed stream event is an upstream error, not a silent end', async () => {
      upstream.script(() => ({ events: cut().slice(0, 4), tail: 'event: content_block_delta\ndata: {not json\n\n' }));
      const stream = await openai.chat.completions.create({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] });
      const error = await (async () => {
        for await (const _chunk of stream) {
          // read on
        }
      })().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('malformed');
    });

    it('a client that leaves mid-stream: the upstream request is aborted', async () => {
      let release!: () => void;
      const hold = new Promise<void>((resolve) => (release = resolve));
      upstream.script(() => ({ events: cut(), holdAfter: 4, hold }));
      const controller = new AbortController();
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        signal: controller.signal,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'sonnet', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(200);
      const reader = response.body!.getReader();
      const first = new TextDecoder().decode((await reader.read()).value);
      expect(first).to.include('"role":"assistant"');
      expect(upstream.last().aborted).to.equal(false);
      controller.abort();
      try {
        await eventually(() => upstream.last().aborted, 3000, 'the upstream to see the disconnect');
      } finally {
        release();
      }
      // Charged the prompt as Anthropic reported it in message_start (input 11, cache read 5,
      // cache write 2), not a count of the gateway's own; only what was delivered is counted.
      const [row] = await usageRows(gw, response.headers.get('x-request-id')!);
      expect(row).to.deep.include({ source: 'estimated', promptTokens: 18, cachedTokens: 5, endReason: 'client_gone' });
    });
  });
});
