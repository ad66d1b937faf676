import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';

const ADMIN_KEY = 'admin-e2e-key-0123456789abcdef';

const config = (auth: string) => `
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
storage: { driver: sqlite, url: ':memory:' }
${auth}
plugins: [request-log, auth, validation, routing, metering, admin, openai-chat]
providers:
  - id: mock
    type: mock
    models: [mock-chat, mock-other]
pricing:
  mock-chat: { input: 1000, output: 2000 }
  mock-other: { input: 500, output: 500 }
`;

const KEY_FIELDS = [
  'id',
  'object',
  'name',
  'prefix',
  'created_at',
  'expires_at',
  'revoked_at',
  'models',
  'rpm',
  'tpm',
  'max_concurrent',
  'budget',
  'spent',
  'source',
].sort();

interface Answer {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

/** Every admin route, with a path that exists once a key named `target` does. */
const ROUTES: Array<[string, string]> = [
  ['GET', '/admin/keys'],
  ['POST', '/admin/keys'],
  ['GET', '/admin/keys/target'],
  ['PATCH', '/admin/keys/target'],
  ['POST', '/admin/keys/target/revoke'],
  ['DELETE', '/admin/keys/target'],
  ['GET', '/admin/logs'],
  ['GET', '/admin/usage'],
];

/** Poll until `probe` returns something (no fixed sleeps); the log and the ledger are written just after the reply. */
async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('admin API (end to end, over HTTP)', () => {
  let gw: RunningGateway;
  /** The text of every admin answer, for the "a secret is shown once" check at the end. */
  const seen: string[] = [];
  /** Every secret the admin API handed out. */
  const secrets: string[] = [];

  async function request(method: string, path: string, options: { body?: unknown; key?: string | null; raw?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? ADMIN_KEY : options.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    let body: string | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(`${gw.url}${path}`, { method, headers, body });
    const text = await res.text();
    seen.push(`${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n\n${text}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, body: parsed, text, headers: res.headers };
  }

  async function createKey(body: Record<string, unknown>): Promise<{ id: string; name: string; prefix: string; secret: string; view: any }> {
    const answer = await request('POST', '/admin/keys', { body });
    expect(answer.status, answer.text).to.equal(201);
    secrets.push(answer.body.key);
    return { id: answer.body.id, name: answer.body.name, prefix: answer.body.prefix, secret: answer.body.key, view: answer.body };
  }

  const clientFor = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0 });

  /** A log entry by request id, once the request log has it. */
  const logEntry = (requestId: string, key?: string) =>
    waitFor(async () => {
      const page = await request('GET', `/admin/logs?limit=1000${key ? `&key=${encodeURIComponent(key)}` : ''}`);
      expect(page.status, page.text).to.equal(200);
      return (page.body.data as Array<{ request_id: string }>).find((e) => e.request_id === requestId) as any;
    }, `the log entry of ${requestId}`);

  before(async () => {
    gw = await startGateway(config(`auth: { adminKey: ${ADMIN_KEY} }`));
  });
  after(async () => gw?.stop());

  it('keeps every admin route closed to client keys, to callers without a key and to a wrong key', async () => {
    const client = await createKey({ name: 'client-only' });
    await createKey({ name: 'target' });
    for (const [method, path] of ROUTES) {
      for (const [who, key] of [
        ['a client key', client.secret],
        ['no key', null],
        ['a wrong key', `${ADMIN_KEY}x`],
      ] as const) {
        const answer = await request(method, path, { key, body: method === 'POST' || method === 'PATCH' ? { name: 'x' } : undefined });
        expect(answer.status, `${method} ${path} with ${who}`).to.equal(401);
        expect(answer.body.error).to.include({ code: 'admin_key_required', type: 'authentication_error' });
        expect(answer.headers.get('x-request-id')).to.be.a('string');
      }
    }
    // Nothing was changed by those attempts.
    const target = await request('GET', '/admin/keys/target');
    expect(target.body).to.include({ name: 'target', revoked_at: null });
    const list = await request('GET', '/admin/keys');
    expect((list.body.data as Array<{ name: string }>).filter((k) => k.name === 'x')).to.have.length(0);
  });

  it('creates a key, serves a call made with it by the openai client, and shows that call in /admin/logs and /admin/usage', async () => {
    const created = await createKey({ name: 'e2e-main', models: ['mock-*'], rpm: 600 });
    expect(created.secret).to.match(/^sk-sy-[A-Za-z0-9]{40}$/);
    expect(created.prefix).to.equal(`${created.secret.slice(0, 10)}…`);
    expect(Object.keys(created.view).sort()).to.deep.equal([...KEY_FIELDS, 'key'].sort());
    expect(created.view).to.include({ object: 'api_key', name: 'e2e-main', rpm: 600, tpm: null, source: 'admin', revoked_at: null, spent: 0 });
    expect(new Date(created.view.created_at).toISOString()).to.equal(created.view.created_at);

    const client = clientFor(created.secret);
    const { data: completion, response } = await client.chat.completions
      .create({ model: 'mock-chat', messages: [{ role: 'user', content: 'count these five words' }] })
      .withResponse();
    expect(completion.choices[0]!.message.content).to.equal('count these five words');
    const requestId = response.headers.get('x-request-id')!;
    expect(requestId).to.be.a('string');

    const entry = await logEntry(requestId, 'e2e-main');
    expect(entry).to.include({
      object: 'request_log.entry',
      request_id: requestId,
      method: 'POST',
      path: '/v1/chat/completions',
      key_id: created.id,
      key_name: 'e2e-main',
      key_prefix: created.prefix,
      model: 'mock-chat',
      operation: 'chat',
      provider: 'mock',
      status: 200,
      error_code: null,
      prompt_tokens: completion.usage!.prompt_tokens,
      completion_tokens: completion.usage!.completion_tokens,
    });
    expect(entry.cost).to.be.greaterThan(0);
    expect(entry.attempts).to.deep.equal([{ provider: 'mock', model: 'mock-chat', status: 200, duration_ms: entry.attempts[0].duration_ms, upstream_request_id: null, error: null }]);

    // Usage totals for that key, by key and model (the default grouping).
    const totals = await waitFor(async () => {
      const answer = await request('GET', '/admin/usage?key=e2e-main');
      expect(answer.status, answer.text).to.equal(200);
      return answer.body.data.length > 0 ? answer.body : undefined;
    }, 'usage totals');
    expect(totals.object).to.equal('list');
    expect(totals.data).to.have.length(1);
    const total = totals.data[0];
    expect(total).to.include({ object: 'usage.total', key_id: created.id, key_name: 'e2e-main', model: 'mock-chat', requests: 1 });
    expect(total.prompt_tokens).to.equal(completion.usage!.prompt_tokens);
    expect(total.completion_tokens).to.equal(completion.usage!.completion_tokens);
    expect(total.cost).to.be.closeTo(entry.cost, 1e-12);

    // Other groupings and filters.
    const today = new Date().toISOString().slice(0, 10);
    const byDay = await request('GET', `/admin/usage?key=${created.id}&group_by=day`);
    expect(byDay.body.data).to.deep.equal([{ object: 'usage.total', day: today, ...pick(total, ['requests', 'prompt_tokens', 'completion_tokens', 'cached_tokens', 'cache_write_tokens', 'reasoning_tokens', 'images', 'seconds', 'characters', 'cost']) }]);
    const none = await request('GET', `/admin/usage?key=e2e-main&group_by=none&since=${Date.now() - 60_000}`);
    expect(none.body.data).to.have.length(1);
    expect(none.body.data[0]).to.include({ requests: 1 });
    const future = await request('GET', `/admin/usage?key=e2e-main&since=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`);
    expect(future.body.data).to.deep.equal([]);
    const otherModel = await request('GET', '/admin/usage?key=e2e-main&model=mock-other');
    expect(otherModel.body.data).to.deep.equal([]);

    // The key's spent figure has the call's cost.
    const shown = await request('GET', '/admin/keys/e2e-main');
    expect(shown.body.spent).to.be.closeTo(entry.cost, 1e-12);

    // Revoked: the next call is a 401 the SDK recognises, with its own code.
    const revoked = await request('POST', `/admin/keys/${created.id}/revoke`);
    expect(revoked.status).to.equal(200);
    expect(revoked.body.revoked_at).to.be.a('string');
    let failure: unknown;
    try {
      await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'again' }] });
    } catch (error) {
      failure = error;
    }
    expect(failure).to.be.instanceOf(OpenAI.AuthenticationError);
    expect((failure as InstanceType<typeof OpenAI.AuthenticationError>).status).to.equal(401);
    expect((failure as InstanceType<typeof OpenAI.AuthenticationError>).code).to.equal('revoked_api_key');

    // Revoking again (either route) changes nothing and answers the same view.
    const again = await request('DELETE', '/admin/keys/e2e-main');
    expect(again.status).to.equal(200);
    expect(again.body.revoked_at).to.equal(revoked.body.revoked_at);
    const unknown = await request('DELETE', '/admin/keys/nobody-by-that-name');
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.include({ code: 'key_not_found', type: 'invalid_request_error' });
  });

  it('pages through the log with a cursor, newest first, and filters it by status, model and time', async () => {
    const pager = await createKey({ name: 'pager' });
    const started = Date.now();
    const sent: Array<{ id: string; model: string; status: number }> = [];
    const models = ['mock-chat', 'mock-other', 'no-such-model', 'mock-chat', 'mock-other', 'mock-chat', 'no-such-model'];
    for (const [i, model] of models.entries()) {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${pager.secret}`, 'content-type': 'application/json', 'x-request-id': `client-chosen-${i}` },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: `message ${i}` }] }),
      });
      await res.text();
      // The gateway's own id, never the client's (which could collide with another request's).
      const id = res.headers.get('x-request-id')!;
      expect(id).to.match(/^req_[0-9a-f]{32}$/);
      sent.push({ id, model, status: res.status });
      // One at a time into the log, so that its order is the order sent.
      await logEntry(id, pager.id);
    }
    expect(sent.map((s) => s.status)).to.deep.equal([200, 200, 404, 200, 200, 200, 404]);

    const pages: any[] = [];
    let cursor: string | null = null;
    do {
      const answer: Answer = await request('GET', `/admin/logs?key=pager&limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(answer.status, answer.text).to.equal(200);
      expect(answer.body.object).to.equal('list');
      pages.push(answer.body);
      cursor = answer.body.next_cursor;
    } while (cursor && pages.length < 10);
    expect(pages.map((p) => p.data.length)).to.deep.equal([3, 3, 1]);
    expect(pages[2].next_cursor).to.equal(null);
    const ids = pages.flatMap((p) => p.data.map((e: { request_id: string }) => e.request_id));
    expect(ids).to.deep.equal(sent.map((s) => s.id).reverse());
    const times = pages.flatMap((p) => p.data.map((e: { time: string }) => Date.parse(e.time)));
    expect(times).to.deep.equal([...times].sort((a, b) => b - a));
    for (const entry of pages.flatMap((p) => p.data)) expect(entry).to.include({ key_name: 'pager', key_prefix: pager.prefix });

    const idsOf = async (query: string) => {
      const answer = await request('GET', `/admin/logs?key=${pager.id}&${query}`);
      expect(answer.status, answer.text).to.equal(200);
      return (answer.body.data as Array<{ request_id: string }>).map((e) => e.request_id);
    };
    const expected = (keep: (s: (typeof sent)[number]) => boolean) => sent.filter(keep).map((s) => s.id).reverse();

    expect(await idsOf('status=404')).to.deep.equal(expected((s) => s.status === 404));
    const notFound = await request('GET', `/admin/logs?key=pager&status=404&limit=1`);
    expect(notFound.body.data[0]).to.include({ status: 404, error_code: 'model_not_found', model: 'no-such-model', provider: null });
    expect(await idsOf('model=mock-other')).to.deep.equal(expected((s) => s.model === 'mock-other'));
    expect(await idsOf('model=mock-chat&status=200')).to.deep.equal(expected((s) => s.model === 'mock-chat'));
    expect(await idsOf('status=500')).to.deep.equal([]);
    expect(await idsOf(`since=${started}`)).to.deep.equal(expected(() => true));
    expect(await idsOf(`since=${encodeURIComponent(new Date(started).toISOString())}`)).to.deep.equal(expected(() => true));
    expect(await idsOf(`until=${encodeURIComponent(new Date(started).toISOString())}`)).to.deep.equal([]);
    expect(await idsOf(`since=${Date.now() + 60_000}`)).to.deep.equal([]);

    // Filters and cursor together: the second page of the 200s.
    const first = await request('GET', `/admin/logs?key=pager&status=200&limit=2`);
    const second = await request('GET', `/admin/logs?key=pager&status=200&limit=2&cursor=${first.body.next_cursor}`);
    expect([...first.body.data, ...second.body.data].map((e: { request_id: string }) => e.request_id)).to.deep.equal(
      expected((s) => s.status === 200).slice(0, 4),
    );

    // The whole log (no key filter) has the admin API's own requests too, without a key.
    const all = await request('GET', '/admin/logs?limit=5');
    expect(all.body.data[0]).to.include({ method: 'GET', key_id: null, key_name: null });
  });

  it("a model name longer than 256 characters is a 400 naming the field, before the key's model patterns are matched; it is neither echoed nor logged", async () => {
    const key = await createKey({ name: 'globby', models: ['*gpt*mini', 'mock-*'] });
    const client = clientFor(key.secret);
    const long = 'gpt'.repeat(70_000) + 'x';
    let refused: any;
    try {
      await client.chat.completions.create({ model: long, messages: [{ role: 'user', content: 'hi' }] });
    } catch (error) {
      refused = error;
    }
    expect(refused).to.be.instanceOf(OpenAI.BadRequestError);
    expect(refused.code).to.equal('invalid_value');
    expect(refused.param).to.equal('model');
    expect(refused.message).to.include('256').and.not.include('gptgpt');
    expect(gw.logText()).to.not.include('gptgptgptgpt');
    // At the bound the name is matched against the key's patterns as any other.
    let denied: any;
    try {
      await client.chat.completions.create({ model: 'g'.repeat(256), messages: [{ role: 'user', content: 'hi' }] });
    } catch (error) {
      denied = error;
    }
    expect(denied.code).to.equal('model_not_allowed');
    // A long name in a listing's path is echoed cut short, not whole.
    const listing = await fetch(`${gw.url}/v1/models/${'m'.repeat(20_000)}`, { headers: { authorization: `Bearer ${key.secret}` } });
    expect(listing.status).to.equal(404);
    expect((await listing.text()).length).to.be.below(1000);
  });

  it('refuses key names and model patterns with control characters (C0, C1), bidi overrides or invisible characters, as the CLI does', async () => {
    // Zero-width and line-separator characters: two names that look alike, a log line broken in two.
    for (const name of ['csi\u009b2J', 'nel\u0085x', 'rtl\u202etxt', 'tab\tname', 'a\u200bb', 'line\u2028sep', '\ufeffbom', 'soft\u00adhyphen']) {
      const refused = await request('POST', '/admin/keys', { body: { name } });
      expect(refused.status, JSON.stringify(name)).to.equal(400);
      expect(refused.body.error.param).to.equal('name');
      // Echoed escaped, never raw (a terminal reading the message would obey it); a tab is only a tab.
      expect(refused.body.error.message, JSON.stringify(name)).to.not.match(/[\u0085\u009b\u202e\u200b\u2028\ufeff\u00ad]/);
    }
    const models = await request('POST', '/admin/keys', { body: { name: 'ctl-models', models: ['mock-\u001b[31m'] } });
    expect(models.status).to.equal(400);
    expect(models.body.error.param).to.match(/^models/);
    expect((await request('POST', '/admin/keys', { body: { name: 'café ünïcode 名前' } })).status).to.equal(201);
    // The zero-width joiner and non-joiner are text (an emoji sequence, Persian): kept.
    expect((await request('POST', '/admin/keys', { body: { name: 'dev \u{1F469}\u200d\u{1F4BB} می\u200cخواهم' } })).status).to.equal(201);
    const zeroWidth = await request('POST', '/admin/keys', { body: { name: 'zw-models', models: ['gpt-4o\u200b'] } });
    expect(zeroWidth.status).to.equal(400);
  });

  it("a key pasted into the model field is redacted in the access log and the request log, as in the answer", async () => {
    const key = await createKey({ name: 'pasted' });
    const other = await createKey({ name: 'pasted-other' });
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: other.secret, messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).to.equal(404);
    expect(await res.text()).to.not.include(other.secret);
    const requestId = res.headers.get('x-request-id')!;
    await gw.gateway.stores.flush();
    const logs = await request('GET', `/admin/logs?limit=1000`);
    const row = (logs.body.data as any[]).find((r) => r.request_id === requestId);
    expect(row, 'the request is logged').to.exist;
    expect(row.model).to.equal('[redacted]');
    expect(gw.logText()).to.not.include(other.secret);
    // Glued to a word before it (`gpt4_sk-sy-…`, `9sk-sy-…`): a key all the same.
    for (const glued of [`gpt4_${other.secret}`, `9${other.secret}`]) {
      const again = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: glued, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(await again.text()).to.not.include(other.secret.slice(10));
    }
    await gw.gateway.stores.flush();
    expect(JSON.stringify((await request('GET', `/admin/logs?limit=1000`)).body)).to.not.include(other.secret.slice(10));
    expect(gw.logText()).to.not.include(other.secret.slice(10));
  });

  it('usage grouped by key names each key by its name now, whatever it was called when its calls were made', async () => {
    const key = await createKey({ name: 'zz-old-name' });
    const client = clientFor(key.secret);
    await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] });
    expect((await request('PATCH', `/admin/keys/${key.id}`, { body: { name: 'aa-new-name' } })).status).to.equal(200);
    await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] });
    await gw.gateway.stores.flush();
    const totals = await request('GET', `/admin/usage?key=${key.id}&group_by=key`);
    expect(totals.status, totals.text).to.equal(200);
    expect(totals.body.data).to.have.length(1);
    expect(totals.body.data[0]).to.include({ key_id: key.id, key_name: 'aa-new-name', requests: 2 });
  });

  it('changes a key with PATCH, and the change holds from the next call on', async () => {
    const key = await createKey({ name: 'patchme', models: ['mock-chat'], rpm: 100, budget: 10 });
    const client = clientFor(key.secret);
    await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] });

    const patched = await request('PATCH', '/admin/keys/patchme', { body: { models: ['mock-other'], rpm: null, tpm: 5000, max_concurrent: 3, expires_in_days: 30 } });
    expect(patched.status, patched.text).to.equal(200);
    expect(patched.body).to.include({ id: key.id, name: 'patchme', rpm: null, tpm: 5000, max_concurrent: 3, budget: 10 });
    expect(patched.body.models).to.deep.equal(['mock-other']);
    expect(Date.parse(patched.body.expires_at) - Date.now()).to.be.closeTo(30 * 86_400_000, 60_000);
    // (spent aside: the first call's cost may land in between)
    const { spent: _spent, ...unchanged } = patched.body;
    expect((await request('GET', `/admin/keys/${key.id}`)).body).to.deep.include(unchanged);

    let denied: unknown;
    try {
      await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] });
    } catch (error) {
      denied = error;
    }
    expect(denied).to.be.instanceOf(OpenAI.PermissionDeniedError);
    expect((denied as InstanceType<typeof OpenAI.PermissionDeniedError>).code).to.equal('model_not_allowed');
    await client.chat.completions.create({ model: 'mock-other', messages: [{ role: 'user', content: 'hi' }] });

    // An expiry in the past expires the key at once; null lifts it.
    expect((await request('PATCH', '/admin/keys/patchme', { body: { expires_at: '2000-01-01T00:00:00Z' } })).body.expires_at).to.equal('2000-01-01T00:00:00.000Z');
    let expired: unknown;
    try {
      await client.chat.completions.create({ model: 'mock-other', messages: [{ role: 'user', content: 'hi' }] });
    } catch (error) {
      expired = error;
    }
    expect(expired).to.be.instanceOf(OpenAI.AuthenticationError);
    expect((expired as InstanceType<typeof OpenAI.AuthenticationError>).code).to.equal('expired_api_key');
    const lifted = await request('PATCH', '/admin/keys/patchme', { body: { expires_at: null, models: null, name: 'patched' } });
    expect(lifted.body).to.include({ name: 'patched', expires_at: null, models: null });
    await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] });

    // A name another usable key has is refused; an empty patch changes nothing.
    const clash = await request('PATCH', '/admin/keys/patched', { body: { name: 'pager' } });
    expect(clash.status).to.equal(400);
    expect(clash.body.error).to.include({ code: 'invalid_value', param: 'name' });
    const empty = await request('PATCH', '/admin/keys/patched', { body: {} });
    expect(empty.body).to.deep.include({ ...lifted.body, spent: empty.body.spent });
    expect((await request('PATCH', '/admin/keys/nobody', { body: { rpm: 1 } })).status).to.equal(404);
  });

  it('refuses bad input with a 400 that names the parameter', async () => {
    const cases: Array<[string, string, { body?: unknown; raw?: string; headers?: Record<string, string> }, number, string, string | null]> = [
      ['POST', '/admin/keys', { body: {} }, 400, 'missing_required_parameter', 'name'],
      ['POST', '/admin/keys', { body: { name: 'v', rpm: -1 } }, 400, 'invalid_value', 'rpm'],
      ['POST', '/admin/keys', { body: { name: 'v', rpm: 'ten' } }, 400, 'invalid_type', 'rpm'],
      ['POST', '/admin/keys', { body: { name: 'v', budget: -0.5 } }, 400, 'invalid_value', 'budget'],
      ['POST', '/admin/keys', { body: { name: 'v', models: 'mock-*' } }, 400, 'invalid_type', 'models'],
      ['POST', '/admin/keys', { body: { name: 'v', expires_at: 'next week' } }, 400, 'invalid_value', 'expires_at'],
      ['POST', '/admin/keys', { body: { name: 'v', expires_in_days: -3 } }, 400, 'invalid_value', 'expires_in_days'],
      ['POST', '/admin/keys', { body: { name: 'v', key: 'sk-sy-mine' } }, 400, 'unknown_parameter', 'key'],
      ['POST', '/admin/keys', { body: { name: 'pager' } }, 400, 'invalid_value', 'name'],
      ['POST', '/admin/keys', { raw: '{"name": "v",' }, 400, 'invalid_json', null],
      ['POST', '/admin/keys', { raw: 'name=v', headers: { 'content-type': 'application/x-www-form-urlencoded' } }, 415, 'unsupported_media_type', null],
      ['PATCH', '/admin/keys/pager', { body: { max_concurrent: 0 } }, 400, 'invalid_value', 'max_concurrent'],
      ['PATCH', '/admin/keys/pager', { body: { name: null } }, 400, 'invalid_type', 'name'],
      ['GET', '/admin/logs?status=ok', {}, 400, 'invalid_value', 'status'],
      ['GET', '/admin/logs?status=99', {}, 400, 'invalid_value', 'status'],
      ['GET', '/admin/logs?limit=0', {}, 400, 'invalid_value', 'limit'],
      ['GET', '/admin/logs?limit=many', {}, 400, 'invalid_value', 'limit'],
      ['GET', '/admin/logs?since=yesterday', {}, 400, 'invalid_value', 'since'],
      ['GET', '/admin/logs?until=2025-01-01T25:00:00', {}, 400, 'invalid_value', 'until'],
      ['GET', '/admin/logs?since=2025-02-01&until=2025-01-01', {}, 400, 'invalid_value', 'until'],
      ['GET', '/admin/logs?model=a&model=b', {}, 400, 'invalid_value', 'model'],
      ['GET', '/admin/logs?key=nobody', {}, 404, 'key_not_found', 'key'],
      ['GET', '/admin/logs?cursor=bm9wZQ', {}, 400, 'invalid_cursor', 'cursor'],
      ['GET', '/admin/logs?cursor=%00%00', {}, 400, 'invalid_cursor', 'cursor'],
      ['GET', '/admin/logs?sort=asc', {}, 400, 'unknown_parameter', 'sort'],
      ['GET', '/admin/usage?group_by=week', {}, 400, 'invalid_value', 'group_by'],
      ['GET', '/admin/usage?since=1e12', {}, 400, 'invalid_value', 'since'],
      ['GET', '/admin/usage?key=nobody', {}, 404, 'key_not_found', 'key'],
      ['GET', '/admin/keys/nobody', {}, 404, 'key_not_found', null],
      // A parameter a route does not know is refused before it acts: no key without its budget, no revocation by a "dry run".
      ['POST', '/admin/keys?budget=5', { body: { name: 'query-budget' } }, 400, 'unknown_parameter', 'budget'],
      ['PATCH', '/admin/keys/pager?rpm=9', { body: {} }, 400, 'unknown_parameter', 'rpm'],
      ['DELETE', '/admin/keys/pager?dry_run=true', {}, 400, 'unknown_parameter', 'dry_run'],
      ['POST', '/admin/keys/pager/revoke?confirm=false', {}, 400, 'unknown_parameter', 'confirm'],
      ['GET', '/admin/keys/pager?x=1', {}, 400, 'unknown_parameter', 'x'],
    ];
    for (const [method, path, options, status, code, param] of cases) {
      const answer = await request(method, path, options);
      const what = `${method} ${path} ${options.raw ?? JSON.stringify(options.body ?? '')}`;
      expect(answer.status, what).to.equal(status);
      expect(answer.body.error, what).to.include({ code, param });
      if (param) expect(answer.body.error.message, what).to.include(param);
    }
    expect((await request('GET', '/admin/keys/pager')).body.revoked_at).to.equal(null);
    expect((await request('GET', '/admin/keys')).body.data.map((k: { name: string }) => k.name)).to.not.include('query-budget');
  });

  it('answers an unknown /admin path with the usual 404 JSON', async () => {
    for (const [method, path] of [
      ['GET', '/admin'],
      ['GET', '/admin/nothing-here'],
      ['PUT', '/admin/keys'],
      ['GET', '/admin/keys/pager/revoke'],
    ]) {
      const answer = await request(method!, path!);
      expect(answer.status, `${method} ${path}`).to.equal(404);
      expect(answer.headers.get('content-type')).to.match(/^application\/json/);
      expect(answer.body.error).to.include({ code: 'not_found', type: 'invalid_request_error' });
    }
  });

  it('never shows a secret again after the answer that created it, nor logs one', async () => {
    const key = await createKey({ name: 'once', budget: 100 });
    await clientFor(key.secret).chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello' }] });
    await waitFor(async () => ((await request('GET', '/admin/usage?key=once')).body.data.length > 0 ? true : undefined), 'usage of once');
    const creation = seen.findIndex((text) => text.includes(key.secret));
    await request('GET', '/admin/keys');
    await request('GET', '/admin/keys/once');
    await request('GET', `/admin/keys/${key.id}`);
    await request('PATCH', '/admin/keys/once', { body: { rpm: 10 } });
    await request('GET', '/admin/logs?limit=1000');
    await request('GET', '/admin/logs?key=once');
    await request('GET', '/admin/usage?group_by=key,model,day');
    // An operator who pastes the secret itself into the path (to revoke a leaked key, say).
    await request('POST', `/admin/keys/${key.secret}/revoke`);
    await request('GET', `/admin/keys/${key.secret}`);
    await request('POST', '/admin/keys/once/revoke');
    await request('DELETE', '/admin/keys/once');

    expect(creation).to.be.greaterThan(-1);
    const later = seen.slice(creation + 1).join('\n');
    expect(later).to.not.include(key.secret);
    // Nor any other secret handed out in this suite, after its own creation answer.
    for (const secret of secrets) {
      const at = seen.findIndex((text) => text.includes(secret));
      expect(seen.slice(at + 1).join('\n')).to.not.include(secret);
      expect(gw.logText()).to.not.include(secret);
      expect(gw.logText()).to.not.include(secret.slice(10));
    }
    expect(gw.logText()).to.not.include(ADMIN_KEY);
    // The request log holds the paths the secret was pasted into, with only its prefix.
    const pasted = await waitFor(async () => {
      const found = (await request('GET', '/admin/logs?limit=1000')).body.data.filter((e: { path: string }) => e.path.startsWith(`/admin/keys/${key.prefix}`));
      return found.length === 2 ? found : undefined;
    }, 'the two log entries of the pasted secret');
    expect(JSON.stringify(pasted)).to.not.include(key.secret.slice(12));
    // No key view anywhere has a hash in it.
    const list = await request('GET', '/admin/keys');
    for (const view of list.body.data) expect(Object.keys(view).sort()).to.deep.equal(KEY_FIELDS);
  });
});

describe('admin API beside keys declared in auth.keys', () => {
  it('refuses a name auth.keys declares, even while that key is revoked, so a restart never finds two keys of one name', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-admin-'));
    const yaml = config(`auth: { adminKey: ${ADMIN_KEY}, keys: [{ name: cfgkey, key: sk-config-declared-000000001 }] }`).replace("url: ':memory:'", `url: ${JSON.stringify(path.join(dir, 'store.db'))}`);
    let gw = await startGateway(yaml);
    const call = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${gw.url}${route}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    try {
      expect((await call('POST', '/admin/keys/cfgkey/revoke')).status).to.equal(200);
      const taken = await call('POST', '/admin/keys', { name: 'cfgkey' });
      expect(taken.status).to.equal(400);
      expect(taken.body.error).to.include({ code: 'invalid_value', param: 'name' });
      expect(taken.body.error.message).to.include('auth.keys');
      const other = await call('POST', '/admin/keys', { name: 'other' });
      expect(other.status).to.equal(201);
      expect((await call('PATCH', '/admin/keys/other', { name: 'cfgkey' })).status).to.equal(400);
      await gw.stop();
      // The next start restores the declared key beside the one the admin API made.
      gw = await startGateway(yaml);
      const listed = await call('GET', '/admin/keys');
      expect(listed.body.data.filter((k: { name: string; revoked_at: unknown }) => k.revoked_at === null).map((k: { name: string }) => k.name).sort()).to.deep.equal(['cfgkey', 'other']);
    } finally {
      await gw.stop();
    }
  });
});

describe('admin API without auth.adminKey', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(config(''));
  });
  after(async () => gw?.stop());

  it('answers 403 admin_disabled on every admin route, whatever key is sent', async () => {
    for (const [method, path] of ROUTES) {
      for (const authorization of [undefined, `Bearer ${ADMIN_KEY}`]) {
        const res = await fetch(`${gw.url}${path}`, {
          method,
          headers: { ...(authorization ? { authorization } : {}), 'content-type': 'application/json' },
          body: method === 'POST' || method === 'PATCH' ? '{"name":"x"}' : undefined,
        });
        const body = (await res.json()) as { error: { code: string; type: string } };
        expect(res.status, `${method} ${path}`).to.equal(403);
        expect(body.error).to.include({ code: 'admin_disabled', type: 'permission_error' });
      }
    }
    // And nothing was created behind the refusal.
    expect(await gw.gateway.stores.keys.list()).to.deep.equal([]);
  });
});

function pick(object: Record<string, unknown>, fields: string[]): Record<string, unknown> {
  return Object.fromEntries(fields.map((f) => [f, object[f]]));
}

describe('admin API without the auth plugin before it', () => {
  it('refuses to start, rather than serve /admin unguarded', async () => {
    for (const plugins of ['[request-log, validation, routing, admin, openai-chat]', '[request-log, admin, auth, openai-chat]']) {
      const yaml = config(`auth: { adminKey: ${ADMIN_KEY} }`).replace(/^plugins: .*$/m, `plugins: ${plugins}`);
      let failure: unknown;
      try {
        const gw = await startGateway(yaml);
        await gw.stop();
      } catch (error) {
        failure = error;
      }
      expect(String(failure), plugins).to.include("plugin 'admin' needs plugin 'auth' listed before it");
    }
  });
});
