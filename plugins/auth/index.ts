import { createHash, timingSafeEqual } from 'node:crypto';
import { definePlugin, GatewayError, modelAllowed, type CallerKey, type PluginApi, type RequestContext } from '../../core/index.js';
import { hashSecret, isPromise, secretPrefix, type KeyRecord, type NewKey } from '../../core/store/index.js';
import type { FileKeyConfig } from '../../config/types.js';

const PLUGIN_NAME = 'auth';

export interface AuthOptions {
  /**
   * `when-no-keys` (default): while no key was ever made (file, CLI, admin API) the gateway is
   * open and says so at start-up; the first key closes it for good. `never`: always a key.
   */
  anonymous: 'when-no-keys' | 'never';
}

/** The client's key: `Authorization: Bearer`, then the format's own headers and query names. */
export function presentedKey(ctx: Pick<RequestContext, 'headers' | 'query' | 'keyHeaders' | 'keyQuery'>): string | undefined {
  const authorization = ctx.headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    if (match) return match[1]!.trim();
  }
  for (const name of ctx.keyHeaders ?? []) {
    const value = ctx.headers[name];
    if (typeof value !== 'string' || !value.trim()) continue;
    // The header given twice, which node joins with a comma (a proxy that adds the key a client
    // already sent): the same key twice is that key; two different ones are neither.
    const [first, ...others] = value.split(',').map((part) => part.trim());
    return others.every((other) => other === first) ? first : value.trim();
  }
  for (const name of ctx.keyQuery ?? []) {
    const value = ctx.query[name];
    if (typeof value === 'string' && value.trim()) return value.trim();
    // The same key given twice (`?key=K&key=K`, a client that adds it to a URL that had it): that
    // key; two different ones say nothing for sure.
    if (Array.isArray(value) && value.length > 0) {
      const first = String(value[0]).trim();
      if (first && value.every((other) => String(other).trim() === first)) return first;
    }
  }
  return undefined;
}

/** `auth.keys` entries as the key store takes them. */
export function configKeys(keys: readonly FileKeyConfig[]): NewKey[] {
  return keys.map((k) => ({
    name: k.name,
    secret: k.key,
    expiresAt: k.expires ? Date.parse(k.expires) : null,
    models: k.models ?? null,
    rpm: k.rpm ?? null,
    tpm: k.tpm ?? null,
    maxConcurrent: k.maxConcurrent ?? null,
    budget: k.budget ?? null,
    source: 'config',
  }));
}

function callerOf(record: KeyRecord): CallerKey {
  return {
    id: record.id,
    name: record.name,
    prefix: record.prefix,
    models: record.models ?? undefined,
    rpm: record.rpm ?? undefined,
    tpm: record.tpm ?? undefined,
    maxConcurrent: record.maxConcurrent ?? undefined,
    budget: record.budget ?? undefined,
  };
}

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/** Secrets longer than this are hashed every time (a memo of them could hold a lot of memory). */
const MEMO_SECRET_LENGTH = 256;
/** At most this many secrets are remembered; past it the memo starts again (unknown secrets must not grow memory). */
const MEMO_SIZE = 4096;

/**
 * The hash a presented secret is looked up by, remembered for the secrets clients keep sending
 * (hashing is most of what checking a key costs). Only the hash is remembered: the key record is
 * still read through the key store on every request, so a revoked, changed or expired key is
 * refused as soon as the store knows. The memo is never logged or shown.
 */
export class SecretHashes {
  private readonly hashes = new Map<string, string>();

  constructor(private readonly size = MEMO_SIZE) {}

  of(secret: string): string {
    if (secret.length > MEMO_SECRET_LENGTH) return hashSecret(secret);
    let hash = this.hashes.get(secret);
    if (hash === undefined) {
      hash = hashSecret(secret);
      if (this.hashes.size >= this.size) this.hashes.clear();
      this.hashes.set(secret, hash);
    }
    return hash;
  }

  get memoized(): number {
    return this.hashes.size;
  }
}

/**
 * API keys from the key store (auth.keys in the file, the CLI, the admin API), looked up by
 * hash; revoked and expired keys refused with their own codes; each key's allowed models; the
 * admin key for `/admin/*`, which no client key can open.
 */
/**
 * Keys whose limits no plugin of this pipeline enforces (a `plugins:` list without `rate-limit`,
 * or without `metering` for budgets) are told at start: the operator set a limit and would
 * otherwise believe it holds.
 */
