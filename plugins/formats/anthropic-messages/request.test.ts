import { expect } from 'chai';
import { budgetForEffort, effortForBudget, fromCanonicalRequest, toCanonicalRequest } from './request.js';
import { chatUsage } from './response.js';
import { fromCanonicalRequest as fromGemini } from '../gemini/request.js';
import { GatewayError } from '../../../core/index.js';

type Json = Record<string, unknown>;

const weatherTool = {
  name: 'get_weather',
  description: 'Weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

describe('anthropic-messages request translation', () => {
  it('puts the system prompt first, then the turns, with sampling fields renamed', () => {
    const { value, losses } = toCanonicalRequest({
      model: 'claude-x',
      max_tokens: 300,
      system: 'You are terse.',
      temperature: 0.2,
      top_p: 0.9,
      stop_sequences: ['END', '###'],
      metadata: { user_id: 'user-7' },
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: [{ type: 'text', text: 'More?' }] },
      ],
    });
    expect(losses).to.deep.equal([]);
    expect(value).to.deep.equal({
      model: 'claude-x',
      max_tokens: 300,
      temperature: 0.2,
      top_p: 0.9,
      stop: ['END', '###'],
      user: 'user-7',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: [{ type: 'text', text: 'More?' }] },
      ],
    });
  });

  it("an assistant turn's texts: side by side they are one text, on both sides of a call two paragraphs (not run together)", () => {
    const turn = (content: unknown[]) =>
      toCanonicalRequest({ model: 'c', max_tokens: 10, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content }, { role: 'user', content: 'more' }] }).value.messages[1]!;
    // A cited answer cut into blocks reads on as one.
    expect(turn([{ type: 'text', text: 'The answer is ' }, { type: 'text', text: '42' }, { type: 'text', text: '.' }]).content).to.equal('The answer is 42.');
    const around = turn([
      { type: 'text', text: 'Let me check.' },
      { type: 'tool_use', id: 'toolu_1', name: 'w', input: {} },
      { type: 'text', text: 'The answer' },
    ]);
    expect(around.content).to.equal('Let me check.\n\nThe answer');
    // A call first, then text: nothing to separate.
    expect(turn([{ type: 'tool_use', id: 'toolu_2', name: 'w', input: {} }, { type: 'text', text: 'after' }]).content).to.equal('after');
  });

  it('maps tools, tool_choice and parallel use', () => {
    const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool] };
    const choice = (tool_choice: Json) => toCanonicalRequest({ ...base, tool_choice }).value;
    expect(toCanonicalRequest(base).value.tools).to.deep.equal([
      { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: weatherTool.input_schema } },
    ]);
    expect(choice({ type: 'auto' }).tool_choice).to.equal('auto');
    expect(choice({ type: 'any' }).tool_choice).to.equal('required');
    expect(choice({ type: 'none' }).tool_choice).to.equal('none');
    expect(choice({ type: 'tool', name: 'get_weather' }).tool_choice).to.deep.equal({ type: 'function', function: { name: 'get_weather' } });
    expect(choice({ type: 'auto', disable_parallel_tool_use: true }).parallel_tool_calls).to.equal(false);
    expect(choice({ type: 'auto' })).to.not.have.property('parallel_tool_calls');
  });

  it('a forced server tool: the choice is left out and named, as a chat back end refuses a choice naming a function it was not given', () => {
    const search = { type: 'web_search_20250305', name: 'web_search' };
    const forced = toCanonicalRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], tools: [weatherTool, search], tool_choice: { type: 'tool', name: 'web_search' } });
    expect(forced.value.tools!.map((t) => t.function.name)).to.deep.equal(['get_weather']);
    expect(forced.value).to.not.have.property('tool_choice');
    expect(forced.losses).to.include.members(['tools.web_search_20250305', 'tool_choice.tool']);
    // Server tools alone: a forced choice has nothing left to force.
    const alone = toCanonicalRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], tools: [search], tool_choice: { type: 'any' } });
    expect(alone.value).to.not.have.any.keys('tools', 'tool_choice');
    expect(alone.losses).to.include('tool_choice.without_tools');
    expect(toCanonicalRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], tools: [search], tool_choice: { type: 'auto' } }).losses).to.not.include('tool_choice.without_tools');
  });

  it("canonical -> messages: a tool call id Anthropic would refuse (another back end's functions.f:0) goes up in its pattern, the call and its result alike", () => {
    const { value } = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: null, tool_calls: [
          { id: 'functions.get_weather:0', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
          { id: 'functions.get_weather:1', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
          { id: 'call_ok-1', type: 'function', function: { name: 'get_weather', arguments: '{}' } },
        ] },
        { role: 'tool', tool_call_id: 'functions.get_weather:0', content: 'sunny' },
        { role: 'tool', tool_call_id: 'functions.get_weather:1', content: 'rain' },
        { role: 'tool', tool_call_id: 'call_ok-1', content: 'snow' },
      ],
    });
    const turns = value.messages as Array<{ content: Json[] }>;
    const uses = turns[1]!.content.map((b) => b.id as string);
    const results = turns[2]!.content.map((b) => b.tool_use_id as string);
    expect(results).to.deep.equal(uses);
    for (const id of uses) expect(id).to.match(/^[a-zA-Z0-9_-]+$/);
    expect(new Set(uses).size).to.equal(3);
    expect(uses[2]).to.equal('call_ok-1');
    expect(uses[0]).to.match(/^functions_get_weather_0_[0-9a-f]{12}$/);
  });

  it('canonical -> messages: a history with tool calls and no tools now declares the tools it named, none to be called (Anthropic refuses tool_use without tools)', () => {
    const messages = [
      { role: 'user' as const, content: 'go' },
      { role: 'assistant' as const, content: null, tool_calls: [
        { id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{}' } },
        { id: 'call_2', type: 'function' as const, function: { name: 'get_time', arguments: '{}' } },
        { id: 'call_3', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
      ] },
      { role: 'tool' as const, tool_call_id: 'call_1', content: 'sunny' },
      { role: 'tool' as const, tool_call_id: 'call_2', content: 'noon' },
      { role: 'tool' as const, tool_call_id: 'call_3', content: 'rain' },
      { role: 'user' as const, content: 'summarise' },
    ];
    const { value, losses } = fromCanonicalRequest({ model: 'm', messages });
    expect(value.tools).to.deep.equal([
      { name: 'get_weather', input_schema: { type: 'object' } },
      { name: 'get_time', input_schema: { type: 'object' } },
    ]);
    expect(value.tool_choice).to.deep.equal({ type: 'none' });
    expect(losses).to.deep.equal([]);
    // With tools offered, they are what goes up; without any call in the history, no tools at all.
    const offered = fromCanonicalRequest({ model: 'm', messages, tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }] });
    expect((offered.value.tools as Json[]).map((t) => t.name)).to.deep.equal(['get_weather']);
    expect(offered.value).to.not.have.property('tool_choice');
    expect(fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }).value).to.not.have.any.keys('tools', 'tool_choice');
  });

  it("canonical -> messages: an image's media type is what its bytes are (a wrong label, image/jpg, upper case), and a data URL's parameters are read past", () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').toString('base64');
    const jpeg = Buffer.from('ffd8ffe000104a464946000101', 'hex').toString('base64');
    const gif = Buffer.from('GIF89a\x01\x00', 'latin1').toString('base64');
    const image = (url: string) => {
      const { value } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'what?' }, { type: 'image_url', image_url: { url } }] }] });
      return ((value.messages as Json[])[0]!.content as Json[])[1]!.source as Json;
    };
    expect(image(`data:image/jpg;base64,${jpeg}`)).to.deep.equal({ type: 'base64', media_type: 'image/jpeg', data: jpeg });
    expect(image(`data:IMAGE/PNG;base64,${png}`)).to.deep.equal({ type: 'base64', media_type: 'image/png', data: png });
    expect(image(`data:image/png;base64,${jpeg}`).media_type).to.equal('image/jpeg');
    expect(image(`data:image/png;base64,${gif}`).media_type).to.equal('image/gif');
    expect(image(`data:image/png;name=a.png;base64,${png}`)).to.deep.equal({ type: 'base64', media_type: 'image/png', data: png });
    // A file part's data URL is read the same way: parameters, any case.
    const file = (url: string) => {
      const { value } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'read' }, { type: 'file', file: { file_data: url } }] }] });
      return ((value.messages as Json[])[0]!.content as Json[])[1] as Json;
    };
    expect(file('data:application/pdf;name=a.pdf;base64,JVBERg==')).to.deep.include({ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERg==' } });
    expect(file(`data:image/png;name=a.png;base64,${png}`)).to.deep.equal({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } });
    // Bytes it cannot tell keep their label, lower-cased.
    expect(image('data:image/JPG;base64,AAAA').media_type).to.equal('image/jpeg');
    expect(image('data:Image/Webp;base64,AAAA').media_type).to.equal('image/webp');
  });

  it("canonical -> messages: an image or file in an assistant turn is named as lost (the Messages API's assistant turns hold text and tool calls)", () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', content: 'draw' },
        { role: 'assistant', content: [{ type: 'text', text: 'a' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }, { type: 'file', file: { file_data: 'data:application/pdf;base64,AAAA', filename: 'x.pdf' } }] },
        { role: 'user', content: 'again' },
      ],
    });
    expect((value.messages as Json[])[1]).to.deep.equal({ role: 'assistant', content: [{ type: 'text', text: 'a' }] });
    expect(losses).to.include.members(['assistant.content_part.image_url', 'assistant.content_part.file']);
  });

  it('canonical -> messages: a tool schema that does not say its type (OpenAI takes {} or bare properties) goes up as an object schema', () => {
    const tools = [
      { type: 'function' as const, function: { name: 'a', parameters: {} } },
      { type: 'function' as const, function: { name: 'b', parameters: { properties: { x: { type: 'string' } }, required: ['x'] } } },
      { type: 'function' as const, function: { name: 'c' } },
      { type: 'function' as const, function: { name: 'd', parameters: { type: 'object', properties: {} } } },
    ];
    const { value } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'go' }], tools });
    expect((value.tools as Json[]).map((t) => t.input_schema)).to.deep.equal([
      { type: 'object' },
      { type: 'object', properties: { x: { type: 'string' } }, required: ['x'] },
      { type: 'object' },
      { type: 'object', properties: {} },
    ]);
  });

  it("canonical -> messages: chat's allowed_tools offers only the allowed tools; required is any (or the one tool), auto is auto", () => {
    const tools = ['a', 'b', 'c'].map((name) => ({ type: 'function' as const, function: { name, parameters: { type: 'object' } } }));
    const messages = [{ role: 'user' as const, content: 'go' }];
    const allowed = (mode: string, ...names: string[]) => ({ type: 'allowed_tools', allowed_tools: { mode, tools: names.map((name) => ({ type: 'function', function: { name } })) } });
    const two = fromCanonicalRequest({ model: 'm', messages, tools, tool_choice: allowed('required', 'a', 'c') });
    expect((two.value.tools as Json[]).map((t) => t.name)).to.deep.equal(['a', 'c']);
    expect(two.value.tool_choice).to.deep.equal({ type: 'any' });
    expect(two.losses).to.deep.equal([]);
    expect(fromCanonicalRequest({ model: 'm', messages, tools, tool_choice: allowed('required', 'b') }).value.tool_choice).to.deep.equal({ type: 'tool', name: 'b' });
    const auto = fromCanonicalRequest({ model: 'm', messages, tools, tool_choice: allowed('auto', 'b') });
    expect((auto.value.tools as Json[]).map((t) => t.name)).to.deep.equal(['b']);
    expect(auto.value.tool_choice).to.deep.equal({ type: 'auto' });
    // Naming no tool the request has: nothing to narrow to, every tool still offered, the choice named lost.
    const none = fromCanonicalRequest({ model: 'm', messages, tools, tool_choice: allowed('required', 'zz') });
    expect(none.losses).to.include('tool_choice');
    expect((none.value.tools as Json[]).map((t) => t.name)).to.deep.equal(['a', 'b', 'c']);
    expect(none.value).to.not.have.property('tool_choice');
  });

  it('sends no tool_choice without tools, not even none (OpenAI refuses a tool_choice without tools)', () => {
    const request = toCanonicalRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], tool_choice: { type: 'none' } }).value;
    expect(request).to.not.have.property('tool_choice');
    expect(request).to.not.have.property('tools');
  });

  it('carries no reasoning_signature for a thinking block whose signature is empty (an unsigned back end)', () => {
    const { value } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: '' }, { type: 'text', text: 'a' }] },
        { role: 'user', content: 'y' },
      ],
    });
    expect(value.messages[1]).to.deep.equal({ role: 'assistant', content: 'a', reasoning_content: 'hmm' });
  });

  it('turns tool_use blocks into tool_calls and tool_result blocks into tool messages, in order', () => {
    const { value, losses } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Checking both.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
            { type: 'tool_use', id: 'toolu_2', name: 'get_weather', input: { city: 'Rome' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' },
            { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'rain' }] },
            { type: 'text', text: 'Summarise.' },
          ],
        },
      ],
    });
    expect(losses).to.deep.equal([]);
    expect(value.messages.slice(1)).to.deep.equal([
      {
        role: 'assistant',
        content: 'Checking both.',
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { id: 'toolu_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
      { role: 'tool', tool_call_id: 'toolu_2', content: [{ type: 'text', text: 'rain' }] },
      { role: 'user', content: [{ type: 'text', text: 'Summarise.' }] },
    ]);
  });

  it('turns base64 and URL images into image_url parts (data: URL for base64)', () => {
    const { value } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
            { type: 'text', text: 'What are these?' },
          ],
        },
      ],
    });
    expect(value.messages[0]!.content).to.deep.equal([
      { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
      { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
      { type: 'text', text: 'What are these?' },
    ]);
  });

  it('carries thinking as reasoning_content with its signature, and the budget as reasoning_effort', () => {
    const { value, losses } = toCanonicalRequest({
      model: 'm',
      max_tokens: 20000,
      thinking: { type: 'enabled', budget_tokens: 10000 },
      messages: [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Let me think.', signature: 'sig-abc' },
            { type: 'text', text: 'a' },
          ],
        },
        { role: 'user', content: 'q2' },
      ],
    });
    // 10,000 travels as `medium` (which stands for 8,192): the exact budget is not carried.
    expect(losses).to.deep.equal(['thinking.budget_tokens']);
    expect(value.reasoning_effort).to.equal('medium');
    expect(value.messages[1]).to.deep.equal({ role: 'assistant', content: 'a', reasoning_content: 'Let me think.', reasoning_signature: 'sig-abc', reasoning_signature_by: 'anthropic' });
  });

  it("a signature this gateway tagged goes back with its maker; blocks signed apart, joined, keep no signature", () => {
    const turn = (content: Array<Record<string, unknown>>) =>
      toCanonicalRequest({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content }, { role: 'user', content: 'go on' }] });
    const tagged = turn([{ type: 'thinking', thinking: 'hmm', signature: 'sy1.sig.gemini.R1NJRw==' }, { type: 'text', text: 'a' }]);
    expect(tagged.value.messages[1]).to.deep.include({ reasoning_content: 'hmm', reasoning_signature: 'R1NJRw==', reasoning_signature_by: 'gemini' });
    const two = turn([
      { type: 'thinking', thinking: 'first', signature: 'SIG_A' },
      { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} },
      { type: 'thinking', thinking: 'second', signature: 'SIG_B' },
      { type: 'tool_use', id: 'toolu_2', name: 'g', input: {} },
    ]);
    expect(two.value.messages[1]).to.not.have.any.keys('reasoning_signature', 'reasoning_signature_by');
    expect(two.losses).to.include.members(['thinking.multiple_blocks', 'thinking.signatures_merged']);
  });

  it('maps thinking budgets to efforts by the documented thresholds, and back to the same effort', () => {
    expect([1024, 3999, 4000, 15999, 16000, 64000].map(effortForBudget)).to.deep.equal(['low', 'low', 'medium', 'medium', 'high', 'high']);
    for (const effort of ['low', 'medium', 'high'] as const) expect(effortForBudget(budgetForEffort(effort)!)).to.equal(effort);
  });

  it('names every loss: cache_control, metadata beyond user_id, server tools, unknown fields and blocks; top_k is carried', () => {
    const { value, losses } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      top_k: 5,
      system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral' } }],
      metadata: { user_id: 'u', trace: 'x' },
      tools: [weatherTool, { type: 'web_search_20250305', name: 'web_search' }],
      service_tier: 'auto',
      some_future_field: 1,
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'search_result', source: 's', title: 't', content: [] }] },
        { role: 'assistant', content: [{ type: 'redacted_thinking', data: 'xyz' }, { type: 'text', text: 'ok' }, { type: 'tool_use', id: 't1', name: 'get_weather', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', is_error: true, content: 'boom' }] },
      ],
    });
    expect(losses).to.have.members([
      'cache_control',
      'metadata.trace',
      'tools.web_search_20250305',
      'service_tier',
      'some_future_field',
      'content_block.search_result',
      'content_block.redacted_thinking',
    ]);
    // A failed tool call is carried: the back end's translation says whether it can tell.
    expect(value.messages.find((m) => m.role === 'tool')).to.deep.include({ content: 'boom', tool_error: true });
    expect(value.tools).to.have.length(1);
    expect(value.user).to.equal('u');
    expect(value.top_k).to.equal(5);
  });

  it("refuses a tool_result that answers no tool_use before it, naming the client's own place for it", () => {
    const refused = (messages: unknown[]) => {
      try {
        toCanonicalRequest({ model: 'm', max_tokens: 10, system: 'sys', messages });
      } catch (error) {
        return error as GatewayError;
      }
      throw new Error('not refused');
    };
    const alone = refused([{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'nope', content: 'x' }] }]);
    expect(alone).to.include({ status: 400, param: 'messages[0].content[0].tool_use_id' });
    expect(alone.message).to.include('nope');
    const later = refused([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sun' }, { type: 'tool_result', tool_use_id: 'call_2', content: 'rain' }] },
    ]);
    expect(later.param).to.equal('messages[2].content[1].tool_use_id');
    // A result of a call two turns back, a text turn between: the call is not the previous turn's.
    const stale = refused([
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sun' }] },
      { role: 'assistant', content: 'It is sunny.' },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'again' }] },
    ]);
    expect(stale.param).to.equal('messages[4].content[0].tool_use_id');
    // Two user turns in a row are one turn to Anthropic: both answer the assistant turn before them.
    expect(
      toCanonicalRequest({
        model: 'm',
        max_tokens: 10,
        messages: [
          { role: 'user', content: 'two cities?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'get_weather', input: {} }, { type: 'tool_use', id: 'b', name: 'get_weather', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'sun' }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'b', content: 'rain' }] },
        ],
      }).value.messages.filter((m) => m.role === 'tool'),
    ).to.have.length(2);
  });

  it("a document's context, and the title of a text document, are named as lost; a PDF's title goes as its file name", () => {
    const { value, losses } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', title: 'Notes', context: 'from the wiki', source: { type: 'text', media_type: 'text/plain', data: 'hello' } },
            { type: 'document', title: 'report.pdf', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } },
          ],
        },
      ],
    });
    expect(losses).to.have.members(['document.context', 'document.title']);
    expect(value.messages[0]!.content).to.deep.equal([
      { type: 'text', text: 'hello' },
      { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'report.pdf' } },
    ]);
    // Gemini's inline data has no name: lost there.
    expect(fromGemini(value).losses).to.include('file.filename');
  });

  it('asks a streaming back end for usage', () => {
    const { value } = toCanonicalRequest({ model: 'm', max_tokens: 1, stream: true, messages: [{ role: 'user', content: 'x' }] });
    expect(value.stream).to.equal(true);
    expect(value.stream_options).to.deep.equal({ include_usage: true });
  });

  describe('round trip messages -> canonical -> messages', () => {
    const cases: Array<[string, Json]> = [
      ['plain text turns with a system string', { model: 'm', max_tokens: 100, system: 'be brief', messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }, { role: 'user', content: 'bye' }] }],
      [
        'system blocks, sampling, stops, metadata.user_id',
        {
          model: 'm',
          max_tokens: 100,
          system: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }],
          temperature: 0.5,
          top_p: 0.8,
          stop_sequences: ['STOP'],
          metadata: { user_id: 'u1' },
          stream: true,
          messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
        },
      ],
      [
        'tools, tool choice, a tool round trip with thinking',
        {
          model: 'm',
          max_tokens: 4000,
          thinking: { type: 'enabled', budget_tokens: 2048 },
          tools: [weatherTool],
          tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
          messages: [
            { role: 'user', content: 'Paris?' },
            {
              role: 'assistant',
              content: [
                { type: 'thinking', thinking: 'need weather', signature: 'sig1' },
                { type: 'text', text: 'Looking.' },
                { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Paris' } },
                { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Nice' } },
              ],
            },
            {
              role: 'user',
              content: [
                { type: 'tool_result', tool_use_id: 'toolu_a', content: 'sunny', is_error: true },
                { type: 'tool_result', tool_use_id: 'toolu_b', content: [{ type: 'text', text: 'cloudy' }] },
                { type: 'text', text: 'and?' },
              ],
            },
          ],
        },
      ],
      [
        'images, base64 and URL',
        {
          model: 'm',
          max_tokens: 5,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } },
                { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
              ],
            },
          ],
        },
      ],
    ];
    for (const [name, body] of cases) {
      it(name, () => {
        const there = toCanonicalRequest(body);
        const back = fromCanonicalRequest(there.value);
        expect(there.losses, 'losses on the way in').to.deep.equal([]);
        expect(back.losses, 'losses on the way back').to.deep.equal([]);
        expect(back.value).to.deep.equal(body);
      });
    }
  });

  it('canonical -> messages names what an assistant turn cannot hold: images, a signature without reasoning', () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', content: 'draw' },
        { role: 'assistant', content: 'here', images: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } }], reasoning_content: '', reasoning_signature: 'gemini-sig' },
        { role: 'user', content: 'again' },
      ],
    });
    expect((value.messages as Array<Record<string, unknown>>)[1]).to.deep.equal({ role: 'assistant', content: 'here' });
    expect(losses).to.deep.equal(['message.images', 'reasoning_signature.without_reasoning']);
  });

  it("canonical -> messages keeps what an earlier turn refused as its text, and names the speakers' names it cannot carry", () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', name: 'alice', content: 'I like red' },
        { role: 'assistant', content: null, refusal: 'I will not say.' },
        { role: 'user', name: 'bob', content: 'why?' },
        { role: 'assistant', content: [{ type: 'text', text: 'Partly: ' }, { type: 'refusal', refusal: 'I cannot share that.' }] },
        { role: 'user', content: 'ok' },
      ],
    });
    const turns = value.messages as Array<Record<string, unknown>>;
    expect(turns[1]).to.deep.equal({ role: 'assistant', content: [{ type: 'text', text: 'I will not say.' }] });
    // A block each, as the client gave them: none run into another.
    expect(turns[3]).to.deep.equal({ role: 'assistant', content: [{ type: 'text', text: 'Partly: ' }, { type: 'text', text: 'I cannot share that.' }] });
    expect(losses).to.deep.equal(['messages.name']);
  });

  it('canonical -> messages carries parallel_tool_calls: false with or without a tool_choice', () => {
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object' } } }];
    const messages = [{ role: 'user' as const, content: 'go' }];
    expect(fromCanonicalRequest({ model: 'm', messages, tools, parallel_tool_calls: false }).value.tool_choice).to.deep.equal({ type: 'auto', disable_parallel_tool_use: true });
    expect(fromCanonicalRequest({ model: 'm', messages, tools, tool_choice: 'required', parallel_tool_calls: false }).value.tool_choice).to.deep.equal({ type: 'any', disable_parallel_tool_use: true });
    expect(fromCanonicalRequest({ model: 'm', messages, tools }).value).to.not.have.property('tool_choice');
    expect(fromCanonicalRequest({ model: 'm', messages, parallel_tool_calls: false }).value).to.not.have.property('tool_choice');
  });

  it("a thinking block with only a signature after the thinking signs it (a stream's late signature): one thinking, no loss", () => {
    const { value, losses } = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'think think', signature: '' },
            { type: 'text', text: 'calling' },
            { type: 'thinking', thinking: '', signature: 'c2ln' },
            { type: 'tool_use', id: 't1', name: 'f', input: {} },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
      ],
    });
    expect(value.messages[1]).to.deep.include({ role: 'assistant', content: 'calling', reasoning_content: 'think think', reasoning_signature: 'c2ln' });
    expect(losses).to.not.include('thinking.multiple_blocks');
    // After thinking that had its own signature, a second signed block is another block: named.
    const twice = toCanonicalRequest({
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'A', signature: 'sig1' }, { type: 'text', text: 't' }, { type: 'thinking', thinking: '', signature: 'sig2' }] },
      ],
    });
    expect(twice.losses).to.include('thinking.multiple_blocks');
  });

  it('canonical -> messages: a stop sequence Anthropic refuses (empty, only whitespace) is left out and named; fields that ask for nothing are no loss', () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
      stop: ['\n', 'END', ''],
      n: 1,
      store: false,
      logit_bias: {},
      metadata: {},
      top_logprobs: 0,
      presence_penalty: 0,
      service_tier: 'auto',
      verbosity: 'medium', // OpenAI's default
      modalities: ['text'],
    });
    expect(value.stop_sequences).to.deep.equal(['END']);
    expect(losses).to.deep.equal(['stop.whitespace']);
    const only = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stop: '\n', seed: 7, service_tier: 'flex', verbosity: 'low' });
    expect(only.value).to.not.have.property('stop_sequences');
    expect(only.losses).to.deep.equal(['stop.whitespace', 'seed', 'service_tier', 'verbosity']);
  });

  it("canonical -> messages: top_k (a Gemini-style client's topK) is not sent to Anthropic, whose current models take fewer sampling fields; the loss is named", () => {
    const { value, losses } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'hi' }], top_k: 7 });
    expect(value).to.not.have.property('top_k');
    expect(losses).to.deep.equal(['top_k']);
  });

  it('thinking turned off is named as a loss: no back end of another kind takes it alike', () => {
    const { value, losses } = toCanonicalRequest({ model: 'm', max_tokens: 10, thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'hi' }] });
    expect(value).to.not.have.property('reasoning_effort');
    expect(losses).to.deep.equal(['thinking.disabled']);
  });

  it("an image's detail level other than auto is named as a loss (Claude has none)", () => {
    const image = (detail?: string) => ({ type: 'image_url' as const, image_url: detail ? { url: 'https://a.example/b.png', detail } : { url: 'https://a.example/b.png' } });
    const sent = (detail?: string) => fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'see' }, image(detail)] }] } as never);
    expect(sent('high').losses).to.include('image_url.detail');
    expect(sent('auto').losses).to.not.include('image_url.detail');
    expect(sent().losses).to.not.include('image_url.detail');
    expect((sent('high').value.messages as Json[])[0]).to.deep.equal({ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image', source: { type: 'url', url: 'https://a.example/b.png' } }] });
  });
});

describe('anthropic usage -> canonical usage', () => {
  it('a count that is not one (a string, a negative, an absurd number), or a missing input or output count, is no usage: metering counts the call', () => {
    expect(chatUsage({ input_tokens: '30', output_tokens: '11' })).to.equal(undefined);
    expect(chatUsage({ input_tokens: 30 })).to.equal(undefined);
    expect(chatUsage({ input_tokens: 1e308, output_tokens: 1 })).to.equal(undefined);
    expect(chatUsage({ input_tokens: 30, output_tokens: 11, cache_read_input_tokens: -1 })).to.equal(undefined);
    expect(chatUsage({ input_tokens: 30, output_tokens: 11, cache_read_input_tokens: 5 })).to.deep.include({ prompt_tokens: 35, completion_tokens: 11, total_tokens: 46 });
  });
});
