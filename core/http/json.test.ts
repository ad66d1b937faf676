import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { postJson, readJson } from './json.js';

describe('postJson', () => {
  let server: http.Server;
  let pool: Pool;
  const seen: http.IncomingHttpHeaders[] = [];

  before(async () => {
    server = http.createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  after(async () => {
    await pool.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const post = async (headers: Record<string, string>, stream?: boolean) => {
    seen.length = 0;
    const response = await postJson(pool, { path: '/generate', headers, body: { prompt: 'hi' }, signal: new AbortController().signal, secrets: [], stream });
    expect((await readJson(response, new AbortController().signal)).parsed).to.deep.equal({ ok: true });
    return seen[0]!;
  };

  it('sends its JSON body as application/json when the provider named no type (a third party that gave only its credentials)', async () => {
    const headers = await post({ authorization: 'Bearer vendor-key' });
    expect(headers['content-type']).to.equal('application/json');
    expect(headers.accept).to.equal('application/json');
    expect((await post({ authorization: 'Bearer vendor-key' }, true)).accept).to.equal('text/event-stream');
  });

  it("keeps a type (and an accept) the provider named, in any case, once", async () => {
    const raw: string[][] = [];
    server.prependOnceListener('request', (req: http.IncomingMessage) => raw.push(req.rawHeaders));
    expect((await post({ 'Content-Type': 'application/vnd.acme+json' }))['content-type']).to.equal('application/vnd.acme+json');
    expect(raw[0]!.filter((name) => name.toLowerCase() === 'content-type')).to.have.length(1);
    expect((await post({ 'content-type': 'application/json; charset=utf-8' }))['content-type']).to.equal('application/json; charset=utf-8');
    // An accept of its own, in any case, once.
    server.prependOnceListener('request', (req: http.IncomingMessage) => raw.push(req.rawHeaders));
    expect((await post({ Accept: 'application/x-ndjson' })).accept).to.equal('application/x-ndjson');
    expect(raw[1]!.filter((name) => name.toLowerCase() === 'accept')).to.have.length(1);
  });
});
