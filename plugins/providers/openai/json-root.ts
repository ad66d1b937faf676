import { likeStream, dropUpstreamBytes, mapStream, type ChatChunk, type ChatRequest, type ChatResponse } from '../../../core/index.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * A structured-output schema whose root is not an object, in a call translated from another
 * format: Gemini's own examples ask for a list (`responseSchema: {type: ARRAY, ...}`), and
 * Anthropic's structured outputs take any root, while chat completions refuses every root but an
 * object (400 "schema must be a JSON Schema of 'type: \"object\"'"). The schema goes up as the one
 * member of an object (`{"items": [...]}`), and the answer's text comes back as that member alone,
 * streamed or not, so the client reads the list it asked for.
 */
export class WrappedRoot {
  private constructor(private readonly key: string) {}

  /** The wrapping `request` needs: undefined when it asks for no schema, or for an object. */
  static of(request: ChatRequest): WrappedRoot | undefined {
    const format = request.response_format as { type?: unknown; json_schema?: { schema?: unknown } } | undefined;
    if (format?.type !== 'json_schema' || !isObject(format.json_schema) || !isObject(format.json_schema.schema)) return undefined;
    const schema = format.json_schema.schema;
    if (schema.type === 'object' || (schema.type === undefined && isObject(schema.properties))) return undefined;
    return new WrappedRoot(schema.type === 'array' ? 'items' : 'value');
  }

  /** The request with its schema as the one member of an object (a copy; the request is not changed). */
  request(request: ChatRequest): ChatRequest {
    const format = request.response_format as unknown as { type: 'json_schema'; json_schema: { schema: Json } };
    // Definitions stay at the root, where the schema's `#/$defs/...` references point.
    const { $defs, definitions, $schema, ...inner } = format.json_schema.schema;
    // A reference to the old root (`#`, a recursive list) or into it points into the member now.
    const member = rerooted(inner, `#/properties/${this.key}`) as Json;
    const schema: Json = { type: 'object', properties: { [this.key]: member }, required: [this.key], additionalProperties: false };
    if ($defs !== undefined) schema.$defs = $defs;
    if (definitions !== undefined) schema.definitions = definitions;
    return { ...request, response_format: { ...format, json_schema: { ...format.json_schema, schema } } };
  }

  /** An answer's texts as the member alone. */
  answer(response: ChatResponse): ChatResponse {
    for (const choice of response.choices ?? []) {
      const message = choice?.message;
      if (typeof message?.content !== 'string') continue;
      const member = new MemberText(this.key);
      message.content = member.push(message.content) + member.end(choice.finish_reason === 'stop');
      dropUpstreamBytes(response);
    }
    return response;
  }

  /** A stream's texts as the member alone, choice by choice. */
  stream<C extends ChatChunk>(chunks: AsyncIterable<C>): AsyncIterableIterator<C> {
    const members = new Map<number, MemberText>();
    let last: C | undefined;
    const mapped = mapStream(chunks, (chunk) => {
      last = chunk;
      for (const choice of chunk.choices ?? []) {
        const index = typeof choice?.index === 'number' ? choice.index : 0;
        let delta = choice?.delta as { content?: unknown } | undefined;
        // Some compatible servers send `finish_reason: ""` on every chunk until the real one.
        const finished = Boolean(choice?.finish_reason);
        if (typeof delta?.content !== 'string' && !finished) continue;
        let member = members.get(index);
        if (!member) members.set(index, (member = new MemberText(this.key)));
        let text = typeof delta?.content === 'string' ? member.push(delta.content) : '';
        if (finished) {
          text += member.end(choice.finish_reason === 'stop');
          members.delete(index);
        }
        if (typeof delta?.content === 'string' || text !== '') {
          // A finish without a delta (some servers leave it out) still carries what was held.
          if (!delta) delta = (choice as { delta?: unknown }).delta = {};
          delta.content = text;
          dropUpstreamBytes(chunk);
        }
      }
      return chunk;
    }, {
      // A stream cut before its finish: what was held back goes out as it came.
      end: () => {
        const pieces = [...members].map(([index, member]) => ({ index, delta: { content: member.end(false) }, finish_reason: null })).filter((c) => c.delta.content !== '');
        if (!last || pieces.length === 0) return undefined;
        return { ...last, choices: pieces, usage: undefined } as unknown as C;
      },
    });
    // An attempt's stream that fails by itself when the attempt aborts still does.
    return likeStream(mapped, chunks);
  }
}

/**
 * `schema` with every `$ref` into the document's root (`#`, `#/items`...) but its definitions
 * (`#/$defs/...`, `#/definitions/...`, which stay at the root) pointing under `base` instead.
 */
function rerooted(schema: unknown, base: string): unknown {
  if (Array.isArray(schema)) return schema.map((item) => rerooted(item, base));
  if (!isObject(schema)) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    const ref = key === '$ref' && typeof value === 'string' && (value === '#' || value.startsWith('#/')) && !/^#\/(\$defs|definitions)(\/|$)/.test(value);
    out[key] = ref ? base + (value as string).slice(1) : rerooted(value, base);
  }
  return out;
}

/**
 * Where the run of whitespace and closing braces that ends `text` begins (what may follow the
 * member's value before the answer ends): `text.length` when it ends otherwise.
 */
function tailStart(text: string): number {
  let at = text.length;
  for (let c = text.charCodeAt(at - 1); c === 125 || c === 32 || c === 10 || c === 13 || c === 9; c = text.charCodeAt(--at - 1));
  return at;
}

/**
 * The text of `{"<key>": <value>}`, given a piece at a time, as `<value>` alone. Until the opening
 * `{"<key>":` has come whole, nothing goes out; text that turns out not to open that way goes out
 * as it came. After it, a run of whitespace and closing braces at the end is held back until more
 * text follows; at the end of a finished answer, the last of those braces (the object's own) is
 * left out.
 */
class MemberText {
  private head = '';
  private state: 'head' | 'value' | 'as-is' = 'head';
  private held = '';
  /** Whether the value's first character came. */
  private begun = false;

  constructor(private readonly key: string) {}

  push(text: string): string {
    if (this.state === 'as-is') return text;
    if (this.state === 'head') {
      this.head += text;
      const opening = new RegExp(`^\\s*\\{\\s*"${this.key}"\\s*:\\s*`).exec(this.head);
      if (!opening) {
        const compact = this.head.replace(/\s+/g, '');
        if (`{"${this.key}":`.startsWith(compact)) return '';
        this.state = 'as-is';
        return this.head;
      }
      this.state = 'value';
      text = this.head.slice(opening[0].length);
    }
    // Whitespace before the value (after the colon) is the object's, not the value's.
    if (!this.begun) {
      text = text.trimStart();
      if (text === '') return '';
      this.begun = true;
    }
    const tail = tailStart(text);
    // Only whitespace and braces: held with the rest (what came before is not read again).
    if (tail === 0) {
      this.held += text;
      return '';
    }
    const out = this.held + text.slice(0, tail);
    this.held = text.slice(tail);
    return out;
  }

  /** What is left once the answer ended; `finished`: it ended as the model meant it to, object closed. */
  end(finished: boolean): string {
    if (this.state === 'head') return this.head;
    const held = this.held;
    this.held = '';
    if (!finished) return held;
    const brace = held.lastIndexOf('}');
    return brace === -1 ? held : held.slice(0, brace).trimEnd();
  }
}
