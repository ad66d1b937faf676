/**
 * The operator's commands: `keys create|list|show|revoke`, `logs` and `usage`. They open the
 * same SQLite file as the gateway (storage.url, relative to the configuration file's folder) and
 * work whether or not a gateway is running on it: the file is in WAL mode, and a running gateway
 * notices key changes through SQLite's data_version.
 *
 * With --json they print what the admin API answers (GET /admin/keys, /admin/logs, /admin/usage):
 * the same fields, the same names.
 *
 * Arguments are checked before the configuration is read: a bad command line exits 2 (UsageError),
 * anything else that goes wrong exits 1 (CommandError, or any other error).
 */
import type { LoadedConfig } from '../config/load.js';
import { printable, UNSAFE_CHARACTERS } from './printable.js';
import { parseInstant } from './instant.js';
import { keyView as apiKeyView, logEntryView, usageTotalView } from '../plugins/admin/views.js';
import {
  generateSecret,
  InvalidCursorError,
  openStores,
  type KeyPatch,
  type KeyRecord,
  type RequestLogEntry,
  type RequestLogQuery,
  type Stores,
  type UsageTotal,
  type UsageTotalsQuery,
} from './store/index.js';

/** A bad command line: exit 2 with the usage text. */
export class UsageError extends Error {}

/** A failure the operator can act on (unknown key, name taken...): exit 1 with this message. */
export class CommandError extends Error {}

/** Options of the admin commands, merged into the CLI's one parseArgs call. */
export const ADMIN_OPTIONS = {
  json: { type: 'boolean' },
  all: { type: 'boolean' },
  name: { type: 'string' },
  models: { type: 'string', multiple: true },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  'max-concurrent': { type: 'string' },
  budget: { type: 'string' },
  expires: { type: 'string' },
  'expires-in-days': { type: 'string' },
  key: { type: 'string' },
  model: { type: 'string' },
  status: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  by: { type: 'string' },
} as const;

export const ADMIN_COMMANDS = ['keys', 'logs', 'usage'] as const;

export function isAdminCommand(command: string): command is (typeof ADMIN_COMMANDS)[number] {
  return (ADMIN_COMMANDS as readonly string[]).includes(command);
}

export type OptionValues = Record<string, string | boolean | string[] | undefined>;

/** Refuse options given on the command line that `what` does not take. */
export function rejectOptions(what: string, values: OptionValues, allowed: readonly string[]): void {
  for (const [name, value] of Object.entries(values)) {
    if (value !== undefined && !allowed.includes(name)) throw new UsageError(`option --${name} does not apply to '${what}'`);
  }
}

function noMorePositionals(what: string, extra: string[]): void {
  if (extra.length > 0) throw new UsageError(`unexpected argument '${printable(extra[0]!)}' for '${what}'`);
}

// ---------------------------------------------------------------------------------------------
// Argument parsing

const str = (values: OptionValues, flag: string): string | undefined => {
  const value = values[flag];
  return typeof value === 'string' ? value : undefined;
};

