import { expect } from 'chai';
import { GatewayError, type ChatChunk } from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { MessageStreamTranslator } from './stream.js';

type Json = Record<string, any>;
type Event = [string, Json];

const start: Event = [
  'message_start',
  {
    message: {
      id: 'msg_s1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 10, output_tokens: 1, cache_read_input_tokens: 30, cache_creation_input_tokens: 5 },
    },
  },
];
const stop = (reason: string, output = 9, sequence: string | null = null): Event[] => [
  ['message_delta', { delta: { stop_reason: reason, stop_sequence: sequence }, usage: { output_tokens: output } }],
  ['message_stop', {}],
];

function run(events: Event[], losses = new Losses()): { chunks: ChatChunk[]; translator: MessageStreamTranslator } {
  const translator = new MessageStreamTranslator(losses, ['sk-ant-secret-key-123']);
  const chunks: ChatChunk[] = [];
  for (const [name, data] of events) chunks.push(...translator.push({ type: name, ...data }, name));
  return { chunks, translator };
}

function deltas(chunks: ChatChunk[]): Json[] {
  return chunks.filter((c) => c.choices.length > 0).map((c) => c.choices[0]!.delta);
}

describe('anthropic provider: event stream -> canonical chunks', () => {
  it('text: a role chunk, the pieces, a finish chunk, then a usage chunk with choices: [] and cache tokens', () => {
    const { chunks, translator } = run([
      start,
      ['ping', {}],
      ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Hello' } }],
      ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: ' there' } }],
      ['content_block_stop', { index: 0 }],
      ...stop('end_turn'),
    ]);
    expect(translator.complete).to.equal(true);
    expect(chunks.every((c) => c.id === 'msg_s1' && c.model === 'claude-x' && c.object === 'chat.completion.chunk')).to.equal(true);
    expect(deltas(chunks)).to.deep.equal([{ role: 'assistant', content: '' }, { content: 'Hello' }, { content: ' there' }, {}]);
    const finish = chunks[chunks.length - 2]!;
    expect(finish.choices[0]!.finish_reason).to.equal('stop');
    const usage = chunks[chunks.length - 1]!;
    expect(usage.choices).to.deep.equal([]);
    expect(usage.usage).to.deep.equal({
      prompt_tokens: 45,
      completion_tokens: 9,
      total_tokens: 54,
      prompt_tokens_details: { cached_tokens: 30, cache_creation_tokens: 5 },
    });
    expect(chunks.slice(0, -1).every((c) => !('usage' in c))).to.equal(true);
  });

  it('parallel tool calls: numbered by block order, id and name first, then the arguments in pieces', () => {
    const { chunks } = run([
      start,
      ['content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_a', name: 'f', input: {} } }],
      ['content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '{"x":' } }],
      ['content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '1}' } }],
      ['content_block_stop', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'tool_use', id: 'toolu_b', name: 'g', input: {} } }],
      ['content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{}' } }],
      ['content_block_stop', { index: 1 }],
      ...stop('tool_use'),
    ]);
    expect(deltas(chunks).slice(1, -1)).to.deep.equal([
      { tool_calls: [{ index: 0, id: 'toolu_a', type: 'function', function: { name: 'f', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
      { tool_calls: [{ index: 1, id: 'toolu_b', type: 'function', function: { name: 'g', arguments: '' } }] },
      { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
    ]);
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).to.equal('tool_calls');
  });

  it('a tool call without arguments (input {}, an empty partial_json) gets "{}" at its block stop, as OpenAI gives it', () => {
    const { chunks } = run([
      start,
      ['content_block_start', { index: 0, content_block: { type: 'tool_use', id: 'toolu_e', name: 'now', input: {} } }],
      ['content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '' } }],
      ['content_block_stop', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'tool_use', id: 'toolu_f', name: 'later', input: {} } }],
      ['content_block_stop', { index: 1 }],
      ...stop('tool_use'),
    ]);
    expect(deltas(chunks).slice(1, -1)).to.deep.equal([
      { tool_calls: [{ index: 0, id: 'toolu_e', type: 'function', function: { name: 'now', arguments: '' } }] },
      { tool_calls: [{ index: 0, function: { arguments: '{}' } }] },
      { tool_calls: [{ index: 1, id: 'toolu_f', type: 'function', function: { name: 'later', arguments: '' } }] },
      { tool_calls: [{ index: 1, function: { arguments: '{}' } }] },
    ]);
  });

  it('thinking: reasoning pieces, then the signature, then the text', () => {
    const { chunks } = run([
      start,
      ['content_block_start', { index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } }],
      ['content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'Let me ' } }],
      ['content_block_delta', { index: 0, delta: { type: 'thinking_delta', thinking: 'think.' } }],
      ['content_block_delta', { index: 0, delta: { type: 'signature_delta', signature: 'EqQBsig' } }],
      ['content_block_stop', { index: 0 }],
      ['content_block_start', { index: 1, content_block: { type: 'text', text: '' } }],
      ['content_block_delta', { index: 1, delta: { type: 'text_delta', text: '42' } }],
      ['content_block_stop', { index: 1 }],
      ...stop('end_turn'),
    ]);
    expect(deltas(chunks).slice(1, -1)).to.deep.equal([
      { reasoning_content: 'Let me ' },
      { reasoning_content: 'think.' },
      { reasoning_signature: 'EqQBsig' },
      { content: '42' },
    ]);
  });

  it('stop reasons: stop_sequence carries its sequence, max_tokens is length', () => {
    const text: Event[] = [start, ['content_block_start', { index: 0, content_block: { type: 'text', text: 'a' } }]];
    const seq = run([...text, ...stop('stop_sequence', 2, '###')]).chunks;
    const finish = seq[seq.length - 2]!.choices[0]!;
    expect(finish.finish_reason).to.equal('stop');
    expect(finish.stop_sequence).to.equal('###');
    expect(deltas(seq)[1]).to.deep.equal({ content: 'a' });
    const cut = run([...text, ...stop('max_tokens')]).chunks;
    expect(cut[cut.length - 2]!.choices[0]!.finish_reason).to.equal('length');
  });

  it('usage in message_delta (newer API versions send input and cache figures there too) replaces message_start figures', () => {
    const { chunks } = run([
      start,
      ['message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3, input_tokens: 12, cache_read_input_tokens: 0 } }],
      ['message_stop', {}],
    ]);
    expect(chunks[chunks.length - 1]!.usage).to.deep.include({ prompt_tokens: 17, completion_tokens: 3 });
  });

  it('unknown events and blocks: skipped, unknown blocks named as losses', () => {
    const losses = new Losses();
    const { chunks } = run(
      [
        start,
        ['some_future_event', { x: 1 }],
        ['content_block_start', { index: 0, content_block: { type: 'redacted_thinking', data: 'zzz' } }],
        ['content_block_stop', { index: 0 }],
        ['content_block_start', { index: 1, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { index: 1, delta: { type: 'citations_delta', citation: {} } }],
        ...stop('end_turn'),
      ],
      losses,
    );
    expect(deltas(chunks)).to.have.length(2);
    expect(losses.names).to.deep.equal(['content_block.redacted_thinking', 'text.citations']);
  });

  it('an error event is an upstream_error with the scrubbed message (overloaded: upstream_overloaded)', () => {
    const translator = new MessageStreamTranslator(new Losses(), ['sk-ant-secret-key-123']);
    translator.push({ type: 'message_start', ...start[1] }, 'message_start');
    let error: unknown;
    try {
      translator.push({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded for sk-ant-secret-key-123' } }, 'error');
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(GatewayError);
    expect((error as GatewayError).code).to.equal('upstream_overloaded');
    expect((error as GatewayError).message).to.include('overloaded (Overloaded for');
    expect((error as GatewayError).message).to.not.include('sk-ant-secret');
  });

  it('malformed events throw upstream_error: content before message_start, a delta to an unknown block, arguments outside a tool block', () => {
    const bad = (events: Event[]) => {
      try {
        run(events);
      } catch (e) {
        return (e as GatewayError).code;
      }
      return 'no error';
    };
    expect(bad([['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }]])).to.equal('upstream_error');
    expect(bad([start, ['content_block_delta', { index: 3, delta: { type: 'text_delta', text: 'x' } }]])).to.equal('upstream_error');
    expect(
      bad([start, ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }], ['content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: '{' } }]]),
    ).to.equal('upstream_error');
    expect(bad([start, start])).to.equal('upstream_error');
    expect(() => new MessageStreamTranslator(new Losses()).push('text', 'message_start')).to.throw(GatewayError);
  });

  it('a stream without message_stop is not complete', () => {
    const { translator, chunks } = run([start, ['content_block_start', { index: 0, content_block: { type: 'text', text: 'partial' } }], ['message_delta', { delta: { stop_reason: 'end_turn' } }]]);
    expect(translator.complete).to.equal(false);
    expect(chunks.some((c) => c.choices[0]?.finish_reason)).to.equal(false);
  });
});
