import { expect } from 'chai';
import { createRequestAjv, toRequestError } from '../../validation/index.js';
import { countTokensSchema, messagesSchema } from './schema.js';

const ajv = createRequestAjv();
const validate = ajv.compile(messagesSchema);
const validateCount = ajv.compile(countTokensSchema);
const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };

function paramOf(body: Record<string, unknown>): string | null | undefined {
  if (validate(body)) return undefined;
  return toRequestError(validate.errors ?? [], body).param;
}

describe('anthropic-messages request schema', () => {
  it('accepts a request using every documented field', () => {
    const body = {
      ...base,
      system: [{ type: 'text', text: 'rules', cache_control: { type: 'ephemeral' } }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'look' },
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
            { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } },
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'doc' } },
          ],
        },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 't', signature: 's' },
            { type: 'redacted_thinking', data: 'xx' },
            { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'ok' }], is_error: false }] },
      ],
      cache_control: { type: 'ephemeral' },
      inference_geo: 'us',
      temperature: 1,
      top_p: 0.5,
      top_k: 40,
      stream: true,
      stop_sequences: ['x'],
      tools: [{ name: 'f', description: 'd', input_schema: { type: 'object', properties: {} } }, { type: 'web_search_20250305', name: 'web_search' }],
      tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true },
      thinking: { type: 'enabled', budget_tokens: 2048 },
      context_management: {},
      output_config: { effort: 'high' },
      output_format: { type: 'json_schema', schema: { type: 'object' } },
      container: 'c',
      mcp_servers: [{ type: 'url', url: 'https://mcp.example', name: 'x' }],
      metadata: { user_id: 'u' },
      speed: 'fast',
      service_tier: 'standard_only',
      some_future_field: true,
    };
    expect(validate(body), JSON.stringify(validate.errors)).to.equal(true);
    for (const type of ['auto', 'any', 'none']) expect(validate({ ...base, tools: body.tools, tool_choice: { type } })).to.equal(true);
    // Without tools only a choice that asks nothing of the back end.
    for (const type of ['auto', 'none']) expect(validate({ ...base, tool_choice: { type } })).to.equal(true);
    expect(validate({ ...base, tool_choice: { type: 'any' } })).to.equal(false);
    expect(validate({ ...base, thinking: { type: 'disabled' } })).to.equal(true);
    expect(validateCount({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })).to.equal(true);
  });

  it('names the offending field of each violation', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ model: undefined }, 'model'],
      [{ max_tokens: undefined }, 'max_tokens'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ max_tokens: 1.5 }, 'max_tokens'],
      [{ messages: [] }, 'messages'],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
      [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0].text'],
      [{ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', data: 'x' } }] }] }, 'messages[0].content[0].source.media_type'],
      [{ messages: [{ role: 'user', content: [{ type: 'tool_result' }] }] }, 'messages[0].content[0].tool_use_id'],
      [{ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'f' }] }] }, 'messages[0].content[0].input'],
      [{ temperature: 1.5 }, 'temperature'],
      [{ system: 5 }, 'system'],
      [{ tools: [{ name: 'f' }] }, 'tools[0].input_schema'],
      [{ tools: [{ name: 'bad name', input_schema: { type: 'object' } }] }, 'tools[0].name'],
      [{ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'tool' } }, 'tool_choice.name'],
      [{ tool_choice: { type: 'required' } }, 'tool_choice.type'],
      [{ thinking: { type: 'enabled' } }, 'thinking.budget_tokens'],
      [{ thinking: { type: 'enabled', budget_tokens: 100 } }, 'thinking.budget_tokens'],
      [{ stop_sequences: 'x' }, 'stop_sequences'],
      [{ metadata: { user_id: 5 } }, 'metadata.user_id'],
      [{ stream: 'yes' }, 'stream'],
    ];
    for (const [patch, param] of cases) {
      const body: Record<string, unknown> = { ...base, ...patch };
      for (const [k, v] of Object.entries(patch)) if (v === undefined) delete body[k];
      expect(paramOf(body), JSON.stringify(patch)).to.equal(param);
    }
  });
});
