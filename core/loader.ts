import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Ajv } from 'ajv';
import type { LoadedConfig } from '../config/load.js';
import type { GatewayConfig, PluginEntry, ProviderConfig } from '../config/types.js';
import { configuredSecrets, redactWholeSecrets } from './http/upstream.js';
import { checkAgainst, ConfigErrors, type YamlPath } from '../config/validate.js';
import type { GatewayPlugin, JsonSchema, PluginApi, ProviderEnv, ProviderInstance } from './plugin.js';
import type { ProviderRegistry, ProviderTypeRegistry } from './registry.js';
import { OPERATIONS } from './operations.js';
import { notePluginPlace } from './blame.js';

/** The plugins that ship with the gateway, by name, loaded only when named. */
export interface Builtins {
  /** name -> lazy module import */
  readonly plugins: Readonly<Record<string, () => Promise<GatewayPlugin<any>>>>;
  /** The pipeline used when `plugins:` is absent. */
  readonly defaultOrder: readonly string[];
  /** provider type -> built-in plugin that registers it, loaded when a provider uses the type. */
  readonly providerTypes: Readonly<Record<string, string>>;
}

export interface LoadedPlugin {
  readonly name: string;
  readonly version: string;
  /** Where it came from: `built-in`, a package name or a path. */
  readonly source: string;
}

function entryParts(entry: PluginEntry): { name: string; options: Record<string, unknown> } {
  return typeof entry === 'string' ? { name: entry, options: {} } : { name: entry.name, options: { ...(entry.options ?? {}) } };
}

function isPlugin(value: unknown): value is GatewayPlugin {
  const v = value as Partial<GatewayPlugin> | null;
  return Boolean(v && typeof v === 'object' && typeof v.name === 'string' && v.name && typeof v.apply === 'function');
}

/** A module's plugin: its default export, or the module itself. */
function pluginOf(module: Record<string, unknown>): unknown {
  if (isPlugin(module.default)) return module.default;
  if (isPlugin(module)) return module;
  if (module.default && isPlugin((module.default as Record<string, unknown>).default)) return (module.default as Record<string, unknown>).default;
  return module.default ?? module;
}

function resolveLocal(spec: string, baseDir: string): string {
  const target = path.resolve(baseDir, spec);
  if (existsSync(target) && statSync(target).isFile()) return target;
  // A folder or an extension-less path: let Node's resolver find package.json main or index.*.
  const require = createRequire(path.join(baseDir, 'noop.js'));
  try {
    return require.resolve(target);
  } catch {
    for (const candidate of ['index.js', 'index.mjs', 'index.cjs'].map((f) => path.join(target, f))) {
      if (existsSync(candidate)) return candidate;
    }
    for (const ext of ['.js', '.mjs', '.cjs']) if (existsSync(target + ext)) return target + ext;
    throw new Error(
      existsSync(target)
        ? `${target} is a folder with no plugin in it (no package.json "main" or "exports", no index.js, index.mjs or index.cjs)`
        : `no file or folder at ${target}`,
    );
  }
}

/** The folder of package `name` that `file` (its entry point) is in: `…/node_modules/<name>`. */
function packageFolder(file: string, name: string): string {
  const marker = `${path.sep}node_modules${path.sep}${name.split('/').join(path.sep)}`;
  const at = file.lastIndexOf(marker);
  return at === -1 ? path.dirname(file) : file.slice(0, at + marker.length);
}

