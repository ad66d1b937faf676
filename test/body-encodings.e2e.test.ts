import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { startGateway, type RunningGateway } from './support/gateway.js';

/**
 * Bodies that are not plain UTF-8 JSON (compressed, another charset) take the slower reader the
 * gateway loads on first use; they must read exactly as the same body sent plainly.
 */
describe('request bodies in other encodings', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, bodyLimit: 64kb }
logging: { level: error, format: json }
storage: { driver: sqlite, url: ':memory:' }
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(async () => gw.stop());

  const chat = (text: string) => JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: text }] });

  it('reads a gzip-compressed JSON body', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipSync(chat('squeezed words')),
    });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).to.contain('squeezed words');
  });

  it('reads a JSON body in ISO-8859-1', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=iso-8859-1' },
      body: Buffer.from(chat('café crème'), 'latin1'),
    });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
    expect(body.choices[0]!.message.content).to.contain('café crème');
  });

  it('refuses bytes that are not UTF-8 with 400 invalid_json, plain or compressed, in each format; a BOM is allowed', async () => {
    const bad = Buffer.concat([Buffer.from(chat('bad ').slice(0, -4)), Buffer.from([0xff, 0xfe]), Buffer.from(' here"}]}')]);
    for (const [path, encoding, body] of [
      ['/v1/chat/completions', undefined, bad],
      ['/v1/chat/completions', 'gzip', gzipSync(bad)],
      ['/v1/messages', undefined, bad],
    ] as const) {
      const res = await fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...(encoding ? { 'content-encoding': encoding } : {}) },
        body,
      });
      const text = await res.text();
      expect(res.status, `${path} ${encoding}: ${text}`).to.equal(400);
      expect(text).to.contain('not valid utf-8 text');
    }
    const bom = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(chat('marked'))]),
    });
    expect(bom.status).to.equal(200);
  });

  it('answers a body that is not valid gzip with 400 in the OpenAI shape', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: Buffer.from('not gzip at all'),
    });
    expect(res.status).to.equal(400);
    const body = (await res.json()) as { error: { type: string; message: string } };
    expect(body.error.type).to.equal('invalid_request_error');
  });

  it('answers 413 for a small compressed body that expands past the body limit', async () => {
    const big = chat('x'.repeat(1_000_000));
    const squeezed = gzipSync(big);
    expect(squeezed.length).to.be.below(64 * 1024);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: squeezed,
    });
    expect(res.status).to.equal(413);
    expect(((await res.json()) as { error: { message: string } }).error.message).to.match(/larger than the limit/);
  });

  it('answers 415 for a charset or a content coding it cannot decode', async () => {
    const charset = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=no-such-charset' },
      body: chat('hello'),
    });
    expect(charset.status).to.equal(415);
    const coding = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'zstd-or-whatever' },
      body: chat('hello'),
    });
    expect(coding.status).to.equal(415);
    const said = ((await coding.json()) as { error: { type: string; code: string; message: string } }).error;
    expect(said.type).to.equal('invalid_request_error');
    expect(said.code).to.equal('unsupported_content_encoding');
    expect(said.message).to.include("Content-Encoding 'zstd-or-whatever'");
    // A number past what a double holds (JSON.parse makes it Infinity): out of range, not "a decimal".
    const huge = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model":"mock-chat","temperature":1e400,"messages":[{"role":"user","content":"x"}]}',
    });
    expect(huge.status).to.equal(400);
    const range = ((await huge.json()) as { error: { code: string; param: string; message: string } }).error;
    expect(range).to.include({ code: 'invalid_value', param: 'temperature' });
    expect(range.message).to.include('out of range');
  });
});
