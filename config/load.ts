import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { cosmiconfig } from 'cosmiconfig';
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Alias, type Document } from 'yaml';
import { credentialProblems } from './credentials.js';
import type { GatewayConfig } from './types.js';
import { checkAgainst, ConfigError, ConfigErrors, createConfigAjv, type YamlPath } from './validate.js';

export const CONFIG_FILE_NAMES = ['gateway.config.yaml', 'gateway.config.yml', 'gateway.config.json'];

/** A validated configuration and the means to point at a place in its file. */
export interface LoadedConfig {
  config: GatewayConfig;
  /** Absolute path of the file read. */
  filepath: string;
  /** Directory that `./relative` plugin paths and storage files are resolved against. */
  dir: string;
  /** The YAML line of a path, when it is in the file. */
  lineOf(path: YamlPath): number | undefined;
  /** A ConfigError located at `path`. */
  error(path: YamlPath, problem: string): ConfigError;
}

export interface LoadOptions {
  /** An explicit file (`--config`); otherwise SWITCHYARD_CONFIG, otherwise a search of `cwd`. */
  file?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /**
   * For commands that only use the stores (keys, logs, usage): a `${VAR}` left unset in a
   * credential they never use is no error there: inside `providers:`, in `auth.adminKey`, or in
   * an `auth.keys[].key` (whose name they do use).
   */
  credentialVariablesOptional?: boolean;
}

interface ParsedFile {
  data: unknown;
  doc?: Document.Parsed;
  lines?: LineCounter;
}

const schemaUrl = new URL('../../config/gateway.schema.json', import.meta.url);
let configSchema: Record<string, unknown> | undefined;
function loadSchema(): Record<string, unknown> {
  configSchema ??= JSON.parse(readFileSync(schemaUrl, 'utf8')) as Record<string, unknown>;
  return configSchema;
}

function parseYaml(filepath: string, content: string, language: 'YAML' | 'JSON' = 'YAML'): ParsedFile {
  const lines = new LineCounter();
  const doc = parseDocument(content, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    const first = doc.errors[0]!;
    const pos = lines.linePos(first.pos[0]);
    const reason = first.message.split('\n')[0];
    // Only a duplicate key has a trustworthy path: in a broken document, what looks like a key
    // may be part of a value (a secret cut at a colon), so other errors stay at the top level.
    const at = first.code === 'DUPLICATE_KEY' ? pathAt(doc.contents, first.pos[0], []) : [];
    throw new ConfigErrors([new ConfigError(filepath, at, pos.line, `${language} syntax error at column ${pos.col}: ${reason}`)]);
  }
  // An unknown tag (`!vault x`, or a value that begins with !) would be taken as the text after
  // it; the warning quotes the line, which may hold a secret: say where, not what.
  const tag = doc.warnings.find((warning) => warning.code === 'TAG_RESOLVE_FAILED');
  if (tag) {
    const problem = 'unknown YAML tag (a value starting with !); quote the value if the ! is part of it';
    throw new ConfigErrors([new ConfigError(filepath, taggedPath(doc, tag.pos[1]), lines.linePos(tag.pos[0]).line, problem)]);
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 100 });
  } catch (error) {
    // toJS throws for an alias without an anchor and for alias bombs. Its message quotes the
    // alias (a value starting with `*`, which may well be a password): say where, not what.
    const { alias, at } = unresolvedAlias(doc) ?? {};
    const line = alias?.range ? lines.linePos(alias.range[0]).line : undefined;
    const problem = alias
      ? 'YAML alias (a value starting with *) has no anchor (&name) before it; quote the value if it is not meant as an alias'
      : /alias count/i.test(String((error as Error)?.message))
        ? 'YAML aliases expand too many times (more than 100)'
        : 'the YAML document cannot be read';
    throw new ConfigErrors([new ConfigError(filepath, at ?? [], line, problem)]);
  }
  return { data: data ?? {}, doc, lines };
}

