import { expect } from 'chai';
import { GatewayError } from '../errors.js';
import { guardJson, keysSpelt } from './body.js';

function codeOf(fn: () => void): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return (error as GatewayError).code;
  }
}

describe('guardJson', () => {
  it('accepts ordinary bodies up to the depth limit', () => {
    expect(codeOf(() => guardJson({ a: [{ b: { c: 1 } }] }, 4))).to.equal(undefined);
  });

  it('refuses bodies nested past the limit without recursion', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(codeOf(() => guardJson({ deep }, 64))).to.equal('json_too_deep');
    expect(codeOf(() => guardJson({ a: { b: { c: {} } } }, 3))).to.equal('json_too_deep');
  });

  it('refuses prototype-reaching keys at any depth: __proto__, and a constructor holding a prototype', () => {
    for (const inner of ['{"__proto__":{"x":1}}', '{"constructor":{"prototype":{"x":1}}}']) {
      const body = JSON.parse(`{"messages":[{"content":${inner}}]}`) as unknown;
      expect(codeOf(() => guardJson(body, 64)), inner).to.equal('forbidden_key');
    }
  });

  it('takes constructor and prototype as the ordinary keys they are alone (a tool parameter, a metadata field)', () => {
    const body = JSON.parse('{"tools":[{"function":{"parameters":{"properties":{"constructor":{"type":"string"},"prototype":{"type":"string"}}}}}],"metadata":{"prototype":"v2","constructor":"x"}}') as unknown;
    expect(guardJson(body, 64)).to.be.a('number');
  });
});

describe('keysSpelt and the relayable text of a body', () => {
  it('counts every key a JSON text spells, a repeated one twice, and nothing inside strings', () => {
    expect(keysSpelt('{}')).to.equal(0);
    expect(keysSpelt('{"a":1,"b":{"c":[{"d":"x"}]}}')).to.equal(4);
    expect(keysSpelt('{ "a" :1, "a"\n:\t2 }')).to.equal(2);
    expect(keysSpelt('{"a":"b:c","d":"\\"e\\":","f":"\\\\","g":["h",":"]}')).to.equal(4);
    expect(keysSpelt('["a", "b"]')).to.equal(0);
  });

  it('agrees with the parsed key count for texts without repeats, at every depth', () => {
    const texts = [
      '{"model":"m","messages":[{"role":"user","content":"say \\"model\\": 1"}],"stream_options":{"include_usage":true}}',
      '{"a":{"b":{"c":{"d":{}}}},"e":[[{"f":null}]],"\\u0067":1,"h\\"i":"\\\\"}',
    ];
    for (const text of texts) expect(keysSpelt(text), text).to.equal(guardJson(JSON.parse(text), 64));
    // A repeat anywhere makes the counts differ.
    for (const text of ['{"a":1,"a":2}', '{"o":{"x":1,"x":2}}', '{"mod\\u0065l":1,"model":2}', '{"l":[{"k":1,"k":1}]}']) {
      expect(keysSpelt(text), text).to.be.greaterThan(guardJson(JSON.parse(text), 64));
    }
  });
});
