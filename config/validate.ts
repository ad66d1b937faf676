import { Ajv, type ErrorObject, type SchemaObject } from 'ajv';
import addFormatsModule from 'ajv-formats';

export type YamlPath = ReadonlyArray<string | number>;

/** A configuration problem, located in the file: `gateway.config.yaml:12 providers[0].type: ...`. */
export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly path: YamlPath,
    readonly line: number | undefined,
    readonly problem: string,
  ) {
    super(`${file}${line ? `:${line}` : ''}: ${formatPath(path) || '(top level)'}: ${problem}`);
    this.name = 'ConfigError';
  }
}

/** Several problems found in one pass; the message has one line per problem. */
export class ConfigErrors extends Error {
  constructor(readonly errors: ConfigError[]) {
    super(errors.map((e) => e.message).join('\n'));
    this.name = 'ConfigErrors';
  }
}

/** `['providers', 0, 'type']` -> `providers[0].type`. */
export function formatPath(path: YamlPath): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** One ajv for configuration and plugin options: defaults filled, "8080" read as 8080. */
export function createConfigAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, verbose: true, useDefaults: true, coerceTypes: true, strict: true, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addKeyword({ keyword: 'x-expected', schemaType: 'string' });
  return ajv;
}

function pointerToPath(pointer: string): Array<string | number> {
  if (!pointer) return [];
  return pointer
    .slice(1)
    .split('/')
    .map((raw) => raw.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
}

/**
 * Turn ajv's errors into one readable problem per place. Never quotes a value from the file
 * (it may be a secret); only key names and the schema's own words.
 */
export function describeErrors(errors: ErrorObject[]): Array<{ path: Array<string | number>; problem: string }> {
  const byPath = new Map<string, { path: Array<string | number>; problem: string; rank: number }>();
  const expected = new Set<string>();
  for (const error of errors) {
    if (error.keyword === 'anyOf' || error.keyword === 'oneOf') {
      const hint = (error.parentSchema as SchemaObject | undefined)?.['x-expected'];
      if (typeof hint === 'string') expected.add(error.instancePath);
      if (typeof hint === 'string') {
        byPath.set(error.instancePath, { path: pointerToPath(error.instancePath), problem: `must be ${hint}`, rank: 0 });
      }
    }
  }
  for (const error of errors) {
    if (error.keyword === 'anyOf' || error.keyword === 'oneOf' || error.keyword === 'if') continue;
    if ([...expected].some((p) => error.instancePath === p || error.instancePath.startsWith(`${p}/`))) continue;
    let path = pointerToPath(error.instancePath);
    let problem: string;
    switch (error.keyword) {
      case 'additionalProperties': {
        const extra = String((error.params as { additionalProperty: string }).additionalProperty);
        path = [...path, extra];
        problem = 'unknown key (not allowed here)';
        break;
      }
      case 'required': {
        const missing = String((error.params as { missingProperty: string }).missingProperty);
        path = [...path, missing];
        problem = 'is required';
        break;
      }
      case 'enum': {
        const allowed = (error.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ');
        problem = `must be one of ${allowed}`;
        break;
      }
      default: {
        // The schema's own words for what it expects, where it has them (not a pattern's text).
        const hint = (error.parentSchema as SchemaObject | undefined)?.['x-expected'];
        problem = typeof hint === 'string' ? `must be ${hint}` : (error.message ?? `fails ${error.keyword}`);
      }
    }
    const key = formatPath(path);
    const existing = byPath.get(key);
    if (!existing) byPath.set(key, { path, problem, rank: 1 });
  }
  return [...byPath.values()].map(({ path, problem }) => ({ path, problem }));
}

/** Validate `data` (in place: defaults are filled) against `schema`; returns problems with paths under `base`. */
export function checkAgainst(
  ajv: Ajv,
  schema: SchemaObject,
  data: unknown,
  base: YamlPath,
): Array<{ path: Array<string | number>; problem: string }> {
  // Before the coercing pass, which would read them as 1 and 0 (`rpm: false`: every call refused).
  const booleans = booleansForNumbers(schema, data);
  // ajv keeps compiled schemas keyed by the schema object, so this compiles once per schema.
  const validate = ajv.compile(schema);
  const found = validate(data) ? [] : describeErrors(validate.errors ?? []);
  const taken = new Set(booleans.map((b) => JSON.stringify(b.path)));
  return [...booleans, ...found.filter((f) => !taken.has(JSON.stringify(f.path)))].map(({ path, problem }) => ({ path: [...base, ...path], problem }));
}

/** An ajv that coerces nothing and fills in nothing: it sees the values as the file wrote them. */
let literalAjv: Ajv | undefined;

/**
 * Where `data` has `true` or `false` and the schema asks for a number. The configuration's ajv
 * coerces types so that `"8080"` (from `${PORT}`) is read as 8080, and with them `true` as 1 and
 * `false` as 0: `port: true` would listen on port 1, `bodyLimit: true` refuse every body over a
 * byte. Those are refused instead.
 */
function booleansForNumbers(schema: SchemaObject, data: unknown): Array<{ path: Array<string | number>; problem: string }> {
  literalAjv ??= addFormats(new Ajv({ allErrors: true, verbose: true, strict: false, allowUnionTypes: true }));
  const validate = literalAjv.compile(schema);
  if (validate(data)) return [];
  const out = new Map<string, { path: Array<string | number>; problem: string }>();
  for (const error of validate.errors ?? []) {
    if (error.keyword !== 'type' || typeof error.data !== 'boolean') continue;
    const types = ([] as unknown[]).concat((error.params as { type?: unknown }).type);
    if (types.includes('boolean') || !(types.includes('number') || types.includes('integer'))) continue;
    const kind = types.includes('number') ? 'a number' : 'an integer';
    out.set(error.instancePath, { path: pointerToPath(error.instancePath), problem: `must be ${kind} (true and false are not numbers)` });
  }
  return [...out.values()];
}
