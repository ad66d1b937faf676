import { expect } from 'chai';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { fakeAudio, FAKE_SPEECH_TYPES, installAudio, type ReceivedForm } from './fakes/openai-audio.js';
import { repoRoot } from './support/paths.js';
import { toneWav } from '../plugins/providers/mock/audio.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { usageRow } from './support/rows.js';

const KEY = 'sk-audio-key-00000000001';
/** 1 s of a 330 Hz tone, 8 kHz, 16-bit mono, written by Python's `wave` module (not by the gateway). */
const FIXTURE = path.join(repoRoot, 'test', 'fixtures', 'tone-1s-8k.wav');
const WAV = readFileSync(FIXTURE);

type ApiError = InstanceType<typeof OpenAI.APIError>;

/** A RIFF/WAVE file's fmt and data, read here independently of the gateway's code. */
function readWav(bytes: Buffer): { sampleRate: number; channels: number; bits: number; dataBytes: number } {
  expect(bytes.toString('ascii', 0, 4)).to.equal('RIFF');
  expect(bytes.toString('ascii', 8, 12)).to.equal('WAVE');
  expect(bytes.readUInt32LE(4)).to.equal(bytes.length - 8);
  expect(bytes.toString('ascii', 12, 16)).to.equal('fmt ');
  expect(bytes.toString('ascii', 36, 40)).to.equal('data');
  return { channels: bytes.readUInt16LE(22), sampleRate: bytes.readUInt32LE(24), bits: bytes.readUInt16LE(34), dataBytes: bytes.readUInt32LE(40) };
}

async function expectError(promise: Promise<unknown>, status: number, param?: string): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    const e = error as ApiError;
    expect(e.status, e.message).to.equal(status);
    if (param !== undefined) expect((e.error as { param?: string }).param, e.message).to.equal(param);
    return e;
  }
  throw new Error(`expected a ${status}`);
}

