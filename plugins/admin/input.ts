import type { ValidateFunction } from 'ajv';
import { GatewayError, parseInstant, UNSAFE_RANGES, type JsonSchema, type RouteInput } from '../../core/index.js';
import { createRequestAjv, toRequestError } from '../validation/index.js';
import type { KeyPatch } from '../../core/store/index.js';
import type { GroupBy } from './views.js';

const DAY_MS = 86_400_000;

// ---------------------------------------------------------------------------------------------
// Bodies (POST /admin/keys, PATCH /admin/keys/:id)
// ---------------------------------------------------------------------------------------------

/** A printable name without surrounding spaces. */
const NAME: JsonSchema = {
  type: 'string',
  minLength: 1,
  maxLength: 128,
  // None of the characters the CLI refuses (control, bidi, invisible: UNSAFE_RANGES).
  pattern: `^[^\\s${UNSAFE_RANGES}]([^${UNSAFE_RANGES}]*[^\\s${UNSAFE_RANGES}])?$`,
  'x-expected': 'printable text of 1 to 128 characters without leading or trailing spaces',
};

/** The fields both bodies share; null clears a limit. */
const LIMITS: Record<string, JsonSchema> = {
  models: {
    type: ['array', 'null'],
    minItems: 1,
    maxItems: 256,
    items: { type: 'string', minLength: 1, maxLength: 256, pattern: `^[^${UNSAFE_RANGES}]+$` },
    'x-expected': 'a list of 1 to 256 model names (globs), or null for any model',
  },
  rpm: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000_000 },
  tpm: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000_000_000 },
  max_concurrent: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000 },
  budget: { type: ['number', 'null'], minimum: 0, maximum: 1_000_000_000_000 },
  expires_at: { type: ['string', 'null'], format: 'date-time', maxLength: 64, 'x-expected': 'an ISO 8601 date-time with a time zone (2030-01-31T00:00:00Z), or null' },
  expires_in_days: { type: 'number', exclusiveMinimum: 0, maximum: 36_500 },
};

export const createKeySchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name: NAME, ...LIMITS },
};

export const patchKeySchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { name: NAME, ...LIMITS },
};

const ajv = createRequestAjv();
const validateCreate = ajv.compile(createKeySchema);
const validatePatch = ajv.compile(patchKeySchema);

function check(validate: ValidateFunction, body: Record<string, unknown>): void {
  if (!validate(body)) throw toRequestError(validate.errors ?? [], body);
}

/** expires_at / expires_in_days -> epoch ms (null clears it); undefined when neither was given. */
function expiryOf(body: Record<string, unknown>, now: number): number | null | undefined {
  if (body.expires_at !== undefined && body.expires_in_days !== undefined) {
    throw new GatewayError('invalid_value', {
      param: 'expires_in_days',
      params: { detail: 'give expires_at or expires_in_days, not both.' },
    });
  }
  if (body.expires_in_days !== undefined) return now + Math.round((body.expires_in_days as number) * DAY_MS);
  if (body.expires_at === undefined) return undefined;
  if (body.expires_at === null) return null;
  const ms = Date.parse(body.expires_at as string);
  if (!Number.isFinite(ms)) {
    throw new GatewayError('invalid_value', { param: 'expires_at', params: { detail: `'${String(body.expires_at).slice(0, 60)}' is not a date this gateway can read.` } });
  }
  return ms;
}

export interface CreateKeyInput {
  name: string;
  models: string[] | null;
  rpm: number | null;
  tpm: number | null;
  maxConcurrent: number | null;
  budget: number | null;
  expiresAt: number | null;
}

/** A key's model patterns, each once (as the CLI keeps them). */
function distinct(models: string[] | null | undefined): string[] | null | undefined {
  return Array.isArray(models) ? [...new Set(models)] : models;
}

/** A POST /admin/keys body, checked; throws a 400 naming the field. */
export function parseCreateKey(body: Record<string, unknown>, now = Date.now()): CreateKeyInput {
  check(validateCreate, body);
  const expiresAt = expiryOf(body, now) ?? null;
  if (expiresAt !== null && expiresAt <= now) {
    throw new GatewayError('invalid_value', {
      param: body.expires_at !== undefined ? 'expires_at' : 'expires_in_days',
      params: { detail: 'a new key must expire in the future.' },
    });
  }
  return {
    name: body.name as string,
    models: distinct(body.models as string[] | null | undefined) ?? null,
    rpm: (body.rpm as number | null | undefined) ?? null,
    tpm: (body.tpm as number | null | undefined) ?? null,
    maxConcurrent: (body.max_concurrent as number | null | undefined) ?? null,
    budget: (body.budget as number | null | undefined) ?? null,
    expiresAt,
  };
}