async function importEntry(name: string, baseDir: string, builtins: Builtins): Promise<{ module: unknown; source: string; place?: string }> {
  const builtin = builtins.plugins[name];
  if (builtin) return { module: await builtin(), source: 'built-in' };
  if (name.startsWith('.') || path.isAbsolute(name)) {
    const file = resolveLocal(name, baseDir);
    if (/\.ts$/.test(file)) throw new Error(`${name} is TypeScript; compile it to JavaScript first (see docs/writing-a-provider.md)`);
    try {
      // A folder's plugin (its index.js) may be several files: the folder; a file alone: itself.
      const place = path.basename(file).startsWith('index.') ? path.dirname(file) : file;
      return { module: await import(pathToFileURL(file).href), source: file, place };
    } catch (error) {
      throw error instanceof SyntaxError ? new SyntaxError(`${error.message}${syntaxErrorPlace(file)}`) : error;
    }
  }
  // An npm package: first as seen from the config file's folder, then from the gateway's own.
  let resolved: string | undefined;
  try {
    resolved = createRequire(path.join(baseDir, 'noop.js')).resolve(name);
  } catch {
    resolved = undefined;
  }
  try {
    const module = resolved ? await import(pathToFileURL(resolved).href) : await import(name);
    return { module, source: name, place: resolved ? packageFolder(resolved, name) : undefined };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
      // Not found: the package itself, or something it imports (then that is what is said).
      const missing = /Cannot find (?:package|module) '([^']+)'/.exec(String((error as Error).message))?.[1];
      const itself = !resolved && (missing === undefined || missing === name || missing.startsWith(`${name}/`));
      if (itself) throw new Error(`'${name}' is not a built-in plugin (${Object.keys(builtins.plugins).join(', ')}) and no installed package has that name`);
      throw new Error(`the package '${name}' is installed but could not be loaded: ${(error as Error).message.split('\n')[0]}`);
    }
    throw error;
  }
}

/**
 * Where a file node could not parse: node's import error does not say (its printed form does,
 * from a hidden field), so `node --check` is asked, once, as the start-up fails. Nothing when
 * the file itself parses: the error is then in a module it imports, or in how the modules link
 * (an import of a name another module does not export), which the message says itself.
 */
function syntaxErrorPlace(file: string): string {
  try {
    execFileSync(process.execPath, ['--check', file], { stdio: 'pipe', timeout: 5000 });
    return '';
  } catch (error) {
    const output = String((error as { stderr?: Buffer }).stderr ?? '');
    const place = output.split('\n').find((line) => line.startsWith(file) && /:\d+$/.test(line));
    return place ? ` (${place})` : '';
  }
}

export interface PluginLoadContext {
  readonly loaded: LoadedConfig;
  readonly builtins: Builtins;
  readonly ajv: Ajv;
  readonly types: ProviderTypeRegistry;
  /** Builds the API handed to one plugin's apply(). */
  apiFor(plugin: GatewayPlugin<any>, options: Record<string, unknown>): PluginApi<any>;
}

/**
 * The credentials a configuration holds, to keep out of every message and log line: the
 * providers' (`apiKey`, a secret key...) and those in plugins' options (a third party's provider
 * may take its key there), by the names of the fields that hold them.
 */
export function secretsOfConfig(config: Pick<GatewayConfig, 'providers' | 'plugins'> & { auth?: Partial<GatewayConfig['auth']> }): string[] {
  const options = (config.plugins ?? []).map((entry) => (typeof entry === 'object' && entry !== null ? ((entry as { options?: unknown }).options ?? {}) : {}));
  // The client keys the file declares are secrets too: a plugin's error may quote a request's key.
  const clientKeys = (config.auth?.keys ?? []).map((entry) => entry.key).filter((key): key is string => typeof key === 'string' && key.length >= 4);
  // The admin key opens every key's record; a header a provider sends whose name says it carries
  // a credential of some back end's own naming (`X-Custom-Auth`) is kept from messages too.
  const adminKey = typeof config.auth?.adminKey === 'string' && config.auth.adminKey.length >= 4 ? [config.auth.adminKey] : [];
  const headerValues = config.providers.flatMap((provider) =>
    Object.entries((provider as { headers?: Record<string, unknown> }).headers ?? {})
      .filter(([name, value]) => CREDENTIAL_HEADER.test(name) && typeof value === 'string' && value.length >= LONG_HEADER_VALUE)
      .map(([, value]) => value as string),
  );
  return [...new Set([...configuredSecrets([...config.providers, ...options]), ...clientKeys, ...adminKey, ...headerValues])];
}

/**
 * A provider header whose name says it carries a credential (`X-Custom-Auth`, `X-Goog-Api-Key`,
 * `Cookie`), and whose value is at least this long, is treated as a secret; others (a beta flag,
 * a referer, a user agent) are words of the back end's own messages.
 */
const LONG_HEADER_VALUE = 16;
const CREDENTIAL_HEADER = /auth|key|secret|token|passw|credential|signature|cookie|session/i;

