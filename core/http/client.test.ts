import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import { sendUpstream, UpstreamBody, UpstreamBodyTooLarge } from './client.js';

describe('sendUpstream', () => {
  let server: http.Server;
  let pool: Pool;
  let sent: number;

  before(async () => {
    server = http.createServer((req, res) => {
      const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('size') ?? '10');
      res.writeHead(200, { 'content-type': 'application/json' });
      // Written in pieces, as a large answer arrives.
      const piece = Buffer.alloc(16 * 1024, 0x61);
      let left = size;
      const more = () => {
        while (left > 0) {
          const n = Math.min(left, piece.length);
          left -= n;
          sent += n;
          if (!res.write(piece.subarray(0, n))) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    await pool.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('reads a whole answer, and the status and headers first', async () => {
    const response = await sendUpstream(pool, { method: 'GET', path: '/?size=40000', headers: {} });
    expect(response.statusCode).to.equal(200);
    expect(response.headers['content-type']).to.equal('application/json');
    expect((await response.body.bytes()).length).to.equal(40_000);
  });

  it('refuses an answer larger than the limit, and stops reading it', async () => {
    sent = 0;
    const response = await sendUpstream(pool, { method: 'GET', path: `/?size=${64 * 1024 * 1024}`, headers: {} });
    const error = await response.body.bytes(100_000).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(UpstreamBodyTooLarge);
    // The connection was dropped: the server did not get to write its 64 MiB.
    expect(sent).to.be.below(64 * 1024 * 1024);
  });

  it('streams chunk by chunk with an async iterator', async () => {
    const response = await sendUpstream(pool, { method: 'GET', path: '/?size=100000', headers: {} });
    let total = 0;
    for await (const chunk of response.body) total += chunk.length;
    expect(total).to.equal(100_000);
  });

  it('rejects at once when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    const error = await sendUpstream(pool, { method: 'GET', path: '/', headers: {}, signal: controller.signal }).catch((e: unknown) => e);
    expect((error as Error).message).to.equal('gone');
  });
});

describe('UpstreamBody: an answer in tiny pieces', () => {
  /** A controller that records what the body asked of the connection. */
  const controller = () => {
    const calls = { pause: 0, resume: 0, abort: 0 };
    const c = { pause: () => void calls.pause++, resume: () => void calls.resume++, abort: () => void calls.abort++ } as unknown as Dispatcher.DispatchController;
    return { c, calls };
  };
  /** Buffers the body holds (each one an object of its own in memory, whatever its size). */
  const held = (body: UpstreamBody) => (body as unknown as { queue: Buffer[] }).queue.length;

  it('read whole: small pieces past the first few are kept together, in order, whatever their number', async () => {
    const { c } = controller();
    const body = new UpstreamBody(c, undefined, { bytes: 0, limit: 10_000_000 });
    const whole = body.bytes();
    let expected = '';
    for (let i = 0; i < 100_000; i++) {
      const piece = String(i % 10);
      expected += piece;
      body.push(Buffer.from(piece));
      // A large piece now and then stays where it came.
      if (i % 30_000 === 0) {
        const big = 'x'.repeat(20_000);
        expected += big;
        body.push(Buffer.from(big));
      }
    }
    // 100,000 pieces of one byte: a few dozen buffers, not 100,000.
    expect(held(body)).to.be.below(40);
    body.end();
    expect((await whole).toString()).to.equal(expected);
  });

  it('read whole: an answer in a few pieces is not copied', async () => {
    const { c } = controller();
    const body = new UpstreamBody(c);
    const whole = body.bytes();
    const piece = Buffer.from('{"id":"one piece"}');
    body.push(piece);
    body.end();
    expect(await whole).to.equal(piece);
  });

  it('streamed: a reader that lags pauses the connection by what the pieces hold, not by their bytes alone', () => {
    const { c, calls } = controller();
    const body = new UpstreamBody(c);
    for (let i = 0; i < 1000; i++) body.push(Buffer.from('a'));
    // 1,000 bytes, but a thousand buffers: past the high-water mark.
    expect(calls.pause).to.equal(1);
    const reader = body[Symbol.asyncIterator]() as unknown as { poll(): IteratorResult<Buffer> | undefined };
    for (let i = 0; i < 900; i++) reader.poll();
    expect(calls.resume).to.equal(1);
  });
});