/** POST a form with fetch (for fields the SDK would not send as they are). */
async function postForm(url: string, route: string, form: FormData, key = KEY) {
  const res = await fetch(`${url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) as { error: { param: string | null; message: string; type: string } }, headers: res.headers };
}

function wavForm(fields: Record<string, string | string[]>, file: Buffer | string = WAV): FormData {
  const form = new FormData();
  if (typeof file === 'string') form.append('file', file);
  else form.append('file', new Blob([file], { type: 'audio/wav' }), 'tone.wav');
  for (const [name, value] of Object.entries(fields)) {
    if (Array.isArray(value)) for (const item of value) form.append(`${name}[]`, item);
    else form.append(name, value);
  }
  return form;
}

/** The usage the access log line of a request carries. */
function loggedUsage(gw: RunningGateway, requestId: string): Record<string, unknown> | undefined {
  return gw.logs.find((line) => line.message === 'request' && line.requestId === requestId)?.usage as Record<string, unknown> | undefined;
}

/** Uploads go to os.tmpdir() (read per request): a folder of this test's own, to see them go. */
let uploadDir: string;
let savedTmp: string | undefined;
const spooled = () => readdirSync(uploadDir);

describe('audio against the mock provider (official openai client)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, bodyLimit: 64KB }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: speaker, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-tts, mock-whisper] }
pricing:
  mock-tts: { perCharacter: 0.001 }
  mock-whisper: { perSecond: 0.01 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    uploadDir = mkdtempSync(path.join(os.tmpdir(), 'sy-audio-uploads-'));
    savedTmp = process.env.TMPDIR;
    process.env.TMPDIR = uploadDir;
  });
  after(async () => {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
    await gw?.stop();
    if (uploadDir) rmSync(uploadDir, { recursive: true, force: true });
  });

  describe('POST /v1/audio/speech', () => {
    it('answers a real WAV file whose length follows the input (60 ms a character at 24 kHz), streamed as audio/wav', async () => {
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'alloy', input: 'hello', response_format: 'wav' });
      expect(response.headers.get('content-type')).to.equal('audio/wav');
      // Not an event stream: no SSE headers.
      expect(response.headers.get('cache-control')).to.equal(null);
      const bytes = Buffer.from(await response.arrayBuffer());
      const wav = readWav(bytes);
      expect(wav).to.deep.equal({ channels: 1, sampleRate: 24_000, bits: 16, dataBytes: 0.3 * 24_000 * 2 });
      expect(bytes.length).to.equal(44 + wav.dataBytes);
      // A tone, not silence.
      let peak = 0;
      for (let i = 44; i < bytes.length; i += 2) peak = Math.max(peak, Math.abs(bytes.readInt16LE(i)));
      expect(peak).to.be.greaterThan(5000);
    });

    it('speeds up: speed 2 halves the length', async () => {
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'nova', input: 'hello there', response_format: 'wav', speed: 2 });
      expect(readWav(Buffer.from(await response.arrayBuffer())).dataBytes).to.equal(Math.round((11 * 0.06 * 24_000) / 2) * 2);
    });

    it('answers pcm as raw 16-bit samples (audio/pcm)', async () => {
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'echo', input: 'hello', response_format: 'pcm' });
      expect(response.headers.get('content-type')).to.equal('audio/pcm');
      expect((await response.arrayBuffer()).byteLength).to.equal(0.3 * 24_000 * 2);
    });

    it('answers mp3 by default: MPEG-1 Layer III frames (audio/mpeg)', async () => {
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'onyx', input: 'hello' });
      expect(response.headers.get('content-type')).to.equal('audio/mpeg');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.length % 384).to.equal(0);
      expect(bytes.length / 384).to.equal(Math.ceil(0.3 / 0.024));
      for (let at = 0; at < bytes.length; at += 384) expect([bytes[at], bytes[at + 1]]).to.deep.equal([0xff, 0xfb]);
    });

    it('answers flac as a FLAC stream whose STREAMINFO counts the samples (audio/flac)', async () => {
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'fable', input: 'hello', response_format: 'flac' });
      expect(response.headers.get('content-type')).to.equal('audio/flac');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.toString('ascii', 0, 4)).to.equal('fLaC');
      const packed = bytes.readBigUInt64BE(18);
      expect(Number(packed >> 44n)).to.equal(24_000);
      expect(Number(packed & 0xfffffffffn)).to.equal(7200);
      expect([bytes[42], bytes[43]]).to.deep.equal([0xff, 0xf8]);
    });

    it('says plainly that the mock cannot encode opus or aac (400 response_format)', async () => {
      for (const format of ['opus', 'aac'] as const) {
        const e = await expectError(client.audio.speech.create({ model: 'mock-tts', voice: 'alloy', input: 'hi', response_format: format }), 400, 'response_format');
        expect(e.message).to.include('mock');
      }
    });

    it('meters the characters spoken (code points) and prices them per character', async () => {
      const response = await client.audio.speech
        .create({ model: 'mock-tts', voice: 'shimmer', input: 'héllo wörld', response_format: 'pcm' })
        .asResponse();
      await response.arrayBuffer();
      const id = response.headers.get('x-request-id')!;
      const row = await usageRow(gw, id);
      expect(row.operation).to.equal('speech');
      expect(row.cost).to.be.closeTo(11 * 0.001, 1e-12);
      expect(row.characters).to.equal(11);
      // Known before the audio is made, so it is in the reply's headers, as a JSON reply's is.
      expect(response.headers.get('x-switchyard-cost')).to.equal('0.011');
      await eventually(() => loggedUsage(gw, id) !== undefined, 3000, 'the access log line');
      expect(loggedUsage(gw, id)).to.deep.include({ characters: 11 });
    });

    it('checks every constraint of the spec: 400 naming the field', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ voice: 'alloy', input: 'hi' }, 'model'],
        [{ model: 'mock-tts', voice: 'alloy' }, 'input'],
        [{ model: 'mock-tts', input: 'hi' }, 'voice'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'x'.repeat(4097) }, 'input'],
        [{ model: 'mock-tts', voice: 'alloy', input: 7 }, 'input'],
        [{ model: 'mock-tts', voice: 'ash', input: 'hi' }, 'voice'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'hi', response_format: 'ogg' }, 'response_format'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'hi', speed: 0.2 }, 'speed'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'hi', speed: 4.01 }, 'speed'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'hi', speed: '1' }, 'speed'],
        [{ model: 'mock-tts', voice: 'alloy', input: 'hi', stream_format: 'sse' }, 'stream_format'],
      ];
      for (const [body, param] of cases) {
        await expectError(client.audio.speech.create(body as never), 400, param);
      }
    });

    it('accepts the limits themselves: speed 0.25 and 4, input of 4096 characters', async () => {
      for (const speed of [0.25, 4]) {
        const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'alloy', input: 'ok', response_format: 'pcm', speed });
        expect(response.status).to.equal(200);
        await response.arrayBuffer();
      }
      // 4096 characters of two UTF-16 units each: the limit counts characters.
      const response = await client.audio.speech.create({ model: 'mock-tts', voice: 'alloy', input: '😀'.repeat(4096), response_format: 'mp3', speed: 4 });
      expect(response.status).to.equal(200);
      await response.arrayBuffer();
    });
  });

  describe('POST /v1/audio/transcriptions and /v1/audio/translations', () => {
    it('transcribes a real WAV file: the text names its length (read from the header)', async () => {
      const result = await client.audio.transcriptions.create({ model: 'mock-whisper', file: await toFile(WAV, 'tone.wav', { type: 'audio/wav' }) });
      expect(result.text).to.equal('Mock transcription of a 1.00 second recording.');
    });

    it('reads the length of a WAV whose header says its data has 0 bytes (a recorder that never went back to fix it) from the bytes there', async () => {
      const wav = toneWav(1.25);
      const dataAt = wav.indexOf('data');
      wav.writeUInt32LE(0, dataAt + 4);
      wav.writeUInt32LE(0, 4);
      const result = await client.audio.transcriptions.create({ model: 'mock-whisper', file: await toFile(wav, 'zero.wav', { type: 'audio/wav' }) }).withResponse();
      // Before: "a 0.00 second recording", and 0 seconds charged.
      expect(result.data.text).to.equal("Mock transcription of a 1.25 second recording.");
      expect((await usageRow(gw, result.response.headers.get('x-request-id')!)).seconds).to.equal(2); // whole seconds, rounded up
    });

    it('answers every response_format with its content type', async () => {
      const expected: Record<string, [string, (body: string) => void]> = {
        json: ['application/json', (body) => expect(JSON.parse(body).text).to.include('1.00 second')],
        verbose_json: ['application/json', (body) => expect(JSON.parse(body)).to.deep.include({ task: 'transcribe', duration: 1 })],
        text: ['text/plain; charset=utf-8', (body) => expect(body).to.equal('Mock transcription of a 1.00 second recording.\n')],
        srt: ['text/plain; charset=utf-8', (body) => expect(body).to.match(/^1\n00:00:00,000 --> 00:00:01,000\nMock transcription/)],
        vtt: ['text/plain; charset=utf-8', (body) => expect(body).to.match(/^WEBVTT\n\n00:00:00\.000 --> 00:00:01\.000\nMock transcription/)],
      };
      for (const [format, [type, check]] of Object.entries(expected)) {
        const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper', response_format: format }));
        expect(res.status, res.text).to.equal(200);
        expect(res.headers.get('content-type'), format).to.match(new RegExp(`^${type.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
        check(res.text);
      }
      // The SDK reads the text formats as strings.
      const srt = await client.audio.transcriptions.create({ model: 'mock-whisper', file: await toFile(WAV, 'tone.wav'), response_format: 'srt' });
      expect(srt).to.be.a('string').and.to.include('-->');
    });

    it('gives words and segments with verbose_json and timestamp_granularities', async () => {
      const result = await client.audio.transcriptions.create({
        model: 'mock-whisper',
        file: await toFile(WAV, 'tone.wav'),
        response_format: 'verbose_json',
        timestamp_granularities: ['word', 'segment'],
        language: 'en',
      });
      expect(result.duration).to.equal(1);
      expect(result.language).to.equal('en');
      expect(result.words!.map((w) => w.word)).to.deep.equal(['Mock', 'transcription', 'of', 'a', '1.00', 'second', 'recording']);
      expect(result.words!.at(-1)!.end).to.equal(1);
      expect(result.segments).to.have.length(1);
    });

    it('translates into English text', async () => {
      const result = await client.audio.translations.create({ model: 'mock-whisper', file: await toFile(WAV, 'tone.wav', { type: 'audio/wav' }) });
      expect(result.text).to.equal('Mock English translation of a 1.00 second recording.');
      const text = await client.audio.translations.create({ model: 'mock-whisper', file: await toFile(WAV, 'tone.wav'), response_format: 'text' });
      expect(text).to.equal('Mock English translation of a 1.00 second recording.\n');
    });

    it('meters the seconds of audio and prices them per second', async () => {
      const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper' }));
      expect(res.status).to.equal(200);
      const id = res.headers.get('x-request-id')!;
      const row = await usageRow(gw, id);
      expect(row.operation).to.equal('transcription');
      expect(row.cost).to.be.closeTo(0.01, 1e-12);
      expect(row.seconds).to.equal(1);
      await eventually(() => loggedUsage(gw, id) !== undefined, 3000, 'the access log line');
      expect(loggedUsage(gw, id)).to.deep.include({ seconds: 1 });
      const translated = await postForm(gw.url, '/v1/audio/translations', wavForm({ model: 'mock-whisper' }));
      expect((await usageRow(gw, translated.headers.get('x-request-id')!)).cost).to.be.closeTo(0.01, 1e-12);
      // A 0.3 s recording: the answer says 1 second, and 1 second is what is charged.
      const short = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper', response_format: 'json' }, toneWav(0.3)));
      expect((short.json() as unknown as { usage: unknown }).usage).to.deep.equal({ type: 'duration', seconds: 1 });
      expect((await usageRow(gw, short.headers.get('x-request-id')!)).seconds).to.equal(1);
    });

    it('checks every constraint of the spec: 400 naming the field', async () => {
      const cases: Array<[string, FormData, string]> = [
        ['transcriptions', (() => { const f = new FormData(); f.append('model', 'mock-whisper'); return f; })(), 'file'],
        ['transcriptions', wavForm({ model: 'mock-whisper' }, 'not a file'), 'file'],
        ['transcriptions', wavForm({}), 'model'],
        ['transcriptions', wavForm({ model: 'mock-whisper', language: 'english' }), 'language'],
        ['transcriptions', wavForm({ model: 'mock-whisper', response_format: 'xml' }), 'response_format'],
        ['transcriptions', wavForm({ model: 'mock-whisper', temperature: '1.5' }), 'temperature'],
        ['transcriptions', wavForm({ model: 'mock-whisper', temperature: '-0.1' }), 'temperature'],
        ['transcriptions', wavForm({ model: 'mock-whisper', temperature: 'hot' }), 'temperature'],
        ['transcriptions', wavForm({ model: 'mock-whisper', response_format: 'verbose_json', timestamp_granularities: ['char'] }), 'timestamp_granularities[0]'],
        ['transcriptions', wavForm({ model: 'mock-whisper', timestamp_granularities: ['word'] }), 'timestamp_granularities'],
        ['transcriptions', wavForm({ model: 'mock-whisper', stream: 'true' }), 'stream'],
        ['translations', (() => { const f = new FormData(); f.append('model', 'mock-whisper'); return f; })(), 'file'],
        ['translations', wavForm({}), 'model'],
        ['translations', wavForm({ model: 'mock-whisper', temperature: '2' }), 'temperature'],
        ['translations', wavForm({ model: 'mock-whisper', response_format: '' }), 'response_format'],
      ];
      for (const [route, form, param] of cases) {
        const res = await postForm(gw.url, `/v1/audio/${route}`, form);
        expect(res.status, `${route} ${param}: ${res.text}`).to.equal(400);
        expect(res.json().error.param, `${route} ${param}: ${res.text}`).to.equal(param);
        expect(res.json().error.type).to.equal('invalid_request_error');
      }
      // Two file parts: the message says one is taken (it said only "must be an audio file").
      const twice = wavForm({ model: 'mock-whisper' });
      twice.append('file', new Blob([WAV], { type: 'audio/wav' }), 'again.wav');
      const two = await postForm(gw.url, '/v1/audio/transcriptions', twice);
      expect(two.status).to.equal(400);
      expect(two.json().error.param).to.equal('file');
      expect(two.json().error.message).to.include("one part named 'file'");
      // The limits themselves pass.
      for (const temperature of ['0', '1']) {
        const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper', temperature }));
        expect(res.status, res.text).to.equal(200);
      }
      // Translations list no formats: any text reaches the back end (the mock knows five).
      const other = await postForm(gw.url, '/v1/audio/translations', wavForm({ model: 'mock-whisper', response_format: 'ssml' }));
      expect(other.status).to.equal(400);
      expect(other.json().error.message).to.include('mock back end');
    });

    it('refuses a JSON body with 415, and a file the mock cannot read with 400 file', async () => {
      const json = await fetch(`${gw.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'mock-whisper', file: 'x' }),
      });
      expect(json.status).to.equal(415);
      expect(((await json.json()) as { error: { message: string } }).error.message).to.include('multipart/form-data');
      // The right type without its boundary: 400 saying so, not a 415 that names the type it was sent.
      const unbounded = await fetch(`${gw.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'multipart/form-data' },
        body: 'abc',
      });
      expect(unbounded.status).to.equal(400);
      expect(((await unbounded.json()) as { error: { message: string } }).error.message).to.include('no boundary');
      const mp3 = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper' }, Buffer.from('ID3 not a wav file')));
      expect(mp3.status).to.equal(400);
      expect(mp3.json().error.param).to.equal('file');
    });

    it('refuses a body over server.bodyLimit with 413 in the OpenAI shape, and spools nothing that stays', async () => {
      const big = Buffer.alloc(100 * 1024, 1);
      const e = await expectError(client.audio.transcriptions.create({ model: 'mock-whisper', file: await toFile(big, 'big.wav') }), 413);
      expect((e.error as { type: string }).type).to.equal('invalid_request_error');
      expect(e.message).to.include('65536');
      // Chunked (no Content-Length): counted as it arrives.
      const form = new Response(wavForm({ model: 'mock-whisper' }, big));
      const raw = Buffer.from(await form.arrayBuffer());
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(`${gw.url}/v1/audio/transcriptions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': form.headers.get('content-type')!, 'transfer-encoding': 'chunked' },
        });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        for (let i = 0; i < raw.length; i += 8192) req.write(raw.subarray(i, i + 8192));
        req.end();
      });
      expect(status).to.equal(413);
      await eventually(() => spooled().length === 0, 3000, 'the spooled uploads to be deleted');
    });

    it('reads no upload before the key is checked: a wrong key is a 401 and nothing is spooled', async () => {
      const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper' }), 'sk-not-a-key-000000000');
      expect(res.status).to.equal(401);
      expect(spooled()).to.deep.equal([]);
    });

    it('deletes the spooled file after a call, after a refused call, and when the client leaves mid-upload', async () => {
      expect(spooled()).to.deep.equal([]);
      const ok = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper' }));
      expect(ok.status).to.equal(200);
      await eventually(() => spooled().length === 0, 3000, 'the upload of a finished call to be deleted');
      const refused = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'mock-whisper', temperature: '9' }));
      expect(refused.status).to.equal(400);
      await eventually(() => spooled().length === 0, 3000, 'the upload of a refused call to be deleted');

      // Half a form, then the client goes: the partial file must not stay.
      const form = new Response(wavForm({ model: 'mock-whisper' }));
      const raw = Buffer.from(await form.arrayBuffer());
      const req = http.request(`${gw.url}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': form.headers.get('content-type')!, 'content-length': String(raw.length) },
      });
      req.on('error', () => undefined);
      req.write(raw.subarray(0, raw.length - 4000));
      await eventually(() => spooled().length === 1, 3000, 'the upload to be spooled');
      req.destroy();
      await eventually(() => spooled().length === 0, 3000, 'the partial upload to be deleted');
    });
  });
});

