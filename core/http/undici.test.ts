import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

/**
 * A provider's `env.pool()` is an undici Pool with undici's request API. The gateway loads
 * undici's modules alone (core/http/undici.ts); undici's index, which other code in this test
 * process loads, adds that API to every dispatcher, so the check runs in a process of its own.
 */
describe("the gateway's undici Pool", () => {
  it('has request(), stream() and pipeline() in a process that never loaded undici whole', async () => {
    const server = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`got ${req.method} ${req.url}`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const module = fileURLToPath(new URL('./undici.js', import.meta.url));
    const script = `
      const { Pool } = await import(${JSON.stringify(module)});
      const pool = new Pool(${JSON.stringify(origin)});
      const kinds = [typeof pool.request, typeof pool.stream, typeof pool.pipeline];
      const answer = await pool.request({ method: 'GET', path: '/hello' });
      console.log(JSON.stringify({ kinds, status: answer.statusCode, text: await answer.body.text() }));
      await pool.close();`;
    try {
      const out = await new Promise<string>((resolve, reject) =>
        execFile(process.execPath, ['--input-type=module', '-e', script], (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout))),
      );
      expect(JSON.parse(out)).to.deep.equal({ kinds: ['function', 'function', 'function'], status: 200, text: 'got GET /hello' });
    } finally {
      server.close();
    }
  });
});
