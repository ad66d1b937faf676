import { expect } from 'chai';
import type { ChatRequest } from '../../../core/index.js';
import { endpointOf, type AnthropicProviderConfig } from './api.js';
import { fromMessagesResponse, isMessage, toMessagesRequest } from './mapping.js';

type Json = Record<string, any>;

const options = { model: 'claude-x', stream: false, defaultMaxTokens: 4096 };

function req(extra: Partial<ChatRequest> = {}): ChatRequest {
  return { model: 'public-name', messages: [{ role: 'user', content: 'hi' }], ...extra };
}

describe('anthropic provider: endpoint', () => {
  const base: AnthropicProviderConfig = { id: 'a', type: 'anthropic', models: [], baseUrl: 'https://api.anthropic.com', version: '2023-06-01', defaultMaxTokens: 4096 };

  it('x-api-key and anthropic-version, never authorization (configured headers cannot add it or override the key)', () => {
    const endpoint = endpointOf({ ...base, apiKey: 'sk-ant-k', headers: { Authorization: 'Bearer x', 'X-Api-Key': 'other', 'anthropic-beta': 'b1' } });
    expect(endpoint.headers).to.deep.include({ 'x-api-key': 'sk-ant-k', 'anthropic-version': '2023-06-01', 'anthropic-beta': 'b1' });
    expect(endpoint.headers).to.not.have.property('authorization');
    expect(endpoint.origin).to.equal('https://api.anthropic.com');
    expect(endpoint.messagesPath).to.equal('/v1/messages');
  });

  it('a base URL with /v1 or a path prefix', () => {
    expect(endpointOf({ ...base, baseUrl: 'https://api.anthropic.com/v1/' }).messagesPath).to.equal('/v1/messages');
    expect(endpointOf({ ...base, baseUrl: 'http://proxy.local:8080/anthropic' }).messagesPath).to.equal('/anthropic/v1/messages');
  });
});

