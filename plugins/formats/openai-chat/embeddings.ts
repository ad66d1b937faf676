import {
  GatewayError,
  replyBytesOf,
  type CallRoute,
  type FormatReply,
  type JsonSchema,
  type UpstreamResponse,
} from '../../../core/index.js';

/**
 * POST /v1/embeddings and POST /v1/engines/{model}/embeddings in the OpenAI wire format.
 *
 * The canonical result of the `embeddings` operation is OpenAI's embedding list
 * (`{object: 'list', data: [{object: 'embedding', index, embedding}], model, usage}`). When a
 * provider kept the bytes it received and they are already in the encoding the client asked
 * for, those bytes are the reply, unchanged. Otherwise the list is written again, converting
 * each vector to the asked encoding (a back end that ignores `encoding_format: base64` and
 * answers with floats still gives the client base64, and the other way round).
 */

/** The most inputs one request may carry (OpenAI's limit). */
const MAX_INPUTS = 2048;

/**
 * One input in an array: a string, a token id (the array is then one tokenised input), or an
 * array of token ids. Each keyword applies only to its own JSON type, so an error names the
 * exact item (`input[3]`) rather than "matched none of four shapes".
 */
const inputItem = {
  type: ['string', 'integer', 'array'],
  minLength: 1,
  minimum: 0,
  minItems: 1,
  items: { type: 'integer', minimum: 0 },
};

export const embeddingsSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'input'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input: {
      type: ['string', 'array'],
      minLength: 1,
      minItems: 1,
      // In this order: each item first, so that a bad item is named before the mix is refused.
      allOf: [
        { items: inputItem },
        // An array of token ids is one input (its length is the model's context); any other
        // array is a list of inputs, at most MAX_INPUTS of them.
        { if: { items: { type: 'integer' } }, else: { maxItems: MAX_INPUTS } },
        {
          anyOf: [{ items: { type: 'string' } }, { items: { type: 'integer' } }, { items: { type: 'array' } }],
          'x-message': "'input' must be a string, an array of strings, an array of token ids, or an array of token id arrays, not a mix of them.",
        },
      ],
    },
    encoding_format: { enum: ['float', 'base64'] },
    dimensions: { type: 'integer', minimum: 1 },
    user: { type: 'string' },
  },
};

type Encoding = 'float' | 'base64';

function encodingOf(body: Record<string, unknown>): Encoding {
  return body.encoding_format === 'base64' ? 'base64' : 'float';
}

/** A vector as OpenAI's base64: little-endian float32s. */
export function floatsToBase64(vector: readonly number[]): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(Number(vector[i]), i * 4);
  return bytes.toString('base64');
}

/** OpenAI's base64 (little-endian float32s) as numbers. */
export function base64ToFloats(text: string): number[] {
  const bytes = Buffer.from(text, 'base64');
  const out = new Array<number>(bytes.length >> 2);
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4);
  return out;
}

/** The list with every vector in `encoding`, or undefined when every vector already is. */
function reencoded(list: unknown, encoding: Encoding): Record<string, unknown> | undefined {
  const data = (list as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return undefined;
  let changed = false;
  const items = data.map((item: unknown) => {
    const vector = (item as { embedding?: unknown } | null)?.embedding;
    if (encoding === 'base64' && Array.isArray(vector)) {
      changed = true;
      return { ...(item as object), embedding: floatsToBase64(vector as number[]) };
    }
    if (encoding === 'float' && typeof vector === 'string') {
      changed = true;
      return { ...(item as object), embedding: base64ToFloats(vector) };
    }
    return item;
  });
  return changed ? { ...(list as Record<string, unknown>), data: items } : undefined;
}

function render(response: UpstreamResponse<'embeddings'>, body: Record<string, unknown>): FormatReply {
  if (response.kind === 'stream') {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed an embedding list' } });
  }
  const converted = reencoded(response.body, encodingOf(body));
  if (converted) return { status: 200, body: converted };
  const bytes = replyBytesOf(response, 'openai-chat');
  if (bytes) return { status: 200, headers: { 'content-type': 'application/json' }, body: bytes };
  return { status: 200, body: response.body };
}

export const embeddings: CallRoute<'embeddings'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/embeddings',
  operation: 'embeddings',
  schema: embeddingsSchema,
  parse({ body }) {
    return { model: typeof body.model === 'string' ? body.model : '', stream: false };
  },
  render: (response, call) => render(response, call.body),
};

/**
 * The engine-path form: the model in the path picks the back end (the body's `model` is still
 * required, as the API spec lists it, and is replaced by the path's on the way up).
 */
export const engineEmbeddings: CallRoute<'embeddings'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/engines/:model/embeddings',
  operation: 'embeddings',
  schema: embeddingsSchema,
  parse({ params }) {
    return { model: params.model ?? '', stream: false };
  },
  toCanonical(body, { params }) {
    return { ...body, model: params.model ?? '' };
  },
  render: (response, call) => render(response, call.body),
};

export const embeddingRoutes = [embeddings, engineEmbeddings] as const;
