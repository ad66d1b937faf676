import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import type { IncomingMessage } from 'node:http';
import type { Dispatcher } from 'undici';
import type { File as FormidableFile } from 'formidable';
import { GatewayError } from '../errors.js';
import { readCapped, sendUpstream, type UpstreamHttpResponse } from './client.js';
import { secretsWith, transportError, upstreamError } from './upstream.js';
import { codingsOf, decodedStream, decoderFor, DEFAULT_BODY_TIMEOUT_MS, hasBody, timeBodyWait, watchBodyIdle } from './body.js';
import { askForBody } from './continue.js';

/**
 * multipart/form-data in both directions, without ever holding an uploaded file in memory:
 *
 * - `createMultipartReader(limit)` reads a client's form: every file is spooled to a temporary
 *   file as it arrives (the whole request capped at `limit` bytes, a 413 past it), the text
 *   fields become a plain body object the route's JSON Schema validates, and each file sits in
 *   that object as an `UploadedFile` (its path, name, type and size). `cleanup()` deletes the
 *   temporary files; the pipeline calls it when the response closes, however the call ended.
 * - `multipartBody()` / `postMultipart()` send a form to a back end, streaming each file from
 *   its temporary path (a fresh stream per attempt, so a retry sends the file again).
 */

/** A file a client uploaded, spooled to a temporary file that lives as long as the call. */
export interface UploadedFile {
  readonly kind: 'uploaded-file';
  /** Where the bytes are: read them (or stream them upstream) before the call ends. */
  readonly path: string;
  /** The file name the client gave (`speech.wav`); `file` when it gave none. */
  readonly filename: string;
  /** The media type the client gave; `application/octet-stream` when it gave none. */
  readonly contentType: string;
  readonly size: number;
}

export function isUploadedFile(value: unknown): value is UploadedFile {
  return value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'uploaded-file';
}

/** A client's form, read: the fields (files included) as the route's body. */
export interface MultipartBody {
  /**
   * Text fields as strings (converted to numbers or booleans where the route's schema says so),
   * files as UploadedFile. `name[]` fields (and a name sent more than once) become arrays.
   */
  value: Record<string, unknown>;
  files: UploadedFile[];
  /** Delete the temporary files (safe to call more than once). */
  cleanup(): Promise<void>;
}

export interface MultipartReaderOptions {
  /** The most files one form may carry. Default 32. */
  maxFiles?: number;
  /** The longest silence while the form arrives (408 past it); 0 waits for ever. Default 30 s. */
  idleMs?: number;
  /** Where temporary files go (read per request). Default: the OS temporary directory. */
  dir?: () => string;
}

/** The prefix of every temporary file the gateway spools an upload to. */
export const UPLOAD_PREFIX = 'switchyard-upload-';

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Read a multipart/form-data body: 415 for another media type, 413 past `limitBytes` (checked
 * against Content-Length first, then counted as the bytes arrive), 400 for a malformed form. A
 * body-less request reads as `{}` (validation then names the missing fields).
 */
