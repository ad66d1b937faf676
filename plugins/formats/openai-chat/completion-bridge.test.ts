import { expect } from 'chai';
import type { ChatChunk, ChatResponse, OperationHandler, ProviderCallContext, RequestContext, UpstreamRequest } from '../../../core/index.js';
import { addUsage, chatRequestFor, completionBridge, completionLogprobs, promptsOf } from './completion-bridge.js';
import type { CompletionResponse } from './completions.js';

function context(): ProviderCallContext & { request: RequestContext } {
  return { requestId: 'r1', signal: new AbortController().signal, logger: undefined as never, request: {} as RequestContext };
}

function request(body: Record<string, unknown>, stream = false, clientWantsStreamUsage = false): UpstreamRequest<'completion'> {
  return { operation: 'completion', model: 'm', stream, body: { model: 'alias', ...body }, clientWantsStreamUsage, forwardHeaders: { 'x-hop': '1' } };
}

const logprobs = {
  content: [
    { token: 'Hi', logprob: -0.1, top_logprobs: [{ token: 'Hi', logprob: -0.1 }, { token: 'Hello', logprob: -2 }] },
    { token: ' there', logprob: -0.5, top_logprobs: [{ token: ' there', logprob: -0.5 }] },
  ],
};

function chatAnswer(overrides: Partial<ChatResponse['choices'][number]> = {}): ChatResponse {
  return {
    id: 'chatcmpl-abc',
    object: 'chat.completion',
    created: 42,
    model: 'm-2024',
    choices: [{ index: 0, message: { role: 'assistant', content: 'Hi there' }, finish_reason: 'stop', logprobs, ...overrides }],
    usage: { prompt_tokens: 4, completion_tokens: 2, total_tokens: 6 },
  };
}

