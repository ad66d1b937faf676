import type { JsonSchema } from '../../../core/index.js';

/**
 * POST /v1/messages (and /v1/messages/count_tokens), as the API spec states it, plus the fields
 * real Claude clients send. Unknown top-level fields and unknown content-block types are let
 * through: the translator records each one it cannot carry as a named loss instead of refusing
 * a request a newer client sends.
 */

const cacheControl = { type: ['object', 'null'], properties: { type: { type: 'string' }, ttl: { type: 'string' } } };

const textBlock = {
  type: 'object',
  required: ['type', 'text'],
  properties: { type: { const: 'text' }, text: { type: 'string' }, cache_control: cacheControl, citations: { type: ['array', 'null'] } },
};

const imageSource = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['base64', 'url', 'file'] },
    media_type: { type: 'string' },
    data: { type: 'string' },
    // http(s) only: a file: or ftp: URL is refused here, not passed on.
    url: { type: 'string', minLength: 1, pattern: '^[Hh][Tt][Tt][Pp][Ss]?://', 'x-expected': 'an http(s) URL' },
    file_id: { type: 'string' },
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { const: 'base64' } } }, then: { required: ['media_type', 'data'] } },
    { if: { required: ['type'], properties: { type: { const: 'url' } } }, then: { required: ['url'] } },
    { if: { required: ['type'], properties: { type: { const: 'file' } } }, then: { required: ['file_id'] } },
  ],
};

/** One content block of a message. Known types are checked; other types pass (and become losses). */
/**
 * A content block. Only the fields of the kinds the gateway reads are checked; any other kind
 * (server tools' `server_tool_use` and `*_tool_result` blocks, `search_result`, whose `source`
 * is a string and whose `content` may be an object) goes up as sent to an Anthropic back end.
 */
const contentBlock = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { type: 'string', minLength: 1 },
    text: { type: 'string' },
    id: { type: 'string' },
    name: { type: 'string' },
    input: { type: 'object' },
    tool_use_id: { type: 'string' },
    is_error: { type: 'boolean' },
    thinking: { type: 'string' },
    signature: { type: 'string' },
    data: { type: 'string' },
    cache_control: cacheControl,
  },
  allOf: [
    { if: { required: ['type'], properties: { type: { const: 'text' } } }, then: textBlock },
    { if: { required: ['type'], properties: { type: { const: 'image' } } }, then: { required: ['source'], properties: { source: imageSource } } },
    { if: { required: ['type'], properties: { type: { const: 'document' } } }, then: { required: ['source'], properties: { source: { type: 'object' } } } },
    { if: { required: ['type'], properties: { type: { const: 'tool_use' } } }, then: { required: ['id', 'name', 'input'] } },
    {
      if: { required: ['type'], properties: { type: { const: 'tool_result' } } },
      then: {
        required: ['tool_use_id'],
        properties: {
          content: {
            anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'object', required: ['type'], properties: { type: { type: 'string' } } } }],
            'x-expected': 'a string or an array of content blocks',
          },
        },
      },
    },
    { if: { required: ['type'], properties: { type: { const: 'thinking' } } }, then: { required: ['thinking', 'signature'] } },
    { if: { required: ['type'], properties: { type: { const: 'redacted_thinking' } } }, then: { required: ['data'] } },
  ],
};

const message = {
  type: 'object',
  required: ['role', 'content'],
  properties: {
    role: { enum: ['user', 'assistant', 'system'] },
    content: {
      anyOf: [{ type: 'string' }, { type: 'array', items: contentBlock }],
      'x-expected': 'a string or an array of content blocks',
    },
  },
};

const tool = {
  type: 'object',
  required: ['name'],
  properties: {
    type: { type: ['string', 'null'] },
    name: { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,128}$' },
    description: { type: 'string' },
    input_schema: { type: 'object' },
    cache_control: cacheControl,
    strict: { type: 'boolean' },
  },
  // A client tool (no type, or `custom`) needs its input schema; server tools have none.
  if: { anyOf: [{ not: { required: ['type'] } }, { properties: { type: { enum: ['custom', null] } } }] },
  then: { required: ['input_schema'], properties: { input_schema: { type: 'object', properties: { type: { const: 'object' } } } } },
};

const toolChoice = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['auto', 'any', 'tool', 'none'] },
    name: { type: 'string', minLength: 1 },
    disable_parallel_tool_use: { type: 'boolean' },
  },
  if: { required: ['type'], properties: { type: { const: 'tool' } } },
  then: { required: ['name'] },
};

const thinking = {
  type: 'object',
  required: ['type'],
  properties: {
    type: { enum: ['enabled', 'disabled', 'adaptive'] },
    budget_tokens: { type: 'integer', minimum: 1024 },
    display: { type: ['string', 'null'] },
  },
  if: { required: ['type'], properties: { type: { const: 'enabled' } } },
  then: { required: ['budget_tokens'] },
};

const system = {
  anyOf: [{ type: 'string' }, { type: 'array', items: textBlock }],
  'x-expected': 'a string or an array of text blocks',
};

/** The fields both routes read; count_tokens has no max_tokens and no sampling fields. */
const common = {
  model: { type: 'string', minLength: 1 },
  messages: { type: 'array', minItems: 1, items: message },
  system,
  tools: { type: 'array', items: tool },
  tool_choice: toolChoice,
  thinking,
};

export const messagesSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'messages', 'max_tokens'],
  properties: {
    ...common,
    max_tokens: { type: 'integer', minimum: 1 },
    temperature: { type: 'number', minimum: 0, maximum: 1 },
    top_p: { type: 'number', minimum: 0, maximum: 1 },
    top_k: { type: 'integer', minimum: 0 },
    stream: { type: 'boolean' },
    stop_sequences: { type: 'array', items: { type: 'string' } },
    metadata: { type: 'object', properties: { user_id: { type: ['string', 'null'] } } },
    cache_control: cacheControl,
    inference_geo: { type: 'string' },
    context_management: { type: ['object', 'null'] },
    output_config: {
      type: ['object', 'null'],
      properties: { effort: { enum: ['low', 'medium', 'high', 'xhigh', 'max', null] }, format: { type: ['object', 'null'] } },
    },
    output_format: { type: ['object', 'null'] },
    container: { type: ['string', 'object', 'null'] },
    mcp_servers: { type: 'array', items: { type: 'object' } },
    speed: { enum: ['standard', 'fast'] },
    service_tier: { enum: ['auto', 'standard_only'] },
  },
  // A call that must use a tool (or a named one) needs tools to choose from: the back end could
  // not honour it ('auto' and 'none' ask nothing of it).
  if: { not: { anyOf: [{ required: ['tools'], properties: { tools: { minItems: 1 } } }, { required: ['mcp_servers'], properties: { mcp_servers: { minItems: 1 } } }] } },
  then: {
    properties: {
      tool_choice: {
        properties: { type: { enum: ['auto', 'none'], 'x-message': "A tool_choice of type 'any' or 'tool' is only allowed when 'tools' are specified." } },
      },
    },
  },
};

export const countTokensSchema: JsonSchema = {
  type: 'object',
  required: ['model', 'messages'],
  properties: common,
};
