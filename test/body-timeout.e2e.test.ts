import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { UPLOAD_PREFIX } from '../core/http/multipart.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

/**
 * A client that stops sending its body midway (or declares more than it sends) on a connection it
 * keeps open gets 408 `body_timeout` in its format's shape after `server.bodyTimeoutMs` of
 * silence, and the connection is closed; a slow body that keeps coming is read to the end.
 */
describe('a request body that stops arriving', () => {
  const IDLE_MS = 400;
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, bodyTimeoutMs: ${IDLE_MS} }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ':memory:' }
plugins: [request-log, routing, openai-chat, anthropic-messages]
providers:
  - { id: mock, type: mock, models: [mock-chat, mock-whisper] }
`);
  });
  after(() => gw.stop());

  interface Exchange {
    /** Everything the gateway sent before it closed the connection. */
    text: string;
    /** Milliseconds from the last byte the client sent to the end of the connection. */
    silentMs: number;
  }

  /** Send `head`, then each piece `gapMs` apart, then nothing; resolve when the gateway closes the connection. */
  const exchange = (head: string, pieces: string[], gapMs = 0) =>
    new Promise<Exchange>((resolve, reject) => {
      const { port, hostname } = new URL(gw.url);
      const socket = net.connect(Number(port), hostname);
      let text = '';
      let lastSent = 0;
      socket.on('connect', () => {
        socket.write(head);
        lastSent = Date.now();
        let i = 0;
        const next = () => {
          if (i >= pieces.length) return;
          socket.write(pieces[i++]!);
          lastSent = Date.now();
          setTimeout(next, gapMs);
        };
        next();
      });
      socket.on('data', (chunk) => (text += chunk.toString('utf8')));
      socket.on('end', () => resolve({ text, silentMs: Date.now() - lastSent }));
      socket.on('error', reject);
    });

  const statusOf = (answer: string) => Number(/^HTTP\/1\.1 (\d{3}) /.exec(answer)?.[1]);
  const headerOf = (answer: string, name: string) => new RegExp(`\\r\\n${name}: ([^\\r]*)\\r\\n`, 'i').exec(answer)?.[1];
  const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;

  const chatBody = JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello' }] });

  it('a JSON body shorter than its Content-Length: 408 in the OpenAI shape after the silence, and the connection closes', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${chatBody.length + 50}\r\n\r\n`;
    const { text, silentMs } = await exchange(head, [chatBody]);
    expect(statusOf(text)).to.equal(408);
    expect(headerOf(text, 'connection')).to.equal('close');
    expect(headerOf(text, 'x-request-id')).to.match(/^req_/);
    expect(bodyOf(text)).to.have.nested.property('error.code', 'body_timeout');
    expect(bodyOf(text)).to.have.nested.property('error.type', 'invalid_request_error');
    expect(silentMs).to.be.at.least(IDLE_MS - 50);
    const { entries } = await gw.gateway.stores.logs.query({ limit: 10 });
    expect(entries.find((e) => e.status === 408)).to.include({ errorCode: 'body_timeout', path: '/v1/chat/completions' });
  });

  it('a chunked body that stops before its last chunk, on the Messages route: 408 in the Anthropic shape', async () => {
    const head = `POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nanthropic-version: 2023-06-01\r\n\r\n`;
    const { text } = await exchange(head, [`5\r\n{"mod\r\n`]);
    expect(statusOf(text)).to.equal(408);
    expect(bodyOf(text)).to.include({ type: 'error' });
    expect(bodyOf(text)).to.have.nested.property('error.type', 'invalid_request_error');
  });

  it('a gzip body that stops midway: 408 too', async () => {
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 500\r\n\r\n`;
    const { text } = await exchange(head, ['\x1f']);
    expect(statusOf(text)).to.equal(408);
    expect(bodyOf(text)).to.have.nested.property('error.code', 'body_timeout');
  });

  it('a multipart upload that stops midway: 408, and no spooled file is left waiting', async () => {
    const boundary = 'sy-boundary';
    const part = `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nmock-whisper\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF`;
    const head = `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${part.length + 1000}\r\n\r\n`;
    const spooled = () => readdirSync(os.tmpdir()).filter((name) => name.startsWith(UPLOAD_PREFIX));
    const before = new Set(spooled());
    const { text } = await exchange(head, [part]);
    expect(statusOf(text)).to.equal(408);
    expect(bodyOf(text)).to.have.nested.property('error.code', 'body_timeout');
    await eventually(() => spooled().every((name) => before.has(name)), 3000, 'the partial upload to be deleted');
  });

  it('a slow body that keeps coming (a piece every 50 ms, longer in all than the timeout) is read and answered', async () => {
    const pieces = chatBody.match(/.{1,3}/g)!;
    expect(pieces.length * 50).to.be.greaterThan(IDLE_MS * 2);
    const head = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${chatBody.length}\r\nConnection: close\r\n\r\n`;
    const { text } = await exchange(head, pieces, 50);
    expect(statusOf(text)).to.equal(200);
    expect(bodyOf(text)).to.have.property('object', 'chat.completion');
  });
});
