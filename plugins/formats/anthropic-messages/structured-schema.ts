type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);
const isPrimitive = (value: unknown): boolean => value === null || typeof value !== 'object';

/** The string formats Anthropic's structured outputs check; any other is said in the description. */
const STRING_FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'uri', 'ipv4', 'ipv6', 'uuid']);

/**
 * A JSON schema as Anthropic's structured outputs (`output_config.format`, a `strict` tool's
 * `input_schema`) take it: they refuse constraints they do not enforce (an integer's `minimum`,
 * a string's `minLength`, `minItems` past 1, `pattern`...), which OpenAI's strict mode and the
 * schemas zod and pydantic write use freely. Such constraints are said in the schema's
 * `description` instead (`{minimum: 0}`), where the model reads them, as Anthropic's own SDKs do;
 * every object closes (`additionalProperties: false`), `oneOf` is `anyOf`, and `$schema` goes.
 * A schema whose type cannot be told (no `type`, no `anyOf`/`oneOf`/`allOf`, no `enum`/`const`)
 * is left as it is, for the back end to judge.
 */
export function structuredSchema(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const rest: Json = { ...schema };
  const take = (key: string): unknown => {
    const value = rest[key];
    delete rest[key];
    return value;
  };
  const out: Json = {};
  // Definitions, by either name (draft 2020's $defs, draft 7's definitions, which zod and the
  // OpenAI SDK write for a recursive schema): kept where their $refs point.
  for (const key of ['$defs', 'definitions']) {
    const defs = take(key);
    if (isObject(defs)) out[key] = Object.fromEntries(Object.entries(defs).map(([name, def]) => [name, structuredSchema(def)]));
  }
  const ref = take('$ref');
  if (ref !== undefined) {
    out.$ref = ref;
    if (typeof rest.description === 'string') out.description = rest.description;
    return out;
  }
  const values = rest.enum;
  if (Array.isArray(values) && values.length > 0 && values.every(isPrimitive)) out.enum = take('enum');
  if (rest.const !== undefined && isPrimitive(rest.const)) out.const = take('const');
  const literal = 'enum' in out || 'const' in out;
  const declared = take('type');
  const type = literal ? undefined : declared;
  // A type list (`["object", "null"]`) is read as its object or array, for what those hold.
  const kinds = Array.isArray(type) ? type : [type];
  const anyOf = take('anyOf');
  const oneOf = take('oneOf');
  const allOf = take('allOf');
  take('$schema');
  if (Array.isArray(anyOf ?? oneOf)) out.anyOf = ((anyOf ?? oneOf) as unknown[]).map(structuredSchema);
  else if (Array.isArray(allOf)) out.allOf = allOf.map(structuredSchema);
  else if (!literal) {
    if (type === undefined) return schema;
    out.type = type;
  }
  const description = take('description');
  const title = take('title');
  if (title !== undefined) out.title = title;
  if (kinds.includes('object')) {
    const properties = take('properties');
    out.properties = isObject(properties) ? Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, structuredSchema(property)])) : {};
    // Closed, unless its other keys have a schema of their own (a map): that is kept.
    const more = take('additionalProperties');
    out.additionalProperties = isObject(more) ? structuredSchema(more) : false;
    const required = take('required');
    if (required !== undefined) out.required = required;
  }
  if (kinds.includes('string')) {
    if (typeof rest.format === 'string' && STRING_FORMATS.has(rest.format)) out.format = take('format');
  }
  if (kinds.includes('array')) {
    const items = take('items');
    if (items !== undefined) out.items = structuredSchema(items);
    if (rest.minItems === 0 || rest.minItems === 1) out.minItems = take('minItems');
  }
  const said = Object.entries(rest).map(([key, value]) => `${key}: ${JSON.stringify(value)}`);
  const texts = [typeof description === 'string' ? description : undefined, said.length > 0 ? `{${said.join(', ')}}` : undefined].filter((t) => t !== undefined);
  if (texts.length > 0) out.description = texts.join('\n\n');
  return out;
}