/** The YAML path of the deepest key or item whose text holds `offset` (for syntax errors). */
function pathAt(node: unknown, offset: number, at: Array<string | number>): Array<string | number> {
  const holds = (n: unknown) => {
    const range = (n as { range?: [number, number, number] } | null)?.range;
    // A node's end is exclusive: the offset where it ends is where the next one begins.
    return Boolean(range && range[0] <= offset && offset < range[2]);
  };
  if (isMap(node)) {
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? pair.key.value : undefined;
      if (typeof key !== 'string' && typeof key !== 'number') continue;
      if (holds(pair.key)) return [...at, String(key)];
      if (holds(pair.value)) return pathAt(pair.value, offset, [...at, String(key)]);
    }
  } else if (isSeq(node)) {
    for (const [i, item] of node.items.entries()) {
      if (holds(item)) return pathAt(item, offset, [...at, i]);
    }
  }
  return at;
}

/**
 * The YAML path of the node a tag that ends at `tagEnd` belongs to: the first node whose text
 * begins there or after (an empty value's text has no length, so it is found by its place in the
 * tree, not by an offset inside it).
 */
function taggedPath(doc: Document.Parsed, tagEnd: number): Array<string | number> {
  let best: { start: number; at: Array<string | number> } | undefined;
  visit(doc, {
    Node(_, node, ancestors) {
      const start = (node as { range?: [number, number, number] }).range?.[0];
      if (start === undefined || start < tagEnd || (best && start >= best.start)) return undefined;
      best = { start, at: pathOf([...ancestors, node]) };
      return undefined;
    },
  });
  return best?.at ?? [];
}

/** The YAML path of the last node of `chain` (a node and the ancestors visit gave it). */
function pathOf(chain: unknown[]): Array<string | number> {
  const at: Array<string | number> = [];
  for (let k = 0; k < chain.length - 1; k++) {
    const parent = chain[k];
    const child = chain[k + 1];
    if (isPair(parent) && child === parent.value) at.push(isScalar(parent.key) ? String(parent.key.value) : String(parent.key));
    else if (isSeq(parent)) at.push(parent.items.indexOf(child as never));
  }
  return at;
}

/** The first alias without an anchor, and its YAML path. */
function unresolvedAlias(doc: Document.Parsed): { alias: Alias; at: Array<string | number> } | undefined {
  let found: { alias: Alias; at: Array<string | number> } | undefined;
  visit(doc, {
    Alias(_, node, ancestors) {
      if (node.resolve(doc)) return undefined;
      found = { alias: node, at: pathOf([...ancestors, node]) };
      return visit.BREAK;
    },
  });
  return found;
}

/**
 * Parse a file into plain data. JSON files go through the YAML parser too (JSON is YAML 1.2):
 * its messages give a line and column and never quote the text (JSON.parse's do, and the text
 * around a mistake is as likely as not a secret), and lines are known for later errors.
 */
function readConfigFile(filepath: string, content: string): ParsedFile {
  return parseYaml(filepath, content, /\.json$/i.test(filepath) ? 'JSON' : 'YAML');
}

