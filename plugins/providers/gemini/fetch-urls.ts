import { clientPath, fetchImage, type ChatMessage, type ChatRequest, type ContentPart, type GuardedFetchOptions } from '../../../core/index.js';

/**
 * Image URLs in a chat request, fetched into data: URLs for a back end that takes only bytes
 * (Gemini's inlineData; its fileData reads only gs:// and Files API URIs). Each fetch goes
 * through the SSRF guard (core/http/guarded-fetch.ts); a refused URL fails the call with a 400
 * naming the part where the client sent it (`clientPath`: a Claude client's
 * `messages[0].content[1].source.url`), or the canonical one (`messages[1].content[0].image_url.url`).
 */

/** The provider's `imageFetch` settings. */
export interface ImageFetchConfig {
  /** `true`, or host names / IP literals that may be private (tests, intranets). Default: none. */
  allowPrivateHosts?: boolean | string[];
  maxBytes?: number;
  timeoutMs?: number;
  maxRedirects?: number;
}

export const imageFetchSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    allowPrivateHosts: { anyOf: [{ type: 'boolean' }, { type: 'array', items: { type: 'string', minLength: 1 } }] },
    maxBytes: { type: 'integer', minimum: 1 },
    timeoutMs: { type: 'integer', minimum: 1 },
    maxRedirects: { type: 'integer', minimum: 0, maximum: 10 },
  },
} as const;

function isFetchable(part: ContentPart): boolean {
  if (part.type !== 'image_url') return false;
  const url = (part.image_url as { url?: unknown } | undefined)?.url;
  return typeof url === 'string' && /^https?:\/\//i.test(url);
}

/** The same request made once per call (a retry on another back end does not fetch again). */
const done = new WeakMap<ChatRequest, Promise<ChatRequest>>();

/** `request` with every http(s) image URL replaced by the fetched image as a data: URL; the same object when it has none. */
export function inlineImageUrls(request: ChatRequest, config: ImageFetchConfig | undefined, signal: AbortSignal): Promise<ChatRequest> {
  const has = request.messages.some((m) => Array.isArray(m.content) && m.content.some(isFetchable));
  if (!has) return Promise.resolve(request);
  let pending = done.get(request);
  if (!pending) {
    pending = fetchAll(request, config ?? {}, signal);
    done.set(request, pending);
    // A failure is not remembered: the next attempt may ask again (and be refused again).
    pending.catch(() => done.delete(request));
  }
  return pending;
}

async function fetchAll(request: ChatRequest, config: ImageFetchConfig, outer: AbortSignal): Promise<ChatRequest> {
  // The first refusal stops the other fetches of the call.
  const stop = new AbortController();
  const signal = AbortSignal.any([outer, stop.signal]);
  const options: Omit<GuardedFetchOptions, 'param'> = {
    allowPrivate: config.allowPrivateHosts,
    maxBytes: config.maxBytes,
    timeoutMs: config.timeoutMs,
    maxRedirects: config.maxRedirects,
    signal,
  };
  const messages = await Promise.all(
    request.messages.map(async (message, i): Promise<ChatMessage> => {
      if (!Array.isArray(message.content) || !message.content.some(isFetchable)) return message;
      const content = await Promise.all(
        message.content.map(async (part, j): Promise<ContentPart> => {
          if (!isFetchable(part)) return part;
          const url = String((part.image_url as { url: string }).url);
          const param = clientPath.get(part) ?? `messages[${i}].content[${j}].image_url.url`;
          const image = await fetchImage(url, { ...options, param }).catch((error: unknown) => {
            stop.abort();
            throw error;
          });
          return { ...part, type: 'image_url', image_url: { ...(part.image_url as object), url: `data:${image.mimeType};base64,${image.bytes.toString('base64')}` } };
        }),
      );
      return { ...message, content };
    }),
  );
  return { ...request, messages };
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A YouTube video's address, which Google's API reads itself (a `fileData` without a MIME type, as Google's guide writes it). */
const YOUTUBE = /^https?:\/\/(?:(?:www\.|m\.|music\.)?youtube\.com|youtu\.be)\//i;

/**
 * A generateContent part naming an image by an http(s) URL (`fileData` without a MIME type counts
 * as one), except a YouTube URL, which goes to Google as it is.
 */
function isFetchableFileData(part: unknown): part is { fileData: { fileUri: string; mimeType?: string } } {
  if (!isObject(part) || !isObject(part.fileData)) return false;
  const { fileUri, mimeType } = part.fileData;
  const image = mimeType === undefined || mimeType === '' || (typeof mimeType === 'string' && mimeType.startsWith('image/'));
  return image && typeof fileUri === 'string' && /^https?:\/\//i.test(fileUri) && !YOUTUBE.test(fileUri);
}

const bodiesDone = new WeakMap<object, Promise<Readonly<Json>>>();

/**
 * A Gemini client's own generateContent body (same-format pass-through) with every http(s) image
 * `fileData` fetched through the SSRF guard and sent as `inlineData` (Google reads only Files API
 * and gs:// URIs); the same object when it has none. Everything else in the body stays as it is.
 * A refused URL fails the call with a 400 naming `contents[i].parts[j].fileData.fileUri`.
 */
export function inlineFileDataUrls(body: Readonly<Json>, config: ImageFetchConfig | undefined, signal: AbortSignal): Promise<Readonly<Json>> {
  const contents = body.contents;
  const has = Array.isArray(contents) && contents.some((c) => isObject(c) && Array.isArray(c.parts) && c.parts.some(isFetchableFileData));
  if (!has) return Promise.resolve(body);
  let pending = bodiesDone.get(body);
  if (!pending) {
    pending = fetchFileData(body, contents as unknown[], config ?? {}, signal);
    bodiesDone.set(body, pending);
    pending.catch(() => bodiesDone.delete(body));
  }
  return pending;
}

async function fetchFileData(body: Readonly<Json>, contents: unknown[], config: ImageFetchConfig, outer: AbortSignal): Promise<Readonly<Json>> {
  const stop = new AbortController();
  const signal = AbortSignal.any([outer, stop.signal]);
  const options: Omit<GuardedFetchOptions, 'param'> = {
    allowPrivate: config.allowPrivateHosts,
    maxBytes: config.maxBytes,
    timeoutMs: config.timeoutMs,
    maxRedirects: config.maxRedirects,
    signal,
  };
  const fetched = await Promise.all(
    contents.map(async (content, i) => {
      if (!isObject(content) || !Array.isArray(content.parts) || !content.parts.some(isFetchableFileData)) return content;
      const parts = await Promise.all(
        content.parts.map(async (part: unknown, j) => {
          if (!isFetchableFileData(part)) return part;
          const image = await fetchImage(part.fileData.fileUri, { ...options, param: `contents[${i}].parts[${j}].fileData.fileUri` }).catch((error: unknown) => {
            stop.abort();
            throw error;
          });
          const { fileData: _fileData, ...rest } = part as Json;
          return { ...rest, inlineData: { mimeType: image.mimeType, data: image.bytes.toString('base64') } };
        }),
      );
      return { ...content, parts };
    }),
  );
  return { ...body, contents: fetched };
}
