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
});
