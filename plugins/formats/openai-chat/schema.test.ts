import { expect } from 'chai';
import { createRequestAjv, toRequestError } from '../../validation/index.js';
import { chatCompletionsSchema } from './schema.js';

const validate = createRequestAjv().compile(chatCompletionsSchema);
const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };

function paramOf(body: Record<string, unknown>): string | null | undefined {
  if (validate(body)) return undefined;
  return toRequestError(validate.errors ?? [], body).param;
}

describe('openai-chat request schema', () => {
  it('accepts a request using every documented field', () => {
    const body = {
      ...base,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'developer', content: [{ type: 'text', text: 'rules' }] },
        { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      temperature: 2,
      top_p: 0,
      n: 2,
      stream: true,
      stream_options: { include_usage: true },
      stop: ['a', 'b'],
      max_tokens: 10,
      max_completion_tokens: 20,
      presence_penalty: -2,
      frequency_penalty: 2,
      logit_bias: { '50256': -100 },
      user: 'u-1',
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' } } },
      seed: 7,
      reasoning_effort: 'high',
      modalities: ['text', 'audio'],
      audio: { voice: 'alloy', format: 'wav' },
      some_future_field: { passes: 'through' },
    };
    expect(validate(body), JSON.stringify(validate.errors)).to.equal(true);
    for (const choice of ['none', 'auto', 'required']) expect(validate({ ...base, tools: body.tools, tool_choice: choice })).to.equal(true);
    // Without tools only a choice that asks nothing of the back end.
    for (const choice of ['none', 'auto']) expect(validate({ ...base, tool_choice: choice })).to.equal(true);
    expect(validate({ ...base, tool_choice: 'required' })).to.equal(false);
  });

  it('names the offending field of each violation', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ model: undefined }, 'model'],
      [{ model: 5 }, 'model'],
      [{ messages: 'hi' }, 'messages'],
      [{ messages: [{ content: 'x' }] }, 'messages[0].role'],
      [{ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id'],
      [{ messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, 'messages[0].content[0].image_url'],
      [{ temperature: -0.1 }, 'temperature'],
      [{ top_p: 2 }, 'top_p'],
      [{ n: 1.5 }, 'n'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
      [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name'],
      [{ response_format: { type: 'xml' } }, 'response_format.type'],
      [{ response_format: { type: 'json_schema' } }, 'response_format.json_schema'],
      [{ audio: { voice: 'alloy' } }, 'audio.format'],
      [{ stream: false, stream_options: { include_usage: true } }, 'stream_options'],
      [{ seed: 'x' }, 'seed'],
      [{ user: 5 }, 'user'],
    ];
    for (const [patch, param] of cases) {
      const body: Record<string, unknown> = { ...base, ...patch };
      for (const [k, v] of Object.entries(patch)) if (v === undefined) delete body[k];
      expect(paramOf(body), JSON.stringify(patch)).to.equal(param);
    }
  });
});
