import { expect } from 'chai';
import type { ChatChunk } from '../../../core/index.js';
import { MessageStreamTranslator } from '../../providers/anthropic/stream.js';
import { Losses } from './request.js';
import { messageEvents } from './stream.js';

type Json = Record<string, any>;
type Event = [string, Json];

/**
 * The stream round trip: a Messages API event stream -> canonical chunks (the anthropic
 * provider's translator) -> a Messages API event stream (this format's). Ids are the gateway's
 * own; everything else comes back as it went.
 * (The request and answer round trips are in request.test.ts and response.test.ts.)
 */

function streamOf(message: Json): Event[] {
  const events: Event[] = [
    ['message_start', { message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...message.usage, output_tokens: 1 } } }],
    ['ping', {}],
  ];
  (message.content as Json[]).forEach((block, index) => {
    if (block.type === 'text') {
      events.push(['content_block_start', { index, content_block: { type: 'text', text: '' } }]);
      for (const piece of (block.text as string).split(/(?= )/)) events.push(['content_block_delta', { index, delta: { type: 'text_delta', text: piece } }]);
    } else if (block.type === 'thinking') {
      events.push(['content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } }]);
      for (const piece of (block.thinking as string).split(/(?= )/)) events.push(['content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } }]);
      events.push(['content_block_delta', { index, delta: { type: 'signature_delta', signature: block.signature } }]);
    } else {
      events.push(['content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }]);
      const json = JSON.stringify(block.input);
      for (const piece of [json.slice(0, 7), json.slice(7)]) events.push(['content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }]);
    }
    events.push(['content_block_stop', { index }]);
  });
  events.push(['message_delta', { delta: { stop_reason: message.stop_reason, stop_sequence: message.stop_sequence }, usage: { ...message.usage } }]);
  events.push(['message_stop', {}]);
  return events.map(([name, data]) => [name, { type: name, ...data }]);
}

async function roundTrip(events: Event[], stops: string[]): Promise<{ events: Event[]; losses: string[] }> {
  const losses = new Losses();
  const translator = new MessageStreamTranslator(losses);
  const chunks: ChatChunk[] = [];
  for (const [name, data] of events) chunks.push(...translator.push(data, name));
  expect(translator.complete).to.equal(true);
  async function* source(): AsyncGenerator<ChatChunk> {
    yield* chunks;
  }
  let text = '';
  for await (const piece of messageEvents(source(), { requestedStops: stops, losses })) text += piece;
  const out = text
    .split('\n\n')
    .filter(Boolean)
    .map((frame): Event => {
      const match = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(frame)!;
      return [match[1]!, JSON.parse(match[2]!) as Json];
    });
  return { events: out, losses: losses.names };
}

/** Ids and the running usage of message_start are the gateway's own. */
function comparable(events: Event[]): Event[] {
  return events.map(([name, data]) => {
    if (name !== 'message_start') return [name, data];
    const { id: _id, usage: _usage, ...rest } = data.message as Json;
    return [name, { ...data, message: rest }];
  });
}

describe('anthropic-messages stream round trip (events -> canonical chunks -> events)', () => {
  const usage = { input_tokens: 20, output_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 100 };
  const base = { id: 'msg_rt', type: 'message', role: 'assistant', model: 'claude-x', usage };

  it('thinking with its signature, text, two parallel tool calls with streamed input, tool_use', async () => {
    const message = {
      ...base,
      content: [
        { type: 'thinking', thinking: 'two cities, two calls', signature: 'EqoBCkYIAxgCIkD' },
        { type: 'text', text: 'Checking both.' },
        { type: 'tool_use', id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'toolu_02', name: 'get_weather', input: { city: 'Rome' } },
      ],
      stop_reason: 'tool_use',
      stop_sequence: null,
    };
    const sent = streamOf(message);
    const back = await roundTrip(sent, []);
    expect(back.losses).to.deep.equal([]);
    // Input pieces may be cut differently; the assembled JSON of each call is the same.
    const join = (events: Event[]) =>
      comparable(events).reduce<Event[]>((out, [name, data]) => {
        const last = out[out.length - 1];
        if (name === 'content_block_delta' && data.delta.type === 'input_json_delta' && last?.[0] === 'content_block_delta' && last[1].delta.type === 'input_json_delta') {
          last[1] = { ...last[1], delta: { ...last[1].delta, partial_json: last[1].delta.partial_json + data.delta.partial_json } };
        } else out.push([name, structuredClone(data)]);
        return out;
      }, []);
    expect(join(back.events)).to.deep.equal(join(sent));
  });

  it('a stop sequence the client asked for, and max_tokens', async () => {
    for (const [reason, sequence] of [['stop_sequence', 'END'], ['max_tokens', null]] as const) {
      const message = { ...base, content: [{ type: 'text', text: 'one two three' }], stop_reason: reason, stop_sequence: sequence };
      const sent = streamOf(message);
      const back = await roundTrip(sent, ['END']);
      expect(comparable(back.events)).to.deep.equal(comparable(sent));
    }
  });
});
