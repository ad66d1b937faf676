import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { isGatewayError, type FormatReply, type HandlerRoute, type RequestContext } from '../../core/index.js';
import { openStores, type KeyRecord, type Stores } from '../../core/store/index.js';
import { adminRoutes, keyView, logEntryView, parseCreateKey, parseGroupBy, parsePatchKey, parseTime, usageTotalView } from './index.js';

const ADMIN = 'admin-key-for-unit-tests-0123';

/** What a thrown GatewayError says, or a failure when nothing (or something else) was thrown. */
async function failure(run: () => unknown): Promise<{ code: string; status: number; param: string | null; message: string }> {
  try {
    await run();
  } catch (error) {
    if (!isGatewayError(error)) throw error;
    return { code: error.code, status: error.status, param: error.param, message: error.message };
  }
  throw new Error('expected a GatewayError');
}

const record: KeyRecord = {
  id: 'key_0123456789abcdef',
  name: 'ci',
  hash: 'f'.repeat(64),
  prefix: 'sk-sy-AbCd…',
  createdAt: Date.UTC(2025, 0, 2, 3, 4, 5),
  expiresAt: null,
  revokedAt: Date.UTC(2025, 1, 1),
  models: ['gpt-*'],
  rpm: 60,
  tpm: null,
  maxConcurrent: 2,
  budget: 5,
  spent: 1.25,
  source: 'admin',
};

