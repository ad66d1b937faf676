/**
 * The physical limit: the least a Node proxy can do. node:http in, one undici Pool to the
 * upstream out, the request body piped up and the response piped back (undici writes it straight
 * into the client's response), hop-by-hop headers dropped and the credential replaced. No JSON is
 * parsed, nothing is logged, nothing is counted.
 *
 * Run as a process: `node dist/bench/bare-proxy.js --upstream URL [--port N]` prints `READY <url>`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { isMain } from './proc.js';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host']);

export interface BareProxy {
  url: string;
  close(): Promise<void>;
}

export async function startBareProxy(upstream: string, port = 0, host = '127.0.0.1', apiKey = 'sk-bench-upstream'): Promise<BareProxy> {
  // The same pool settings as the gateway's (core/http/pools.ts).
  const pool = new Pool(upstream, { connections: 128, pipelining: 1, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000 });
  const server = http.createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    headers.authorization = `Bearer ${apiKey}`;
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
    pool.stream(
      { method: req.method as 'POST', path: req.url ?? '/', headers, body: hasBody ? req : null },
      ({ statusCode, headers: upHeaders }) => {
        const out: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(upHeaders)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
        }
        res.writeHead(statusCode, out);
        return res;
      },
      (error) => {
        if (!error) return;
        process.stderr.write(`bare proxy: ${error.message}\n`);
        if (!res.headersSent) {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'bad gateway', type: 'bare_proxy' } }));
        } else res.destroy(error);
      },
    );
  });
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const url = `http://${host}:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.close();
    },
  };
}

if (isMain(import.meta.url)) {
  const { values } = parseArgs({ options: { upstream: { type: 'string' }, port: { type: 'string', default: '0' } } });
  if (!values.upstream) {
    process.stderr.write('usage: bare-proxy --upstream URL [--port N]\n');
    process.exit(2);
  }
  const proxy = await startBareProxy(values.upstream, Number(values.port));
  process.stdout.write(`READY ${proxy.url}\n`);
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
