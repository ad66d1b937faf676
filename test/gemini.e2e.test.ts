import { ApiError, FunctionCallingConfigMode, GoogleGenAI, ThinkingLevel, Type, type FunctionDeclaration } from '@google/genai';
import { expect } from 'chai';
import { eventsOf, FakeAnthropic, message as anthropicMessage } from './fakes/anthropic-upstream.js';
import { chunk, FakeOpenAI, fakeBase64, fakeVector, json, jsonSchemaRootError, sse } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { pollUntil, sendJson } from './support/calls.js';
import { jsonOrText, plain } from './support/json.js';

const CLIENT_KEY = 'sk-client-gemini-abcdef123456';
const ADMIN_KEY = 'admin-key-gemini-0123456789';

type Json = Record<string, any>;

const weather: FunctionDeclaration = {
  name: 'get_weather',
  description: 'Weather for a city',
  parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] },
};

/** POST JSON (no key unless in `headers`); the answer's JSON as `body` (its text when it is an event stream). */
async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; text: string; body: any }> {
  const reply = await sendJson(url, body, headers);
  return { ...reply, body: jsonOrText(reply.text) };
}

async function expectApiError(promise: Promise<unknown>, status: number, googleStatus: string): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    expect(error).to.be.instanceOf(ApiError);
    const apiError = error as ApiError;
    expect(apiError.status).to.equal(status);
    expect(apiError.message).to.contain(googleStatus);
    return apiError;
  }
  throw new Error(`expected an ApiError ${status}`);
}