// `$$`, a well-formed reference, or (last) any other `${`, which is a mistake worth reporting.
const ENV_PATTERN = /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{/g;

/**
 * Whether `path` is a credential the store commands never use: anything under `providers:`,
 * `auth.adminKey`, or a client key's secret. An unset one of the last kind is given a stand-in
 * (its own path, so two never look like one secret) so that the key's entry still checks.
 */
function unusedCredential(path: ReadonlyArray<string | number>, data: Record<string, unknown>): boolean {
  if (path[0] === 'providers') return true;
  if (path[0] !== 'auth') return false;
  if (path[1] === 'adminKey' && path.length === 2) {
    (data.auth as Record<string, unknown>).adminKey = '';
    return true;
  }
  if (path[1] === 'keys' && typeof path[2] === 'number' && path[3] === 'key' && path.length === 4) {
    const entry = ((data.auth as Record<string, unknown>).keys as Array<Record<string, unknown>>)[path[2]]!;
    entry.key = `(unset: auth.keys[${path[2]}].key)`;
    return true;
  }
  return false;
}

/** A `${...}` that could not be substituted: `unset` for a variable the environment lacks, else a malformed reference. */
interface EnvProblem {
  path: YamlPath;
  problem: string;
  unset?: boolean;
}

/**
 * Replace `${VAR}` and `${VAR:-default}` in every string of the tree (`$$` is a literal `$`).
 * A `${VAR}` that is unset and has no default is an error at that string's path; the value of
 * a variable is never part of a message.
 */
export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv, path: Array<string | number>, problems: EnvProblem[], within: Set<object> = new Set()): unknown {
  if (typeof value === 'string') {
    if (!value.includes('$')) return value;
    return value.replace(ENV_PATTERN, (match, name: string | undefined, fallback: string | undefined) => {
      if (match === '$$') return '$';
      if (name === undefined) {
        // `${VAR-x}`, `${VAR:?x}`, `${ VAR }`, an unclosed `${`...: left alone it would be used
        // literally (as an API key, say). Not quoted back: what follows may be a secret default.
        problems.push({
          path: [...path],
          problem: 'has a ${ that is not a variable reference: write ${NAME} or ${NAME:-default} (and $${ for a literal ${)',
        });
        return match;
      }
      if (fallback?.includes('${')) {
        // `${A:-${B}}`: a default is text, not another reference (read as one it would end at the
        // inner `}`, leaving the outer one in the value).
        problems.push({ path: [...path], problem: 'has a ${ inside a default (${NAME:-${OTHER}} is not supported): give the default as plain text' });
        return match;
      }
      const found = env[name!];
      if (fallback !== undefined) return found === undefined || found === '' ? fallback : found;
      if (found === undefined) {
        problems.push({ path: [...path], unset: true, problem: `environment variable ${name} is not set and has no default (write \${${name}:-default} to give one)` });
        return '';
      }
      return found;
    });
  }
  if (value && typeof value === 'object') {
    // A YAML alias inside its own anchor (`a: &x {b: *x}`) makes a tree without end.
    if (within.has(value)) {
      problems.push({ path: [...path], problem: 'refers to a mapping or list it is itself inside (a YAML alias within its own anchor)' });
      return undefined;
    }
    within.add(value);
    try {
      if (Array.isArray(value)) return value.map((item, i) => substituteEnv(item, env, [...path, i], problems, within));
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) {
        // An own property named __proto__ (so the unknown-key check names it), not the object's prototype.
        Object.defineProperty(out, key, { value: substituteEnv(item, env, [...path, key], problems, within), enumerable: true, writable: true, configurable: true });
      }
      return out;
    } finally {
      within.delete(value);
    }
  }
  return value;
}

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `25mb` -> 26214400; numbers are bytes already. */
export function parseSize(value: number | string): number {
  if (typeof value === 'number') return value;
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!match) throw new Error(`not a size: ${value}`);
  return Math.floor(Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()]!);
}

async function findFile(options: LoadOptions): Promise<{ filepath: string; parsed: ParsedFile }> {
  const cwd = options.cwd ?? process.cwd();
  const env = options.env ?? process.env;
  const explicit = options.file ?? env.SWITCHYARD_CONFIG;
  let parsed: ParsedFile | undefined;
  const loader = (filepath: string, content: string) => {
    parsed = readConfigFile(filepath, content);
    return parsed.data;
  };
  const explorer = cosmiconfig('switchyard', {
    searchPlaces: CONFIG_FILE_NAMES,
    searchStrategy: 'none',
    // An empty file is a valid configuration (every default), found like any other.
    ignoreEmptySearchPlaces: false,
    loaders: { '.yaml': loader, '.yml': loader, '.json': loader, noExt: loader },
    cache: false,
  });
  try {
    if (explicit) {
      // A named file is read whatever its extension (`/etc/switchyard/gateway.conf`): YAML,
      // or JSON when it ends in .json. cosmiconfig would refuse an extension it has no loader for.
      const filepath = path.resolve(cwd, explicit);
      const content = await readFile(filepath, 'utf8');
      if (content.trim() === '') return { filepath, parsed: { data: {} } };
      return { filepath, parsed: readConfigFile(filepath, content) };
    }
    const result = await explorer.search(cwd);
    if (result?.isEmpty) return { filepath: result.filepath, parsed: { data: {} } };
    if (!result || !parsed) {
      throw new ConfigErrors([
        // Named by the folder searched, not by a file that is not there.
        new ConfigError(cwd, [], undefined, `no configuration file found (looked for ${CONFIG_FILE_NAMES.join(', ')} here; pass --config PATH or set SWITCHYARD_CONFIG)`),
      ]);
    }
    return { filepath: result.filepath, parsed };
  } catch (error) {
    if (error instanceof ConfigErrors) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    const file = explicit ? path.resolve(cwd, explicit) : cwd;
    const problem = code === 'ENOENT' ? 'file not found' : code === 'EISDIR' ? 'is a directory, not a file' : (error as Error).message;
    throw new ConfigErrors([new ConfigError(file, [], undefined, problem)]);
  }
}

