import { expect } from 'chai';
import { dropUpstreamBytes, keepUpstreamBytes, upstreamBytesOf } from './passthrough.js';

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
