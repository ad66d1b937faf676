import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI, type Content } from '@google/genai';
import { expect } from 'chai';
import OpenAI from 'openai';
import { anthropicError, eventsOf, FakeAnthropic, message } from './fakes/anthropic-upstream.js';
import { answer, FakeGemini } from './fakes/gemini-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const CLIENT_KEY = 'sk-client-signatures-abc123';

type Json = Record<string, any>;

const b64 = (text: string) => Buffer.from(text).toString('base64');

const weather: Anthropic.Tool = { name: 'get_weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };

/**
 * A thinking signature vouches only for the back end that made it: Anthropic refuses a thinking
 * block whose signature it did not make (400 "invalid signature"), and Google a thought signature
 * it did not make. A conversation that moves between back ends (a fallback target, an alias with
 * targets of two vendors) hands each one only its own; a client of either format gets another
 * vendor's signature tagged with its maker (`sy1.sig.<type>.`), as a Responses client does.
 */
describe('thinking signatures across back ends of different types (official SDKs, fake Anthropic and Gemini upstreams)', () => {
  const claudeUpstream = new FakeAnthropic();
  const geminiUpstream = new FakeGemini();
  let gw: RunningGateway;
  let claude: Anthropic;
  let google: GoogleGenAI;

  before(async () => {
    await claudeUpstream.start();
    await geminiUpstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
plugins:
  - request-log
  - auth
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
  - gemini
providers:
  - id: an
    type: anthropic
    baseUrl: ${claudeUpstream.url}
    apiKey: ${claudeUpstream.apiKey}
    models: [claude-fake-1]
  - id: ge
    type: gemini
    baseUrl: ${geminiUpstream.url}
    apiKey: ${geminiUpstream.apiKey}
    models: [gemini-fake-1, gemini-3-fake]
models:
  - name: mix
    targets:
      - { provider: an, model: claude-fake-1, priority: 0 }
      - { provider: ge, model: gemini-fake-1, priority: 1 }
`);
    claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    google = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
  });

  after(async () => {
    await gw?.stop();
    await claudeUpstream.stop();
    await geminiUpstream.stop();
  });

  beforeEach(() => {
    claudeUpstream.reset();
    geminiUpstream.reset();
  });

  it("a Claude-style client whose answer came from the Gemini fallback: Anthropic is not handed Gemini's signature next turn, and thinking is off for that turn", async () => {
    let overloaded = true;
    claudeUpstream.script((body) => {
      if (overloaded) {
        overloaded = false;
        return { status: 529, json: anthropicError('overloaded_error', 'Overloaded') };
      }
      return { json: message([{ type: 'text', text: 'done' }], { model: body.model }) };
    });
    geminiUpstream.script(() => ({
      json: answer([{ text: 'Let me think.', thought: true }, { functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'R1NJR18x' }]),
    }));
    const thinking = { type: 'enabled' as const, budget_tokens: 2000 };
    const first = await claude.messages.create({ model: 'mix', max_tokens: 4000, thinking, tools: [weather], messages: [{ role: 'user', content: 'weather?' }] });
    expect(geminiUpstream.received).to.have.length(1);
    expect(first.content[0]).to.deep.equal({ type: 'thinking', thinking: 'Let me think.', signature: 'sy1.sig.gemini.R1NJR18x' });
    const use = first.content.find((b) => b.type === 'tool_use') as Anthropic.ToolUseBlock;

    const response = await claude.messages
      .create({
        model: 'mix',
        max_tokens: 4000,
        thinking,
        tools: [weather],
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: first.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'rain' }] },
        ],
      })
      .withResponse();
    expect(response.data.content).to.deep.equal([{ type: 'text', text: 'done' }]);
    const sent = claudeUpstream.last().body!;
    // The turn Gemini signed goes up without that thinking; thinking is off, as Anthropic requires
    // of a tool loop whose last call has no thinking before it.
    expect(sent.messages[1]).to.deep.equal({ role: 'assistant', content: [{ type: 'tool_use', id: use.id, name: 'get_weather', input: { city: 'Paris' } }] });
    expect(sent).to.not.have.property('thinking');
    expect(response.response.headers.get('x-switchyard-losses')?.split(',')).to.include.members(['thinking.other_back_end', 'thinking.tool_turn_without_thinking']);
  });

  it("a Claude-style client's own Anthropic signature is not handed to Gemini; a Gemini signature it was given goes back to Gemini as Google made it", async () => {
    geminiUpstream.script(() => ({ json: answer([{ text: 'ok' }]) }));
    const history = (signature: string): Anthropic.MessageParam[] => [
      { role: 'user', content: 'weather?' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Let me think.', signature },
          { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'rain' }] },
    ];
    const callPart = () => (geminiUpstream.last().body!.contents as Json[])[1].parts.find((p: Json) => p.functionCall) as Json;

    const anthropics = await claude.messages.create({ model: 'gemini-fake-1', max_tokens: 100, tools: [weather], messages: history('ErUBCkgIAhABGAIiQAnthropicSig==') }).withResponse();
    expect(callPart()).to.not.have.property('thoughtSignature');
    expect(anthropics.response.headers.get('x-switchyard-losses')?.split(',')).to.include('reasoning_signature.other_back_end');

    await claude.messages.create({ model: 'gemini-fake-1', max_tokens: 100, tools: [weather], messages: history('sy1.sig.gemini.R1NJR18x') });
    expect(callPart().thoughtSignature).to.equal('R1NJR18x');
  });

  it("a Gemini-style client behind Claude gets Anthropic's signature tagged; handed back, Anthropic gets it as it made it, and Gemini does not get it at all", async () => {
    claudeUpstream.script((body) =>
      body.messages.length === 1
        ? { json: message([{ type: 'thinking', thinking: 'Hmm.', signature: 'SIG_AN_1' }, { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } }]) }
        : { json: message([{ type: 'text', text: 'rainy' }]) },
    );
    const tools = [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: weather.input_schema }] }];
    const config = { tools, thinkingConfig: { includeThoughts: true } };
    const first = await google.models.generateContent({ model: 'claude-fake-1', contents: 'weather?', config });
    const parts = first.candidates![0]!.content!.parts!;
    const call = parts.find((p) => p.functionCall)!;
    // Tagged, and in base64: a thoughtSignature is bytes in Google's API, which typed SDKs decode.
    expect(call.thoughtSignature).to.equal(b64('sy1.sig.anthropic.SIG_AN_1'));

    const contents: Content[] = [
      { role: 'user', parts: [{ text: 'weather?' }] },
      first.candidates![0]!.content!,
      { role: 'user', parts: [{ functionResponse: { id: call.functionCall!.id, name: 'get_weather', response: { output: 'rain' } } }] },
    ];
    await google.models.generateContent({ model: 'claude-fake-1', contents, config });
    const assistant = (claudeUpstream.last().body!.messages as Json[])[1];
    expect(assistant.content[0]).to.deep.equal({ type: 'thinking', thinking: 'Hmm.', signature: 'SIG_AN_1' });

    // The same conversation to a Gemini back end (its own format: the body goes up as sent, but
    // for the signature Google could not verify; a Gemini 3 model's call gets Google's sentinel).
    geminiUpstream.script(() => ({ json: answer([{ text: 'rainy' }]) }));
    const response = await fetch(`${gw.url}/v1beta/models/gemini-3-fake:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': CLIENT_KEY },
      body: JSON.stringify({ contents }),
    });
    expect(response.status).to.equal(200);
    const sentCall = (geminiUpstream.last().body!.contents as Json[])[1].parts.find((p: Json) => p.functionCall) as Json;
    expect(sentCall.thoughtSignature).to.equal('skip_thought_signature_validator');
    expect(response.headers.get('x-switchyard-losses')?.split(',')).to.include('thoughtSignature.other_back_end');
    // A signature Google made, tagged by an earlier turn through the gateway, goes up untagged.
    const own = structuredClone(contents);
    own[1]!.parts!.find((p) => p.functionCall)!.thoughtSignature = b64('sy1.sig.gemini.R1NJR18x');
    await fetch(`${gw.url}/v1beta/models/gemini-fake-1:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': CLIENT_KEY },
      body: JSON.stringify({ contents: own }),
    }).then((r) => r.text());
    expect(((geminiUpstream.last().body!.contents as Json[])[1].parts as Json[]).find((p) => p.functionCall)!.thoughtSignature).to.equal('R1NJR18x');
  });

  it('a Claude back end signing each block of interleaved thinking: a Gemini-style client hands them back, streamed or not, and Anthropic is not given one signature for the two texts', async () => {
    const interleaved = message([
      { type: 'thinking', thinking: 'first thought', signature: 'SIG_A' },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'thinking', thinking: 'second thought', signature: 'SIG_B' },
      { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
    ]);
    claudeUpstream.script((body) => {
      if (body.messages.length > 1) return { json: message([{ type: 'text', text: 'both rainy' }]) };
      return body.stream ? { events: eventsOf(interleaved) } : { json: interleaved };
    });
    const tools = [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: weather.input_schema }] }];
    const config = { tools, thinkingConfig: { includeThoughts: true } };
    const handBack = async (turn: Content) => {
      const calls = turn.parts!.filter((p) => p.functionCall);
      expect(calls).to.have.length(2);
      const second = await google.models.generateContent({
        model: 'claude-fake-1',
        contents: [
          { role: 'user', parts: [{ text: 'weather?' }] },
          turn,
          { role: 'user', parts: calls.map((c) => ({ functionResponse: { id: c.functionCall!.id, name: 'get_weather', response: { output: 'rain' } } })) },
        ],
        config: { tools },
      });
      expect(second.text).to.equal('both rainy');
      const blocks = (claudeUpstream.last().body!.messages as Json[])[1].content as Json[];
      expect(blocks.filter((b) => b.type === 'thinking' && b.signature)).to.deep.equal([]);
    };

    const json = await google.models.generateContent({ model: 'claude-fake-1', contents: 'weather?', config });
    // One answer holds one signature: the two blocks' texts, joined, get none.
    expect(json.candidates![0]!.content!.parts!.some((p) => p.thoughtSignature)).to.equal(false);
    await handBack(json.candidates![0]!.content!);

    // Streamed, each call comes with the signature of the thinking before it.
    const parts: NonNullable<Content['parts']> = [];
    for await (const chunk of await google.models.generateContentStream({ model: 'claude-fake-1', contents: 'weather?', config })) parts.push(...(chunk.candidates?.[0]?.content?.parts ?? []));
    expect(parts.filter((p) => p.functionCall).map((p) => p.thoughtSignature)).to.deep.equal([b64('sy1.sig.anthropic.SIG_A'), b64('sy1.sig.anthropic.SIG_B')]);
    await handBack({ role: 'model', parts });
  });

  it("a chat completions client gets each back end's signature tagged with its type: handed to Claude after a Gemini turn (a fallback, a model switch), Gemini's is left out, named; streamed too", async () => {
    const openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const tool: OpenAI.Chat.ChatCompletionTool = { type: 'function', function: { name: 'get_weather', parameters: weather.input_schema as Record<string, unknown> } };
    geminiUpstream.script(() => ({ json: answer([{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: 'R1NJR19j' }]) }));
    const first = await openai.chat.completions.create({ model: 'gemini-fake-1', tools: [tool], messages: [{ role: 'user', content: 'weather?' }] });
    const turn = first.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning_signature?: string };
    expect(turn.reasoning_signature).to.equal('sy1.sig.gemini.R1NJR19j');
    claudeUpstream.script(() => ({ json: message([{ type: 'text', text: 'rainy' }]) }));
    const next = await openai.chat.completions
      .create({
        model: 'claude-fake-1',
        tools: [tool],
        messages: [
          { role: 'user', content: 'weather?' },
          turn as OpenAI.Chat.ChatCompletionAssistantMessageParam,
          { role: 'tool', tool_call_id: turn.tool_calls![0]!.id, content: 'rain' },
        ],
      })
      .withResponse();
    // Before, Anthropic was handed Gemini's signature in a thinking block, and refused the call (400).
    expect(JSON.stringify(claudeUpstream.last().body!.messages)).to.not.include('R1NJR19j');
    expect(next.response.headers.get('x-switchyard-losses')?.split(',')).to.include('reasoning_signature.other_back_end');

    // A streamed answer's signature is tagged the same way.
    claudeUpstream.script(() => ({ events: eventsOf(message([{ type: 'thinking', thinking: 'Hmm.', signature: 'SIG_STREAM' }, { type: 'text', text: 'ok' }])) }));
    const signatures: string[] = [];
    for await (const chunk of await openai.chat.completions.create({ model: 'claude-fake-1', stream: true, reasoning_effort: 'low', messages: [{ role: 'user', content: 'think' }] })) {
      const delta = chunk.choices[0]?.delta as { reasoning_signature?: string } | undefined;
      if (delta?.reasoning_signature) signatures.push(delta.reasoning_signature);
    }
    expect(signatures).to.deep.equal(['sy1.sig.anthropic.SIG_STREAM']);
  });
  it('a Responses client streaming from Gemini, whose signature comes with the answer or after it: one message, the signature in the final response, handed back in one model turn', async () => {
    const openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const base = { modelVersion: 'gemini-3-fake', responseId: 'r1' };
    const event = (parts: Json[], finishReason?: string) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...(finishReason ? { finishReason } : {}) }], ...base });
    const usage = { usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 4, totalTokenCount: 9 } };
    for (const [label, events, expected] of [
      // Gemini 3 puts the signature on the last part of the answer: after the thoughts, on the answer's own text.
      // The message is not cut in two: the signature has a reasoning item of its own once the message is done.
      ['on the last text', [event([{ text: 'Adding up.', thought: true }]), event([{ text: 'The answer' }]), event([{ text: ' is 4.', thoughtSignature: b64('SIG_ON_TEXT') }]), { ...event([{ text: '' }], 'STOP'), ...usage }], ['reasoning', 'message', 'reasoning']],
      // Or in an empty part beside the finish, with no thoughts shown: the same.
      ['in an empty last part', [event([{ text: 'The answer' }]), event([{ text: ' is 4.' }]), { ...event([{ text: '', thoughtSignature: b64('SIG_ON_TEXT') }], 'STOP'), ...usage }], ['message', 'reasoning']],
    ] as Array<[string, Json[], string[]]>) {
      geminiUpstream.reset();
      geminiUpstream.script(() => ({ events }));
      const stream = openai.responses.stream({ model: 'gemini-3-fake', input: 'What is 2+2?' });
      const added: string[] = [];
      const signed: string[] = [];
      for await (const e of stream) {
        if (e.type === 'response.output_item.added') added.push(e.item.type);
        // Clients that keep the items of their done events (Codex) get the signature there too.
        if (e.type === 'response.output_item.done' && e.item.type === 'reasoning' && e.item.encrypted_content) signed.push(e.item.encrypted_content);
      }
      const final = await stream.finalResponse();
      expect(added, label).to.deep.equal(expected);
      expect(final.output.map((item) => item.type), label).to.deep.equal(expected);
      expect(final.output_text, label).to.equal('The answer is 4.');
      expect(signed, label).to.deep.equal([`sy1.sig.gemini.${b64('SIG_ON_TEXT')}`]);
      const reasoning = final.output.filter((item) => item.type === 'reasoning').at(-1) as OpenAI.Responses.ResponseReasoningItem;
      expect(reasoning.encrypted_content, label).to.equal(`sy1.sig.gemini.${b64('SIG_ON_TEXT')}`);

      geminiUpstream.script(() => ({ json: answer([{ text: 'Yes.' }]) }));
      const next = await openai.responses.create({ model: 'gemini-3-fake', previous_response_id: final.id, input: 'Sure?' }).withResponse();
      const contents = geminiUpstream.last().body!.contents as Json[];
      // Before: the message cut in two around a second reasoning item gave Gemini two model turns in
      // a row; a signature after the message was dropped (input.reasoning).
      expect(contents.map((c) => c.role), label).to.deep.equal(['user', 'model', 'user']);
      expect(JSON.stringify(contents[1]), label).to.include(b64('SIG_ON_TEXT'));
      expect(contents[1]!.parts.filter((p: Json) => !p.thought).map((p: Json) => p.text).join(''), label).to.equal('The answer is 4.');
      expect(next.response.headers.get('x-switchyard-losses') ?? '', label).to.not.include('input.reasoning');
    }
  });
  it('a Claude-style client streaming from Gemini, whose signature comes on the answer\'s last text: handed back, Gemini gets it in one model turn', async () => {
    const base = { modelVersion: 'gemini-3-fake', responseId: 'r2' };
    const event = (parts: Json[], finishReason?: string) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...(finishReason ? { finishReason } : {}) }], ...base });
    const usage = { usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 4, totalTokenCount: 9 } };
    geminiUpstream.script(() => ({
      events: [event([{ text: 'Adding up.', thought: true }]), event([{ text: 'The answer' }]), event([{ text: ' is 4.', thoughtSignature: b64('SIG_CLAUDE') }]), { ...event([{ text: '' }], 'STOP'), ...usage }],
    }));
    const final = await claude.messages.stream({ model: 'gemini-3-fake', max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: 'user', content: 'What is 2+2?' }] }).finalMessage();
    expect(final.content.filter((b) => b.type === 'text').map((b) => (b as Anthropic.TextBlock).text)).to.deep.equal(['The answer is 4.']);
    geminiUpstream.script(() => ({ json: answer([{ text: 'Yes.' }]) }));
    const next = await claude.messages
      .create({ model: 'gemini-3-fake', max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: 'user', content: 'What is 2+2?' }, { role: 'assistant', content: final.content as Anthropic.ContentBlockParam[] }, { role: 'user', content: 'Sure?' }] })
      .withResponse();
    const contents = geminiUpstream.last().body!.contents as Json[];
    expect(contents.map((c) => c.role)).to.deep.equal(['user', 'model', 'user']);
    expect(JSON.stringify(contents[1])).to.include(b64('SIG_CLAUDE'));
    expect(next.response.headers.get('x-switchyard-losses') ?? '').to.not.match(/signature|unsigned|other_back_end/);
    // One text block (before, it was cut in two around a thinking block holding the signature);
    // the signature in a thinking block of its own after it.
    expect(final.content.map((b) => b.type)).to.deep.equal(['thinking', 'text', 'thinking']);
    expect((final.content[2] as Anthropic.ThinkingBlock).signature).to.equal(`sy1.sig.gemini.${b64('SIG_CLAUDE')}`);
  });
});
