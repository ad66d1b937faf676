import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, HarmBlockThreshold, HarmCategory } from '@google/genai';
import { expect } from 'chai';
import { anthropicError, eventsOf, FakeAnthropic, message, type FakeEvent } from './fakes/anthropic-upstream.js';
import { answer, eventsOf as geminiEventsOf, FakeGemini } from './fakes/gemini-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

/**
 * Same format in and out (issue 6): a messages call served by the anthropic provider and a
 * generateContent call served by the gemini provider pass through. The upstream receives the
 * client's body as the client wrote it (only `model` replaced; Gemini's model is in the URL), the
 * client receives the upstream's bytes (JSON) or events (stream) exactly, and the request log
 * records no translation loss, while usage still reaches metering.
 */

type Json = Record<string, any>;

const CLIENT_KEY = 'sk-client-passthrough-0123456789';
const ADMIN_KEY = 'admin-passthrough-key-0123456789abcdef';

interface LogRow {
  request_id: string;
  losses: string[];
  prompt_tokens: number | null;
  completion_tokens: number | null;
  provider: string | null;
  status: number;
}

/** The JSON bodies the SDKs send to the gateway, recorded on the way out (global fetch). */
const clientBodies: Array<{ url: string; body: Json }> = [];
const realFetch = globalThis.fetch;

function lastClientBody(): Json {
  const last = clientBodies[clientBodies.length - 1];
  if (!last) throw new Error('no client body recorded');
  return last.body;
}

