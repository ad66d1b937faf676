/**
 * The canonical image request and result, shared by the image routes (both inbound body shapes
 * normalise to it) and by every provider that serves `image` or `image-edit`.
 *
 * Request (`ImageRequest`):
 *   - `model`, `prompt` (the text the client gave: the OpenAI shape's `prompt`, or the spec
 *     shape's `text` items of `input.messages[].content[]` joined with a newline);
 *   - `negative_prompt`, `prompt_extend`, `watermark`, `seed` (the spec shape's `parameters`, or
 *     the same names at the top level of the OpenAI shape);
 *   - `n` (absent: one image), `size` (`WxH` with a lower-case x, or `auto`: the spec shape's
 *     `W*H` is rewritten), `response_format` (absent: whatever the back end gives);
 *   - `images` and `mask` for edits: each an `ImageInput`, a URL (`https://…` or a `data:` URL)
 *     or an uploaded file (multipart);
 *   - `options`: the OpenAI shape's other image settings (quality, style, background,
 *     output_format, output_compression, moderation, input_fidelity, user), passed on by back
 *     ends that know them and named as losses by those that do not.
 *
 * Result (`ImageResult`): the spec's image result, `{created, data: [{url | b64_json,
 * revised_prompt?}]}`. A provider answers with what its back end gave (URLs or base64); the
 * route converts to the `response_format` the client asked for where it can (see images.ts).
 */

/** One input image of an edit. */
export type ImageInput =
  | { kind: 'url'; url: string }
  | {
      kind: 'file';
      /** The uploaded file, as the multipart reader hands it over (read it as a stream). */
      file: UploadedImage;
    };

/**
 * An uploaded file as the gateway's multipart reader hands it over (core/http/multipart.ts's
 * UploadedFile): spooled to `path` for the length of the call; stream it, never read it whole.
 */
export interface UploadedImage {
  readonly kind: 'uploaded-file';
  readonly path: string;
  readonly filename: string;
  readonly contentType: string;
  readonly size: number;
}

export function isUploadedImage(value: unknown): value is UploadedImage {
  return value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'uploaded-file' && typeof (value as { path?: unknown }).path === 'string';
}

/** The OpenAI images API's settings with no counterpart in the spec shape. */
export const IMAGE_OPTIONS = ['quality', 'style', 'background', 'output_format', 'output_compression', 'moderation', 'input_fidelity', 'user'] as const;
export type ImageOption = (typeof IMAGE_OPTIONS)[number];

export interface ImageRequest {
  model: string;
  prompt: string;
  negative_prompt?: string;
  prompt_extend?: boolean;
  watermark?: boolean;
  seed?: number;
  n?: number;
  /** `WxH` or `auto`. */
  size?: string;
  response_format?: 'url' | 'b64_json';
  images?: ImageInput[];
  mask?: ImageInput;
  options: Partial<Record<ImageOption, unknown>>;
  /** Which body shape the client sent (`openai`: prompt…; `spec`: input.messages…). */
  shape: 'openai' | 'spec';
  /** Set by a multipart edit: the part names of the uploaded images, for error messages. */
  [extra: string]: unknown;
}

export interface ImageDatum {
  url?: string;
  b64_json?: string;
  revised_prompt?: string;
}

/** What a GPT image model says of the images besides them, passed on to the client as it came. */
export const IMAGE_RESULT_EXTRAS = ['size', 'quality', 'background', 'output_format', 'usage'] as const;

export interface ImageResult {
  created: number;
  data: ImageDatum[];
  size?: string;
  quality?: string;
  background?: string;
  output_format?: string;
  /** The back end's own usage object (`input_tokens`, `output_tokens`, `total_tokens`, details). */
  usage?: Record<string, unknown>;
}

/** The canonical request of an image call (the pipeline types image bodies loosely). */
export function imageRequestOf(body: unknown): ImageRequest {
  return body as ImageRequest;
}

/** Width and height of a `WxH` size, or undefined (`auto`, absent, malformed). */
export function dimensionsOf(size: string | undefined): { width: number; height: number } | undefined {
  const match = size ? /^(\d+)x(\d+)$/.exec(size) : null;
  return match ? { width: Number(match[1]), height: Number(match[2]) } : undefined;
}

/** The MIME type of image bytes, from their first bytes (PNG, JPEG, WebP, GIF), else PNG. */
export function mimeOf(bytes: Buffer): string {
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.length >= 12 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  if (bytes.length >= 4 && bytes.toString('latin1', 0, 4) === 'GIF8') return 'image/gif';
  return 'image/png';
}

/** A `data:` URL's MIME type and bytes, or undefined for anything else. */
export function parseDataUrl(url: string): { mime: string; bytes: Buffer } | undefined {
  const match = /^data:([\w.+-]+\/[\w.+-]+)?((?:;[^;,]*)*?);base64,(.*)$/s.exec(url);
  if (!match) return undefined;
  return { mime: match[1] ?? 'application/octet-stream', bytes: Buffer.from(match[3]!, 'base64') };
}

/** The image usage a handler reports: the images made, plus tokens when the back end counted them. */
export function imageUsage(images: number, tokens?: { input?: unknown; output?: unknown; total?: unknown }) {
  const whole = (value: unknown) => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined);
  const input = whole(tokens?.input) ?? 0;
  const output = whole(tokens?.output) ?? 0;
  const total = whole(tokens?.total) ?? input + output;
  return { inputTokens: input, outputTokens: output, totalTokens: total, images };
}
