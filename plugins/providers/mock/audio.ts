import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { GatewayError, isUploadedFile, type OperationHandler, type Usage } from '../../../core/index.js';

/**
 * The mock's audio: real bytes, no network.
 *
 * Speech: a 440 Hz tone (24 kHz, 16-bit, mono, as OpenAI's pcm) lasting 60 ms per character of
 * input (divided by `speed`, at least 100 ms), streamed in chunks as
 *   - `wav`: a RIFF/WAVE file,
 *   - `pcm`: the raw samples (little-endian),
 *   - `flac`: a FLAC file (verbatim subframes: valid, not compressed),
 *   - `mp3`: MPEG-1 Layer III frames of SILENCE of the same length (a valid mp3; the mock has no
 *     mp3 encoder, so the tone is not in it).
 * `opus` and `aac` are refused with a 400 (the mock cannot encode them).
 *
 * Transcription and translation: the mock reads the WAV header of the file (anything else is a
 * 400) and answers a deterministic text that names the recording's length; `verbose_json`
 * carries the duration, one segment and, when asked, one timestamp per word.
 */

export interface MockAudioOptions {
  latencyMs: number;
}

export const MOCK_SAMPLE_RATE = 24_000;
const TONE_HZ = 440;
const SAMPLES_PER_CHUNK = 4096;

/** How long the mock's speech for `input` lasts, in samples. */
export function speechSamples(input: string, speed = 1): number {
  const seconds = Math.max(0.1, ([...input].length * 0.06) / speed);
  return Math.round(seconds * MOCK_SAMPLE_RATE);
}

/** `count` samples of the tone from sample `start`, as 16-bit little-endian PCM. */
function tone(start: number, count: number): Buffer {
  const out = Buffer.allocUnsafe(count * 2);
  for (let i = 0; i < count; i++) {
    const t = (start + i) / MOCK_SAMPLE_RATE;
    out.writeInt16LE(Math.round(Math.sin(2 * Math.PI * TONE_HZ * t) * 0.3 * 32767), i * 2);
  }
  return out;
}

/** A 44-byte RIFF/WAVE header for 16-bit mono PCM. */
export function wavHeader(samples: number, sampleRate = MOCK_SAMPLE_RATE): Buffer {
  const data = samples * 2;
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data, 40);
  return header;
}

/** A whole WAV file of the tone (tests and fixtures use it). */
export function toneWav(seconds: number, sampleRate = MOCK_SAMPLE_RATE): Buffer {
  const samples = Math.round(seconds * sampleRate);
  return Buffer.concat([wavHeader(samples, sampleRate), tone(0, samples)]);
}

async function* pcmChunks(samples: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < samples; at += SAMPLES_PER_CHUNK) yield tone(at, Math.min(SAMPLES_PER_CHUNK, samples - at));
}

async function* wavChunks(samples: number): AsyncGenerator<Buffer> {
  yield wavHeader(samples);
  yield* pcmChunks(samples);
}

// --- mp3: silent MPEG-1 Layer III frames (48 kHz, 128 kbit/s, mono: 384 bytes, 1152 samples each)

const MP3_FRAME = (() => {
  const frame = Buffer.alloc(384);
  // Sync, MPEG-1, Layer III, no CRC; 128 kbit/s, 48 kHz, no padding; mono. The side information
  // and main data are all zero: every granule is empty, which decodes as silence.
  frame[0] = 0xff;
  frame[1] = 0xfb;
  frame[2] = 0x94;
  frame[3] = 0xc0;
  return frame;
})();

async function* mp3Chunks(samples: number): AsyncGenerator<Buffer> {
  const frames = Math.max(1, Math.ceil(samples / MOCK_SAMPLE_RATE / (1152 / 48_000)));
  for (let at = 0; at < frames; at += 32) {
    const count = Math.min(32, frames - at);
    yield Buffer.concat(Array.from({ length: count }, () => MP3_FRAME));
  }
}

// --- flac: STREAMINFO and frames with verbatim subframes

