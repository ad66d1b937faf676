import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI, Type } from '@google/genai';
import { expect } from 'chai';
import OpenAI from 'openai';
import { answer, API_KEY_INVALID, eventsOf, FakeGemini, googleError } from './fakes/gemini-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { chatStreamEvents } from './support/calls.js';
import { plain } from './support/json.js';
import { logRow, usageRows } from './support/rows.js';

const CLIENT_KEY = 'sk-client-gemini-provider-abc123';
const WRONG_KEY = 'AIzaSyThis-is-the-wrong-provider-key-000';

type Json = Record<string, any>;

const weatherTool: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};

/** A raw chat-completions stream: the parsed `data:` events (without [DONE]). */
const rawStream = (url: string, body: Json) => chatStreamEvents<Json>(url, body, CLIENT_KEY);

describe('the gemini provider behind the gateway (fake Gemini upstream)', () => {
  const upstream = new FakeGemini();
  let gw: RunningGateway;
  let openai: OpenAI;
  let ai: GoogleGenAI;

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
  - gemini
providers:
  - id: google
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [gemini-fake-1, gemini-3-fake, gemini-2.5-flash, gemini-2.5-pro]
  - id: google-v1beta-base
    type: gemini
    baseUrl: ${upstream.url}/v1beta/
    apiKey: ${upstream.apiKey}
    models: [gemini-fake-2]
  - id: limited-a
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-1]
  # A 429 with retry-after cools its target for that long: each 429 call gets its own.
  - id: limited-b
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-2]
  - id: limited-c
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-3]
  - id: limited-d
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-4]
  - id: limited-e
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [limited-5]
  - id: wrongkey
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${WRONG_KEY}
    models: [bad-creds]
models:
  - name: flash
    targets: [{ provider: google, model: gemini-fake-1 }]
  - name: flash-failover
    targets:
      - { provider: google, model: gemini-fake-1, priority: 0 }
      - { provider: google-v1beta-base, model: gemini-fake-2, priority: 1 }
