import { createHash, timingSafeEqual } from 'node:crypto';
import { definePlugin, GatewayError, type FormatReply, type HandlerRoute, type RequestContext, type RouteInput } from '../../core/index.js';
import { generateSecret, InvalidCursorError, secretPrefix, type KeyRecord, type Stores } from '../../core/store/index.js';
import { onlyKnown, parseCreateKey, parseGroupBy, parseInteger, parsePatchKey, parseRange, single } from './input.js';
import { keyView, logEntryView, usageTotalView } from './views.js';

export { keyView, logEntryView, usageTotalView, type KeyView, type LogEntryView, type UsageTotalView } from './views.js';
export { parseCreateKey, parsePatchKey, parseTime, parseGroupBy, createKeySchema, patchKeySchema } from './input.js';

const PLUGIN_NAME = 'admin';
const FORMAT = 'admin';

/** Admin answers may carry a secret (key creation) or operator data: never cached. */
const NO_STORE = { 'cache-control': 'no-store' } as const;

/** Names that read like a key id would make `/admin/keys/:id` ambiguous. */
const ID_LIKE = /^(key|cfg)_[0-9a-f]{16}$/;

export interface AdminRoutesOptions {
  /** The gateway's stores (a getter: they open on first use, never in apply()). */
  stores(): Stores;
  /** auth.adminKey; undefined turns the admin API off. */
  adminKey: string | undefined;
  /** The names of the keys declared in auth.keys: taken, even while such a key is revoked (a restart restores it). */
  configKeyNames?: readonly string[];
}

const sha = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * The admin key check, again. The auth plugin already refuses these routes without the admin
 * key; checking here too means a key store can never be opened by a mistake elsewhere.
 */
function guard(adminKey: string | undefined) {
  const adminHash = adminKey ? sha(adminKey) : undefined;
  return (ctx: RequestContext): void => {
    if (!adminHash) throw new GatewayError('admin_disabled');
    const authorization = ctx.headers.authorization;
    const match = typeof authorization === 'string' ? /^Bearer\s+(.+)$/i.exec(authorization.trim()) : null;
    if (!match || !timingSafeEqual(sha(match[1]!.trim()), adminHash)) throw new GatewayError('admin_key_required');
  };
}

function reply(body: unknown, status = 200): FormatReply {
  return { status, headers: { ...NO_STORE }, body };
}

