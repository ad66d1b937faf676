import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const CLIENT_KEY = 'sk-client-custom-tools-0001';

type Json = Record<string, any>;

/** A GPT-5 style custom (freeform) tool, and a conversation in which the model called it. */
const patchTool = { type: 'custom', custom: { name: 'apply_patch', description: 'Apply a patch to the tree.' } } as const;
const history = [
  { role: 'user', content: 'fix the typo' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call_p1', type: 'custom', custom: { name: 'apply_patch', input: '*** Begin Patch\n-teh\n+the\n*** End Patch' } }] },
  { role: 'tool', tool_call_id: 'call_p1', content: 'Done.' },
];

/**
 * Custom tools of chat completions (a tool that takes free text, and the calls of it in the
 * conversation): carried as they came to a back end that speaks chat completions; refused, naming
 * the field, for a back end of another API (before, a 500 from inside the translation, and the
 * conversation that returns a custom call's result was refused by validation for every back end).
 */
describe('custom tools in chat completions (official openai client; fake OpenAI, Anthropic and Gemini upstreams)', function () {
  this.timeout(30_000);
  const openaiUp = new FakeOpenAI();
  const claudeUp = new FakeAnthropic();
  const geminiUp = new FakeGemini();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await Promise.all([openaiUp.start(), claudeUp.start(), geminiUp.start()]);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY}, tpm: 1000000 }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
providers:
  - { id: oa, type: openai, baseUrl: ${openaiUp.url}/v1, apiKey: ${openaiUp.apiKey}, models: [gpt-5] }
  - { id: an, type: anthropic, baseUrl: ${claudeUp.url}, apiKey: ${claudeUp.apiKey}, models: [claude-x] }
  - { id: ge, type: gemini, baseUrl: ${geminiUp.url}, apiKey: ${geminiUp.apiKey}, models: [gemini-x] }
  - { id: mock, type: mock, models: [mock-chat] }
`);
    client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([openaiUp.stop(), claudeUp.stop(), geminiUp.stop()]);
  });

  it('a back end that speaks chat completions gets the custom tool and the custom call in the history as they were sent', async () => {
    openaiUp.handle('POST /v1/chat/completions', (_req, res, body) =>
      json(res, 200, {
        id: 'chatcmpl-c',
        object: 'chat.completion',
        created: 1,
        model: String(body?.model),
        choices: [{ index: 0, message: { role: 'assistant', content: 'Fixed.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 30, completion_tokens: 2, total_tokens: 32 },
      }),
    );
    const answer = await client.chat.completions.create({ model: 'gpt-5', tools: [patchTool], messages: history } as never);
    expect((answer as OpenAI.Chat.ChatCompletion).choices[0]!.message.content).to.equal('Fixed.');
    const sent = openaiUp.last().body!;
    expect(sent.tools).to.deep.equal([patchTool]);
    expect(sent.messages).to.deep.equal(history);
  });

  it('the mock back end answers a conversation with a custom call in it (its prompt count read it: was a 500)', async () => {
    const answer = (await client.chat.completions.create({ model: 'mock-chat', messages: [...history, { role: 'user', content: 'thanks' }] } as never)) as OpenAI.Chat.ChatCompletion;
    expect(answer.choices[0]!.message.content).to.equal('thanks');
    expect(answer.usage!.prompt_tokens).to.be.greaterThan(10);
  });

  for (const model of ['claude-x', 'gemini-x']) {
    it(`a back end of another API (${model}): 400 naming the custom tool, or the custom call in the history, and nothing sent up`, async () => {
      claudeUp.reset();
      geminiUp.reset();
      const tools = await client.chat.completions.create({ model, tools: [{ type: 'function', function: { name: 'ls' } }, patchTool], messages: [{ role: 'user', content: 'fix it' }] } as never).catch((e: unknown) => e);
      expect(tools).to.be.instanceOf(OpenAI.BadRequestError);
      expect((tools as InstanceType<typeof OpenAI.BadRequestError>).param).to.equal('tools[1]');
      expect((tools as Error).message).to.include('custom tools');
      const called = await client.chat.completions.create({ model, messages: history } as never).catch((e: unknown) => e);
      expect(called).to.be.instanceOf(OpenAI.BadRequestError);
      expect((called as InstanceType<typeof OpenAI.BadRequestError>).param).to.equal('messages[1].tool_calls[0]');
      expect(claudeUp.received.length + geminiUp.received.length).to.equal(0);
    });
  }

  it('validation still names what a tool call lacks', async () => {
    for (const [call, param] of [
      [{ id: 'c', type: 'custom' }, 'messages[1].tool_calls[0].custom'],
      [{ id: 'c', type: 'custom', custom: { name: 'apply_patch' } }, 'messages[1].tool_calls[0].custom.input'],
      [{ id: 'c', type: 'function' }, 'messages[1].tool_calls[0].function'],
    ] as Array<[Json, string]>) {
      const messages = [history[0], { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c', content: 'x' }];
      const error = await client.chat.completions.create({ model: 'gpt-5', messages } as never).catch((e: unknown) => e);
      expect(error, param).to.be.instanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).to.equal(param);
    }
  });
});
