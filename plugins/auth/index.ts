import { createHash } from 'node:crypto';
import { definePlugin, GatewayError, modelAllowed, type CallerKey, type RequestContext } from '../../core/index.js';
import { keyPrefix } from '../../core/logger.js';

const PLUGIN_NAME = 'auth';

export interface AuthOptions {
  /**
   * `when-no-keys` (default): while no key is configured at all the gateway is open (and says so
   * at start-up); `never`: every call needs a key.
   */
  anonymous: 'when-no-keys' | 'never';
}

interface StoredKey extends CallerKey {
  expiresAt?: number;
}

export function hashKey(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** The client's key: `Authorization: Bearer`, then the format's own headers and query names. */
export function presentedKey(ctx: RequestContext): string | undefined {
  const authorization = ctx.headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    if (match) return match[1]!.trim();
  }
  for (const name of ctx.keyHeaders ?? []) {
    const value = ctx.headers[name];
    if (typeof value === 'string' && value.trim()) return value.trim();
  }
  for (const name of ctx.keyQuery ?? []) {
    const value = ctx.query[name];
    if (typeof value === 'string' && value.trim()) return value.trim();
  }
  return undefined;
}

/**
 * Authenticates callers against the keys in `auth.keys` (kept only as hashes in memory) and
 * enforces each key's allowed models.
 */
export default definePlugin<AuthOptions>({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'API keys: Bearer (and format-specific headers), expiry, allowed models.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: { anonymous: { enum: ['when-no-keys', 'never'], default: 'when-no-keys' } },
  },
  apply(api) {
    const keys = new Map<string, StoredKey>();
    for (const key of api.config.auth.keys) {
      keys.set(hashKey(key.key), {
        id: `config:${key.name}`,
        name: key.name,
        prefix: keyPrefix(key.key),
        models: key.models,
        expiresAt: key.expires ? Date.parse(key.expires) : undefined,
      });
    }
    const open = keys.size === 0 && api.options.anonymous === 'when-no-keys';
    api.hooks.ready.tap(PLUGIN_NAME, () => {
      if (open) api.logger.warn('no API keys are configured: every request is accepted. Add auth.keys to require keys.');
    });

    api.hooks.onRequest.tap(PLUGIN_NAME, (ctx) => {
      const secret = presentedKey(ctx);
      if (secret === undefined) {
        if (open) return;
        throw new GatewayError('missing_api_key');
      }
      const key = keys.get(hashKey(secret));
      if (!key) {
        if (open) return;
        throw new GatewayError('invalid_api_key', { params: { keyPrefix: keyPrefix(secret, 6) } });
      }
      if (key.expiresAt !== undefined && key.expiresAt <= Date.now()) throw new GatewayError('expired_api_key');
      ctx.key = key;
    });

    api.hooks.validate.tap(PLUGIN_NAME, (ctx, call) => {
      if (ctx.key && !modelAllowed(ctx.key.models, call.model)) {
        throw new GatewayError('model_not_allowed', { params: { model: call.model }, param: 'model' });
      }
    });
  },
});
