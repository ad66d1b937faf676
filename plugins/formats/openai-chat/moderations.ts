import { GatewayError, replyBytesOf, type CallRoute, type FormatReply, type JsonSchema } from '../../../core/index.js';

/**
 * POST /v1/moderations in the OpenAI wire format.
 *
 * `input` is a string or an array of strings, as the API spec lists it (OpenAI's multimodal
 * array of `{type: 'text' | 'image_url'}` objects is not in the spec and is refused on
 * `input[i]`). `model` is optional: without it the call goes to the format's configured
 * default (`moderationModel`, `omni-moderation-latest` unless set), routed like any model name.
 *
 * The canonical result of the `moderation` operation is OpenAI's moderation object
 * (`{id, model, results: [{flagged, categories, category_scores, ...}]}`), one result per input.
 */

export const DEFAULT_MODERATION_MODEL = 'omni-moderation-latest';

/** Set from the openai-chat plugin's `moderationModel` option when the plugin is applied. */
export const moderationDefaults = { model: DEFAULT_MODERATION_MODEL };

export const moderationsSchema: JsonSchema = {
  type: 'object',
  required: ['input'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input: {
      type: ['string', 'array'],
      minItems: 1,
      items: { type: 'string' },
    },
  },
};

/** How many results an input asks for: one per string. */
export function moderationInputs(input: unknown): string[] {
  if (typeof input === 'string') return [input];
  return Array.isArray(input) ? (input as string[]) : [];
}

export const moderations: CallRoute<'moderation'> = {
  kind: 'call',
  method: 'POST',
  path: '/v1/moderations',
  operation: 'moderation',
  schema: moderationsSchema,
  parse({ body }) {
    const model = typeof body.model === 'string' && body.model !== '' ? body.model : body.model === undefined ? moderationDefaults.model : '';
    return { model, stream: false };
  },
  toCanonical(body) {
    return body.model === undefined ? { ...body, model: moderationDefaults.model } : body;
  },
  render(response): FormatReply {
    if (response.kind === 'stream') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed a moderation result' } });
    const bytes = replyBytesOf(response, 'openai-chat');
    if (bytes) return { status: 200, headers: { 'content-type': 'application/json' }, body: bytes };
    return { status: 200, body: response.body };
  },
};