async function warnUnenforcedLimits(api: PluginApi<AuthOptions>): Promise<void> {
  const listed = api.config.plugins?.map((entry) => (typeof entry === 'string' ? entry : entry.name));
  if (!listed) return; // the default pipeline has both
  let keys: KeyRecord[];
  try {
    keys = await api.stores.keys.list();
  } catch (error) {
    api.logger.warn('could not list the keys to check their limits are enforced', { error: String(error) });
    return;
  }
  const now = Date.now();
  const live = keys.filter((k) => k.revokedAt === null && (k.expiresAt === null || k.expiresAt > now));
  const unenforced = (plugin: string, limits: string, has: (k: KeyRecord) => boolean) => {
    if (listed.includes(plugin)) return;
    const names = live.filter(has).map((k) => k.name);
    if (names.length === 0) return;
    api.logger.warn(`keys with ${limits} set are not limited: '${plugin}' is not in plugins:`, { keys: names.slice(0, 20), count: names.length });
  };
  unenforced('rate-limit', 'rpm, tpm or maxConcurrent', (k) => k.rpm !== null || k.tpm !== null || k.maxConcurrent !== null);
  unenforced('metering', 'a budget', (k) => k.budget !== null);
}

export default definePlugin<AuthOptions>({
  name: PLUGIN_NAME,
  version: '0.2.0',
  description: 'API keys: Bearer (and format-specific headers), revocation, expiry, allowed models; the admin key.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { anonymous: { enum: ['when-no-keys', 'never'], default: 'when-no-keys' } },
  },
  apply(api) {
    // An empty adminKey (`${SWITCHYARD_ADMIN_KEY:-}` with the variable unset) leaves the admin API off.
    const adminHash = api.config.auth.adminKey ? sha(api.config.auth.adminKey) : undefined;
    const mayBeOpen = api.options.anonymous === 'when-no-keys';
    const hashes = new SecretHashes();

    api.hooks.setup.tapPromise(PLUGIN_NAME, async () => {
      await api.stores.keys.syncConfigKeys(configKeys(api.config.auth.keys));
    });
    api.hooks.ready.tapPromise(PLUGIN_NAME, async () => {
      if (mayBeOpen && (await api.stores.keys.count()) === 0) {
        api.logger.warn('no API keys exist yet: every request is accepted until the first key is created (switchyard keys create).');
      }
      await warnUnenforcedLimits(api);
    });

    /** The caller's key checked, once the store answered whether any key exists and which one this is. */
    const admit = (ctx: RequestContext, secret: string | undefined, open: boolean, record: KeyRecord | undefined): void => {
      // Open, the gateway would serve any web page the operator's browser has open: a page may
      // send a JSON body without a type and no preflight (a "simple" request), or reach it by a
      // name of its own that resolves here (DNS rebinding). Browsers say where a call comes from
      // (Origin, on every POST); other clients do not.
      if (open && !record && ctx.headers.origin !== undefined) throw new GatewayError('open_to_web_pages');
      if (secret === undefined) {
        if (open) return;
        throw new GatewayError('missing_api_key');
      }
      if (!record) {
        if (open) return;
        throw new GatewayError('invalid_api_key', { params: { keyPrefix: secretPrefix(secret) } });
      }
      // Named in the logs even when refused: an operator sees a revoked key still in use.
      ctx.key = callerOf(record);
      if (record.revokedAt !== null) throw new GatewayError('revoked_api_key');
      if (record.expiresAt !== null && record.expiresAt <= Date.now()) throw new GatewayError('expired_api_key');
    };

    // Synchronous while the key store answers from memory (no promise per request); a store
    // that answers with promises is awaited.
    api.hooks.onRequest.tap(PLUGIN_NAME, (ctx) => {
      if (ctx.access === 'admin') {
        const presented = presentedKey({ ...ctx, keyHeaders: [], keyQuery: [] });
        if (!adminHash) throw new GatewayError('admin_disabled');
        if (!presented || !timingSafeEqual(sha(presented), adminHash)) throw new GatewayError('admin_key_required');
        ctx.adminVerified = true;
        return undefined;
      }
      const keys = api.stores.keys;
      const secret = presentedKey(ctx);
      // Open only while no key was ever made: revoking the last key never opens the gateway.
      const count = mayBeOpen ? keys.count() : 1;
      const record = secret === undefined ? undefined : keys.findByHash(hashes.of(secret));
      if (isPromise(count) || isPromise(record)) {
        return Promise.all([count, record]).then(([n, found]) => admit(ctx, secret, n === 0, found));
      }
      admit(ctx, secret, count === 0, record);
      return undefined;
    });

    api.hooks.validate.tap(PLUGIN_NAME, (ctx, call) => {
      // No model (none given, or one that is not a name): a malformed request, which validation
      // answers (400 naming the field), not a model this key may not use; no back end serves ''.
      if (ctx.key && call.model !== '' && !modelAllowed(ctx.key.models, call.model)) {
        throw new GatewayError('model_not_allowed', { params: { model: call.model }, param: 'model' });
      }
    });
  },
});
