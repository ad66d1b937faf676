import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGateway, eventually, type RunningGateway } from './support/gateway.js';

const UPSTREAM_KEY = 'sk-upstream-bytes-0123456789';

/**
 * A stream of bytes (speech audio) that breaks after it began has no place for an error event:
 * the client must see a broken transfer, never a complete-looking file with error text inside,
 * and the gateway must call it the back end's failure.
 */
describe('a byte stream that fails midway', () => {
  let upstream: http.Server;
  let gw: RunningGateway;
  let mode: 'cut' | 'whole' = 'cut';
  const head = Buffer.concat([Buffer.from('RIFF'), Buffer.alloc(96, 7)]);

  before(async () => {
    upstream = http.createServer((req, res) => {
      req.resume();
      if (req.headers.authorization !== `Bearer ${UPSTREAM_KEY}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"bad key","type":"invalid_request_error"}}');
        return;
      }
      res.writeHead(200, { 'content-type': 'audio/wav', 'transfer-encoding': 'chunked' });
      res.write(head);
      if (mode === 'whole') res.end(Buffer.alloc(100, 1));
      else setImmediate(() => res.socket?.destroy());
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const port = (upstream.address() as AddressInfo).port;
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { driver: sqlite, url: ':memory:' }
providers:
  - { id: up, type: openai, baseUrl: 'http://127.0.0.1:${port}/v1', apiKey: ${UPSTREAM_KEY}, models: [tts-up] }
`);
  });
  after(async () => {
    await gw?.stop();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  const speak = () =>
    fetch(`${gw.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-up', input: 'hello there', voice: 'nova', response_format: 'wav' }),
    });

  it('relays a whole answer as it is', async () => {
    mode = 'whole';
    const res = await speak();
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('audio/wav');
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.length).to.equal(head.length + 100);
  });

  it('cuts the connection (no error text in the audio) and logs an upstream error', async () => {
    mode = 'cut';
    const res = await speak();
    expect(res.status).to.equal(200);
    let received = Buffer.alloc(0);
    let failed = false;
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) received = Buffer.concat([received, chunk]);
    } catch {
      failed = true;
    }
    expect(failed, 'the transfer must end broken').to.equal(true);
    expect(received.toString('latin1')).to.not.contain('error');
    expect(received.subarray(0, head.length).equals(head)).to.equal(true);
    const failure = (l: Record<string, unknown>) => String(l.message).startsWith('stream failed');
    await eventually(() => gw.logs.some(failure), 3000, 'the stream failure log line');
    const line = gw.logs.find(failure)!;
    expect(line.code).to.equal('upstream_error');
    expect(gw.logs.some((l) => l.message === 'unhandled error')).to.equal(false);
  });
});