describe('admin plugin', () => {
  describe('views', () => {
    it('shows a key without its hash, in snake_case with ISO times', () => {
      const view = keyView(record);
      expect(view).to.deep.equal({
        id: 'key_0123456789abcdef',
        object: 'api_key',
        name: 'ci',
        prefix: 'sk-sy-AbCd…',
        created_at: '2025-01-02T03:04:05.000Z',
        expires_at: null,
        revoked_at: '2025-02-01T00:00:00.000Z',
        models: ['gpt-*'],
        rpm: 60,
        tpm: null,
        max_concurrent: 2,
        budget: 5,
        spent: 1.25,
        source: 'admin',
      });
      expect(JSON.stringify(view)).to.not.include(record.hash);
      expect(view).to.not.have.property('hash');
    });

    it('shows a spent figure summed from many costs as the decimal it is', () => {
      // 0.0196 and 0.037125 added by floating point come out a little off; the view rounds to 1e-10.
      expect(keyView({ ...record, spent: 0.1 + 0.2 }).spent).to.equal(0.3);
      expect(keyView({ ...record, spent: 0.019600000000000003 }).spent).to.equal(0.0196);
    });

    it('shows a request-log row in snake_case', () => {
      const view = logEntryView({
        time: Date.UTC(2025, 0, 1),
        requestId: 'req_1',
        method: 'POST',
        path: '/v1/chat/completions',
        keyId: 'key_1',
        keyName: 'ci',
        keyPrefix: 'sk-sy-AbCd…',
        model: 'echo',
        operation: 'chat',
        provider: 'mock',
        status: 200,
        errorCode: null,
        promptTokens: 3,
        completionTokens: 4,
        cost: 0.5,
        durationMs: 12.5,
        clientIp: '127.0.0.1',
        userAgent: 'test',
        attempts: [
          { provider: 'up', model: 'm', status: 500, durationMs: 2, upstreamRequestId: 'req_vendor_1', error: 'upstream_error' },
          { provider: 'mock', model: 'mock-chat', status: 200, durationMs: 3 },
        ],
      });
      expect(view).to.include({ object: 'request_log.entry', time: '2025-01-01T00:00:00.000Z', request_id: 'req_1', key_name: 'ci' });
      expect(view.attempts).to.deep.equal([
        { provider: 'up', model: 'm', status: 500, duration_ms: 2, upstream_request_id: 'req_vendor_1', error: 'upstream_error' },
        { provider: 'mock', model: 'mock-chat', status: 200, duration_ms: 3, upstream_request_id: null, error: null },
      ]);
    });

    it('shows usage totals with only the fields grouped by', () => {
      const total = { key: 'key_1', keyName: 'ci', model: 'echo', requests: 2, promptTokens: 3, completionTokens: 4, cachedTokens: 0, cacheWriteTokens: 5, reasoningTokens: 0, images: 2, seconds: 1.5, characters: 0, cost: 1 };
      expect(usageTotalView(total, ['model'])).to.deep.equal({
        object: 'usage.total',
        model: 'echo',
        requests: 2,
        prompt_tokens: 3,
        completion_tokens: 4,
        cached_tokens: 0,
        cache_write_tokens: 5,
        reasoning_tokens: 0,
        images: 2,
        seconds: 1.5,
        characters: 0,
        cost: 1,
      });
      expect(usageTotalView(total, ['key'])).to.include({ key_id: 'key_1', key_name: 'ci' });
    });
  });

  describe('bodies', () => {
    const now = Date.UTC(2025, 0, 1);

    it('reads a full create body', () => {
      const input = parseCreateKey(
        { name: 'ci', models: ['echo'], rpm: 60, tpm: 1000, max_concurrent: 2, budget: 1.5, expires_at: '2026-01-01T00:00:00Z' },
        now,
      );
      expect(input).to.deep.equal({ name: 'ci', models: ['echo'], rpm: 60, tpm: 1000, maxConcurrent: 2, budget: 1.5, expiresAt: Date.UTC(2026, 0, 1) });
      expect(parseCreateKey({ name: 'ci', expires_in_days: 2 }, now).expiresAt).to.equal(now + 2 * 86_400_000);
      expect(parseCreateKey({ name: 'ci' }, now)).to.deep.include({ models: null, rpm: null, budget: null, expiresAt: null });
      // Each pattern once, as the CLI keeps them.
      expect(parseCreateKey({ name: 'ci', models: ['echo', 'gpt-*', 'echo'] }, now).models).to.deep.equal(['echo', 'gpt-*']);
      expect(parsePatchKey({ models: ['echo', 'echo'] }).models).to.deep.equal(['echo']);
    });

    const bad: Array<[string, Record<string, unknown>, string, string]> = [
      ['no name', {}, 'missing_required_parameter', 'name'],
      ['an empty name', { name: '' }, 'invalid_value', 'name'],
      ['a name with a newline', { name: 'a\nb' }, 'invalid_value', 'name'],
      ['a name with surrounding spaces', { name: ' ci ' }, 'invalid_value', 'name'],
      ['a name that is not text', { name: 5 }, 'invalid_type', 'name'],
      ['an unknown field', { name: 'ci', rps: 5 }, 'unknown_parameter', 'rps'],
      ['rpm as text', { name: 'ci', rpm: '60' }, 'invalid_type', 'rpm'],
      ['rpm 0', { name: 'ci', rpm: 0 }, 'invalid_value', 'rpm'],
      ['a fractional tpm', { name: 'ci', tpm: 1.5 }, 'invalid_type', 'tpm'],
      ['a negative budget', { name: 'ci', budget: -1 }, 'invalid_value', 'budget'],
      ['max_concurrent 0', { name: 'ci', max_concurrent: 0 }, 'invalid_value', 'max_concurrent'],
      ['no models at all', { name: 'ci', models: [] }, 'invalid_value', 'models'],
      ['a model that is not text', { name: 'ci', models: ['a', 7] }, 'invalid_type', 'models[1]'],
      ['a date without a zone', { name: 'ci', expires_at: '2030-01-01T00:00:00' }, 'invalid_value', 'expires_at'],
      ['a date in words', { name: 'ci', expires_at: 'tomorrow' }, 'invalid_value', 'expires_at'],
      ['an expiry in the past', { name: 'ci', expires_at: '2024-01-01T00:00:00Z' }, 'invalid_value', 'expires_at'],
      ['zero days', { name: 'ci', expires_in_days: 0 }, 'invalid_value', 'expires_in_days'],
      ['both expiries', { name: 'ci', expires_in_days: 1, expires_at: '2030-01-01T00:00:00Z' }, 'invalid_value', 'expires_in_days'],
    ];
    for (const [what, body, code, param] of bad) {
      it(`refuses ${what} with ${code} naming '${param}'`, async () => {
        const error = await failure(() => parseCreateKey(body, now));
        expect(error).to.include({ code, status: 400, param });
        expect(error.message).to.include(param.replace(/\[.*$/, ''));
      });
    }

    it('reads a patch: only the fields sent, null clears', () => {
      expect(parsePatchKey({}, now)).to.deep.equal({});
      expect(parsePatchKey({ rpm: null, models: null, budget: 3, max_concurrent: 4 }, now)).to.deep.equal({
        rpm: null,
        models: null,
        budget: 3,
        maxConcurrent: 4,
      });
      expect(parsePatchKey({ expires_at: null }, now)).to.deep.equal({ expiresAt: null });
      expect(parsePatchKey({ expires_in_days: 1 }, now)).to.deep.equal({ expiresAt: now + 86_400_000 });
    });

    it('refuses a patch that clears the name or sends an unknown field', async () => {
      expect(await failure(() => parsePatchKey({ name: null }))).to.include({ code: 'invalid_type', param: 'name' });
      expect(await failure(() => parsePatchKey({ secret: 'x' }))).to.include({ code: 'unknown_parameter', param: 'secret' });
    });
  });

  describe('query values', () => {
    it('reads times as epoch ms, dates and date-times with a zone', () => {
      expect(parseTime('since', '1735689600000')).to.equal(1735689600000);
      expect(parseTime('since', '2025-01-01')).to.equal(Date.UTC(2025, 0, 1));
      expect(parseTime('since', '2025-01-01T10:00:00Z')).to.equal(Date.UTC(2025, 0, 1, 10));
      expect(parseTime('since', '2025-01-01T10:00:00.250Z')).to.equal(Date.UTC(2025, 0, 1, 10, 0, 0, 250));
      expect(parseTime('since', '2025-01-01T12:00:00+02:00')).to.equal(Date.UTC(2025, 0, 1, 10));
      // `+` in a query string arrives as a space.
      expect(parseTime('since', '2025-01-01T12:00:00 02:00')).to.equal(Date.UTC(2025, 0, 1, 10));
      expect(parseTime('since', '2025-01-01T08:00:00-0200')).to.equal(Date.UTC(2025, 0, 1, 10));
      // An offset of hours alone, as ISO 8601 allows (and the CLI reads).
      expect(parseTime('since', '2025-01-01T15:00:00 05')).to.equal(Date.UTC(2025, 0, 1, 10));
    });

    it('refuses a number too short to be epoch milliseconds as epoch seconds (or a date without dashes), as the CLI does', async () => {
      for (const text of ['1795000000', '20261128']) {
        const error = await failure(() => parseTime('since', text));
        expect(error, text).to.include({ code: 'invalid_value', param: 'since' });
        expect(error.message, text).to.include('looks like epoch seconds');
      }
    });

    expect(parseTime('until', '2025-01-01T10:00:00')).to.equal(Date.UTC(2025, 0, 1, 10));
    for (const text of ['yesterday', '2025-13-01', '2025-02-30', '2025-01-01T25:00:00Z', ' 2025-01-01', '-5', '1e12']) {
      it(`refuses the time '${text}' naming its parameter`, async () => {
        expect(await failure(() => parseTime('until', text))).to.include({ code: 'invalid_value', param: 'until' });
      });
    }

    it('reads group_by', async () => {
      expect(parseGroupBy({})).to.deep.equal(['key', 'model']);
      expect(parseGroupBy({ group_by: 'day,model,day' })).to.deep.equal(['day', 'model']);
      expect(parseGroupBy({ group_by: 'none' })).to.deep.equal([]);
      expect(await failure(() => parseGroupBy({ group_by: 'week' }))).to.include({ code: 'invalid_value', param: 'group_by' });
      expect(await failure(() => parseGroupBy({ group_by: ['key', 'model'] }))).to.include({ code: 'invalid_value', param: 'group_by' });
    });
  });

  describe('routes against a real store', () => {
    let stores: Stores;
    let routes: HandlerRoute[];
    const admin = { authorization: `Bearer ${ADMIN}` };

    const ctx = (headers: Record<string, string>) => ({ headers, query: {}, state: new Map(), access: 'admin' }) as unknown as RequestContext;
    const find = (method: string, path: string) => {
      const found = routes.find((r) => r.method === method && r.path === path);
      if (!found) throw new Error(`no route ${method} ${path}`);
      return found;
    };
    async function call(
      method: string,
      path: string,
      input: { body?: Record<string, unknown>; params?: Record<string, string>; query?: Record<string, string | string[]> } = {},
      headers: Record<string, string> = admin,
    ): Promise<{ status: number; body: any; headers: Record<string, string> }> {
      const reply = (await find(method, path).handle(
        ctx(headers),
        { body: input.body ?? {}, params: input.params ?? {}, query: input.query ?? {}, headers },
        { models: undefined as never },
      )) as Extract<FormatReply, { body: unknown }>;
      return { status: reply.status ?? 200, body: reply.body, headers: reply.headers ?? {} };
    }

    beforeEach(() => {
      stores = openStores({
        storage: { driver: 'sqlite', url: ':memory:' },
        cache: { driver: 'memory' },
        baseDir: mkdtempSync(path.join(tmpdir(), 'switchyard-admin-')),
      });
      routes = adminRoutes({ stores: () => stores, adminKey: ADMIN });
    });
    afterEach(async () => stores.close());

    it('marks every route admin-only', () => {
      expect(routes.length).to.equal(8);
      for (const route of routes) expect(route.access, `${route.method} ${route.path}`).to.equal('admin');
      expect(routes.filter((r) => r.readsBody).map((r) => `${r.method} ${r.path}`)).to.deep.equal(['POST /admin/keys', 'PATCH /admin/keys/:id']);
    });

    it('refuses a request without the admin key, even if it got past auth', async () => {
      for (const route of routes) {
        const missing = await failure(() => route.handle(ctx({}), { body: {}, params: { id: 'x' }, query: {}, headers: {} }, { models: undefined as never }));
        expect(missing, `${route.method} ${route.path}`).to.include({ code: 'admin_key_required', status: 401 });
        const wrong = { authorization: 'Bearer sk-sy-client-key-000000000000' };
        const client = await failure(() => route.handle(ctx(wrong), { body: {}, params: { id: 'x' }, query: {}, headers: wrong }, { models: undefined as never }));
        expect(client).to.include({ code: 'admin_key_required' });
      }
      const off = adminRoutes({ stores: () => stores, adminKey: undefined });
      const error = await failure(() => off[0]!.handle(ctx(admin), { body: {}, params: {}, query: {}, headers: admin }, { models: undefined as never }));
      expect(error).to.include({ code: 'admin_disabled', status: 403 });
    });

    it('creates a key, shows its secret once, and never again', async () => {
      const created = await call('POST', '/admin/keys', { body: { name: 'ci', rpm: 10 } });
      expect(created.status).to.equal(201);
      expect(created.headers['cache-control']).to.equal('no-store');
      expect(created.body.key).to.match(/^sk-sy-[A-Za-z0-9]{40}$/);
      expect(created.body).to.include({ object: 'api_key', name: 'ci', rpm: 10, source: 'admin', revoked_at: null });
      expect(created.body.prefix).to.equal(`${created.body.key.slice(0, 10)}…`);
      const secret = created.body.key as string;

      const later = [
        await call('GET', '/admin/keys'),
        await call('GET', '/admin/keys/:id', { params: { id: 'ci' } }),
        await call('GET', '/admin/keys/:id', { params: { id: created.body.id } }),
        await call('PATCH', '/admin/keys/:id', { params: { id: 'ci' }, body: { rpm: null } }),
        await call('POST', '/admin/keys/:id/revoke', { params: { id: 'ci' } }),
      ];
      for (const answer of later) {
        expect(JSON.stringify(answer.body)).to.not.include(secret);
        expect(JSON.stringify(answer.body)).to.not.include(secret.slice(10));
      }
      expect(later[0]!.body.data).to.have.length(1);
      expect(later[3]!.body.rpm).to.equal(null);
    });

    it('refuses a second usable key with the same name, and names that read like ids', async () => {
      await call('POST', '/admin/keys', { body: { name: 'ci' } });
      expect(await failure(() => call('POST', '/admin/keys', { body: { name: 'ci' } }))).to.include({ code: 'invalid_value', param: 'name' });
      expect(await failure(() => call('POST', '/admin/keys', { body: { name: 'key_0123456789abcdef' } }))).to.include({ param: 'name' });
      await call('DELETE', '/admin/keys/:id', { params: { id: 'ci' } });
      // Once revoked, the name is free again; by name, the usable key answers.
      const again = await call('POST', '/admin/keys', { body: { name: 'ci' } });
      expect((await call('GET', '/admin/keys/:id', { params: { id: 'ci' } })).body.id).to.equal(again.body.id);
    });

    it('revokes idempotently and answers 404 for an unknown key', async () => {
      const created = await call('POST', '/admin/keys', { body: { name: 'ci' } });
      const first = await call('POST', '/admin/keys/:id/revoke', { params: { id: created.body.id } });
      expect(first.body.revoked_at).to.be.a('string');
      const second = await call('DELETE', '/admin/keys/:id', { params: { id: 'ci' } });
      expect(second.status).to.equal(200);
      expect(second.body.revoked_at).to.equal(first.body.revoked_at);
      const found = await stores.keys.findByHash((await stores.keys.get(created.body.id))!.hash);
      expect(found!.revokedAt).to.be.a('number');
      for (const [method, p] of [
        ['GET', '/admin/keys/:id'],
        ['PATCH', '/admin/keys/:id'],
        ['DELETE', '/admin/keys/:id'],
        ['POST', '/admin/keys/:id/revoke'],
      ] as const) {
        expect(await failure(() => call(method, p, { params: { id: 'nobody' } }))).to.include({ code: 'key_not_found', status: 404 });
      }
    });

    it('does not echo a secret used as a key id', async () => {
      const error = await failure(() => call('GET', '/admin/keys/:id', { params: { id: 'sk-sy-ThisIsSomebodysSecret0000000000000000' } }));
      expect(error.code).to.equal('key_not_found');
      expect(error.message).to.not.include('ThisIsSomebodysSecret');
    });

    it('refuses to change a revoked key or a key from the configuration file', async () => {
      await stores.keys.syncConfigKeys([{ name: 'from-file', secret: 'sk-file-key-0000000000', source: 'config' }]);
      expect(await failure(() => call('PATCH', '/admin/keys/:id', { params: { id: 'from-file' }, body: { rpm: 5 } }))).to.include({
        code: 'invalid_request',
      });
      await call('POST', '/admin/keys', { body: { name: 'gone' } });
      await call('POST', '/admin/keys/:id/revoke', { params: { id: 'gone' } });
      expect(await failure(() => call('PATCH', '/admin/keys/:id', { params: { id: 'gone' }, body: { rpm: 5 } }))).to.include({ code: 'invalid_request' });
    });

    it('pages the request log and refuses a bad cursor', async () => {
      const created = await call('POST', '/admin/keys', { body: { name: 'ci' } });
      for (let i = 0; i < 5; i++) {
        stores.logs.record({
          time: Date.UTC(2025, 0, 1) + i,
          requestId: `req_${i}`,
          method: 'POST',
          path: '/v1/chat/completions',
          keyId: i % 2 === 0 ? created.body.id : null,
          keyName: i % 2 === 0 ? 'ci' : null,
          keyPrefix: i % 2 === 0 ? created.body.prefix : null,
          model: 'echo',
          operation: 'chat',
          provider: 'mock',
          status: i === 4 ? 429 : 200,
          errorCode: null,
          promptTokens: null,
          completionTokens: null,
          cost: null,
          durationMs: 1,
          clientIp: null,
          userAgent: null,
          attempts: [],
        });
      }
      const first = await call('GET', '/admin/logs', { query: { limit: '2' } });
      expect(first.body.data.map((e: { request_id: string }) => e.request_id)).to.deep.equal(['req_4', 'req_3']);
      const second = await call('GET', '/admin/logs', { query: { limit: '2', cursor: first.body.next_cursor } });
      expect(second.body.data.map((e: { request_id: string }) => e.request_id)).to.deep.equal(['req_2', 'req_1']);
      const byKey = await call('GET', '/admin/logs', { query: { key: 'ci', status: '200' } });
      expect(byKey.body.data.map((e: { request_id: string }) => e.request_id)).to.deep.equal(['req_2', 'req_0']);
      expect(byKey.body.next_cursor).to.equal(null);

      expect(await failure(() => call('GET', '/admin/logs', { query: { cursor: 'not-a-cursor' } }))).to.include({
        code: 'invalid_cursor',
        status: 400,
        param: 'cursor',
      });
      expect(await failure(() => call('GET', '/admin/logs', { query: { key: 'nobody' } }))).to.include({ code: 'key_not_found', param: 'key' });
      expect(await failure(() => call('GET', '/admin/logs', { query: { limit: '1001' } }))).to.include({ code: 'invalid_value', param: 'limit' });
      expect(await failure(() => call('GET', '/admin/logs', { query: { status: '20x' } }))).to.include({ code: 'invalid_value', param: 'status' });
      expect(await failure(() => call('GET', '/admin/logs', { query: { model: ['a', 'b'] } }))).to.include({ code: 'invalid_value', param: 'model' });
      expect(await failure(() => call('GET', '/admin/logs', { query: { stauts: '200' } }))).to.include({ code: 'unknown_parameter', param: 'stauts' });
      expect(await failure(() => call('GET', '/admin/logs', { query: { since: '2025-01-02', until: '2025-01-01' } }))).to.include({ param: 'until' });
    });
  });
});