describe('completion -> chat bridge', () => {
  it('makes one user message per prompt and carries the sampling fields, 16 tokens by default', () => {
    const { chat, losses } = chatRequestFor(
      { model: 'a', prompt: 'p', temperature: 0.5, top_p: 0.9, n: 2, stop: ['x'], seed: 3, user: 'u', logit_bias: { '1': 2 }, presence_penalty: 1, frequency_penalty: null },
      'the prompt',
      'back-end-model',
      false,
    );
    expect(chat).to.deep.equal({
      model: 'back-end-model',
      messages: [{ role: 'user', content: 'the prompt' }],
      temperature: 0.5,
      top_p: 0.9,
      n: 2,
      stop: ['x'],
      seed: 3,
      user: 'u',
      logit_bias: { '1': 2 },
      presence_penalty: 1,
      max_tokens: 16,
    });
    expect(losses).to.deep.equal([]);
  });

  it('names what chat cannot carry: suffix, best_of above n, prompt logprobs with echo, unknown fields', () => {
    const { chat, losses } = chatRequestFor({ model: 'a', prompt: 'p', suffix: 's', best_of: 3, logprobs: 2, echo: true, metadata: { a: 1 } }, 'p', 'm', true);
    expect(losses).to.deep.equal(['logprobs.prompt', 'suffix', 'best_of', 'metadata']);
    expect(chat).to.include({ logprobs: true, top_logprobs: 2, stream: true });
    expect(chat.stream_options).to.deep.equal({ include_usage: true });
    expect(chatRequestFor({ model: 'a', prompt: 'p', suffix: '', best_of: 1 }, 'p', 'm', false).losses).to.deep.equal([]);
  });

  it('refuses token-id prompts and max_tokens 0 on their param', () => {
    expect(promptsOf(['a', 'b'])).to.deep.equal(['a', 'b']);
    expect(() => promptsOf([1, 2])).to.throw().with.property('param', 'prompt');
    expect(() => promptsOf([[1]])).to.throw().with.property('param', 'prompt');
    expect(() => chatRequestFor({ model: 'a', prompt: 'p', max_tokens: 0 }, 'p', 'm', false)).to.throw().with.property('param', 'max_tokens');
  });

  it("maps chat logprobs to the completion API's, offsets counted from where the text starts", () => {
    expect(completionLogprobs(logprobs, 3)).to.deep.equal({
      tokens: ['Hi', ' there'],
      token_logprobs: [-0.1, -0.5],
      top_logprobs: [{ Hi: -0.1, Hello: -2 }, { ' there': -0.5 }],
      text_offset: [3, 5],
    });
    // A back end that gave none (Anthropic, Gemini): none, not an empty list that says the text had no tokens.
    expect(completionLogprobs(null, 0)).to.equal(null);
    expect(completionLogprobs({ content: null }, 0)).to.equal(null);
    expect(completionLogprobs({ content: [] }, 0)).to.deep.equal({ tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] });
  });

  it("adds usages, every detail included (cached, cache-written, reasoning)", () => {
    const sum = addUsage(addUsage(undefined, { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }), {
      prompt_tokens: 4,
      completion_tokens: 5,
      total_tokens: 9,
      prompt_tokens_details: { cached_tokens: 2 },
    });
    expect(sum).to.deep.equal({ prompt_tokens: 5, completion_tokens: 7, total_tokens: 12, prompt_tokens_details: { cached_tokens: 2 } });
  });

  it('answers a whole completion: echo, logprobs, finish reasons mapped, refusals as content_filter, the hop headers passed on', async () => {
    const seen: Array<UpstreamRequest<'chat'>> = [];
    const answers = [chatAnswer({ finish_reason: 'tool_calls' }), chatAnswer({ message: { role: 'assistant', content: null, refusal: 'no' }, finish_reason: 'stop' })];
    const chat: OperationHandler<'chat'> = async (req) => {
      seen.push(req);
      return { kind: 'json', status: 200, body: answers[seen.length - 1]! };
    };
    const ctx = context();
    const handler = completionBridge.wrap(chat, {} as never);
    const answer = await handler(request({ prompt: ['abc', 'de'], echo: true, logprobs: 1 }), ctx);
    expect(seen.map((r) => r.forwardHeaders)).to.deep.equal([{ 'x-hop': '1' }, { 'x-hop': '1' }]);
    expect(seen.map((r) => r.body.messages)).to.deep.equal([[{ role: 'user', content: 'abc' }], [{ role: 'user', content: 'de' }]]);
    if (answer.kind !== 'json') throw new Error('expected json');
    const body = answer.body as CompletionResponse;
    expect(body).to.include({ id: 'cmpl-abc', object: 'text_completion', created: 42, model: 'm-2024' });
    expect(body.choices[0]).to.deep.include({ text: 'abcHi there', index: 0, finish_reason: 'stop' });
    expect(body.choices[0]!.logprobs!.text_offset).to.deep.equal([3, 5]);
    expect(body.choices[1]).to.deep.include({ text: 'de', index: 1, finish_reason: 'content_filter' });
    expect(body.usage).to.deep.equal({ prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 });
    expect(ctx.request.losses).to.deep.equal(['logprobs.prompt', 'refusal']);
  });

  it('gives no usage when one prompt\'s answer has none that says something ({}): metering then counts the call, rather than charge that prompt nothing', async () => {
    let calls = 0;
    const chat: OperationHandler<'chat'> = async () => {
      calls++;
      const body = chatAnswer();
      if (calls === 2) body.usage = {} as never;
      return { kind: 'json', status: 200, body };
    };
    const answer = await completionBridge.wrap(chat, {} as never)(request({ prompt: ['abc', 'de'] }), context());
    if (answer.kind !== 'json') throw new Error('expected json');
    expect((answer.body as CompletionResponse).usage).to.equal(undefined);
    calls = 10; // both answers count: the sum is given
    const whole = await completionBridge.wrap(chat, {} as never)(request({ prompt: ['abc', 'de'] }), context());
    expect((whole.kind === 'json' ? (whole.body as CompletionResponse) : undefined)?.usage).to.deep.equal({ prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 });
  });

  it('streams chat chunks as text_completion chunks, with usage: null only when the client asked for usage', async () => {
    const chunks: ChatChunk[] = [
      { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
      { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [{ index: 0, delta: { content: 'Hi', reasoning_content: 'hmm' }, finish_reason: null }] },
      { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'length' }] },
      { id: 'chatcmpl-s', object: 'chat.completion.chunk', created: 7, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
    ];
    const chat: OperationHandler<'chat'> = async () => ({
      kind: 'stream',
      status: 200,
      chunks: (async function* () {
        yield* chunks;
      })(),
    });
    for (const wantsUsage of [false, true]) {
      const answer = await completionBridge.wrap(chat, {} as never)(request({ prompt: 'p' }, true, wantsUsage), context());
      if (answer.kind !== 'stream') throw new Error('expected a stream');
      const out: CompletionResponse[] = [];
      for await (const chunk of answer.chunks) out.push(chunk as CompletionResponse);
      const usageField = wantsUsage ? { usage: null } : {};
      expect(out).to.deep.equal([
        { id: 'cmpl-s', object: 'text_completion', created: 7, model: 'm', choices: [{ text: 'Hi', index: 0, logprobs: null, finish_reason: null }], ...usageField },
        { id: 'cmpl-s', object: 'text_completion', created: 7, model: 'm', choices: [{ text: '', index: 0, logprobs: null, finish_reason: 'length' }], ...usageField },
        { id: 'cmpl-s', object: 'text_completion', created: 7, model: 'm', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
      ]);
    }
  });

  it('releases the first chat stream when the completion stream is closed before it was read', async () => {
    let released = 0;
    const inner: AsyncIterator<ChatChunk> = {
      next: async () => ({ done: true, value: undefined }),
      return: async () => {
        released++;
        return { done: true, value: undefined };
      },
    };
    const chat: OperationHandler<'chat'> = async () => ({ kind: 'stream', status: 200, chunks: { [Symbol.asyncIterator]: () => inner } });
    const answer = await completionBridge.wrap(chat, {} as never)(request({ prompt: 'p' }, true), context());
    if (answer.kind !== 'stream') throw new Error('expected a stream');
    await answer.chunks[Symbol.asyncIterator]().return?.(undefined);
    expect(released).to.equal(1);
  });

  it('fails the attempt itself when the first chat call fails, so routing can move on', async () => {
    const chat: OperationHandler<'chat'> = async () => {
      throw new Error('down');
    };
    const failed = await completionBridge.wrap(chat, {} as never)(request({ prompt: 'p' }, true), context()).catch((e: unknown) => e);
    expect((failed as Error).message).to.equal('down');
  });
});
