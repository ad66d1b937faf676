import { expect } from 'chai';
import type { ChatChunk, ChatRequest, ChatResponse } from '../../../core/index.js';
import { WrappedRoot } from './json-root.js';

const request = (schema: Record<string, unknown>): ChatRequest =>
  ({ model: 'm', messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 'response', schema, strict: true } } }) as unknown as ChatRequest;
const list = WrappedRoot.of(request({ type: 'array', items: { type: 'integer' } }))!;

/** The client's text of each choice, from chunks made of (index, content, finish) triples. */
async function streamed(pieces: Array<[number, string | undefined, string | null, boolean?]>): Promise<Record<number, string>> {
  async function* chunks(): AsyncGenerator<ChatChunk> {
    for (const [index, content, finish, noDelta] of pieces) {
      const choice: Record<string, unknown> = { index, finish_reason: finish };
      if (!noDelta) choice.delta = content === undefined ? {} : { content };
      yield { id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [choice] } as unknown as ChatChunk;
    }
  }
  const out: Record<number, string> = {};
  for await (const chunk of list.stream(chunks())) {
    for (const choice of chunk.choices ?? []) out[choice.index] = (out[choice.index] ?? '') + ((choice.delta as { content?: string } | undefined)?.content ?? '');
  }
  return out;
}

describe('a structured-output schema whose root is not an object, for chat completions (WrappedRoot)', () => {
  it('goes up wrapped only when its root is not an object', () => {
    expect(WrappedRoot.of(request({ type: 'object', properties: {} }))).to.equal(undefined);
    expect(WrappedRoot.of({ model: 'm', messages: [] } as unknown as ChatRequest)).to.equal(undefined);
    const sent = list.request(request({ type: 'array', items: { type: 'integer' }, $schema: 'x' }));
    expect((sent.response_format as unknown as { json_schema: { schema: unknown } }).json_schema.schema).to.deep.equal({
      type: 'object', properties: { items: { type: 'array', items: { type: 'integer' } } }, required: ['items'], additionalProperties: false,
    });
  });

  it('points references to the old root (a recursive list) into the member, and leaves definitions at the root', () => {
    const node = { type: 'object', properties: { name: { type: 'string' }, children: { $ref: '#' }, kind: { $ref: '#/$defs/kind' }, first: { $ref: '#/items' } } };
    const sent = list.request(request({ type: 'array', items: node, $defs: { kind: { type: 'string' } } }));
    const schema = (sent.response_format as unknown as { json_schema: { schema: { properties: { items: { items: { properties: Record<string, unknown> } } }; $defs: unknown } } }).json_schema.schema;
    expect(schema.properties.items.items.properties).to.deep.equal({
      name: { type: 'string' },
      children: { $ref: '#/properties/items' },
      kind: { $ref: '#/$defs/kind' },
      first: { $ref: '#/properties/items/items' },
    });
    expect(schema.$defs).to.deep.equal({ kind: { type: 'string' } });
  });

  it('gives back the member alone however the pieces split it, whitespace before and after it left out', async () => {
    expect(await streamed([[0, '{', null], [0, '"items":  ', null], [0, '\n', null], [0, ' [1,', null], [0, '2] \n', null], [0, '}', null], [0, undefined, 'stop']])).to.deep.equal({ 0: '[1,2]' });
    // A server that sends finish_reason "" until the real one.
    expect(await streamed([[0, '{"', ''], [0, 'items":[1,', ''], [0, '2]}', ''], [0, undefined, 'stop']])).to.deep.equal({ 0: '[1,2]' });
    // A finish with no delta still carries what was held; a cut answer keeps every brace it had.
    expect(await streamed([[0, '{"items":[{"a":1}', null], [0, undefined, 'length', true]])).to.deep.equal({ 0: '[{"a":1}' });
    // Choices apart.
    expect(await streamed([[0, '{"items":[1', null], [1, '{"items":[2', null], [1, ']}', null], [0, ']}', null], [0, undefined, 'stop'], [1, undefined, 'stop']])).to.deep.equal({ 0: '[1]', 1: '[2]' });
    // An answer that does not open with the member goes out as it came.
    expect(await streamed([[0, '[3]', null], [0, undefined, 'stop']])).to.deep.equal({ 0: '[3]' });
  });

  it('unwraps a whole answer, and leaves a refusal or a call without text as it is', () => {
    const answer = { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [
      { index: 0, message: { role: 'assistant', content: '{ "items" : [1, 2] }' }, finish_reason: 'stop' },
      { index: 1, message: { role: 'assistant', content: null, refusal: 'no' }, finish_reason: 'stop' },
    ] } as unknown as ChatResponse;
    list.answer(answer);
    expect(answer.choices.map((c) => c.message.content)).to.deep.equal(['[1, 2]', null]);
  });
});
