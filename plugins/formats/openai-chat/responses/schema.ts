import type { JsonSchema } from '../../../../core/index.js';

/**
 * POST /v1/responses and POST /v1/responses/compact, as the API spec states them, plus the
 * fields real clients (the official SDKs, Codex-style agents) send. Unknown top-level fields are
 * allowed and passed on (a native back end may know them); a known field with a wrong type or
 * value is a 400 whose `param` names it.
 */

const NAME = '^[a-zA-Z0-9_-]{1,64}$';

/** One part of a message's content. Types this gateway does not know pass to a native back end. */
const contentPart = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', minLength: 1 },
    text: { type: 'string' },
    refusal: { type: 'string' },
    // As chat completions takes it (anything else, a file: URL say, is refused here with its param).
    image_url: { type: ['string', 'null'], pattern: '^(?:[Hh][Tt][Tt][Pp][Ss]?://|data:)', 'x-expected': 'an http(s) URL or a data: URL' },
    file_id: { type: ['string', 'null'] },
    detail: { enum: ['auto', 'low', 'high', 'original'] },
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { enum: ['input_text', 'output_text'] } } }, then: { required: ['text'] } },
    { if: { required: ['type'], properties: { type: { const: 'refusal' } } }, then: { required: ['refusal'] } },
    {
      if: { required: ['type'], properties: { type: { const: 'input_image' } } },
      then: {
        anyOf: [
          { required: ['image_url'], properties: { image_url: { type: 'string', minLength: 1 } } },
          { required: ['file_id'], properties: { file_id: { type: 'string', minLength: 1 } } },
        ],
        'x-message': "An 'input_image' part needs an 'image_url' (a URL or a data: URL) or a 'file_id'.",
      },
    },
  ],
};

const messageContent = {
  anyOf: [{ type: 'string' }, { type: 'array', items: contentPart }],
  'x-expected': 'a string or an array of content parts',
};

/**
 * One item of `input`: a message (with or without `type: 'message'`), a function call, a
 * function call's output, a reasoning item, a compaction item, or another item a native back end
 * may know (a bridged call names it as a loss).
 */
export const inputItem = {
  type: 'object',
  properties: {
    type: { type: 'string', minLength: 1 },
    role: { enum: ['user', 'assistant', 'system', 'developer'] },
    content: {},
    call_id: { type: 'string', minLength: 1 },
    name: { type: 'string', minLength: 1 },
    arguments: { type: 'string' },
    output: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'object' } }], 'x-expected': 'a string or an array of content parts' },
    summary: { type: 'array', items: { type: 'object', required: ['text'], properties: { text: { type: 'string' } } } },
    encrypted_content: { type: ['string', 'null'] },
    id: { type: ['string', 'null'] },
  },
  allOf: [
    {
      // A message: `type: 'message'`, or no type at all (the easy input message).
      if: { anyOf: [{ not: { required: ['type'] } }, { required: ['type'], properties: { type: { const: 'message' } } }] },
      then: { required: ['role', 'content'], properties: { content: messageContent } },
    },
    { if: { required: ['type'], properties: { type: { const: 'function_call' } } }, then: { required: ['call_id', 'name', 'arguments'] } },
    { if: { required: ['type'], properties: { type: { const: 'function_call_output' } } }, then: { required: ['call_id', 'output'] } },
    { if: { required: ['type'], properties: { type: { const: 'reasoning' } } }, then: { required: ['summary'] } },
    {
      if: { required: ['type'], properties: { type: { const: 'compaction' } } },
      then: { required: ['encrypted_content'], properties: { encrypted_content: { type: 'string', minLength: 1 } } },
    },
  ],
};

const input = {
  anyOf: [{ type: 'string' }, { type: 'array', items: inputItem }],
  'x-expected': 'a string or an array of input items',
};

/** A tool: function tools fully checked; hosted tools (web search, file search...) by type only. */
const tool = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', minLength: 1 },
    name: { type: 'string', pattern: NAME },
    description: { type: ['string', 'null'] },
    parameters: { type: ['object', 'null'] },
    strict: { type: ['boolean', 'null'] },
  },
  if: { required: ['type'], properties: { type: { const: 'function' } } },
  then: { required: ['name'] },
};

