import { expect } from 'chai';
import { dropUpstreamBytes, keepUpstreamBytes, parseBackEndJson, upstreamBytesOf, withMembers } from './passthrough.js';

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

describe('withMembers: a JSON object\'s text with some top-level members set, the rest as written', () => {
  it('replaces a member where it stands and adds a missing one at the end; everything else keeps its spelling', () => {
    const raw = ' {\n  "messages": [{"role":"user","content":"a } ] \\" { [ quote"}],\n  "model" : "alias",\n  "seed": 9223372036854775807,\n  "x": 1.0e-7\n}\n';
    const out = withMembers(raw, { model: 'gpt-4o-mini' })!;
    expect(out).to.equal(raw.replace('"alias"', '"gpt-4o-mini"'));
    const added = withMembers(raw, { model: 'm', stream_options: { include_usage: true } })!;
    expect(added).to.include('"seed": 9223372036854775807').and.include('"x": 1.0e-7');
    expect(JSON.parse(added)).to.deep.equal({ ...JSON.parse(raw), model: 'm', stream_options: { include_usage: true } });
    expect(withMembers('{}', { model: 'm' })).to.equal('{"model":"m"}');
    expect(withMembers('{ }', { a: 1, b: [2] })).to.equal('{ "a":1,"b":[2]}');
    expect(withMembers('[1]', { a: 1 })).to.equal(undefined);
    expect(withMembers(raw, {})).to.equal(raw);
  });

  it('gives what a parse and the members spread over it give, for bodies of every shape', () => {
    // A deterministic generator of JSON values (no Math.random: the same cases every run).
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    const strings = ['', 'model', 'a"b', 'c\\', '}{][', '\u2028', 'é', 'x\\"y', ',:'];
    const value = (depth: number): unknown => {
      const r = next();
      if (depth > 3 || r < 0.3) return [null, true, false, 0, -1.5e-7, 123456, strings[Math.floor(next() * strings.length)]][Math.floor(next() * 7)];
      if (r < 0.65) return Array.from({ length: Math.floor(next() * 4) }, () => value(depth + 1));
      const object: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 4); i > 0; i--) object[strings[Math.floor(next() * strings.length)]!] = value(depth + 1);
      return object;
    };
    for (let n = 0; n < 500; n++) {
      const body: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 6); i > 0; i--) body[['model', 'messages', 'stream', 'stream_options', 'tools', 'a"b'][Math.floor(next() * 6)]!] = value(0);
      const members = next() < 0.5 ? { model: 'target' } : { model: 'target', stream_options: { include_usage: true } };
      for (const text of [JSON.stringify(body), JSON.stringify(body, null, next() < 0.5 ? 2 : '\t')]) {
        const out = withMembers(text, members)!;
        expect(JSON.parse(out), text).to.deep.equal({ ...body, ...members });
      }
    }
  });
});

describe("parseBackEndJson: JSON a back end wrote, Python's non-finite numbers read as null", () => {
  it('reads NaN and -Infinity values as null, and leaves the same words inside strings as they are', () => {
    expect(parseBackEndJson('{"a":1}')).to.deep.equal({ a: 1 });
    expect(parseBackEndJson('{"content":"x = [1,NaN] and {\\"y\\":-Infinity}","lp":-Infinity,"v":[NaN, 2, Infinity]}')).to.deep.equal({
      content: 'x = [1,NaN] and {"y":-Infinity}',
      lp: null,
      v: [null, 2, null],
    });
    // A string ending in an escaped backslash ends there; what follows is outside it.
    expect(parseBackEndJson('{"s":"\\\\","t":NaN}')).to.deep.equal({ s: '\\', t: null });
    // An unterminated string: not JSON, read in one pass (each quote after it is not a new string to try).
    expect(() => parseBackEndJson(`{"a":NaN,"b":${'\\"'.repeat(50_000)}`)).to.throw(SyntaxError);
    expect(() => parseBackEndJson('{"a":NaNa}')).to.throw(SyntaxError);
    expect(() => parseBackEndJson('<html>')).to.throw(SyntaxError);
  });
});