describe('audio against an OpenAI upstream (fake, official openai client)', () => {
  let upstream: FakeOpenAI;
  let gw: RunningGateway;
  let client: OpenAI;
  let forms: ReceivedForm[];

  before(async () => {
    upstream = new FakeOpenAI();
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
auth:
  keys: [{ name: listener, key: ${KEY} }]
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [tts-1, whisper-1]
  - id: wrongkey
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: sk-this-is-the-wrong-provider-key
    models: [bad-creds]
pricing:
  speak: { perCharacter: 0.00002 }
  listen: { perSecond: 0.0001, input: 1, output: 2 }
models:
  - name: speak
    targets: [{ provider: up, model: tts-1 }]
  - name: listen
    targets: [{ provider: up, model: whisper-1 }]
  - name: listen-twice
    targets: [{ provider: up, model: whisper-fail, priority: 0 }, { provider: up, model: whisper-1, priority: 1 }]
  - name: speak-twice
    targets: [{ provider: up, model: tts-page, priority: 0 }, { provider: up, model: tts-1, priority: 1 }]
  - name: speak-page
    targets: [{ provider: up, model: tts-page }]
  - name: listen-page
    targets: [{ provider: up, model: whisper-fail }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  beforeEach(() => {
    upstream.reset();
    forms = installAudio(upstream).forms;
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it("sends speech up with the back end's model and key, and relays the audio bytes with each format's type", async () => {
    for (const format of ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const) {
      const response = await client.audio.speech.create({ model: 'speak', voice: 'alloy', input: 'hello upstream', response_format: format, speed: 1.5 });
      expect(response.headers.get('content-type')).to.equal(FAKE_SPEECH_TYPES[format]);
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.equals(fakeAudio(format, 14 * 100)), format).to.equal(true);
      const got = upstream.last();
      expect(got.url).to.equal('/v1/audio/speech');
      expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
      expect(JSON.stringify(got.headers)).to.not.include(KEY);
      expect(got.body).to.deep.equal({ model: 'tts-1', voice: 'alloy', input: 'hello upstream', response_format: format, speed: 1.5 });
    }
  });

  it('streams speech: the first bytes reach the client while the back end is still speaking', async () => {
    upstream.handle('POST /v1/audio/speech', async (_req, res, _body, fake) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      res.write(Buffer.alloc(1000, 1));
      await fake.gate();
      res.end(Buffer.alloc(1000, 2));
    });
    const response = await client.audio.speech.create({ model: 'speak', voice: 'alloy', input: 'hi' });
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(first.done).to.equal(false);
    expect(Buffer.from(first.value!).every((b) => b === 1)).to.equal(true);
    upstream.release();
    let rest = 0;
    for (let next = await reader.read(); !next.done; next = await reader.read()) rest += next.value.length;
    expect(first.value!.length + rest).to.equal(2000);
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row.cost).to.be.closeTo(2 * 0.00002, 1e-12);
  });

  it('streams the file up as multipart: the bytes arrive intact, the model replaced, every field as sent', async () => {
    const result = await client.audio.transcriptions.create({
      model: 'listen',
      file: await toFile(WAV, 'tone.wav', { type: 'audio/wav' }),
      language: 'en',
      prompt: 'A tone.',
      temperature: 0.2,
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    });
    expect(result.text).to.equal(`Heard ${WAV.length} bytes with whisper-1.`);
    const got = upstream.last();
    expect(got.url).to.equal('/v1/audio/transcriptions');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(Number(got.headers['content-length'])).to.equal(got.raw.length);
    const form = forms.at(-1)!;
    const file = form.file('file')!;
    expect(file.data.equals(WAV)).to.equal(true);
    expect(file.filename).to.equal('tone.wav');
    expect(file.contentType).to.equal('audio/wav');
    expect(form.field('model')).to.equal('whisper-1');
    expect(form.field('language')).to.equal('en');
    expect(form.field('prompt')).to.equal('A tone.');
    expect(form.field('temperature')).to.equal('0.2');
    expect(form.field('response_format')).to.equal('verbose_json');
    expect(form.fields('timestamp_granularities[]')).to.deep.equal(['word', 'segment']);
    expect(form.parts.map((p) => p.name)).to.not.include('stream');
  });

  it('relays the text formats as text/plain and the JSON ones as JSON', async () => {
    for (const [format, type] of [['text', 'text/plain'], ['srt', 'text/plain'], ['vtt', 'text/plain'], ['json', 'application/json'], ['verbose_json', 'application/json']]) {
      const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'listen', response_format: format! }));
      expect(res.status, res.text).to.equal(200);
      expect(res.headers.get('content-type')).to.match(new RegExp(`^${type}`));
      expect(res.text).to.include(`Heard ${WAV.length} bytes with whisper-1.`);
    }
    const vtt = await client.audio.translations.create({ model: 'listen', file: await toFile(WAV, 'tone.wav'), response_format: 'vtt' });
    expect(vtt).to.match(/^WEBVTT\n/).and.to.include('Translated');
    expect(upstream.last().url).to.equal('/v1/audio/translations');
  });

  it("meters the back end's seconds, else verbose_json's duration, else the WAV header's length, else its tokens", async () => {
    const costOf = async (fields: Record<string, string>) => {
      const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'listen', ...fields }));
      expect(res.status, res.text).to.equal(200);
      return (await usageRow(gw, res.headers.get('x-request-id')!)).cost;
    };
    expect(await costOf({})).to.be.closeTo(3 * 0.0001, 1e-12); // usage {type: duration, seconds: 3}
    upstream.reset();
    installAudio(upstream, { usage: null });
    expect(await costOf({ response_format: 'verbose_json' })).to.be.closeTo(2.5 * 0.0001, 1e-12); // duration 2.5
    expect(await costOf({ response_format: 'text' })).to.be.closeTo(1 * 0.0001, 1e-12); // the fixture's header: 1 s
    // A header whose byteRate says another rate than its samples do (a client setting its own
    // charge): the audio is played, and charged, by its sample rate, channels and sample size.
    const byteRateAt = WAV.indexOf('fmt ') + 16;
    for (const forged of [0xfffffff0, 1]) {
      const wav = Buffer.from(WAV);
      wav.writeUInt32LE(forged, byteRateAt);
      const res = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'listen', response_format: 'text' }, wav));
      expect(res.status, res.text).to.equal(200);
      expect((await usageRow(gw, res.headers.get('x-request-id')!)).cost, `byteRate ${forged}`).to.be.closeTo(1 * 0.0001, 1e-12);
    }
    upstream.reset();
    installAudio(upstream, { usage: { type: 'tokens', input_tokens: 10, output_tokens: 5, total_tokens: 15 } });
    expect(await costOf({})).to.be.closeTo((10 * 1 + 5 * 2) / 1_000_000, 1e-12);
  });

  it('sends the file again, whole, when the first target fails and the next one is tried', async () => {
    const { transcribe } = installAudio(upstream);
    // The first target (whisper-fail) answers 500 after reading the form; the second answers.
    upstream.handle('POST /v1/audio/transcriptions', (req, res, _body, fake) => {
      if (!fake.last().raw.includes(Buffer.from('whisper-fail'))) return transcribe(req, res);
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'boom', type: 'server_error', param: null, code: null } }));
    });
    const result = await client.audio.transcriptions.create({ model: 'listen-twice', file: await toFile(WAV, 'tone.wav', { type: 'audio/wav' }) });
    expect(result.text).to.equal(`Heard ${WAV.length} bytes with whisper-1.`);
    const attempts = upstream.received.filter((r) => r.url === '/v1/audio/transcriptions');
    expect(attempts).to.have.length(2);
    // Both attempts carried the whole file, framed as announced.
    for (const got of attempts) {
      expect(got.raw.includes(WAV)).to.equal(true);
      expect(Number(got.headers['content-length'])).to.equal(got.raw.length);
    }
  });

  it('takes a 200 with no audio at all (an empty body) for no answer: the next target answers; alone, a 502 and no charge', async () => {
    upstream.handle('POST /v1/audio/speech', (_req, res, body) => {
      const { model, input } = body as { model?: string; input?: string };
      res.writeHead(200, { 'content-type': FAKE_SPEECH_TYPES.mp3! });
      // Chunked, so that nothing but the body's end says it is empty.
      if (model === 'tts-page') return res.end();
      res.end(fakeAudio('mp3', String(input).length * 100));
    });
    const speech = await client.audio.speech.create({ model: 'speak-twice', voice: 'alloy', input: 'hello' });
    expect(Buffer.from(await speech.arrayBuffer()).equals(fakeAudio('mp3', 5 * 100))).to.equal(true);
    const empty = await expectError(client.audio.speech.create({ model: 'speak-page', voice: 'alloy', input: 'hello' }), 502);
    expect(empty.message).to.include('no audio');
    await gw.gateway.stores.flush();
    const charged = (await gw.gateway.stores.usage.list({ limit: 100 })).filter((row) => row.model === 'speak-page' && row.cost > 0);
    expect(charged).to.deep.equal([]);
  });

  it("takes a web page answered with 200 (a proxy's login page) for neither audio nor a transcript: the next target answers; alone, a 502 and no charge", async () => {
    const { transcribe } = installAudio(upstream);
    const page = (res: http.ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<html><body>Please log in</body></html>');
    };
    upstream.handle('POST /v1/audio/transcriptions', (req, res, _body, fake) => (fake.last().raw.includes(Buffer.from('whisper-fail')) ? page(res) : transcribe(req, res)));
    upstream.handle('POST /v1/audio/speech', (_req, res, body) => {
      const { model, input } = body as { model?: string; input?: string };
      if (model === 'tts-page') return page(res);
      res.writeHead(200, { 'content-type': FAKE_SPEECH_TYPES.mp3! });
      res.end(fakeAudio('mp3', String(input).length * 100));
    });

    const result = await client.audio.transcriptions.create({ model: 'listen-twice', file: await toFile(WAV, 'tone.wav', { type: 'audio/wav' }) });
    expect(result.text).to.equal(`Heard ${WAV.length} bytes with whisper-1.`);
    const speech = await client.audio.speech.create({ model: 'speak-twice', voice: 'alloy', input: 'hello' });
    expect(speech.headers.get('content-type')).to.equal(FAKE_SPEECH_TYPES.mp3);
    expect(Buffer.from(await speech.arrayBuffer()).equals(fakeAudio('mp3', 5 * 100))).to.equal(true);

    for (const format of [undefined, 'text'] as const) {
      const alone = await postForm(gw.url, '/v1/audio/transcriptions', wavForm({ model: 'listen-page', ...(format ? { response_format: format } : {}) }));
      expect(alone.status, alone.text).to.equal(502);
      expect(alone.json().error.message).to.include('web page');
      expect(alone.text).to.not.include('log in');
    }
    const page502 = await expectError(client.audio.speech.create({ model: 'speak-page', voice: 'alloy', input: 'hello' }), 502);
    expect(page502.message).to.include('text/html instead of audio');
    await gw.gateway.stores.flush();
    const charged = (await gw.gateway.stores.usage.list({ limit: 100 })).filter((row) => row.model === 'speak-page' || row.model === 'listen-page');
    expect(charged.filter((row) => row.cost > 0)).to.deep.equal([]);
  });

  it("maps the back end refusing the gateway's key to a 502, and its 400 to a 400 with its message", async () => {
    const e = await expectError(client.audio.transcriptions.create({ model: 'bad-creds', file: await toFile(WAV, 'tone.wav') }), 502);
    expect(e.message).to.not.include('sk-this-is-the-wrong-provider-key');
    const s = await expectError(client.audio.speech.create({ model: 'bad-creds', voice: 'alloy', input: 'hi' }), 502);
    expect(s.message).to.include('credentials');
    const bad = await postForm(gw.url, '/v1/audio/translations', wavForm({ model: 'listen', response_format: 'ssml' }));
    expect(bad.status).to.equal(400);
    expect(bad.json().error.message).to.include("response_format 'ssml' is not supported");
  });
});

