import { expect } from 'chai';
import { decodeCompaction, encodeCompaction, itemsToMessages, LossList, toChatRequest } from './request.js';
import { toolMediaAfter } from '../../../../core/index.js';

describe('responses request -> chat request', () => {
  it("a field the bridge does not know (Codex's client_metadata, a newer API's) is a named loss; the ones the gateway answers itself are not", () => {
    const { losses } = toChatRequest(
      { model: 'm', input: 'hi', store: true, metadata: { a: 'b' }, previous_response_id: 'resp_1', stream_options: { include_obfuscation: false }, client_metadata: { x: 'y' }, totally_unknown: 1, nothing: null },
      'm',
      false,
    );
    expect(losses).to.deep.equal(['client_metadata', 'totally_unknown']);
  });

  it('instructions first as system, a string input as one user message, the settings mapped', () => {
    const { value, losses } = toChatRequest(
      {
        model: 'x',
        instructions: 'Be terse.',
        input: 'hi',
        max_output_tokens: 40,
        temperature: 0.2,
        top_p: 0.9,
        parallel_tool_calls: false,
        reasoning: { effort: 'high', summary: 'auto' },
        user: 'u1',
      },
      'backend-model',
      true,
    );
    expect(value).to.deep.equal({
      model: 'backend-model',
      messages: [
        { role: 'system', content: 'Be terse.' },
        { role: 'user', content: 'hi' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 40,
      temperature: 0.2,
      top_p: 0.9,
      // No tools: chat completions refuses parallel_tool_calls without them.
      user: 'u1',
      reasoning_effort: 'high',
    });
    expect(losses).to.deep.equal([]);
  });

  it('function tools and tool_choice in the chat shape; hosted tools and uncarried fields named as losses', () => {
    const { value, losses } = toChatRequest(
      {
        input: 'x',
        tools: [{ type: 'function', name: 'f', parameters: { type: 'object' }, strict: true }, { type: 'file_search', vector_store_ids: ['v'] }],
        tool_choice: { type: 'function', name: 'f' },
        parallel_tool_calls: false,
        truncation: 'auto',
        background: true,
        text: { verbosity: 'low', format: { type: 'json_object' } },
      },
      'm',
      false,
    );
    expect(value.tools).to.deep.equal([{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }]);
    expect(value.tool_choice).to.deep.equal({ type: 'function', function: { name: 'f' } });
    expect(value.parallel_tool_calls).to.equal(false);
    expect(value.response_format).to.deep.equal({ type: 'json_object' });
    // Only hosted tools, all dropped: no tools left, so no parallel_tool_calls either.
    const hosted = toChatRequest({ input: 'x', tools: [{ type: 'web_search' }], parallel_tool_calls: false }, 'm', false).value;
    expect(hosted).to.not.have.any.keys('tools', 'parallel_tool_calls');
    expect(value.verbosity).to.equal('low');
    expect(losses).to.deep.equal(['tools.file_search', 'truncation', 'background']);
  });

  it("tool_choice allowed_tools goes up in chat's own allowed_tools shape; hosted tools in it are named lost", () => {
    const tools = [{ type: 'function', name: 'a', parameters: { type: 'object' } }, { type: 'function', name: 'b', parameters: { type: 'object' } }];
    const chosen = toChatRequest({ input: 'x', tools, tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'function', name: 'b' }] } }, 'm', false);
    expect(chosen.value.tool_choice).to.deep.equal({ type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'b' } }] } });
    expect(chosen.losses).to.deep.equal([]);
    const hosted = toChatRequest({ input: 'x', tools, tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'a' }, { type: 'web_search' }] } }, 'm', false);
    expect(hosted.value.tool_choice).to.deep.equal({ type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'a' } }] } });
    expect(hosted.losses).to.deep.equal(['tool_choice.allowed_tools']);
  });

  it('include message.output_text.logprobs asks chat for logprobs with top_logprobs alternatives; other include entries are named lost', () => {
    const asked = toChatRequest({ input: 'x', include: ['message.output_text.logprobs'], top_logprobs: 3 }, 'm', false);
    expect(asked.value).to.include({ logprobs: true, top_logprobs: 3 });
    expect(asked.losses).to.deep.equal([]);
    // top_logprobs alone asks the Responses API for none: nothing asked of chat, nothing lost.
    const alone = toChatRequest({ input: 'x', top_logprobs: 3 }, 'm', false);
    expect(alone.value).to.not.have.any.keys('logprobs', 'top_logprobs');
    expect(alone.losses).to.deep.equal([]);
    const other = toChatRequest({ input: 'x', include: ['message.output_text.logprobs', 'file_search_call.results'] }, 'm', false);
    expect(other.value).to.include({ logprobs: true }).and.not.have.property('top_logprobs');
    expect(other.losses).to.deep.equal(['include']);
  });

  it('items: reasoning joins the assistant turn after it, calls join the message before them, outputs become tool messages', () => {
    const losses = new LossList();
    const messages = itemsToMessages(
      [
        { role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'https://x/y.png', detail: 'low' }] },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking' }], encrypted_content: 'sig' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me check.' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'g', arguments: '{"a":1}' },
        { type: 'function_call_output', call_id: 'c1', output: 'one' },
        { type: 'function_call_output', call_id: 'c2', output: [{ type: 'input_text', text: 'two' }] },
        { type: 'web_search_call', id: 'ws' },
      ],
      losses,
    );
    expect(messages).to.deep.equal([
      { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'https://x/y.png', detail: 'low' } }] },
      {
        role: 'assistant',
        content: 'Let me check.',
        reasoning_content: 'thinking',
        reasoning_signature: 'sig',
        // Untagged: made by a back end with the Responses API of its own (see tagSignature).
        reasoning_signature_by: 'openai',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } },
          { id: 'c2', type: 'function', function: { name: 'g', arguments: '{"a":1}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'one' },
      { role: 'tool', tool_call_id: 'c2', content: 'two' },
    ]);
    expect(losses.names).to.deep.equal(['input.web_search_call']);
  });

  it('reasoning no assistant turn follows is a loss, not moved onto a later turn', () => {
    const losses = new LossList();
    const messages = itemsToMessages(
      [
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'lost' }] },
        { role: 'user', content: 'next' },
        { role: 'assistant', content: 'answer' },
      ],
      losses,
    );
    expect(messages).to.deep.equal([
      { role: 'user', content: 'next' },
      { role: 'assistant', content: 'answer' },
    ]);
    expect(losses.names).to.deep.equal(['input.reasoning']);
  });

  it("a signature alone after the turn's message (a back end that signed its answer's last text) signs the turn's reasoning; reasoning with text there is still lost", () => {
    const signed = (signature: string) => ({ type: 'reasoning', summary: [{ type: 'summary_text', text: '' }], encrypted_content: `sy1.sig.gemini.${signature}` });
    let losses = new LossList();
    let messages = itemsToMessages(
      [
        { role: 'user', content: 'q' },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'Adding up.' }] },
        { role: 'assistant', content: 'The answer is 4.' },
        signed('U0lH'),
        { role: 'user', content: 'sure?' },
      ],
      losses,
    );
    expect(messages[1]).to.deep.equal({ role: 'assistant', content: 'The answer is 4.', reasoning_content: 'Adding up.', reasoning_signature: 'U0lH', reasoning_signature_by: 'gemini' });
    expect(messages).to.have.length(3);
    expect(losses.names).to.deep.equal([]);
    // No reasoning before it: the turn gets the signature alone.
    messages = itemsToMessages([{ role: 'user', content: 'q' }, { role: 'assistant', content: 'A' }, signed('U0lH')], (losses = new LossList()));
    expect(messages[1]).to.deep.include({ role: 'assistant', content: 'A', reasoning_signature: 'U0lH' });
    // Reasoning with text after the message, another speaker next: lost, the turn's own signature kept.
    messages = itemsToMessages(
      [
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'R1' }], encrypted_content: 'sy1.sig.gemini.R1SIG' },
        { role: 'assistant', content: 'A' },
        { type: 'reasoning', summary: [{ type: 'summary_text', text: 'R2' }] },
        { role: 'user', content: 'next' },
      ],
      (losses = new LossList()),
    );
    expect(messages[0]).to.deep.include({ reasoning_content: 'R1', reasoning_signature: 'R1SIG' });
    expect(losses.names).to.deep.equal(['input.reasoning']);
  });

  it("compaction items: this gateway's become the summary; anyone else's are a loss", () => {
    const content = encodeCompaction('they talked about tea');
    expect(decodeCompaction(content)).to.equal('they talked about tea');
    expect(decodeCompaction('gAAAA-openai')).to.equal(undefined);
    expect(decodeCompaction('sy1.!!!')).to.equal(undefined);
    const losses = new LossList();
    const messages = itemsToMessages([{ type: 'compaction', encrypted_content: content }, { type: 'compaction', encrypted_content: 'gAAAA' }], losses);
    expect(messages).to.deep.equal([{ role: 'user', content: 'Summary of the earlier conversation:\nthey talked about tea' }]);
    expect(losses.names).to.deep.equal(['input.compaction']);
  });
});

