import { GEMINI_FILE, YOUTUBE } from '../../formats/gemini/request.js';
import { clientPath, fetchImage, GatewayError, IMAGE_FETCH_DEFAULTS, type ChatMessage, type ChatRequest, type ContentPart, type FetchedImage, type GuardedFetchOptions } from '../../../core/index.js';

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
  /** Most images one call may have fetched (distinct URLs). */
  maxImages?: number;
  /** Most bytes of the images one call fetches, together. */
  maxTotalBytes?: number;
}

export const IMAGE_FETCH_CALL_DEFAULTS = { maxImages: 64, maxTotalBytes: 32 * 1024 * 1024 } as const;
/** Fetches of one call under way at once. */
const FETCHES_AT_ONCE = 4;

export const imageFetchSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    allowPrivateHosts: { anyOf: [{ type: 'boolean' }, { type: 'array', items: { type: 'string', minLength: 1 } }] },
    maxBytes: { type: 'integer', minimum: 1 },
    timeoutMs: { type: 'integer', minimum: 1 },
    maxRedirects: { type: 'integer', minimum: 0, maximum: 10 },
    maxImages: { type: 'integer', minimum: 1 },
    maxTotalBytes: { type: 'integer', minimum: 1 },
  },
} as const;

/**
 * One call's image fetches, bounded: each URL fetched once however often the call names it, four
 * at a time, at most `maxImages` URLs, and at most `maxTotalBytes` inlined together, counted for
 * every part that names an image (each goes up as a copy of its own: a 4 KB body naming one large
 * image a hundred times would make a body of gigabytes). The first refusal stops the rest.
 */
export class CallFetches {
  private readonly byUrl = new Map<string, Promise<FetchedImage>>();
  private readonly waiting: Array<() => void> = [];
  private running = 0;
  /** Bytes of the images inlined so far, every part that names one counted. */
  private inlined = 0;
  readonly stop = new AbortController();
  private readonly options: Omit<GuardedFetchOptions, 'param'>;
  private readonly maxImages: number;
  private readonly maxTotalBytes: number;

  constructor(config: ImageFetchConfig, outer: AbortSignal) {
    this.options = {
      allowPrivate: config.allowPrivateHosts,
      maxBytes: config.maxBytes,
      timeoutMs: config.timeoutMs,
      maxRedirects: config.maxRedirects,
      signal: AbortSignal.any([outer, this.stop.signal]),
    };
    this.maxImages = config.maxImages ?? IMAGE_FETCH_CALL_DEFAULTS.maxImages;
    this.maxTotalBytes = config.maxTotalBytes ?? IMAGE_FETCH_CALL_DEFAULTS.maxTotalBytes;
  }

  /** The image at `url` for the part named `param` (fetched once for the call), its bytes counted against the call's total. */
  async get(url: string, param: string): Promise<FetchedImage> {
    let pending = this.byUrl.get(url);
    if (!pending) {
      if (this.byUrl.size >= this.maxImages) {
        this.stop.abort();
        throw new GatewayError('invalid_value', { param, params: { detail: `a call may name at most ${this.maxImages} image URLs for this back end to fetch (imageFetch.maxImages); send fewer, or the images themselves` } });
      }
      pending = this.fetch(url, param);
      this.byUrl.set(url, pending);
    }
    try {
      const image = await pending;
      this.inlined += image.bytes.length;
      if (this.inlined > this.maxTotalBytes) throw this.overTotal(param);
      return image;
    } catch (error) {
      this.stop.abort();
      throw error;
    }
  }

  private overTotal(param: string): GatewayError {
    return new GatewayError('invalid_value', { param, params: { detail: `the images this call names come to more than ${this.maxTotalBytes} bytes together (imageFetch.maxTotalBytes)` } });
  }

  private async fetch(url: string, param: string): Promise<FetchedImage> {
    if (this.running >= FETCHES_AT_ONCE) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.running++;
    try {
      // No image may be larger than what is left of the call's total: a fetch past it stops early.
      const left = this.maxTotalBytes - this.inlined;
      if (left <= 0) throw this.overTotal(param);
      const each = this.options.maxBytes ?? IMAGE_FETCH_DEFAULTS.maxBytes;
      return await fetchImage(url, { ...this.options, param, maxBytes: Math.min(each, left) }).catch((error: unknown) => {
        // Refused for its size only because of what the call's other images took: said so.
        throw left < each && error instanceof GatewayError && /larger than/.test(error.message) ? this.overTotal(param) : error;
      });
    } finally {
      this.running--;
      this.waiting.shift()?.();
    }
  }
}

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
  const fetches = new CallFetches(config, outer);
  const messages = await Promise.all(
    request.messages.map(async (message, i): Promise<ChatMessage> => {
      if (!Array.isArray(message.content) || !message.content.some(isFetchable)) return message;
      const content = await Promise.all(
        message.content.map(async (part, j): Promise<ContentPart> => {
          if (!isFetchable(part)) return part;
          const url = String((part.image_url as { url: string }).url);
          const param = clientPath.get(part) ?? `messages[${i}].content[${j}].image_url.url`;
          const image = await fetches.get(url, param);
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


/**
 * A generateContent part naming an image by an http(s) URL (`fileData` without a MIME type counts
 * as one), except a YouTube URL, which goes to Google as it is.
 */
function isFetchableFileData(part: unknown): part is { fileData: { fileUri: string; mimeType?: string } } {
  if (!isObject(part) || !isObject(part.fileData)) return false;
  const { fileUri, mimeType } = part.fileData;
  const image = mimeType === undefined || mimeType === '' || (typeof mimeType === 'string' && mimeType.startsWith('image/'));
  // A Files API URI goes to Google as it is: Google reads it with the gateway's key, the gateway could not.
  return image && typeof fileUri === 'string' && /^https?:\/\//i.test(fileUri) && !YOUTUBE.test(fileUri) && !GEMINI_FILE.test(fileUri);
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
  const fetches = new CallFetches(config, outer);
  const fetched = await Promise.all(
    contents.map(async (content, i) => {
      if (!isObject(content) || !Array.isArray(content.parts) || !content.parts.some(isFetchableFileData)) return content;
      const parts = await Promise.all(
        content.parts.map(async (part: unknown, j) => {
          if (!isFetchableFileData(part)) return part;
          const image = await fetches.get(part.fileData.fileUri, `contents[${i}].parts[${j}].fileData.fileUri`);
          const { fileData: _fileData, ...rest } = part as Json;
          return { ...rest, inlineData: { mimeType: image.mimeType, data: image.bytes.toString('base64') } };
        }),
      );
      return { ...content, parts };
    }),
  );
  return { ...body, contents: fetched };
}