/** A whole number in [min, max], or undefined when the flag is absent. */
export function parseInteger(raw: string | undefined, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (raw === undefined) return undefined;
  const text = raw.trim();
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--${flag} must be a whole number (got '${printable(raw)}')`);
  }
  const n = Number(text);
  if (n < min || n > max) {
    throw new UsageError(`--${flag} must be ${max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `between ${min} and ${max}`} (got ${n})`);
  }
  return n;
}

/** A plain non-negative decimal number (`10`, `2.5`, `.5`), or undefined when the flag is absent. */
export function parseAmount(raw: string | undefined, flag: string, options: { positive?: boolean; max?: number } = {}): number | undefined {
  if (raw === undefined) return undefined;
  const text = raw.trim();
  const n = Number(text);
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(text) || !Number.isFinite(n)) {
    throw new UsageError(`--${flag} must be a number such as 10 or 2.5 (got '${printable(raw)}')`);
  }
  if (options.positive && n <= 0) throw new UsageError(`--${flag} must be more than 0`);
  if (options.max !== undefined && n > options.max) throw new UsageError(`--${flag} must be at most ${options.max} (got ${n})`);
  return n;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * A point in time: an ISO date-time (UTC unless it carries an offset; a date alone is its UTC
 * midnight), epoch milliseconds, or a time ago (`30m`, `24h`, `7d`; also `s` and `w`).
 */
export function parseTime(raw: string, flag: string, now = Date.now()): number {
  const text = raw.trim();
  const relative = /^(\d+(?:\.\d+)?)\s*([smhdw])$/i.exec(text);
  if (relative) {
    const at = now - Math.round(Number(relative[1]) * UNIT_MS[relative[2]!.toLowerCase()]!);
    // A date can be at most 100 million days from 1970 (`99999999999d` is not one).
    if (Number.isFinite(new Date(at).getTime())) return at;
    throw new UsageError(`--${flag} '${printable(text)}' reaches back before any date there is; give a time ago such as 30m, 24h, 7d`);
  }
  const at = parseInstant(text);
  if (at === 'epoch-seconds') {
    throw new UsageError(`--${flag} '${text}' looks like epoch seconds; give epoch milliseconds, an ISO date-time, or a time ago such as 24h`);
  }
  if (at !== undefined) return at;
  throw new UsageError(`--${flag} must be an ISO date-time (2025-01-31T12:00:00Z), epoch milliseconds, or a time ago such as 30m, 24h, 7d (got '${printable(raw)}')`);
}

function timeRange(values: OptionValues, now: number): { since?: number; until?: number } {
  const sinceRaw = str(values, 'since');
  const untilRaw = str(values, 'until');
  const since = sinceRaw === undefined ? undefined : parseTime(sinceRaw, 'since', now);
  const until = untilRaw === undefined ? undefined : parseTime(untilRaw, 'until', now);
  if (since !== undefined && until !== undefined && since > until) throw new UsageError('--until must not be before --since');
  return { since, until };
}

const ID_LIKE = /^(key|cfg)_[0-9a-f]{16}$/;

function keyName(raw: string | undefined): string {
  if (raw === undefined) throw new UsageError("'keys create' needs --name NAME");
  if (raw.trim() === '') throw new UsageError('--name must not be empty');
  if (raw !== raw.trim()) throw new UsageError('--name must not start or end with spaces');
  if ([...raw].length > 128) throw new UsageError('--name must be at most 128 characters');
  if (UNSAFE_CHARACTERS.test(raw)) throw new UsageError('--name must not contain control or invisible characters');
  if (ID_LIKE.test(raw)) throw new UsageError(`--name '${raw}' looks like a key id; choose another name`);
  return raw;
}

function modelList(values: OptionValues): string[] | null {
  const given = values.models;
  if (given === undefined) return null;
  const list = (Array.isArray(given) ? given : [String(given)]).flatMap((item) => item.split(',')).map((m) => m.trim()).filter(Boolean);
  if (list.length === 0) throw new UsageError("--models needs at least one model name or glob, such as 'gpt-4o*,echo'");
  for (const model of list) if (UNSAFE_CHARACTERS.test(model)) throw new UsageError('--models must not contain control or invisible characters');
  // `none` clears a limit (--rpm none); as a model list it would be a pattern no model matches.
  if (list.length === 1 && list[0]!.toLowerCase() === 'none') throw new UsageError("--models none would allow no model at all; to allow every model give --models '*'");
  return [...new Set(list)];
}

function keyReference(what: string, rest: string[]): string {
  if (rest.length === 0) throw new UsageError(`'${what}' needs a key id or name`);
  noMorePositionals(what, rest.slice(1));
  return rest[0]!;
}

const GROUPS = ['key', 'model', 'day'] as const;
type Group = (typeof GROUPS)[number];

function groupBy(raw: string | undefined): Group[] {
  if (raw === undefined) return [];
  const groups = raw.split(',').map((g) => g.trim().toLowerCase()).filter(Boolean);
  if (groups.length === 0) throw new UsageError('--by needs one or more of key, model, day (comma-separated), or none');
  // `none`: one grand total (the default), as the admin API's group_by=none.
  if (groups.length === 1 && groups[0] === 'none') return [];
  for (const g of groups) {
    if (!(GROUPS as readonly string[]).includes(g)) throw new UsageError(`--by takes key, model and day, or none (got '${printable(g)}')`);
  }
  return GROUPS.filter((g) => groups.includes(g));
}

// ---------------------------------------------------------------------------------------------
// Output

// Control and bidi characters in names come from whoever created the key: never let them reach a terminal raw.
export { printable };

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** `2025-01-31 12:00Z` (or with seconds). */
function when(ms: number | null, seconds = false): string {
  if (ms === null) return '-';
  const text = new Date(ms).toISOString().replace('T', ' ');
  return `${text.slice(0, seconds ? 19 : 16)}Z`;
}

/** Costs are often tiny fractions of a cent: four significant digits below 1, four decimals above; never an exponent. */
export function money(value: number | null | undefined): string {
  if (value === null || value === undefined) return '-';
  if (value === 0) return '0';
  const rounded = Math.abs(value) >= 1 ? Number(value.toFixed(4)) : Number(value.toPrecision(4));
  const text = String(rounded);
  return text.includes('e') ? rounded.toFixed(20).replace(/\.?0+$/, '') : text;
}

const count = (value: number | null | undefined): string => (value === null || value === undefined ? '-' : String(value));

/** Columns padded to their widest cell; `right` lists the columns aligned right (numbers). */
export function table(headers: string[], rows: string[][], right: number[] = []): string {
  const cells = [headers, ...rows].map((row) => row.map(printable));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  return cells
    .map((row) => row.map((cell, i) => (right.includes(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd())
    .join('\n')
    .concat('\n');
}

/** `label:  value` lines, labels aligned. */
function block(pairs: Array<[string, string]>): string {
  const width = Math.max(...pairs.map(([label]) => label.length)) + 1;
  return pairs.map(([label, value]) => `  ${`${label}:`.padEnd(width)}  ${printable(value)}`).join('\n').concat('\n');
}

const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;

type KeyStatus = 'active' | 'revoked' | 'expired';

function statusOf(key: KeyRecord, now: number): KeyStatus {
  if (key.revokedAt !== null) return 'revoked';
  if (key.expiresAt !== null && key.expiresAt <= now) return 'expired';
  return 'active';
}

/** A key as the admin API shows it (never its hash; the secret is never stored), and its status. */
function keyView(key: KeyRecord, now: number) {
  return { ...apiKeyView(key), status: statusOf(key, now) };
}

const limitText = (value: number | null) => (value === null ? 'none' : String(value));
const modelsText = (models: string[] | null) => (models === null ? 'any' : models.join(', '));

function keyBlock(key: KeyRecord, now: number): string {
  return block([
    ['id', key.id],
    ['name', key.name],
    ['prefix', key.prefix],
    ['status', statusOf(key, now)],
    ['source', key.source],
    ['created', when(key.createdAt)],
    ['expires', key.expiresAt === null ? 'never' : when(key.expiresAt)],
    ...(key.revokedAt === null ? [] : ([['revoked', when(key.revokedAt)]] as Array<[string, string]>)),
    ['models', modelsText(key.models)],
    ['rpm', limitText(key.rpm)],
    ['tpm', limitText(key.tpm)],
    ['max concurrent', limitText(key.maxConcurrent)],
    ['budget', limitText(key.budget)],
    ['spent', money(key.spent)],
  ]);
}

// ---------------------------------------------------------------------------------------------
// Commands

interface Output {
  stdout: string;
  stderr?: string;
  code: number;
}

type Run = (stores: Stores, loaded: LoadedConfig) => Promise<Output>;

/**
 * A key by id, else by name. A name that several keys have had (a key revoked and created
 * again) means the one not revoked; two keys not revoked with one name is ambiguous.
 */
async function findKey(stores: Stores, ref: string): Promise<KeyRecord> {
  const keys = await stores.keys.list();
  const byId = keys.find((k) => k.id === ref);
  if (byId) return byId;
  const named = keys.filter((k) => k.name === ref);
  if (named.length === 0) throw new CommandError(`no key with id or name '${printable(ref)}' (switchyard keys list --all shows them all)`);
  const live = named.filter((k) => k.revokedAt === null);
  if (live.length > 1) {
    throw new CommandError(`${live.length} keys are named '${printable(ref)}' (${live.map((k) => k.id).join(', ')}); give the id instead`);
  }
  if (live.length === 1) return live[0]!;
  return named.sort((a, b) => b.createdAt - a.createdAt)[0]!;
}

/**
 * When a key is to stop working, from --expires or --expires-in-days: undefined when neither is
 * given; `--expires never` (where `never` is allowed, for `keys update`) is null.
 */
function expiryOf(values: OptionValues, now: number, never: boolean): number | null | undefined {
  const raw = str(values, 'expires');
  const inDays = parseAmount(str(values, 'expires-in-days'), 'expires-in-days', { positive: true, max: 36_500 });
  if (raw !== undefined && inDays !== undefined) throw new UsageError('give --expires or --expires-in-days, not both');
  if (raw === undefined) return inDays === undefined ? undefined : now + Math.round(inDays * UNIT_MS.d!);
  if (never && raw.trim().toLowerCase() === 'never') return null;
  // A time ago is no expiry (`--expires 7d` means a week from now to whoever wrote it): refused,
  // as is anything else not shaped as a date (a date that does not exist is told so below).
  if (parseInstant(raw.trim()) === undefined && !/^\d{4}-\d{2}-\d{2}/.test(raw.trim())) {
    const also = never ? ', or never' : '';
    throw new UsageError(`--expires takes a date-time such as 2025-12-31T23:59:59Z${also} (got '${printable(raw)}'); for a duration use --expires-in-days N`);
  }
  const at = parseTime(raw, 'expires', now);
  if (at <= now) throw new UsageError(`--expires ${when(at)} is in the past`);
  return at;
}

/** Refuse a name `auth.keys` declares or a key not revoked has (other than `except`, the key being renamed). */
async function checkNameFree(stores: Stores, loaded: LoadedConfig, name: string, except?: string): Promise<void> {
  if (loaded.config.auth.keys.some((k) => k.name === name)) {
    throw new CommandError(`a key named '${printable(name)}' is declared in auth.keys of ${loaded.filepath}; choose another name`);
  }
  const taken = (await stores.keys.list()).find((k) => k.name === name && k.revokedAt === null && k.id !== except);
  if (taken) {
    throw new CommandError(`a key named '${printable(name)}' already exists (${taken.id}); revoke it first or choose another name`);
  }
}

function keysCreate(values: OptionValues, now: number): Run {
  const name = keyName(str(values, 'name'));
  const models = modelList(values);
  // The same bounds as POST /admin/keys.
  const rpm = parseInteger(str(values, 'rpm'), 'rpm', 1, 1e9);
  const tpm = parseInteger(str(values, 'tpm'), 'tpm', 1, 1e12);
  const maxConcurrent = parseInteger(str(values, 'max-concurrent'), 'max-concurrent', 1, 1e6);
  const budget = parseAmount(str(values, 'budget'), 'budget', { max: 1e12 });
  const expiresAt = expiryOf(values, now, false) ?? null;

  return async (stores, loaded) => {
    await checkNameFree(stores, loaded, name);
    const secret = generateSecret();
    const key = await stores.keys.create({ name, secret, expiresAt, models, rpm, tpm, maxConcurrent, budget, source: 'cli' });
    if (values.json) return { code: 0, stdout: json({ ...keyView(key, Date.now()), key: secret }) };
    const text =
      `Created key '${printable(key.name)}'.\n\n` +
      block([
        ['id', key.id],
        ['name', key.name],
        ['prefix', key.prefix],
        ...(expiresAt === null ? [] : ([['expires', when(expiresAt)]] as Array<[string, string]>)),
        ['key', secret],
      ]) +
      '\nCopy the key now: it is shown only this once and cannot be recovered (only its hash is stored).\n';
    return { code: 0, stdout: text };
  };
}

/** A limit that `none` clears (null), else a whole number in range; undefined when the flag is absent. */
function limitOrNone(values: OptionValues, flag: string, max: number): number | null | undefined {
  const raw = str(values, flag);
  return raw !== undefined && raw.trim().toLowerCase() === 'none' ? null : parseInteger(raw, flag, 1, max);
}

function keysUpdate(ref: string, values: OptionValues, now: number): Run {
  const patch: KeyPatch = {};
  const nameRaw = str(values, 'name');
  if (nameRaw !== undefined) patch.name = keyName(nameRaw);
  if (values.models !== undefined) {
    const models = modelList(values);
    // '*' (or `any`) alone: any model, as a key made without --models.
    patch.models = models && models.length === 1 && (models[0] === '*' || models[0]!.toLowerCase() === 'any') ? null : models;
  }
  const rpm = limitOrNone(values, 'rpm', 1e9);
  if (rpm !== undefined) patch.rpm = rpm;
  const tpm = limitOrNone(values, 'tpm', 1e12);
  if (tpm !== undefined) patch.tpm = tpm;
  const maxConcurrent = limitOrNone(values, 'max-concurrent', 1e6);
  if (maxConcurrent !== undefined) patch.maxConcurrent = maxConcurrent;
  const budgetRaw = str(values, 'budget');
  if (budgetRaw !== undefined) patch.budget = budgetRaw.trim().toLowerCase() === 'none' ? null : parseAmount(budgetRaw, 'budget', { max: 1e12 })!;
  const expiresAt = expiryOf(values, now, true);
  if (expiresAt !== undefined) patch.expiresAt = expiresAt;
  if (Object.keys(patch).length === 0) {
    throw new UsageError("'keys update' needs something to change: --name, --models, --rpm, --tpm, --max-concurrent, --budget, --expires or --expires-in-days");
  }

  return async (stores, loaded) => {
    const key = await findKey(stores, ref);
    const label = `'${printable(key.name)}' (${key.id})`;
    if (key.source === 'config') {
      throw new CommandError(`the key ${label} is declared in auth.keys of ${loaded.filepath}; change it there (the gateway restores it from there at its next start)`);
    }
    if (key.revokedAt !== null) throw new CommandError(`the key ${label} is revoked; a revoked key cannot be changed`);
    if (patch.name !== undefined && patch.name !== key.name) await checkNameFree(stores, loaded, patch.name, key.id);
    const updated = await stores.keys.update(key.id, patch);
    if (!updated) throw new CommandError(`no key with id '${key.id}'`);
    const at = Date.now();
    if (values.json) return { code: 0, stdout: json(keyView(updated, at)) };
    return { code: 0, stdout: `Updated key ${label}. A running gateway applies it from its next call.\n\n${keyBlock(updated, at)}` };
  };
}

function keysList(values: OptionValues): Run {
  return async (stores) => {
    const now = Date.now();
    const all = await stores.keys.list();
    const shown = values.all ? all : all.filter((k) => k.revokedAt === null);
    if (values.json) return { code: 0, stdout: json({ object: 'list', data: shown.map((k) => keyView(k, now)) }) };
    const hidden = all.length - shown.length;
    const note = hidden > 0 ? `(${hidden} revoked key${hidden === 1 ? '' : 's'} hidden; --all shows them)\n` : '';
    if (shown.length === 0) {
      return { code: 0, stdout: `No keys. Create one with: switchyard keys create --name NAME\n${note}` };
    }
    const rows = shown.map((k) => [
      k.id,
      k.name,
      k.prefix,
      when(k.createdAt),
      k.expiresAt === null ? 'never' : when(k.expiresAt),
      statusOf(k, now),
      `${money(k.spent)} / ${k.budget === null ? '-' : money(k.budget)}`,
      k.models === null ? '*' : k.models.join(','),
    ]);
    return { code: 0, stdout: table(['ID', 'NAME', 'PREFIX', 'CREATED', 'EXPIRES', 'STATUS', 'SPENT / BUDGET', 'MODELS'], rows) + note };
  };
}

function keysShow(ref: string, values: OptionValues): Run {
  return async (stores) => {
    const key = await findKey(stores, ref);
    const now = Date.now();
    return { code: 0, stdout: values.json ? json(keyView(key, now)) : keyBlock(key, now) };
  };
}

function keysRevoke(ref: string, values: OptionValues): Run {
  return async (stores, loaded) => {
    let key = await findKey(stores, ref);
    const already = key.revokedAt !== null || !(await stores.keys.revoke(key.id));
    key = (await stores.keys.get(key.id)) ?? key;
    const label = `'${printable(key.name)}' (${key.id}, ${key.prefix})`;
    const stderr =
      !already && key.source === 'config'
        ? `note: this key is declared in auth.keys of ${loaded.filepath}; remove it there too, or the gateway restores it at its next start\n`
        : undefined;
    if (values.json) return { code: 0, stdout: json({ ...keyView(key, Date.now()), already_revoked: already }), stderr };
    const stdout = already
      ? `Key ${label} was already revoked (${when(key.revokedAt)}).\n`
      : `Revoked key ${label}. A running gateway refuses it from now on.\n`;
    return { code: 0, stdout, stderr };
  };
}

function logs(values: OptionValues, now: number): Run {
  const limit = parseInteger(str(values, 'limit'), 'limit', 1, 1000) ?? 50;
  const status = parseInteger(str(values, 'status'), 'status', 100, 599);
  const { since, until } = timeRange(values, now);
  const keyRef = str(values, 'key');
  const model = str(values, 'model');
  const cursor = str(values, 'cursor');

  return async (stores) => {
    const key = keyRef === undefined ? undefined : await findKey(stores, keyRef);
    const query: RequestLogQuery = { keyId: key?.id, model, status, since, until, limit, cursor };
    let page: { entries: RequestLogEntry[]; nextCursor: string | null };
    try {
      page = await stores.logs.query(query);
    } catch (error) {
      if (error instanceof InvalidCursorError) throw new UsageError(`--cursor '${printable(cursor ?? '')}' is not a cursor this command printed`);
      throw error;
    }
    if (values.json) {
      return { code: 0, stdout: json({ object: 'list', data: page.entries.map(logEntryView), next_cursor: page.nextCursor }) };
    }
    if (page.entries.length === 0) return { code: 0, stdout: 'No requests match.\n' };
    const rows = page.entries.map((e) => [
      when(e.time, true),
      e.requestId,
      e.keyName === null && e.keyPrefix === null ? '-' : `${e.keyName ?? '?'} (${e.keyPrefix ?? '?'})`,
      e.model ?? '-',
      String(e.status),
      e.errorCode ?? '-',
      count(e.promptTokens),
      count(e.completionTokens),
      money(e.cost),
      `${Math.round(e.durationMs)} ms`,
    ]);
    const text = table(['TIME (UTC)', 'REQUEST ID', 'KEY', 'MODEL', 'STATUS', 'ERROR', 'IN TOKENS', 'OUT TOKENS', 'COST', 'DURATION'], rows, [6, 7, 8, 9]);
    // What a translation could not carry, under the table: one line per request that lost something.
    const lossy = page.entries.filter((e) => e.losses && e.losses.length > 0);
    const losses = lossy.length
      ? `\nNot carried across formats:\n${lossy.map((e) => `  ${e.requestId}: ${e.losses!.map(printable).join(', ')}`).join('\n')}\n`
      : '';
    const more = page.nextCursor ? `\nMore: add --cursor ${page.nextCursor} (same filters) for older requests.\n` : '';
    return { code: 0, stdout: text + losses + more };
  };
}

function usage(values: OptionValues, now: number): Run {
  const { since, until } = timeRange(values, now);
  const by = groupBy(str(values, 'by'));
  const keyRef = str(values, 'key');
  const model = str(values, 'model');

  return async (stores) => {
    const key = keyRef === undefined ? undefined : await findKey(stores, keyRef);
    const query: UsageTotalsQuery = { since, until, keyId: key?.id, model, groupBy: by };
    const totals = await stores.usage.totals(query);
    if (values.json) {
      // The admin API's answer, and the time range a relative --since/--until came to.
      const data = totals.map((t) => usageTotalView(t, by));
      return { code: 0, stdout: json({ object: 'list', data, since: iso(since ?? null), until: iso(until ?? null) }) };
    }
    const span = `${since === undefined ? 'all time' : `from ${when(since)}`}${until === undefined ? '' : ` until ${when(until)}`}`;
    const scope = [key ? `key '${key.name}' (${key.id})` : '', model ? `model '${model}'` : ''].filter(Boolean).map(printable).join(', ');
    const heading = `Usage, ${span}${scope ? `, ${scope}` : ''}:\n\n`;
    if (totals.length === 0) return { code: 0, stdout: `${heading}No usage recorded.\n` };
    const headers = [...by.map((g) => g.toUpperCase()), 'REQUESTS', 'PROMPT', 'COMPLETION', 'CACHED', 'CACHE WRITE', 'REASONING', 'COST'];
    const rows = totals.map((t: UsageTotal) => [
      ...by.map((g) => (g === 'key' ? (t.key ? `${t.keyName ?? '?'} (${t.key})` : '(no key)') : g === 'model' ? (t.model ?? '-') : (t.day ?? '-'))),
      String(t.requests),
      String(t.promptTokens),
      String(t.completionTokens),
      String(t.cachedTokens),
      String(t.cacheWriteTokens ?? 0),
      String(t.reasoningTokens),
      money(t.cost),
    ]);
    const numeric = headers.map((_, i) => i).filter((i) => i >= by.length);
    return { code: 0, stdout: heading + table(headers, rows, numeric) };
  };
}

// ---------------------------------------------------------------------------------------------
// Entry points

/**
 * Check an admin command line and return what runs it once the configuration is loaded.
 * Throws UsageError for anything wrong with the arguments.
 */
export function prepareAdmin(positionals: string[], values: OptionValues): Run {
  const [command, sub, ...rest] = positionals;
  const now = Date.now();
  if (command === 'keys') {
    const what = `keys ${sub ?? ''}`.trim();
    switch (sub) {
      case 'create':
        rejectOptions(what, values, ['config', 'json', 'name', 'models', 'rpm', 'tpm', 'max-concurrent', 'budget', 'expires', 'expires-in-days']);
        noMorePositionals(what, rest);
        return keysCreate(values, now);
      case 'list':
        rejectOptions(what, values, ['config', 'json', 'all']);
        noMorePositionals(what, rest);
        return keysList(values);
      case 'show':
        rejectOptions(what, values, ['config', 'json']);
        return keysShow(keyReference(what, rest), values);
      case 'revoke':
        rejectOptions(what, values, ['config', 'json']);
        return keysRevoke(keyReference(what, rest), values);
      case 'update':
        rejectOptions(what, values, ['config', 'json', 'name', 'models', 'rpm', 'tpm', 'max-concurrent', 'budget', 'expires', 'expires-in-days']);
        return keysUpdate(keyReference(what, rest), values, now);
      case undefined:
        throw new UsageError("'keys' needs a subcommand: create, list, show, update or revoke");
      default:
        throw new UsageError(`unknown keys subcommand '${printable(sub)}' (create, list, show, update, revoke)`);
    }
  }
  const args = sub === undefined ? [] : [sub, ...rest];
  if (command === 'logs') {
    rejectOptions('logs', values, ['config', 'json', 'key', 'model', 'status', 'since', 'until', 'limit', 'cursor']);
    noMorePositionals('logs', args);
    return logs(values, now);
  }
  if (command === 'usage') {
    rejectOptions('usage', values, ['config', 'json', 'key', 'model', 'since', 'until', 'by']);
    noMorePositionals('usage', args);
    return usage(values, now);
  }
  throw new UsageError(`unknown command '${printable(command ?? '')}'`);
}

/** Open the configuration's stores, run the command, close them; the exit status. */
export async function runAdmin(run: Run, loaded: LoadedConfig): Promise<number> {
  const { storage, cache } = loaded.config;
  if (storage.url === ':memory:') {
    throw new CommandError(`storage.url in ${loaded.filepath} is ':memory:': keys, logs and usage live only inside the gateway process, out of the CLI's reach`);
  }
  let stores: Stores;
  try {
    stores = openStores({ storage, cache, baseDir: loaded.dir });
  } catch (error) {
    throw new CommandError(`cannot open the store of ${loaded.filepath} (storage.url '${storage.url}'): ${(error as Error).message}`);
  }
  let output: Output;
  try {
    output = await run(stores, loaded);
  } finally {
    await stores.close();
  }
  // `switchyard logs | head` closes the pipe early: that is not an error.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
  });
  if (output.stderr) process.stderr.write(output.stderr);
  process.stdout.write(output.stdout);
  return output.code;
}
