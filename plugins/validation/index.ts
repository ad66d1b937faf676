import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { definePlugin, GatewayError, type JsonSchema } from '../../core/index.js';

const PLUGIN_NAME = 'validation';
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * A request validator: ajv, no coercion, no defaults (bodies pass through as sent). `verbose`
 * (the default) puts each error's schema in it, which toRequestError reads; it also makes
 * every check, passing ones included, about ten times slower, so a check that only needs the
 * yes or no is compiled with `verbose: false`.
 */
export function createRequestAjv(options: { verbose?: boolean } = {}): Ajv {
  const ajv = new Ajv({ allErrors: false, verbose: options.verbose ?? true, strict: true, strictTypes: false, strictRequired: false, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addKeyword({ keyword: 'x-expected', schemaType: 'string' });
  ajv.addKeyword({ keyword: 'x-message', schemaType: 'string' });
  return ajv;
}

/** `['messages', 0, 'content']` -> `messages[0].content`, the way clients name fields. */
export function formatPath(path: ReadonlyArray<string | number>): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (/^[^.[\]\s"]+$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

/** A JSON pointer as path segments: numbers where the body has an array, names elsewhere. */
function pathOf(pointer: string, body: unknown): Array<string | number> {
  if (!pointer) return [];
  const out: Array<string | number> = [];
  let node: unknown = body;
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    const key = Array.isArray(node) && /^\d+$/.test(segment) ? Number(segment) : segment;
    out.push(key);
    node = node !== null && typeof node === 'object' ? (node as Record<string | number, unknown>)[key] : undefined;
  }
  return out;
}

const COMPOSITE = new Set(['anyOf', 'oneOf', 'allOf', 'if', 'not']);
const BRANCH_MISMATCH = new Set(['type', 'enum', 'const']);

function show(value: unknown): string {
  const text = typeof value === 'string' ? `'${value}'` : JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a decimal';
  if (typeof value === 'object') return 'an object';
  return `a ${typeof value}`;
}

function valueAt(body: unknown, path: Array<string | number>): unknown {
  let node: unknown = body;
  for (const segment of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[segment];
  }
  return node;
}

/**
 * One ajv error list -> one client-facing error whose `param` names the field
 * (`messages[1].content`), phrased the way OpenAI-style APIs phrase theirs.
 */
export function toRequestError(errors: readonly ErrorObject[], body: unknown): GatewayError {
  const custom = errors.find((e) => typeof (e.parentSchema as Record<string, unknown> | undefined)?.['x-message'] === 'string');
  if (custom) {
    // The field it is about: a missing one by its name; the body itself by none (null).
    const path = pathOf(custom.instancePath, body);
    const missing = custom.keyword === 'required' ? (custom.params as { missingProperty?: unknown }).missingProperty : undefined;
    const param = formatPath(missing === undefined ? path : [...path, String(missing)]) || undefined;
    return new GatewayError('invalid_request', { param, params: { detail: (custom.parentSchema as Record<string, string>)['x-message'] } });
  }
  const concrete = errors.filter((e) => !COMPOSITE.has(e.keyword));
  const deepest = concrete.reduce<ErrorObject | undefined>(
    (best, e) => (!best || pathOf(e.instancePath, body).length > pathOf(best.instancePath, body).length ? e : best),
    undefined,
  );
  // At the deepest place, a missing or unknown field says more than "matched no branch".
  const specific = deepest && concrete.find((e) => e.instancePath === deepest.instancePath && !BRANCH_MISMATCH.has(e.keyword));
  const anyOf = specific ? undefined : errors.find((e) => e.keyword === 'anyOf' && (!deepest || e.instancePath === deepest.instancePath));
  if (anyOf || !deepest) {
    const at = anyOf ?? errors[0]!;
    const path = pathOf(at.instancePath, body);
    const expected = (at.parentSchema as Record<string, unknown> | undefined)?.['x-expected'];
    const got = valueAt(body, path);
    return new GatewayError('invalid_value', {
      param: formatPath(path),
      params: { detail: `expected ${typeof expected === 'string' ? expected : 'a valid value'}, but got ${show(got)} instead.` },
    });
  }
  const e = specific ?? deepest;
  const path = pathOf(e.instancePath, body);
  const got = valueAt(body, path);
  const params = e.params as Record<string, unknown>;
  const hint = (e.parentSchema as Record<string, unknown> | undefined)?.['x-expected'];
  if (typeof hint === 'string' && e.keyword !== 'required' && e.keyword !== 'additionalProperties') {
    const code = e.keyword === 'type' ? 'invalid_type' : 'invalid_value';
    return new GatewayError(code, { param: formatPath(path), params: { detail: `expected ${hint}, but got ${e.keyword === 'type' ? typeName(got) : show(got)} instead.` } });
  }
  switch (e.keyword) {
    case 'required': {
      const param = formatPath([...path, String(params.missingProperty)]);
      return new GatewayError('missing_required_parameter', { param });
    }
    case 'additionalProperties': {
      const param = formatPath([...path, String(params.additionalProperty)]);
      return new GatewayError('unknown_parameter', { param });
    }
    case 'type':
      // 1e400, or an integer of hundreds of digits: JSON.parse makes it Infinity, no number at all.
      if (typeof got === 'number' && !Number.isFinite(got)) {
        return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: 'the number is out of range (too large to be represented).' } });
      }
      return new GatewayError('invalid_type', {
        param: formatPath(path),
        params: { detail: `expected ${String(params.type).replace(/,/g, ' or ')}, but got ${typeName(got)} instead.` },
      });
    case 'maximum':
    case 'exclusiveMaximum':
      return new GatewayError('invalid_value', {
        param: formatPath(path),
        params: { detail: `expected a value ${params.comparison} ${params.limit}, but got ${show(got)} instead.` },
      });
    case 'minimum':
    case 'exclusiveMinimum':
      return new GatewayError('invalid_value', {
        param: formatPath(path),
        params: { detail: `expected a value ${params.comparison} ${params.limit}, but got ${show(got)} instead.` },
      });
    case 'enum':
      return new GatewayError('invalid_value', {
        param: formatPath(path),
        params: {
          detail: `expected one of ${(params.allowedValues as unknown[]).filter((v) => v !== null).map(show).join(', ')}, but got ${show(got)} instead.`,
        },
      });
    case 'const':
      return new GatewayError('invalid_value', {
        param: formatPath(path),
        params: { detail: `expected ${show(params.allowedValue)}, but got ${show(got)} instead.` },
      });
    case 'minItems':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected at least ${params.limit} item(s).` } });
    case 'maxItems':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected at most ${params.limit} item(s).` } });
    case 'minLength':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected at least ${params.limit} character(s).` } });
    case 'maxLength':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected at most ${params.limit} character(s).` } });
    case 'pattern':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected a string matching ${String(params.pattern)}.` } });
    case 'format':
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `expected a ${String(params.format)} string, but got ${show(got)} instead.` } });
    default:
      return new GatewayError('invalid_value', { param: formatPath(path), params: { detail: `${e.message ?? 'is not valid'}.` } });
  }
}

/**
 * Run a validator once, on `{}`, at set-up: V8 compiles a function on its first call, and a
 * route's validators are large generated functions (several milliseconds of the first request of
 * each route otherwise). A plugin's `$async` schema answers with a promise, whose refusal of `{}`
 * is no news and must not surface as an unhandled rejection.
 */
export function warmUp(validate: ValidateFunction): void {
  const result: unknown = validate({});
  if (result instanceof Promise) result.catch(() => undefined);
}

/**
 * Checks each call's body against the JSON Schema its route declares. Validators are compiled
 * once, when the gateway sets up, never per request.
 */
export default definePlugin({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Validates request bodies against the JSON Schema beside each route.',
  apply(api) {
    const ajv = createRequestAjv();
    const quickAjv = createRequestAjv({ verbose: false });
    /** Per schema: a quick yes/no, and the verbose validator whose errors explain a no. */
    const validators = new WeakMap<object, { check: ValidateFunction; explain: ValidateFunction }>();
    const compile = (schema: JsonSchema): { check: ValidateFunction; explain: ValidateFunction } => {
      let fns = validators.get(schema);
      if (!fns) {
        fns = { check: quickAjv.compile(schema), explain: ajv.compile(schema) };
        validators.set(schema, fns);
      }
      return fns;
    };

    api.hooks.setup.tap(PLUGIN_NAME, () => {
      for (const format of api.formats.list()) {
        for (const route of format.routes) {
          if (route.kind !== 'call' || !route.schema) continue;
          const { check, explain } = compile(route.schema);
          warmUp(check);
          warmUp(explain);
        }
      }
    });

    api.hooks.validate.tap(PLUGIN_NAME, (_ctx, call) => {
      if (!call.schema) return;
      const { check, explain } = compile(call.schema as JsonSchema);
      // Refused exactly as before: the verbose validator has the last word and gives the errors.
      if (!check(call.body) && !explain(call.body)) throw toRequestError(explain.errors ?? [], call.body);
    });
  },
});
