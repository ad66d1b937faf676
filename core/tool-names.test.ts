import { expect } from 'chai';
import { fitsChatName, ToolNames } from './tool-names.js';
import type { ChatChunk, ChatRequest, ChatResponse } from './operations.js';

const tool = (name: string) => ({ type: 'function' as const, function: { name, parameters: { type: 'object' } } });

describe('ToolNames: tool names a back end refuses, sent as names it takes and given back', () => {
  it('nothing to do when every name fits, or the call has no tools', () => {
    expect(ToolNames.of({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).to.equal(undefined);
    expect(ToolNames.of({ model: 'm', messages: [], tools: [tool('get_weather'), tool('a-b')] })).to.equal(undefined);
  });

  it('names: other characters as _, a hash when that is taken or too long; every name sent differs and fits', () => {
    const long = `ns.${'x'.repeat(80)}`;
    const request: ChatRequest = {
      model: 'm',
      messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'files.read', arguments: '{}' } }] }],
      tools: [tool('files.read'), tool('files_read'), tool('a:b'), tool('a.b'), tool(long)],
      tool_choice: { type: 'function', function: { name: 'a.b' } },
    };
    const copy = structuredClone(request);
    const names = ToolNames.of(request)!;
    const sent = names.request(request);
    expect(request).to.deep.equal(copy);
    const out = sent.tools!.map((t) => t.function.name);
    for (const name of out) expect(fitsChatName(name), name).to.equal(true);
    expect(new Set(out).size).to.equal(5);
    expect(out[1]).to.equal('files_read');
    expect(out[0]).to.match(/^files_read_[0-9a-f]{8}$/);
    expect(out[2]).to.equal('a_b');
    expect(out[3]).to.match(/^a_b_[0-9a-f]{8}$/);
    expect(out[4]).to.have.length(64);
    expect((sent.tool_choice as { function: { name: string } }).function.name).to.equal(out[3]);
    expect(sent.messages[0]!.tool_calls![0]!.function.name).to.equal(out[0]);
    // The same request maps the same way every time (a history's calls match their tools turn after turn).
    expect(ToolNames.of(request)!.request(request).tools!.map((t) => t.function.name)).to.deep.equal(out);

    const answer: ChatResponse = {
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'c2', type: 'function', function: { name: out[0]!, arguments: '{}' } }, { id: 'c3', type: 'function', function: { name: 'unknown', arguments: '{}' } }] } }],
    };
    names.answer(answer);
    expect(answer.choices[0]!.message.tool_calls!.map((c) => c.function.name)).to.deep.equal(['files.read', 'unknown']);
  });

  it('an allowed_tools choice names the tools sent', () => {
    const request: ChatRequest = {
      model: 'm',
      messages: [],
      tools: [tool('x.y')],
      tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'x.y' } }] } },
    };
    const sent = ToolNames.of(request)!.request(request);
    expect(sent.tool_choice).to.deep.equal({ type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'x_y' } }] } });
  });

  it("a stream's calls get their names back as they pass", async () => {
    const request: ChatRequest = { model: 'm', messages: [], tools: [tool('x.y')] };
    const names = ToolNames.of(request)!;
    async function* chunks(): AsyncGenerator<ChatChunk> {
      yield { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'x_y', arguments: '' } }] }, finish_reason: null }] };
      yield { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{}' } }] }, finish_reason: null }] };
    }
    const seen: unknown[] = [];
    for await (const chunk of names.stream(chunks())) seen.push(chunk.choices[0]!.delta.tool_calls![0]!.function);
    expect(seen).to.deep.equal([{ name: 'x.y', arguments: '' }, { arguments: '{}' }]);
  });
});
