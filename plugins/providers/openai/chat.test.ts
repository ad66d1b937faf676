import { expect } from 'chai';
import type { ChatMessage } from '../../../core/index.js';
import { endpointOf } from './api.js';
import { forChatCompletions, plainTurns } from './chat.js';

describe('openai provider: messages for chat completions', () => {
  it('leaves out the fields chat completions has no place for, naming each once as a loss', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'draw a cat' },
      { role: 'assistant', content: 'Here it is.', images: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
      { role: 'assistant', content: 'And more.', reasoning_content: 'think', reasoning_signature: 'sig', reasoning_signature_by: 'anthropic' },
      { role: 'assistant', content: 'Plain.', reasoning_content: null },
      { role: 'user', content: 'another' },
      { role: 'tool', tool_call_id: 'c1', content: 'boom', tool_error: true },
    ];
    const losses: string[] = [];
    const out = forChatCompletions(messages, losses);
    expect(out).to.not.equal(messages);
    expect(out[1]).to.deep.equal({ role: 'assistant', content: 'Here it is.' });
    expect(out[2]).to.deep.equal({ role: 'assistant', content: 'And more.' });
    expect(out[3]).to.deep.equal({ role: 'assistant', content: 'Plain.' });
    expect(out[5]).to.deep.equal({ role: 'tool', tool_call_id: 'c1', content: 'boom' });
    expect(out[0]).to.equal(messages[0]);
    // Whose signature it was is the gateway's own note: gone with the signature, no loss of its own.
    expect(losses).to.deep.equal(['messages.images', 'messages.reasoning_content', 'messages.reasoning_signature', 'messages.tool_error']);
    expect(messages[1]!.images, 'the caller keeps its messages').to.exist;
  });

  it('reasoningContent (a DeepSeek-style back end): reasoning_content stays, and a turn that called tools without any gets an empty one', () => {
    const call = { id: 'c1', type: 'function' as const, function: { name: 'f', arguments: '{}' } };
    const messages: ChatMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: [call], reasoning_content: 'I should call f', reasoning_signature: 'sig' },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
      { role: 'assistant', content: null, tool_calls: [{ ...call, id: 'c2' }] },
      { role: 'tool', tool_call_id: 'c2', content: 'done again' },
      { role: 'assistant', content: 'All done.' },
    ];
    const losses: string[] = [];
    const out = forChatCompletions(messages, losses, true);
    expect(out[1]).to.deep.equal({ role: 'assistant', content: null, tool_calls: [call], reasoning_content: 'I should call f' });
    expect(out[3]).to.deep.equal({ role: 'assistant', content: null, tool_calls: [{ ...call, id: 'c2' }], reasoning_content: '' });
    expect(out[5]).to.equal(messages[5]);
    expect(losses).to.deep.equal(['messages.reasoning_signature']);
    expect(endpointOf({ id: 'p', type: 'openai', models: [], baseUrl: 'https://api.deepseek.com', reasoningContent: true }).reasoningContent).to.equal(true);
    expect(endpointOf({ id: 'p', type: 'openai', models: [], baseUrl: 'https://api.openai.com/v1' }).reasoningContent).to.equal(false);
  });

  it('sends the same array when nothing needs leaving out', () => {
    const messages: ChatMessage[] = [{ role: 'user', content: 'hi' }];
    const losses: string[] = [];
    expect(forChatCompletions(messages, losses)).to.equal(messages);
    expect(losses).to.deep.equal([]);
  });
});

describe('openai provider: the output limit field of translated calls', () => {
  it('is max_completion_tokens for api.openai.com, max_tokens elsewhere, unless set', () => {
    const of = (baseUrl: string, maxTokensField?: 'max_tokens' | 'max_completion_tokens') =>
      endpointOf({ id: 'p', type: 'openai', models: [], baseUrl, maxTokensField }).maxTokensField;
    expect(of('https://api.openai.com/v1')).to.equal('max_completion_tokens');
    expect(of('http://127.0.0.1:8000/v1')).to.equal('max_tokens');
    expect(of('https://api.openai.com/v1', 'max_tokens')).to.equal('max_tokens');
    expect(of('https://llm.internal/v1', 'max_completion_tokens')).to.equal('max_completion_tokens');
  });
});

describe('openai provider: the turns of a translated call as every chat completions server takes them', () => {
  it('text-only content as one text, a line between parts; images kept as parts; empty assistant turns left out and named', () => {
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    const messages: ChatMessage[] = [
      { role: 'system', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
      { role: 'user', content: [{ type: 'text', text: 'look' }, image] },
      { role: 'assistant', content: null },
      { role: 'assistant', content: [] },
      { role: 'assistant', content: [{ type: 'text', text: '' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'done' }] },
      { role: 'user', content: 'plain' },
    ];
    const losses: string[] = [];
    const out = plainTurns(messages, losses);
    expect(out).to.deep.equal([
      { role: 'system', content: 'a\nb' },
      { role: 'user', content: [{ type: 'text', text: 'look' }, image] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'done' },
      { role: 'user', content: 'plain' },
    ]);
    expect(losses).to.deep.equal(['messages.empty_assistant_turn']);
    // Untouched input: the same array, nothing named.
    const plain: ChatMessage[] = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }];
    const none: string[] = [];
    expect(plainTurns(plain, none)).to.equal(plain);
    expect(none).to.deep.equal([]);
  });
});
