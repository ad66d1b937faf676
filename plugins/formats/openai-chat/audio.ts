import { GatewayError, type CallRoute, type FormatReply, type JsonSchema, type RouteInput, type UpstreamResponse } from '../../../core/index.js';
import { refuseFilesIn, textFieldsOf } from './form-files.js';

/**
 * POST /v1/audio/speech, /v1/audio/transcriptions and /v1/audio/translations in the OpenAI wire
 * format (operations `speech`, `transcription`, `translation`).
 *
 * Speech: a JSON body; the answer is audio bytes, streamed to the client as the back end sends
 * them (a provider answers a stream of byte chunks), labelled with the media type of the format
 * asked for. Transcriptions and translations: a multipart/form-data body whose `file` is spooled
 * to disk by the core and reaches the provider as an UploadedFile; the answer is the back end's
 * JSON object (`json`, `verbose_json`) or its text (`text`, `srt`, `vtt`) as text/plain.
 */

/** The voices the API spec lists. */
export const SPEECH_VOICES = ['alloy', 'echo', 'fable', 'onyx', 'nova', 'shimmer'] as const;

/** The media type of each speech format (as OpenAI labels its answers). */
export const SPEECH_CONTENT_TYPES = {
  mp3: 'audio/mpeg',
  opus: 'audio/opus',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
} as const;

export type SpeechFormat = keyof typeof SPEECH_CONTENT_TYPES;

/** The text formats of a transcription; the rest are JSON. */
export const TEXT_RESPONSE_FORMATS: ReadonlySet<string> = new Set(['text', 'srt', 'vtt']);

/** The most characters one speech request may turn into audio. */
export const MAX_SPEECH_INPUT = 4096;

export const speechSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'input', 'voice'],
  properties: {
    model: { type: 'string', minLength: 1 },
    // ajv counts characters (code points), as the limit is stated.
    input: { type: 'string', minLength: 1, maxLength: MAX_SPEECH_INPUT },
    voice: { type: 'string', enum: [...SPEECH_VOICES] },
    response_format: { type: 'string', enum: Object.keys(SPEECH_CONTENT_TYPES) },
    speed: { type: 'number', minimum: 0.25, maximum: 4 },
    // Speech as server-sent events would reach the client labelled as audio: only raw audio is relayed.
    stream_format: { type: 'string', enum: ['audio'], 'x-message': "'stream_format' must be 'audio': speech events (sse) are not relayed." },
  },
};

/** A multipart file part (the core puts an UploadedFile there); a text field named `file` is not one. */
const fileField = {
  type: 'object',
  required: ['kind', 'path'],
  properties: { kind: { const: 'uploaded-file' } },
  'x-message': "'file' must be one audio file sent as a multipart/form-data file part (one part named 'file').",
};

/** Streamed transcriptions (server-sent events) are not relayed by this gateway. */
const noStream = { type: 'boolean', enum: [false], 'x-message': "'stream' is not supported on this endpoint; leave it unset or false." };

const temperature = { type: 'number', minimum: 0, maximum: 1 };

export const transcriptionSchema: JsonSchema = {
  type: 'object',
  required: ['file', 'model'],
  properties: {
    file: fileField,
    model: { type: 'string', minLength: 1 },
    language: { type: 'string', pattern: '^[A-Za-z]{2}$', 'x-message': "'language' must be an ISO-639-1 code (two letters, such as 'en')." },
    prompt: { type: 'string' },
    response_format: { type: 'string', enum: ['json', 'text', 'srt', 'verbose_json', 'vtt'] },
    temperature,
    timestamp_granularities: { type: 'array', items: { type: 'string', enum: ['word', 'segment'] } },
    stream: noStream,
  },
};

export const translationSchema: JsonSchema = {
  type: 'object',
  required: ['file', 'model'],
  properties: {
    file: fileField,
    model: { type: 'string', minLength: 1 },
    prompt: { type: 'string' },
    // The spec gives no list for translations: any text is passed on, the back end judges it.
    response_format: { type: 'string', minLength: 1 },
    temperature,
    stream: noStream,
  },
};

function modelOf(body: Record<string, unknown>): string {
  return typeof body.model === 'string' ? body.model : '';
}

/** A transcription's or translation's form: of the fields it knows, only `file` may be a file (see form-files.ts). */
function formParser(schema: JsonSchema): (input: RouteInput) => { model: string; stream: boolean } {
  const textFields = textFieldsOf([schema], ['file']);
  return (input) => {
    refuseFilesIn(input, textFields, ['file']);
    return { model: modelOf(input.body), stream: false };
  };
}

export function speechFormatOf(body: Record<string, unknown>): SpeechFormat {
  const format = body.response_format;
  return typeof format === 'string' && format in SPEECH_CONTENT_TYPES ? (format as SpeechFormat) : 'mp3';
}

function renderSpeech(response: UpstreamResponse<'speech'>, body: Record<string, unknown>): FormatReply {
  const headers = { 'content-type': SPEECH_CONTENT_TYPES[speechFormatOf(body)] };
  if (response.kind === 'stream') return { status: 200, headers, stream: response.chunks as AsyncIterable<Uint8Array> };
  // A provider that had the whole audio at once.
  if (response.body instanceof Uint8Array) return { status: 200, headers, body: response.body };
  throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with audio' } });
}

/** The back end's text as text/plain, its JSON object as JSON. */
function renderText(response: UpstreamResponse<'transcription' | 'translation'>): FormatReply {
  if (response.kind === 'stream') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a transcription' } });
  if (typeof response.body === 'string') return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: response.body };
  if (response.body !== null && typeof response.body === 'object' && !Array.isArray(response.body)) return { status: 200, body: response.body };
  throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a transcription' } });
}

export const speech: CallRoute<'speech'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/audio/speech',
  operation: 'speech',
  schema: speechSchema,
  parse: ({ body }) => ({ model: modelOf(body), stream: false }),
  render: (response, call) => renderSpeech(response, call.body),
};

export const transcriptions: CallRoute<'transcription'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/audio/transcriptions',
  operation: 'transcription',
  body: 'multipart',
  schema: transcriptionSchema,
  parse: formParser(transcriptionSchema),
  toCanonical(body) {
    // As OpenAI has it: timestamps come only with verbose_json.
    if (body.timestamp_granularities !== undefined && body.response_format !== 'verbose_json') {
      throw new GatewayError('invalid_value', {
        param: 'timestamp_granularities',
        params: { detail: "timestamp_granularities needs response_format 'verbose_json'." },
      });
    }
    return body;
  },
  render: (response) => renderText(response),
};

export const translations: CallRoute<'translation'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/audio/translations',
  operation: 'translation',
  body: 'multipart',
  schema: translationSchema,
  parse: formParser(translationSchema),
  render: (response) => renderText(response),
};

export const audioRoutes = [speech, transcriptions, translations] as const;