export function createMultipartReader(limitBytes: number, options: MultipartReaderOptions = {}) {
  const maxFiles = options.maxFiles ?? 32;
  const dirOf = options.dir ?? (() => os.tmpdir());

  return async function readMultipartBody(req: IncomingMessage, schema?: object): Promise<MultipartBody> {
    const empty: MultipartBody = { value: {}, files: [], cleanup: async () => undefined };
    if (!hasBody(req)) return empty;
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data\s*(;|$)/i.test(type)) {
      throw new GatewayError('unsupported_media_type', {
        params: { contentType: type.split(';')[0]!.trim() || '(none)', accepted: 'multipart/form-data' },
      });
    }
    // A slow upload is the client's time, not the gateway's (x-switchyard-overhead-ms).
    timeBodyWait(req);
    // The right type without the boundary that separates its parts: the form cannot be read.
    if (!/;\s*boundary=\S/i.test(type)) {
      throw new GatewayError('invalid_request', { params: { detail: "The multipart/form-data body has no boundary in its Content-Type (multipart/form-data; boundary=...): its parts cannot be told apart." } });
    }
    const declared = Number(req.headers['content-length']);
    if (declared > limitBytes) throw new GatewayError('body_too_large', { params: { limit: limitBytes } });
    // An unknown content coding is a 415 before anything is read or watched.
    const codings = codingsOf(req.headers['content-encoding']);
    const stages = codings.map(decoderFor);
    // A client waiting for its 100 Continue sends the form now: the call was let in.
    askForBody(req);

    // Loaded on the first form, not at start: most gateways never see one.
    const { default: formidable } = await import('formidable');
    const form = formidable({
      uploadDir: dirOf(),
      maxFileSize: limitBytes,
      maxTotalFileSize: limitBytes,
      maxFieldsSize: limitBytes,
      maxFiles,
      maxFields: 1000,
      allowEmptyFiles: false,
      minFileSize: 1,
      keepExtensions: false,
      filename: () => `${UPLOAD_PREFIX}${randomUUID()}`,
    });

    // A part is a file when its Content-Disposition names a filename, whatever its Content-Type
    // says (RFC 7578: the type is optional on any part); formidable goes by the type alone, so a
    // file sent without one (reqwest, OkHttp) was read into memory as text, and a text field
    // sent with one (.NET's StringContent, `text/plain; charset=utf-8`) was taken for a file.
    const handlePart = form.onPart.bind(form);
    form.onPart = (part) => {
      const type = part.mimetype ?? '';
      if (typeof part.originalFilename === 'string' || (type !== '' && !/^(text\/|application\/([\w.-]+\+)?json\b)/i.test(type))) {
        part.mimetype ||= 'application/octet-stream';
      } else {
        // A text field (a JSON one too, as Spring and Apache HttpClient send some), read in its charset: Latin-1 (and its Windows superset, near enough) as
        // such, anything else as UTF-8. A Content-Transfer-Encoding of 7bit, 8bit or binary
        // (Apache HttpClient sends 8bit) says nothing of the text's decoding: formidable would
        // hand it to a StringDecoder, which throws on it, out of any request's reach.
        const charset = /;\s*charset="?([^";\s]+)/i.exec(type)?.[1]?.toLowerCase();
        (part as { transferEncoding?: string }).transferEncoding = charset !== undefined && /^(iso-8859-1|latin-?1|windows-1252|cp1252|us-ascii|ascii)$/.test(charset) ? 'latin1' : 'utf-8';
        part.mimetype = null;
      }
      return handlePart(part);
    };

    // Every file formidable opens, so that each is deleted whatever happens (formidable's own
    // clean-up on error misses a file it opens after the error).
    const opened: FormidableFile[] = [];
    let settled = false;
    let failed = false;
    form.on('fileBegin', (_name, file) => {
      opened.push(file);
      // A part that began after the form failed: nobody will use it.
      if (settled && failed) setImmediate(() => void removeFiles([file]));
    });
    const removeFiles = async (files: readonly FormidableFile[]) => {
      await Promise.all(files.map((file) => removeFile(file)));
    };
    const cleanup = async () => {
      await removeFiles(opened);
    };

    // The whole request (fields, files and framing) against the limit, as the bytes arrive.
    // (formidable's progress event, not a 'data' listener: that would start the flow before
    // formidable listens, and lose the first bytes).
    const fail = (error: unknown) => (form as unknown as { _error(e: unknown): void })._error(error);
    form.on('progress', (received) => {
      if (received > limitBytes) fail(new BodyOverLimit());
    });
    const onClose = () => {
      if (!req.complete) fail(new ClientLeft());
    };
    req.on('close', onClose);
    const stopWatching = watchBodyIdle(req, options.idleMs ?? DEFAULT_BODY_TIMEOUT_MS, fail);

    // Fields and files in the order they came (formidable's own `fields` object would let a
    // `__proto__` field reach its prototype). A file takes its place when it begins: the ends of
    // two files' disk writes may come in either order.
    const parts: Array<[string, string | FormidableFile]> = [];
    const written = new Set<FormidableFile>();
    // A part without a name (no name= in its Content-Disposition, or no Content-Disposition at
    // all, or name="") is no field of any form: the form is refused at once, whatever follows.
    form.on('field', (name, text) => {
      if (!name) fail(new NamelessPart());
      else parts.push([name, text]);
    });
    form.on('fileBegin', (name, file) => {
      if (!name) fail(new NamelessPart());
      else parts.push([name, file]);
    });
    form.on('file', (_name, file) => written.add(file));
    // A compressed form (gzip, deflate, br) is read as it decodes: the limit counts its decoded
    // bytes, as formidable sees them.
    let source: IncomingMessage = req;
    if (codings.length > 0) {
      source = Object.assign(decodedStream(req, codings, stages, fail), {
        headers: { ...req.headers, 'content-length': undefined, 'content-encoding': undefined, 'transfer-encoding': 'chunked' },
      }) as unknown as IncomingMessage;
    }
    try {
      await form.parse(source);
    } catch (error) {
      failed = true;
      settled = true;
      await cleanup();
      throw formError(error, limitBytes);
    } finally {
      settled = true;
      stopWatching();
      req.off('close', onClose);
    }

    const value: Record<string, unknown> = {};
    const uploads: UploadedFile[] = [];
    try {
      for (const [rawName, file] of parts) {
        if (typeof file === 'string') put(value, rawName, file);
        else if (written.has(file)) {
          const upload: UploadedFile = {
            kind: 'uploaded-file',
            path: file.filepath,
            filename: file.originalFilename || nameFor(file.mimetype),
            contentType: file.mimetype || 'application/octet-stream',
            size: file.size,
          };
          uploads.push(upload);
          put(value, rawName, upload);
        }
      }
    } catch (error) {
      await cleanup();
      throw error;
    }
    if (schema) coerceFields(value, schema);
    return { value, files: uploads, cleanup };
  };
}

