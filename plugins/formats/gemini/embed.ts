import { GatewayError, lossHeaders, type CallRoute, type FormatReply, type JsonSchema, type RequestContext, type UpstreamResponse } from '../../../core/index.js';
import { Losses } from '../anthropic-messages/request.js';
import { base64ToFloats } from '../openai-chat/embeddings.js';
import { BATCH_EMBED_CONTENTS, EMBED_CONTENT, useJsonNames } from './fields.js';

/**
 * `:embedContent` and `:batchEmbedContents` (what @google/genai's `models.embedContent` calls)
 * over any embeddings back end, through the canonical embeddings request (OpenAI's): each
 * content's text parts are one input, `outputDimensionality` is `dimensions`; the answer's
 * vectors come back as `values`. `taskType` and `title` have no canonical place: named losses.
 */

type Json = Record<string, unknown>;

/** Google's limit on the requests of one batch. */
const MAX_BATCH = 100;

const embedRequest = {
  type: 'object',
  required: ['content'],
  properties: {
    model: { type: 'string' },
    content: {
      type: 'object',
      required: ['parts'],
      properties: {
        role: { type: 'string' },
        parts: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            required: ['text'],
            properties: { text: { type: 'string' } },
            additionalProperties: false,
            'x-message': 'only text parts can be embedded here',
          },
        },
      },
    },
    taskType: { type: 'string' },
    title: { type: 'string' },
    outputDimensionality: { type: 'integer', minimum: 1 },
  },
};

export const embedContentSchema: JsonSchema = embedRequest;

export const batchEmbedContentsSchema: JsonSchema = {
  type: 'object',
  required: ['requests'],
  properties: { requests: { type: 'array', minItems: 1, maxItems: MAX_BATCH, items: embedRequest } },
};

/** The model of a path segment or a request's `model` (`models/` dropped). */
export function bareModel(name: string): string {
  return name.startsWith('models/') ? name.slice('models/'.length) : name;
}

function textOf(request: Json): string {
  const parts = ((request.content as Json).parts as Json[]) ?? [];
  return parts.map((p) => String(p.text)).join('\n');
}

/** The requests of a call: the one of embedContent, or a batch's. */
function requestsOf(body: Json, batch: boolean): Json[] {
  return batch ? (body.requests as Json[]) : [body];
}

/** The canonical (OpenAI) embeddings request; a batch's requests must agree with the path and each other. */
export function toCanonicalEmbeddings(body: Json, model: string, batch: boolean): Json {
  const requests = requestsOf(body, batch);
  const dimensions = requests[0]!.outputDimensionality;
  requests.forEach((request, i) => {
    // Where a field of this request is in the body: a batch's requests[i], or the body itself.
    const at = batch ? `requests[${i}].` : '';
    if (typeof request.model === 'string' && bareModel(request.model) !== model) {
      throw new GatewayError('invalid_request', {
        params: { detail: `${at}model: ${request.model} is not the model of the path (models/${model})` },
        param: `${at}model`,
      });
    }
    // Nothing to embed: Gemini refuses empty text, and a back end that embeds it would be paid for nothing.
    if ((((request.content as Json).parts as Json[]) ?? []).every((part) => part.text === '')) {
      throw new GatewayError('invalid_request', { params: { detail: `${at}content.parts: there is no text to embed` }, param: `${at}content.parts` });
    }
    if (request.outputDimensionality !== dimensions) {
      throw new GatewayError('invalid_request', {
        params: { detail: `requests[${i}].outputDimensionality: every request of one batch must ask for the same dimensionality here` },
        param: `requests[${i}].outputDimensionality`,
      });
    }
  });
  const texts = requests.map(textOf);
  const canonical: Json = { model, input: batch ? texts : texts[0], encoding_format: 'float' };
  if (typeof dimensions === 'number') canonical.dimensions = dimensions;
  return canonical;
}

/** The vectors of a canonical embedding list, in input order, as numbers. */
function vectorsOf(list: unknown): number[][] {
  const data = (list as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw new GatewayError('upstream_error', { params: { detail: 'the back end answered no embedding list' } });
  return [...(data as Json[])]
    .sort((a, b) => Number(a.index ?? 0) - Number(b.index ?? 0))
    .map((item) => (typeof item.embedding === 'string' ? base64ToFloats(item.embedding) : (item.embedding as number[])));
}

/** The fields of an embed request the canonical form carries. */
const CARRIED = new Set(['model', 'content', 'outputDimensionality']);

/**
 * What an embed call's translation cannot carry: `taskType`, `title`, and any field it does not
 * know (a proto name sent beside its JSON name among them), by name, once.
 */
export function embedLosses(body: Json, batch: boolean, losses: Losses): void {
  if (batch) for (const key of Object.keys(body)) if (key !== 'requests') losses.add(key);
  for (const request of requestsOf(body, batch)) {
    for (const key of Object.keys(request)) if (!CARRIED.has(key) && request[key] !== undefined) losses.add(key);
  }
}

function render(response: UpstreamResponse<'embeddings'>, body: Json, batch: boolean, ctx: RequestContext): FormatReply {
  if (response.kind === 'stream') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed an embedding list' } });
  const vectors = vectorsOf(response.body);
  const expected = requestsOf(body, batch).length;
  if (vectors.length !== expected) {
    throw new GatewayError('upstream_error', { params: { detail: `the back end answered ${vectors.length} embeddings for ${expected} inputs` } });
  }
  const answer = batch ? { embeddings: vectors.map((values) => ({ values })) } : { embedding: { values: vectors[0] } };
  return { status: 200, headers: lossHeaders(ctx), body: answer };
}

/**
 * The canonical request's fields as the client named them, for an error a back end gives about
 * one (the mock's, or an OpenAI back end's, refusal of `dimensions`). A batch asks for one
 * dimensionality in every request: the first names it.
 */
const SINGLE_NAMES = { dimensions: 'outputDimensionality', input: 'content' } as const;
const BATCH_NAMES = { dimensions: 'requests[0].outputDimensionality', input: 'requests' } as const;

export function embedRoute(method: 'embedContent' | 'batchEmbedContents', stem: string): CallRoute<'embeddings'> {
  const batch = method === 'batchEmbedContents';
  return {
    kind: 'call',
    method: 'POST',
    path: `${stem}${method}`,
    operation: 'embeddings',
    schema: batch ? batchEmbedContentsSchema : embedContentSchema,
    clientParams: batch ? BATCH_NAMES : SINGLE_NAMES,
    parse({ params, body }) {
      const rewritten = useJsonNames(body, batch ? BATCH_EMBED_CONTENTS : EMBED_CONTENT);
      return { model: bareModel(params.model ?? ''), stream: false, rewritten };
    },
    toCanonical(body, { params }) {
      return toCanonicalEmbeddings(body, bareModel(params.model ?? ''), batch);
    },
    render: (response, call, ctx) => render(response, call.body, batch, ctx),
  };
}
