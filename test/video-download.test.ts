import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { fetchVideo } from '../plugins/video-tasks/download.js';

/** fetchVideo against local servers: codings a CDN sends anyway, what it is asked with, and which private addresses it may reach. */
describe('video download (fetchVideo)', () => {
  const video = Buffer.from(Array.from({ length: 50_000 }, (_, i) => (i * 7) % 256));
  let server: http.Server;
  let other: http.Server;
  let base = '';
  let otherBase = '';
  let lastHeaders: http.IncomingHttpHeaders = {};
  let otherHits = 0;
  const limits = { firstByteMs: 5000, idleMs: 5000 };

  before(async () => {
    server = http.createServer((req, res) => {
      lastHeaders = req.headers;
      const coding = new URL(req.url ?? '/', 'http://x').searchParams.get('coding') ?? '';
      let body = video;
      if (coding === 'gzip') body = zlib.gzipSync(video);
      else if (coding === 'gzip, br') body = zlib.brotliCompressSync(zlib.gzipSync(video));
      else if (coding === 'deflate') body = zlib.deflateSync(video);
      else if (coding === 'deflate-raw') body = zlib.deflateRawSync(video);
      else if (coding === 'zstd') body = Buffer.from('????');
      res.writeHead(200, { 'content-type': 'video/mp4', ...(coding ? { 'content-encoding': coding === 'deflate-raw' ? 'deflate' : coding } : {}) });
      res.end(body);
    });
    other = http.createServer((_req, res) => {
      otherHits++;
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      res.end('internal-service-data');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    otherBase = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const s of [server, other]) {
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    }
  });

  const read = async (url: string, sources = { origins: [base], hosts: [] as string[] }) => {
    const res = await fetchVideo(url, new AbortController().signal, limits, undefined, sources);
    const chunks: Buffer[] = [];
    for await (const chunk of res.relay) chunks.push(Buffer.from(chunk));
    return { res, bytes: Buffer.concat(chunks) };
  };

  it('decodes what a CDN compresses anyway: gzip, several codings, zlib and raw deflate; asks with a user agent', async () => {
    for (const coding of ['', 'gzip', 'gzip, br', 'deflate', 'deflate-raw']) {
      const { bytes } = await read(`${base}/v.mp4?coding=${encodeURIComponent(coding)}`);
      expect(bytes.equals(video), coding || 'identity').to.equal(true);
    }
    expect(lastHeaders).to.include({ 'accept-encoding': 'identity', accept: '*/*', 'user-agent': 'switchyard-video-fetch' });
    const error = await read(`${base}/v.mp4?coding=zstd`).catch((e: unknown) => e);
    expect((error as Error).message).to.include('content coding the gateway cannot undo');
  });

  it("the back end's own origin may be private, not another port of its host; a host the operator opened may", async () => {
    const refused = await read(`${otherBase}/anything`).catch((e: unknown) => e);
    expect((refused as { code?: string }).code).to.equal('upstream_error');
    expect((refused as Error).message).to.include('loopback address');
    expect(otherHits).to.equal(0);
    const opened = await read(`${otherBase}/anything`, { origins: [base], hosts: ['127.0.0.1'] });
    expect(opened.bytes.toString()).to.equal('internal-service-data');
  });
});
