import { expect } from 'chai';
import { isBase64Vector } from './embeddings.js';

describe('openai provider: a base64 embedding', () => {
  it('is canonical base64 of whole float32s, and nothing else', () => {
    const vector = Buffer.from(new Float32Array([0.5, -1.25, 3]).buffer).toString('base64');
    expect(isBase64Vector(vector)).to.equal(true);
    expect(isBase64Vector('')).to.equal(true);
    expect(isBase64Vector('AAAAAA==')).to.equal(true); // 4 bytes: one float32
    expect(isBase64Vector('AAAAAAA=')).to.equal(false); // 5 bytes: not whole float32s
    expect(isBase64Vector('AAAA')).to.equal(false); // 3 bytes
    for (const bad of ['AAA', 'AA=A', 'A===', '=AAA', 'AAAA AAA', 'AAAA-AAA', 'AAAAAAA\u00e9'])
      expect(isBase64Vector(bad), bad).to.equal(false);
    expect(isBase64Vector(Buffer.alloc(6144, 7).toString('base64'))).to.equal(true);
  });

  it('refuses base64 of a float32 that is NaN or an infinity, as a vector of numbers is refused', () => {
    const of = (values: number[]) => Buffer.from(new Float32Array(values).buffer).toString('base64');
    for (const bad of [NaN, Infinity, -Infinity]) {
      expect(isBase64Vector(of([0.5, bad, 3])), String(bad)).to.equal(false);
      expect(isBase64Vector(of([...new Array<number>(20_000).fill(0.25), bad])), `${bad} in a long vector`).to.equal(false);
    }
    // A NaN of any payload, the sign bit set or not.
    for (const bits of [0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff]) {
      const bytes = Buffer.alloc(8);
      bytes.writeUInt32LE(bits, 4);
      expect(isBase64Vector(bytes.toString('base64')), bits.toString(16)).to.equal(false);
    }
    // The largest finite values and the smallest subnormals are numbers.
    expect(isBase64Vector(of([3.4028234663852886e38, -3.4028234663852886e38, 1e-45, -0, 0]))).to.equal(true);
  });

  it('refuses base64 whose unused bits are not zero (it does not come back the same)', () => {
    expect(isBase64Vector('AAAAAA==')).to.equal(true);
    expect(isBase64Vector('AAAAAB==')).to.equal(false);
    expect(isBase64Vector('AAAAAAAAAAA=')).to.equal(true); // 8 bytes: two float32s
    expect(isBase64Vector('AAAAAAAAAAB=')).to.equal(false);
    // Longer than the checker's buffer: decoded into one of its own.
    const long = Buffer.from(new Float32Array(20_000).map((_, i) => i / 7).buffer).toString('base64');
    expect(isBase64Vector(long)).to.equal(true);
    expect(isBase64Vector(`${long.slice(0, -4)}AAA-`)).to.equal(false);
    expect(isBase64Vector(`${long.slice(0, -8)}AA_AAAAA`)).to.equal(false);
    expect(isBase64Vector(`${long.slice(0, 4000)}=${long.slice(4001)}`)).to.equal(false); // a '=' inside
  });

  it('agrees on 100,000 random short strings with the grouped pattern, whole float32s and zero unused bits', () => {
    const grouped = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
    const alphabet = 'ABab09+/=-_ ';
    let seed = 11;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    for (let i = 0; i < 100_000; i++) {
      let text = '';
      for (let j = random(17); j > 0; j--) text += alphabet[random(alphabet.length)];
      const expected = grouped.test(text) && Buffer.byteLength(text, 'base64') % 4 === 0 && unusedBitsZero(text) && finite(text);
      expect(isBase64Vector(text), JSON.stringify(text)).to.equal(expected);
    }
  });
});

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Whether the bits a padded base64 text does not use are zero: 4 of the last character before `==`, 2 before `=`. */
function unusedBitsZero(text: string): boolean {
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (pad === 0) return true;
  const last = ALPHABET.indexOf(text[text.length - pad - 1]!);
  return (last & (pad === 2 ? 0b1111 : 0b11)) === 0;
}

/** Whether every float32 a base64 text decodes to is finite. */
function finite(text: string): boolean {
  const bytes = Buffer.from(text, 'base64');
  for (let i = 0; i + 4 <= bytes.length; i += 4) if (!Number.isFinite(bytes.readFloatLE(i))) return false;
  return true;
}