async function adminLogs(gw: RunningGateway): Promise<Json[]> {
  const response = await fetch(`${gw.url}/admin/logs?limit=50`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  expect(response.status).to.equal(200);
  return ((await response.json()) as Json).data as Json[];
}

/** The admin API's log row of one request, polled until the log's batch has written it (up to 5 s). */
async function adminLogRow(gw: RunningGateway, requestId: string | null): Promise<Json | undefined> {
  const seen = await pollUntil(() => adminLogs(gw), (rows) => rows.some((r) => r.request_id === requestId), 5000);
  return seen.at(-1)!.find((r) => r.request_id === requestId);
}

describe('gemini format in front of the mock provider (official @google/genai)', () => {
  let gw: RunningGateway;
  let ai: GoogleGenAI;

  before(async () => {
    // No plugins: list: the default order, which must include the gemini format.
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
auth:
  adminKey: ${ADMIN_KEY}
  keys:
    - { name: gemini-user, key: ${CLIENT_KEY} }
    - { name: narrow, key: sk-client-gemini-narrow-000000, models: [other] }
providers:
  - id: mock
    type: mock
    models: [mock-chat]
models:
  - name: gemini-2.5-flash
    targets: [{ provider: mock, model: mock-chat }]
  - name: other
    targets: [{ provider: mock, model: mock-chat }]
  - name: meta-llama/Llama-3.1-8B-Instruct
    targets: [{ provider: mock, model: mock-chat }]
`);
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  after(async () => gw?.stop());

  it('generateContent: text, STOP, usageMetadata, modelVersion and responseId', async () => {
    const response = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hello there gateway' });
    expect(response.text).to.equal('hello there gateway');
    expect(response.candidates?.[0]?.finishReason).to.equal('STOP');
    expect(response.candidates?.[0]?.content?.role).to.equal('model');
    expect(response.usageMetadata?.candidatesTokenCount).to.equal(3);
    expect(response.usageMetadata?.promptTokenCount).to.be.greaterThan(0);
    expect(response.usageMetadata?.totalTokenCount).to.equal(response.usageMetadata!.promptTokenCount! + 3);
    expect(response.modelVersion).to.equal('mock-chat');
    expect(response.responseId).to.be.a('string').and.not.equal('');
  });

  it('a model whose name holds a slash is listed, fetched, counted and called, streamed or not', async () => {
    const model = 'meta-llama/Llama-3.1-8B-Instruct';
    const listed = [];
    for await (const m of await ai.models.list()) listed.push(m.name);
    expect(listed).to.include(`models/${model}`);
    expect((await ai.models.get({ model })).name).to.equal(`models/${model}`);
    expect((await ai.models.generateContent({ model, contents: 'slash in the name' })).text).to.equal('slash in the name');
    let streamed = '';
    for await (const piece of await ai.models.generateContentStream({ model, contents: 'and streamed' })) streamed += piece.text ?? '';
    expect(streamed).to.equal('and streamed');
    expect((await ai.models.countTokens({ model, contents: 'count me' })).totalTokens).to.be.greaterThan(0);
  });

  it('the SDK calls v1beta/models/<model>:generateContent with x-goog-api-key (no key in the URL)', async () => {
    const seen: Array<{ url: string; key: string | null }> = [];
    const recording = new GoogleGenAI({
      apiKey: CLIENT_KEY,
      httpOptions: {
        baseUrl: gw.url,
        fetch: (async (input: string | URL | Request, init?: RequestInit) => {
          seen.push({ url: String(input instanceof Request ? input.url : input), key: new Headers(init?.headers).get('x-goog-api-key') });
          return fetch(input, init);
        }) as typeof fetch,
      },
    });
    const response = await recording.models.generateContent({ model: 'gemini-2.5-flash', contents: 'via the wrapper' });
    expect(response.text).to.equal('via the wrapper');
    expect(seen).to.deep.equal([{ url: `${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`, key: CLIENT_KEY }]);
  });

  it('generateContent: maxOutputTokens cuts the answer with MAX_TOKENS', async () => {
    const response = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'one two three four', config: { maxOutputTokens: 2 } });
    expect(response.text).to.equal('one two');
    expect(response.candidates?.[0]?.finishReason).to.equal('MAX_TOKENS');
  });

  it('generateContentStream: text arrives in several chunks, the last with finishReason and usageMetadata', async () => {
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'alpha beta gamma delta' });
    const texts: string[] = [];
    const chunks: Json[] = [];
    for await (const chunk of stream) {
      chunks.push(plain(chunk));
      if (chunk.text) texts.push(chunk.text);
    }
    expect(texts.join('')).to.equal('alpha beta gamma delta');
    expect(texts.length).to.be.greaterThan(1);
    const last = chunks[chunks.length - 1]!;
    expect(last.candidates[0].finishReason).to.equal('STOP');
    expect(last.usageMetadata.candidatesTokenCount).to.equal(4);
    for (const chunk of chunks.slice(0, -1)) expect(chunk.candidates[0].finishReason).to.equal(undefined);
    // The back end's answer id, the same on every event, as the non-streamed answer gives it.
    expect(new Set(chunks.map((c) => c.responseId)).size).to.equal(1);
    expect(chunks[0]!.responseId).to.match(/^chatcmpl-mock/);
  });

  it('function calling round trip: a functionCall part with args, then the functionResponse answered in text', async () => {
    const first = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'Paris',
      config: { tools: [{ functionDeclarations: [weather] }] },
    });
    const calls = first.functionCalls ?? [];
    expect(calls).to.have.length(1);
    expect(calls[0]!.name).to.equal('get_weather');
    expect(calls[0]!.args).to.deep.equal({ city: 'Paris' });
    expect(first.candidates?.[0]?.finishReason).to.equal('STOP');

    const second = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: [
        { role: 'user', parts: [{ text: 'Paris' }] },
        { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { forecast: 'sunny' } } }] },
      ],
      config: { tools: [{ functionDeclarations: [weather] }] },
    });
    // The mock answers a tool result with its text (here the response object as JSON).
    expect(second.text).to.equal('{"forecast":"sunny"}');
    expect(second.functionCalls).to.equal(undefined);
  });

  it('generateContentStream with tools: one whole functionCall part', async () => {
    const stream = await ai.models.generateContentStream({
      model: 'gemini-2.5-flash',
      contents: 'Rome',
      config: { tools: [{ functionDeclarations: [weather] }], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY } } },
    });
    const calls: Json[] = [];
    for await (const chunk of stream) for (const call of chunk.functionCalls ?? []) calls.push(plain(call));
    expect(calls).to.have.length(1);
    expect(calls[0]).to.deep.include({ name: 'get_weather', args: { city: 'Rome' } });
  });

  it('a loss (safetySettings, responseLogprobs) reaches x-switchyard-losses and the request log', async () => {
    const res = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`, {
      contents: [{ role: 'user', parts: [{ text: 'hi' }] }],
      generationConfig: { responseLogprobs: true, responseModalities: ['TEXT', 'IMAGE'] },
      safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }],
    }, { 'x-goog-api-key': CLIENT_KEY });
    expect(res.status).to.equal(200);
    const losses = String(res.headers.get('x-switchyard-losses')).split(',');
    expect(losses).to.have.members(['generationConfig.responseModalities.IMAGE', 'generationConfig.responseLogprobs', 'safetySettings']);
    const requestId = res.headers.get('x-request-id');
    const row = await adminLogRow(gw, requestId);
    expect(row, 'request-log row').to.not.equal(undefined);
    expect(row!.losses).to.have.members(losses);
  });

  it('?key= authenticates (plain fetch) and the key never reaches a log line', async () => {
    const secret = 'sk-client-gemini-narrow-000000';
    const res = await post(`${gw.url}/v1beta/models/other:generateContent?key=${CLIENT_KEY}`, { contents: [{ parts: [{ text: 'by query' }] }] });
    expect(res.status).to.equal(200);
    expect(res.body.candidates[0].content.parts).to.deep.equal([{ text: 'by query' }]);
    const bad = await post(`${gw.url}/v1beta/models/other:generateContent?key=sk-wrong-key-123456789`, { contents: [{ parts: [{ text: 'x' }] }] });
    expect(bad.status).to.equal(401);
    expect(bad.body).to.deep.equal({ error: { code: 401, message: bad.body.error.message, status: 'UNAUTHENTICATED' } });
    const narrow = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:generateContent?key=${secret}`, { contents: [{ parts: [{ text: 'x' }] }] });
    expect(narrow.status).to.equal(403);
    expect(narrow.body.error.status).to.equal('PERMISSION_DENIED');
    const row = await adminLogRow(gw, bad.headers.get('x-request-id'));
    expect(row, 'request-log row of the refused call').to.not.equal(undefined);
    expect(row!.path).to.equal('/v1beta/models/other:generateContent');
    expect(row!.error_code).to.equal('invalid_api_key');
    const rows = await adminLogs(gw);
    expect(JSON.stringify(rows)).to.not.contain(CLIENT_KEY);
    expect(JSON.stringify(rows)).to.not.contain('sk-wrong-key-123456789');
    expect(gw.logText()).to.not.contain(CLIENT_KEY);
    expect(gw.logText()).to.not.contain('sk-wrong-key-123456789');
    expect(gw.logText()).to.not.contain(secret);
  });

  it('x-provider-api-key and Bearer authenticate too; no key is UNAUTHENTICATED', async () => {
    const body = { contents: [{ parts: [{ text: 'hi' }] }] };
    const url = `${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`;
    expect((await post(url, body, { 'x-provider-api-key': CLIENT_KEY })).status).to.equal(200);
    expect((await post(url, body, { authorization: `Bearer ${CLIENT_KEY}` })).status).to.equal(200);
    const none = await post(url, body);
    expect(none.status).to.equal(401);
    expect(none.body.error).to.deep.include({ code: 401, status: 'UNAUTHENTICATED' });
    expect(none.body.error.message).to.contain('x-goog-api-key');
  });

  it('errors surface in the SDK: bad key 401, unknown model 404, bad body 400, forbidden model 403', async () => {
    const wrong = new GoogleGenAI({ apiKey: 'sk-not-a-real-key-0000000', httpOptions: { baseUrl: gw.url } });
    await expectApiError(wrong.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }), 401, 'UNAUTHENTICATED');
    await expectApiError(ai.models.generateContent({ model: 'gemini-9-nope', contents: 'x' }), 404, 'NOT_FOUND');
    await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { temperature: 7 } }), 400, 'INVALID_ARGUMENT');
    // A penalty past Google's range (and OpenAI's) is refused in the client's own words, not sent on for the back end to refuse in its own.
    const penalty = await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { presencePenalty: 5 } }), 400, 'INVALID_ARGUMENT');
    expect(penalty.message).to.include('presencePenalty');
    // A thinking budget and a thinking level together: Google refuses them on any model.
    const both = await expectApiError(
      ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { thinkingConfig: { thinkingBudget: 1024, thinkingLevel: ThinkingLevel.LOW } } }),
      400,
      'INVALID_ARGUMENT',
    );
    expect(both.message).to.include('thinking_budget and thinking_level are not supported together');
    // Either alone is taken.
    expect((await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { thinkingConfig: { thinkingLevel: ThinkingLevel.LOW } } })).text).to.be.a('string');
    // Google takes one schema of a declaration, and one of the answer: both together are refused, not one of them dropped.
    const schema = { type: 'object', properties: { a: { type: 'string' } } };
    const twoParameters = await expectApiError(
      ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: Type.OBJECT }, parametersJsonSchema: schema }] }] } }),
      400,
      'INVALID_ARGUMENT',
    );
    expect(twoParameters.message).to.include('parameters and parametersJsonSchema are not supported together');
    // Which declaration: Google's errors have no param field, so the message names it.
    expect(twoParameters.message).to.include('tools[0].functionDeclarations[0]');
    const twoSchemas = await expectApiError(
      ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { responseMimeType: 'application/json', responseSchema: { type: Type.OBJECT }, responseJsonSchema: schema } }),
      400,
      'INVALID_ARGUMENT',
    );
    expect(twoSchemas.message).to.include('responseSchema and responseJsonSchema are not supported together');
    const narrow = new GoogleGenAI({ apiKey: 'sk-client-gemini-narrow-000000', httpOptions: { baseUrl: gw.url } });
    await expectApiError(narrow.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }), 403, 'PERMISSION_DENIED');
    // And in a stream, before it starts.
    await expectApiError(
      (async () => {
        for await (const _ of await ai.models.generateContentStream({ model: 'gemini-9-nope', contents: 'x' })) void _;
      })(),
      404,
      'NOT_FOUND',
    );
  });

  it('raw errors have Gemini\'s shape', async () => {
    const res = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`, { contents: [] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(res.status).to.equal(400);
    expect(Object.keys(res.body)).to.deep.equal(['error']);
    expect(Object.keys(res.body.error).sort()).to.deep.equal(['code', 'message', 'status']);
    expect(res.body.error).to.deep.include({ code: 400, status: 'INVALID_ARGUMENT' });
  });

  it('GET /v1beta/models lists models/<id> and the SDK pages through it; GET one model; an unknown one is 404', async () => {
    const names: string[] = [];
    for await (const model of await ai.models.list()) names.push(String(model.name));
    expect(names).to.include.members(['models/gemini-2.5-flash', 'models/other', 'models/mock-chat']);
    expect(plain((await ai.models.get({ model: 'other' })).supportedActions)).to.include('countTokens');
    const one = await ai.models.get({ model: 'gemini-2.5-flash' });
    expect(one.name).to.equal('models/gemini-2.5-flash');
    const res = await fetch(`${gw.url}/v1beta/models/nope-1.0`, { headers: { 'x-goog-api-key': CLIENT_KEY } });
    expect(res.status).to.equal(404);
    expect(((await res.json()) as Json).error.status).to.equal('NOT_FOUND');
    // A key limited to some models sees only those.
    const narrow = await fetch(`${gw.url}/v1beta/models`, { headers: { 'x-goog-api-key': 'sk-client-gemini-narrow-000000' } });
    expect(((await narrow.json()) as Json).models.map((m: Json) => m.name)).to.deep.equal(['models/other']);
  });

  it('countTokens: an estimate for contents (and generateContentRequest); unknown model 404, bad body 400', async () => {
    const small = await ai.models.countTokens({ model: 'gemini-2.5-flash', contents: 'hello' });
    const big = await ai.models.countTokens({ model: 'gemini-2.5-flash', contents: 'hello '.repeat(50) });
    expect(small.totalTokens).to.be.a('number').greaterThan(0);
    expect(big.totalTokens! - small.totalTokens!).to.be.greaterThan(49);
    const wrapped = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`, { generateContentRequest: { model: 'models/gemini-2.5-flash', contents: [{ role: 'user', parts: [{ text: 'hello' }] }] } }, { 'x-goog-api-key': CLIENT_KEY });
    expect(wrapped.status).to.equal(200);
    expect(wrapped.body).to.deep.equal({ totalTokens: small.totalTokens });
    await expectApiError(ai.models.countTokens({ model: 'nope-2', contents: 'x' }), 404, 'NOT_FOUND');
    const bad = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`, { contents: 'not an array' }, { 'x-goog-api-key': CLIENT_KEY });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.status).to.equal('INVALID_ARGUMENT');
  });

  it('countTokens: parts the translation has no place for (code execution, a video by Files API URI) still count, and no loss is named', async () => {
    const code = 'print(sum(range(100)))\n'.repeat(40);
    const base = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`, { contents: [{ role: 'user', parts: [{ text: 'hello' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    const withParts = await post(
      `${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`,
      { contents: [{ role: 'user', parts: [{ text: 'hello' }, { executableCode: { language: 'PYTHON', code } }, { fileData: { mimeType: 'video/mp4', fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/abc' } }] }] },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    expect(withParts.status).to.equal(200);
    // The code at about four bytes a token (960 bytes), the video at the bound for a file (1,600).
    expect(withParts.body.totalTokens - base.body.totalTokens).to.be.within(1600 + 230, 1600 + 250);
    expect(withParts.headers.get('x-switchyard-losses')).to.equal(null);
  });

  it('a percent-encoded colon (%3A) in the path is the same route', async () => {
    const res = await post(`${gw.url}/v1beta/models/gemini-2.5-flash%3AgenerateContent`, { contents: [{ parts: [{ text: 'encoded colon' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(res.status).to.equal(200);
    expect(res.body.candidates[0].content.parts).to.deep.equal([{ text: 'encoded colon' }]);
    const sse = await post(`${gw.url}/v1beta/models/gemini-2.5-flash%3astreamGenerateContent?alt=sse`, { contents: [{ parts: [{ text: 'a b' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(sse.status).to.equal(200);
    expect(sse.text).to.match(/^data: \{/);
  });

  it("the SDK set to Google's v1 API (apiVersion: 'v1') is served as on v1beta: generate, stream, count", async () => {
    const v1 = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url, apiVersion: 'v1' } });
    const reply = await v1.models.generateContent({ model: 'gemini-2.5-flash', contents: 'on v one' });
    expect(reply.text).to.equal('on v one');
    let streamed = '';
    for await (const part of await v1.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'streamed on v one' })) streamed += part.text ?? '';
    expect(streamed).to.equal('streamed on v one');
    expect((await v1.models.countTokens({ model: 'gemini-2.5-flash', contents: 'count me' })).totalTokens).to.be.greaterThan(0);
    // The listing too, told from OpenAI's on the same path by Google's headers.
    const listed: string[] = [];
    for await (const model of await v1.models.list()) listed.push(model.name!);
    expect(listed).to.include('models/gemini-2.5-flash');
    expect((await v1.models.get({ model: 'gemini-2.5-flash' })).name).to.equal('models/gemini-2.5-flash');
    const openai = await fetch(`${gw.url}/v1/models`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
    expect(((await openai.json()) as { object: string }).object).to.equal('list');
    // Errors in Google's shape there too.
    const res = await post(`${gw.url}/v1/models/no-such-model:generateContent`, { contents: [{ parts: [{ text: 'x' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(res.status).to.equal(404);
    expect(res.body.error).to.deep.include({ code: 404, status: 'NOT_FOUND' });
  });

  it(':streamGenerateContent without alt=sse answers a JSON array of the responses as they are made (Google\'s default)', async () => {
    const res = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent`, { contents: [{ parts: [{ text: 'array please now' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    expect(res.text.startsWith('[{')).to.equal(true);
    expect(res.text).to.include(',\r\n{');
    const items = res.body as Array<{ candidates: Array<{ content?: { parts?: Array<{ text?: string }> }; finishReason?: string }>; usageMetadata?: unknown }>;
    expect(items.length).to.be.greaterThan(1);
    expect(items.map((item) => item.candidates[0]!.content?.parts?.map((p) => p.text ?? '').join('') ?? '').join('')).to.equal('array please now');
    expect(items.at(-1)!.candidates[0]!.finishReason).to.equal('STOP');
    expect(items.at(-1)!.usageMetadata).to.be.an('object');
  });

  it('?alt=sse events are framed data: <json>\\r\\n\\r\\n', async () => {
    const res = await post(
      `${gw.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`,
      { contents: [{ parts: [{ text: 'a b' }] }], generationConfig: { responseLogprobs: true } },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.contain('text/event-stream');
    expect(res.headers.get('x-switchyard-losses')).to.equal('generationConfig.responseLogprobs');
    const events = res.text.split('\r\n\r\n');
    expect(events.pop()).to.equal('');
    expect(events.length).to.be.greaterThan(1);
    for (const event of events) expect(event).to.match(/^data: \{/);
    const last = JSON.parse(events[events.length - 1]!.slice('data: '.length));
    expect(last.candidates[0].finishReason).to.equal('STOP');
    expect(last.usageMetadata.totalTokenCount).to.be.greaterThan(0);
  });
});

describe('gemini format in front of an OpenAI-compatible upstream (official @google/genai)', () => {
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let ai: GoogleGenAI;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: gemini-user, key: ${CLIENT_KEY} }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - gemini
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [gpt-4o-mini, text-embedding-3-small]
models:
  - name: gemini-2.5-flash
    targets: [{ provider: up, model: gpt-4o-mini }]
  - name: gemini-embedding-001
    targets: [{ provider: up, model: text-embedding-3-small }]
`);
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  afterEach(() => upstream.reset());

  it('models.embedContent (batchEmbedContents): one vector per content, in order, from an OpenAI embeddings back end', async () => {
    const close = (got: number[] | undefined, want: number[]) => {
      expect(got).to.have.length(want.length);
      got!.forEach((v, i) => expect(v).to.be.closeTo(want[i]!, 1e-6));
    };
    const one = await ai.models.embedContent({ model: 'gemini-embedding-001', contents: 'hello world', config: { outputDimensionality: 4 } });
    close(one.embeddings?.[0]?.values, fakeVector('hello world', 4));
    expect(upstream.last().body).to.deep.equal({ model: 'text-embedding-3-small', input: ['hello world'], encoding_format: 'float', dimensions: 4 });
    const two = await ai.models.embedContent({ model: 'gemini-embedding-001', contents: ['first text', 'second'] });
    expect(two.embeddings).to.have.length(2);
    close(two.embeddings![0]!.values, fakeVector('first text'));
    close(two.embeddings![1]!.values, fakeVector('second'));
    expect(upstream.last().body!.input).to.deep.equal(['first text', 'second']);
  });

  it(':embedContent as REST: {embedding: {values}}, proto names too; taskType is a named loss; bad bodies are INVALID_ARGUMENT', async () => {
    const url = (method: string) => `${gw.url}/v1beta/models/gemini-embedding-001:${method}`;
    const key = { 'x-goog-api-key': CLIENT_KEY };
    const single = await post(url('embedContent'), { content: { parts: [{ text: 'a' }, { text: 'b' }] }, task_type: 'RETRIEVAL_DOCUMENT', output_dimensionality: 3 }, key);
    expect(single.status).to.equal(200);
    expect(Object.keys(single.body)).to.deep.equal(['embedding']);
    expect(single.body.embedding.values).to.have.length(3);
    expect(upstream.last().body).to.deep.include({ input: 'a\nb', dimensions: 3 });
    expect(single.headers.get('x-switchyard-losses')).to.equal('taskType');
    const image = await post(url('embedContent'), { content: { parts: [{ inlineData: { mimeType: 'image/png', data: 'AA==' } }] } }, key);
    expect(image.status).to.equal(400);
    expect(image.body.error.status).to.equal('INVALID_ARGUMENT');
    const textAndImage = await post(url('embedContent'), { content: { parts: [{ text: 'x', inlineData: { mimeType: 'image/png', data: 'AA==' } }] } }, key);
    expect(textAndImage.status).to.equal(400);
    // No text at all: refused before any back end, as the OpenAI route refuses an empty input.
    const sentBefore = upstream.received.length;
    const noText = await post(url('embedContent'), { content: { parts: [{ text: '' }] } }, key);
    expect(noText.status).to.equal(400);
    expect(noText.body.error.status).to.equal('INVALID_ARGUMENT');
    expect(noText.body.error.message).to.include('content.parts');
    const emptyInBatch = await post(url('batchEmbedContents'), { requests: [{ content: { parts: [{ text: 'a' }] } }, { content: { parts: [{ text: '' }, { text: '' }] } }] }, key);
    expect(emptyInBatch.status).to.equal(400);
    expect(emptyInBatch.body.error.message).to.include('requests[1].content.parts');
    expect(upstream.received.length).to.equal(sentBefore);
    // Both names of one field: the JSON name is used, the other named as lost.
    const both = await post(url('embedContent'), { content: { parts: [{ text: 'x' }] }, outputDimensionality: 2, output_dimensionality: 5 }, key);
    expect(both.status).to.equal(200);
    expect(both.body.embedding.values).to.have.length(2);
    expect(both.headers.get('x-switchyard-losses')).to.equal('output_dimensionality');
    const otherModel = await post(url('batchEmbedContents'), { requests: [{ model: 'models/another', content: { parts: [{ text: 'x' }] } }] }, key);
    expect(otherModel.status).to.equal(400);
    expect(otherModel.body.error.message).to.contain('requests[0].model');
    // A single call has no requests: its own model is named.
    const otherSingle = await post(url('embedContent'), { model: 'models/another', content: { parts: [{ text: 'x' }] } }, key);
    expect(otherSingle.status).to.equal(400);
    expect(otherSingle.body.error.message).to.match(/^model: models\/another is not the model of the path/);
    const sent = upstream.received.length;
    const empty = await post(url('batchEmbedContents'), { requests: [] }, key);
    expect(empty.status).to.equal(400);
    expect(upstream.received.length).to.equal(sent);
    const listed = await fetch(`${gw.url}/v1beta/models/gemini-embedding-001`, { headers: key });
    expect(((await listed.json()) as Json).supportedGenerationMethods).to.include.members(['embedContent', 'batchEmbedContents']);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('generateContent with systemInstruction and generationConfig: what the upstream got, what the client got', async () => {
    const response = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'hi there',
      config: {
        systemInstruction: 'You are terse.',
        temperature: 0.3,
        topP: 0.9,
        maxOutputTokens: 50,
        stopSequences: ['END'],
        thinkingConfig: { thinkingBudget: 2048 },
      },
    });
    const got = upstream.last();
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(got.body).to.deep.include({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'hi there' },
      ],
      temperature: 0.3,
      top_p: 0.9,
      max_tokens: 50,
      stop: ['END'],
      reasoning_effort: 'low',
    });
    expect(response.text).to.equal('upstream says: hi there');
    expect(response.candidates?.[0]?.finishReason).to.equal('STOP');
    expect(plain(response.usageMetadata)).to.deep.equal({ promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18, cachedContentTokenCount: 3 });
    expect(response.modelVersion).to.equal('gpt-4o-mini');
  });

  it("a REST body with Google's proto field names (system_instruction, inline_data, function_declarations, max_output_tokens) means what the camelCase one does", async () => {
    const url = `${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`;
    const answer = await post(
      url,
      {
        system_instruction: { parts: [{ text: 'You are terse.' }] },
        contents: [{ role: 'user', parts: [{ text: 'what is this?' }, { inline_data: { mime_type: 'image/png', data: 'iVBORw0KGgo=' } }] }],
        tools: [
          {
            function_declarations: [
              {
                name: 'get_weather',
                parameters: { type: 'OBJECT', properties: { city_name: { type: 'STRING', max_length: 40 } }, required: ['city_name'] },
              },
            ],
          },
        ],
        tool_config: { function_calling_config: { mode: 'AUTO' } },
        generation_config: { max_output_tokens: 50, stop_sequences: ['END'], thinking_config: { thinking_budget: 0 } },
      },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('x-switchyard-losses')).to.equal(null);
    expect(upstream.last().body).to.deep.include({
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
      ],
      max_tokens: 50,
      stop: ['END'],
      reasoning_effort: 'none',
      tool_choice: 'auto',
    });
    // A property the client named (city_name) keeps its name; Schema's own max_length is renamed.
    expect((upstream.last().body!.tools as Json[])[0].function.parameters).to.deep.equal({
      type: 'object',
      properties: { city_name: { type: 'string', maxLength: 40 } },
      required: ['city_name'],
    });
    // A wrong value under a proto name is refused as it would be under the JSON name.
    const bad = await post(url, { contents: [{ role: 'user', parts: [{ text: 'x' }] }], generation_config: { max_output_tokens: 'many' } }, { 'x-goog-api-key': CLIENT_KEY });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.status).to.equal('INVALID_ARGUMENT');
    const counted = await post(
      `${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`,
      { generate_content_request: { system_instruction: { parts: [{ text: 'You are terse.' }] }, contents: [{ role: 'user', parts: [{ text: 'hi' }] }] } },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    const plainCount = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:countTokens`, { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(counted.status).to.equal(200);
    expect(counted.body.totalTokens).to.be.greaterThan(plainCount.body.totalTokens);
  });

  it('a thinking level Google does not have, and ANY naming no declared function, are refused before the back end', async () => {
    await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { thinkingConfig: { thinkingLevel: ThinkingLevel.LOW } } });
    expect(upstream.last().body!.reasoning_effort).to.equal('low');
    // A level Google does not have is refused, as Google refuses it, and not sent on.
    const calls = upstream.received.length;
    const bogus = await expectApiError(
      ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { thinkingConfig: { thinkingLevel: 'bogus' as ThinkingLevel } } }),
      400,
      'INVALID_ARGUMENT',
    );
    expect(bogus.message).to.include('thinkingLevel');
    // ANY naming only functions no declaration declares: nothing could be called; refused, not sent
    // on as an empty tool list and a choice of an unknown function.
    const tools = [{ functionDeclarations: [weather] }];
    const nothing = await expectApiError(
      ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x', config: { tools, toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['zzz'] } } } }),
      400,
      'INVALID_ARGUMENT',
    );
    expect(nothing.message).to.include('allowedFunctionNames').and.include('`zzz`');
    expect(upstream.received.length).to.equal(calls);
    // Some declared: those are offered, one alone forced by name.
    await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'x',
      config: { tools, toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['zzz', 'get_weather'] } } },
    });
    expect(upstream.last().body!.tool_choice).to.deep.equal({ type: 'function', function: { name: 'get_weather' } });
    expect((upstream.last().body!.tools as Json[]).map((t) => t.function.name)).to.deep.equal(['get_weather']);
  });

  it('generateContentStream: text, usage asked of the upstream, finishReason and usageMetadata last', async () => {
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'stream me' });
    let text = '';
    let last: Json | undefined;
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      last = plain(chunk);
    }
    expect(upstream.last().body).to.deep.include({ stream: true, stream_options: { include_usage: true } });
    expect(text).to.equal('upstream says: stream me');
    expect(last!.candidates[0].finishReason).to.equal('STOP');
    expect(last!.usageMetadata).to.deep.equal({ promptTokenCount: 11, candidatesTokenCount: 7, totalTokenCount: 18, cachedContentTokenCount: 3 });
  });

  it('function calling: uppercase schema types normalised, streamed argument pieces become one functionCall, the round trip carries ids', async () => {
    const config = { tools: [{ functionDeclarations: [weather] }], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.ANY, allowedFunctionNames: ['get_weather'] } } };
    const stream = await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'weather?', config });
    const calls: Json[] = [];
    let finish: unknown;
    for await (const chunk of stream) {
      for (const call of chunk.functionCalls ?? []) calls.push(plain(call));
      finish = chunk.candidates?.[0]?.finishReason ?? finish;
    }
    expect(calls).to.deep.equal([{ id: 'call_fake1', name: 'get_weather', args: { city: 'Paris' } }]);
    expect(finish).to.equal('STOP');
    const sent = upstream.last().body!;
    expect(sent.tools).to.deep.equal([
      {
        type: 'function',
        function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
      },
    ]);
    expect(sent.tool_choice).to.deep.equal({ type: 'function', function: { name: 'get_weather' } });

    // The round trip: without ids (as most Gemini clients send), matched by name and order.
    const answer = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: [
        { role: 'user', parts: [{ text: 'weather in Paris and Rome?' }] },
        {
          role: 'model',
          parts: [
            { functionCall: { name: 'get_weather', args: { city: 'Paris' } } },
            { functionCall: { name: 'get_weather', args: { city: 'Rome' } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'get_weather', response: { forecast: 'rainy' } } },
            { functionResponse: { name: 'get_weather', response: { forecast: 'sunny' } } },
          ],
        },
      ],
      config: { tools: [{ functionDeclarations: [weather] }] },
    });
    const messages = upstream.last().body!.messages as Json[];
    expect(messages[1]!.role).to.equal('assistant');
    const ids = (messages[1]!.tool_calls as Json[]).map((c) => c.id);
    expect(ids[0]).to.not.equal(ids[1]);
    expect((messages[1]!.tool_calls as Json[]).map((c) => JSON.parse(c.function.arguments))).to.deep.equal([{ city: 'Paris' }, { city: 'Rome' }]);
    expect(messages.slice(2)).to.deep.equal([
      { role: 'tool', tool_call_id: ids[0], content: '{"forecast":"rainy"}' },
      { role: 'tool', tool_call_id: ids[1], content: '{"forecast":"sunny"}' },
    ]);
    expect(answer.text).to.equal('upstream says: {"forecast":"sunny"}');
  });

  it("Gemini CLI's history over a chat back end: a response id made by the client answers the call that came without one; every tool result comes before the turn's other parts, a tool's own images after them", async () => {
    const PNG = 'iVBORw0KGgo=';
    const response = await post(
      `${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`,
      {
        contents: [
          { role: 'user', parts: [{ text: 'read both' }] },
          { role: 'model', parts: [{ functionCall: { name: 'read_file', args: { path: 'a.png' } } }, { functionCall: { name: 'read_file', args: { path: 'b.txt' } } }] },
          {
            role: 'user',
            parts: [
              { functionResponse: { id: 'read_file-1732712345678-8f3a2b', name: 'read_file', response: { output: 'Binary content provided (1 item(s)).' }, parts: [{ inlineData: { mimeType: 'image/png', data: PNG } }] } },
              { text: 'and here is more' },
              { functionResponse: { id: 'read_file-1732712345679-11aa22', name: 'read_file', response: { output: 'text' } } },
            ],
          },
        ],
        tools: [{ functionDeclarations: [{ name: 'read_file', parameters: { type: 'OBJECT', properties: { path: { type: 'STRING' } } } }] }],
      },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    expect(response.status, response.text).to.equal(200);
    const messages = upstream.last().body!.messages as Json[];
    expect(messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool', 'user']);
    const ids = (messages[1]!.tool_calls as Json[]).map((c) => c.id);
    expect(messages[2]).to.deep.include({ tool_call_id: ids[0] });
    expect(messages[3]).to.deep.include({ tool_call_id: ids[1] });
    expect(messages[4]!.content).to.deep.equal([
      { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
      { type: 'text', text: 'and here is more' },
    ]);
    expect(response.headers.get('x-switchyard-losses')).to.equal(null);
  });

  it("a chat's streamed function call, then its functionResponse: the SDK's history (one content per chunk) reaches the upstream in OpenAI's tool order", async () => {
    const chat = ai.chats.create({ model: 'gemini-2.5-flash', config: { tools: [{ functionDeclarations: [weather] }] } });
    const calls: Json[] = [];
    for await (const chunk of await chat.sendMessageStream({ message: 'weather in Paris?' })) {
      for (const call of chunk.functionCalls ?? []) calls.push(plain(call));
    }
    expect(calls).to.deep.equal([{ id: 'call_fake1', name: 'get_weather', args: { city: 'Paris' } }]);
    // The SDK keeps each streamed chunk's content as a model turn of its own.
    expect(chat.getHistory().filter((c) => c.role === 'model').length).to.be.greaterThan(1);
    const answer = await chat.sendMessage({ message: [{ functionResponse: { id: 'call_fake1', name: 'get_weather', response: { forecast: 'rainy' } } }] });
    expect(answer.text).to.equal('upstream says: {"forecast":"rainy"}');
    const messages = upstream.last().body!.messages as Json[];
    expect(messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool']);
    expect(messages[1]).to.deep.include({ content: null });
    expect((messages[1]!.tool_calls as Json[]).map((c) => c.id)).to.deep.equal(['call_fake1']);
    expect(messages[2]).to.deep.equal({ role: 'tool', tool_call_id: 'call_fake1', content: '{"forecast":"rainy"}' });
  });

  it('inlineData images become data: URL image parts; responseMimeType JSON with a schema becomes response_format', async () => {
    await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: [{ role: 'user', parts: [{ text: 'what is this?' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] }],
      config: { responseMimeType: 'application/json', responseSchema: { type: Type.OBJECT, properties: { answer: { type: Type.STRING, nullable: true } } } },
    });
    const body = upstream.last().body!;
    expect(body.messages).to.deep.equal([
      { role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }] },
    ]);
    expect(body.response_format).to.deep.equal({
      type: 'json_schema',
      json_schema: { name: 'response', schema: { type: 'object', properties: { answer: { type: ['string', 'null'] } } }, strict: false },
    });
  });

  it('a PDF goes up as a file part with the filename OpenAI requires: its displayName, else document.pdf', async () => {
    const pdf = Buffer.from('%PDF-1.4').toString('base64');
    for (const [inlineData, filename] of [
      [{ mimeType: 'application/pdf', data: pdf, displayName: 'report.pdf' }, 'report.pdf'],
      [{ mimeType: 'application/pdf', data: pdf }, 'document.pdf'],
    ] as const) {
      await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: [{ role: 'user', parts: [{ text: 'summarise' }, { inlineData }] }] });
      const content = (upstream.last().body!.messages as Json[])[0]!.content as Json[];
      expect(content[1]).to.deep.equal({ type: 'file', file: { file_data: `data:application/pdf;base64,${pdf}`, filename } });
    }
  });

  it('responseMimeType JSON without a schema: JSON mode, with a system line saying "JSON" when nothing in the conversation does, as chat completions requires', async () => {
    const reply = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'List three colours.', config: { responseMimeType: 'application/json' } });
    expect(reply.text).to.be.a('string');
    const body = upstream.last().body! as Record<string, any>;
    expect(body.response_format).to.deep.equal({ type: 'json_object' });
    // Before, OpenAI refused the call: "'messages' must contain the word 'json' in some form".
    expect(body.messages).to.deep.equal([
      { role: 'system', content: 'Answer in JSON.' },
      { role: 'user', content: 'List three colours.' },
    ]);
    // A conversation that says it already goes up as it is.
    await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'List three colours as a JSON array.', config: { responseMimeType: 'application/json' } });
    expect(upstream.last().body!.messages).to.deep.equal([{ role: 'user', content: 'List three colours as a JSON array.' }]);
    // With a system instruction, the line joins it (some servers' templates refuse a second system message).
    await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'List three colours.', config: { responseMimeType: 'application/json', systemInstruction: 'Be brief.' } });
    expect(upstream.last().body!.messages).to.deep.equal([
      { role: 'system', content: 'Be brief.\nAnswer in JSON.' },
      { role: 'user', content: 'List three colours.' },
    ]);
  });

  it('a responseSchema whose root is a list (as in Google\'s own examples) goes to chat completions inside an object, and the client reads its list, streamed or not', async () => {
    // The back end answers as OpenAI's strict mode would (the one member, whitespace and all),
    // in pieces that split the member's opening; it refuses a root that is not an object.
    let pieces: string[] = [];
    let finish = 'stop';
    upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
      const refused = jsonSchemaRootError(body!);
      if (refused) return json(res, 400, refused);
      if (!body!.stream) {
        return json(res, 200, { id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: pieces.join('') }, finish_reason: finish }], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 } });
      }
      sse(res);
      for (const piece of pieces) res.write(chunk(piece));
      res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: finish }] })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const recipe = { type: Type.OBJECT, properties: { name: { type: Type.STRING }, minutes: { type: Type.INTEGER } }, required: ['name', 'minutes'] };
    const config = { responseMimeType: 'application/json', responseSchema: { type: Type.ARRAY, items: recipe } };
    pieces = ['{"it', 'ems": [{"name":"Soup","minutes":20}', ',{"name":"Tea","minutes":', '3}]', '\n', '}'];
    const list = '[{"name":"Soup","minutes":20},{"name":"Tea","minutes":3}]';

    const reply = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'Two recipes.', config });
    expect(reply.text).to.equal(list);
    expect(reply.candidates![0]!.finishReason).to.equal('STOP');
    const sent = upstream.last().body!.response_format as Json;
    expect(sent.json_schema.schema).to.deep.equal({
      type: 'object',
      properties: { items: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' }, minutes: { type: 'integer' } }, required: ['name', 'minutes'] } } },
      required: ['items'],
      additionalProperties: false,
    });

    let streamed = '';
    let last: Json | undefined;
    for await (const part of await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'Two recipes.', config })) {
      streamed += part.text ?? '';
      last = plain(part);
    }
    expect(streamed).to.equal(list);
    expect(last!.candidates[0].finishReason).to.equal('STOP');

    // An answer the limit cut keeps every character of the list it began, braces included.
    pieces = ['{"items":[{"name":"Soup","minutes":20}', ',{"name":"Tea"}'];
    finish = 'length';
    const cut = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'Two recipes.', config });
    expect(cut.text).to.equal('[{"name":"Soup","minutes":20},{"name":"Tea"}');
    expect(cut.candidates![0]!.finishReason).to.equal('MAX_TOKENS');

    // A JSON schema's definitions stay at the root, where its references point; a string root is a `value`.
    finish = 'stop';
    pieces = ['{ "value" : "ok" }'];
    const defs = { $defs: { word: { type: 'string' } }, $ref: '#/$defs/word' };
    const word = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'A word.', config: { responseMimeType: 'application/json', responseJsonSchema: defs } });
    expect(word.text).to.equal('"ok"');
    expect((upstream.last().body!.response_format as Json).json_schema.schema).to.deep.equal({
      type: 'object', properties: { value: { $ref: '#/$defs/word' } }, required: ['value'], additionalProperties: false, $defs: { word: { type: 'string' } },
    });
  });

  it('inline WAV or MP3 audio goes to chat completions as input_audio, inline text as text; nothing is named lost', async () => {
    const wav = Buffer.from('RIFF....WAVEfmt ').toString('base64');
    const response = await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: [{ role: 'user', parts: [{ text: 'What is said?' }, { inlineData: { mimeType: 'audio/wav', data: wav } }, { inlineData: { mimeType: 'text/plain', data: Buffer.from('a note').toString('base64') } }] }],
    });
    expect(response.text).to.be.a('string');
    const sent = (upstream.last().body!.messages as Array<{ content: unknown }>)[0]!.content;
    expect(sent).to.deep.equal([
      { type: 'text', text: 'What is said?' },
      { type: 'input_audio', input_audio: { data: wav, format: 'wav' } },
      { type: 'text', text: 'a note' },
    ]);
    expect(response.sdkHttpResponse?.headers?.['x-switchyard-losses']).to.equal(undefined);
  });

  it("schemas as @google/genai types them: counts given as text become numbers, and nullable carries over enums and anyOf", async () => {
    await ai.models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'pick',
      config: {
        tools: [{ functionDeclarations: [{ name: 'pick', parameters: { type: Type.OBJECT, properties: { tags: { type: Type.ARRAY, items: { type: Type.STRING }, minItems: '1', maxItems: '3' }, name: { type: Type.STRING, minLength: '2' } } } }] }],
        responseMimeType: 'application/json',
        responseSchema: {
          type: Type.OBJECT,
          properties: {
            colour: { type: Type.STRING, enum: ['red', 'blue'], nullable: true },
            either: { anyOf: [{ type: Type.STRING }, { type: Type.INTEGER }], nullable: true },
            list: { type: Type.ARRAY, items: { type: Type.STRING }, maxItems: '5' },
          },
        },
      },
    });
    const body = upstream.last().body! as Record<string, any>;
    expect(body.tools[0].function.parameters).to.deep.equal({
      type: 'object',
      properties: { tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3 }, name: { type: 'string', minLength: 2 } },
    });
    expect(body.response_format.json_schema.schema).to.deep.equal({
      type: 'object',
      properties: {
        colour: { type: ['string', 'null'], enum: ['red', 'blue', null] },
        either: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }] },
        list: { type: 'array', items: { type: 'string' }, maxItems: 5 },
      },
    });
  });

  it('a stream the upstream cuts after it began ends with a data: event in Gemini\'s error shape, which the SDK raises', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.write(chunk('partial '));
      setTimeout(() => res.destroy(), 20);
    });
    const raw = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`, { contents: [{ parts: [{ text: 'x' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(raw.status).to.equal(200);
    const events = raw.text.split('\r\n\r\n').filter(Boolean);
    expect(JSON.parse(events[0]!.slice(6)).candidates[0].content.parts).to.deep.equal([{ text: 'partial ' }]);
    const last = JSON.parse(events[events.length - 1]!.slice(6));
    expect(Object.keys(last)).to.deep.equal(['error']);
    expect(last.error.code).to.be.a('number').and.at.least(500);
    expect(last.error.status).to.be.oneOf(['UNAVAILABLE', 'INTERNAL', 'DEADLINE_EXCEEDED']);

    let text = '';
    const error = await expectApiError(
      (async () => {
        for await (const c of await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'x' })) text += c.text ?? '';
      })(),
      last.error.code,
      last.error.status,
    );
    expect(error.message).to.not.contain(upstream.apiKey);
    expect(text).to.equal('partial ');
  });

  it('image output from an OpenAI-compatible image back end (message.images / delta.images, data: URLs) reaches @google/genai as inlineData', async () => {
    const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    const images = [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }];
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 200, {
        id: 'chatcmpl-img',
        object: 'chat.completion',
        created: 1,
        model: 'image-model',
        choices: [{ index: 0, message: { role: 'assistant', content: 'A dot.', images }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 4, completion_tokens: 1290, total_tokens: 1294 },
      }),
    );
    const response = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'draw a dot', config: { responseModalities: ['TEXT', 'IMAGE'] } });
    expect(upstream.last().body!.modalities).to.deep.equal(['text', 'image']);
    expect(plain(response.candidates?.[0]?.content?.parts)).to.deep.equal([{ text: 'A dot.' }, { inlineData: { mimeType: 'image/png', data: PNG } }]);
    expect(response.data).to.equal(PNG);

    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.write(chunk('A dot.'));
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { images }, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const parts: Json[] = [];
    for await (const c of await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'draw a dot', config: { responseModalities: ['IMAGE'] } })) {
      parts.push(...(plain(c.candidates?.[0]?.content?.parts) ?? []));
    }
    expect(parts.filter((p) => p.inlineData)).to.deep.equal([{ inlineData: { mimeType: 'image/png', data: PNG } }]);
  });

  it('asked for IMAGE, answered in text only: the loss generationConfig.responseModalities.IMAGE is named', async () => {
    const raw = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`, { contents: [{ parts: [{ text: 'draw' }] }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'] } }, { 'x-goog-api-key': CLIENT_KEY });
    expect(raw.status).to.equal(200);
    expect(raw.headers.get('x-switchyard-losses')?.split(',')).to.include('generationConfig.responseModalities.IMAGE');
  });

  it('embedContent: base64 vectors holding NaN or an infinity (an upstream that ignores encoding_format) are a 502, never nulls in values', async () => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      upstream.handle('POST /v1/embeddings', (_req, res) =>
        json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: fakeBase64([0.5, bad, 0.25]) }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }),
      );
      await expectApiError(ai.models.embedContent({ model: 'gemini-embedding-001', contents: 'x' }), 502, 'UNAVAILABLE');
      const rest = await post(`${gw.url}/v1beta/models/gemini-embedding-001:embedContent`, { content: { parts: [{ text: 'x' }] } }, { 'x-goog-api-key': CLIENT_KEY });
      expect(rest.status, `${bad}: ${rest.text}`).to.equal(502);
    }
    upstream.handle('POST /v1/embeddings', (_req, res) =>
      json(res, 200, { object: 'list', data: [{ object: 'embedding', index: 0, embedding: fakeBase64([0.5, 0.75, 0.25]) }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } }),
    );
    const fine = await ai.models.embedContent({ model: 'gemini-embedding-001', contents: 'x' });
    expect(fine.embeddings?.[0]?.values).to.deep.equal([0.5, 0.75, 0.25]);
  });

  it('an upstream 429 is RESOURCE_EXHAUSTED in the SDK, an upstream 400 INVALID_ARGUMENT', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 400, { error: { message: 'bad thing', type: 'invalid_request_error', param: null, code: null } }));
    await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }), 400, 'INVALID_ARGUMENT');
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 429, { error: { message: 'slow down', type: 'rate_limit_error', param: null, code: null } }));
    await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }), 429, 'RESOURCE_EXHAUSTED');
    // One that says when to try again says it as Google does: a RetryInfo detail (Gemini CLI waits that long).
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 429, { error: { message: 'slow down', type: 'rate_limit_error', param: null, code: null } }, { 'retry-after': '2' }));
    const limited = await post(`${gw.url}/v1beta/models/gemini-2.5-flash:generateContent`, { contents: [{ parts: [{ text: 'x' }] }] }, { 'x-goog-api-key': CLIENT_KEY });
    expect(limited.status).to.equal(429);
    expect(limited.headers.get('retry-after')).to.equal('2');
    expect(limited.body.error).to.deep.include({ code: 429, status: 'RESOURCE_EXHAUSTED' });
    expect(limited.body.error.details).to.deep.equal([{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '2s' }]);
  });
});

