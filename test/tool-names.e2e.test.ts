import { expect } from 'chai';
import { GoogleGenAI, type Content } from '@google/genai';
import OpenAI from 'openai';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const CLIENT_KEY = 'sk-client-tool-names-0123456789';

type Json = Record<string, any>;

/** A Gemini client's tools: names with a dot and a colon (Gemini takes them), and one that the first's plain form would take. */
const DECLARATIONS = [
  { name: 'files.read', description: 'Read a file', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } } } },
  { name: 'files_read', description: 'Another tool', parametersJsonSchema: { type: 'object' } },
  { name: 'ns:search', description: 'Search', parametersJsonSchema: { type: 'object' } },
];

const CHAT_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

describe('tool names a back end refuses (a Gemini client\'s files.read): sent as names it takes, given back as declared', function () {
  this.timeout(30_000);
  const claude = new FakeAnthropic();
  const openaiUp = new FakeOpenAI();
  let gw: RunningGateway;
  let ai: GoogleGenAI;

  before(async () => {
    await claude.start();
    await openaiUp.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, gemini]
providers:
  - id: claude
    type: anthropic
    baseUrl: ${claude.url}
    apiKey: ${claude.apiKey}
    models: [claude-fake-1]
  - id: gpt
    type: openai
    baseUrl: ${openaiUp.url}/v1
    apiKey: ${openaiUp.apiKey}
    models: [gpt-fake-1]
`);
    ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });
  afterEach(() => {
    claude.reset();
    openaiUp.reset();
  });
  after(async () => {
    await gw?.stop();
    await claude.stop();
    await openaiUp.stop();
  });

  /** The names the back end got: its tools', in order. */
  const sentNames = (model: string): string[] =>
    model.startsWith('claude') ? (claude.last().body!.tools as Json[]).map((t) => t.name) : (openaiUp.last().body!.tools as Json[]).map((t) => t.function.name);

  for (const model of ['claude-fake-1', 'gpt-fake-1']) {
    it(`${model}: every name goes up as one the back end takes, all different; the call comes back as files.read, streamed and not`, async () => {
      const config = { tools: [{ functionDeclarations: DECLARATIONS }] };
      const answer = await ai.models.generateContent({ model, contents: 'read it', config });
      expect(answer.functionCalls?.map((c) => c.name)).to.deep.equal(['files.read']);
      expect(answer.functionCalls?.[0]?.args).to.deep.equal({ city: 'Paris' });
      const sent = sentNames(model);
      expect(sent).to.have.length(3);
      for (const name of sent) expect(name).to.match(CHAT_NAME);
      expect(new Set(sent).size).to.equal(3);
      // A name that fits goes as it is; the others keep what they can of themselves.
      expect(sent[1]).to.equal('files_read');
      expect(sent[0]).to.match(/^files_read_[0-9a-f]{8}$/);
      expect(sent[2]).to.equal('ns_search');

      const calls: string[] = [];
      for await (const chunk of await ai.models.generateContentStream({ model, contents: 'read it', config })) for (const call of chunk.functionCalls ?? []) calls.push(call.name!);
      expect(calls).to.deep.equal(['files.read']);
    });

    it(`${model}: a history with the call and its result goes up under the names sent, and is taken`, async () => {
      const contents: Content[] = [
        { role: 'user', parts: [{ text: 'read it' }] },
        { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'files.read', args: { city: 'Paris' } } }] },
        { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'files.read', response: { text: 'sunny' } } }] },
      ];
      const answer = await ai.models.generateContent({ model, contents, config: { tools: [{ functionDeclarations: DECLARATIONS }] } });
      expect(answer.text).to.include('sunny');
      const sent = sentNames(model);
      if (model.startsWith('claude')) {
        const call = (claude.last().body!.messages as Json[])[1].content[0];
        expect(call).to.deep.include({ type: 'tool_use', name: sent[0] });
      } else {
        const call = (openaiUp.last().body!.messages as Json[])[1].tool_calls[0];
        expect(call.function.name).to.equal(sent[0]);
      }
    });
  }

  it('a Gemini client\'s history whose calls have no id (the format makes one from the name) goes to an OpenAI-compatible back end with ids it takes', async () => {
    const name = 'search_the_company_knowledge_base_for_documents';
    const contents: Content[] = [
      { role: 'user', parts: [{ text: 'look it up' }] },
      { role: 'model', parts: [{ functionCall: { name, args: { q: 'x' } } }] },
      { role: 'user', parts: [{ functionResponse: { name, response: { text: 'found' } } }] },
    ];
    const answer = await ai.models.generateContent({ model: 'gpt-fake-1', contents, config: { tools: [{ functionDeclarations: [{ name, parametersJsonSchema: { type: 'object' } }] }] } });
    expect(answer.text).to.include('found');
    const [, call, result] = openaiUp.last().body!.messages as Json[];
    expect(call.tool_calls[0].id.length).to.be.at.most(40);
    expect(result.tool_call_id).to.equal(call.tool_calls[0].id);
  });

  it('an OpenAI client\'s tool named as OpenAI allows but Gemini does not (a leading digit) goes to a Gemini back end as _1st_tool and comes back as declared', async () => {
    const gemini = new FakeGemini();
    await gemini.start();
    const local = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
plugins: [auth, validation, routing, openai-chat]
providers:
  - { id: g, type: gemini, baseUrl: ${gemini.url}, apiKey: ${gemini.apiKey}, models: [gemini-fake-1] }
`);
    try {
      const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${local.url}/v1`, maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: 'gemini-fake-1',
        tools: [{ type: 'function', function: { name: '1st_tool', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
        messages: [{ role: 'user', content: 'go' }],
      });
      expect(gemini.last().body!.tools[0].functionDeclarations[0].name).to.equal('_1st_tool');
      const call = completion.choices[0]!.message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
      expect(call.function.name).to.equal('1st_tool');

      // The older function calling the same way (function_call null: no choice, as a client may write it).
      const legacy = await client.chat.completions.create({
        model: 'gemini-fake-1',
        functions: [{ name: '1st_tool', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
        function_call: null as never,
        messages: [{ role: 'user', content: 'go' }],
      });
      expect(gemini.last().body!.tools[0].functionDeclarations[0].name).to.equal('_1st_tool');
      expect(legacy.choices[0]!.message.function_call?.name).to.equal('1st_tool');
      expect(legacy.choices[0]!.finish_reason).to.equal('function_call');
    } finally {
      await local.stop();
      await gemini.stop();
    }
  });

  it('a chat completions client names its tools as chat completions takes them: a dotted name is its own 400, as OpenAI answers, and goes nowhere', async () => {
    const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = await client.chat.completions
      .create({ model: 'gpt-fake-1', tools: [{ type: 'function', function: { name: 'files.read', parameters: { type: 'object' } } }], messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).to.match(/^tools\[0\]\.function\.name$/);
    expect(openaiUp.received).to.have.length(0);
  });
});
