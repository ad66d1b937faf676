import { expect } from 'chai';
import { tailMember } from './json.js';

/** The value tailMember finds in `text`, parsed; undefined when it finds none. */
function found(text: string, key = 'usage', limit?: number): unknown {
  const bytes = Buffer.from(text);
  const at = tailMember(bytes, key, limit);
  return at === undefined ? undefined : JSON.parse(bytes.toString('utf8', at[0], at[1]));
}

/** Random JSON values, strings full of quotes, backslashes, braces and non-ASCII text. */
function randomValue(depth: number, rand: () => number): unknown {
  const pick = Math.floor(rand() * (depth > 3 ? 4 : 6));
  const text = () => Array.from({ length: Math.floor(rand() * 8) }, () => ['"', '\\', '{', '}', '[', ']', ':', ',', 'a', 'é', '😀', 'usage', '\n'][Math.floor(rand() * 13)]).join('');
  switch (pick) {
    case 0:
      return Math.floor(rand() * 1000);
    case 1:
      return text();
    case 2:
      return rand() < 0.5 ? null : rand() < 0.5;
    case 3:
      return -rand();
    case 4:
      return Array.from({ length: Math.floor(rand() * 4) }, () => randomValue(depth + 1, rand));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(rand() * 4); i > 0; i--) out[rand() < 0.2 ? 'usage' : text()] = randomValue(depth + 1, rand);
      return out;
    }
  }
}

describe('tailMember: a top-level member read from the end of a JSON text', () => {
  it("finds a chat answer's usage, with what follows it and spaces anywhere", () => {
    const usage = { prompt_tokens: 86, completion_tokens: 142, total_tokens: 228, prompt_tokens_details: { cached_tokens: 0 } };
    const answer = { id: 'chatcmpl-1', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' } }], usage, service_tier: 'default', system_fingerprint: 'fp' };
    expect(found(JSON.stringify(answer))).to.deep.equal(usage);
    expect(found(JSON.stringify(answer, null, 2) + '\n')).to.deep.equal(usage);
    expect(found(`  {"usage" :\t[1, {"a": "}"}] , "b":"\\"usage\\":2"}\r\n`)).to.deep.equal([1, { a: '}' }]);
    expect(found('{"usage":null}')).to.equal(null);
    expect(found('{"usage":7,"x":{"usage":8}}')).to.equal(7);
  });

  it('finds the member JSON.parse keeps when a name is given twice', () => {
    expect(found('{"usage":1,"a":2,"usage":3}')).to.equal(3);
  });

  it('finds nothing where it cannot be sure, or where there is nothing', () => {
    // A later name with an escape could spell the same name another way.
    expect(found('{"usage":1,"us\\u0061ge":2}')).to.equal(undefined);
    expect(found('{"usage":1,"a\\"b":2}')).to.equal(undefined);
    // Not an object, or no such member at the top level.
    expect(found('[{"usage":1}]')).to.equal(undefined);
    expect(found('"usage"')).to.equal(undefined);
    expect(found('{}')).to.equal(undefined);
    expect(found('{"a":{"usage":1}}')).to.equal(undefined);
    expect(found('{"a":"usage","b":":"}')).to.equal(undefined);
    expect(found('')).to.equal(undefined);
    expect(found('<html>usage</html>')).to.equal(undefined);
    // Farther from the end than the limit.
    expect(found(`{"usage":1,"pad":"${'x'.repeat(100)}"}`, 'usage', 50)).to.equal(undefined);
    expect(found(`{"usage":1,"pad":"${'x'.repeat(100)}"}`, 'usage', 200)).to.equal(1);
  });

  it('agrees with JSON.parse on thousands of random objects', () => {
    let seed = 42;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    // A name as JSON text: sometimes every character written as a \u escape ("usage" spelt so too).
    const nameText = (name: string) =>
      rand() < 0.15 ? `"${[...name].map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('')}"` : JSON.stringify(name);
    let seen = 0;
    for (let n = 0; n < 5000; n++) {
      const members: Array<[string, string]> = [];
      for (let i = Math.floor(rand() * 5); i > 0; i--) members.push([rand() < 0.3 ? 'usage' : String(randomValue(4, rand)), JSON.stringify(randomValue(0, rand))]);
      const names = members.map(([k]) => nameText(k));
      const text = `{${members.map(([, v], i) => `${names[i]}:${v}`).join(rand() < 0.5 ? ',' : ' ,\n ')}}`;
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const result = found(text);
      if (result !== undefined) {
        // When it answers, it answers what JSON.parse does.
        expect(result, text).to.deep.equal(parsed.usage);
        seen++;
      } else if ('usage' in parsed) {
        // It declines only when a name after the last member spelt "usage" holds an escape (or
        // that member is itself spelt with escapes).
        const last = names.lastIndexOf('"usage"');
        expect(
          names.slice(last + 1).some((name) => name.includes('\\')),
          text,
        ).to.equal(true);
      }
    }
    expect(seen).to.be.greaterThan(500);
  });
});