/** Close a spooled file's stream if it is still open, then delete it. */
async function removeFile(file: FormidableFile): Promise<void> {
  const stream = (file as unknown as { _writeStream?: NodeJS.WritableStream & { closed?: boolean; destroy(): void } })._writeStream;
  if (stream && !stream.closed) {
    await new Promise<void>((resolve) => {
      stream.once('close', () => resolve());
      stream.destroy();
    });
  }
  await rm(file.filepath, { force: true }).catch(() => undefined);
}

/** Add one field: `name[]` (and a name sent again) make an array. */
function put(target: Record<string, unknown>, rawName: string, item: unknown): void {
  if (!rawName) throw formError(new NamelessPart(), 0);
  const isArray = rawName.endsWith('[]');
  const name = isArray ? rawName.slice(0, -2) : rawName;
  if (FORBIDDEN_KEYS.has(name)) throw new GatewayError('forbidden_key', { params: { key: name } });
  const existing = Object.prototype.hasOwnProperty.call(target, name) ? target[name] : undefined;
  if (existing === undefined) target[name] = isArray ? [item] : item;
  else if (Array.isArray(existing)) existing.push(item);
  else target[name] = [existing, item];
}

class BodyOverLimit extends Error {}
class ClientLeft extends Error {}
class NamelessPart extends Error {}

function formError(error: unknown, limitBytes: number): GatewayError {
  if (error instanceof GatewayError) return error;
  if (error instanceof BodyOverLimit) return new GatewayError('body_too_large', { params: { limit: limitBytes } });
  if (error instanceof ClientLeft) return new GatewayError('client_closed_request');
  if (error instanceof NamelessPart) {
    return new GatewayError('invalid_request', {
      params: { detail: 'The multipart/form-data body could not be read: a part has no name (each part needs Content-Disposition: form-data; name="...").' },
    });
  }
  const e = error as { httpCode?: number; code?: number; message?: string };
  // Too many files or fields come with formidable's 413 too: said as what they are, not as size.
  if (e.code === 1015) return new GatewayError('invalid_request', { params: { detail: 'The form carries more files than the gateway accepts.' } });
  if (e.code === 1007) return new GatewayError('invalid_request', { params: { detail: 'The form carries more fields than the gateway accepts.' } });
  if (e.httpCode === 413) return new GatewayError('body_too_large', { params: { limit: limitBytes } });
  if (e.code === 1002) return new GatewayError('client_closed_request');
  if (e.code === 1010 || e.code === 1008) return new GatewayError('invalid_request', { params: { detail: 'An uploaded file is empty.' } });
  return new GatewayError('invalid_request', { params: { detail: 'The multipart/form-data body could not be read.' } });
}

const NUMBER = /^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/;

/**
 * Form fields are text: turn the ones the schema types as numbers, integers or booleans (or
 * arrays of them) into those, so the route's JSON Schema checks them as it would a JSON body.
 * A text that does not read as one stays text, and validation names it.
 */
export function coerceFields(value: Record<string, unknown>, schema: object): void {
  const properties = (schema as { properties?: Record<string, { type?: unknown; items?: { type?: unknown } }> }).properties;
  if (!properties) return;
  for (const name of Object.keys(value)) {
    const property = properties[name];
    if (!property) continue;
    const item = value[name];
    if (Array.isArray(item)) {
      const types = typesOf(property.items?.type);
      if (types.length > 0) value[name] = item.map((each) => coerce(each, types));
    } else value[name] = coerce(item, typesOf(property.type));
  }
}

function typesOf(type: unknown): string[] {
  return Array.isArray(type) ? (type as string[]) : typeof type === 'string' ? [type] : [];
}

function coerce(item: unknown, types: readonly string[]): unknown {
  if (typeof item !== 'string' || types.includes('string')) return item;
  if ((types.includes('number') || types.includes('integer')) && NUMBER.test(item)) return Number(item);
  if (types.includes('boolean') && (item === 'true' || item === 'false')) return item === 'true';
  if (types.includes('null') && item === 'null') return null;
  return item;
}

// ---------------------------------------------------------------------------------------------
// Sending a form upstream
// ---------------------------------------------------------------------------------------------

/** One part of a form to send: a text field or a spooled file. */
export type FormPart = { name: string; value: string } | { name: string; file: UploadedFile };