/** A PCM WAV file: `seconds` of silence, at 8 kHz, 8 bits, mono (8,000 bytes a second) unless told otherwise. */
function silentWav(seconds: number, rate = 8000, channels = 1, bits = 8): Buffer {
  const frame = channels * (bits / 8);
  const data = rate * frame * seconds;
  const head = Buffer.alloc(44);
  head.write('RIFF', 0, 'ascii');
  head.writeUInt32LE(36 + data, 4);
  head.write('WAVEfmt ', 8, 'ascii');
  head.writeUInt32LE(16, 16);
  head.writeUInt16LE(1, 20); // PCM
  head.writeUInt16LE(channels, 22);
  head.writeUInt32LE(rate, 24);
  head.writeUInt32LE(rate * frame, 28);
  head.writeUInt16LE(frame, 32);
  head.writeUInt16LE(bits, 34);
  head.write('data', 36, 'ascii');
  head.writeUInt32LE(data, 40);
  return Buffer.concat([head, Buffer.alloc(data, bits === 8 ? 128 : 0)]);
}

describe('transcriptions against a budget, many at once (official openai client, slow mock back end)', function () {
  this.timeout(30_000);
  let gw: RunningGateway;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: thrifty, key: ${KEY}, budget: 0.005 }, { name: hifi, key: sk-audio-hifi-000000001, budget: 0.005 }]
