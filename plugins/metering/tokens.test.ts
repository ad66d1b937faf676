import { expect } from 'chai';
import { countTokens } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as countO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countPromptTokens, loadTokenizer, promptTokens, TokenizerThread } from './tokens.js';

async function until(predicate: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('TokenizerThread', () => {
  it('counts exactly what the encoding counts in this thread, many counts at once', async () => {
    const thread = new TokenizerThread('cl100k_base');
    try {
      const texts = ['', 'hello world', 'Grüße, 世界! 🚀 '.repeat(50), 'lorem ipsum dolor '.repeat(6000)];
      const counts = await Promise.all(texts.map((text) => thread.count(text)));
      expect(counts).to.deep.equal(texts.map((text) => (text ? countTokens(text) : 0)));
    } finally {
      await thread.close();
    }
  });

  it('uses the encoding it is given', async () => {
    const thread = new TokenizerThread('o200k_base');
    try {
      const text = 'The quick brown fox jumps over the lazy dog, naïvely. 12345';
      expect(await thread.count(text)).to.equal(countO200k(text));
    } finally {
      await thread.close();
    }
  });

  it('stops when idle and starts again on the next count', async () => {
    const thread = new TokenizerThread('cl100k_base', 50);
    try {
      expect(thread.running).to.equal(false);
      expect(await thread.count('one two three')).to.equal(countTokens('one two three'));
      expect(thread.running).to.equal(true);
      await until(() => !thread.running);
      expect(await thread.count('four five')).to.equal(countTokens('four five'));
    } finally {
      await thread.close();
    }
  });

  it('counts a prompt as the in-thread counter does, framing included', async () => {
    const thread = new TokenizerThread('cl100k_base');
    const body = { model: 'm', messages: [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Why is the sky blue?' }] };
    try {
      expect(await countPromptTokens(thread, body)).to.equal(promptTokens(await loadTokenizer('cl100k_base'), body));
      expect(await countPromptTokens(thread, { model: 'e', input: ['a b c', 'd e'] } as never)).to.equal(countTokens('a b c\nd e\n'));
    } finally {
      await thread.close();
    }
  });

  it('answers counts still waiting with the byte bound when it is closed', async () => {
    const thread = new TokenizerThread('cl100k_base');
    const text = 'word '.repeat(200_000);
    const pending = thread.count(text);
    await thread.close();
    expect(await pending).to.be.at.most(Buffer.byteLength(text));
  });
});

describe('what metering counts when a back end reports no usage', () => {
  it('reads the prompt of a completion, a Responses call and an embeddings call', async () => {
    const { promptText } = await import('./tokens.js');
    expect(promptText({ model: 'm', prompt: 'Once upon a time' } as never).text).to.equal('Once upon a time');
    expect(promptText({ model: 'm', prompt: ['first', 'second'] } as never).text).to.equal('first\nsecond');
    const responses = promptText({
      model: 'm',
      instructions: 'Be terse.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'What is 2+2?' }] },
        { type: 'function_call', call_id: 'c1', name: 'add', arguments: '{"a":2,"b":2}' },
        { type: 'function_call_output', call_id: 'c1', output: '4' },
      ],
    } as never);
    expect(responses.text).to.contain('Be terse.').and.contain('What is 2+2?').and.contain('{"a":2,"b":2}').and.contain('4');
    expect(responses.messages).to.equal(3);
    expect(promptText({ model: 'm', input: 'plain question', max_output_tokens: 10 } as never).text).to.equal('plain question');
    expect(promptText({ model: 'e', input: ['one', 'two'] } as never).text).to.equal('one\ntwo\n');
  });

  it('reads the output of completion chunks and Responses events, and nothing from other events', async () => {
    const { deliveredText } = await import('./tokens.js');
    expect(deliveredText({ choices: [{ index: 0, text: 'hello' }] } as never)).to.equal('hello');
    expect(deliveredText({ type: 'response.output_text.delta', delta: 'wor' } as never)).to.equal('wor');
    expect(deliveredText({ type: 'response.function_call_arguments.delta', delta: '{"a"' } as never)).to.equal('{"a"');
    expect(deliveredText({ type: 'response.output_text.done', text: 'whole text again' } as never)).to.equal('');
    expect(deliveredText({ type: 'response.completed', response: { output: [] } } as never)).to.equal('');
  });

  it('reads the output of a completion and of a Response object', async () => {
    const { replyText } = await import('./tokens.js');
    expect(replyText({ object: 'text_completion', choices: [{ index: 0, text: 'done.' }] })).to.equal('done.');
    const text = replyText({
      object: 'response',
      output: [
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking' }] },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'answer' }] },
        { type: 'function_call', name: 'lookup', arguments: '{"q":1}' },
      ],
    });
    expect(text).to.contain('thinking').and.contain('answer').and.contain('lookup{"q":1}');
  });
});
