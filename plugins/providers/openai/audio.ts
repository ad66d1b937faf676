import type { Pool } from 'undici';
import {
  GatewayError,
  isGatewayError,
  isUploadedFile,
  postMultipart,
  readCapped,
  sendUpstream,
  transportError,
  upstreamError,
  type FormPart,
  type OperationHandler,
  type UpstreamHttpResponse,
  type Usage,
  mergeHeaders,
} from '../../../core/index.js';
import { readWavInfo } from '../mock/audio.js';
import type { Endpoint } from './api.js';

/**
 * Audio against an OpenAI-compatible back end.
 *
 * Speech: POST {basePath}/audio/speech with the client's JSON (the back end's model name); the
 * audio comes back as a stream of byte chunks, relayed as they arrive (never held whole), and
 * metered by the characters of `input`.
 *
 * Transcriptions and translations: POST {basePath}/audio/transcriptions|translations as
 * multipart/form-data, the spooled file streamed from disk, every other field as the client sent
 * it (arrays as `name[]`), the model replaced. A JSON answer is relayed as an object, any other
 * (text, srt, vtt) as text. Metered in seconds of audio: the back end's `usage.seconds`
 * (`{type: 'duration'}`), else `duration` of a verbose_json answer, else the length the WAV
 * header gives when the file is a WAV; a back end that reports tokens instead
 * (`{type: 'tokens'}`) is metered in tokens.
 */

/** Speech sends JSON and takes whatever audio type the back end answers with. */
const SPEECH_HEADERS = { 'content-type': 'application/json', accept: '*/*' };

function usageOfCharacters(input: unknown): Usage {
  return { inputTokens: 0, outputTokens: 0, totalTokens: 0, characters: typeof input === 'string' ? [...input].length : 0 };
}

/**
 * Whether an answer of this content type may be audio: anything but text, JSON, XML and web pages
 * (OpenAI labels speech `audio/*`; compatible servers use `application/octet-stream`, `audio/*`,
 * `application/ogg` or nothing).
 */
function mayBeAudio(type: string): boolean {
  return !/^\s*(text\/|application\/(.+\+)?(json|xml)\b|application\/xhtml)/i.test(type);
}

/** A web page where an answer was expected (a login page, a proxy's error page). */
function isWebPage(type: string): boolean {
  return /^\s*(text\/html|application\/xhtml\+xml)\b/i.test(type);
}