describe('responses -> chat: tool outputs with images', () => {
  it('a tool message carries its text and images (a provider whose back end takes only text there moves the images after the run: toolMediaAfter)', () => {
    const losses = new LossList();
    const image = 'data:image/png;base64,AAAA';
    const messages = itemsToMessages(
      [
        { role: 'user', content: 'screenshot both' },
        { type: 'function_call', call_id: 'c1', name: 'shot', arguments: '{}' },
        { type: 'function_call', call_id: 'c2', name: 'shot', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'first' }, { type: 'input_image', image_url: image }] },
        { type: 'function_call_output', call_id: 'c2', output: 'second' },
        { role: 'user', content: 'what do you see?' },
      ],
      losses,
    );
    expect(messages.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool', 'user']);
    expect(messages[2]).to.deep.equal({ role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'first' }, { type: 'image_url', image_url: { url: image } }] });
    expect(losses.names).to.deep.equal([]);
    // For a back end whose tool results take text only: the image joins the user message after the results.
    const moved = toolMediaAfter(messages);
    expect(moved.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool', 'user']);
    expect(moved[2]).to.deep.equal({ role: 'tool', tool_call_id: 'c1', content: [{ type: 'text', text: 'first' }] });
    expect(moved[4]!.content).to.deep.equal([{ type: 'image_url', image_url: { url: image } }, { type: 'text', text: 'what do you see?' }]);
    // A run of results with nothing after it: the images in a user message of their own.
    const last = toolMediaAfter(messages.slice(0, 4));
    expect(last.map((m) => m.role)).to.deep.equal(['user', 'assistant', 'tool', 'tool', 'user']);
    expect(last[4]!.content).to.deep.equal([{ type: 'image_url', image_url: { url: image } }]);
    expect(messages[2]!.content).to.have.length(2); // the input is not changed
  });
});