describe('gemini listing pages, and embed errors in the client\'s own field names (official @google/genai)', () => {
  let gw: RunningGateway;
  let ai: GoogleGenAI;
  const NARROW_KEY = 'sk-client-gemini-pages-narrow-01';
  /** 60 chat models and the embeddings one: more than a default page of 50. */
  const names = [...Array.from({ length: 60 }, (_, i) => `chat-${String(i).padStart(2, '0')}`), 'mock-embedding'];

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys:
    - { name: pager, key: ${CLIENT_KEY} }
    - { name: narrow-pager, key: ${NARROW_KEY}, models: ['chat-1?', mock-embedding] }
providers:
  - id: mock
    type: mock
    models: [${names.join(', ')}]
`);
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  after(async () => gw?.stop());

  const list = async (query: string, key = CLIENT_KEY) => {
    const res = await fetch(`${gw.url}/v1beta/models${query}`, { headers: { 'x-goog-api-key': key } });
    return { status: res.status, body: (await res.json()) as Json };
  };

  it('GET /v1beta/models gives pageSize models (50 by default, 1000 at most) and a nextPageToken while more follow', async () => {
    const first = await list('');
    expect(first.status).to.equal(200);
    expect(first.body.models).to.have.length(50);
    expect(first.body.nextPageToken).to.be.a('string').and.not.equal('');
    const rest = await list(`?pageToken=${encodeURIComponent(first.body.nextPageToken)}`);
    expect(rest.body.models.map((m: Json) => m.name)).to.deep.equal(names.slice(50).map((n) => `models/${n}`));
    expect(rest.body).to.not.have.property('nextPageToken');
    // Page after page, pageSize 7: every model once, in order; the last page has no token.
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await list(`?pageSize=7${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`);
      expect(page.body.models.length).to.be.at.most(7);
      seen.push(...page.body.models.map((m: Json) => m.name));
      token = page.body.nextPageToken;
      pages++;
    } while (token);
    expect(pages).to.equal(Math.ceil(names.length / 7));
    expect(seen).to.deep.equal(names.map((n) => `models/${n}`));
    // As Google does: above 1000 is 1000, 0 is the default; the proto names are taken too.
    expect((await list('?pageSize=5000')).body.models).to.have.length(names.length);
    expect((await list('?pageSize=0')).body.models).to.have.length(50);
    expect((await list('?page_size=3')).body.models).to.have.length(3);
  });

  it('the SDK pages through it with pageSize, one request per page', async () => {
    const pager = await ai.models.list({ config: { pageSize: 25 } });
    expect(pager.page).to.have.length(25);
    const all: string[] = [];
    for await (const model of pager) all.push(String(model.name));
    expect(all).to.deep.equal(names.map((n) => `models/${n}`));
  });

  it('pages over only the models the key may use', async () => {
    const first = await list('?pageSize=6', NARROW_KEY);
    expect(first.body.models.map((m: Json) => m.name)).to.deep.equal(['chat-10', 'chat-11', 'chat-12', 'chat-13', 'chat-14', 'chat-15'].map((n) => `models/${n}`));
    const second = await list(`?pageSize=6&pageToken=${encodeURIComponent(first.body.nextPageToken)}`, NARROW_KEY);
    expect(second.body.models.map((m: Json) => m.name)).to.deep.equal(['chat-16', 'chat-17', 'chat-18', 'chat-19', 'mock-embedding'].map((n) => `models/${n}`));
    expect(second.body).to.not.have.property('nextPageToken');
  });

  it('a page token it did not give out, or a pageSize that is not a whole number of 0 or more, is INVALID_ARGUMENT', async () => {
    for (const query of ['?pageToken=not-a-token', `?pageToken=${Buffer.from('after:no-such-model').toString('base64url')}`, '?pageSize=-1', '?pageSize=2.5', '?pageSize=many']) {
      const res = await list(query);
      expect(res.status, query).to.equal(400);
      expect(res.body.error.status, query).to.equal('INVALID_ARGUMENT');
      expect(res.body.error.message, query).to.match(/pageToken|pageSize/);
    }
  });

  it("a back end's refusal of the dimensionality names outputDimensionality, the field the client sent, not the canonical dimensions", async () => {
    const rest = await post(`${gw.url}/v1beta/models/mock-embedding:embedContent`, { content: { parts: [{ text: 'x' }] }, outputDimensionality: 5000 }, { 'x-goog-api-key': CLIENT_KEY });
    expect(rest.status).to.equal(400);
    expect(rest.body.error.status).to.equal('INVALID_ARGUMENT');
    expect(rest.body.error.message).to.include("'outputDimensionality'").and.not.to.include('dimensions');
    // The SDK's embedContent is a batch: its first request names it.
    const error = await expectApiError(ai.models.embedContent({ model: 'mock-embedding', contents: ['x', 'y'], config: { outputDimensionality: 5000 } }), 400, 'INVALID_ARGUMENT');
    expect(error.message).to.include("'requests[0].outputDimensionality'").and.not.to.include("'dimensions'");
    // An OpenAI client of the same back end still reads its own name.
    const openai = await post(`${gw.url}/v1/embeddings`, { model: 'mock-embedding', input: 'x', dimensions: 5000 }, { authorization: `Bearer ${CLIENT_KEY}` });
    expect(openai.body.error).to.include({ param: 'dimensions' });
  });
});

describe('gemini format in front of the anthropic provider (official @google/genai)', () => {
  const upstream = new FakeAnthropic();
  let gw: RunningGateway;
  let ai: GoogleGenAI;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: gemini-user, key: ${CLIENT_KEY} }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - gemini
providers:
  - id: claude
    type: anthropic
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [claude-fake-1]
models:
  - name: gemini-2.5-pro
    targets: [{ provider: claude, model: claude-fake-1 }]
`);
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('generateContent: systemInstruction and text to the Messages API, text and usage back', async () => {
    const response = await ai.models.generateContent({ model: 'gemini-2.5-pro', contents: 'hello claude', config: { systemInstruction: 'Be nice.', maxOutputTokens: 64 } });
    const got = upstream.last();
    expect(got.headers['x-api-key']).to.equal(upstream.apiKey);
    expect(got.body).to.deep.include({ model: 'claude-fake-1', system: 'Be nice.', max_tokens: 64 });
    expect(got.body!.messages).to.deep.equal([{ role: 'user', content: 'hello claude' }]);
    expect(response.text).to.equal('upstream says: hello claude');
    expect(response.candidates?.[0]?.finishReason).to.equal('STOP');
    // Anthropic's 11 input + 2 cache writes + 5 cache reads; 7 output.
    expect(plain(response.usageMetadata)).to.deep.equal({ promptTokenCount: 18, candidatesTokenCount: 7, totalTokenCount: 25, cachedContentTokenCount: 5 });
  });

  it("a function response's image (Gemini CLI reading a picture) reaches Claude inside its tool_result, beside the response", async () => {
    const PNG = 'iVBORw0KGgo=';
    const response = await post(
      `${gw.url}/v1beta/models/gemini-2.5-pro:generateContent`,
      {
        contents: [
          { role: 'user', parts: [{ text: 'read it' }] },
          { role: 'model', parts: [{ functionCall: { name: 'read_file', args: { path: 'a.png' } } }] },
          { role: 'user', parts: [{ functionResponse: { name: 'read_file', response: { output: 'Binary content provided (1 item(s)).' }, parts: [{ inlineData: { mimeType: 'image/png', data: PNG } }] } }] },
        ],
        tools: [{ functionDeclarations: [{ name: 'read_file', parameters: { type: 'OBJECT', properties: { path: { type: 'STRING' } } } }] }],
      },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    expect(response.status, response.text).to.equal(200);
    const messages = upstream.last().body!.messages as Json[];
    expect(messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'user']);
    const callId = (messages[1]!.content as Json[]).find((b) => b.type === 'tool_use')!.id;
    expect(messages[2]!.content).to.deep.equal([
      {
        type: 'tool_result',
        tool_use_id: callId,
        content: [
          { type: 'text', text: '{"output":"Binary content provided (1 item(s))."}' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
        ],
      },
    ]);
  });

  it('a turn with no parts, or a part with nothing in it, is a 400 as Google answers it; a last turn of audio alone is a 400 before the back end, never left out to end the conversation on the model', async () => {
    await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-pro', contents: [{ role: 'user', parts: [] }] }), 400, 'INVALID_ARGUMENT');
    await expectApiError(ai.models.generateContent({ model: 'gemini-2.5-pro', contents: [{ role: 'user', parts: [{}] }] }), 400, 'INVALID_ARGUMENT');
    expect(upstream.received).to.have.length(0);
    const reply = await post(
      `${gw.url}/v1beta/models/gemini-2.5-pro:generateContent`,
      {
        contents: [
          { role: 'user', parts: [{ text: 'Summarise the recording.' }] },
          { role: 'model', parts: [{ text: 'Please attach it.' }] },
          { role: 'user', parts: [{ inlineData: { mimeType: 'audio/ogg', data: 'T2dnUwACAAAAAAAA' } }] },
        ],
      },
      { 'x-goog-api-key': CLIENT_KEY },
    );
    // Nothing of the last turn is left for Claude: refused before the back end (before, the empty
    // turn went up and the API refused it, a call billed for nothing), never the conversation
    // ended on the model's turn, which Claude would continue.
    expect(reply.status).to.equal(400);
    expect(reply.text).to.include('The last message has nothing');
    expect(upstream.received).to.have.length(0);
  });

  it('generateContentStream with includeThoughts: thought parts, text, one whole functionCall from input_json pieces', async () => {
    upstream.script(() => ({
      events: eventsOf(
        anthropicMessage([
          { type: 'thinking', thinking: 'the user wants weather', signature: 'sig-abc' },
          { type: 'text', text: 'Let me check.' },
          { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } },
        ]),
      ),
    }));
    const stream = await ai.models.generateContentStream({
      model: 'gemini-2.5-pro',
      contents: 'weather in Oslo?',
      config: { tools: [{ functionDeclarations: [weather] }], thinkingConfig: { thinkingBudget: 8192, includeThoughts: true } },
    });
    let thoughts = '';
    let text = '';
    const calls: Json[] = [];
    let last: Json | undefined;
    for await (const chunk of stream) {
      for (const part of chunk.candidates?.[0]?.content?.parts ?? []) {
        if (part.thought) thoughts += part.text ?? '';
        else if (part.text) text += part.text;
        if (part.functionCall) calls.push(plain(part.functionCall));
      }
      last = plain(chunk);
    }
    const sent = upstream.last().body!;
    expect(sent.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 8192 });
    expect(sent.tools).to.deep.equal([{ name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }]);
    expect(thoughts).to.equal('the user wants weather');
    expect(text).to.equal('Let me check.');
    expect(calls).to.deep.equal([{ id: 'toolu_01', name: 'get_weather', args: { city: 'Oslo' } }]);
    expect(last!.candidates[0].finishReason).to.equal('STOP');
    expect(last!.usageMetadata).to.deep.include({ promptTokenCount: 18, cachedContentTokenCount: 5 });
  });

  it('the function response goes back as a tool_result for the call id the client echoes', async () => {
    const response = await ai.models.generateContent({
      model: 'gemini-2.5-pro',
      contents: [
        { role: 'user', parts: [{ text: 'weather in Oslo?' }] },
        { role: 'model', parts: [{ functionCall: { id: 'toolu_01', name: 'get_weather', args: { city: 'Oslo' } } }] },
        { role: 'user', parts: [{ functionResponse: { id: 'toolu_01', name: 'get_weather', response: { forecast: 'snow' } } }] },
      ],
      config: { tools: [{ functionDeclarations: [weather] }] },
    });
    const messages = upstream.last().body!.messages as Json[];
    expect(messages[1]).to.deep.equal({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Oslo' } }] });
    expect(messages[2]).to.deep.equal({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: '{"forecast":"snow"}' }] });
    expect(response.text).to.equal('upstream says: {"forecast":"snow"}');
  });
});
