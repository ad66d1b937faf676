import { expect } from 'chai';
import type { ChatChunk, ChatChunkChoice, ChatUsage } from '../../../core/index.js';
import { backEndToolId, clientToolUseId, Losses } from './request.js';
import { messageEvents } from './stream.js';

type Json = Record<string, any>;

function chunk(delta: ChatChunkChoice['delta'], finish: ChatChunkChoice['finish_reason'] = null, extra: Partial<ChatChunkChoice> = {}): ChatChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices: [{ index: 0, delta, finish_reason: finish, ...extra }] };
}
function usageChunk(usage: ChatUsage): ChatChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices: [], usage };
}
async function* from(chunks: ChatChunk[]): AsyncGenerator<ChatChunk> {
  for (const c of chunks) yield c;
}

/** Run the translator; return the events (name and data), checking the SSE framing of each. */
async function events(chunks: ChatChunk[], stops: string[] = [], losses = new Losses()): Promise<Array<{ event: string; data: Json }>> {
  let text = '';
  for await (const piece of messageEvents(from(chunks), { requestedStops: stops, losses })) text += piece;
  expect(text.endsWith('\n\n')).to.equal(true);
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const match = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(frame);
      expect(match, frame).to.not.equal(null);
      const data = JSON.parse(match![2]!) as Json;
      expect(data.type).to.equal(match![1]);
      return { event: match![1]!, data };
    });
}

/** Build the final message from the events the way a client does, checking the protocol as it goes. */
function assemble(list: Array<{ event: string; data: Json }>): Json {
  expect(list[0]!.event).to.equal('message_start');
  expect(list[list.length - 1]!.event).to.equal('message_stop');
  const message = structuredClone(list[0]!.data.message) as Json;
  let open: number | undefined;
  const json: Record<number, string> = {};
  for (const { event, data } of list.slice(1, -1)) {
    if (event === 'ping') continue;
    if (event === 'content_block_start') {
      expect(open, 'a block opened while another is open').to.equal(undefined);
      expect(data.index).to.equal(message.content.length);
      message.content.push(structuredClone(data.content_block));
      open = data.index;
    } else if (event === 'content_block_delta') {
      expect(data.index).to.equal(open);
      const block = message.content[data.index];
      const d = data.delta;
      if (d.type === 'text_delta') block.text += d.text;
      else if (d.type === 'thinking_delta') block.thinking += d.thinking;
      else if (d.type === 'signature_delta') block.signature = d.signature;
      else if (d.type === 'input_json_delta') json[data.index] = (json[data.index] ?? '') + d.partial_json;
      else throw new Error(`unknown delta ${d.type}`);
    } else if (event === 'content_block_stop') {
      expect(data.index).to.equal(open);
      if (json[data.index] !== undefined) message.content[data.index].input = JSON.parse(json[data.index]!);
      open = undefined;
    } else if (event === 'message_delta') {
      expect(open, 'message_delta with a block open').to.equal(undefined);
      Object.assign(message, data.delta);
      Object.assign(message.usage, data.usage);
    } else throw new Error(`unexpected event ${event}`);
  }
  return message;
}