describe('anthropic provider: canonical request -> messages body', () => {
  it('the back end model, system on top, a default max_tokens, stop as stop_sequences, no stream field unless streaming', () => {
    const { value, losses } = toMessagesRequest(
      req({ messages: [{ role: 'system', content: 'S' }, { role: 'developer', content: 'D' }, { role: 'user', content: 'hi' }], stop: 'END', stream: true }),
      options,
    );
    expect(value).to.deep.equal({
      model: 'claude-x',
      system: [{ type: 'text', text: 'S' }, { type: 'text', text: 'D' }],
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4096,
      stop_sequences: ['END'],
    });
    expect(losses).to.deep.equal([]);
    expect(toMessagesRequest(req(), { ...options, stream: true }).value.stream).to.equal(true);
  });

  it("the end user: user, or else OpenAI's safety_identifier, as metadata.user_id (a safety_identifier beside a user is named lost)", () => {
    expect(toMessagesRequest(req({ user: 'u-1' }), options)).to.deep.include({ losses: [] });
    expect(toMessagesRequest(req({ user: 'u-1' }), options).value.metadata).to.deep.equal({ user_id: 'u-1' });
    const safety = toMessagesRequest(req({ safety_identifier: 'hash-9' } as Partial<ChatRequest>), options);
    expect(safety.value.metadata).to.deep.equal({ user_id: 'hash-9' });
    expect(safety.losses).to.deep.equal([]);
    const both = toMessagesRequest(req({ user: 'u-1', safety_identifier: 'hash-9' } as Partial<ChatRequest>), options);
    expect(both.value.metadata).to.deep.equal({ user_id: 'u-1' });
    expect(both.losses).to.deep.equal(['safety_identifier']);
  });

  it("the request's max_completion_tokens or max_tokens wins over the default", () => {
    expect(toMessagesRequest(req({ max_tokens: 12 }), options).value.max_tokens).to.equal(12);
    expect(toMessagesRequest(req({ max_tokens: 12, max_completion_tokens: 34 }), options).value.max_tokens).to.equal(34);
  });

  it('default-valued OpenAI fields are no loss; others are named', () => {
    expect(toMessagesRequest(req({ n: 1, presence_penalty: 0 }), options).losses).to.deep.equal([]);
    expect(toMessagesRequest(req({ n: 2, seed: 7, response_format: { type: 'json_object' } }), options).losses).to.have.members(['n', 'seed', 'response_format.json_object']);
  });

  it('reasoning_effort: a budget below max_tokens; without max_tokens the default is added on top of the budget', () => {
    const open = toMessagesRequest(req({ reasoning_effort: 'high' }), options).value;
    expect(open.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 24576 });
    expect(open.max_tokens).to.equal(24576 + 4096);
    // A budget below the default leaves the answer the whole default too.
    const low = toMessagesRequest(req({ reasoning_effort: 'low' }), options).value;
    expect(low.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2048 });
    expect(low.max_tokens).to.equal(2048 + 4096);
    const capped = toMessagesRequest(req({ reasoning_effort: 'high', max_tokens: 5000 }), options);
    expect(capped.value.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 4999 });
    expect(capped.value.max_tokens).to.equal(5000);
    expect(capped.losses).to.include('reasoning_effort.budget_capped_by_max_tokens');
    const small = toMessagesRequest(req({ reasoning_effort: 'low', max_tokens: 1000 }), options);
    expect(small.value).to.not.have.property('thinking');
    expect(small.losses).to.include('reasoning_effort.max_tokens_too_small');
    const fits = toMessagesRequest(req({ reasoning_effort: 'low', max_tokens: 3000 }), options);
    expect(fits.value.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2048 });
    expect(fits.losses).to.deep.equal([]);
  });

  it('thinking leaves out temperature (unless 1) and top_p below 0.95, and gives way to a forced tool choice', () => {
    const sampled = toMessagesRequest(req({ reasoning_effort: 'low', temperature: 0.3, top_p: 0.5 }), options);
    expect(sampled.value).to.not.have.any.keys('temperature', 'top_p');
    expect(sampled.losses).to.include.members(['temperature.with_thinking', 'top_p.with_thinking']);
    const one = toMessagesRequest(req({ reasoning_effort: 'low', temperature: 1, top_p: 0.97 }), options);
    expect(one.value).to.include({ temperature: 1 }).and.not.have.property('top_p');
    const noThinking = toMessagesRequest(req({ temperature: 0.3 }), options);
    expect(noThinking.value.temperature).to.equal(0.3);
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }];
    const forced = toMessagesRequest(req({ reasoning_effort: 'low', tools, tool_choice: 'required', temperature: 0.3 }), options);
    expect(forced.value).to.not.have.property('thinking');
    expect(forced.value.tool_choice).to.deep.equal({ type: 'any' });
    expect(forced.value.temperature).to.equal(0.3);
    expect(forced.losses).to.include('reasoning_effort.with_forced_tool_choice');
    const auto = toMessagesRequest(req({ reasoning_effort: 'low', tools, tool_choice: 'auto' }), options);
    expect(auto.value.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2048 });
    // The next turn of a tool loop whose assistant turn came back without its thinking (OpenAI clients drop it).
    const loop = toMessagesRequest(
      req({
        reasoning_effort: 'low',
        tools,
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
      }),
      options,
    );
    expect(loop.value).to.not.have.property('thinking');
    expect(loop.losses).to.include('reasoning_effort.tool_turn_without_thinking');
    // With its signed thinking handed back, the loop keeps thinking.
    const signed = toMessagesRequest(
      req({
        reasoning_effort: 'low',
        tools,
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: null, reasoning_content: 'look it up', reasoning_signature: 'sig-1', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        ],
      }),
      options,
    );
    expect(signed.value.thinking).to.deep.equal({ type: 'enabled', budget_tokens: 2048 });
    // Without thinking, temperature and top_p together: current Claude models take only one.
    const both = toMessagesRequest(req({ temperature: 0.5, top_p: 0.9 }), options);
    expect(both.value).to.include({ temperature: 0.5 }).and.not.have.property('top_p');
    expect(both.losses).to.include('top_p.with_temperature');
    // A top_p of 1 keeps every token: leaving it out loses nothing.
    const whole = toMessagesRequest(req({ temperature: 1, top_p: 1 }), options);
    expect(whole.value).to.include({ temperature: 1 }).and.not.have.property('top_p');
    expect(whole.losses).to.not.include('top_p.with_temperature');
  });

  it('signed reasoning goes back as a thinking block; unsigned reasoning is left out (a named loss), and an emptied turn dropped', () => {
    const { value, losses } = toMessagesRequest(
      req({
        messages: [
          { role: 'user', content: 'q1' },
          { role: 'assistant', content: 'a1', reasoning_content: 'r1', reasoning_signature: 'sig1' },
          { role: 'user', content: 'q2' },
          { role: 'assistant', content: 'a2', reasoning_content: 'r2' },
          { role: 'user', content: 'q3' },
          { role: 'assistant', content: null, reasoning_content: 'r3' },
          { role: 'user', content: 'q4' },
        ],
      }),
      options,
    );
    expect(value.messages).to.deep.equal([
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'r1', signature: 'sig1' }, { type: 'text', text: 'a1' }] },
      { role: 'user', content: 'q2' },
      { role: 'assistant', content: [{ type: 'text', text: 'a2' }] },
      { role: 'user', content: 'q3' },
      { role: 'user', content: 'q4' },
    ]);
    expect(losses).to.deep.equal(['reasoning_content.unsigned']);
  });

  it('an empty assistant turn goes (but a final one stays); a tool choice without tools goes', () => {
    const { value, losses } = toMessagesRequest(
      req({
        tool_choice: 'none',
        messages: [
          { role: 'user', content: 'a' },
          { role: 'assistant', content: '' },
          { role: 'user', content: 'b' },
          { role: 'assistant', content: '' },
        ],
      }),
      options,
    );
    expect(value.messages).to.deep.equal([
      { role: 'user', content: 'a' },
      { role: 'user', content: 'b' },
      { role: 'assistant', content: '' },
    ]);
    expect(value).to.not.have.property('tool_choice');
    expect(losses).to.deep.equal([]);
    const forced = toMessagesRequest(req({ tool_choice: 'required' }), options);
    expect(forced.value).to.not.have.property('tool_choice');
    expect(forced.losses).to.deep.equal(['tool_choice.without_tools']);
  });

  it('tools, tool choice, tool calls and tool results', () => {
    const { value } = toMessagesRequest(
      req({
        tools: [{ type: 'function', function: { name: 'f', description: 'F', parameters: { type: 'object', properties: {} } } }],
        tool_choice: { type: 'function', function: { name: 'f' } },
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: 'calling', tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
          { role: 'tool', tool_call_id: 't1', content: 'done' },
          { role: 'user', content: 'and?' },
        ],
      }),
      options,
    );
    expect(value.tools).to.deep.equal([{ name: 'f', description: 'F', input_schema: { type: 'object', properties: {} } }]);
    expect(value.tool_choice).to.deep.equal({ type: 'tool', name: 'f' });
    expect(value.messages).to.deep.equal([
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'text', text: 'calling' }, { type: 'tool_use', id: 't1', name: 'f', input: { a: 1 } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'done' }, { type: 'text', text: 'and?' }] },
    ]);
  });
});