/** An error's first line, the configuration's credentials redacted (a plugin may have put one in it). */
function firstLine(error: unknown, secrets: readonly string[] = []): string {
  return redactWholeSecrets(String((error as Error)?.message ?? error).split('\n')[0]!, secrets);
}

/**
 * Load every `plugins:` entry in order (or the built-in default order), check each one's
 * options against its schema and apply it; then load the built-in provider plugins that
 * `providers:` needs. Any failure names the entry (`plugins[3]`) and the reason.
 */
export async function loadPlugins(context: PluginLoadContext): Promise<LoadedPlugin[]> {
  const { loaded, builtins } = context;
  const secrets = secretsOfConfig(loaded.config);
  const entries: Array<{ entry: PluginEntry; path: YamlPath }> = loaded.config.plugins
    ? loaded.config.plugins.map((entry, i) => ({ entry, path: ['plugins', i] }))
    : builtins.defaultOrder.map((name) => ({ entry: name, path: ['plugins'] }));
  const done: LoadedPlugin[] = [];

  const applyOne = async (entry: PluginEntry, at: YamlPath) => {
    const { name, options } = entryParts(entry);
    const fail = (problem: string) => new ConfigErrors([loaded.error(at, problem)]);
    let imported: { module: unknown; source: string; place?: string };
    try {
      imported = await importEntry(name, loaded.dir, builtins);
    } catch (error) {
      throw fail(`cannot load plugin '${name}': ${firstLine(error, secrets)}`);
    }
    const plugin = pluginOf(imported.module as Record<string, unknown>);
    if (!isPlugin(plugin)) throw fail(`'${name}' does not export a plugin (an object with name, version and apply(); use definePlugin)`);
    if (typeof plugin.version !== 'string' || !plugin.version) throw fail(`plugin '${plugin.name}' has no version`);
    const clash = done.find((p) => p.name === plugin.name);
    if (clash) throw fail(`plugin '${plugin.name}' is loaded twice (also from ${clash.source})`);
    for (const dependency of plugin.dependencies ?? []) {
      if (!done.some((p) => p.name === dependency)) {
        throw fail(`plugin '${plugin.name}' needs plugin '${dependency}' listed before it`);
      }
    }
    const optionsPath = [...at, 'options'];
    if (plugin.optionsSchema) {
      let problems;
      try {
        problems = checkAgainst(context.ajv, plugin.optionsSchema as JsonSchema, options, optionsPath);
      } catch (error) {
        throw fail(`plugin '${plugin.name}' has an invalid optionsSchema: ${firstLine(error, secrets)}`);
      }
      if (problems.length > 0) throw new ConfigErrors(problems.map((p) => loaded.error(p.path, p.problem)));
    } else if (Object.keys(options).length > 0) {
      throw fail(`plugin '${plugin.name}' takes no options`);
    }
    try {
      await plugin.apply(context.apiFor(plugin, options));
    } catch (error) {
      if (error instanceof ConfigErrors) throw error;
      throw fail(`plugin '${plugin.name}' failed to start: ${firstLine(error, secrets)}`);
    }
    done.push({ name: plugin.name, version: plugin.version, source: imported.source });
    // Where its code is, so that a failure in it is logged with its name (see pluginBlamed).
    if (imported.place) notePluginPlace(imported.place, plugin.name);
  };

  for (const { entry, path: at } of entries) await applyOne(entry, at);

  // Provider types that `providers:` uses and no listed plugin registered: load the built-in.
  for (const [i, provider] of loaded.config.providers.entries()) {
    if (context.types.has(provider.type)) continue;
    const builtin = builtins.providerTypes[provider.type];
    if (builtin && !done.some((p) => p.name === builtin)) await applyOne(builtin, ['providers', i, 'type']);
  }
  return done;
}

