import type { JsonSchema } from '../../../core/index.js';

/**
 * POST /v1/chat/completions, as the API spec states it, plus the fields real clients send.
 * Unknown top-level fields are allowed and passed through: upstreams add fields faster than
 * any gateway; a typo in a known field is still caught by its type.
 */

const textPart = {
  type: 'object',
  required: ['type', 'text'],
  properties: { type: { const: 'text' }, text: { type: 'string' } },
};

const contentPart = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['text', 'image_url', 'input_audio', 'file', 'refusal'] },
    text: { type: 'string' },
    refusal: { type: 'string' },
    image_url: {
      type: 'object',
      required: ['url'],
      properties: {
        // An image the gateway or a back end may fetch: http(s) only (a file: or ftp: URL is refused here, not passed on).
        url: { type: 'string', minLength: 1, pattern: '^(?:[Hh][Tt][Tt][Pp][Ss]?://|data:)', 'x-expected': 'an http(s) URL or a data: URL' },
        detail: { enum: ['auto', 'low', 'high'] },
      },
    },
    input_audio: {
      type: 'object',
      required: ['data', 'format'],
      properties: { data: { type: 'string' }, format: { type: 'string' } },
    },
    file: { type: 'object' },
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { const: 'text' } } }, then: { required: ['text'] } },
    { if: { required: ['type'], properties: { type: { const: 'image_url' } } }, then: { required: ['image_url'] } },
    { if: { required: ['type'], properties: { type: { const: 'input_audio' } } }, then: { required: ['input_audio'] } },
    { if: { required: ['type'], properties: { type: { const: 'file' } } }, then: { required: ['file'] } },
    { if: { required: ['type'], properties: { type: { const: 'refusal' } } }, then: { required: ['refusal'] } },
  ],
};

const toolCall = {
  type: 'object',
  required: ['id', 'type'],
  properties: {
    id: { type: 'string' },
    type: { enum: ['function', 'custom'] },
    function: {
      type: 'object',
      required: ['name', 'arguments'],
      properties: { name: { type: 'string' }, arguments: { type: 'string' } },
    },
    // A call of a custom (freeform) tool: its text input as it came.
    custom: {
      type: 'object',
      required: ['name', 'input'],
      properties: { name: { type: 'string' }, input: { type: 'string' } },
    },
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { const: 'function' } } }, then: { required: ['function'] } },
    { if: { required: ['type'], properties: { type: { const: 'custom' } } }, then: { required: ['custom'] } },
  ],
};

const message = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { enum: ['system', 'developer', 'user', 'assistant', 'tool', 'function'] },
    content: {
      anyOf: [{ type: 'string' }, { type: 'array', items: contentPart }, { type: 'null' }],
      'x-expected': 'a string or an array of content parts',
    },
    name: { type: 'string' },
    tool_calls: { type: 'array', items: toolCall },
    tool_call_id: { type: 'string' },
    refusal: { type: ['string', 'null'] },
    function_call: { type: ['object', 'null'] },
    audio: { type: ['object', 'null'] },
  },
  allOf: [
    {
      if: { required: ['role'], properties: { role: { enum: ['system', 'developer'] } } },
      then: {
        required: ['content'],
        properties: { content: { anyOf: [{ type: 'string' }, { type: 'array', items: textPart }], 'x-expected': 'a string or an array of text parts' } },
      },
    },
    {
      if: { required: ['role'], properties: { role: { const: 'user' } } },
      then: {
        required: ['content'],
        properties: { content: { anyOf: [{ type: 'string' }, { type: 'array', items: contentPart }], 'x-expected': 'a string or an array of content parts' } },
      },
    },
    { if: { required: ['role'], properties: { role: { const: 'tool' } } }, then: { required: ['content', 'tool_call_id'] } },
  ],
};

const functionTool = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['function', 'custom'] },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' },
        description: { type: 'string' },
        parameters: { type: 'object' },
        strict: { type: ['boolean', 'null'] },
      },
    },
    custom: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { const: 'function' } } }, then: { required: ['function'] } },
    { if: { required: ['type'], properties: { type: { const: 'custom' } } }, then: { required: ['custom'] } },
  ],
};