/** The admin API's routes, every one `access: 'admin'`. Exported for tests and embedders. */
export function adminRoutes(options: AdminRoutesOptions): HandlerRoute[] {
  const assertAdmin = guard(options.adminKey);
  const keys = () => options.stores().keys;

  async function findKey(idOrName: string, param: string | null = null): Promise<KeyRecord> {
    let key = idOrName ? await keys().get(idOrName) : undefined;
    if (key && key.id !== idOrName) {
      // By name: the usable key of that name if there is one, else the newest (list() is oldest first).
      const named = (await keys().list()).filter((k) => k.name === idOrName);
      key = named.find((k) => k.revokedAt === null) ?? named[named.length - 1] ?? key;
    }
    if (!key) {
      // Someone looking a key up by its secret gets the secret's prefix back, not the secret.
      const shown = /^sk-/i.test(idOrName) ? secretPrefix(idOrName) : idOrName.slice(0, 200);
      throw new GatewayError('key_not_found', { params: { key: shown }, param });
    }
    return key;
  }

  /** A name must not read like an id, nor be the name of another key that is still in use. */
  async function checkName(name: string, self?: string): Promise<void> {
    if (ID_LIKE.test(name)) {
      throw new GatewayError('invalid_value', { param: 'name', params: { detail: 'a name may not look like a key id.' } });
    }
    if (options.configKeyNames?.includes(name)) {
      throw new GatewayError('invalid_value', {
        param: 'name',
        params: { detail: `a key named '${name}' is declared in auth.keys of the configuration (the gateway restores it at its next start); choose another name.` },
      });
    }
    const clash = (await keys().list()).find((k) => k.name === name && k.id !== self && k.revokedAt === null);
    if (clash) {
      throw new GatewayError('invalid_value', { param: 'name', params: { detail: `a key named '${name}' already exists (${clash.id}).` } });
    }
  }

  /**
   * An admin route. A query parameter it does not name in `query` is refused (400
   * unknown_parameter) before it does anything: `POST /admin/keys?budget=5` would otherwise make a
   * key without the budget its operator meant, `DELETE /admin/keys/x?dry_run=true` revoke it.
   */
  function route(
    method: HandlerRoute['method'],
    path: string,
    handle: (ctx: RequestContext, input: RouteInput) => Promise<FormatReply>,
    readsBody = false,
    query: readonly string[] = [],
  ): HandlerRoute {
    return {
      kind: 'handler',
      method,
      path,
      access: 'admin',
      readsBody,
      async handle(ctx, input) {
        assertAdmin(ctx);
        onlyKnown(input.query, query);
        return handle(ctx, input);
      },
    };
  }

  const revoke = async (_ctx: RequestContext, { params }: RouteInput) => {
    const key = await findKey(params.id ?? '');
    if (key.revokedAt === null) await keys().revoke(key.id);
    return reply(keyView((await keys().get(key.id))!));
  };

  return [
    route('GET', '/admin/keys', async () => reply({ object: 'list', data: (await keys().list()).map(keyView) })),

    route(
      'POST',
      '/admin/keys',
      async (_ctx, { body }) => {
        const input = parseCreateKey(body);
        await checkName(input.name);
        const secret = generateSecret();
        const created = await keys().create({ ...input, secret, source: 'admin' });
        // The only time the secret is ever shown.
        return reply({ ...keyView(created), key: secret }, 201);
      },
      true,
    ),

    route('GET', '/admin/keys/:id', async (_ctx, { params }) => reply(keyView(await findKey(params.id ?? '')))),

    route(
      'PATCH',
      '/admin/keys/:id',
      async (_ctx, { params, body }) => {
        const patch = parsePatchKey(body);
        const key = await findKey(params.id ?? '');
        if (key.source === 'config') {
          throw new GatewayError('invalid_request', {
            params: { detail: `The key '${key.name}' comes from auth.keys in the configuration file; change it there (a change made here would be undone at the next start).` },
          });
        }
        if (key.revokedAt !== null) {
          throw new GatewayError('invalid_request', { params: { detail: `The key '${key.name}' is revoked; a revoked key cannot be changed.` } });
        }
        if (patch.name !== undefined && patch.name !== key.name) await checkName(patch.name, key.id);
        if (Object.keys(patch).length === 0) return reply(keyView(key));
        const updated = await keys().update(key.id, patch);
        if (!updated) throw new GatewayError('key_not_found', { params: { key: key.id } });
        return reply(keyView(updated));
      },
      true,
    ),

    route('POST', '/admin/keys/:id/revoke', revoke),
    route('DELETE', '/admin/keys/:id', revoke),

    route('GET', '/admin/logs', async (_ctx, { query }) => {
      const keyText = single(query, 'key');
      const model = single(query, 'model');
      const statusText = single(query, 'status');
      const limitText = single(query, 'limit');
      const cursor = single(query, 'cursor');
      const range = parseRange(query);
      const status = statusText === undefined ? undefined : parseInteger('status', statusText, 100, 599);
      const limit = limitText === undefined ? 100 : parseInteger('limit', limitText, 1, 1000);
      const keyId = keyText === undefined ? undefined : (await findKey(keyText, 'key')).id;
      let page;
      try {
        page = await options.stores().logs.query({ keyId, model, status, ...range, limit, cursor });
      } catch (error) {
        if (error instanceof InvalidCursorError || (error as Error)?.name === 'InvalidCursorError') {
          throw new GatewayError('invalid_cursor', { param: 'cursor' });
        }
        throw error;
      }
      return reply({ object: 'list', data: page.entries.map(logEntryView), next_cursor: page.nextCursor });
    }, false, ['key', 'model', 'status', 'since', 'until', 'limit', 'cursor']),

    route('GET', '/admin/usage', async (_ctx, { query }) => {
      const keyText = single(query, 'key');
      const model = single(query, 'model');
      const range = parseRange(query);
      const groupBy = parseGroupBy(query);
      const keyId = keyText === undefined ? undefined : (await findKey(keyText, 'key')).id;
      const totals = await options.stores().usage.totals({ keyId, model, ...range, groupBy });
      return reply({ object: 'list', data: totals.map((t) => usageTotalView(t, groupBy)) });
    }, false, ['key', 'model', 'since', 'until', 'group_by']),
  ];
}

/**
 * The admin API under /admin: keys (list, create, show, change, revoke), the request log and
 * usage totals. Every route needs `Authorization: Bearer <auth.adminKey>`; no client key opens
 * it. Answers never hold a key's hash, and a key's secret only in the answer that created it.
 */
export default definePlugin({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Admin API: /admin/keys, /admin/logs, /admin/usage, guarded by auth.adminKey.',
  // The auth plugin is what refuses client keys on these routes: it must run first.
  dependencies: ['auth'],
  apply(api) {
    // A format of its own (rather than a static route list) so that each gateway's routes read
    // that gateway's stores, even with several gateways in one process.
    api.registerFormat({
      id: FORMAT,
      routes: adminRoutes({ stores: () => api.stores, adminKey: api.config.auth.adminKey, configKeyNames: (api.config.auth.keys ?? []).map((k) => k.name) }),
    });
  },
});