function valueLine(parsed: ParsedFile) {
  return (yamlPath: YamlPath): number | undefined => {
    if (!parsed.doc || !parsed.lines) return undefined;
    // Walk down as far as the path exists; the deepest node found gives the line.
    for (let depth = yamlPath.length; depth >= 0; depth--) {
      const node = parsed.doc.getIn(yamlPath.slice(0, depth), true) as { range?: [number, number, number] } | undefined;
      if (node && (isMap(node) || isSeq(node) || isScalar(node)) && node.range) {
        return parsed.lines.linePos(node.range[0]).line;
      }
    }
    return undefined;
  };
}

function keyLine(parsed: ParsedFile, yamlPath: YamlPath): number | undefined {
  // An unknown key has no value node of its own in the data path sense; find the pair's key.
  if (!parsed.doc || !parsed.lines || yamlPath.length === 0) return undefined;
  const parent = parsed.doc.getIn(yamlPath.slice(0, -1), true);
  const last = yamlPath[yamlPath.length - 1];
  if (parent && isMap(parent)) {
    for (const pair of parent.items) {
      const key = pair.key as { value?: unknown; range?: [number, number, number] } | null;
      if (key && isScalar(key) && key.value === last && key.range) return parsed.lines.linePos(key.range[0]).line;
    }
  }
  return undefined;
}

/**
 * Find, read, substitute and validate the configuration. Throws ConfigErrors whose every line
 * names the file, the YAML path and what is wrong.
 */
export async function loadConfig(options: LoadOptions = {}): Promise<LoadedConfig> {
  const env = options.env ?? process.env;
  const { filepath, parsed } = await findFile(options);
  const valueLineOf = valueLine(parsed);
  const lineOf = (p: YamlPath) => keyLine(parsed, p) ?? valueLineOf(p);
  const error = (p: YamlPath, problem: string) => new ConfigError(filepath, p, lineOf(p), problem);

  if (parsed.data === null || typeof parsed.data !== 'object' || Array.isArray(parsed.data)) {
    throw new ConfigErrors([error([], 'the file must hold a mapping (key: value pairs) at the top level')]);
  }
  const envProblems: EnvProblem[] = [];
  const data = substituteEnv(parsed.data, env, [], envProblems) as Record<string, unknown>;
  // (A malformed `${` is reported wherever it is: it is a mistake in the file, not in the shell.)
  const unset = options.credentialVariablesOptional ? envProblems.filter((p) => !p.unset || !unusedCredential(p.path, data)) : envProblems;
  if (unset.length > 0) throw new ConfigErrors(unset.map((p) => error(p.path, p.problem)));

  // An empty value (`port:` with nothing after it) is null, which ajv's type coercion would
  // quietly turn into 0, '' or false (port 0 is a random port). Say so instead.
  const empty = nullPaths(data, []);
  if (empty.length > 0) {
    throw new ConfigErrors(empty.map((p) => error(p, 'has no value (give it one, or remove the key to use the default)')));
  }

  const ajv = createConfigAjv();
  const problems = checkAgainst(ajv, loadSchema(), data, []);
  if (problems.length > 0) throw new ConfigErrors(problems.map((p) => error(p.path, p.problem)));

  const config = data as unknown as GatewayConfig & { server: { bodyLimit: number | string; answerMemoryLimit: number | string } };
  config.server.bodyLimit = parseSize(config.server.bodyLimit);
  if (config.server.bodyLimit < 1) throw new ConfigErrors([error(['server', 'bodyLimit'], 'must be at least 1 byte')]);
  config.server.answerMemoryLimit = parseSize(config.server.answerMemoryLimit);
  if (config.server.answerMemoryLimit < 1) throw new ConfigErrors([error(['server', 'answerMemoryLimit'], 'must be at least 1 byte')]);
  crossCheck(config, error);
  return { config: config as GatewayConfig, filepath, dir: path.dirname(filepath), lineOf, error };
}