const toolChoice = {
  anyOf: [
    { enum: ['none', 'auto', 'required'] },
    {
      type: 'object',
      required: ['type'],
      properties: {
        type: { type: 'string', minLength: 1 },
        name: { type: 'string', minLength: 1 },
        mode: { enum: ['auto', 'required'] },
        tools: { type: 'array', items: { type: 'object' } },
      },
      allOf: [
        { if: { required: ['type'], properties: { type: { const: 'function' } } }, then: { required: ['name'] } },
        { if: { required: ['type'], properties: { type: { const: 'allowed_tools' } } }, then: { required: ['mode', 'tools'] } },
      ],
    },
    { type: 'null' },
  ],
  'x-expected': "'none', 'auto', 'required', or an object such as {type: 'function', name}",
};

const textConfig = {
  type: ['object', 'null'],
  properties: {
    format: {
      type: 'object',
      required: ['type'],
      properties: {
        type: { enum: ['text', 'json_object', 'json_schema'] },
        name: { type: 'string', pattern: NAME },
        schema: { type: 'object' },
        description: { type: 'string' },
        strict: { type: ['boolean', 'null'] },
      },
      if: { required: ['type'], properties: { type: { const: 'json_schema' } } },
      then: { required: ['name', 'schema'] },
    },
    verbosity: { enum: ['low', 'medium', 'high', null] },
  },
};

const reasoning = {
  type: ['object', 'null'],
  properties: {
    // The spec names low, medium and high; the OpenAI API (and its SDK) also sends these others.
    effort: { enum: ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', null] },
    summary: { enum: ['auto', 'concise', 'detailed', null] },
    generate_summary: { enum: ['auto', 'concise', 'detailed', null] },
  },
};

const metadata = {
  type: ['object', 'null'],
  maxProperties: 16,
  propertyNames: { maxLength: 64 },
  additionalProperties: { type: 'string', maxLength: 512 },
};

export const responsesSchema: JsonSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input,
    instructions: { type: ['string', 'null'] },
    max_output_tokens: { type: ['integer', 'null'], minimum: 1 },
    max_tool_calls: { type: ['integer', 'null'], minimum: 1 },
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1 },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    stream: { type: ['boolean', 'null'] },
    stream_options: { type: ['object', 'null'], properties: { include_obfuscation: { type: 'boolean' } } },
    tools: { type: ['array', 'null'], items: tool },
    tool_choice: toolChoice,
    parallel_tool_calls: { type: ['boolean', 'null'] },
    reasoning,
    text: textConfig,
    previous_response_id: { type: ['string', 'null'], minLength: 1 },
    truncation: { enum: ['auto', 'disabled', null] },
    store: { type: ['boolean', 'null'] },
    background: { type: ['boolean', 'null'] },
    metadata,
    user: { type: ['string', 'null'] },
    safety_identifier: { type: ['string', 'null'] },
    prompt_cache_key: { type: ['string', 'null'] },
    service_tier: { type: ['string', 'null'] },
    include: { type: ['array', 'null'], items: { type: 'string' } },
    conversation: { type: ['string', 'object', 'null'] },
  },
  allOf: [
    {
      // A call that must use a tool (or a named one) needs tools to choose from: the back end
      // could not honour it ('none' and 'auto' ask nothing of it).
      if: { not: { required: ['tools'], properties: { tools: { type: 'array', minItems: 1 } } } },
      then: {
        properties: {
          tool_choice: { enum: ['none', 'auto', null], 'x-message': "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified." },
        },
      },
    },
    {
      // stream_options only means something on a stream
      if: { properties: { stream: { enum: [false, null] } } },
      then: {
        properties: {
          stream_options: { type: 'null', 'x-message': "The 'stream_options' parameter is only allowed when 'stream' is enabled." },
        },
      },
    },
  ],
};

export const compactSchema: JsonSchema = {
  type: 'object',
  required: ['model'],
  properties: {
    model: { type: 'string', minLength: 1 },
    input,
    instructions: { type: ['string', 'null'] },
    previous_response_id: { type: ['string', 'null'], minLength: 1 },
  },
};
