import { expect } from 'chai';
import type { ChatChunk, ChatResponse } from '../../../../core/index.js';
import { usageOf } from '../../../../core/usage.js';
import { toResponse } from './response.js';
import { ResponseEventWriter, responseEvents } from './stream.js';
import { toChatRequest } from './request.js';

function chunk(delta: ChatChunk['choices'][number]['delta'], finish: ChatChunk['choices'][number]['finish_reason'] = null, usage?: ChatChunk['usage']): ChatChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) };
}

async function* from(chunks: ChatChunk[]): AsyncGenerator<ChatChunk> {
  yield* chunks;
}

async function events(chunks: ChatChunk[]): Promise<Array<Record<string, any>>> {
  const out: Array<Record<string, any>> = [];
  for await (const event of responseEvents(from(chunks), new ResponseEventWriter('resp_1', { instructions: 'i' }, 'm'))) out.push(event);
  return out;
}

describe('chat chunks -> Responses events', () => {
  it('reasoning, then text, then a tool call: each item opened and closed in order, numbered from 0', async () => {
    const list = await events([
      chunk({ role: 'assistant', reasoning_content: 'hmm' }),
      chunk({ reasoning_content: ' ok', reasoning_signature: 'sig' }),
      chunk({ content: 'Hello' }),
      chunk({ content: ' you' }),
      chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: ':1}' } }] }),
      chunk({}, 'tool_calls'),
      { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 5, completion_tokens: 4, total_tokens: 9, completion_tokens_details: { reasoning_tokens: 2 } } },
    ]);
    expect(list.map((e) => e.type)).to.deep.equal([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ]);
    expect(list.map((e) => e.sequence_number)).to.deep.equal(list.map((_, i) => i));
    const final = list[list.length - 1]!.response;
    expect(final.status).to.equal('completed');
    expect(final.instructions).to.equal('i');
    expect(final.output.map((o: { type: string }) => o.type)).to.deep.equal(['reasoning', 'message', 'function_call']);
    expect(final.output[0]).to.deep.include({ summary: [{ type: 'summary_text', text: 'hmm ok' }], encrypted_content: 'sig' });
    expect(final.output[1].content[0]).to.include({ type: 'output_text', text: 'Hello you' });
    expect(final.output[2]).to.include({ call_id: 'call_1', name: 'f', arguments: '{"a":1}', status: 'completed' });
    expect(final.usage).to.deep.equal({
      input_tokens: 5,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 4,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: 9,
    });
    // The core meters a responses stream from its final event.
    expect(usageOf('responses', list[list.length - 1])).to.deep.equal({ inputTokens: 5, outputTokens: 4, totalTokens: 9, cachedInputTokens: 0, reasoningTokens: 2 });
    expect(usageOf('responses', list[0])).to.equal(undefined);
  });

  it("two calls one after another: the first is done when the second begins, its arguments whole, as OpenAI streams them", async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'b', function: { name: 'g', arguments: '{}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const types = list.map((e) => `${e.type}${e.output_index === undefined ? '' : `#${e.output_index}`}`);
    expect(types.slice(2)).to.deep.equal([
      'response.output_item.added#0',
      'response.function_call_arguments.delta#0',
      'response.function_call_arguments.done#0',
      'response.output_item.done#0',
      'response.output_item.added#1',
      'response.function_call_arguments.delta#1',
      'response.function_call_arguments.done#1',
      'response.output_item.done#1',
      'response.completed',
    ]);
  });

  it('a call whose arguments are not whole when the next begins stays open, and is done whole at the end', async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{"x":' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'b', function: { name: 'g', arguments: '{}' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const done = list.filter((e) => e.type === 'response.function_call_arguments.done').map((e) => [e.output_index, e.arguments]);
    expect(done).to.deep.equal([[0, '{"x":1}'], [1, '{}']]);
  });

  it('a call a chat back end gave no arguments ("") is done with `{}`, one delta then done, as OpenAI streams it', async () => {
    const list = await events([chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'now', arguments: '' } }] }), chunk({}, 'tool_calls')]);
    const deltas = list.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
    expect(deltas).to.deep.equal(['{}']);
    expect(list.find((e) => e.type === 'response.function_call_arguments.done')!.arguments).to.equal('{}');
    expect(list.find((e) => e.type === 'response.output_item.done')!.item.arguments).to.equal('{}');
    expect(list.at(-1)!.response.output[0].arguments).to.equal('{}');
  });

  it("text that comes between two pieces of a call's arguments waits for them: the call is done whole, the text follows it", async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{"x": "hel' } }] }),
      chunk({ content: '\n' }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: 'lo", "y": 2}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const done = list.filter((e) => e.type === 'response.function_call_arguments.done');
    expect(done.map((e) => e.arguments)).to.deep.equal(['{"x": "hello", "y": 2}']);
    expect(list.find((e) => e.type === 'response.output_item.done' && e.item.type === 'function_call')!.item.arguments).to.equal('{"x": "hello", "y": 2}');
    const deltas = list.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
    expect(deltas).to.equal('{"x": "hello", "y": 2}');
    const final = list.at(-1)!.response;
    expect(final.output.map((o: { type: string }) => o.type)).to.deep.equal(['function_call', 'message']);
    expect(final.output[0].arguments).to.equal('{"x": "hello", "y": 2}');
    expect(final.output[1].content[0].text).to.equal('\n');
  });

  it('text after a call given no arguments is written at once, not held to the end; a late piece of that call makes valid arguments', () => {
    const writer = new ResponseEventWriter('resp_1', {}, 'm');
    writer.start();
    writer.push(chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'now', arguments: '' } }] }));
    const next = writer.push(chunk({ content: 'checking' }));
    expect(next.map((e) => e.type)).to.include('response.output_text.delta');
    const late = new ResponseEventWriter('resp_2', {}, 'm');
    late.start();
    late.push(chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '' } }] }));
    late.push(chunk({ reasoning_content: 'hmm' }));
    late.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"x":1}' } }] }));
    const { response } = late.end();
    expect((response.output as Array<Record<string, unknown>>).find((o) => o.type === 'function_call')!.arguments).to.equal('{"x":1}');
  });

  it('arguments of whitespace alone: no delta for it, then `{}`, so the deltas add up to what done says', async () => {
    const list = await events([chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'now', arguments: '  ' } }] }), chunk({}, 'tool_calls')]);
    const deltas = list.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta);
    expect(deltas).to.deep.equal(['{}']);
    expect(list.find((e) => e.type === 'response.function_call_arguments.done')!.arguments).to.equal('{}');
    const padded = await events([
      chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: ' ' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"x":1}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const joined = padded.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
    expect(joined).to.equal(padded.find((e) => e.type === 'response.function_call_arguments.done')!.arguments);
  });

  it('text after arguments that can never be an object is not held', () => {
    const writer = new ResponseEventWriter('resp_1', {}, 'm');
    writer.start();
    writer.push(chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: 'not json' } }] }));
    expect(writer.push(chunk({ content: 'so' })).map((e) => e.type)).to.include('response.output_text.delta');
  });

  it('text held for arguments that never become whole is written when the answer ends, not lost', async () => {
    const list = await events([chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'f', arguments: '{"x": ' } }] }), chunk({ content: 'and then' }), chunk({}, 'stop')]);
    const final = list.at(-1)!.response;
    expect(final.output.map((o: { type: string }) => o.type)).to.deep.equal(['function_call', 'message']);
    expect(final.output[1].content[0].text).to.equal('and then');
  });

  it("interleaved calls: each call's done events carry its own whole arguments, whatever order the pieces came in", async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"b":2}' } }] }),
      chunk({}, 'tool_calls'),
    ]);
    const argsDone = list.filter((e) => e.type === 'response.function_call_arguments.done').map((e) => [e.output_index, e.name, e.arguments]);
    expect(argsDone).to.deep.equal([
      [0, 'f', '{"a":1}'],
      [1, 'g', '{"b":2}'],
    ]);
    const itemsDone = list.filter((e) => e.type === 'response.output_item.done').map((e) => [e.item.call_id, e.item.arguments]);
    expect(itemsDone).to.deep.equal([
      ['call_a', '{"a":1}'],
      ['call_b', '{"b":2}'],
    ]);
    const deltas = list.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => [e.output_index, e.delta]);
    expect(deltas).to.deep.equal([
      [0, '{"a":1}'],
      [1, '{"b":2}'],
    ]);
    const final = list[list.length - 1]!.response;
    expect(final.output.map((o: Record<string, unknown>) => o.arguments)).to.deep.equal(['{"a":1}', '{"b":2}']);
  });

  it('parallel calls a back end gives one index (0) or none, each with its own id: one item each, not one merged call', async () => {
    for (const index of [0, undefined]) {
      const list = await events([
        chunk({ tool_calls: [{ index, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] as never }),
        chunk({ tool_calls: [{ index, id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } }] as never }),
        chunk({}, 'tool_calls'),
      ]);
      const final = list[list.length - 1]!.response;
      expect(final.output.map((o: Record<string, unknown>) => [o.call_id, o.arguments]), `index ${index}`).to.deep.equal([
        ['call_1', '{"city":"Paris"}'],
        ['call_2', '{"city":"Rome"}'],
      ]);
      expect(list.filter((e) => e.type === 'response.output_item.done').map((e) => e.output_index)).to.deep.equal([0, 1]);
    }
    // Pieces of two calls under one index, interleaved, each naming its call's id: each goes to its own call.
    const interleaved = await events([
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"a"' } }] as never }),
      chunk({ tool_calls: [{ index: 0, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{"b"' } }] as never }),
      chunk({ tool_calls: [{ index: 0, id: 'call_a', function: { arguments: ':1}' } }] as never }),
      chunk({ tool_calls: [{ index: 0, id: 'call_b', function: { arguments: ':2}' } }] as never }),
      chunk({}, 'tool_calls'),
    ]);
    expect(interleaved[interleaved.length - 1]!.response.output.map((o: Record<string, unknown>) => [o.call_id, o.arguments])).to.deep.equal([
      ['call_a', '{"a":1}'],
      ['call_b', '{"b":2}'],
    ]);
    // Pieces without an index or an id continue the last call.
    const pieces = await events([
      chunk({ tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a"' } }] as never }),
      chunk({ tool_calls: [{ function: { arguments: ':1}' } }] as never }),
      chunk({}, 'tool_calls'),
    ]);
    expect(pieces[pieces.length - 1]!.response.output.map((o: Record<string, unknown>) => o.arguments)).to.deep.equal(['{"a":1}']);
  });

  it('a refusal is its own content part; length makes the response incomplete', async () => {
    const list = await events([chunk({ content: 'part' }), chunk({ refusal: 'no' }), chunk({}, 'length')]);
    expect(list.map((e) => e.type)).to.include.members(['response.refusal.delta', 'response.refusal.done']);
    const last = list[list.length - 1]!;
    expect(last.type).to.equal('response.incomplete');
    expect(last.response.incomplete_details).to.deep.equal({ reason: 'max_output_tokens' });
    expect(last.response.output[0].content).to.deep.equal([
      { type: 'output_text', text: 'part', annotations: [], logprobs: [] },
      { type: 'refusal', refusal: 'no' },
    ]);
  });
});

describe('chat chunks -> Responses events: an answer cut short in a call', () => {
  it('the call it was cut in is incomplete; the calls before it are completed', async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'f', arguments: '{"city": "Par' } }] }),
      chunk({}, 'length'),
    ]);
    const done = list.filter((e) => e.type === 'response.output_item.done').map((e) => [e.item.call_id, e.item.status]);
    expect(done).to.deep.equal([
      ['call_1', 'completed'],
      ['call_2', 'incomplete'],
    ]);
    const last = list[list.length - 1]!;
    expect(last.type).to.equal('response.incomplete');
    expect(last.response.output.map((o: Record<string, unknown>) => o.status)).to.deep.equal(['completed', 'incomplete']);
  });
});