/** A PATCH /admin/keys/:id body as a store patch: only the fields sent; null clears. */
export function parsePatchKey(body: Record<string, unknown>, now = Date.now()): KeyPatch {
  check(validatePatch, body);
  const patch: KeyPatch = {};
  if (body.name !== undefined) patch.name = body.name as string;
  if (body.models !== undefined) patch.models = distinct(body.models as string[] | null) ?? null;
  if (body.rpm !== undefined) patch.rpm = body.rpm as number | null;
  if (body.tpm !== undefined) patch.tpm = body.tpm as number | null;
  if (body.max_concurrent !== undefined) patch.maxConcurrent = body.max_concurrent as number | null;
  if (body.budget !== undefined) patch.budget = body.budget as number | null;
  const expiresAt = expiryOf(body, now);
  if (expiresAt !== undefined) patch.expiresAt = expiresAt;
  return patch;
}

// ---------------------------------------------------------------------------------------------
// Query strings (GET /admin/logs, GET /admin/usage)
// ---------------------------------------------------------------------------------------------

type Query = RouteInput['query'];

function invalidQuery(param: string, detail: string): GatewayError {
  return new GatewayError('invalid_value', { param, params: { detail } });
}

/** Refuse query parameters the route does not know (a typo would otherwise widen the answer silently). */
export function onlyKnown(query: Query, known: readonly string[]): void {
  for (const name of Object.keys(query)) {
    if (!known.includes(name)) throw new GatewayError('unknown_parameter', { param: name });
  }
}

/** One query value; an empty value counts as absent; a repeated one is refused. */
export function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw invalidQuery(name, 'give this parameter once.');
  return value === '' ? undefined : value;
}

/**
 * A point in time from a query string (see parseInstant): epoch milliseconds (`1735689600000`), a
 * date (`2025-01-01`, midnight UTC) or a date-time (`2025-01-01T12:00:00Z`, `...+02:00`; without
 * a zone it is UTC; a `+` the query string turned into a space is read back as `+`).
 */
export function parseTime(param: string, text: string): number {
  const at = text.trim() === text ? parseInstant(text) : undefined;
  if (at === 'epoch-seconds') throw invalidQuery(param, `'${text}' looks like epoch seconds (a moment of 1970); give epoch milliseconds or an ISO 8601 date-time.`);
  if (at !== undefined) return at;
  throw invalidQuery(param, `expected an ISO 8601 date-time (2025-01-31T00:00:00Z; UTC when no zone is given), a date (2025-01-31) or epoch milliseconds, but got '${text.slice(0, 60)}'.`);
}

export function parseInteger(param: string, text: string, min: number, max: number): number {
  if (!/^\d{1,15}$/.test(text)) throw invalidQuery(param, `expected an integer from ${min} to ${max}, but got '${text.slice(0, 60)}'.`);
  const value = Number(text);
  if (value < min || value > max) throw invalidQuery(param, `expected an integer from ${min} to ${max}, but got ${value}.`);
  return value;
}

export interface TimeRange {
  since?: number;
  until?: number;
}

/** `since` (inclusive) and `until` (exclusive); `until` before `since` is refused. */
export function parseRange(query: Query): TimeRange {
  const sinceText = single(query, 'since');
  const untilText = single(query, 'until');
  const range: TimeRange = {};
  if (sinceText !== undefined) range.since = parseTime('since', sinceText);
  if (untilText !== undefined) range.until = parseTime('until', untilText);
  if (range.since !== undefined && range.until !== undefined && range.until < range.since) {
    throw invalidQuery('until', 'expected a time not before since.');
  }
  return range;
}

const GROUPS: readonly GroupBy[] = ['key', 'model', 'day'];

/** `group_by=key,model,day` (any of them, in any order; `none` for one grand total). Default: key,model. */
export function parseGroupBy(query: Query): GroupBy[] {
  const text = single(query, 'group_by');
  if (text === undefined) return ['key', 'model'];
  if (text === 'none') return [];
  const out: GroupBy[] = [];
  for (const part of text.split(',').map((p) => p.trim())) {
    if (!GROUPS.includes(part as GroupBy)) {
      throw invalidQuery('group_by', `expected a comma-separated list of key, model, day (or none), but got '${part.slice(0, 40)}'.`);
    }
    if (!out.includes(part as GroupBy)) out.push(part as GroupBy);
  }
  return out;
}
