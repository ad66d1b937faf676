import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import Koa from 'koa';
import formidable from 'formidable';
import { eventually } from '../../test/support/gateway.js';
import { GatewayError } from '../errors.js';
import { coerceFields, createMultipartReader, isUploadedFile, multipartBody, UPLOAD_PREFIX, type MultipartBody, type UploadedFile } from './multipart.js';

/** A Koa app that reads one form with the reader and answers what it read (or the error's code). */
async function serve(limit: number, dir: string, keep: MultipartBody[]) {
  const read = createMultipartReader(limit, { dir: () => dir });
  const app = new Koa();
  app.use(async (ctx) => {
    try {
      const form = await read(ctx.req, { properties: { n: { type: 'integer' }, t: { type: 'number' }, tags: { type: 'array', items: { type: 'string' } } } });
      keep.push(form);
      ctx.body = { value: form.value };
    } catch (error) {
      const gerr = error as GatewayError;
      ctx.status = gerr.status ?? 500;
      ctx.body = { code: gerr.code, message: gerr.message };
      if (!ctx.req.complete) ctx.req.resume();
    }
  });
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/` };
}

const spooled = (dir: string) => readdirSync(dir).filter((name) => name.startsWith(UPLOAD_PREFIX));

describe('multipart reader', () => {
  let dir: string;
  let server: http.Server;
  let url: string;
  const forms: MultipartBody[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'sy-multipart-'));
    ({ server, url } = await serve(64 * 1024, dir, forms));
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('spools a file to disk, types fields by the schema, and deletes the file on cleanup', async () => {
    const bytes = Buffer.alloc(10_000, 7);
    const form = new FormData();
    form.append('file', new Blob([bytes], { type: 'audio/wav' }), 'a.wav');
    form.append('n', '3');
    form.append('t', '0.5');
    form.append('tags[]', 'x');
    form.append('tags[]', 'y');
    form.append('name', 'plain');
    const res = await fetch(url, { method: 'POST', body: form });
    const body = (await res.json()) as { value: Record<string, unknown> };
    expect(res.status, JSON.stringify(body)).to.equal(200);
    expect(body.value).to.deep.include({ n: 3, t: 0.5, tags: ['x', 'y'], name: 'plain' });
    const file = forms.at(-1)!.value.file as UploadedFile;
    expect(isUploadedFile(file)).to.equal(true);
    expect(file).to.deep.include({ filename: 'a.wav', contentType: 'audio/wav', size: 10_000 });
    expect(path.dirname(file.path)).to.equal(dir);
    expect(readFileSync(file.path).equals(bytes)).to.equal(true);
    await forms.at(-1)!.cleanup();
    expect(existsSync(file.path)).to.equal(false);
  });

  it('names a file part that gave no filename after its type (file.wav), as OpenAI tells an audio format by its name', async () => {
    const boundary = 'sy-unnamed';
    const body = Buffer.concat([
      Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"\r\nContent-Type: audio/wav\r\n\r\n`),
      Buffer.alloc(100, 1),
      Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="doc"\r\nContent-Type: application/x-unknown\r\n\r\nxyz\r\n--${boundary}--\r\n`),
    ]);
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
    expect(res.status).to.equal(200);
    const form = forms.at(-1)!;
    expect((form.value.file as UploadedFile).filename).to.equal('file.wav');
    expect((form.value.doc as UploadedFile).filename).to.equal('file');
    await form.cleanup();
  });

  it('keeps a number field that does not read as one as text (validation names it)', () => {
    const value: Record<string, unknown> = { n: 'three', t: '1e-2', b: 'true' };
    coerceFields(value, { properties: { n: { type: 'integer' }, t: { type: 'number' }, b: { type: 'boolean' } } });
    expect(value).to.deep.equal({ n: 'three', t: 0.01, b: true });
  });

  it('refuses a body over the limit with 413, declared or chunked, and leaves no file behind', async () => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(100_000, 1)]), 'big.wav');
    const declared = await fetch(url, { method: 'POST', body: form });
    expect(declared.status).to.equal(413);
    expect(((await declared.json()) as { code: string }).code).to.equal('body_too_large');

    // Chunked: no Content-Length, so the bytes are counted as they arrive.
    const encoded = new Response(form);
    const type = encoded.headers.get('content-type')!;
    const raw = Buffer.from(await encoded.arrayBuffer());
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': type, 'transfer-encoding': 'chunked' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      for (let i = 0; i < raw.length; i += 8192) req.write(raw.subarray(i, i + 8192));
      req.end();
    });
    expect(status).to.equal(413);
    // formidable's own clean-up waits a tick; ours waits for the stream to close.
    await eventually(() => spooled(dir).length === 0, 5000, 'the spooled upload to be deleted');
  });

  it('reads a form compressed with gzip, deflate or br; the limit counts its decoded bytes; an unknown coding is a 415, a corrupt one a 400', async () => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(10_000, 9)], { type: 'audio/wav' }), 'a.wav');
    form.append('n', '4');
    const encoded = new Response(form);
    const type = encoded.headers.get('content-type')!;
    const raw = Buffer.from(await encoded.arrayBuffer());
    const post = (body: Buffer, coding: string) =>
      fetch(url, { method: 'POST', headers: { 'content-type': type, 'content-encoding': coding }, body });
    for (const [coding, pack] of [
      ['gzip', zlib.gzipSync],
      ['deflate', zlib.deflateSync],
      ['br', zlib.brotliCompressSync],
    ] as const) {
      const res = await post(pack(raw), coding);
      const body = (await res.json()) as { value: Record<string, unknown> };
      expect(res.status, `${coding}: ${JSON.stringify(body)}`).to.equal(200);
      expect(body.value).to.deep.include({ n: 4 });
      const file = forms.at(-1)!.value.file as UploadedFile;
      expect(file).to.deep.include({ filename: 'a.wav', size: 10_000 });
      await forms.at(-1)!.cleanup();
    }
    // 100 KB of file in 200 bytes: over the 64 KiB limit once decoded.
    const big = new FormData();
    big.append('file', new Blob([Buffer.alloc(100_000, 0)]), 'big.wav');
    const bigEncoded = new Response(big);
    const bigType = bigEncoded.headers.get('content-type')!;
    const bomb = zlib.gzipSync(Buffer.from(await bigEncoded.arrayBuffer()));
    expect(bomb.length).to.be.below(1000);
    const refused = await fetch(url, { method: 'POST', headers: { 'content-type': bigType, 'content-encoding': 'gzip' }, body: bomb });
    expect(refused.status).to.equal(413);
    await refused.arrayBuffer();
    expect((await post(raw, 'zstd')).status).to.equal(415);
    const corrupt = await post(Buffer.from('not gzip at all'), 'gzip');
    expect(corrupt.status).to.equal(400);
    expect(((await corrupt.json()) as { message: string }).message).to.include('not valid gzip');
    await eventually(() => spooled(dir).length === 0, 5000, 'the spooled uploads to be deleted');
  });

  it('answers 415 for a body that is not multipart/form-data', async () => {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).to.equal(415);
  });

  it('refuses a form of more fields than it takes as that, not as a body too large', async () => {
    const roomy = await serve(1024 * 1024, dir, []);
    try {
      const form = new FormData();
      for (let i = 0; i < 1100; i++) form.append(`f${i}`, 'x');
      const res = await fetch(roomy.url, { method: 'POST', body: form });
      expect(res.status).to.equal(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body.code).to.equal('invalid_request');
      expect(body.message).to.include('more fields than the gateway accepts');
    } finally {
      roomy.server.closeAllConnections();
      await new Promise<void>((resolve) => roomy.server.close(() => resolve()));
    }
  });

  it('refuses a __proto__ field', async () => {
    const form = new FormData();
    form.append('__proto__', 'x');
    const res = await fetch(url, { method: 'POST', body: form });
    expect(res.status).to.equal(400);
    expect(((await res.json()) as { code: string }).code).to.equal('forbidden_key');
  });
});

describe('multipartBody', () => {
  it('encodes fields and files with the exact announced length, readable by a multipart parser', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sy-multipart-enc-'));
    try {
      const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
      const filePath = path.join(dir, 'x');
      writeFileSync(filePath, bytes);
      const upload: UploadedFile = { kind: 'uploaded-file', path: filePath, filename: 'we"ird\r\n.wav', contentType: 'audio/wav', size: bytes.length };
      const form = multipartBody([
        { name: 'model', value: 'whisper-1' },
        { name: 'file', file: upload },
        { name: 'timestamp_granularities[]', value: 'word' },
      ]);
      const chunks: Buffer[] = [];
      for await (const chunk of form.stream()) chunks.push(Buffer.from(chunk));
      const all = Buffer.concat(chunks);
      expect(all.length).to.equal(form.length);
      // A second stream gives the same bytes (a retry sends the form again).
      const again: Buffer[] = [];
      for await (const chunk of form.stream()) again.push(Buffer.from(chunk));
      expect(Buffer.concat(again).equals(all)).to.equal(true);

      const parsed = await new Promise<[formidable.Fields, formidable.Files]>((resolve, reject) => {
        const server = http.createServer((req, res) => {
          formidable({ uploadDir: dir }).parse(req).then(resolve, reject).finally(() => res.end());
        });
        server.listen(0, '127.0.0.1', () => {
          const req = http.request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, {
            method: 'POST',
            headers: { 'content-type': form.contentType, 'content-length': String(form.length) },
          });
          req.on('response', (res) => {
            res.resume();
            server.close();
          });
          req.end(all);
        });
      });
      const [fields, files] = parsed;
      expect(fields.model).to.deep.equal(['whisper-1']);
      expect(fields['timestamp_granularities[]']).to.deep.equal(['word']);
      const received = files.file![0]!;
      expect(received.originalFilename).to.equal('we"ird%0D%0A.wav');
      expect(readFileSync(received.filepath).equals(bytes)).to.equal(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
