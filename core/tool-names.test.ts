import { expect } from 'chai';
import { CHAT_TOOL_NAMES, fitsChatName, GEMINI_TOOL_NAMES, MESSAGES_TOOL_NAMES, ToolNames } from './tool-names.js';
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
    // a:b and a.b clean alike: each gets a hash.
    expect(out[2]).to.match(/^a_b_[0-9a-f]{8}$/);
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

  it('each back end by its own rule: Gemini takes dots but no leading digit; the Messages API 128 characters; a name too long always gets a hash', () => {
    expect(GEMINI_TOOL_NAMES.fits('files.read')).to.equal(true);
    expect(GEMINI_TOOL_NAMES.fits('ns:search')).to.equal(true);
    expect(GEMINI_TOOL_NAMES.fits('1st_tool')).to.equal(false);
    expect(GEMINI_TOOL_NAMES.fits('-x')).to.equal(false);
    expect(GEMINI_TOOL_NAMES.fits('a'.repeat(64))).to.equal(true);
    expect(GEMINI_TOOL_NAMES.fits('a'.repeat(65))).to.equal(false);
    expect(MESSAGES_TOOL_NAMES.fits('a'.repeat(128))).to.equal(true);
    expect(CHAT_TOOL_NAMES.fits('a'.repeat(65))).to.equal(false);

    const mcp = `mcp__plugin_chrome-devtools-mcp_chrome-devtools__${'performance_analyze_insight'}`;
    const request: ChatRequest = { model: 'm', messages: [], tools: [tool('1st_tool'), tool(mcp), tool(`${mcp}_more`)] };
    const gemini = ToolNames.of(request, GEMINI_TOOL_NAMES)!.request(request).tools!.map((t) => t.function.name);
    expect(gemini[0]).to.equal('_1st_tool');
    // Two long names alike in their first 55 characters: each its own hash, whatever the order of the tools.
    expect(gemini[1]).to.have.length(64).and.match(/_[0-9a-f]{8}$/);
    expect(gemini[2]).to.have.length(64).and.match(/_[0-9a-f]{8}$/);
    expect(gemini[1]).to.not.equal(gemini[2]);
    const reversed: ChatRequest = { ...request, tools: [...request.tools!].reverse() };
    expect(ToolNames.of(reversed, GEMINI_TOOL_NAMES)!.request(reversed).tools!.map((t) => t.function.name)).to.deep.equal([...gemini].reverse());
    for (const name of gemini) expect(GEMINI_TOOL_NAMES.fits(name), name).to.equal(true);
    // The Messages API takes all three as they are (a leading digit, 77 characters).
    expect(ToolNames.of(request, MESSAGES_TOOL_NAMES)).to.equal(undefined);
  });

  it('names that clean to the same form are each hashed, whatever the order of the tools', () => {
    const request: ChatRequest = { model: 'm', messages: [], tools: [tool('a.b'), tool('a:b'), tool('c.d')] };
    const sent = ToolNames.of(request)!.request(request).tools!.map((t) => t.function.name);
    const reversed: ChatRequest = { ...request, tools: [...request.tools!].reverse() };
    expect(ToolNames.of(reversed)!.request(reversed).tools!.map((t) => t.function.name)).to.deep.equal([...sent].reverse());
    expect(sent[0]).to.match(/^a_b_[0-9a-f]{8}$/);
    expect(sent[1]).to.match(/^a_b_[0-9a-f]{8}$/);
    expect(sent[0]).to.not.equal(sent[1]);
    expect(sent[2]).to.equal('c_d');
  });

  it('the older function calling\'s names are renamed alike: functions, function_call, a turn\'s call and its result', () => {
    const request: ChatRequest = {
      model: 'm',
      functions: [{ name: '1st_tool' }],
      function_call: { name: '1st_tool' },
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: null, function_call: { name: '1st_tool', arguments: '{}' } },
        { role: 'function', name: '1st_tool', content: 'done' },
      ],
    };
    const sent = ToolNames.of(request, GEMINI_TOOL_NAMES)!.request(request);
    expect(sent.functions).to.deep.equal([{ name: '_1st_tool' }]);
    expect(sent.function_call).to.deep.equal({ name: '_1st_tool' });
    expect(sent.messages[1]!.function_call).to.deep.equal({ name: '_1st_tool', arguments: '{}' });
    expect(sent.messages[2]!.name).to.equal('_1st_tool');
    expect(request.messages[2]!.name).to.equal('1st_tool');
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
