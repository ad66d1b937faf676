import { expect } from 'chai';
import { answerUsage, dropUpstreamBytes, keepUpstreamBytes, relayedAnswer, replyBytesOf, upstreamBytesOf } from './passthrough.js';
import { isGatewayError } from './errors.js';

describe('the bytes kept beside a parsed answer', () => {
  const text = '{"id":"x","choices":[{"index":0}],"usage":{"total_tokens":3}}';

  it('are read back in their format only', () => {
    const body = keepUpstreamBytes(JSON.parse(text) as object, text, 'openai-chat');
    expect(upstreamBytesOf(body, 'openai-chat')).to.equal(text);
    expect(upstreamBytesOf(body, 'gemini')).to.equal(undefined);
    expect(upstreamBytesOf({ id: 'x' }, 'openai-chat')).to.equal(undefined);
    expect(upstreamBytesOf(null, 'openai-chat')).to.equal(undefined);
    expect(upstreamBytesOf('text', 'openai-chat')).to.equal(undefined);
  });

  it('are invisible to keys, spreads, JSON and structuredClone: a changed copy is rendered from itself', () => {
    const body = keepUpstreamBytes(JSON.parse(text) as Record<string, unknown>, Buffer.from(text), 'openai-chat');
    expect(Object.keys(body)).to.deep.equal(['id', 'choices', 'usage']);
    expect(Object.getOwnPropertySymbols(body)).to.deep.equal([]);
    expect(JSON.stringify(body)).to.equal(text);
    expect(upstreamBytesOf({ ...body, id: 'y' }, 'openai-chat')).to.equal(undefined);
    expect(upstreamBytesOf(structuredClone(body), 'openai-chat')).to.equal(undefined);
  });

  it('are forgotten by dropUpstreamBytes, replaced when kept again, and kept on a frozen body too', () => {
    const body = keepUpstreamBytes(JSON.parse(text) as object, 'first', 'openai-chat');
    keepUpstreamBytes(body, 'second', 'openai-chat');
    expect(upstreamBytesOf(body, 'openai-chat')).to.equal('second');
    dropUpstreamBytes(body);
    expect(upstreamBytesOf(body, 'openai-chat')).to.equal(undefined);
    dropUpstreamBytes({});
    const frozen = Object.freeze({ id: 'z' });
    expect(upstreamBytesOf(keepUpstreamBytes(frozen, 'z', 'openai-chat'), 'openai-chat')).to.equal('z');
  });
});

describe('a relayed answer: parsed only when its body is read', () => {
  const text = '{"id":"x","choices":[{"index":0,"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}';
  const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };

  it('gives its usage and its bytes without reading its body', () => {
    const bytes = Buffer.from(text);
    const response = relayedAnswer<'chat'>(200, bytes, 'openai-chat', usage);
    expect(answerUsage('chat', response)).to.deep.equal({ inputTokens: 3, outputTokens: 2, totalTokens: 5 });
    expect(replyBytesOf(response, 'openai-chat')).to.equal(bytes);
    expect(replyBytesOf(response, 'another-format')).to.equal(undefined);
    expect(response.kind).to.equal('json');
    expect(response.status).to.equal(200);
  });

  it('reads as the parsed answer wherever something looks: the body, spreads, keys and JSON', () => {
    const response = relayedAnswer<'chat'>(200, Buffer.from(text), 'openai-chat', usage);
    expect(Object.keys(response)).to.deep.equal(['kind', 'status', 'body']);
    expect(JSON.parse(JSON.stringify(response))).to.deep.equal({ kind: 'json', status: 200, body: JSON.parse(text) });
    const copy = { ...relayedAnswer<'chat'>(200, Buffer.from(text), 'openai-chat', usage), status: 201 };
    expect(copy.body).to.deep.equal(JSON.parse(text));
    expect(answerUsage('chat', copy)).to.deep.equal({ inputTokens: 3, outputTokens: 2, totalTokens: 5 });
    // Parsed once: the same object each time, its bytes kept for the format that speaks it.
    expect(response.body).to.equal(response.body);
    expect(replyBytesOf(response, 'openai-chat')).to.deep.equal(Buffer.from(text));
  });

  it('follows a tap that changes the body: in place (dropping its bytes) or by replacing it', () => {
    const inPlace = relayedAnswer<'chat'>(200, Buffer.from(text), 'openai-chat', usage);
    const body = inPlace.body;
    body.usage = { prompt_tokens: 30, completion_tokens: 20, total_tokens: 50 };
    dropUpstreamBytes(body);
    expect(answerUsage('chat', inPlace)).to.deep.equal({ inputTokens: 30, outputTokens: 20, totalTokens: 50 });
    expect(replyBytesOf(inPlace, 'openai-chat')).to.equal(undefined);

    const replaced = relayedAnswer<'chat'>(200, Buffer.from(text), 'openai-chat', usage);
    replaced.body = { ...(JSON.parse(text) as object), usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } } as typeof replaced.body;
    expect(answerUsage('chat', replaced)).to.deep.equal({ inputTokens: 1, outputTokens: 1, totalTokens: 2 });
    expect(replyBytesOf(replaced, 'openai-chat')).to.equal(undefined);

    // A usage of its own wins, as for any answer.
    const own = { ...relayedAnswer<'chat'>(200, Buffer.from(text), 'openai-chat', usage), usage: { inputTokens: 9, outputTokens: 0, totalTokens: 9 } };
    expect(answerUsage('chat', own)).to.deep.equal({ inputTokens: 9, outputTokens: 0, totalTokens: 9 });
  });

  it('fails as an upstream_error when its body is read and is not JSON after all', () => {
    const response = relayedAnswer<'chat'>(200, Buffer.from('{"a":nope,"usage":{}}'), 'openai-chat', {});
    let thrown: unknown;
    try {
      void response.body;
    } catch (error) {
      thrown = error;
    }
    expect(isGatewayError(thrown) && thrown.code).to.equal('upstream_error');
  });
});
