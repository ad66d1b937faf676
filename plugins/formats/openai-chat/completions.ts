import {
  GatewayError,
  lossHeaders,
  replyBytesOf,
  type CallRoute,
  type ChatUsage,
  type FinishReason,
  type FormatReply,
  type JsonSchema,
} from '../../../core/index.js';
import { openAIEvents } from './events.js';

/**
 * POST /v1/completions (the legacy text completion API) in the OpenAI wire format.
 *
 * The canonical request of the `completion` operation is the body as OpenAI takes it; its
 * canonical result is OpenAI's text completion (`object: 'text_completion'`) and a stream's
 * chunks are text completions too (`choices[].text` pieces, then a usage-only chunk). A back
 * end that speaks this API answers it as it is (its bytes relayed when nothing changes); a
 * chat-only back end answers through the completion -> chat bridge (completion-bridge.ts).
 */

const FORMAT = 'openai-chat';

/** A prompt as OpenAI takes it: a string, strings, token ids, or arrays of token ids. */
export type CompletionPrompt = string | string[] | number[] | number[][];

export interface CompletionRequest {
  model: string;
  prompt: CompletionPrompt;
  suffix?: string | null;
  echo?: boolean | null;
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  n?: number | null;
  best_of?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean; [extra: string]: unknown } | null;
  stop?: string | string[] | null;
  logprobs?: number | null;
  logit_bias?: Record<string, number> | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  seed?: number | null;
  user?: string;
  [extra: string]: unknown;
}

/** OpenAI's logprobs of a text completion: one entry per token of `text`. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: Array<number | null>;
  top_logprobs: Array<Record<string, number> | null>;
  text_offset: number[];
}

export interface CompletionChoice {
  text: string;
  index: number;
  logprobs: CompletionLogprobs | null;
  finish_reason: FinishReason | null;
  [extra: string]: unknown;
}

export interface CompletionResponse {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  choices: CompletionChoice[];
  usage?: ChatUsage | null;
  system_fingerprint?: string | null;
  [extra: string]: unknown;
}

/** The most stop sequences one request may carry (OpenAI's limit). */
const MAX_STOPS = 4;

/**
 * The most prompts one request may carry, as embeddings cap their inputs (a back end served
 * through chat takes far fewer: MAX_BRIDGED_PROMPTS in completion-bridge.ts).
 */
export const MAX_PROMPTS = 2048;

/**
 * One prompt in an array: a string, a token id (the array is then one tokenised prompt), or an
 * array of token ids. Each keyword applies only to its own JSON type, so an error names the item.
 */
const promptItem = {
  type: ['string', 'integer', 'array'],
  minimum: 0,
  minItems: 1,
  items: { type: 'integer', minimum: 0 },
};

/**
 * The request as the API spec lists it (model, prompt, max_tokens, temperature, top_p, n,
 * stream, stop, suffix, echo) with OpenAI's published ranges, plus the fields OpenAI's API and
 * its clients also send (best_of, logprobs, logit_bias, penalties, seed, stream_options, user).
 * Unknown top-level fields pass through, as for chat.
 */
export const completionsSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'prompt'],
  properties: {
    model: { type: 'string', minLength: 1 },
    prompt: {
      type: ['string', 'array'],
      minItems: 1,
      allOf: [
        { items: promptItem },
        // An array of token ids is one prompt (its length is the model's context); any other
        // array is a list of prompts, at most MAX_PROMPTS of them.
        { if: { items: { type: 'integer' } }, else: { maxItems: MAX_PROMPTS } },
        {
          anyOf: [{ items: { type: 'string' } }, { items: { type: 'integer' } }, { items: { type: 'array' } }],
          'x-message': "'prompt' must be a string, an array of strings, an array of token ids, or an array of token id arrays, not a mix of them.",
        },
      ],
    },
    suffix: { type: ['string', 'null'] },
    echo: { type: ['boolean', 'null'] },
    max_tokens: { type: ['integer', 'null'], minimum: 0 },
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1 },
    n: { type: ['integer', 'null'], minimum: 1, maximum: 128 },
    best_of: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    stream: { type: ['boolean', 'null'] },
    stream_options: {
      type: ['object', 'null'],
      properties: { include_usage: { type: 'boolean' }, include_obfuscation: { type: 'boolean' } },
    },
    stop: {
      anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: MAX_STOPS }, { type: 'null' }],
      'x-expected': `a string or an array of at most ${MAX_STOPS} strings`,
    },
    logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 5 },
    logit_bias: {
      type: ['object', 'null'],
      propertyNames: { pattern: '^[0-9]+$' },
      additionalProperties: { type: 'number', minimum: -100, maximum: 100 },
    },
    presence_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
    frequency_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
    seed: { type: ['integer', 'null'] },
    user: { type: 'string' },
  },
  allOf: [
    {
      // stream_options only means something on a stream
      if: { properties: { stream: { enum: [false, null] } } },
      then: {
        properties: {
          stream_options: { type: 'null', 'x-message': "The 'stream_options' parameter is only allowed when 'stream' is enabled." },
        },
      },
    },
    {
      // best_of picks the best of several answers server-side: nothing to stream until it has
      if: { required: ['stream'], properties: { stream: { const: true } } },
      then: {
        properties: {
          best_of: { type: ['integer', 'null'], maximum: 1, 'x-message': "'best_of' greater than 1 cannot be used with 'stream'." },
        },
      },
    },
  ],
};

/**
 * The checks a JSON Schema cannot state: `best_of` is at least `n` (it is the number of
 * candidates `n` answers are picked from).
 */
export function checkCompletion(body: Record<string, unknown>): void {
  const n = typeof body.n === 'number' ? body.n : 1;
  if (typeof body.best_of === 'number' && body.best_of !== 0 && body.best_of < n) {
    throw new GatewayError('invalid_value', {
      param: 'best_of',
      params: { detail: `'best_of' must be at least 'n' (${n}), but got ${body.best_of} instead.` },
    });
  }
}



export const completions: CallRoute<'completion'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/completions',
  operation: 'completion',
  schema: completionsSchema,
  // The completions API's own default: a call without max_tokens is answered 16 tokens at most.
  defaultOutputTokens: 16,
  parse({ body }) {
    const options = body.stream_options as { include_usage?: unknown } | null | undefined;
    return {
      model: typeof body.model === 'string' ? body.model : '',
      stream: body.stream === true,
      wantsStreamUsage: body.stream === true && options?.include_usage === true,
    };
  },
  toCanonical(body) {
    checkCompletion(body);
    return body;
  },
  render(response, call, ctx): FormatReply {
    const headers = lossHeaders(ctx);
    if (response.kind === 'stream') return { headers, stream: openAIEvents(response.chunks as AsyncIterable<object>, call.wantsStreamUsage) };
    const bytes = replyBytesOf(response, FORMAT);
    if (bytes) return { status: 200, headers: { ...headers, 'content-type': 'application/json' }, body: bytes };
    return { status: 200, headers, body: response.body };
  },
};