function crc8(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** A frame number as FLAC writes it (UTF-8-like, up to 16 bits here). */
function frameNumber(n: number): number[] {
  if (n < 0x80) return [n];
  if (n < 0x800) return [0xc0 | (n >> 6), 0x80 | (n & 0x3f)];
  return [0xe0 | (n >> 12), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
}

function flacStreamInfo(samples: number): Buffer {
  const out = Buffer.alloc(4 + 4 + 34);
  out.write('fLaC', 0, 'ascii');
  out[4] = 0x80; // last metadata block, type 0 (STREAMINFO)
  out.writeUIntBE(34, 5, 3);
  out.writeUInt16BE(SAMPLES_PER_CHUNK, 8); // min block size
  out.writeUInt16BE(SAMPLES_PER_CHUNK, 10); // max block size
  // min and max frame size: 0 (unknown)
  const packed = (BigInt(MOCK_SAMPLE_RATE) << 44n) | (0n << 41n) | (15n << 36n) | BigInt(samples);
  out.writeBigUInt64BE(packed, 18);
  // MD5 of the samples: zeros (unknown), which FLAC allows.
  return out;
}

function flacFrame(index: number, start: number, count: number): Buffer {
  const header = Buffer.from([
    0xff,
    0xf8, // sync, fixed block size
    0x77, // block size: 16-bit (n-1) at the end of the header; sample rate 24 kHz
    0x08, // mono, 16 bits per sample
    ...frameNumber(index),
    (count - 1) >> 8,
    (count - 1) & 0xff,
  ]);
  const pcm = tone(start, count);
  const body = Buffer.allocUnsafe(1 + count * 2);
  body[0] = 0x02; // verbatim subframe, no wasted bits
  for (let i = 0; i < count; i++) body.writeInt16BE(pcm.readInt16LE(i * 2), 1 + i * 2);
  const framed = Buffer.concat([header, Buffer.from([crc8(header)]), body]);
  const crc = Buffer.alloc(2);
  crc.writeUInt16BE(crc16(framed));
  return Buffer.concat([framed, crc]);
}

async function* flacChunks(samples: number): AsyncGenerator<Buffer> {
  yield flacStreamInfo(samples);
  for (let at = 0, index = 0; at < samples; at += SAMPLES_PER_CHUNK, index++) {
    yield flacFrame(index, at, Math.min(SAMPLES_PER_CHUNK, samples - at));
  }
}

const ENCODERS: Record<string, ((samples: number) => AsyncGenerator<Buffer>) | undefined> = {
  wav: wavChunks,
  pcm: pcmChunks,
  flac: flacChunks,
  mp3: mp3Chunks,
};

/** The characters of a speech input, as the API counts them (code points). */
export function characterCount(input: unknown): number {
  return typeof input === 'string' ? [...input].length : 0;
}

export function mockSpeech(options: MockAudioOptions): OperationHandler<'speech'> {
  return async (request, { signal }) => {
    const body = request.body;
    const format = typeof body.response_format === 'string' ? body.response_format : 'mp3';
    const encode = ENCODERS[format];
    if (!encode) {
      throw new GatewayError('invalid_value', {
        param: 'response_format',
        params: { detail: `the mock back end cannot encode '${format}'; it answers wav, pcm, flac and mp3.` },
      });
    }
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const input = typeof body.input === 'string' ? body.input : '';
    const speed = typeof body.speed === 'number' ? body.speed : 1;
    const usage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0, characters: characterCount(input) };
    return { kind: 'stream', status: 200, chunks: encode(speechSamples(input, speed)), usage };
  };
}

// --- reading WAV files

export interface WavInfo {
  /** Seconds of audio. */
  duration: number;
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  /** Whether the length comes from the samples themselves (uncompressed audio), not a byte rate the header claims. */
  fromSamples: boolean;
}

/**
 * The format and length of a RIFF/WAVE file from its first bytes (the `fmt ` and `data` chunk
 * headers), or undefined when it is not one. A `data` size past the end of the file, or 0 (a WAV
 * written while recording), counts the bytes that are there.
 */
export async function readWavInfo(path: string): Promise<WavInfo | undefined> {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    await handle.read(head, 0, head.length, 0);
    return wavInfoOf(head, size);
  } finally {
    await handle.close();
  }
}

/** WAVE format codes whose bytes a second are the samples' (PCM, IEEE float, and the extensible header around either). */
const UNCOMPRESSED = new Set([1, 3, 0xfffe]);

/**
 * The bytes a second of a WAV's audio, as a player reads them. Uncompressed audio is played by its
 * sample rate, channels and sample size, so those decide, never the header's own `byteRate` (a
 * client could write any there, and set what its audio is charged). A compressed one has only
 * `byteRate`, believed within what speech codecs use (8 kbit/s to 16 Mbit/s). Undefined when the
 * header is not one a player would take.
 */
function bytesPerSecond(format: { code: number; channels: number; sampleRate: number; byteRate: number; bitsPerSample: number }): number | undefined {
  if (UNCOMPRESSED.has(format.code)) {
    const { sampleRate, channels, bitsPerSample } = format;
    if (sampleRate < 1000 || sampleRate > 768_000 || channels < 1 || channels > 32 || bitsPerSample < 8 || bitsPerSample > 64 || bitsPerSample % 8 !== 0) return undefined;
    return (sampleRate * channels * bitsPerSample) / 8;
  }
  return format.byteRate >= 1000 && format.byteRate <= 2_000_000 ? format.byteRate : undefined;
}