/** Check each `providers:` entry against its type's schema and create the instances. */
export async function createProviders(
  loaded: LoadedConfig,
  ajv: Ajv,
  types: ProviderTypeRegistry,
  registry: ProviderRegistry,
  env: ProviderEnv,
  builtinTypes: readonly string[] = [],
): Promise<ProviderInstance[]> {
  const created: ProviderInstance[] = [];
  const problems = [];
  for (const [i, provider] of loaded.config.providers.entries()) {
    const type = types.get(provider.type);
    if (!type) {
      const known = [...new Set([...builtinTypes, ...types.names()])].sort();
      problems.push(loaded.error(['providers', i, 'type'], `unknown provider type '${provider.type}' (known: ${known.join(', ') || 'none'})`));
      continue;
    }
    const schema = providerSchema(type.configSchema);
    let found;
    try {
      found = checkAgainst(ajv, schema, provider, ['providers', i]);
    } catch (error) {
      problems.push(loaded.error(['providers', i, 'type'], `provider type '${provider.type}' has an invalid configSchema: ${firstLine(error)}`));
      continue;
    }
    for (const p of found) problems.push(loaded.error(p.path, p.problem));
  }
  if (problems.length > 0) throw new ConfigErrors(problems);
  for (const [i, provider] of loaded.config.providers.entries()) {
    let instance: ProviderInstance;
    try {
      instance = await types.get(provider.type)!.create(provider as ProviderConfig, env);
    } catch (error) {
      throw new ConfigErrors([loaded.error(['providers', i], `provider '${provider.id}' could not be created: ${firstLine(error, secretsOfConfig(loaded.config))}`)]);
    }
    const wrong = wrongInstance(instance, provider.id);
    if (wrong) throw new ConfigErrors([loaded.error(['providers', i], `provider type '${provider.type}' made provider '${provider.id}' wrongly: ${wrong}`)]);
    registry.add(instance);
    created.push(instance);
  }
  return created;
}

/**
 * What is wrong with what a provider type's `create()` returned, if anything: a third party's
 * mistake (a string for `models`, a handler that is not a function, an operation with a typo) is
 * said at start, naming the provider, not found on the first call as a 500.
 */
function wrongInstance(instance: unknown, id: string): string | undefined {
  if (instance === null || typeof instance !== 'object') return `create() returned ${instance === null ? 'null' : typeof instance}, not a provider object`;
  const made = instance as Partial<ProviderInstance>;
  if (made.id !== id) return `its id is ${JSON.stringify(made.id)}, not the entry's '${id}' (create() should return config.id)`;
  if (typeof made.type !== 'string') return 'its type is not a string';
  if (!Array.isArray(made.models) || made.models.some((model) => typeof model !== 'string')) return 'models is not a list of model names';
  const operations = made.operations as Record<string, unknown> | undefined;
  if (operations === null || typeof operations !== 'object') return 'it has no operations object';
  for (const [name, handler] of Object.entries(operations)) {
    if (!(OPERATIONS as readonly string[]).includes(name)) return `operations.${name} is not an operation (known: ${OPERATIONS.join(', ')})`;
    if (handler !== undefined && typeof handler !== 'function') return `operations.${name} is not a function`;
  }
  return undefined;
}

const schemaCache = new WeakMap<object, JsonSchema>();
const COMMON_PROVIDER_FIELDS = {
  id: { type: 'string' },
  type: { type: 'string' },
  models: { type: 'array', items: { type: 'string' } },
  /** Enforced by the core for every provider type (connectMs by the provider's HTTP client). */
  timeouts: {
    type: 'object',
    additionalProperties: false,
    properties: {
      // Node's timers hold at most 2^31 - 1 ms (about 24.8 days); past it they fire at once.
      connectMs: { type: 'integer', minimum: 1, maximum: 2147483647 },
      firstByteMs: { type: 'integer', minimum: 1, maximum: 2147483647 },
      idleMs: { type: 'integer', minimum: 1, maximum: 2147483647 },
      totalMs: { type: 'integer', minimum: 1, maximum: 2147483647 },
    },
  },
};

/** A type's schema plus the fields every provider entry has. */
function providerSchema(own: JsonSchema | undefined): JsonSchema {
  const key = own ?? COMMON_PROVIDER_FIELDS;
  let schema = schemaCache.get(key);
  if (!schema) {
    schema = {
      additionalProperties: false,
      ...(own ?? {}),
      type: 'object',
      properties: { ...COMMON_PROVIDER_FIELDS, ...((own?.properties as object | undefined) ?? {}) },
    };
    schemaCache.set(key, schema);
  }
  return schema;
}