function nullPaths(value: unknown, at: Array<string | number>): Array<Array<string | number>> {
  if (value === null) return [at];
  if (Array.isArray(value)) return value.flatMap((item, i) => nullPaths(item, [...at, i]));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([key, item]) => nullPaths(item, [...at, key]));
  return [];
}

/** Rules a schema cannot say: unique ids, targets naming known providers. */
function crossCheck(config: GatewayConfig, error: (p: YamlPath, problem: string) => ConfigError): void {
  const problems: ConfigError[] = [];
  const ids = new Map<string, number>();
  config.providers.forEach((provider, i) => {
    if (ids.has(provider.id)) problems.push(error(['providers', i, 'id'], `duplicate provider id '${provider.id}' (also providers[${ids.get(provider.id)}])`));
    else ids.set(provider.id, i);
    for (const { path: at, problem } of credentialProblems(provider as unknown as Record<string, unknown>)) problems.push(error(['providers', i, ...at], problem));
  });
  const names = new Set<string>();
  config.models.forEach((model, i) => {
    if (names.has(model.name)) problems.push(error(['models', i, 'name'], `duplicate model name '${model.name}'`));
    names.add(model.name);
    model.targets.forEach((target, j) => {
      if (!ids.has(target.provider)) problems.push(error(['models', i, 'targets', j, 'provider'], `unknown provider id '${target.provider}'`));
    });
  });
  config.models.forEach((model, i) => {
    (model.fallbacks ?? []).forEach((fallback, j) => {
      const known = names.has(fallback) || config.providers.some((p) => p.models.includes(fallback));
      if (!known) problems.push(error(['models', i, 'fallbacks', j], `unknown model '${fallback}'`));
    });
  });
  // Drivers the schema names for the contract's sake that this version does not have yet: refused
  // here, so `check` says so as `start` would.
  if (config.storage.driver !== 'sqlite') problems.push(error(['storage', 'driver'], `'${config.storage.driver}' is not available in this version; use sqlite`));
  // A database URL given to the SQLite driver would become a file named after it (its password in the path).
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(config.storage.url) && !/^sqlite:/i.test(config.storage.url)) {
    problems.push(error(['storage', 'url'], 'the sqlite driver takes a file path or :memory:, not a URL'));
  }
  if (config.cache.driver !== 'memory') problems.push(error(['cache', 'driver'], `'${config.cache.driver}' is not available in this version; use memory`));
  const keyNames = new Set<string>();
  const secrets = new Map<string, string>();
  config.auth.keys.forEach((key, i) => {
    if (keyNames.has(key.name)) problems.push(error(['auth', 'keys', i, 'name'], `duplicate key name '${key.name}'`));
    keyNames.add(key.name);
    // One secret, two keys: which one a call was made with could not be told (the secret itself is not quoted).
    const twin = secrets.get(key.key);
    if (twin !== undefined) problems.push(error(['auth', 'keys', i, 'key'], `the same secret as auth.keys '${twin}'`));
    else secrets.set(key.key, key.name);
    if (config.auth.adminKey && key.key === config.auth.adminKey) {
      problems.push(error(['auth', 'keys', i, 'key'], 'must differ from auth.adminKey (a client key must never open the admin API)'));
    }
  });
  if (problems.length > 0) throw new ConfigErrors(problems);
}