export function wavInfoOf(head: Buffer, fileSize = head.length): WavInfo | undefined {
  if (head.length < 12 || head.toString('ascii', 0, 4) !== 'RIFF' || head.toString('ascii', 8, 12) !== 'WAVE') return undefined;
  let format: { code: number; channels: number; sampleRate: number; byteRate: number; bitsPerSample: number } | undefined;
  for (let at = 12; at + 8 <= head.length; ) {
    const id = head.toString('ascii', at, at + 4);
    const length = head.readUInt32LE(at + 4);
    if (id === 'fmt ' && at + 24 <= head.length) {
      format = {
        code: head.readUInt16LE(at + 8),
        channels: head.readUInt16LE(at + 10),
        sampleRate: head.readUInt32LE(at + 12),
        byteRate: head.readUInt32LE(at + 16),
        bitsPerSample: head.readUInt16LE(at + 22),
      };
    } else if (id === 'data') {
      const rate = format && bytesPerSecond(format);
      if (!format || !rate) return undefined;
      // A size of 0 is what recorders that stream a WAV write before they know it (and may never
      // fix): the bytes that are there, as for a size past the end.
      const present = fileSize - (at + 8);
      const bytes = length === 0 ? present : Math.min(length, present);
      return { duration: bytes / rate, sampleRate: format.sampleRate, channels: format.channels, bitsPerSample: format.bitsPerSample, fromSamples: UNCOMPRESSED.has(format.code) };
    }
    at += 8 + length + (length % 2);
  }
  return undefined;
}

// --- transcription and translation

function clock(seconds: number, separator: ',' | '.'): string {
  const ms = Math.round(seconds * 1000);
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, width = 2) => String(n).padStart(width, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/** The mock's answer in each response format; usage in seconds of audio. */
export function transcriptText(task: 'transcribe' | 'translate', body: Record<string, unknown>, duration: number): unknown {
  const seconds = duration.toFixed(2);
  const text =
    task === 'transcribe'
      ? `Mock transcription of a ${seconds} second recording.`
      : `Mock English translation of a ${seconds} second recording.`;
  const format = typeof body.response_format === 'string' ? body.response_format : 'json';
  const usage = { type: 'duration', seconds: Math.ceil(duration) };
  switch (format) {
    case 'json':
      return { text, usage };
    case 'text':
      return `${text}\n`;
    case 'srt':
      return `1\n${clock(0, ',')} --> ${clock(duration, ',')}\n${text}\n\n`;
    case 'vtt':
      return `WEBVTT\n\n${clock(0, '.')} --> ${clock(duration, '.')}\n${text}\n\n`;
    case 'verbose_json': {
      const granularities = Array.isArray(body.timestamp_granularities) ? body.timestamp_granularities : ['segment'];
      const words = text.split(' ');
      const step = duration / words.length;
      const answer: Record<string, unknown> = {
        task,
        language: task === 'translate' ? 'english' : typeof body.language === 'string' ? body.language : 'english',
        duration,
        text,
      };
      if (granularities.includes('word')) {
        answer.words = words.map((word, i) => ({ word: word.replace(/\.$/, ''), start: +(i * step).toFixed(3), end: +((i + 1) * step).toFixed(3) }));
      }
      if (granularities.includes('segment')) {
        answer.segments = [
          { id: 0, seek: 0, start: 0, end: duration, text: ` ${text}`, tokens: [], temperature: 0, avg_logprob: -0.1, compression_ratio: 1, no_speech_prob: 0 },
        ];
      }
      answer.usage = usage;
      return answer;
    }
    default:
      throw new GatewayError('invalid_value', {
        param: 'response_format',
        params: { detail: `the mock back end answers json, text, srt, verbose_json and vtt, not '${format}'.` },
      });
  }
}

function mockTranscript(task: 'transcribe' | 'translate', options: MockAudioOptions): OperationHandler<'transcription' | 'translation'> {
  return async (request, { signal }) => {
    const file = request.body.file;
    if (!isUploadedFile(file)) throw new GatewayError('missing_required_parameter', { param: 'file' });
    const info = await readWavInfo(file.path);
    if (!info) {
      throw new GatewayError('invalid_value', { param: 'file', params: { detail: 'the mock back end reads WAV (RIFF/WAVE) files only.' } });
    }
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const body = transcriptText(task, request.body, info.duration);
    // Metered as the answer reports it (whole seconds, rounded up, as OpenAI's `usage.seconds`).
    return { kind: 'json', status: 200, body, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: Math.ceil(info.duration) } };
  };
}

export const mockTranscription = (options: MockAudioOptions): OperationHandler<'transcription'> =>
  mockTranscript('transcribe', options) as OperationHandler<'transcription'>;
export const mockTranslation = (options: MockAudioOptions): OperationHandler<'translation'> =>
  mockTranscript('translate', options) as OperationHandler<'translation'>;