describe('same format in and out: messages -> anthropic and generateContent -> gemini pass through', () => {
  const claudeUp = new FakeAnthropic();
  const geminiUp = new FakeGemini();
  let gw: RunningGateway;
  let claude: Anthropic;
  let ai: GoogleGenAI;

  before(async () => {
    await Promise.all([claudeUp.start(), geminiUp.start()]);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ./passthrough.db }
auth:
  adminKey: ${ADMIN_KEY}
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
plugins:
  - request-log
  - auth
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - admin
  - openai-chat
  - anthropic-messages
  - gemini
providers:
  - { id: claude, type: anthropic, baseUrl: ${claudeUp.url}, apiKey: ${claudeUp.apiKey}, headers: { anthropic-beta: prompt-caching-2024-07-31 }, clientVersion: true, models: [claude-fake-1] }
  - { id: pinned, type: anthropic, baseUrl: ${claudeUp.url}, apiKey: ${claudeUp.apiKey}, version: '2024-01-01', clientVersion: true, models: [claude-pinned] }
  - { id: compatible, type: anthropic, baseUrl: ${claudeUp.url}, apiKey: ${claudeUp.apiKey}, models: [claude-compatible] }
  - { id: google, type: gemini, baseUrl: ${geminiUp.url}, apiKey: ${geminiUp.apiKey}, models: [gemini-fake-1] }
  - { id: mock, type: mock, models: [mock-chat] }
models:
  - name: sonnet
    targets: [{ provider: claude, model: claude-fake-1 }]
  - name: flash
    targets: [{ provider: google, model: gemini-fake-1 }]
  - name: claude-then-mock
    targets:
      - { provider: claude, model: claude-fake-1, priority: 0 }
      - { provider: mock, model: mock-chat, priority: 1 }
`);
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0], init?: RequestInit) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (url.startsWith(gw.url) && typeof init?.body === 'string') clientBodies.push({ url, body: JSON.parse(init.body) as Json });
      return realFetch(input, init);
    }) as typeof fetch;
    claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  afterEach(() => {
    claudeUp.reset();
    geminiUp.reset();
    clientBodies.length = 0;
  });
  after(async () => {
    globalThis.fetch = realFetch;
    await gw?.stop();
    await Promise.all([claudeUp.stop(), geminiUp.stop()]);
  });

  async function logRow(id: string): Promise<LogRow> {
    for (let i = 0; i < 100; i++) {
      const logs = (await (await realFetch(`${gw.url}/admin/logs?limit=50`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json()) as { data: LogRow[] };
      const row = logs.data.find((e) => e.request_id === id);
      if (row) return row;
      await new Promise((resolve) => setImmediate(resolve));
    }
    throw new Error(`request ${id} not in the log`);
  }

  const messagesCall = (body: Json) =>
    realFetch(`${gw.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
      body: JSON.stringify(body),
    });

  const generateCall = (model: string, body: Json, stream: boolean) =>
    realFetch(`${gw.url}/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': CLIENT_KEY },
      body: JSON.stringify(body),
    });

  describe('@anthropic-ai/sdk against the anthropic provider', () => {
    const tool: Anthropic.Tool = {
      name: 'get_weather',
      description: 'Weather for a city',
      input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      cache_control: { type: 'ephemeral' },
    };
    const system: Anthropic.TextBlockParam[] = [{ type: 'text', text: 'You are a weather bot. '.repeat(20), cache_control: { type: 'ephemeral' } }];

    it('messages.create: cache_control on a system block and a tool, stop_sequences and metadata go up as sent (top_k too); the answer bytes come back as they are', async () => {
      const upstreamAnswer = message(
        [
          { type: 'text', text: 'It rains', citations: [{ type: 'char_location', cited_text: 'rain', document_index: 0, start_char_index: 0, end_char_index: 4 }] },
          { type: 'tool_use', id: 'toolu_p1', name: 'get_weather', input: { city: 'Paris' } },
        ],
        { container: null, future_field: { kept: true } },
      );
      claudeUp.script(() => ({ json: upstreamAnswer }));
      const { data, response } = await claude.messages
        .create({
          model: 'sonnet',
          max_tokens: 300,
          system,
          tools: [tool],
          stop_sequences: ['END'],
          metadata: { user_id: 'u-1' },
          messages: [{ role: 'user', content: [{ type: 'text', text: 'Weather in Paris?', cache_control: { type: 'ephemeral' } }] }],
        })
        .withResponse();
      const got = claudeUp.last();
      expect(got.body).to.deep.equal({ ...lastClientBody(), model: 'claude-fake-1' });
      expect(got.body!.system[0].cache_control).to.deep.equal({ type: 'ephemeral' });
      expect(got.body!.tools[0].cache_control).to.deep.equal({ type: 'ephemeral' });
      // The provider still sends its own credentials and configured headers; the version is the
      // client's (its SDK's), which says how Anthropic reads the body it wrote (clientVersion, no `version`).
      expect(got.headers['x-api-key']).to.equal(claudeUp.apiKey);
      expect(got.headers['anthropic-version']).to.match(/^\d{4}-\d{2}-\d{2}$/);
      expect(got.headers['anthropic-beta']).to.equal('prompt-caching-2024-07-31');
      expect(data.content[0]).to.deep.include({ type: 'text', text: 'It rains' });
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);

      // The client's own beta flags go up too, added to the configured ones (each once).
      await claude.messages.create(
        { model: 'sonnet', max_tokens: 10, messages: [{ role: 'user', content: 'beta?' }] },
        { headers: { 'anthropic-beta': 'interleaved-thinking-2025-05-14, prompt-caching-2024-07-31' } },
      );
      expect(claudeUp.last().headers['anthropic-beta']).to.equal('prompt-caching-2024-07-31,interleaved-thinking-2025-05-14');

      // A version the operator pinned goes up whatever the client sent.
      await claude.messages.create({ model: 'claude-pinned', max_tokens: 10, messages: [{ role: 'user', content: 'pinned?' }] }, { headers: { 'anthropic-version': '2025-12-01' } });
      expect(claudeUp.last().headers['anthropic-version']).to.equal('2024-01-01');
      await claude.messages.create({ model: 'sonnet', max_tokens: 10, messages: [{ role: 'user', content: 'mine?' }] }, { headers: { 'anthropic-version': '2025-12-01' } });
      expect(claudeUp.last().headers['anthropic-version']).to.equal('2025-12-01');
      // A server that only speaks the API (not Anthropic's own, clientVersion not set) gets the default.
      await claude.messages.create({ model: 'claude-compatible', max_tokens: 10, messages: [{ role: 'user', content: 'default?' }] }, { headers: { 'anthropic-version': '2025-12-01' } });
      expect(claudeUp.last().headers['anthropic-version']).to.equal('2023-06-01');

      // The bytes, exactly (fetch, no SDK in between).
      const raw = await messagesCall({ model: 'sonnet', max_tokens: 300, system, tools: [tool], top_k: 5, messages: [{ role: 'user', content: 'again' }] });
      expect(raw.status).to.equal(200);
      expect(await raw.text()).to.equal(claudeUp.last().sent);
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.losses).to.deep.equal([]);
      expect(row.provider).to.equal('claude');
      // Usage reached metering: input, plus cache read and creation, and output.
      expect(row.prompt_tokens).to.equal(11 + 5 + 2);
      expect(row.completion_tokens).to.equal(7);
    });

    it('thinking another back end answered without a signature is left out (Anthropic refuses it), and thinking with it for that tool loop; named as losses', async () => {
      claudeUp.script(() => ({ json: message([{ type: 'text', text: 'Sunny.' }]) }));
      const tools = [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }];
      const messages = [
        { role: 'user', content: 'weather in Paris?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Thinking in openai.', signature: '' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
      ];
      const raw = await messagesCall({ model: 'sonnet', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2048 }, tools, messages });
      expect(raw.status, await raw.clone().text()).to.equal(200);
      const sent = claudeUp.last().body!;
      expect(sent).to.not.have.property('thinking');
      expect(sent.messages[1].content).to.deep.equal([{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }]);
      expect(raw.headers.get('x-switchyard-losses')).to.equal('thinking.unsigned,thinking.tool_turn_without_thinking');
      // Signed thinking goes up as it came, and thinking stays on.
      const signed = [messages[0], { role: 'assistant', content: [{ type: 'thinking', thinking: 'Let me look.', signature: 'sig-abc' }, messages[1]!.content[1]] }, messages[2]];
      const again = await messagesCall({ model: 'sonnet', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2048 }, tools, messages: signed });
      expect(again.status).to.equal(200);
      expect(claudeUp.last().body).to.deep.equal({ model: 'claude-fake-1', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2048 }, tools, messages: signed });
      expect(again.headers.get('x-switchyard-losses')).to.equal(null);
    });

    it('a turn after server tools ran (code execution, web search, search results) goes up as sent', async () => {
      claudeUp.script(() => ({ json: message([{ type: 'text', text: 'Two.' }]) }));
      const messages = [
        { role: 'user', content: [{ type: 'search_result', source: 'https://example.com/doc', title: 'Doc', content: [{ type: 'text', text: 'one plus one' }], citations: { enabled: true } }] },
        {
          role: 'assistant',
          content: [
            { type: 'server_tool_use', id: 'srvtoolu_01', name: 'code_execution', input: { code: 'print(1+1)' } },
            { type: 'code_execution_tool_result', tool_use_id: 'srvtoolu_01', content: { type: 'code_execution_result', stdout: '2\n', stderr: '', return_code: 0, content: [] } },
            { type: 'server_tool_use', id: 'srvtoolu_02', name: 'web_search', input: { query: 'one plus one' } },
            { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_02', content: { type: 'web_search_tool_result_error', error_code: 'max_uses_exceeded' } },
            { type: 'text', text: '2' },
          ],
        },
        { role: 'user', content: 'thanks' },
      ];
      const tools = [{ type: 'code_execution_20250825', name: 'code_execution' }, { type: 'web_search_20250305', name: 'web_search', max_uses: 1 }];
      const raw = await messagesCall({ model: 'sonnet', max_tokens: 100, tools, messages });
      expect(raw.status, await raw.clone().text()).to.equal(200);
      expect(claudeUp.last().body).to.deep.equal({ model: 'claude-fake-1', max_tokens: 100, tools, messages });
      // A tool result's content is still checked where the gateway reads it.
      const bad = await messagesCall({ model: 'sonnet', max_tokens: 100, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: 5 }] }] });
      expect(bad.status).to.equal(400);
    });

    it('messages.stream: the SDK assembles the answer; the raw stream is the upstream event text, ping included, byte for byte', async () => {
      const msg = message([
        { type: 'thinking', thinking: 'Rain is likely.', signature: 'sig-pass-1' },
        { type: 'text', text: 'It will rain in Paris' },
      ]);
      claudeUp.script(() => ({ events: eventsOf(msg) }));
      const stream = claude.messages.stream({
        model: 'sonnet',
        max_tokens: 4000,
        system,
        tools: [tool],
        thinking: { type: 'enabled', budget_tokens: 2000 },
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
      });
      const final = await stream.finalMessage();
      expect(claudeUp.last().body).to.deep.equal({ ...lastClientBody(), model: 'claude-fake-1' });
      expect(claudeUp.last().body!.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2000 });
      expect(JSON.parse(JSON.stringify(final.content))).to.deep.equal(msg.content);
      expect(final.usage).to.deep.include({ output_tokens: 7, cache_read_input_tokens: 5, cache_creation_input_tokens: 2 });

      const raw = await messagesCall({ model: 'sonnet', max_tokens: 4000, stream: true, messages: [{ role: 'user', content: 'Weather in Paris?' }] });
      expect(raw.status).to.equal(200);
      const text = await raw.text();
      expect(text).to.include('event: ping\n');
      expect(text).to.equal(claudeUp.last().sent);
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.losses).to.deep.equal([]);
      expect(row.prompt_tokens).to.equal(11 + 5 + 2);
      expect(row.completion_tokens).to.equal(7);
    });

    it('events the translation knows nothing of (citations, an unknown block, an unknown event) are relayed as they came, in order', async () => {
      const events: FakeEvent[] = [
        ['message_start', { message: { ...message([]), content: [], stop_reason: null, usage: { input_tokens: 9, output_tokens: 1 } } }],
        ['ping', {}],
        ['content_block_start', { index: 0, content_block: { type: 'text', text: '', citations: [] } }],
        ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Cited' } }],
        ['content_block_delta', { index: 0, delta: { type: 'citations_delta', citation: { type: 'char_location', cited_text: 'x', document_index: 0, start_char_index: 0, end_char_index: 1 } } }],
        ['content_block_stop', { index: 0 }],
        ['future_event', { detail: { anything: [1, 2, 3] } }],
        ['content_block_start', { index: 1, content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} } }],
        ['content_block_stop', { index: 1 }],
        ['ping', {}],
        ['message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 4 } }],
        ['message_stop', {}],
      ];
      claudeUp.script(() => ({ events }));
      const raw = await messagesCall({ model: 'sonnet', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'cite' }] });
      const text = await raw.text();
      const sent = claudeUp.last().sent;
      expect(sent.split('\n\n').length).to.equal(events.length + 1);
      expect(text).to.equal(sent);
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.losses).to.deep.equal([]);
      expect(row.prompt_tokens).to.equal(9);
      expect(row.completion_tokens).to.equal(4);
    });

    it('a streamed web search (server_tool_use with its input in input_json_delta pieces, then its result): relayed to the SDK, metered, nothing refused', async () => {
      const events: FakeEvent[] = [
        ['message_start', { message: { ...message([]), content: [], stop_reason: null, usage: { input_tokens: 4021, output_tokens: 1 } } }],
        ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Searching.' } }],
        ['content_block_stop', { index: 0 }],
        ['content_block_start', { index: 1, content_block: { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: {} } }],
        ['content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{"query":' } }],
        ['content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '"weather"}' } }],
        ['content_block_stop', { index: 1 }],
        ['content_block_start', { index: 2, content_block: { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_01', content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Weather', encrypted_content: 'abc', page_age: null }] } }],
        ['content_block_stop', { index: 2 }],
        ['content_block_start', { index: 3, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { index: 3, delta: { type: 'text_delta', text: 'It is sunny.' } }],
        ['content_block_stop', { index: 3 }],
        ['message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 30, server_tool_use: { web_search_requests: 1 } } }],
        ['message_stop', {}],
      ];
      claudeUp.script(() => ({ events }));
      const stream = claude.messages.stream({ model: 'sonnet', max_tokens: 500, tools: [{ type: 'web_search_20250305', name: 'web_search' }], messages: [{ role: 'user', content: 'weather?' }] });
      const final = await stream.finalMessage();
      expect(final.content.map((b) => b.type)).to.deep.equal(['text', 'server_tool_use', 'web_search_tool_result', 'text']);
      expect((final.content[1] as { input: unknown }).input).to.deep.equal({ query: 'weather' });
      const id = (await stream.withResponse()).response.headers.get('x-request-id')!;
      const row = await logRow(id);
      expect(row.status).to.equal(200);
      expect(row.prompt_tokens).to.equal(4021);
      expect(row.completion_tokens).to.equal(30);
    });

    it('a stream cut short: the events that came are relayed as they are, then one error event the gateway must add', async () => {
      const all = eventsOf(message([{ type: 'text', text: 'one two three four' }]));
      claudeUp.script(() => ({ events: all, cutAfter: 5 }));
      const raw = await messagesCall({ model: 'sonnet', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'cut' }] });
      const text = await raw.text();
      const sent = claudeUp.last().sent;
      expect(sent.split('\n\n').length).to.equal(6);
      expect(text.startsWith(sent)).to.equal(true);
      const rest = text.slice(sent.length);
      expect(rest.startsWith('event: error\ndata: ')).to.equal(true);
      expect(rest.trimEnd().split('\n\n')).to.have.length(1);
      expect(JSON.parse(rest.trim().split('\n')[1]!.slice(6))).to.deep.include({ type: 'error' });
    });

    it('a pass-through target that fails hands the call to a translating one: the client gets the translation, losses named', async () => {
      claudeUp.script(() => ({ status: 500, json: anthropicError('api_error', 'Internal server error') }));
      const raw = await messagesCall({ model: 'claude-then-mock', max_tokens: 16, top_k: 5, messages: [{ role: 'user', content: 'hello there' }] });
      expect(raw.status).to.equal(200);
      expect(claudeUp.last().body!.top_k).to.equal(5);
      const body = (await raw.json()) as Json;
      expect(body.type).to.equal('message');
      expect(raw.headers.get('x-switchyard-losses')).to.equal('top_k');
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.provider).to.equal('mock');
      expect(row.losses).to.deep.equal(['top_k']);
    });

    it('a pass-through stream that fails before its first content hands the call to a translating one: the Claude client gets its whole stream', async () => {
      claudeUp.script(() => ({
        events: [
          ['message_start', { message: { id: 'msg_x', type: 'message', role: 'assistant', model: 'claude-fake-1', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 3, output_tokens: 0 } } }],
          ['error', { error: { type: 'overloaded_error', message: 'Overloaded' } }],
        ],
      }));
      const stream = claude.messages.stream({ model: 'claude-then-mock', max_tokens: 16, top_k: 5, messages: [{ role: 'user', content: 'hello there' }] });
      const final = await stream.finalMessage();
      expect(final.content[0]).to.deep.include({ type: 'text', text: 'hello there' });
      const { response } = await stream.withResponse();
      const row = await logRow(response.headers.get('x-request-id')!);
      expect(row.provider).to.equal('mock');
      // The failed pass-through attempt recorded nothing for the call; the translation's loss is named.
      expect(row.losses).to.deep.equal(['top_k']);
    });
  });

  describe('@google/genai against the gemini provider', () => {
    const safetySettings = [{ category: HarmCategory.HARM_CATEGORY_HATE_SPEECH, threshold: HarmBlockThreshold.BLOCK_ONLY_HIGH }];

    it('generateContent: safetySettings, cachedContent and the tool schema go up as written; the answer bytes come back as they are', async () => {
      const upstreamAnswer = answer([{ text: 'Sunny' }], {
        candidates: [{ content: { role: 'model', parts: [{ text: 'Sunny' }] }, finishReason: 'STOP', index: 0, safetyRatings: [{ category: 'HARM_CATEGORY_HATE_SPEECH', probability: 'NEGLIGIBLE' }], citationMetadata: { citationSources: [{ startIndex: 0, endIndex: 5, uri: 'https://example.com' }] } }],
        usageMetadata: { promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18, cachedContentTokenCount: 4 },
      });
      geminiUp.script(() => ({ json: upstreamAnswer }));
      const response = await ai.models.generateContent({
        model: 'flash',
        contents: 'weather?',
        config: {
          systemInstruction: 'Be brief.',
          safetySettings,
          cachedContent: 'cachedContents/abc123',
          temperature: 0.3,
          tools: [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: 'OBJECT' as never, properties: { city: { type: 'STRING' as never } } } }] }],
        },
      });
      const got = geminiUp.last();
      expect(got.url).to.equal('/v1beta/models/gemini-fake-1:generateContent');
      expect(got.headers['x-goog-api-key']).to.equal(geminiUp.apiKey);
      expect(got.body).to.deep.equal(lastClientBody());
      expect(got.body!.cachedContent).to.equal('cachedContents/abc123');
      expect(got.body!.safetySettings).to.deep.equal([{ category: 'HARM_CATEGORY_HATE_SPEECH', threshold: 'BLOCK_ONLY_HIGH' }]);
      expect(response.text).to.equal('Sunny');
      expect(response.candidates?.[0]?.citationMetadata?.citations?.[0]?.uri).to.equal('https://example.com');

      const raw = await generateCall('flash', { contents: [{ role: 'user', parts: [{ text: 'again' }] }], cachedContent: 'cachedContents/abc123', safetySettings }, false);
      expect(raw.status).to.equal(200);
      expect(await raw.text()).to.equal(geminiUp.last().sent);
      expect(raw.headers.get('x-switchyard-losses')).to.equal(null);
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.losses).to.deep.equal([]);
      expect(row.provider).to.equal('google');
      expect(row.prompt_tokens).to.equal(11);
      expect(row.completion_tokens).to.equal(7);
    });

    it('generateContentStream: the SDK reads the stream; the raw SSE is the upstream events byte for byte; usage metered', async () => {
      const full = answer([{ text: 'thinking it over', thought: true }, { text: 'It will be sunny' }], { usageMetadata: { promptTokenCount: 11, candidatesTokenCount: 7, thoughtsTokenCount: 3, totalTokenCount: 21 } });
      geminiUp.script(() => ({ events: geminiEventsOf(full) }));
      const stream = await ai.models.generateContentStream({ model: 'flash', contents: 'weather?', config: { safetySettings, cachedContent: 'cachedContents/abc123', thinkingConfig: { includeThoughts: true, thinkingBudget: 777 } } });
      let text = '';
      for await (const chunk of stream) text += chunk.text ?? '';
      expect(text).to.equal('It will be sunny');
      const got = geminiUp.last();
      expect(got.url).to.equal('/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse');
      expect(got.body).to.deep.equal(lastClientBody());
      expect(got.body!.generationConfig.thinkingConfig).to.deep.equal({ includeThoughts: true, thinkingBudget: 777 });

      const raw = await generateCall('flash', { contents: [{ role: 'user', parts: [{ text: 'weather?' }] }], safetySettings }, true);
      expect(raw.status).to.equal(200);
      const body = await raw.text();
      expect(body).to.equal(geminiUp.last().sent);
      const row = await logRow(raw.headers.get('x-request-id')!);
      expect(row.losses).to.deep.equal([]);
      expect(row.prompt_tokens).to.equal(11);
      expect(row.completion_tokens).to.equal(7 + 3);
    });

    it("streamGenerateContent without alt=sse: the back end's events streamed as the JSON array's items, their bytes as they came", async () => {
      const events = geminiEventsOf(answer([{ text: 'plain words here' }], { futureField: 1 }));
      geminiUp.script(() => ({ events }));
      const raw = await realFetch(`${gw.url}/v1beta/models/flash:streamGenerateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': CLIENT_KEY },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
      });
      expect(raw.status).to.equal(200);
      expect(geminiUp.last().url).to.match(/:streamGenerateContent\?alt=sse$/);
      expect(await raw.text()).to.equal(`[${events.map((event) => JSON.stringify(event)).join(',\r\n')}\r\n]`);
    });
  });
});
