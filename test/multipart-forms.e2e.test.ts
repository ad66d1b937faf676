import { expect } from 'chai';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { solidPng } from '../plugins/providers/mock/png.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { repoRoot } from './support/paths.js';

/**
 * The multipart routes (transcriptions, translations, image edits, video creation) against
 * forms the official clients never send: a part without a name, a file where a text field
 * goes, a field sent twice. Each is a 400 in the OpenAI error shape, never a 500, never an
 * error that shows the gateway's spooled copy of an upload; and the spooled files go.
 */

const KEY = 'sk-multipart-forms-000000001';
const WAV = readFileSync(path.join(repoRoot, 'test', 'fixtures', 'tone-1s-8k.wav'));
const PNG = solidPng(8, 8, [10, 20, 30]);

type ApiError = InstanceType<typeof OpenAI.APIError>;

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** One part of a hand-made form: its raw header lines and its bytes. */
interface RawPart {
  headers: string[];
  data: Buffer | string;
}

const field = (name: string, value: string): RawPart => ({ headers: [`Content-Disposition: form-data; name="${name}"`], data: value });
const file = (name: string, filename: string, data: Buffer, type = 'application/octet-stream'): RawPart => ({
  headers: [`Content-Disposition: form-data; name="${name}"; filename="${filename}"`, `Content-Type: ${type}`],
  data,
});

