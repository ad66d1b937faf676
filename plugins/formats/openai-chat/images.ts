import {
  GatewayError,
  lossHeaders,
  type CallRoute,
  type FormatReply,
  type JsonSchema,
  type RequestContext,
  type RouteInput,
  type UpstreamResponse,
} from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import {
  IMAGE_OPTIONS,
  IMAGE_RESULT_EXTRAS,
  isUploadedImage,
  mimeOf,
  parseDataUrl,
  type ImageDatum,
  type ImageInput,
  type ImageRequest,
  type ImageResult,
} from './images-canonical.js';
import { isMultipart, refuseFilesIn, textFieldsOf } from './form-files.js';

/**
 * POST /v1/images/generations and POST /v1/images/edits.
 *
 * Each route takes two body shapes and normalises both to the canonical image request
 * (images-canonical.ts), so that any provider serves either:
 *
 *   - the API spec's shape: `{model, input: {messages: [{role, content: [{text} | {image}]}]},
 *     parameters: {negative_prompt, prompt_extend, watermark, size, seed, n (edits)}}`;
 *   - the OpenAI images shape the official clients send: `{model, prompt, n, size,
 *     response_format, quality, style, background, output_format, …}`, and for edits `image`
 *     (one URL or several) and `mask`.
 *
 * A body with `input` is read as the spec's shape, one with `prompt` as OpenAI's; a body with
 * neither is read by its other fields (see imageSchema), and one with nothing to tell the shapes
 * apart by is a 400 that names both. The reply is always the spec's image result
 * `{created, data: [{url | b64_json, revised_prompt}]}`.
 *
 * response_format: when the client asked for `b64_json` and the back end gave a `data:` URL,
 * the URL's bytes become `b64_json`; when it asked for `url` and the back end gave bytes, they
 * are sent as a `data:` URL. A back end's `https` URL asked for as `b64_json` stays a URL (the
 * gateway does not fetch it) and the call records the named loss `response_format`.
 */

/** The most images one call may ask for (the gateway's own bound; the spec states none). */
export const MAX_IMAGES = 10;

/** `1024x1024`, `1328*1328` (the spec shape's vendors write `*`), or `auto`. */
const SIZE = { type: 'string', pattern: '^(auto|[1-9][0-9]{0,4}[x*][1-9][0-9]{0,4})$', 'x-expected': "a size such as '1024x1024' (or '1024*1024'), or 'auto'" };
/** An input image: a URL the back end can fetch, or the bytes as a data: URL. */
const IMAGE_URL = {
  type: 'string',
  pattern: '^(https?://\\S+|data:image/[A-Za-z0-9.+-]+;base64,[A-Za-z0-9+/=\\s]+)$',
  'x-expected': 'an http(s) URL or a data:image/…;base64, URL',
};
const N = { type: 'integer', minimum: 1, maximum: MAX_IMAGES };
/**
 * A file of a multipart edit, as the multipart reader puts it in the body. Any object passes
 * here: which objects are files is decided by toImageRequest (only the multipart reader's, never
 * one a JSON body carries: `invalid_type` on the field), so that a client never sees the reader's
 * own field names in an error.
 */
const UPLOAD = { type: 'object' };
/**
 * One image of an edit. Typed before the branches are tried, so that what is neither (an array:
 * a form that sent the field twice) is refused by its type alone, its value not shown.
 */
const EDIT_IMAGE = { type: ['string', 'object'], anyOf: [IMAGE_URL, UPLOAD], 'x-expected': 'an image file, an http(s) URL or a data:image/…;base64, URL' };
/** The mask of an edit: one image. */
const MASK = { ...EDIT_IMAGE, 'x-expected': 'one image: a file, an http(s) URL or a data:image/…;base64, URL' };
const SEED = { type: 'integer', minimum: 0, maximum: 2147483647 };

// ---------------------------------------------------------------------------------------------
// The spec's shape
// ---------------------------------------------------------------------------------------------