export function speechHandler(pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'speech'> {
  const path = `${endpoint.basePath}/audio/speech`;
  return async (request, { signal }) => {
    const body = { ...request.body, model: request.model };
    let response: UpstreamHttpResponse;
    try {
      response = await sendUpstream(pool, {
        method: 'POST',
        path,
        headers: mergeHeaders(endpoint.headers, request.forwardHeaders, SPEECH_HEADERS),
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw transportError(error, signal);
    }
    if (response.statusCode >= 400) {
      throw upstreamError(response.statusCode, await readCapped(response.body), response.headers, secrets);
    }
    const type = String(response.headers['content-type'] ?? '');
    if (!mayBeAudio(type)) {
      // A 200 with JSON, a web page or text where audio was asked for (a proxy's login page, say):
      // not audio, whatever it says, and not to be relayed as audio.
      response.body.destroy();
      throw new GatewayError('upstream_error', { params: { detail: `the back end answered ${type.split(';')[0]} instead of audio` }, retryable: true });
    }
    // No audio at all (a 200 with an empty body) is no answer: not relayed as one, nor charged,
    // and worth another target, as a stream that ends having said nothing is.
    let chunks: AsyncIterable<Buffer>;
    try {
      chunks = await withFirstChunk(response.body);
    } catch (error) {
      throw isGatewayError(error) ? error : transportError(error, signal);
    }
    return { kind: 'stream', status: response.statusCode, chunks, usage: usageOfCharacters(request.body.input) };
  };
}

/**
 * `body`'s bytes once its first chunk came; an upstream_error when it ended without one. Closing
 * what it answers (a reader that stops, or one that never began: a tap that failed) closes the
 * body, its connection let go at once.
 */
async function withFirstChunk(body: AsyncIterable<Buffer>): Promise<AsyncIterable<Buffer>> {
  const it = body[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done) throw new GatewayError('upstream_error', { params: { detail: 'the back end answered no audio (an empty body)' }, retryable: true });
  let pending: IteratorResult<Buffer> | undefined = first;
  const iterator: AsyncIterator<Buffer> = {
    next: async () => {
      if (pending) {
        const result = pending;
        pending = undefined;
        return result;
      }
      return it.next();
    },
    return: async () => {
      pending = undefined;
      await it.return?.();
      return { done: true, value: undefined };
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

/** The form's parts: the file first, then every field as text (`name[]` once per item of an array). */
function formParts(body: Record<string, unknown>, model: string): FormPart[] {
  const parts: FormPart[] = [];
  for (const [name, value] of Object.entries(body)) {
    if (isUploadedFile(value)) parts.push({ name, file: value });
  }
  for (const [name, value] of Object.entries(body)) {
    if (isUploadedFile(value) || value === undefined || value === null) continue;
    if (name === 'model') parts.push({ name, value: model });
    else if (Array.isArray(value)) for (const item of value) parts.push({ name: `${name}[]`, value: String(item) });
    else parts.push({ name, value: typeof value === 'string' ? value : String(value) });
  }
  return parts;
}

/** Seconds (or tokens) of a transcription: the back end's figures first, then what the gateway can read. */
async function transcriptUsage(answer: unknown, file: unknown): Promise<Usage | undefined> {
  const reported = (answer as { usage?: Record<string, unknown> } | null)?.usage;
  if (reported && typeof reported === 'object') {
    if (typeof reported.seconds === 'number' && reported.seconds >= 0) {
      return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: reported.seconds };
    }
    const input = reported.input_tokens;
    const output = reported.output_tokens;
    if (Number.isInteger(input) && Number.isInteger(output) && (input as number) >= 0 && (output as number) >= 0) {
      const total = Number.isInteger(reported.total_tokens) ? (reported.total_tokens as number) : (input as number) + (output as number);
      return { inputTokens: input as number, outputTokens: output as number, totalTokens: total };
    }
  }
  const duration = (answer as { duration?: unknown } | null)?.duration;
  if (typeof duration === 'number' && Number.isFinite(duration) && duration >= 0) {
    return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: duration };
  }
  if (isUploadedFile(file)) {
    const info = await readWavInfo(file.path).catch(() => undefined);
    if (info) return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: info.duration };
  }
  return undefined;
}

function transcriptHandler(
  pool: Pool,
  endpoint: Endpoint,
  secrets: readonly (string | undefined)[],
  operation: 'transcriptions' | 'translations',
): OperationHandler<'transcription' | 'translation'> {
  const path = `${endpoint.basePath}/audio/${operation}`;
  return async (request, { signal }) => {
    const file = request.body.file;
    if (!isUploadedFile(file)) throw new GatewayError('missing_required_parameter', { param: 'file' });
    const format = request.body.response_format;
    const wantsText = format === 'text' || format === 'srt' || format === 'vtt';
    const headers = mergeHeaders(endpoint.headers, request.forwardHeaders);
    delete (headers as Record<string, string>)['content-type'];
    const response = await postMultipart(pool, {
      path,
      headers,
      parts: formParts(request.body, request.model),
      signal,
      accept: wantsText ? 'text/plain, application/json' : 'application/json',
      secrets,
    });
    let bytes: Buffer;
    try {
      bytes = await response.body.bytes();
    } catch (error) {
      throw transportError(error, signal);
    }
    const type = String(response.headers['content-type'] ?? '');
    if (isWebPage(type)) {
      throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with a web page, not a transcription' }, retryable: true });
    }
    let answer: unknown = bytes.toString('utf8');
    // JSON asked for (json, verbose_json, diarized_json or nothing) must come as JSON, whatever
    // the label says; a text format may come as text or as JSON.
    if (/^application\/(.+\+)?json/i.test(type) || !wantsText) {
      try {
        answer = JSON.parse(answer as string);
      } catch {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
      }
      if (answer === null || typeof answer !== 'object' || Array.isArray(answer)) {
        throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with a transcription' }, retryable: true });
      }
    }
    return { kind: 'json', status: response.statusCode, body: answer, usage: await transcriptUsage(answer, file) };
  };
}

export const transcriptionHandler = (pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'transcription'> =>
  transcriptHandler(pool, endpoint, secrets, 'transcriptions') as OperationHandler<'transcription'>;
export const translationHandler = (pool: Pool, endpoint: Endpoint, secrets: readonly (string | undefined)[]): OperationHandler<'translation'> =>
  transcriptHandler(pool, endpoint, secrets, 'translations') as OperationHandler<'translation'>;