describe('anthropic-messages stream translation', () => {
  it('streams text in the native event order with a ping, stop reason and usage at the end', async () => {
    const list = await events([
      chunk({ role: 'assistant', content: '' }),
      chunk({ content: 'Hel' }),
      chunk({ content: 'lo' }),
      chunk({}, 'stop'),
      usageChunk({ prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, prompt_tokens_details: { cached_tokens: 4 } }),
    ]);
    expect(list.map((e) => e.event)).to.deep.equal([
      'message_start',
      'ping',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    const message = assemble(list);
    expect(message.id).to.match(/^msg_/);
    expect(message).to.deep.include({ model: 'gpt-x', role: 'assistant', stop_reason: 'end_turn', stop_sequence: null });
    expect(message.content).to.deep.equal([{ type: 'text', text: 'Hello' }]);
    expect(message.usage).to.deep.equal({ input_tokens: 5, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 4 });
  });

  it("names in message_start the model the client asked for when the back end's first chunk names none (Azure's is empty)", async () => {
    const first = { ...chunk({ role: 'assistant', content: '' }), model: '' };
    let text = '';
    for await (const piece of messageEvents(from([first, chunk({ content: 'hi' }, 'stop')]), { requestedStops: [], losses: new Losses(), model: 'claude-asked' })) text += piece;
    expect(text).to.include('"model":"claude-asked"');
    const named = await events([chunk({ content: 'hi' }, 'stop')]);
    expect(named[0]!.data.message.model).to.equal('gpt-x');
    // A stream that ended before its first chunk names it too.
    let empty = '';
    for await (const piece of messageEvents(from([]), { requestedStops: [], losses: new Losses(), model: 'claude-asked' })) empty += piece;
    expect(empty).to.include('"model":"claude-asked"');
  });

  it('streams reasoning as a thinking block with its signature, before the text', async () => {
    const message = assemble(
      await events([
        chunk({ role: 'assistant', reasoning_content: 'Let me ' }),
        chunk({ reasoning_content: 'think.' }),
        chunk({ reasoning_signature: 'sig-1' }),
        chunk({ content: 'Answer.' }),
        chunk({}, 'stop'),
      ]),
    );
    expect(message.content).to.deep.equal([
      { type: 'thinking', thinking: 'Let me think.', signature: 'sig-1' },
      { type: 'text', text: 'Answer.' },
    ]);
  });

  it('accepts `reasoning` as some back ends name the reasoning delta', async () => {
    const message = assemble(await events([chunk({ reasoning: 'r' }), chunk({ content: 't' }), chunk({}, 'stop')]));
    expect(message.content[0]).to.deep.equal({ type: 'thinking', thinking: 'r', signature: '' });
  });

  it('turns parallel streamed tool calls into one tool_use block each, arguments as input_json_delta pieces', async () => {
    const list = await events([
      chunk({ role: 'assistant', content: 'Checking.' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{"tz":' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '"CET"}' } }] }),
      chunk({}, 'tool_calls'),
      usageChunk({ prompt_tokens: 30, completion_tokens: 20, total_tokens: 50 }),
    ]);
    const pieces = list.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => [e.data.index, e.data.delta.partial_json]);
    expect(pieces).to.deep.equal([
      [1, '{"ci'],
      [1, 'ty":"Paris"}'],
      [2, '{"tz":'],
      [2, '"CET"}'],
    ]);
    const message = assemble(list);
    expect(message.content).to.deep.equal([
      { type: 'text', text: 'Checking.' },
      { type: 'tool_use', id: 'call_a', name: 'get_weather', input: { city: 'Paris' } },
      { type: 'tool_use', id: 'call_b', name: 'get_time', input: { tz: 'CET' } },
    ]);
    expect(message.stop_reason).to.equal('tool_use');
    expect(message.usage).to.deep.include({ input_tokens: 30, output_tokens: 20 });
  });

  it('gives a tool call without an id a toolu_ id', async () => {
    const message = assemble(await events([chunk({ tool_calls: [{ index: 0, function: { name: 'f', arguments: '{}' } }] }), chunk({}, 'tool_calls')]));
    expect(message.content[0].id).to.match(/^toolu_/);
  });

  it("gives a call whose id Anthropic's pattern refuses (Kimi's functions.get_weather:0) an id it takes, the same for the same id", async () => {
    const message = assemble(await events([chunk({ tool_calls: [{ index: 0, id: 'functions.get_weather:0', function: { name: 'get_weather', arguments: '{}' } }] }), chunk({}, 'tool_calls')]));
    expect(message.content[0].id).to.match(/^[a-zA-Z0-9_-]+$/);
    expect(message.content[0].id).to.equal(clientToolUseId('functions.get_weather:0'));
    expect(clientToolUseId('call_ok-1')).to.equal('call_ok-1');
    // Handed back, it is the back end's own id again; any other id stays as it is.
    expect(backEndToolId(message.content[0].id)).to.equal('functions.get_weather:0');
    expect(backEndToolId('sytc_not-one-of-ours')).to.equal('sytc_not-one-of-ours');
    expect(backEndToolId('sytc_')).to.equal('sytc_');
    expect(backEndToolId('toolu_01abc')).to.equal('toolu_01abc');
  });

  it("text between two pieces of a call's arguments waits for them: the tool_use gets its whole input, the text follows it", async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'call_1', function: { name: 'f', arguments: '{"x": "hel' } }] }),
      chunk({ content: '\n' }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: 'lo", "y": 2}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const message = assemble(list);
    expect(message.content.map((b: Json) => b.type)).to.deep.equal(['tool_use', 'text']);
    expect(message.content[0].input).to.deep.equal({ x: 'hello', y: 2 });
    expect(message.content[1].text).to.equal('\n');
  });

  it('text after a call given no arguments is written as it comes, not held until the answer ends', async () => {
    let release!: () => void;
    const waiting = new Promise<void>((resolve) => (release = resolve));
    async function* slow(): AsyncGenerator<ChatChunk> {
      yield chunk({ tool_calls: [{ index: 0, id: 'call_1', function: { name: 'now', arguments: '' } }] });
      yield chunk({ content: 'checking the time' });
      await waiting;
      yield chunk({}, 'tool_calls');
    }
    const pieces = messageEvents(slow(), { requestedStops: [], losses: new Losses() });
    let text = '';
    for (let i = 0; i < 2; i++) text += (await pieces.next()).value ?? '';
    expect(text).to.include('"text_delta"').and.include('checking the time');
    release();
    for await (const piece of pieces) text += piece;
    expect(text).to.include('message_stop');
  });

  it('maps length to max_tokens and a named stop sequence to stop_sequence', async () => {
    expect(assemble(await events([chunk({ content: 'a' }), chunk({}, 'length')])).stop_reason).to.equal('max_tokens');
    const stopped = assemble(await events([chunk({ content: 'a' }), chunk({}, 'stop', { stop_sequence: 'END' })], ['END']));
    expect(stopped).to.deep.include({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
  });

  it('still frames a whole message when the back end sends no chunk at all', async () => {
    const list = await events([]);
    expect(list.map((e) => e.event)).to.deep.equal(['message_start', 'ping', 'message_delta', 'message_stop']);
  });

  it('records choices other than the first as a loss', async () => {
    const losses = new Losses();
    const extra: ChatChunk = { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 1, delta: { content: 'x' }, finish_reason: null }] };
    const message = assemble(await events([chunk({ content: 'a' }), extra, chunk({}, 'stop')], [], losses));
    expect(losses.names).to.deep.equal(['choices.n']);
    expect(message.content).to.deep.equal([{ type: 'text', text: 'a' }]);
  });

  it('reads a choice without an index (some OpenAI-compatible back ends leave it out) as the first', async () => {
    const bare = (delta: Json, finish: string | null = null) =>
      ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ delta, finish_reason: finish }] }) as unknown as ChatChunk;
    const losses = new Losses();
    const message = assemble(await events([bare({ content: 'no ' }), bare({ content: 'index' }), bare({}, 'stop')], [], losses));
    expect(message.content).to.deep.equal([{ type: 'text', text: 'no index' }]);
    expect(message.stop_reason).to.equal('end_turn');
    expect(losses.names).to.deep.equal([]);
  });

  it('keeps parallel tool calls apart when the back end sends them without an index (Gemini-style)', async () => {
    const call = (piece: Json) => chunk({ tool_calls: [piece as never] });
    const message = assemble(
      await events([
        call({ id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"a":' } }),
        call({ function: { arguments: '1}' } }),
        call({ id: 'call_b', type: 'function', function: { name: 'g', arguments: '{}' } }),
        chunk({}, 'tool_calls'),
      ]),
    );
    expect(message.content).to.deep.equal([
      { type: 'tool_use', id: 'call_a', name: 'f', input: { a: 1 } },
      { type: 'tool_use', id: 'call_b', name: 'g', input: {} },
    ]);
  });

  it('starts a new tool_use block when a back end gives every parallel call index 0 but its own id', async () => {
    const losses = new Losses();
    const message = assemble(
      await events(
        [
          chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
          chunk({ tool_calls: [{ index: 0, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{"x":' } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '2}' } }] }),
          chunk({}, 'tool_calls'),
        ],
        [],
        losses,
      ),
    );
    expect(message.content).to.deep.equal([
      { type: 'tool_use', id: 'call_a', name: 'f', input: {} },
      { type: 'tool_use', id: 'call_b', name: 'g', input: { x: 2 } },
    ]);
    expect(losses.names).to.deep.equal([]);
  });
});
