import { expect } from 'chai';
import { functionsAsTools, toolCallsAsFunctionCall, toolDeltasAsFunctionCall, UNANSWERED_FUNCTION_RESULT, usesLegacyFunctions } from './chat-functions.js';
import type { ChatChunk, ChatRequest, ChatResponse } from './operations.js';

const weather = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
const time = { name: 'get_time', parameters: { type: 'object' } };

describe('the older function calling (functions, function_call) as tools and back', () => {
  it('a request without any of it comes back as it is (the same object)', () => {
    const request: ChatRequest = { model: 'm', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'x' } }] };
    expect(functionsAsTools(request)).to.equal(request);
    expect(usesLegacyFunctions(request)).to.equal(false);
  });

  it('functions become tools, function_call a tool choice, one call a turn; the request itself is not changed', () => {
    const request: ChatRequest = { model: 'm', messages: [{ role: 'user', content: 'hi' }], functions: [weather, time], function_call: { name: 'get_time' } };
    const copy = structuredClone(request);
    const out = functionsAsTools(request);
    expect(request).to.deep.equal(copy);
    expect(out).to.not.have.property('functions');
    expect(out).to.not.have.property('function_call');
    expect(out.tools).to.deep.equal([
      { type: 'function', function: weather },
      { type: 'function', function: { name: 'get_time', parameters: { type: 'object' } } },
    ]);
    expect(out.tool_choice).to.deep.equal({ type: 'function', function: { name: 'get_time' } });
    expect(out.parallel_tool_calls).to.equal(false);
    expect(usesLegacyFunctions(request)).to.equal(true);
    expect(functionsAsTools({ ...request, function_call: 'none' }).tool_choice).to.equal('none');
    expect(functionsAsTools({ ...request, function_call: 'auto' }).tool_choice).to.equal('auto');
  });

  it('beside tools: functions not already there are added, the tool choice and parallel calls stay the client\'s', () => {
    const out = functionsAsTools({
      model: 'm',
      messages: [],
      tools: [{ type: 'function', function: { name: 'get_weather' } }],
      tool_choice: 'required',
      functions: [weather, time],
      function_call: 'none',
    });
    expect(out.tools!.map((t) => t.function.name)).to.deep.equal(['get_weather', 'get_time']);
    expect(out.tool_choice).to.equal('required');
    expect(out).to.not.have.property('parallel_tool_calls');
  });

  it('a history: each assistant function_call is a tool call with an id, each function message the result of the latest unanswered call of its name', () => {
    const losses: string[] = [];
    const out = functionsAsTools(
      {
        model: 'm',
        messages: [
          { role: 'user', content: 'weather and time?' },
          { role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
          { role: 'assistant', content: 'and', function_call: { name: 'get_time', arguments: '{}' } },
          { role: 'function', name: 'get_time', content: '12:00' },
          { role: 'function', name: 'get_weather', content: 'sunny' },
          // Both answered already; no call of this name at all: neither goes up.
          { role: 'function', name: 'get_weather', content: 'again' },
          { role: 'function', name: 'unknown', content: 'orphan' },
        ],
      },
      { add: (name) => losses.push(name) },
    );
    const [, first, second, timeResult, weatherResult, ...rest] = out.messages;
    expect(first).to.deep.equal({ role: 'assistant', content: null, tool_calls: [{ id: 'call_fn_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] });
    expect(second!.tool_calls![0]!.id).to.equal('call_fn_2');
    expect(second!.content).to.equal('and');
    expect(timeResult).to.deep.equal({ role: 'tool', tool_call_id: 'call_fn_2', content: '12:00' });
    expect(weatherResult).to.deep.equal({ role: 'tool', tool_call_id: 'call_fn_1', content: 'sunny' });
    expect(rest).to.deep.equal([]);
    expect(losses).to.deep.equal([UNANSWERED_FUNCTION_RESULT, UNANSWERED_FUNCTION_RESULT]);
  });

  it('a turn with the same call given both ways is one call; a function result answers a tool call of its name; a tool result answers by id', () => {
    const call = { id: 'toolu_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
    const out = functionsAsTools({
      model: 'm',
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: null, tool_calls: [call], function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { role: 'function', name: 'get_weather', content: 'sunny' },
        { role: 'assistant', content: null, tool_calls: [{ ...call, id: 'toolu_2' }] },
        { role: 'tool', tool_call_id: 'toolu_2', content: 'rain' },
        // toolu_2 is answered by id above: this one answers nothing.
        { role: 'function', name: 'get_weather', content: 'late' },
      ],
    });
    expect(out.messages[1]).to.deep.equal({ role: 'assistant', content: null, tool_calls: [call] });
    expect(out.messages[2]).to.deep.equal({ role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' });
    expect(out.messages.slice(3)).to.deep.equal([
      { role: 'assistant', content: null, tool_calls: [{ ...call, id: 'toolu_2' }] },
      { role: 'tool', tool_call_id: 'toolu_2', content: 'rain' },
    ]);
  });

  it('an answer: the first tool call as function_call, finish function_call; later calls are reported', () => {
    const response: ChatResponse = {
      id: 'x',
      object: 'chat.completion',
      created: 1,
      model: 'm',
      choices: [
        {
          index: 0,
          finish_reason: 'tool_calls',
          message: {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'b', type: 'function', function: { name: 'get_time', arguments: '{}' } },
            ],
          },
        },
        { index: 1, finish_reason: 'stop', message: { role: 'assistant', content: 'plain' } },
      ],
    };
    expect(toolCallsAsFunctionCall(response)).to.equal('dropped');
    expect(response.choices[0]!.message).to.deep.equal({ role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
    expect(response.choices[0]!.finish_reason).to.equal('function_call');
    expect(response.choices[1]).to.deep.equal({ index: 1, finish_reason: 'stop', message: { role: 'assistant', content: 'plain' } });
    // Nothing of the older shape to make: unchanged (a relayed answer's bytes can then go as they came).
    expect(toolCallsAsFunctionCall(response)).to.equal('unchanged');
    const one: ChatResponse = { ...response, choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }] } }] };
    expect(toolCallsAsFunctionCall(one)).to.equal('changed');
  });

  it('a stream: the first call\'s pieces as function_call (name first), a later call\'s left out and reported', () => {
    const chunk = (delta: Record<string, unknown>, finish: string | null = null): ChatChunk =>
      ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) as ChatChunk;
    const opening = chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'a', type: 'function', function: { name: 'get_weather', arguments: '' } }] });
    expect(toolDeltasAsFunctionCall(opening)).to.equal('changed');
    expect(opening.choices[0]!.delta).to.deep.equal({ role: 'assistant', function_call: { name: 'get_weather', arguments: '' } });
    const piece = chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city"' } }] });
    expect(toolDeltasAsFunctionCall(piece)).to.equal('changed');
    expect(piece.choices[0]!.delta).to.deep.equal({ function_call: { arguments: '{"city"' } });
    const later = chunk({ tool_calls: [{ index: 1, id: 'b', type: 'function', function: { name: 'get_time', arguments: '{}' } }] });
    expect(toolDeltasAsFunctionCall(later)).to.equal('dropped');
    expect(later.choices[0]!.delta).to.deep.equal({});
    const end = chunk({}, 'tool_calls');
    expect(toolDeltasAsFunctionCall(end)).to.equal('changed');
    expect(end.choices[0]!.finish_reason).to.equal('function_call');
    const text = chunk({ content: 'hi' });
    expect(toolDeltasAsFunctionCall(text)).to.equal('unchanged');
    expect(text.choices[0]!.delta).to.deep.equal({ content: 'hi' });
  });
});
