import type http from 'node:http';
import type { FakeOpenAI } from './openai-upstream.js';

/** One part of a multipart/form-data body the fake received. */
export interface ReceivedPart {
  name: string;
  filename?: string;
  contentType?: string;
  data: Buffer;
}

/** A form as the fake read it: every part in order, and the Content-Type it came with. */
export interface ReceivedForm {
  path: string;
  contentType: string;
  parts: ReceivedPart[];
  field(name: string): string | undefined;
  fields(name: string): string[];
  file(name: string): ReceivedPart | undefined;
}

/** A strict multipart/form-data reader (RFC 7578): throws on anything malformed. */
export function parseMultipart(raw: Buffer, contentType: string): ReceivedPart[] {
  const match = /boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  if (!/^multipart\/form-data/i.test(contentType) || !match) throw new Error(`not a multipart body: ${contentType}`);
  const boundary = Buffer.from(`--${match[1] ?? match[2]}`);
  const parts: ReceivedPart[] = [];
  let at = raw.indexOf(boundary);
  if (at !== 0) throw new Error('the body does not start with the boundary');
  for (;;) {
    at += boundary.length;
    if (raw.subarray(at, at + 4).toString() === '--\r\n') {
      if (at + 4 !== raw.length) throw new Error('bytes after the closing boundary');
      return parts;
    }
    if (raw.subarray(at, at + 2).toString() !== '\r\n') throw new Error('no CRLF after a boundary');
    at += 2;
    const headerEnd = raw.indexOf('\r\n\r\n', at);
    if (headerEnd < 0) throw new Error('a part without the end of its headers');
    const headers = raw.subarray(at, headerEnd).toString('utf8').split('\r\n');
    const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), boundary]), headerEnd + 4);
    if (next < 0) throw new Error('a part without a closing boundary');
    const part: ReceivedPart = { name: '', data: raw.subarray(headerEnd + 4, next) };
    for (const line of headers) {
      const [key, ...rest] = line.split(':');
      const value = rest.join(':').trim();
      if (key!.toLowerCase() === 'content-disposition') {
        part.name = /\bname="([^"]*)"/.exec(value)?.[1] ?? '';
        const filename = /\bfilename="([^"]*)"/.exec(value)?.[1];
        if (filename !== undefined) part.filename = filename;
      } else if (key!.toLowerCase() === 'content-type') part.contentType = value;
    }
    parts.push(part);
    at = next + 2;
  }
}

/** The media types OpenAI labels its speech with. */
export const FAKE_SPEECH_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};

/** The bytes the fake "speaks": a recognisable pattern, `size` bytes, the same every time. */
export function fakeAudio(format: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + format.length) & 0xff;
  if (format === 'wav') out.write('RIFF', 0, 'ascii');
  return out;
}

export interface FakeAudioOptions {
  /** Bytes of audio per character of input. Default 100. */
  bytesPerChar?: number;
  /** The `usage` a transcription answer carries (OpenAI's `{type: 'duration', seconds}` by default). */
  usage?: Record<string, unknown> | null;
}

/**
 * OpenAI's audio endpoints on a FakeOpenAI (auth checked by the fake before these run): speech
 * answers audio bytes in several writes, labelled per format; transcriptions and translations
 * read the form strictly and record it in `forms`, answering in the asked response_format.
 */
export function installAudio(
  fake: FakeOpenAI,
  options: FakeAudioOptions = {},
): { forms: ReceivedForm[]; transcribe: (req: http.IncomingMessage, res: http.ServerResponse) => void } {
  const forms: ReceivedForm[] = [];
  const perChar = options.bytesPerChar ?? 100;
  fake.handle('POST /v1/audio/speech', async (_req: http.IncomingMessage, res: http.ServerResponse, body) => {
    const format = typeof body?.response_format === 'string' ? body.response_format : 'mp3';
    const audio = fakeAudio(format, [...String(body?.input ?? '')].length * perChar);
    res.writeHead(200, { 'content-type': FAKE_SPEECH_TYPES[format] ?? 'application/octet-stream', 'transfer-encoding': 'chunked' });
    for (let i = 0; i < audio.length; i += 1000) {
      if (!res.write(audio.subarray(i, i + 1000))) await new Promise((resolve) => res.once('drain', resolve));
    }
    res.end();
  });
  const transcript = (task: 'transcribe' | 'translate') => (req: http.IncomingMessage, res: http.ServerResponse) => {
    const entry = fake.last();
    const contentType = String(req.headers['content-type'] ?? '');
    let parts: ReceivedPart[];
    try {
      parts = parseMultipart(entry.raw, contentType);
    } catch (error) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `bad form: ${(error as Error).message}`, type: 'invalid_request_error', param: null, code: null } }));
      return;
    }
    const form: ReceivedForm = {
      path: req.url ?? '',
      contentType,
      parts,
      field: (name) => parts.find((p) => p.name === name && p.filename === undefined)?.data.toString('utf8'),
      fields: (name) => parts.filter((p) => p.name === name && p.filename === undefined).map((p) => p.data.toString('utf8')),
      file: (name) => parts.find((p) => p.name === name && p.filename !== undefined),
    };
    forms.push(form);
    const file = form.file('file');
    if (!file || !form.field('model')) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'file and model are required', type: 'invalid_request_error', param: 'file', code: null } }));
      return;
    }
    const text = `${task === 'transcribe' ? 'Heard' : 'Translated'} ${file.data.length} bytes with ${form.field('model')}.`;
    const format = form.field('response_format') ?? 'json';
    const usage = options.usage === undefined ? { type: 'duration', seconds: 3 } : options.usage;
    const sendJson = (value: unknown) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const sendText = (value: string) => {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(value);
    };
    if (format === 'json') return sendJson(usage ? { text, usage } : { text });
    if (format === 'verbose_json') {
      return sendJson({ task, language: 'english', duration: 2.5, text, segments: [{ id: 0, seek: 0, start: 0, end: 2.5, text }], ...(usage ? { usage } : {}) });
    }
    if (format === 'text') return sendText(`${text}\n`);
    if (format === 'srt') return sendText(`1\n00:00:00,000 --> 00:00:02,500\n${text}\n\n`);
    if (format === 'vtt') return sendText(`WEBVTT\n\n00:00:00.000 --> 00:00:02.500\n${text}\n\n`);
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `response_format '${format}' is not supported`, type: 'invalid_request_error', param: 'response_format', code: null } }));
  };
  const transcribe = transcript('transcribe');
  fake.handle('POST /v1/audio/transcriptions', transcribe);
  fake.handle('POST /v1/audio/translations', transcript('translate'));
  return { forms, transcribe };
}