function specSchema(edit: boolean): JsonSchema {
  const item = edit
    ? {
        type: 'object',
        additionalProperties: false,
        properties: { text: { type: 'string' }, image: IMAGE_URL },
        // With no other property allowed: 'text' or 'image' (or both).
        minProperties: 1,
        'x-expected': "a content item with 'text' or 'image'",
      }
    : { type: 'object', additionalProperties: false, required: ['text'], properties: { text: { type: 'string' } } };
  const messages: Record<string, unknown> = {
    type: 'array',
    minItems: 1,
    items: {
      type: 'object',
      additionalProperties: false,
      required: ['role', 'content'],
      properties: { role: { type: 'string', minLength: 1 }, content: { type: 'array', minItems: 1, items: item } },
    },
  };
  if (edit) {
    messages.allOf = [
      { contains: { properties: { content: { contains: { required: ['image'] } } } }, 'x-message': "An edit needs at least one content item with an 'image'." },
      { contains: { properties: { content: { contains: { required: ['text'] } } } }, 'x-message': "An edit needs at least one content item with a 'text' instruction." },
    ];
  }
  const parameters: Record<string, unknown> = {
    negative_prompt: { type: 'string' },
    prompt_extend: { type: 'boolean' },
    watermark: { type: 'boolean' },
    size: SIZE,
    seed: SEED,
  };
  if (edit) parameters.n = N;
  return {
    type: 'object',
    additionalProperties: false,
    required: ['model', 'input'],
    properties: {
      model: { type: 'string', minLength: 1 },
      input: { type: 'object', additionalProperties: false, required: ['messages'], properties: { messages } },
      parameters: { type: 'object', additionalProperties: false, properties: parameters },
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The OpenAI images shape
// ---------------------------------------------------------------------------------------------

const nullable = (values: unknown[]) => ({ enum: [...values, null] });

function openaiSchema(edit: boolean): JsonSchema {
  const properties: Record<string, unknown> = {
    model: { type: 'string', minLength: 1 },
    prompt: { type: 'string', minLength: 1, maxLength: 32000 },
    n: { ...N, type: ['integer', 'null'] },
    size: { ...SIZE, type: ['string', 'null'] },
    response_format: nullable(['url', 'b64_json']),
    quality: nullable(['standard', 'hd', 'low', 'medium', 'high', 'auto']),
    style: nullable(['vivid', 'natural']),
    background: nullable(['transparent', 'opaque', 'auto']),
    output_format: nullable(['png', 'jpeg', 'webp']),
    output_compression: { type: ['integer', 'null'], minimum: 0, maximum: 100 },
    moderation: nullable(['low', 'auto']),
    user: { type: 'string' },
    stream: { enum: [false, null], 'x-expected': 'false (streamed image generation is not supported)' },
    // The spec shape's parameters, accepted at the top level too.
    negative_prompt: { type: 'string' },
    prompt_extend: { type: 'boolean' },
    watermark: { type: 'boolean' },
    seed: SEED,
  };
  if (edit) {
    properties.image = {
      anyOf: [IMAGE_URL, UPLOAD, { type: 'array', minItems: 1, maxItems: 16, items: EDIT_IMAGE }],
      'x-expected': 'an image (a file, an http(s) URL or a data: URL) or an array of them',
    };
    properties.mask = MASK;
    properties.input_fidelity = nullable(['high', 'low']);
  }
  return { type: 'object', additionalProperties: false, required: edit ? ['model', 'prompt', 'image'] : ['model', 'prompt'], properties };
}

/** The top-level fields only the OpenAI shape has (the spec's are all inside `input` and `parameters`). */
function openaiOnlyFields(edit: boolean): string[] {
  return Object.keys(openaiSchema(edit).properties as Record<string, unknown>).filter((name) => name !== 'model' && name !== 'prompt');
}

/**
 * The route's schema: the spec's shape when `input` is there, OpenAI's when `prompt` is. A body
 * with neither is read by its other fields: one with a field only the OpenAI shape has (`image`,
 * `n`, `size`, …) is that shape without its `prompt`, one with `parameters` the spec's without
 * its `input` (each a missing_required_parameter); one with nothing to tell (just `model`) is a
 * 400 that names both shapes, about no single field (param null).
 */
function imageSchema(edit: boolean): JsonSchema {
  const openaiShaped = { anyOf: openaiOnlyFields(edit).map((name) => ({ required: [name] })) };
  return {
    type: 'object',
    // The types of the OpenAI shape's non-text fields, for a multipart form's text fields to be
    // read as numbers and booleans (core/http/multipart.ts coerces by these); checked in the branches.
    properties: {
      n: { type: ['integer', 'null'] },
      output_compression: { type: ['integer', 'null'] },
      seed: { type: 'integer' },
      prompt_extend: { type: 'boolean' },
      watermark: { type: 'boolean' },
      stream: { type: ['boolean', 'null'] },
    },
    if: { required: ['input'] },
    then: specSchema(edit),
    else: {
      if: { anyOf: [{ required: ['prompt'] }, openaiShaped] },
      then: openaiSchema(edit),
      else: {
        if: { required: ['parameters'] },
        then: specSchema(edit),
        else: {
          // Fails whatever the body holds: the message is about the body, not a field.
          not: {},
          'x-message':
            "The body is neither shape of this endpoint: send {model, input: {messages: [{role, content: [{text}]}]}, parameters} or {model, prompt, n, size, response_format}.",
        },
      },
    },
  };
}

export const imageGenerationSchema = imageSchema(false);
export const imageEditSchema = imageSchema(true);

// ---------------------------------------------------------------------------------------------
// Body -> canonical
// ---------------------------------------------------------------------------------------------

type Json = Record<string, unknown>;

function normalSize(size: unknown): string | undefined {
  return typeof size === 'string' ? size.replace('*', 'x') : undefined;
}

function urlInput(url: string): ImageInput {
  return { kind: 'url', url: url.trim() };
}

/**
 * One image field of the OpenAI shape. An uploaded file counts only in a multipart form: a JSON
 * body that carries an object shaped like one (a path on the gateway's disk) is refused.
 */
function editInput(value: unknown, param: string, multipart: boolean): ImageInput {
  if (typeof value === 'string') return urlInput(value);
  if (multipart && isUploadedImage(value)) return { kind: 'file', file: value };
  throw new GatewayError('invalid_type', { param, params: { detail: 'expected an http(s) URL or a data:image/…;base64, URL in a JSON body (upload files as multipart/form-data).' } });
}

function fromSpec(body: Json): ImageRequest {
  const texts: string[] = [];
  const images: ImageInput[] = [];
  const messages = ((body.input as Json | undefined)?.messages as Json[] | undefined) ?? [];
  for (const message of messages) {
    for (const item of (message.content as Json[] | undefined) ?? []) {
      if (typeof item.image === 'string') images.push(urlInput(item.image));
      if (typeof item.text === 'string' && item.text !== '') texts.push(item.text);
    }
  }
  const p = (body.parameters as Json | undefined) ?? {};
  const request: ImageRequest = { model: String(body.model ?? ''), prompt: texts.join('\n'), options: {}, shape: 'spec' };
  if (typeof p.negative_prompt === 'string') request.negative_prompt = p.negative_prompt;
  if (typeof p.prompt_extend === 'boolean') request.prompt_extend = p.prompt_extend;
  if (typeof p.watermark === 'boolean') request.watermark = p.watermark;
  if (typeof p.seed === 'number') request.seed = p.seed;
  if (typeof p.n === 'number') request.n = p.n;
  const size = normalSize(p.size);
  if (size) request.size = size;
  if (images.length > 0) request.images = images;
  return request;
}

function fromOpenAI(body: Json, multipart: boolean): ImageRequest {
  const request: ImageRequest = { model: String(body.model ?? ''), prompt: String(body.prompt ?? ''), options: {}, shape: 'openai' };
  if (typeof body.negative_prompt === 'string') request.negative_prompt = body.negative_prompt;
  if (typeof body.prompt_extend === 'boolean') request.prompt_extend = body.prompt_extend;
  if (typeof body.watermark === 'boolean') request.watermark = body.watermark;
  if (typeof body.seed === 'number') request.seed = body.seed;
  if (typeof body.n === 'number') request.n = body.n;
  const size = normalSize(body.size);
  if (size) request.size = size;
  if (body.response_format === 'url' || body.response_format === 'b64_json') request.response_format = body.response_format;
  for (const name of IMAGE_OPTIONS) if (body[name] !== undefined && body[name] !== null) request.options[name] = body[name];
  const image = body.image;
  if (Array.isArray(image)) request.images = image.map((item, i) => editInput(item, `image[${i}]`, multipart));
  else if (image !== undefined) request.images = [editInput(image, 'image', multipart)];
  if (body.mask !== undefined) request.mask = editInput(body.mask, 'mask', multipart);
  return request;
}

export function toImageRequest(body: Json, input?: RouteInput): ImageRequest {
  return body.input !== undefined ? fromSpec(body) : fromOpenAI(body, isMultipart(input));
}

// ---------------------------------------------------------------------------------------------
// Canonical result -> reply
// ---------------------------------------------------------------------------------------------

/** One image in the form the client asked for, where that can be done without a fetch. */
function converted(datum: ImageDatum, want: ImageRequest['response_format'], losses: () => Losses): ImageDatum {
  const out: ImageDatum = {};
  if (want === 'b64_json' && datum.b64_json === undefined && datum.url !== undefined) {
    const parsed = parseDataUrl(datum.url);
    if (parsed) out.b64_json = parsed.bytes.toString('base64');
    else {
      out.url = datum.url;
      losses().add('response_format');
    }
  } else if (want === 'url' && datum.url === undefined && datum.b64_json !== undefined) {
    out.url = `data:${mimeOf(Buffer.from(datum.b64_json.slice(0, 24), 'base64'))};base64,${datum.b64_json}`;
  } else if (want === 'url') out.url = datum.url;
  else if (want === 'b64_json') out.b64_json = datum.b64_json;
  else {
    if (datum.url !== undefined) out.url = datum.url;
    if (datum.b64_json !== undefined) out.b64_json = datum.b64_json;
  }
  if (typeof datum.revised_prompt === 'string') out.revised_prompt = datum.revised_prompt;
  return out;
}

function isImageResult(value: unknown): value is ImageResult {
  return value !== null && typeof value === 'object' && Array.isArray((value as { data?: unknown }).data);
}

function render(response: UpstreamResponse<'image'> | UpstreamResponse<'image-edit'>, canonical: unknown, ctx: RequestContext): FormatReply {
  if (response.kind === 'stream' || !isImageResult(response.body)) {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end did not answer with images' } });
  }
  const want = (canonical as ImageRequest | undefined)?.response_format;
  let losses: Losses | undefined;
  const lossesOf = () => (losses ??= Losses.of(ctx));
  const result = response.body;
  const body: ImageResult = {
    created: typeof result.created === 'number' ? result.created : Math.floor(Date.now() / 1000),
    data: result.data.map((datum) => converted(datum, want, lossesOf)),
  };
  // What a GPT image model says besides the images (its size, quality, format and usage), as it came.
  for (const name of IMAGE_RESULT_EXTRAS) if (result[name] !== undefined) (body as unknown as Record<string, unknown>)[name] = result[name];
  return { status: 200, headers: lossHeaders(ctx) ?? {}, body };
}

function parseModel(body: Json) {
  return { model: typeof body.model === 'string' ? body.model : '', stream: false };
}

export const imageGenerations: CallRoute<'image'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/images/generations',
  operation: 'image',
  schema: imageGenerationSchema,
  parse: ({ body }) => parseModel(body),
  toCanonical: (body, input) => toImageRequest(body, input) as unknown as Json,
  render: (response, call, ctx) => render(response, call.canonical, ctx),
};

/** The fields of an edit's form that may be files (`image[]` is read as `image`). */
const EDIT_FILE_FIELDS = ['image', 'mask'];
/** The fields either shape of an edit names that are not files. */
const EDIT_TEXT_FIELDS = textFieldsOf([openaiSchema(true), specSchema(true)], EDIT_FILE_FIELDS);

export const imageEdits: CallRoute<'image-edit'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/images/edits',
  operation: 'image-edit',
  /** Both bodies on one path: the spec's JSON and the OpenAI clients' multipart/form-data, picked by Content-Type. */
  body: 'json-or-multipart',
  schema: imageEditSchema,
  parse: (input) => {
    // Files only where the edit takes images: anywhere else the schema would meet the reader's object.
    refuseFilesIn(input, EDIT_TEXT_FIELDS, EDIT_FILE_FIELDS);
    return parseModel(input.body);
  },
  toCanonical: (body, input) => toImageRequest(body, input) as unknown as Json,
  render: (response, call, ctx) => render(response, call.canonical, ctx),
};

export const imageRoutes = [imageGenerations, imageEdits] as const;