/** A form ready to send: its Content-Type (with the boundary), its exact length, and its bytes. */
export interface EncodedForm {
  contentType: string;
  length: number;
  /** A fresh stream of the form's bytes; files are read from disk as it is consumed. */
  stream(): AsyncIterable<Uint8Array>;
}

/** A name or file name inside a quoted header parameter, escaped as browsers do. */
function quoted(text: string): string {
  return text.replace(/\r/g, '%0D').replace(/\n/g, '%0A').replace(/"/g, '%22');
}

/** Encode a form as multipart/form-data without reading any file into memory. */
export function multipartBody(parts: readonly FormPart[]): EncodedForm {
  const boundary = `----switchyard${randomUUID().replace(/-/g, '')}`;
  const pieces: Array<Buffer | UploadedFile> = [];
  let length = 0;
  const add = (piece: Buffer | UploadedFile) => {
    pieces.push(piece);
    length += Buffer.isBuffer(piece) ? piece.length : piece.size;
  };
  for (const part of parts) {
    if ('file' in part) {
      add(
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${quoted(part.name)}"; filename="${quoted(part.file.filename)}"\r\n` +
            `Content-Type: ${part.file.contentType.replace(/[\r\n]/g, '')}\r\n\r\n`,
        ),
      );
      add(part.file);
      add(Buffer.from('\r\n'));
    } else {
      add(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quoted(part.name)}"\r\n\r\n${part.value}\r\n`));
    }
  }
  add(Buffer.from(`--${boundary}--\r\n`));
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    length,
    async *stream() {
      for (const piece of pieces) {
        if (Buffer.isBuffer(piece)) {
          yield piece;
          continue;
        }
        let sent = 0;
        for await (const chunk of createReadStream(piece.path, { highWaterMark: 64 * 1024 })) {
          sent += (chunk as Buffer).length;
          yield chunk as Buffer;
        }
        // The length was announced: a file that changed size would corrupt the framing.
        if (sent !== piece.size) throw new Error('an uploaded file changed size while it was sent');
      }
    },
  };
}

/** One form POSTed to a back end, as postJson does for a JSON body. */
export interface MultipartCall {
  path: string;
  headers: Record<string, string>;
  parts: readonly FormPart[];
  signal: AbortSignal;
  /** What to ask for in `accept`. Default `application/json`. */
  accept?: string;
  secrets: readonly (string | undefined)[];
  failure?: (status: number, body: string, headers: Record<string, string | string[] | undefined>) => GatewayError;
}

/**
 * POST a form, the files streamed from disk: transport failures and error statuses become the
 * gateway's errors (secrets scrubbed); a 2xx answer comes back unread.
 */
export async function postMultipart(dispatcher: Dispatcher, call: MultipartCall): Promise<UpstreamHttpResponse> {
  const form = multipartBody(call.parts);
  let response: UpstreamHttpResponse;
  try {
    response = await sendUpstream(dispatcher, {
      method: 'POST',
      path: call.path,
      headers: {
        ...call.headers,
        'content-type': form.contentType,
        'content-length': String(form.length),
        accept: call.accept ?? 'application/json',
      },
      // undici's dispatch takes an async iterable body (UpstreamHttpRequest names only the
      // in-memory kinds); the file is read from disk as the socket takes it.
      body: form.stream() as unknown as Buffer,
      signal: call.signal,
    });
  } catch (error) {
    throw transportError(error, call.signal);
  }
  if (response.statusCode >= 400) {
    const text = await readCapped(response.body);
    throw call.failure ? call.failure(response.statusCode, text, response.headers) : upstreamError(response.statusCode, text, response.headers, secretsWith(dispatcher, call.secrets));
  }
  return response;
}

/** The file-name extensions of the media types an upload may have (OpenAI's APIs tell a file's format by its name). */
const EXTENSIONS: Readonly<Record<string, string>> = {
  'audio/wav': 'wav', 'audio/x-wav': 'wav', 'audio/wave': 'wav', 'audio/vnd.wave': 'wav', 'audio/mpeg': 'mp3', 'audio/mp3': 'mp3',
  'audio/mp4': 'm4a', 'audio/m4a': 'm4a', 'audio/x-m4a': 'm4a', 'audio/ogg': 'ogg', 'audio/webm': 'webm', 'audio/flac': 'flac', 'audio/x-flac': 'flac',
  'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif', 'video/mp4': 'mp4', 'video/webm': 'webm',
};

/** The file-name extension of a media type (`audio/wav` → `wav`, parameters ignored), when it is a known one. */
export function extensionOf(type: string | null | undefined): string | undefined {
  return type ? EXTENSIONS[type.split(';')[0]!.trim().toLowerCase()] : undefined;
}

/** A name for a file part that gave none: `file`, with the extension of its type when it is a known one. */
function nameFor(type: string | null | undefined): string {
  const extension = extensionOf(type);
  return extension ? `file.${extension}` : 'file';
}
