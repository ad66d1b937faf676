import { expect } from 'chai';
import type { ChatChunk, ChatChunkChoice, ChatUsage } from '../../../core/index.js';
import { Losses } from '../anthropic-messages/request.js';
import { generateContentEvents } from './stream.js';

type Json = Record<string, any>;

function chunk(delta: ChatChunkChoice['delta'], finish: ChatChunkChoice['finish_reason'] = null, index = 0): ChatChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices: [{ index, delta, finish_reason: finish }] };
}
function usageChunk(usage: ChatUsage): ChatChunk {
  return { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'gpt-x', choices: [], usage };
}
async function* from(chunks: ChatChunk[]): AsyncGenerator<ChatChunk> {
  for (const c of chunks) yield c;
}

/** Run the translator; return each event's JSON, checking the `data: …\r\n\r\n` framing. */
async function events(chunks: ChatChunk[], includeThoughts = false, losses = new Losses()): Promise<Json[]> {
  let text = '';
  for await (const piece of generateContentEvents(from(chunks), { view: { includeThoughts }, losses })) text += piece;
  expect(text.endsWith('\r\n\r\n')).to.equal(true);
  const frames = text.split('\r\n\r\n');
  frames.pop();
  return frames.map((frame) => {
    expect(frame.startsWith('data: '), frame).to.equal(true);
    return JSON.parse(frame.slice(6)) as Json;
  });
}

const usage = { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 };

describe('canonical chat chunks -> gemini stream', () => {
  it("each call keeps the signature of the thinking before it; one still waiting at the end goes on a part of its own, not over a call's", async () => {
    const list = await events([
      chunk({ role: 'assistant', reasoning_content: 'first', reasoning_signature: 'SIG_A' }),
      chunk({ tool_calls: [{ index: 0, id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
      chunk({ reasoning_content: 'second', reasoning_signature: 'SIG_B' }),
      chunk({}, 'length'),
    ]);
    const parts = list.flatMap((e) => (e.candidates as Json[]).flatMap((c) => (c.content?.parts ?? []) as Json[]));
    expect(parts.filter((p) => p.functionCall).map((p) => p.thoughtSignature)).to.deep.equal(['SIG_A']);
    expect(parts.filter((p) => !p.functionCall && p.thoughtSignature).map((p) => [p.text, p.thoughtSignature])).to.deep.equal([['', 'SIG_B']]);
  });

  it('one event per text piece as it comes; the last carries finishReason and usageMetadata', async () => {
    const list = await events([chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hel' }), chunk({ content: 'lo' }), chunk({}, 'stop'), usageChunk(usage)]);
    expect(list.map((e) => e.candidates[0].content.parts)).to.deep.equal([[{ text: 'Hel' }], [{ text: 'lo' }], [{ text: '' }]]);
    expect(list.slice(0, -1).every((e) => e.candidates[0].finishReason === undefined && e.usageMetadata === undefined)).to.equal(true);
    const last = list[list.length - 1]!;
    expect(last.candidates[0].finishReason).to.equal('STOP');
    expect(last.usageMetadata).to.deep.equal({ promptTokenCount: 4, candidatesTokenCount: 3, totalTokenCount: 7 });
    expect(new Set(list.map((e) => e.responseId)).size).to.equal(1);
    expect(list.every((e) => e.modelVersion === 'gpt-x')).to.equal(true);
  });

  it('streamed argument pieces of parallel calls are buffered into whole functionCall parts', async () => {
    const list = await events([
      chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
      chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{"x"' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: ':2}' } }] }),
      chunk({}, 'tool_calls'),
      usageChunk(usage),
    ]);
    expect(list).to.have.length(2);
    expect(list[0]!.candidates[0].content.parts).to.deep.equal([
      { functionCall: { id: 'call_a', name: 'f', args: { city: 'Paris' } } },
      { functionCall: { id: 'call_b', name: 'g', args: { x: 2 } } },
    ]);
    expect(list[1]!.candidates[0].finishReason).to.equal('STOP');
  });

  it('calls without an index continue the last call; a new id starts a new call (Gemini-compatible back ends)', async () => {
    const list = await events([
      chunk({ tool_calls: [{ id: 'a', function: { name: 'f', arguments: '{"n":' } } as any] }),
      chunk({ tool_calls: [{ function: { arguments: '1}' } } as any] }),
      chunk({ tool_calls: [{ id: 'b', function: { name: 'f', arguments: '{"n":2}' } } as any] }),
    ]);
    // No finish_reason: the calls go out with the last event.
    expect(list).to.have.length(1);
    expect(list[0]!.candidates[0].content.parts).to.deep.equal([
      { functionCall: { id: 'a', name: 'f', args: { n: 1 } } },
      { functionCall: { id: 'b', name: 'f', args: { n: 2 } } },
    ]);
  });

  it('reasoning pieces are thought parts only with includeThoughts', async () => {
    const chunks = [chunk({ reasoning_content: 'think' }), chunk({ content: 'say' }), chunk({}, 'stop')];
    expect((await events(chunks, true)).slice(0, 2).map((e) => e.candidates[0].content.parts)).to.deep.equal([[{ text: 'think', thought: true }], [{ text: 'say' }]]);
    expect((await events(chunks, false)).slice(0, 1).map((e) => e.candidates[0].content.parts)).to.deep.equal([[{ text: 'say' }]]);
  });

  it('length is MAX_TOKENS; several choices are several candidates', async () => {
    const list = await events([chunk({ content: 'a' }, null, 0), chunk({ content: 'b' }, null, 1), chunk({}, 'length', 0), chunk({}, 'stop', 1)]);
    const last = list[list.length - 1]!;
    expect(last.candidates.map((c: Json) => [c.index, c.finishReason])).to.deep.equal([
      [0, 'MAX_TOKENS'],
      [1, 'STOP'],
    ]);
    expect(list[1]!.candidates[0].index).to.equal(1);
  });

  it('an empty stream still ends with one event with a finishReason', async () => {
    const list = await events([]);
    expect(list).to.have.length(1);
    expect(list[0]!.candidates[0].finishReason).to.equal('STOP');
    expect(list[0]!.usageMetadata).to.deep.equal({ promptTokenCount: 0, candidatesTokenCount: 0, totalTokenCount: 0 });
  });

  it('arguments that are not a JSON object give {} and a loss', async () => {
    const losses = new Losses();
    const list = await events([chunk({ tool_calls: [{ index: 0, id: 'x', function: { name: 'f', arguments: '{"broken' } }] }, 'tool_calls')], false, losses);
    expect(list[0]!.candidates[0].content.parts).to.deep.equal([{ functionCall: { id: 'x', name: 'f', args: {} } }]);
    expect(losses.names).to.deep.equal(['functionCall.args_not_json_object']);
  });
});