const toolChoice = {
  anyOf: [
    { enum: ['none', 'auto', 'required', null] },
    {
      type: 'object',
      required: ['type'],
      properties: {
        type: { enum: ['function', 'allowed_tools', 'custom'] },
        function: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1 } } },
        custom: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1 } } },
        allowed_tools: { type: 'object' },
      },
      allOf: [
        { if: { required: ['type'], properties: { type: { const: 'function' } } }, then: { required: ['function'] } },
        { if: { required: ['type'], properties: { type: { const: 'custom' } } }, then: { required: ['custom'] } },
        { if: { required: ['type'], properties: { type: { const: 'allowed_tools' } } }, then: { required: ['allowed_tools'] } },
      ],
    },
  ],
  'x-expected': "'none', 'auto', 'required', or an object {type: 'function', function: {name}}",
};

const responseFormat = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['text', 'json_object', 'json_schema'] },
    json_schema: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' },
        description: { type: 'string' },
        schema: { type: 'object' },
        strict: { type: ['boolean', 'null'] },
      },
    },
  },
  if: { required: ['type'], properties: { type: { const: 'json_schema' } } },
  then: { required: ['json_schema'] },
};

export const chatCompletionsSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'messages'],
  properties: {
    model: { type: 'string', minLength: 1 },
    messages: { type: 'array', minItems: 1, items: message },
    temperature: { type: ['number', 'null'], minimum: 0, maximum: 2 },
    top_p: { type: ['number', 'null'], minimum: 0, maximum: 1 },
    n: { type: ['integer', 'null'], minimum: 1, maximum: 128 },
    stream: { type: ['boolean', 'null'] },
    stream_options: {
      type: ['object', 'null'],
      properties: { include_usage: { type: 'boolean' }, include_obfuscation: { type: 'boolean' } },
    },
    stop: {
      anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' }, maxItems: 4 }, { type: 'null' }],
      'x-expected': 'a string or an array of at most 4 strings',
    },
    max_tokens: { type: ['integer', 'null'], minimum: 1 },
    max_completion_tokens: { type: ['integer', 'null'], minimum: 1 },
    presence_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
    frequency_penalty: { type: ['number', 'null'], minimum: -2, maximum: 2 },
    logit_bias: { type: ['object', 'null'], additionalProperties: { type: 'number', minimum: -100, maximum: 100 } },
    logprobs: { type: ['boolean', 'null'] },
    top_logprobs: { type: ['integer', 'null'], minimum: 0, maximum: 20 },
    user: { type: ['string', 'null'] },
    tools: { type: ['array', 'null'], items: functionTool },
    tool_choice: toolChoice,
    // The older function calling (before tools): names as chat completions takes them, as for tools.
    functions: {
      type: ['array', 'null'],
      items: { type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' }, description: { type: 'string' }, parameters: { type: 'object' } } },
    },
    function_call: {
      anyOf: [{ enum: ['none', 'auto', null] }, { type: 'object', required: ['name'], properties: { name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' } } }],
      'x-expected': "'none', 'auto', or an object {name}",
    },
    parallel_tool_calls: { type: ['boolean', 'null'] },
    response_format: { anyOf: [responseFormat, { type: 'null' }], 'x-expected': "an object {type: 'text' | 'json_object' | 'json_schema', ...}" },
    seed: { type: ['integer', 'null'] },
    reasoning_effort: { enum: ['none', 'minimal', 'low', 'medium', 'high', 'xhigh', null] },
    modalities: { type: ['array', 'null'], items: { enum: ['text', 'audio'] } },
    audio: {
      type: ['object', 'null'],
      required: ['voice', 'format'],
      properties: { voice: { type: 'string' }, format: { enum: ['wav', 'aac', 'mp3', 'flac', 'opus', 'pcm16'] } },
    },
    metadata: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
    store: { type: ['boolean', 'null'] },
    service_tier: { type: ['string', 'null'] },
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