describe('chat answer -> response object', () => {
  it('reasoning, message and calls as items; usage in the Responses shape; length -> incomplete', () => {
    const chat: ChatResponse = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: 'cut', reasoning_content: 'why', tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'f', arguments: '{}' } }] },
          finish_reason: 'length',
        },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5, prompt_tokens_details: { cached_tokens: 1 } },
    };
    const response = toResponse(chat, { store: false, metadata: { a: 'b' } }, 'resp_x', 'public-model') as Record<string, any>;
    expect(response).to.include({ id: 'resp_x', object: 'response', status: 'incomplete', model: 'public-model', store: false });
    expect(response.incomplete_details).to.deep.equal({ reason: 'max_output_tokens' });
    expect(response.metadata).to.deep.equal({ a: 'b' });
    expect(response.output.map((o: { type: string }) => o.type)).to.deep.equal(['reasoning', 'message', 'function_call']);
    expect(response.output[1]).to.include({ status: 'incomplete', role: 'assistant' });
    // The call the answer was cut in is incomplete, as OpenAI marks it.
    expect(response.output[2]).to.include({ call_id: 'call_9', name: 'f', status: 'incomplete' });
    // A call a chat back end gave no arguments ("") is `{}`, which the SDKs parse.
    const bare = toResponse({ ...chat, choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'now', arguments: '' } }] }, finish_reason: 'tool_calls' }] }, {}, 'resp_y', 'm') as Record<string, any>;
    expect(bare.output[0]).to.include({ type: 'function_call', arguments: '{}' });
    expect(response.usage).to.deep.equal({
      input_tokens: 3,
      input_tokens_details: { cached_tokens: 1 },
      output_tokens: 2,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 5,
    });
    expect(usageOf('responses', response)).to.deep.equal({ inputTokens: 3, outputTokens: 2, totalTokens: 5, cachedInputTokens: 1, reasoningTokens: 0 });
    expect(usageOf('compact', { usage: { input_tokens: -1, output_tokens: 2 } })).to.equal(undefined);
  });
});