`);
    openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  describe('the fake upstream checks the key as Google does', () => {
    it('a missing or wrong x-goog-api-key (a Bearer is not a key) is 400 INVALID_ARGUMENT "API key not valid"', async () => {
      const post = (headers: Record<string, string>) =>
        fetch(`${upstream.url}/v1beta/models/m:generateContent`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'x' }] }] }),
        });
      for (const headers of [{ authorization: `Bearer ${upstream.apiKey}` }, { "x-goog-api-key": "AIza-nope" }] as Record<string, string>[]) {
        const refused = await post(headers);
        expect(refused.status).to.equal(400);
        expect(await refused.json()).to.deep.equal(API_KEY_INVALID);
      }
      expect(API_KEY_INVALID.error).to.include({ code: 400, status: 'INVALID_ARGUMENT', message: 'API key not valid. Please pass a valid API key.' });
      const ok = await post({ 'x-goog-api-key': upstream.apiKey });
      expect(ok.status).to.equal(200);
    });
  });

  describe('official openai client (openai-chat format)', () => {
    it('chat: POST /v1beta/models/{model}:generateContent with x-goog-api-key only (no Authorization, no key in the URL); system, options and usage', async () => {
      const completion = await openai.chat.completions.create({
        model: 'flash',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hello gemini' },
        ],
        max_tokens: 50,
        temperature: 0.3,
        stop: ['END'],
      });
      const got = upstream.last();
      expect(got.method).to.equal('POST');
      expect(got.url).to.equal('/v1beta/models/gemini-fake-1:generateContent');
      expect(got.headers['x-goog-api-key']).to.equal(upstream.apiKey);
      expect(got.headers.authorization).to.equal(undefined);
      expect(got.url).to.not.include('key=');
      expect(got.body).to.deep.equal({
        systemInstruction: { parts: [{ text: 'Be brief.' }] },
        contents: [{ role: 'user', parts: [{ text: 'hello gemini' }] }],
        generationConfig: { temperature: 0.3, maxOutputTokens: 50, stopSequences: ['END'] },
      });
      expect(completion.choices[0]!.message.content).to.equal('upstream says: hello gemini');
      expect(completion.choices[0]!.finish_reason).to.equal('stop');
      expect(completion.model).to.equal('gemini-fake-1');
      expect(completion.usage).to.deep.include({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
      expect(gw.logText()).to.not.include(upstream.apiKey);
    });

    it('a base URL ending in /v1beta means the same API', async () => {
      await openai.chat.completions.create({ model: 'gemini-fake-2', messages: [{ role: 'user', content: 'x' }] });
      expect(upstream.last().url).to.equal('/v1beta/models/gemini-fake-2:generateContent');
    });

    it('finish reasons: MAX_TOKENS -> length, SAFETY -> content_filter', async () => {
      upstream.script(() => ({ json: answer([{ text: 'cut' }], { candidates: [{ content: { role: 'model', parts: [{ text: 'cut' }] }, finishReason: 'MAX_TOKENS', index: 0 }] }) }));
      const long = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'x' }] });
      expect(long.choices[0]!.finish_reason).to.equal('length');
      upstream.script(() => ({ json: answer([], { candidates: [{ content: { role: 'model', parts: [] }, finishReason: 'SAFETY', index: 0 }] }) }));
      const unsafe = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'x' }] });
      expect(unsafe.choices[0]!.finish_reason).to.equal('content_filter');
    });

    it('n past the 8 candidates Gemini makes: a 400 on n before any call (fewer choices would be paired as if they were all); 8 go up', async () => {
      upstream.reset();
      const error = (await openai.chat.completions.create({ model: 'flash', n: 9, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('n');
      expect(error.message).to.include('at most 8 choices');
      expect(upstream.received).to.have.length(0);
      await openai.chat.completions.create({ model: 'flash', n: 8, messages: [{ role: 'user', content: 'x' }] }).catch(() => undefined);
      expect(upstream.last().body!.generationConfig).to.deep.include({ candidateCount: 8 });
    });

    it('a prompt blocked before any candidate: one empty choice cut by the filter, the block named as a loss (as a stream says it)', async () => {
      upstream.script(() => ({ json: { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 10, totalTokenCount: 10 }, modelVersion: 'gemini-fake-1' } }));
      const data = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'x' }] });
      expect(data.choices).to.have.length(1);
      expect(data.choices[0]).to.deep.include({ index: 0, finish_reason: 'content_filter' });
      expect(data.choices[0]!.message.content).to.equal(null);
      expect(data.usage).to.deep.include({ prompt_tokens: 10, completion_tokens: 0 });
      // A Claude-style client: a refusal, and the loss named in its header.
      const response = await fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'flash', max_tokens: 50, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(((await response.json()) as Json).stop_reason).to.equal('refusal');
      expect(response.headers.get('x-switchyard-losses')).to.equal('promptFeedback.blockReason.SAFETY');
    });

    it('stream with include_usage: :streamGenerateContent?alt=sse, role, text pieces, finish, then a usage chunk with choices []', async () => {
      const events = await rawStream(gw.url, { model: 'flash', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'one two three' }] });
      const got = upstream.last();
      expect(got.url).to.equal('/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse');
      expect(got.headers['x-goog-api-key']).to.equal(upstream.apiKey);
      expect(got.headers.authorization).to.equal(undefined);
      expect(got.body).to.deep.equal({ contents: [{ role: 'user', parts: [{ text: 'one two three' }] }] });
      const choices = events.filter((e) => e.choices.length > 0);
      expect(choices[0]!.choices[0].delta.role).to.equal('assistant');
      const text = choices.map((e) => e.choices[0].delta.content ?? '').join('');
      expect(text).to.equal('upstream says: one two three');
      expect(choices.filter((e) => e.choices[0].delta.content).length).to.be.greaterThan(2);
      expect(choices[choices.length - 1]!.choices[0].finish_reason).to.equal('stop');
      const last = events[events.length - 1]!;
      expect(last.choices).to.deep.equal([]);
      expect(last.usage).to.deep.include({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
    });

    it('stream without include_usage: no usage chunk', async () => {
      const events = await rawStream(gw.url, { model: 'flash', stream: true, messages: [{ role: 'user', content: 'a b' }] });
      expect(events.every((e) => e.choices.length > 0)).to.equal(true);
      expect(events.some((e) => e.usage)).to.equal(false);
    });

    it('tools: declarations and tool_choice go up; a functionCall comes back as a tool call with a made id and finish tool_calls', async () => {
      const completion = await openai.chat.completions.create({
        model: 'flash',
        messages: [{ role: 'user', content: 'weather in Paris?' }],
        tools: [weatherTool],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
      });
      const body = upstream.last().body!;
      expect(body.tools).to.deep.equal([{ functionDeclarations: [{ name: 'get_weather', description: 'Weather for a city', parametersJsonSchema: weatherTool.function.parameters }] }]);
      expect(body.toolConfig).to.deep.equal({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).to.equal('tool_calls');
      const call = choice.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
      expect(call.id).to.be.a('string').and.not.equal('');
      expect(call.function).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });

      // The second turn: the call and its result go up as functionCall and functionResponse (by name).
      const second = await openai.chat.completions.create({
        model: 'flash',
        tools: [weatherTool],
        messages: [
          { role: 'user', content: 'weather in Paris?' },
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: call.id, content: '{"forecast":"rain"}' },
        ],
      });
      const contents = upstream.last().body!.contents as Json[];
      expect(contents[1]).to.deep.equal({ role: 'model', parts: [{ functionCall: { id: call.id, name: 'get_weather', args: { city: 'Paris' } } }] });
      expect(contents[2]).to.deep.equal({ role: 'user', parts: [{ functionResponse: { id: call.id, name: 'get_weather', response: { forecast: 'rain' } } }] });
      expect(second.choices[0]!.message.content).to.equal('upstream says: {"forecast":"rain"}');
    });

    it('the older function calling: functions and function_call go up as declarations and a tool config; the call and its result as functionCall and functionResponse; the answer as function_call', async () => {
      const { data: completion, response } = await openai.chat.completions
        .create({
          model: 'flash',
          messages: [{ role: 'user', content: 'weather in Paris?' }],
          functions: [weatherTool.function],
          function_call: { name: 'get_weather' },
        })
        .withResponse();
      const body = upstream.last().body!;
      expect(body.tools).to.deep.equal([{ functionDeclarations: [{ name: 'get_weather', description: 'Weather for a city', parametersJsonSchema: weatherTool.function.parameters }] }]);
      expect(body.toolConfig).to.deep.equal({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } });
      // Nothing the client asked for was lost on the way.
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).to.equal('function_call');
      expect(plain(choice.message.function_call)).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(choice.message).to.not.have.property('tool_calls');

      const second = await openai.chat.completions.create({
        model: 'flash',
        functions: [weatherTool.function],
        messages: [
          { role: 'user', content: 'weather in Paris?' },
          { role: 'assistant', content: null, function_call: choice.message.function_call! },
          { role: 'function', name: 'get_weather', content: '{"forecast":"rain"}' },
        ],
      });
      const contents = upstream.last().body!.contents as Json[];
      expect(contents).to.have.length(3);
      expect(contents[1].role).to.equal('model');
      expect(contents[1].parts).to.have.length(1);
      expect(contents[1].parts[0].functionCall).to.deep.include({ name: 'get_weather', args: { city: 'Paris' } });
      expect(contents[2]).to.deep.equal({ role: 'user', parts: [{ functionResponse: { id: contents[1].parts[0].functionCall.id, name: 'get_weather', response: { forecast: 'rain' } } }] });
      expect(second.choices[0]!.message.content).to.equal('upstream says: {"forecast":"rain"}');
    });

    it('the older function calling, streamed: the whole functionCall arrives as one function_call piece, finish function_call', async () => {
      upstream.script(() => ({ events: eventsOf(answer([{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }])) }));
      const events = await rawStream(gw.url, { model: 'flash', stream: true, functions: [weatherTool.function], messages: [{ role: 'user', content: 'weather in Paris?' }] });
      const calls = events.flatMap((event) => (event.choices ?? []).map((choice: Json) => choice.delta?.function_call).filter(Boolean));
      expect(calls).to.deep.equal([{ name: 'get_weather', arguments: '{"city":"Paris"}' }]);
      expect(events.some((event) => (event.choices ?? []).some((choice: Json) => choice.delta?.tool_calls))).to.equal(false);
      expect(events.map((event) => event.choices?.[0]?.finish_reason).filter(Boolean)).to.deep.equal(['function_call']);
    });

    it('a tool result in several text parts (as MCP tools answer) goes up a line each, not run together', async () => {
      await openai.chat.completions.create({
        model: 'flash',
        tools: [weatherTool],
        messages: [
          { role: 'user', content: 'weather in Paris?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'line1' }, { type: 'text', text: 'line2' }] },
        ],
      });
      const contents = upstream.last().body!.contents as Json[];
      expect(contents[2].parts[0].functionResponse.response).to.deep.equal({ result: 'line1\nline2' });
    });

    it('streamed tool calls: two whole functionCalls, each a whole tool-call delta with its own id, assembled by the client', async () => {
      upstream.script(() => ({
        events: eventsOf(answer([{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }, { functionCall: { name: 'get_weather', args: { city: 'Rome' } } }])),
      }));
      const stream = openai.chat.completions.stream({ model: 'flash', messages: [{ role: 'user', content: 'two cities' }], tools: [weatherTool] });
      // The SDK closes each call's arguments (the last one only when the finish comes after it).
      const done: string[] = [];
      stream.on('tool_calls.function.arguments.done', (event) => done.push(event.arguments));
      const final = await stream.finalChatCompletion();
      expect(done).to.deep.equal(['{"city":"Paris"}', '{"city":"Rome"}']);
      const calls = final.choices[0]!.message.tool_calls! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall[];
      expect(calls.map((c) => c.function)).to.deep.equal([
        { name: 'get_weather', arguments: '{"city":"Paris"}' },
        { name: 'get_weather', arguments: '{"city":"Rome"}' },
      ]);
      expect(new Set(calls.map((c) => c.id)).size).to.equal(2);
      expect(final.choices[0]!.finish_reason).to.equal('tool_calls');
    });

    it('reasoning_effort: a thinkingConfig goes up; thought parts come back as reasoning_content, streamed and not', async () => {
      const parts = [{ text: 'thinking hard', thought: true }, { text: 'the answer' }];
      upstream.script((_body, received) => (received.url.includes('stream') ? { events: eventsOf(answer(parts)) } : { json: answer(parts, { usageMetadata: { ...answer([]).usageMetadata, thoughtsTokenCount: 4, totalTokenCount: 22 } }) }));
      const completion = await openai.chat.completions.create({ model: 'flash', reasoning_effort: 'low', messages: [{ role: 'user', content: 'think' }] });
      expect(upstream.last().body!.generationConfig).to.deep.equal({ thinkingConfig: { thinkingBudget: 2048, includeThoughts: true } });
      const message = completion.choices[0]!.message as unknown as Json;
      expect(message.content).to.equal('the answer');
      expect(message.reasoning_content).to.equal('thinking hard');
      expect(completion.usage).to.deep.include({ completion_tokens: 11, total_tokens: 22 });
      expect(plain(completion.usage!).completion_tokens_details).to.deep.include({ reasoning_tokens: 4 });
      const events = await rawStream(gw.url, { model: 'flash', stream: true, reasoning_effort: 'low', messages: [{ role: 'user', content: 'think' }] });
      const reasoning = events.map((e) => e.choices[0]?.delta.reasoning_content ?? '').join('');
      const text = events.map((e) => e.choices[0]?.delta.content ?? '').join('');
      expect(reasoning).to.equal('thinking hard');
      expect(text).to.equal('the answer');
    });
  });

  describe('thinking budgets within what the model takes', () => {
    it("an effort's budget is brought within the 2.5 model's documented range (Google refuses one outside it); thinking off where it cannot be is named; other models get it as it is", async () => {
      const sent = async (model: string, effort: string) => {
        const { response } = await openai.chat.completions.create({ model, reasoning_effort: effort as never, messages: [{ role: 'user', content: 'think' }] }).withResponse();
        return { config: upstream.last().body!.generationConfig as Json, losses: response.headers.get('x-switchyard-losses') ?? '' };
      };
      expect((await sent('gemini-2.5-flash', 'xhigh')).config).to.deep.equal({ thinkingConfig: { thinkingBudget: 24576, includeThoughts: true } });
      expect((await sent('gemini-2.5-flash', 'none')).config).to.deep.equal({ thinkingConfig: { thinkingBudget: 0 } });
      expect((await sent('gemini-2.5-pro', 'xhigh')).config).to.deep.equal({ thinkingConfig: { thinkingBudget: 32768, includeThoughts: true } });
      const proOff = await sent('gemini-2.5-pro', 'none');
      expect(proOff.config).to.deep.equal({ thinkingConfig: { thinkingBudget: 128, includeThoughts: true } });
      expect(proOff.losses.split(',')).to.include('reasoning_effort.none');
      expect((await sent('gemini-fake-1', 'xhigh')).config).to.deep.equal({ thinkingConfig: { thinkingBudget: 32768, includeThoughts: true } });
    });
  });

  describe(':streamGenerateContent without alt=sse (a JSON array) passed through to the gemini provider', () => {
    const arrayCall = async (text: string) => {
      const res = await fetch(`${gw.url}/v1beta/models/flash:streamGenerateContent`, {
        method: 'POST',
        headers: { 'x-goog-api-key': CLIENT_KEY, 'content-type': 'application/json' },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text }] }] }),
      });
      return { res, text: await res.text() };
    };

    it("streams the back end's events as the array's items, each as it came", async () => {
      const events = eventsOf(answer([{ text: 'alpha beta gamma' }]));
      upstream.script(() => ({ events }));
      const { res, text } = await arrayCall('x');
      expect(upstream.last().url).to.equal('/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse');
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      expect(JSON.parse(text)).to.deep.equal(events);
    });

    it('a back end that drops the connection midway: the array ends with an error item and is still JSON', async () => {
      upstream.script(() => ({ events: eventsOf(answer([{ text: 'alpha beta gamma delta' }])), cutAfter: 2 }));
      const { res, text } = await arrayCall('x');
      expect(res.status).to.equal(200);
      const items = JSON.parse(text) as Array<{ error?: { code: number; status: string } }>;
      expect(items.slice(0, 2).every((item) => item.error === undefined)).to.equal(true);
      expect(items.at(-1)!.error).to.include({ code: 502 });
    });
  });

  describe('official @google/genai (gemini format) to the gemini provider', () => {
    it('generateContent: contents, system instruction, tools and config go up; text, functionCall, finish and usage come back', async () => {
      const response = await ai.models.generateContent({
        model: 'flash',
        contents: 'hello from genai',
        config: { systemInstruction: 'Be kind.', temperature: 0.5, maxOutputTokens: 40 },
      });
      const got = upstream.last();
      expect(got.url).to.equal('/v1beta/models/gemini-fake-1:generateContent');
      expect(got.headers['x-goog-api-key']).to.equal(upstream.apiKey);
      expect(got.headers['x-goog-api-key']).to.not.equal(CLIENT_KEY);
      // Same format in and out: the body goes up as @google/genai wrote it.
      expect(got.body).to.deep.equal({
        systemInstruction: { parts: [{ text: 'Be kind.' }], role: 'user' },
        contents: [{ role: 'user', parts: [{ text: 'hello from genai' }] }],
        generationConfig: { temperature: 0.5, maxOutputTokens: 40 },
      });
      expect(response.text).to.equal('upstream says: hello from genai');
      expect(response.candidates?.[0]?.finishReason).to.equal('STOP');
      expect(plain(response.usageMetadata)).to.deep.equal({ promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18 });
      expect(response.modelVersion).to.equal('gemini-fake-1');

      const withTool = await ai.models.generateContent({
        model: 'flash',
        contents: 'weather?',
        config: { tools: [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } } } }] }] },
      });
      expect(upstream.last().body!.tools[0].functionDeclarations[0]).to.deep.equal({ name: 'get_weather', parameters: { type: 'OBJECT', properties: { city: { type: 'STRING' } } } });
      expect(withTool.functionCalls?.map((c) => ({ name: c.name, args: c.args }))).to.deep.equal([{ name: 'get_weather', args: { city: 'Paris' } }]);
      expect(withTool.candidates?.[0]?.finishReason).to.equal('STOP');
    });

    it('generateContentStream: text in several chunks, the last with finishReason and usageMetadata', async () => {
      const stream = await ai.models.generateContentStream({ model: 'flash', contents: 'alpha beta gamma' });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(upstream.last().url).to.equal('/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse');
      expect(upstream.last().headers['x-goog-api-key']).to.equal(upstream.apiKey);
      expect(chunks.length).to.be.greaterThan(2);
      expect(chunks.map((c) => c.text ?? '').join('')).to.equal('upstream says: alpha beta gamma');
      const last = chunks[chunks.length - 1]!;
      expect(last.candidates?.[0]?.finishReason).to.equal('STOP');
      expect(plain(last.usageMetadata)).to.deep.include({ promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18 });
    });
  });

  describe('a stream whose back end spreads an event over several data: lines (valid SSE)', () => {
    it('reaches @google/genai one event a line, as Google sends it, and the client reads the whole answer', async () => {
      const events = eventsOf(answer([{ text: 'alpha beta gamma' }]));
      const last = events.pop()!;
      // The last event's JSON pretty-printed, a data: line for each of its lines.
      const spread = JSON.stringify(last, null, 2).split('\n').map((line) => `data: ${line}\r\n`).join('') + '\r\n';
      upstream.script(() => ({ events, tail: spread }));
      const stream = await ai.models.generateContentStream({ model: 'flash', contents: 'x' });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect(chunks.map((c) => c.text ?? '').join('')).to.equal('alpha beta gamma');
      expect(chunks.at(-1)!.candidates?.[0]?.finishReason).to.equal('STOP');
    });
  });

  describe('image output (responseModalities IMAGE) and thought signatures', () => {
    const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const imageAnswer = () =>
      answer([{ text: 'A red dot:', thoughtSignature: 'c2lnLWltYWdl' }, { inlineData: { mimeType: 'image/png', data: PNG } }], { modelVersion: 'gemini-fake-1' });

    it('@google/genai generateContent with responseModalities IMAGE: the modality goes up, the image and its signature come back', async () => {
      upstream.script(() => ({ json: imageAnswer() }));
      const response = await ai.models.generateContent({ model: 'flash', contents: 'draw a red dot', config: { responseModalities: ['TEXT', 'IMAGE'] } });
      expect(upstream.last().body!.generationConfig).to.deep.equal({ responseModalities: ['TEXT', 'IMAGE'] });
      expect(plain(response.candidates?.[0]?.content?.parts)).to.deep.equal([
        { text: 'A red dot:', thoughtSignature: 'c2lnLWltYWdl' },
        { inlineData: { mimeType: 'image/png', data: PNG } },
      ]);
      expect(response.data).to.equal(PNG);
    });

    it('@google/genai generateContentStream with responseModalities IMAGE: the image arrives as an inlineData part', async () => {
      upstream.script(() => ({ events: eventsOf(imageAnswer()) }));
      const stream = await ai.models.generateContentStream({ model: 'flash', contents: 'draw a red dot', config: { responseModalities: ['IMAGE'] } });
      const parts: Json[] = [];
      for await (const chunk of stream) parts.push(...(plain(chunk.candidates?.[0]?.content?.parts) ?? []));
      expect(upstream.last().body!.generationConfig).to.deep.equal({ responseModalities: ['IMAGE'] });
      expect(parts.filter((p) => p.inlineData)).to.deep.equal([{ inlineData: { mimeType: 'image/png', data: PNG } }]);
      expect(parts.map((p) => p.text ?? '').join('')).to.equal('A red dot:');
      // Relayed as the back end sent it: every event that repeated the signature still does.
      const sent = eventsOf(imageAnswer()).flatMap((e) => ((e.candidates as Json[])[0]!.content as Json).parts as Json[]);
      expect(parts.filter((p) => p.thoughtSignature).map((p) => p.thoughtSignature)).to.deep.equal(sent.filter((p) => p.thoughtSignature).map((p) => p.thoughtSignature));
    });

    it('the next turn hands the signature and the image back to Gemini as they came', async () => {
      upstream.script(() => ({ json: answer([{ text: 'done' }]) }));
      await ai.models.generateContent({
        model: 'flash',
        contents: [
          { role: 'user', parts: [{ text: 'draw a red dot' }] },
          { role: 'model', parts: [{ text: 'A red dot:', thoughtSignature: 'c2lnLWltYWdl' }, { inlineData: { mimeType: 'image/png', data: PNG } }] },
          { role: 'user', parts: [{ text: 'make it blue' }] },
        ],
        config: { responseModalities: ['TEXT', 'IMAGE'] },
      });
      expect(upstream.last().body!.contents[1]).to.deep.equal({
        role: 'model',
        parts: [{ text: 'A red dot:', thoughtSignature: 'c2lnLWltYWdl' }, { inlineData: { mimeType: 'image/png', data: PNG } }],
      });
    });

    it('a signed function call (thinking models) keeps its signature on the round trip through an OpenAI client', async () => {
      upstream.script(() => ({ json: answer([{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnLWNhbGw=' }]) }));
      const first = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool] });
      const message = first.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning_signature?: string };
      // Tagged with the type of back end that made it; handed back, Gemini gets its own signature.
      expect(message.reasoning_signature).to.equal('sy1.sig.gemini.c2lnLWNhbGw=');
      upstream.script(() => ({ json: answer([{ text: 'rainy' }]) }));
      await openai.chat.completions.create({
        model: 'flash',
        tools: [weatherTool],
        messages: [
          { role: 'user', content: 'weather?' },
          message as OpenAI.Chat.ChatCompletionAssistantMessageParam,
          { role: 'tool', tool_call_id: message.tool_calls![0]!.id, content: '{"rain":true}' },
        ],
      });
      expect(upstream.last().body!.contents[1].parts).to.deep.equal([
        { functionCall: { id: message.tool_calls![0]!.id, name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnLWNhbGw=' },
      ]);
    });

    it("a Gemini 3 model gets Google's sentinel signature on a handed-back call the client kept no signature for; other models do not", async () => {
      upstream.script(() => ({ json: answer([{ text: 'rainy' }]) }));
      const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }, { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] },
        { role: 'tool', tool_call_id: 'call_a', content: 'rain' },
        { role: 'tool', tool_call_id: 'call_b', content: 'sun' },
      ];
      await openai.chat.completions.create({ model: 'gemini-3-fake', tools: [weatherTool], messages: history });
      const parts = upstream.last().body!.contents[1].parts as Json[];
      expect(parts.map((p) => p.thoughtSignature)).to.deep.equal(['skip_thought_signature_validator', undefined]);
      await openai.chat.completions.create({ model: 'flash', tools: [weatherTool], messages: history });
      expect((upstream.last().body!.contents[1].parts as Json[]).some((p) => 'thoughtSignature' in p)).to.equal(false);
    });

    it('an OpenAI client gets the image as message.images (data: URL); a Claude-style client gets the text and the named loss message.images', async () => {
      upstream.script(() => ({ json: imageAnswer() }));
      // (The openai-chat schema takes only text and audio modalities: an image model answers with images unasked.)
      const completion = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'draw' }] });
      expect((completion.choices[0]!.message as unknown as Json).images).to.deep.equal([{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }]);

      upstream.script(() => ({ json: imageAnswer() }));
      const response = await fetch(`${gw.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: 'flash', max_tokens: 50, messages: [{ role: 'user', content: 'draw' }] }),
      });
      const body = (await response.json()) as Json;
      expect(body.content.map((b: Json) => b.type)).to.deep.equal(['thinking', 'text']);
      // Gemini's signature, tagged with its maker: a Claude back end is not handed it on the next turn.
      expect(body.content[0]).to.deep.equal({ type: 'thinking', thinking: '', signature: 'sy1.sig.gemini.c2lnLWltYWdl' });
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('message.images');
    });
  });

  describe('the Responses API (official openai client) to the gemini provider', () => {
    it('a function call signed without thought text keeps its signature in a reasoning item, so the next turn hands it back, as a stream does', async () => {
      upstream.script(() => ({ json: answer([{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'c2lnLWxvbmU=' }]) }));
      const tools = [{ type: 'function' as const, name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: false }];
      const first = await openai.responses.create({ model: 'flash', input: 'weather in Paris?', tools });
      expect(first.output.map((item) => item.type)).to.deep.equal(['reasoning', 'function_call']);
      expect((first.output[0] as { encrypted_content?: string }).encrypted_content).to.equal('sy1.sig.gemini.c2lnLWxvbmU=');
      const call = first.output[1] as { call_id: string };
      upstream.script(() => ({ json: answer([{ text: 'sunny' }]) }));
      await openai.responses.create({ model: 'flash', previous_response_id: first.id, input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }], tools });
      const parts = (upstream.last().body!.contents as Json[]).flatMap((c) => c.parts as Json[]);
      expect(parts.find((p) => p.functionCall)).to.deep.include({ thoughtSignature: 'c2lnLWxvbmU=' });
    });
  });

  describe('official @anthropic-ai/sdk (anthropic-messages format) to the gemini provider', () => {
    it('messages.create with a tool and messages.stream: tool_use and text come back, usage from usageMetadata', async () => {
      const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
      const message = await claude.messages.create({
        model: 'flash',
        max_tokens: 64,
        system: 'Be brief.',
        tools: [{ name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
        messages: [{ role: 'user', content: 'weather?' }],
      });
      expect(upstream.last().url).to.equal('/v1beta/models/gemini-fake-1:generateContent');
      expect(upstream.last().body!.systemInstruction).to.deep.equal({ parts: [{ text: 'Be brief.' }] });
      expect(message.stop_reason).to.equal('tool_use');
      const use = message.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;
      expect(use).to.deep.include({ name: 'get_weather', input: { city: 'Paris' } });
      expect(message.usage).to.deep.include({ input_tokens: 11, output_tokens: 7 });

      const stream = claude.messages.stream({ model: 'flash', max_tokens: 64, messages: [{ role: 'user', content: 'stream this' }] });
      const final = await stream.finalMessage();
      expect(upstream.last().url).to.equal('/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse');
      expect(final.content.map((b) => (b.type === 'text' ? b.text : '')).join('')).to.equal('upstream says: stream this');
      expect(final.stop_reason).to.equal('end_turn');
      expect(final.usage.output_tokens).to.equal(7);
    });

    it("thinking's budget_tokens stays under max_tokens, which Gemini counts the thoughts in (its band's 2,048 would pass 1,500)", async () => {
      const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
      const response = await claude.messages
        .create({ model: 'flash', max_tokens: 1500, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'x' }] })
        .withResponse();
      expect(upstream.last().body!.generationConfig).to.deep.equal({ maxOutputTokens: 1500, thinkingConfig: { thinkingBudget: 1499, includeThoughts: true } });
      expect(response.response.headers.get('x-switchyard-losses')).to.include('reasoning_effort.budget_capped_by_max_tokens');
    });

    it("message_start carries the prompt's tokens Gemini reported in its first event (as Anthropic's does), cached ones apart", async () => {
      const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
      const prompt = { promptTokenCount: 11, cachedContentTokenCount: 4, totalTokenCount: 11 };
      upstream.script(() => ({ events: eventsOf(answer([{ text: 'one two three' }])).map((event, i, all) => (i < all.length - 1 ? { ...event, usageMetadata: prompt } : event)) }));
      const stream = claude.messages.stream({ model: 'flash', max_tokens: 64, messages: [{ role: 'user', content: 'x' }] });
      let opening: Anthropic.Usage | undefined;
      // A copy: the SDK adds later events' usage to the message it started.
      for await (const event of stream) if (event.type === 'message_start') opening = { ...event.message.usage };
      expect(opening).to.deep.include({ input_tokens: 7, cache_read_input_tokens: 4, cache_creation_input_tokens: 0, output_tokens: 0 });
    });
  });

  describe('metering', () => {
    it("records the back end's usageMetadata for a JSON answer and for a stream (a client that did not ask for stream usage)", async () => {
      const json = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'flash', messages: [{ role: 'user', content: 'meter me' }] }),
      });
      expect(json.status).to.equal(200);
      await json.text();
      const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'meter me too' }] }),
      });
      expect(streamed.status).to.equal(200);
      expect(await streamed.text()).to.not.include('"usage"');
      for (const response of [json, streamed]) {
        const requestId = response.headers.get('x-request-id')!;
        const rows = await usageRows(gw, requestId);
        expect(rows, requestId).to.have.length(1);
        expect(rows[0]).to.deep.include({ provider: 'google', upstreamModel: 'gemini-fake-1', promptTokens: 11, completionTokens: 7, source: 'provider' });
      }
    });
  });

  describe('what Gemini cannot take, named', () => {
    it('a system prompt alone (no turn for Gemini to answer) is a clear 400 before the back end, which refuses empty contents', async () => {
      const error = (await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'system', content: 'You are X' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.error as Json).to.deep.include({ code: 'invalid_request', param: 'messages' });
      expect(error.message).to.include('at least one user or assistant message');
      expect(upstream.received).to.have.length(0);
      // Refused as it was translated, nothing sent: no attempt of the back end, no usage row.
      const row = await logRow(gw, error.requestID!);
      expect(row.attempts).to.deep.equal([]);
      expect(row.provider).to.equal(null);
      expect(await gw.gateway.stores.usage.list({ requestId: error.requestID! })).to.deep.equal([]);
    });

    it('a tool result that answers no call before it is a 400 naming it, before the back end (Gemini would get a functionResponse without a name)', async () => {
      const error = (await openai.chat.completions
        .create({ model: 'flash', messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'nope', content: 'r' }] })
        .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.error as Json).to.deep.include({ code: 'invalid_request', param: 'messages[1].tool_call_id' });
      expect(error.message).to.include("'nope'");
      expect(upstream.received).to.have.length(0);
      expect((await logRow(gw, error.requestID!)).attempts).to.deep.equal([]);
    });

    it('audio asked beside text (as chat clients ask for it) is named and not sent: Google makes audio only alone', async () => {
      const { response } = await openai.chat.completions
        .create({ model: 'flash', modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' }, messages: [{ role: 'user', content: 'say hi' }] })
        .withResponse();
      expect(upstream.last().body!.generationConfig).to.deep.include({ responseModalities: ['TEXT'] });
      expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('modalities.audio');
    });

    it('parallel_tool_calls is a loss only when false (parallel calls are Gemini\'s way); a strict tool is named', async () => {
      const strictTool = { ...weatherTool, function: { ...weatherTool.function, strict: true } };
      const asked = async (parallel: boolean) => {
        const { response } = await openai.chat.completions.create({ model: 'flash', tools: [strictTool], parallel_tool_calls: parallel, messages: [{ role: 'user', content: 'weather?' }] }).withResponse();
        return (await logRow(gw, response.headers.get('x-request-id')!)).losses ?? [];
      };
      const parallel = await asked(true);
      expect(parallel).to.include('tools.strict');
      expect(parallel).to.not.include('parallel_tool_calls');
      expect(await asked(false)).to.include('parallel_tool_calls');
    });
  });

  describe('metering: what Gemini counts apart', () => {
    const usage = { promptTokenCount: 1300, candidatesTokenCount: 50, thoughtsTokenCount: 30, cachedContentTokenCount: 1000, toolUsePromptTokenCount: 40, totalTokenCount: 1420 };

    it('the tool-use prompt (toolUsePromptTokenCount) is prompt: the client, the total and the usage row agree', async () => {
      upstream.script((_body, received) => (received.url.includes('stream') ? { events: eventsOf(answer([{ text: 'grounded answer' }], { usageMetadata: usage })) } : { json: answer([{ text: 'grounded answer' }], { usageMetadata: usage }) }));
      const response = await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'search for it' }] }).withResponse();
      expect(response.data.usage).to.deep.include({ prompt_tokens: 1340, completion_tokens: 80, total_tokens: 1420 });
      expect(response.data.usage?.prompt_tokens_details?.cached_tokens).to.equal(1000);
      const [row] = await usageRows(gw, response.response.headers.get('x-request-id')!);
      expect(row).to.deep.include({ promptTokens: 1340, completionTokens: 80, cachedTokens: 1000, reasoningTokens: 30, source: 'provider' });

      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'search for it' }] });
      let last: OpenAI.Chat.ChatCompletionChunk | undefined;
      for await (const chunk of stream) last = chunk;
      expect(last?.usage).to.deep.include({ prompt_tokens: 1340, completion_tokens: 80, total_tokens: 1420 });
    });

    it("a stream cut midway is charged the prompt Gemini reported in its first event, cached tokens included, not the gateway's own count", async () => {
      const events = eventsOf(answer([{ text: 'one two three four five six' }])).map((event) => ({
        ...event,
        usageMetadata: { promptTokenCount: 1300, cachedContentTokenCount: 1000, totalTokenCount: 1300 },
      }));
      upstream.script(() => ({ events, cutAfter: 2 }));
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(200);
      expect(await response.text()).to.include('"error"');
      const [row] = await usageRows(gw, response.headers.get('x-request-id')!);
      expect(row).to.deep.include({ source: 'estimated', promptTokens: 1300, cachedTokens: 1000 });
    });

    it('an answer whose usage counts only thoughts (thinking used every token; Google leaves a zero count out) is complete: a back end that keeps its connection open does not stall it', async function () {
      this.timeout(10_000);
      const events = eventsOf(answer([{ text: 'x' }], { usageMetadata: { promptTokenCount: 5, thoughtsTokenCount: 10, totalTokenCount: 15 } }));
      upstream.script(() => ({ events, linger: new Promise<void>(() => undefined) }));
      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'x' }] });
      let usage: OpenAI.CompletionUsage | null | undefined;
      let finish: string | null = null;
      for await (const chunk of stream) {
        usage = chunk.usage ?? usage;
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(finish).to.equal('stop');
      expect(usage).to.deep.include({ prompt_tokens: 5, completion_tokens: 10 });
    });

    it("a usage that comes well after the finish (every event before it counting only the prompt) is the one recorded: the prompt's alone does not end the stream", async function () {
      this.timeout(10_000);
      const promptOnly = { promptTokenCount: 5, totalTokenCount: 5 };
      const events = eventsOf(answer([{ text: 'one two three' }])).map((event) => ({ ...event, usageMetadata: promptOnly }));
      // The back end keeps its connection open, silent, longer than the quiet window (QUIET_MS, 1 s) before the whole usage.
      const late = new Promise<void>((resolve) => setTimeout(resolve, 1500));
      upstream.script(() => ({ events, linger: late, afterLinger: [{ usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 7, totalTokenCount: 12 }, modelVersion: 'flash' }] }));
      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'x' }] }).withResponse();
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of stream.data) usage = chunk.usage ?? usage;
      expect(usage).to.deep.include({ prompt_tokens: 5, completion_tokens: 7 });
      const [row] = await usageRows(gw, stream.response.headers.get('x-request-id')!);
      expect(row).to.deep.include({ source: 'provider', promptTokens: 5, completionTokens: 7 });
    });
  });

  describe('upstream failures', () => {
    it("a wrong provider key (Google's 400 API key not valid): a 502 naming the credentials, the key in no answer or log", async () => {
      const error = (await openai.chat.completions.create({ model: 'bad-creds', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(upstream.last().headers['x-goog-api-key']).to.equal(WRONG_KEY);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(error.status).to.equal(502);
      expect(error.message).to.include('credentials');
      expect(JSON.stringify(error.error)).to.not.include(WRONG_KEY);
      expect(gw.logText()).to.not.include(WRONG_KEY);
      expect(gw.logText()).to.not.include(upstream.apiKey);
    });

    it('429 RESOURCE_EXHAUSTED with retry-after: a 429 for the openai client and for @google/genai', async () => {
      upstream.script(() => ({ status: 429, headers: { 'retry-after': '17' }, json: googleError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).') }));
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'limited-1', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(429);
      expect(response.headers.get('retry-after')).to.equal('17');
      expect(((await response.json()) as Json).error.code).to.equal('upstream_rate_limited');
      const error = await ai.models.generateContent({ model: 'limited-2', contents: 'x' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(ApiError);
      expect((error as ApiError).status).to.equal(429);
      expect(String((error as ApiError).message)).to.include('RESOURCE_EXHAUSTED');
    });

    it('a stream whose first event is RESOURCE_EXHAUSTED is a 429 upstream_rate_limited, as the same error answered whole is (it was a 502 "failed mid-stream")', async () => {
      upstream.script(() => ({ events: [googleError(429, 'RESOURCE_EXHAUSTED', 'Resource exhausted')] }));
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'limited-4', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(429);
      const error = ((await response.json()) as Json).error;
      expect(error.code).to.equal('upstream_rate_limited');
      expect(response.headers.get('x-should-retry')).to.not.equal('false');
    });

    it("429 RESOURCE_EXHAUSTED that says when in its body (RetryInfo's retryDelay), as Google does: the client gets it as Retry-After", async () => {
      const body = googleError(429, 'RESOURCE_EXHAUSTED', 'You exceeded your current quota.');
      (body.error as Json).details = [
        { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaMetric: 'generativelanguage.googleapis.com/generate_content_free_tier_requests' }] },
        { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '36.4s' },
      ];
      upstream.script(() => ({ status: 429, json: body }));
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'limited-3', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(response.status).to.equal(429);
      expect(response.headers.get('retry-after')).to.equal('37');
      // The same error as a stream's first event says when, too.
      upstream.script(() => ({ events: [body] }));
      const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'limited-5', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(streamed.status).to.equal(429);
      expect(streamed.headers.get('retry-after')).to.equal('37');
    });

    it('500 INTERNAL: a 502 without the upstream body or the key', async () => {
      upstream.script(() => ({ status: 500, json: googleError(500, 'INTERNAL', `internal failure at 10.0.0.7 key ${upstream.apiKey}`) }));
      const error = (await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.InternalServerError);
      expect(error.status).to.equal(502);
      expect(error.message).to.not.include('10.0.0.7');
      expect(JSON.stringify(error.error)).to.not.include(upstream.apiKey);
    });

    it('400 INVALID_ARGUMENT: the upstream message, scrubbed of the key, as a 400', async () => {
      upstream.script(() => ({ status: 400, json: googleError(400, 'INVALID_ARGUMENT', `Invalid value at 'generation_config.temperature' (key ${upstream.apiKey})`) }));
      const error = (await openai.chat.completions.create({ model: 'flash', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.message).to.include("Invalid value at 'generation_config.temperature'");
      expect(error.message).to.not.include(upstream.apiKey);
    });

    const words = () => eventsOf(answer([{ text: 'one two three four five six' }]));

    it('a stream cut midway: the openai client gets the text so far, then an error it raises', async () => {
      upstream.script(() => ({ events: words(), cutAfter: 2 }));
      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'x' }] });
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

    it('a stream that ends cleanly before any finishReason is an error, not a short answer', async () => {
      upstream.script(() => ({ events: words().slice(0, 2) }));
      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'x' }] });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().catch((e: unknown) => e);
      expect(text).to.equal('one two');
      expect(String((error as Error).message)).to.include('ended before the answer did');
    });

    it('a stream cut midway: @google/genai raises after the chunks it got', async () => {
      upstream.script(() => ({ events: words(), cutAfter: 2 }));
      const stream = await ai.models.generateContentStream({ model: 'flash', contents: 'x' });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.text ?? '';
      })().catch((e: unknown) => e);
      expect(text).to.equal('one two');
      expect(error).to.be.instanceOf(Error);
    });

    /** The first target's stream opens with `events` and fails with UNAVAILABLE: the second target's answer is the client's. */
    const failsOverAfter = async (events: Json[]): Promise<void> => {
      upstream.script((_body, received) =>
        received.url.includes('gemini-fake-1') ? { events: [...events, googleError(503, 'UNAVAILABLE', 'The model is overloaded.')] } : { events: words() },
      );
      const stream = await openai.chat.completions.create({ model: 'flash-failover', stream: true, messages: [{ role: 'user', content: 'x' }] });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      expect(text).to.equal('one two three four five six');
      expect(upstream.received.map((r) => r.url)).to.deep.equal([
        '/v1beta/models/gemini-fake-1:streamGenerateContent?alt=sse',
        '/v1beta/models/gemini-fake-2:streamGenerateContent?alt=sse',
      ]);
    };

    it('an UNAVAILABLE error event before any content fails the attempt: the next target answers the stream', () => failsOverAfter([]));

    it('an opening event with no answer in it (empty text), then UNAVAILABLE: still before the answer, so the next target answers the stream', () =>
      // The chat stream turns such an event into a role chunk, which a chat completions client
      // would get at once from an OpenAI-compatible back end; the gemini provider asks for the
      // stream to be read on to the answer (primeToAnswer), so the error after it is still the
      // attempt's, and the next target is tried.
      failsOverAfter([{ candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, index: 0 }], usageMetadata: { promptTokenCount: 3, totalTokenCount: 3 }, modelVersion: 'gemini-fake-1' }]));

    it('an error event mid-stream and a malformed event are upstream errors, scrubbed', async () => {
      upstream.script(() => ({ events: [...words().slice(0, 2), googleError(503, 'UNAVAILABLE', `The model is overloaded (${upstream.apiKey})`)] }));
      const stream = await openai.chat.completions.create({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'x' }] });
      const error = await (async () => {
        for await (const _chunk of stream) void _chunk;
      })().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('The model is overloaded');
      expect(String((error as Error).message)).to.not.include(upstream.apiKey);

      upstream.script(() => ({ events: words().slice(0, 2), tail: 'data: {not json\r\n\r\n' }));
      const broken = await openai.chat.completions.create({ model: 'flash', stream: true, messages: [{ role: 'user', content: 'x' }] });
      const malformed = await (async () => {
        for await (const _chunk of broken) void _chunk;
      })().catch((e: unknown) => e);
      expect(malformed).to.be.instanceOf(OpenAI.APIError);
    });
  });
});
