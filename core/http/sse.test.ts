import { expect } from 'chai';
import { readSse } from './sse.js';

async function collect(parts: string[]) {
  const encoder = new TextEncoder();
  async function* source() {
    for (const part of parts) yield encoder.encode(part);
  }
  const out = [];
  for await (const event of readSse(source())) out.push(event);
  return out;
}

describe('readSse', () => {
  it('reads events split anywhere across chunks, with LF, CRLF and CR line ends', async () => {
    const events = await collect(['da', 'ta: {"a":1}\n', '\ndata: two\r', '\n\r\nevent: done\rdata: x\r\r']);
    expect(events).to.deep.equal([{ data: '{"a":1}' }, { data: 'two' }, { event: 'done', data: 'x' }]);
  });

  it('joins multi-line data, skips comments, ignores events without data', async () => {
    const events = await collect([': keep-alive\n\n', 'event: ping\n\n', 'data: a\ndata: b\nid: 7\n\n']);
    expect(events).to.deep.equal([{ data: 'a\nb', id: '7' }]);
  });

  it('keeps a multi-byte character split between chunks intact', async () => {
    const bytes = new TextEncoder().encode('data: héllo 🙂\n\n');
    async function* source() {
      for (let i = 0; i < bytes.length; i++) yield bytes.subarray(i, i + 1);
    }
    const out = [];
    for await (const event of readSse(source())) out.push(event);
    expect(out).to.deep.equal([{ data: 'héllo 🙂' }]);
  });

  it('delivers a last event that has no trailing blank line', async () => {
    expect(await collect(['data: [DONE]'])).to.deep.equal([{ data: '[DONE]' }]);
  });

  it('drops a byte-order mark at the start of the stream only, and reads bytes that are not UTF-8 as U+FFFD', async () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf]);
    async function* source() {
      yield bom.subarray(0, 2);
      yield bom.subarray(2);
      yield new TextEncoder().encode('data: a\n\ndata: \ufeffb\n\n');
      yield new Uint8Array([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xff, 0x0a, 0x0a]);
    }
    const out = [];
    for await (const event of readSse(source())) out.push(event);
    expect(out).to.deep.equal([{ data: 'a' }, { data: '\ufeffb' }, { data: '\ufffd' }]);
  });

  it('reads the same events however a stream is cut and whichever line ends it uses (500 random streams)', async () => {
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const ends = ['\n', '\r\n', '\r'];
    for (let round = 0; round < 500; round++) {
      const expected: Array<{ event?: string; data: string }> = [];
      let text = '';
      // One line end per stream: a CR end followed by an LF end would read as one CRLF.
      const lineEnd = ends[random(3)]!;
      const end = () => lineEnd;
      for (let e = random(6); e >= 0; e--) {
        const lines = Array.from({ length: 1 + random(3) }, (_, k) => `{"n":${round},"k":${k},"s":"${['', 'x', 'xé', 'x:é', 'é🙂'][random(5)]}"}`);
        const name = random(3) === 0 ? `kind${random(4)}` : undefined;
        if (random(4) === 0) text += `: comment${end()}`;
        if (name) text += `event: ${name}${end()}`;
        for (const line of lines) text += `data: ${line}${end()}`;
        text += end();
        expected.push(name ? { event: name, data: lines.join('\n') } : { data: lines.join('\n') });
      }
      const bytes = new TextEncoder().encode(text);
      async function* source() {
        let at = 0;
        while (at < bytes.length) {
          const size = 1 + random(40);
          yield bytes.subarray(at, at + size);
          at += size;
        }
      }
      const got = [];
      for await (const event of readSse(source())) got.push(event);
      expect(got, `round ${round}: ${JSON.stringify(text)}`).to.deep.equal(expected);
    }
  });
});