describe('namespaced tools (Codex) through a chat back end', () => {
  // Codex groups its sub-agent tools in a namespace; one of them shares its name with a tool of
  // another namespace, so it goes up under a longer name.
  const body = {
    input: [
      { type: 'message', role: 'user', content: 'go' },
      { type: 'function_call', call_id: 'c0', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"task":"a"}' },
      { type: 'function_call_output', call_id: 'c0', output: 'spawned' },
      { type: 'function_call', call_id: 'c1', name: 'close', namespace: 'files', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: 'closed' },
    ],
    tools: [
      { type: 'function', name: 'exec_command', parameters: { type: 'object' } },
      {
        type: 'namespace',
        name: 'multi_agent_v1',
        description: 'Tools for spawning and managing sub-agents.',
        tools: [
          { type: 'function', name: 'spawn_agent', description: 'Spawn one.', parameters: { type: 'object', properties: { task: { type: 'string' } } } },
          { type: 'function', name: 'close', parameters: { type: 'object' } },
        ],
      },
      { type: 'namespace', name: 'files', tools: [{ type: 'function', name: 'close', parameters: { type: 'object' } }] },
      { type: 'web_search' },
    ],
    tool_choice: { type: 'function', name: 'spawn_agent', namespace: 'multi_agent_v1' },
  };

  it('every member goes up as a function; earlier calls and the tool choice by the same names; only hosted tools are losses', () => {
    const { value, losses } = toChatRequest(body, 'm', false);
    expect(value.tools!.map((t) => t.function.name)).to.deep.equal(['exec_command', 'spawn_agent', 'multi_agent_v1__close', 'files__close']);
    // The namespace's own description goes with its first tool.
    expect(value.tools![1]!.function).to.deep.include({ description: 'Tools for spawning and managing sub-agents.\n\nSpawn one.' });
    expect(value.tools![2]!.function.description).to.equal(undefined);
    const calls = value.messages.flatMap((m) => m.tool_calls ?? []).map((c) => c.function.name);
    expect(calls).to.deep.equal(['spawn_agent', 'files__close']);
    expect(value.tool_choice).to.deep.equal({ type: 'function', function: { name: 'spawn_agent' } });
    expect(losses).to.deep.equal(['tools.web_search']);
  });

  it('names stay unique: a top-level name taken, names cut at 64 characters, names made chat-shaped; each call maps back to its own tool', () => {
    const long = 'n'.repeat(50);
    const clash = {
      input: 'x',
      tools: [
        { type: 'function', name: 'read' },
        { type: 'function', name: 'mcp__read' },
        { type: 'namespace', name: 'mcp', tools: [{ type: 'function', name: 'read' }] },
        { type: 'namespace', name: long, tools: [{ type: 'function', name: 'search_documents_by_title' }, { type: 'function', name: 'search_documents_by_author' }] },
        { type: 'namespace', name: 'x', tools: [{ type: 'function', name: 'a.b' }, { type: 'function', name: 'a_b' }] },
        { type: 'namespace', name: 'y', tools: [{ type: 'function', name: 'a.b' }, { type: 'function', name: 'a_b' }] },
      ],
    };
    const { value } = toChatRequest(clash, 'm', false);
    const sent = value.tools!.map((t) => t.function.name);
    expect(new Set(sent).size, sent.join(' ')).to.equal(sent.length);
    for (const name of sent) expect(name).to.match(/^[A-Za-z0-9_-]{1,64}$/);
    expect(sent.slice(0, 2)).to.deep.equal(['read', 'mcp__read']);
    const names = [
      ['read', undefined],
      ['mcp__read', undefined],
      ['read', 'mcp'],
      ['search_documents_by_title', long],
      ['search_documents_by_author', long],
      ['a.b', 'x'],
      ['a_b', 'x'],
      ['a.b', 'y'],
      ['a_b', 'y'],
    ];
    sent.forEach((chatName, i) => {
      const back = toResponse(
        { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'k', type: 'function', function: { name: chatName, arguments: '{}' } }] }, finish_reason: 'tool_calls' }] },
        clash,
        'r',
        'm',
      ) as Record<string, any>;
      const [name, namespace] = names[i]!;
      expect(back.output[0].name, chatName).to.equal(name);
      expect(back.output[0].namespace, chatName).to.equal(namespace);
    });
  });

  it("the back end's calls come back by the client's name, in its namespace, whole and streamed", async () => {
    const chat: ChatResponse = {
      id: 'c',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'k1', type: 'function', function: { name: 'files__close', arguments: '{}' } },
              { id: 'k2', type: 'function', function: { name: 'exec_command', arguments: '{"cmd":"ls"}' } },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
    };
    const whole = toResponse(chat, body, 'resp_n', 'm') as Record<string, any>;
    expect(whole.output[0]).to.include({ type: 'function_call', name: 'close', namespace: 'files', call_id: 'k1' });
    expect(whole.output[1]).to.include({ type: 'function_call', name: 'exec_command', call_id: 'k2' });
    expect(whole.output[1]).to.not.have.property('namespace');

    const out: Array<Record<string, any>> = [];
    const chunks = [
      chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'k1', type: 'function', function: { name: 'spawn_agent', arguments: '{"task":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"b"}' } }] }),
      chunk({}, 'tool_calls'),
    ];
    for await (const event of responseEvents(from(chunks), new ResponseEventWriter('resp_s', body, 'm'))) out.push(event);
    const added = out.find((e) => e.type === 'response.output_item.added')!;
    expect(added.item).to.include({ type: 'function_call', name: 'spawn_agent', namespace: 'multi_agent_v1' });
    const argsDone = out.find((e) => e.type === 'response.function_call_arguments.done')!;
    expect(argsDone).to.include({ name: 'spawn_agent', arguments: '{"task":"b"}' });
    const done = out.find((e) => e.type === 'response.output_item.done')!;
    expect(done.item).to.include({ name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"task":"b"}' });
  });
});