describe('anthropic provider: message -> canonical answer', () => {
  const message = (content: Json[], extra: Json = {}): Json => ({
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'claude-x',
    content,
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 4, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 },
    ...extra,
  });

  it('text, reasoning with its signature, tool calls; usage with cache tokens in prompt_tokens', () => {
    const { value } = fromMessagesResponse(
      message(
        [
          { type: 'thinking', thinking: 'hmm', signature: 'S1' },
          { type: 'text', text: 'ok' },
          { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } },
        ],
        { stop_reason: 'tool_use' },
      ),
    );
    const choice = value.choices[0]!;
    expect(choice.message).to.deep.equal({
      role: 'assistant',
      content: 'ok',
      reasoning_content: 'hmm',
      reasoning_signature: 'S1',
      tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
    });
    expect(choice.finish_reason).to.equal('tool_calls');
    expect(value.usage).to.deep.equal({
      prompt_tokens: 130,
      completion_tokens: 4,
      total_tokens: 134,
      prompt_tokens_details: { cached_tokens: 100, cache_creation_tokens: 20 },
    });
    expect(value.model).to.equal('claude-x');
  });

  it('stop reasons: end_turn and stop_sequence -> stop (sequence carried), max_tokens -> length, refusal -> content_filter, unknown -> stop', () => {
    const finish = (extra: Json) => fromMessagesResponse(message([{ type: 'text', text: 'x' }], extra)).value.choices[0]!;
    expect(finish({ stop_reason: 'end_turn' }).finish_reason).to.equal('stop');
    const seq = finish({ stop_reason: 'stop_sequence', stop_sequence: '##' });
    expect(seq.finish_reason).to.equal('stop');
    expect(seq.stop_sequence).to.equal('##');
    expect(finish({ stop_reason: 'max_tokens' }).finish_reason).to.equal('length');
    expect(finish({ stop_reason: 'refusal' }).finish_reason).to.equal('content_filter');
    expect(finish({ stop_reason: 'something_new' }).finish_reason).to.equal('stop');
  });

  it('a thinking block without a signature gives no signature; redacted thinking is a named loss; no usage stays unknown', () => {
    const { value, losses } = fromMessagesResponse(message([{ type: 'thinking', thinking: 'x' }, { type: 'redacted_thinking', data: 'abc' }, { type: 'text', text: 'y' }], { usage: undefined }));
    expect(value.choices[0]!.message).to.not.have.property('reasoning_signature');
    expect(value.choices[0]!.message.reasoning_content).to.equal('x');
    expect(losses).to.include('content_block.redacted_thinking');
    expect(value).to.not.have.property('usage');
  });

  it('isMessage refuses what is not a message', () => {
    expect(isMessage(message([]))).to.equal(true);
    expect(isMessage({ type: 'error', error: {} })).to.equal(false);
    expect(isMessage({ type: 'message', content: 'text' })).to.equal(false);
    expect(isMessage({ type: 'message', content: [null] })).to.equal(false);
    expect(isMessage([])).to.equal(false);
  });
});
