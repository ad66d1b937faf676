import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { sendUpstream, UpstreamBodyTooLarge } from './client.js';

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
