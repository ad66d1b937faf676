import { expect } from 'chai';
import type { ChatResponse } from '../../../core/index.js';
import { anthropicErrorType, errorBody } from './errors.js';
import { fromMessage, messageUsage, stopReasonOf, toMessage } from './response.js';
import { toCanonicalRequest } from './request.js';
import { ERRORS, type ErrorCode } from '../../../core/errors.js';

function chat(message: ChatResponse['choices'][0]['message'], finish: ChatResponse['choices'][0]['finish_reason'], extra: Record<string, unknown> = {}): ChatResponse {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-x',
    choices: [{ index: 0, message, finish_reason: finish, ...extra }],
    usage: { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25 },
  };
}

describe('anthropic-messages response translation', () => {
  it('renders text as a message with an msg_ id, end_turn and usage', () => {
    const { value, losses } = toMessage(chat({ role: 'assistant', content: 'Hello' }, 'stop'), []);
    expect(losses).to.deep.equal([]);
    expect(value.id).to.match(/^msg_[A-Za-z0-9]{24}$/);
    expect(value).to.deep.include({
      type: 'message',
      role: 'assistant',
      model: 'gpt-x',
      content: [{ type: 'text', text: 'Hello' }],
      stop_reason: 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 20, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    });
  });

  it('renders reasoning as a thinking block first, and tool calls as tool_use blocks', () => {
    const { value } = toMessage(
      chat(
        {
          role: 'assistant',
          content: null,
          reasoning_content: 'hmm',
          reasoning_signature: 'sig',
          tool_calls: [
            { id: 'call_1', type: 'function', function: { name: 'a', arguments: '{"x":1}' } },
            { id: 'call_2', type: 'function', function: { name: 'b', arguments: '{}' } },
          ],
        },
        'tool_calls',
      ),
      [],
    );
    expect(value.content).to.deep.equal([
      { type: 'thinking', thinking: 'hmm', signature: 'sig' },
      { type: 'tool_use', id: 'call_1', name: 'a', input: { x: 1 } },
      { type: 'tool_use', id: 'call_2', name: 'b', input: {} },
    ]);
    expect(value.stop_reason).to.equal('tool_use');
  });

  it('maps every finish reason, and names the stop sequence only when the back end does', () => {
    expect(stopReasonOf('length', undefined, [], false).stop_reason).to.equal('max_tokens');
    expect(stopReasonOf('tool_calls', undefined, [], true).stop_reason).to.equal('tool_use');
    expect(stopReasonOf('content_filter', undefined, [], false).stop_reason).to.equal('refusal');
    expect(stopReasonOf('stop', undefined, ['END'], false)).to.deep.equal({ stop_reason: 'end_turn', stop_sequence: null });
    expect(stopReasonOf('stop', { stop_sequence: 'END' }, ['END'], false)).to.deep.equal({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    // vLLM names the matched stop string in `stop_reason`; a token id (number) is not one.
    expect(stopReasonOf('stop', { stop_reason: 'END' }, ['END'], false).stop_reason).to.equal('stop_sequence');
    expect(stopReasonOf('stop', { stop_reason: 50256 }, ['END'], false).stop_reason).to.equal('end_turn');
    expect(stopReasonOf('stop', { stop_sequence: 'OTHER' }, ['END'], false).stop_reason).to.equal('end_turn');
    expect(stopReasonOf('stop', undefined, [], true).stop_reason).to.equal('tool_use');
  });

  it('takes cached tokens out of input_tokens and reports them as cache reads', () => {
    expect(messageUsage({ prompt_tokens: 100, completion_tokens: 7, total_tokens: 107, prompt_tokens_details: { cached_tokens: 60 } })).to.deep.equal({
      input_tokens: 40,
      output_tokens: 7,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 60,
    });
    expect(
      messageUsage({
        prompt_tokens: 100,
        completion_tokens: 7,
        total_tokens: 107,
        prompt_tokens_details: { cached_tokens: 10, cache_creation_tokens: 30 },
        completion_tokens_details: { reasoning_tokens: 4 },
      }),
    ).to.deep.equal({ input_tokens: 60, output_tokens: 7, cache_creation_input_tokens: 30, cache_read_input_tokens: 10, output_tokens_details: { thinking_tokens: 4 } });
  });

  it("gives a call whose id Anthropic's pattern refuses an id it takes (a Claude client sends it back on its next turn)", () => {
    const { value } = toMessage(chat({ role: 'assistant', content: null, tool_calls: [{ id: 'functions.get_weather:0', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] }, 'tool_calls'), []);
    const id = (value.content as Array<Record<string, unknown>>)[0]!.id as string;
    expect(id).to.match(/^sytc_[a-zA-Z0-9_-]+$/);
    // The client's next turn gives the back end its own id again.
    const next = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id, name: 'get_weather', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'sunny' }] },
      ],
    });
    expect(next.value.messages[1]!.tool_calls![0]!.id).to.equal('functions.get_weather:0');
    expect(next.value.messages[2]).to.include({ role: 'tool', tool_call_id: 'functions.get_weather:0' });
  });

  it('records tool arguments that are not a JSON object as a loss', () => {
    const { value, losses } = toMessage(chat({ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"cut' } }] }, 'tool_calls'), []);
    expect(losses).to.deep.equal(['tool_use.input_not_json_object']);
    expect((value.content as Array<Record<string, unknown>>)[0]!.input).to.deep.equal({});
  });

  it('round trip message -> canonical -> message', () => {
    const messages = [
      {
        id: 'msg_x',
        type: 'message',
        role: 'assistant',
        model: 'claude-x',
        content: [
          { type: 'thinking', thinking: 'first this', signature: 'EqQB' },
          { type: 'text', text: 'Calling.' },
          { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: [1, 2] } },
        ],
        stop_reason: 'tool_use',
        stop_sequence: null,
        usage: { input_tokens: 12, output_tokens: 30, cache_creation_input_tokens: 5, cache_read_input_tokens: 100 },
      },
      {
        id: 'msg_y',
        type: 'message',
        role: 'assistant',
        model: 'claude-x',
        content: [{ type: 'text', text: 'Done' }],
        stop_reason: 'stop_sequence',
        stop_sequence: '###',
        usage: { input_tokens: 3, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
      {
        id: 'msg_z',
        type: 'message',
        role: 'assistant',
        model: 'claude-x',
        content: [{ type: 'text', text: 'Long' }],
        stop_reason: 'max_tokens',
        stop_sequence: null,
        usage: { input_tokens: 3, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
    ];
    for (const message of messages) {
      const canonical = fromMessage(message);
      expect(canonical.losses).to.deep.equal([]);
      const back = toMessage(canonical.value, ['###']);
      expect(back.losses).to.deep.equal([]);
      expect({ ...back.value, id: message.id }).to.deep.equal(message);
    }
  });

  it("renders every error of the table in Anthropic's shape and type names", () => {
    const expected: Partial<Record<ErrorCode, string>> = {
      invalid_request: 'invalid_request_error',
      missing_api_key: 'authentication_error',
      invalid_api_key: 'authentication_error',
      model_not_allowed: 'permission_error',
      model_not_found: 'not_found_error',
      not_found: 'not_found_error',
      body_too_large: 'request_too_large',
      rate_limit_exceeded: 'rate_limit_error',
      insufficient_quota: 'rate_limit_error',
      upstream_error: 'api_error',
      upstream_timeout: 'timeout_error',
      no_upstream_available: 'overloaded_error',
      internal_error: 'api_error',
    };
    const known = new Set(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error', 'timeout_error']);
    for (const [code, spec] of Object.entries(ERRORS) as Array<[ErrorCode, (typeof ERRORS)[ErrorCode]]>) {
      const type = anthropicErrorType(spec);
      expect(known.has(type), `${code} -> ${type}`).to.equal(true);
      if (expected[code]) expect(type, code).to.equal(expected[code]);
    }
    expect(errorBody({ status: 401, code: 'invalid_api_key', type: 'authentication_error', message: 'nope', param: null })).to.deep.equal({
      type: 'error',
      error: { type: 'authentication_error', message: 'nope' },
    });
  });
});