/** POST a form written byte by byte (a part may lack what FormData always writes), on a real socket. */
function postRaw(url: string, route: string, parts: RawPart[]): Promise<{ status: number; text: string; json: () => ErrorBody }> {
  const boundary = 'sy-test-boundary-7f3a';
  const pieces: Buffer[] = [];
  for (const part of parts) {
    pieces.push(Buffer.from(`--${boundary}\r\n${part.headers.map((h) => `${h}\r\n`).join('')}\r\n`));
    pieces.push(typeof part.data === 'string' ? Buffer.from(part.data) : part.data);
    pieces.push(Buffer.from('\r\n'));
  }
  pieces.push(Buffer.from(`--${boundary}--\r\n`));
  const body = Buffer.concat(pieces);
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(body.length) },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode!, text, json: () => JSON.parse(text) as ErrorBody });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** POST a FormData with fetch. */
async function postForm(url: string, route: string, form: FormData): Promise<{ status: number; text: string; json: () => ErrorBody }> {
  const res = await fetch(`${url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: form });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as ErrorBody };
}

function formOf(fields: Record<string, string>, files: Array<[string, Buffer, string]>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const [name, bytes, filename] of files) form.append(name, new Blob([bytes], { type: filename.endsWith('.png') ? 'image/png' : 'audio/wav' }), filename);
  return form;
}

async function expectApiError(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    return error as ApiError;
  }
  throw new Error('expected the call to fail');
}

/** Uploads go to os.tmpdir() (read per request): a folder of this test's own, to see them go. */
let uploadDir: string;
let savedTmp: string | undefined;
const spooled = () => readdirSync(uploadDir);

describe('multipart forms the clients never send (real socket, official openai client where it applies)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - routing
  - metering
  - { name: video-tasks, options: { pollIntervalMs: 20, maxPollIntervalMs: 50, staleAfterMs: 0 } }
  - openai-chat
  - video-openai
auth:
  keys: [{ name: forms, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-whisper, mock-image, mock-video] }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    uploadDir = mkdtempSync(path.join(os.tmpdir(), 'sy-forms-uploads-'));
    savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = uploadDir;
  });
  after(async () => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
    await gw?.stop();
    if (uploadDir) rmSync(uploadDir, { recursive: true, force: true });
  });

  /** What no error may show: the spool folder, the spooled files' names, the reader's object. */
  const expectNoInternals = (text: string, what: string) => {
    for (const leak of [uploadDir, 'switchyard-upload-', 'uploaded-file', '"path"', '"kind"']) expect(text, `${what}: ${text}`).to.not.include(leak);
  };

  describe('a part without a name', () => {
    const nameless: Array<[string, RawPart]> = [
      ['a text part whose Content-Disposition has no name=', { headers: ['Content-Disposition: form-data'], data: 'xx' }],
      ['a file part whose Content-Disposition has no name=', { headers: ['Content-Disposition: form-data; filename="b.wav"', 'Content-Type: audio/wav'], data: WAV }],
      ['a part without Content-Disposition', { headers: ['Content-Type: text/plain'], data: 'xx' }],
      ['a part whose name is empty', { headers: ['Content-Disposition: form-data; name=""'], data: 'xx' }],
    ];
    const routes: Array<[string, RawPart[]]> = [
      ['/v1/audio/transcriptions', [field('model', 'mock-whisper'), file('file', 'a.wav', WAV, 'audio/wav')]],
      ['/v1/audio/translations', [field('model', 'mock-whisper'), file('file', 'a.wav', WAV, 'audio/wav')]],
      ['/v1/images/edits', [field('model', 'mock-image'), field('prompt', 'x'), file('image', 'a.png', PNG, 'image/png')]],
    ];
    for (const [route, good] of routes) {
      for (const [what, part] of nameless) {
        it(`${route}, ${what}: 400 invalid_request (the form cannot be read), and what was spooled is deleted`, async () => {
          // A file is spooled first, then the nameless part comes, then more.
          const res = await postRaw(gw.url, route, [good[good.length - 1]!, part, ...good.slice(0, -1)]);
          expect(res.status, res.text).to.equal(400);
          expect(res.json().error).to.deep.include({ type: 'invalid_request_error', code: 'invalid_request', param: null });
          expect(res.json().error.message).to.include('no name');
          expectNoInternals(res.text, what);
          await eventually(() => spooled().length === 0, 3000, 'the spooled uploads to be deleted');
        });
      }
    }

    it('the same form with every part named is served (the refusal is about the nameless part alone)', async () => {
      const res = await postRaw(gw.url, '/v1/audio/transcriptions', [field('model', 'mock-whisper'), file('file', 'a.wav', WAV, 'audio/wav')]);
      expect(res.status, res.text).to.equal(200);
      expect(gw.logs.some((line) => line.message === 'unhandled error')).to.equal(false);
    });
  });

  describe("what makes a part a file: its filename, not its Content-Type (RFC 7578)", () => {
    it("a file part without Content-Type (reqwest, OkHttp) and text fields with one (.NET's StringContent) are served", async () => {
      const typed = (name: string, value: string): RawPart => ({ headers: [`Content-Disposition: form-data; name="${name}"`, 'Content-Type: text/plain; charset=utf-8'], data: value });
      const bare: RawPart = { headers: ['Content-Disposition: form-data; name="file"; filename="a.wav"'], data: WAV };
      const transcribed = await postRaw(gw.url, '/v1/audio/transcriptions', [typed('model', 'mock-whisper'), typed('response_format', 'json'), bare]);
      expect(transcribed.status, transcribed.text).to.equal(200);
      expect(JSON.parse(transcribed.text)).to.have.property('text');
      const edited = await postRaw(gw.url, '/v1/images/edits', [
        typed('model', 'mock-image'),
        typed('prompt', 'a red square'),
        { headers: ['Content-Disposition: form-data; name="image"; filename="in.png"'], data: PNG },
      ]);
      expect(edited.status, edited.text).to.equal(200);
      expect(JSON.parse(edited.text).data).to.have.length(1);
      expect(gw.logs.some((line) => line.message === 'unhandled error')).to.equal(false);
    });

    it('text fields with a Content-Transfer-Encoding (Apache HttpClient: 8bit) and a Latin-1 charset are read as such; a file part without a filename but with a type is a file', async () => {
      const apache = (name: string, value: string, charset = 'ISO-8859-1'): RawPart => ({
        headers: [`Content-Disposition: form-data; name="${name}"`, `Content-Type: text/plain; charset=${charset}`, 'Content-Transfer-Encoding: 8bit'],
        data: Buffer.from(value, charset === 'ISO-8859-1' ? 'latin1' : 'utf8'),
      });
      // The npm form-data package's append('file', buffer): a type, no filename.
      const unnamed: RawPart = { headers: ['Content-Disposition: form-data; name="file"', 'Content-Type: audio/wav'], data: WAV };
      const res = await postRaw(gw.url, '/v1/audio/transcriptions', [apache('model', 'mock-whisper'), apache('prompt', 'café'), apache('language', 'fr', 'UTF-8'), unnamed]);
      expect(res.status, res.text).to.equal(200);
      expect(JSON.parse(res.text)).to.have.property('text');
      // Still serving (the 8bit encoding used to throw where no request could catch it).
      const again = await postRaw(gw.url, '/v1/audio/transcriptions', [field('model', 'mock-whisper'), file('file', 'a.wav', WAV, 'audio/wav')]);
      expect(again.status, again.text).to.equal(200);
    });
  });

  describe('a file where a text field goes, or a field sent twice', () => {
    const editText = ['model', 'prompt', 'n', 'size', 'response_format', 'quality', 'style', 'background', 'output_format', 'output_compression', 'moderation', 'user', 'stream', 'input_fidelity', 'negative_prompt', 'seed', 'input', 'parameters'];
    for (const name of editText) {
      it(`images/edits, a file as '${name}': 400 invalid_type on '${name}', no spool path`, async () => {
        const fields: Record<string, string> = { model: 'mock-image', prompt: 'x' };
        delete fields[name];
        const res = await postForm(gw.url, '/v1/images/edits', formOf(fields, [['image', PNG, 'in.png'], [name, PNG, 'field.png']]));
        expect(res.status, res.text).to.equal(400);
        expect(res.json().error).to.deep.include({ type: 'invalid_request_error', code: 'invalid_type', param: name });
        expect(res.json().error.message).to.include('got a file');
        expectNoInternals(res.text, name);
      });
    }

    it("images/edits with the official client: an enum field given a file is 400 invalid_type, its message free of the gateway's paths", async () => {
      for (const name of ['quality', 'response_format', 'background', 'output_format', 'input_fidelity']) {
        const e = await expectApiError(
          client.images.edit({ model: 'mock-image', prompt: 'x', image: await toFile(PNG, 'in.png', { type: 'image/png' }), [name]: await toFile(PNG, 'q.png', { type: 'image/png' }) } as never),
        );
        expect(e.status, e.message).to.equal(400);
        expect(e.param).to.equal(name);
        expect(e.code).to.equal('invalid_type');
        expectNoInternals(e.message, name);
      }
    });

    it("images/edits, 'mask' sent twice: 400 invalid_type on 'mask' (one image), the files not described", async () => {
      const res = await postForm(gw.url, '/v1/images/edits', formOf({ model: 'mock-image', prompt: 'x' }, [['image', PNG, 'in.png'], ['mask', PNG, 'm1.png'], ['mask', PNG, 'm2.png']]));
      expect(res.status, res.text).to.equal(400);
      expect(res.json().error).to.deep.include({ type: 'invalid_request_error', code: 'invalid_type', param: 'mask' });
      expect(res.json().error.message).to.include('one image');
      expectNoInternals(res.text, 'mask twice');
      // The official client sends an array as mask[] parts: the same answer.
      const e = await expectApiError(
        client.images.edit({ model: 'mock-image', prompt: 'x', image: await toFile(PNG, 'in.png', { type: 'image/png' }), mask: [await toFile(PNG, 'a.png'), await toFile(PNG, 'b.png')] } as never),
      );
      expect([e.status, e.param, e.code]).to.deep.equal([400, 'mask', 'invalid_type']);
      expectNoInternals(e.message, 'mask[] twice');
      await eventually(() => spooled().length === 0, 3000, 'the spooled uploads to be deleted');
    });

    it('images/edits, an unknown field sent as a file: 400 unknown_parameter, the file not described', async () => {
      const res = await postForm(gw.url, '/v1/images/edits', formOf({ model: 'mock-image', prompt: 'x' }, [['image', PNG, 'in.png'], ['colour', PNG, 'c.png']]));
      expect(res.status, res.text).to.equal(400);
      expect(res.json().error).to.deep.include({ code: 'unknown_parameter', param: 'colour' });
      expectNoInternals(res.text, 'colour');
    });

    const audioText: Array<[string, string[]]> = [
      ['transcriptions', ['model', 'language', 'prompt', 'response_format', 'temperature', 'timestamp_granularities', 'stream']],
      ['translations', ['model', 'prompt', 'response_format', 'temperature', 'stream']],
    ];
    for (const [route, names] of audioText) {
      it(`audio/${route}, a file as each text field: 400 invalid_type naming it, no spool path`, async () => {
        for (const name of names) {
          const fields: Record<string, string> = { model: 'mock-whisper' };
          delete fields[name];
          const res = await postForm(gw.url, `/v1/audio/${route}`, formOf(fields, [['file', WAV, 'a.wav'], [name, WAV, 'b.wav']]));
          expect(res.status, `${name}: ${res.text}`).to.equal(400);
          expect(res.json().error, name).to.deep.include({ type: 'invalid_request_error', code: 'invalid_type', param: name });
          expectNoInternals(res.text, name);
        }
        // The file twice: a 400 on 'file', the files not described.
        const twice = await postForm(gw.url, `/v1/audio/${route}`, formOf({ model: 'mock-whisper' }, [['file', WAV, 'a.wav'], ['file', WAV, 'b.wav']]));
        expect(twice.status, twice.text).to.equal(400);
        expect(twice.json().error.param).to.equal('file');
        expectNoInternals(twice.text, 'file twice');
        await eventually(() => spooled().length === 0, 3000, 'the spooled uploads to be deleted');
      });
    }

    it('videos, a file as each text field and input_reference twice: a 400 naming the field, no spool path', async () => {
      for (const name of ['prompt', 'seconds', 'size']) {
        const fields: Record<string, string> = { model: 'mock-video', prompt: 'a kite' };
        delete fields[name];
        const res = await postForm(gw.url, '/v1/videos', formOf(fields, [[name, PNG, 'f.png']]));
        expect(res.status, `${name}: ${res.text}`).to.equal(400);
        expect(res.json().error.param, name).to.equal(name);
        expectNoInternals(res.text, name);
      }
      const twice = await postForm(gw.url, '/v1/videos', formOf({ model: 'mock-video', prompt: 'a kite' }, [['input_reference', PNG, 'a.png'], ['input_reference', PNG, 'b.png']]));
      expect(twice.status, twice.text).to.equal(400);
      expect(twice.json().error.param).to.equal('input_reference');
      expectNoInternals(twice.text, 'input_reference twice');
    });
  });

  describe('an image edit without a prompt', () => {
    it('the official client (a form with model and image): 400 missing_required_parameter on prompt', async () => {
      const e = await expectApiError(client.images.edit({ model: 'mock-image', image: await toFile(PNG, 'in.png', { type: 'image/png' }) } as never));
      expect(e).to.be.instanceOf(OpenAI.BadRequestError);
      expect([e.status, e.param, e.code]).to.deep.equal([400, 'prompt', 'missing_required_parameter']);
      expect(e.message).to.not.include('neither shape');
    });

    it('a JSON body of the OpenAI shape without prompt: the same; a body with nothing to tell the shapes apart: the neither-shape 400 with param null', async () => {
      const post = async (route: string, body: unknown) => {
        const res = await fetch(`${gw.url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        return { status: res.status, body: (await res.json()) as ErrorBody };
      };
      const openaiShaped = await post('/v1/images/edits', { model: 'mock-image', image: 'https://images.example/a.png', size: '256x256' });
      expect(openaiShaped.status).to.equal(400);
      expect(openaiShaped.body.error).to.deep.include({ code: 'missing_required_parameter', param: 'prompt' });
      const generation = await post('/v1/images/generations', { model: 'mock-image', n: 2 });
      expect(generation.body.error).to.deep.include({ code: 'missing_required_parameter', param: 'prompt' });
      // The spec's shape told by its parameters: its input is what is missing.
      const specShaped = await post('/v1/images/generations', { model: 'mock-image', parameters: { size: '1024*1024' } });
      expect(specShaped.body.error).to.deep.include({ code: 'missing_required_parameter', param: 'input' });
      for (const route of ['/v1/images/generations', '/v1/images/edits']) {
        const neither = await post(route, { model: 'mock-image' });
        expect(neither.status).to.equal(400);
        expect(neither.body.error).to.deep.include({ code: 'invalid_request', param: null, type: 'invalid_request_error' });
        expect(neither.body.error.message).to.include('neither shape');
      }
    });
  });
});