providers:
  - { id: slow, type: mock, latencyMs: 300, models: [slow-whisper] }
pricing:
  slow-whisper: { perSecond: 0.0001 }
`);
  });
  after(async () => {
    await gw?.stop();
  });

  it("reserve a bound of the file's length: eight at once on a budget that covers one pass it no further than one call's cost", async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    // 10 s each, 0.001 charged; the bound reserved: 80,000 bytes at 2,000 a second, 0.004.
    const file = silentWav(10);
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, async () => client.audio.transcriptions.create({ model: 'slow-whisper', file: await toFile(file, 'quiet.wav', { type: 'audio/wav' }) })),
    );
    const answered = results.filter((r) => r.status === 'fulfilled').length;
    const refused = results.filter((r) => r.status === 'rejected').map((r) => ((r as PromiseRejectedResult).reason as ApiError).status);
    expect(answered).to.be.at.least(1);
    expect(refused.every((status) => status === 429)).to.equal(true);
    await gw.gateway.stores.flush();
    const key = (await gw.gateway.stores.keys.list()).find((k) => k.name === 'thrifty')!;
    expect(key.spent).to.be.at.most(0.005);
    expect(key.spent).to.be.closeTo(answered * 0.001, 1e-9);
  });

  it("a WAV's length is read from its header: a second of CD-quality audio (176 KB, 88 s by the size's bound) reserves a second and is served", async () => {
    const client = new OpenAI({ apiKey: 'sk-audio-hifi-000000001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const file = silentWav(1, 44100, 2, 16);
    // The same bytes said to be MP3 in a WAV at 2,000,000 bytes a second (a tenth of a second):
    // a compressed WAV's claimed rate is not believed; its size's bound (88 s) passes the budget.
    const claimed = Buffer.from(file);
    claimed.writeUInt16LE(0x55, 20);
    claimed.writeUInt32LE(2_000_000, 28);
    const refused = await client.audio.transcriptions.create({ model: 'slow-whisper', file: await toFile(claimed, 'mp3.wav', { type: 'audio/wav' }) }).catch((e: unknown) => e as ApiError);
    expect((refused as ApiError).status).to.equal(429);
    const result = await client.audio.transcriptions.create({ model: 'slow-whisper', file: await toFile(file, 'cd.wav', { type: 'audio/wav' }) });
    expect(result.text).to.be.a('string');
  });
});
