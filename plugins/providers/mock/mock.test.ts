import { expect } from 'chai';
import type { ChatChunk, ChatRequest } from '../../../core/index.js';
import { mockChat, plan, tokenize } from './chat.js';

const ask = (content: string, extra: Partial<ChatRequest> = {}): ChatRequest => ({ model: 'm', messages: [{ role: 'user', content }], ...extra });
const context = { requestId: 'r', signal: new AbortController().signal, logger: undefined as never, request: undefined as never };

describe('mock provider', () => {
  it('echoes the last user message, deterministically', () => {
    const a = plan(ask('the same words'));
    const b = plan(ask('the same words'));
    expect(a).to.deep.equal(b);
    expect(a.tokens.join('')).to.equal('the same words');
    expect(a.finish).to.equal('stop');
    expect(tokenize(' a  b c')).to.deep.equal([' a', '  b', ' c']);
  });

  it('cuts at max_tokens with finish length, and at a stop sequence', () => {
    expect(plan(ask('a b c d', { max_tokens: 3 }))).to.deep.include({ finish: 'length' });
    expect(plan(ask('a b c d', { max_completion_tokens: 1 })).tokens).to.deep.equal(['a']);
    expect(plan(ask('alpha STOP beta', { stop: ['STOP'] })).tokens.join('')).to.equal('alpha');
  });

  it('names the stop sequence it cut at (the earliest in the text), and none when max_tokens cut first', async () => {
    expect(plan(ask('one two three four', { stop: ['four', 'two'] })).stopSequence).to.equal('two');
    expect(plan(ask('one two three', { stop: ['nine'] })).stopSequence).to.equal(undefined);
    expect(plan(ask('one two three', { stop: ['three'], max_tokens: 1 })).stopSequence).to.equal(undefined);
    const handler = mockChat({ latencyMs: 0, chunkDelayMs: 0 });
    const json = await handler({ operation: 'chat', model: 'm', stream: false, body: ask('one two three', { stop: 'three' }), clientWantsStreamUsage: false, forwardHeaders: {} }, context);
    expect(json.kind === 'json' && json.body.choices[0]?.stop_sequence).to.equal('three');
    const streamed = await handler({ operation: 'chat', model: 'm', stream: true, body: ask('one two three', { stop: 'three' }), clientWantsStreamUsage: false, forwardHeaders: {} }, context);
    const finals: unknown[] = [];
    if (streamed.kind === 'stream') for await (const chunk of streamed.chunks) for (const c of chunk.choices) if (c.finish_reason) finals.push(c.stop_sequence);
    expect(finals).to.deep.equal(['three']);
  });

  it('calls the offered tool with its required fields filled, and speaks after a tool result', () => {
    const tools = [{ type: 'function' as const, function: { name: 'f', parameters: { type: 'object', required: ['q', 'n'], properties: { q: { type: 'string' }, n: { type: 'integer' } } } } }];
    const call = plan(ask('find it', { tools }));
    expect(call.finish).to.equal('tool_calls');
    expect(JSON.parse(call.toolCall!.function.arguments)).to.deep.equal({ q: 'find it', n: 1 });
    expect(plan(ask('find it', { tools, tool_choice: 'none' })).finish).to.equal('stop');
    const after = plan({
      model: 'm',
      tools,
      messages: [
        { role: 'user', content: 'find it' },
        { role: 'assistant', content: null, tool_calls: [call.toolCall!] },
        { role: 'tool', tool_call_id: call.toolCall!.id, content: 'found' },
      ],
    });
    expect(after.finish).to.equal('stop');
    expect(after.tokens.join('')).to.equal('found');
  });

  it('streams role, one chunk per token, the finish, then a usage-only chunk', async () => {
    const handler = mockChat({ latencyMs: 0, chunkDelayMs: 0 });
    const response = await handler({ operation: 'chat', model: 'm', stream: true, body: ask('x y'), clientWantsStreamUsage: false, forwardHeaders: {} }, context);
    expect(response.kind).to.equal('stream');
    const chunks: ChatChunk[] = [];
    if (response.kind === 'stream') for await (const c of response.chunks) chunks.push(c);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? null)).to.deep.equal(['', 'x', ' y', null, null]);
    expect(chunks[3]!.choices[0]!.finish_reason).to.equal('stop');
    expect(chunks[4]!.choices).to.deep.equal([]);
    expect(chunks[4]!.usage).to.include({ completion_tokens: 2 });
  });

  it('stops streaming when the call is aborted between chunks', async () => {
    const controller = new AbortController();
    const handler = mockChat({ latencyMs: 0, chunkDelayMs: 50 });
    const response = await handler({ operation: 'chat', model: 'm', stream: true, body: ask('a b c d e f'), clientWantsStreamUsage: false, forwardHeaders: {} }, { ...context, signal: controller.signal });
    const seen: unknown[] = [];
    const error = await (async () => {
      if (response.kind !== 'stream') return;
      for await (const c of response.chunks) {
        seen.push(c);
        controller.abort();
      }
    })().catch((e: unknown) => e);
    expect((error as Error).name).to.equal('AbortError');
    expect(seen).to.have.length(1);
  });
});
