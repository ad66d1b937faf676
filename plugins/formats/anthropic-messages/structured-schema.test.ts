import { expect } from 'chai';
import { structuredSchema } from './structured-schema.js';

describe('JSON schemas as Anthropic structured outputs take them', () => {
  it("moves what they refuse into the description, closes objects, keeps what they check (zod's int, minLength, minItems past 1)", () => {
    const zodLike = {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: {
        age: { type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 },
        name: { type: 'string', minLength: 1, description: 'Their name' },
        email: { type: 'string', format: 'email' },
        tags: { type: 'array', items: { type: 'string', pattern: '^[a-z]+$' }, minItems: 2 },
        kind: { type: 'string', enum: ['a', 'b'] },
        maybe: { oneOf: [{ type: 'string' }, { type: 'null' }] },
      },
      required: ['age', 'name'],
      additionalProperties: true,
    };
    expect(structuredSchema(zodLike)).to.deep.equal({
      type: 'object',
      properties: {
        age: { type: 'integer', description: '{minimum: -9007199254740991, maximum: 9007199254740991}' },
        name: { type: 'string', description: 'Their name\n\n{minLength: 1}' },
        email: { type: 'string', format: 'email' },
        tags: { type: 'array', items: { type: 'string', description: '{pattern: "^[a-z]+$"}' }, description: '{minItems: 2}' },
        kind: { enum: ['a', 'b'] },
        maybe: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      },
      additionalProperties: false,
      required: ['age', 'name'],
    });
  });

  it("keeps draft 7's definitions (a recursive zod schema's) where its $refs point, a $ref's description, type lists, and a map's value schema", () => {
    const recursive = {
      type: 'object',
      properties: { root: { $ref: '#/definitions/node', description: 'the tree' } },
      required: ['root'],
      definitions: { node: { type: 'object', properties: { name: { type: 'string', minLength: 1 }, children: { type: 'array', items: { $ref: '#/definitions/node' } } }, required: ['name', 'children'] } },
    };
    expect(structuredSchema(recursive)).to.deep.equal({
      definitions: {
        node: {
          type: 'object',
          properties: { name: { type: 'string', description: '{minLength: 1}' }, children: { type: 'array', items: { $ref: '#/definitions/node' } } },
          additionalProperties: false,
          required: ['name', 'children'],
        },
      },
      type: 'object',
      properties: { root: { $ref: '#/definitions/node', description: 'the tree' } },
      additionalProperties: false,
      required: ['root'],
    });
    expect(structuredSchema({ type: ['object', 'null'], properties: { a: { type: 'integer', minimum: 0 } }, required: ['a'] })).to.deep.equal({
      type: ['object', 'null'],
      properties: { a: { type: 'integer', description: '{minimum: 0}' } },
      additionalProperties: false,
      required: ['a'],
    });
    expect(structuredSchema({ type: 'object', additionalProperties: { type: 'number', maximum: 9 } })).to.deep.equal({
      type: 'object',
      properties: {},
      additionalProperties: { type: 'number', description: '{maximum: 9}' },
    });
  });

  it('keeps $defs and $ref, and leaves a schema whose type it cannot tell as it is', () => {
    expect(structuredSchema({ $defs: { n: { type: 'number', multipleOf: 2 } }, $ref: '#/$defs/n' })).to.deep.equal({ $defs: { n: { type: 'number', description: '{multipleOf: 2}' } }, $ref: '#/$defs/n' });
    expect(structuredSchema({ minimum: 3 })).to.deep.equal({ minimum: 3 });
  });
});
