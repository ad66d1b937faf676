/**
 * Routing and failure handling (issue 4), end to end: real gateways on real sockets in front of
 * fake OpenAI-compatible upstreams whose behaviour each test sets (status, delay before
 * headers, delay between chunks, reset after N chunks, malformed SSE, stall).
 *
 * No fixed sleeps: every wait is a bounded poll on something observable, except where the rule
 * itself is about time (a cooldown, a Retry-After), and even there the test polls for the
 * moment the gateway changes its mind.
 */
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import OpenAI from 'openai';
import { loadConfig } from '../config/load.js';
import { createGateway, type Gateway } from '../core/gateway.js';
import { createLogger } from '../core/logger.js';
import { builtins } from '../plugins/builtins.js';
import { script, type Script } from './fakes/behaviour.js';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { eventually, startGateway, writeConfig, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { jsonOrUndefined } from './support/json.js';
import { freePort } from './support/ports.js';

const CLIENT_KEY = 'sk-client-resilience-0123456789';
const LIMITED_KEY = 'sk-limited-resilience-0123456789';
const ADMIN_KEY = 'admin-resilience-key-0123456789';

interface Upstream {
  name: string;
  fake: FakeOpenAI;
  s: Script;
}

const upstreams: Record<'a' | 'b' | 'c', Upstream> = {
  a: { name: 'a', fake: new FakeOpenAI('sk-upstream-a-secret-000111'), s: undefined as unknown as Script },
  b: { name: 'b', fake: new FakeOpenAI('sk-upstream-b-secret-222333'), s: undefined as unknown as Script },
  c: { name: 'c', fake: new FakeOpenAI('sk-upstream-c-secret-444555'), s: undefined as unknown as Script },
};
const { a, b, c } = upstreams;

/** Requests an upstream received for one of its (upstream) model names. */
const got = (u: Upstream, model: string) => u.fake.received.filter((r) => r.body?.model === model);

function config(routing: Record<string, unknown>, providers: string, models: string, extra = ''): string {
  return `
server: { host: 127.0.0.1, port: 0 }
storage: { driver: sqlite, url: ':memory:' }
auth:
  adminKey: ${ADMIN_KEY}
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
    - { name: limited, key: ${LIMITED_KEY}, models: [weighted, 'prim*'] }
plugins:
  - request-log
  - auth
  - validation
  - { name: routing, options: ${JSON.stringify(routing)} }
  - admin
  - openai-chat
${extra}
providers:
${providers}
models:
${models}
`;
}

/** One `providers:` entry for a fake upstream. */
const provider = (id: string, u: Upstream, more = '') =>
  `  - { id: ${id}, type: openai, baseUrl: ${u.fake.url}/v1, apiKey: ${u.fake.apiKey}${more ? `, ${more}` : ''} }`;

interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
  ms: number;
}

/** A chat completion over plain fetch (headers and raw body visible). */
async function chat(gw: RunningGateway, model: string, options: { stream?: boolean; key?: string } = {}): Promise<Answer> {
  const started = Date.now();
  const reply = await postJson(gw.url, '/v1/chat/completions', { model, stream: options.stream === true, messages: [{ role: 'user', content: 'hi' }] }, options.key ?? CLIENT_KEY);
  return { ...reply, body: jsonOrUndefined(reply.text), ms: Date.now() - started };
}

/** Which back end answered a non-streamed call (`a: ok` -> `a`). */
const answeredBy = (answer: Answer): string | undefined => {
  const content = answer.body?.choices?.[0]?.message?.content as string | undefined;
  return content?.split(':')[0];
};

async function admin(gw: RunningGateway, pathAndQuery: string): Promise<any> {
  const res = await fetch(`${gw.url}${pathAndQuery}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  expect(res.status, `${pathAndQuery}: ${res.status}`).to.equal(200);
  return res.json();
}

/** One target's row in GET /admin/providers. */
async function targetState(gw: RunningGateway, providerId: string, model: string): Promise<any> {
  const view = await admin(gw, '/admin/providers');
  const p = view.data.find((x: any) => x.id === providerId);
  return p?.targets.find((t: any) => t.model === model);
}

/** Poll an async condition (bounded; no fixed sleeps). */
async function until(probe: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Run `n` calls, `width` at a time. */
async function many<T>(n: number, width: number, fn: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await fn(i);
      }
    }),
  );
  return out;
}

/** The events of an SSE text: parsed JSON, or the raw data (`[DONE]`). */
function events(text: string): any[] {
  return text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length))
    .map((d) => {
      try {
        return JSON.parse(d);
      } catch {
        return d;
      }
    });
}

/** The request-log rows so far (flushed first). */
async function logRows(gw: RunningGateway): Promise<any[]> {
  await gw.gateway.stores.flush();
  return (await gw.gateway.stores.logs.query({ limit: 1000 })).entries;
}


describe('routing and resilience (end to end, fake upstreams)', function () {
  this.timeout(20_000);

  before(async () => {
    for (const u of Object.values(upstreams)) {
      await u.fake.start();
      u.s = script(u.fake, u.name);
    }
  });
  afterEach(() => {
    for (const u of Object.values(upstreams)) {
      u.fake.release();
      u.s.clear();
      u.fake.received.length = 0;
    }
  });
  after(async () => {
    for (const u of Object.values(upstreams)) await u.fake.stop();
  });

  // -------------------------------------------------------------------------------------------
  describe('routing: tiers, weights, fallbacks, operations, keys', () => {
    let gw: RunningGateway;

    before(async () => {
      const file = writeConfig(
        config(
          {},
          [
            provider('a', a, 'models: [a-own]'),
            provider('b', b),
            provider('c', c),
            '  - { id: e, type: embed-only, models: [embed-own] }',
          ].join('\n'),
          `
  - name: weighted
    targets:
      - { provider: a, model: m-w, weight: 3 }
      - { provider: b, model: m-w, weight: 1 }
      - { provider: c, model: m-w, priority: 1 }
  - name: tiered
    targets:
      - { provider: a, model: m-t, weight: 3 }
      - { provider: b, model: m-t, weight: 1 }
      - { provider: c, model: m-t, priority: 1 }
  - name: primary
    targets:
      - { provider: a, model: m-p, priority: 0 }
      - { provider: c, model: m-p, priority: 5 }
    fallbacks: [backup]
  - name: backup
    targets:
      - { provider: b, model: m-p }
  - name: mixed
    targets:
      - { provider: e, model: embed-own, weight: 100 }
      - { provider: a, model: m-mixed, priority: 1 }
  - name: embeds
    targets:
      - { provider: e, model: embed-own }
`,
          '  - ./embed-only.js',
        ),
      );
      // A provider type that serves embeddings only: never a candidate for a chat call.
      writeFileSync(
        path.join(path.dirname(file), 'embed-only.js'),
        `export default {
  name: 'embed-only',
  version: '0.0.1',
  apply(api) {
    api.registerProviderType({
      type: 'embed-only',
      create(config) {
        return {
          id: config.id,
          type: config.type,
          models: config.models ?? [],
          operations: {
            embeddings: async () => {
              globalThis.__embedOnlyCalls = (globalThis.__embedOnlyCalls ?? 0) + 1;
              return { kind: 'json', status: 200, body: { object: 'list', data: [] } };
            },
          },
        };
      },
    });
  },
};
`,
      );
      gw = await startGateway(file);
    });
    after(async () => gw?.stop());

    it('chooses inside the best tier by weight (3:1 over 400 calls) and never touches the lower tier while it is healthy', async () => {
      const answers = await many(400, 8, () => chat(gw, 'weighted'));
      const by: Record<string, number> = {};
      for (const answer of answers) {
        expect(answer.status).to.equal(200);
        const who = answeredBy(answer)!;
        by[who] = (by[who] ?? 0) + 1;
      }
      // 3:1 is 75 %; the standard deviation over 400 draws is about 2.2 %.
      expect(by.a! / 400, JSON.stringify(by)).to.be.within(0.66, 0.84);
      expect(by.a! + by.b!).to.equal(400);
      expect(by.c ?? 0).to.equal(0);
      expect(got(c, 'm-w')).to.have.length(0);
      // One attempt per call: nothing was retried.
      expect(got(a, 'm-w').length + got(b, 'm-w').length).to.equal(400);
    });

    it('uses a lower tier only when the upper one is unavailable', async () => {
      a.s.set({ status: 500 }, 'm-t');
      b.s.set({ status: 500 }, 'm-t');
      // The upper tier fails: the call moves down to c within the same request.
      for (let i = 0; i < 3; i++) {
        const answer = await chat(gw, 'tiered');
        expect(answer.status).to.equal(200);
        expect(answeredBy(answer)).to.equal('c');
      }
      expect(got(a, 'm-t')).to.have.length(3);
      expect(got(b, 'm-t')).to.have.length(3);
      // Both upper targets now cool down (3 consecutive failures): calls go straight to c.
      for (let i = 0; i < 5; i++) expect(answeredBy(await chat(gw, 'tiered'))).to.equal('c');
      expect(got(a, 'm-t')).to.have.length(3);
      expect(got(b, 'm-t')).to.have.length(3);
      expect(got(c, 'm-t')).to.have.length(8);
    });

    it('tries the fallback models last, after every tier of the requested model', async () => {
      const route = await admin(gw, '/admin/route?model=primary');
      expect(route.order).to.deep.equal([
        { provider: 'a', model: 'm-p', via: 'primary' },
        { provider: 'c', model: 'm-p', via: 'primary' },
        { provider: 'b', model: 'm-p', via: 'backup' },
      ]);
      a.s.set({ status: 502 }, 'm-p');
      c.s.set({ status: 503 }, 'm-p');
      const answer = await chat(gw, 'primary');
      expect(answer.status).to.equal(200);
      expect(answeredBy(answer)).to.equal('b');
      const row = (await logRows(gw)).find((r) => r.model === 'primary');
      expect(row.attempts.map((x: any) => [x.provider, x.status])).to.deep.equal([
        ['a', 502],
        ['c', 503],
        ['b', 200],
      ]);
    });

    it('only considers providers that serve the operation', async () => {
      const answer = await chat(gw, 'mixed');
      expect(answer.status).to.equal(200);
      expect(answeredBy(answer)).to.equal('a');
      expect((globalThis as Record<string, unknown>).__embedOnlyCalls ?? 0).to.equal(0);
      const route = await admin(gw, '/admin/route?model=mixed');
      expect(route.order).to.deep.equal([{ provider: 'a', model: 'm-mixed', via: 'mixed' }]);

      const refused = await chat(gw, 'embeds');
      expect(refused.status).to.equal(400);
      expect(refused.body.error.code).to.equal('operation_not_supported');
      const embeddings = await admin(gw, '/admin/route?model=embeds&operation=embeddings');
      expect(embeddings.order).to.deep.equal([{ provider: 'e', model: 'embed-own', via: 'embeds' }]);
    });

    it("applies a key's allowed models to public names, and GET /v1/models lists only those", async () => {
      const limited = new OpenAI({ apiKey: LIMITED_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const listed = [];
      for await (const m of limited.models.list()) listed.push(m.id);
      expect(listed.sort()).to.deep.equal(['primary', 'weighted']);

      const ok = await limited.chat.completions.create({ model: 'weighted', messages: [{ role: 'user', content: 'x' }] });
      expect(ok.choices[0]!.message.content).to.match(/^[ab]: ok$/);

      // The upstream name behind an allowed alias is not a public name the key may use.
      for (const model of ['a-own', 'tiered', 'm-w']) {
        const error = (await limited.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
        expect(error, model).to.be.instanceOf(OpenAI.PermissionDeniedError);
        expect(error.code).to.equal('model_not_allowed');
      }
      // A body with no model, or one that is not a name, is a malformed request (400 naming it),
      // as it is for a key without a list: not a model the key may not use.
      for (const [body, code] of [
        [{ messages: [{ role: 'user', content: 'x' }] }, 'missing_required_parameter'],
        [{ model: ['weighted'], messages: [{ role: 'user', content: 'x' }] }, 'invalid_type'],
      ] as const) {
        const response = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${LIMITED_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        expect(response.status, code).to.equal(400);
        expect(((await response.json()) as { error: { code: string; param: string } }).error).to.include({ code, param: 'model' });
      }
      const full = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const all = [];
      for await (const m of full.models.list()) all.push(m.id);
      expect(all).to.include.members(['weighted', 'tiered', 'primary', 'backup', 'mixed', 'a-own', 'embed-own']);
      expect(all).to.not.include('m-w');
    });

    it('GET /admin/route explains the order: tiers, weights, shares, health', async () => {
      const route = await admin(gw, '/admin/route?model=weighted&operation=chat');
      expect(route).to.include({ model: 'weighted', operation: 'chat', known: true });
      expect(route.chain).to.have.length(1);
      const [tier0, tier1] = route.chain[0].tiers;
      expect(tier0.priority).to.equal(0);
      expect(tier1.priority).to.equal(1);
      const rows = tier0.targets.map((t: any) => [t.provider, t.weight, t.share, t.available, t.state]);
      expect(rows).to.deep.equal([
        ['a', 3, 0.75, true, 'healthy'],
        ['b', 1, 0.25, true, 'healthy'],
      ]);
      expect(tier1.targets[0]).to.include({ provider: 'c', weight: 1, share: 1, available: true });
      expect(tier0.targets[0].reason).to.match(/weight 3 of 4/);
      expect(route.order.map((o: any) => o.provider).slice(2)).to.deep.equal(['c']);

      // A target cooling down (from the tiered test) is explained as such and left out of the order.
      const tiered = await admin(gw, '/admin/route?model=tiered');
      const upper = tiered.chain[0].tiers[0].targets;
      for (const t of upper) {
        expect(t).to.include({ state: 'cooling_down', available: false, share: 0 });
        expect(t.reason).to.match(/cooling down until .* after 3 failure/);
      }
      expect(tiered.order).to.deep.equal([{ provider: 'c', model: 'm-t', via: 'tiered' }]);

      const headers = { authorization: `Bearer ${ADMIN_KEY}` };
      const unknown = await fetch(`${gw.url}/admin/route?model=nope`, { headers });
      expect(unknown.status).to.equal(404);
      expect(((await unknown.json()) as any).error).to.include({ code: 'model_not_found', param: 'model' });
      const typo = await fetch(`${gw.url}/admin/route?modle=weighted`, { headers });
      expect(typo.status).to.equal(400);
      expect(((await typo.json()) as any).error).to.include({ code: 'unknown_parameter', param: 'modle' });
      const client = await fetch(`${gw.url}/admin/route?model=weighted`, { headers: { authorization: `Bearer ${CLIENT_KEY}` } });
      expect(client.status).to.equal(401);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('retries', () => {
    let gw: RunningGateway;
    let client: OpenAI;

    before(async () => {
      const dead = await freePort();
      gw = await startGateway(
        config(
          // The breaker stays closed here, so every rule is about retries alone.
          { failureThreshold: 100000 },
          [
            provider('a', a),
            provider('a-fast', a, 'timeouts: { firstByteMs: 300 }'),
            provider('b', b),
            provider('c', c),
            `  - { id: dead, type: openai, baseUrl: 'http://127.0.0.1:${dead}/v1', apiKey: sk-dead-0000000000 }`,
          ].join('\n'),
          `
  - name: pair
    targets: [{ provider: a, model: m-pair }, { provider: b, model: m-pair, priority: 1 }]
  - name: refused
    targets: [{ provider: dead, model: m-r }, { provider: b, model: m-r, priority: 1 }]
  - name: slowfirst
    targets: [{ provider: a-fast, model: m-sf }, { provider: b, model: m-sf, priority: 1 }]
  - name: twice
    targets:
      - { provider: a, model: m-2, priority: 0 }
      - { provider: a, model: m-2, priority: 1 }
      - { provider: b, model: m-2, priority: 2 }
      - { provider: c, model: m-2, priority: 3 }
  - name: three
    targets: [{ provider: a, model: m-3 }, { provider: b, model: m-3, priority: 1 }, { provider: c, model: m-3, priority: 2 }]
  - name: ra
    targets: [{ provider: a, model: m-ra }, { provider: b, model: m-ra, priority: 1 }]
  - name: solo
    targets: [{ provider: a, model: m-solo }]
  - name: slowsolo
    targets: [{ provider: a-fast, model: m-ss }]
`,
        ),
      );
      client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    });
    after(async () => gw?.stop());

    for (const status of [408, 429, 500, 502, 503]) {
      it(`retries an upstream ${status} on the next target before the first byte`, async () => {
        a.s.set({ status }, 'm-pair');
        const completion = await client.chat.completions.create({ model: 'pair', messages: [{ role: 'user', content: 'x' }] });
        expect(completion.choices[0]!.message.content).to.equal('b: ok');
        expect(got(a, 'm-pair')).to.have.length(1);
        expect(got(b, 'm-pair')).to.have.length(1);
      });
    }

    const never: Array<[number, number, string]> = [
      [400, 400, 'upstream_bad_request'],
      [401, 502, 'upstream_error'],
      [403, 502, 'upstream_error'],
      [404, 502, 'upstream_error'],
      [413, 400, 'upstream_bad_request'],
      [422, 400, 'upstream_bad_request'],
    ];
    for (const [status, expected, code] of never) {
      it(`never retries an upstream ${status} (the second back end receives nothing)`, async () => {
        a.s.set({ status }, 'm-pair');
        const error = (await client.chat.completions.create({ model: 'pair', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
        expect(error).to.be.instanceOf(OpenAI.APIError);
        expect(error.status).to.equal(expected);
        expect(error.code).to.equal(code);
        expect(got(a, 'm-pair')).to.have.length(1);
        expect(b.fake.received).to.have.length(0);
      });
    }

    it("a prompt too long for the back end's model: the client gets context_length_exceeded and the field, as from the vendor; not retried", async () => {
      const errorBody = {
        error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' },
      };
      a.s.set({ status: 400, errorBody }, 'm-pair');
      for (const stream of [false, true]) {
        const error = (await client.chat.completions.create({ model: 'pair', stream, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
        expect(error).to.be.instanceOf(OpenAI.BadRequestError);
        expect([error.code, error.param, error.type]).to.deep.equal(['context_length_exceeded', 'messages', 'invalid_request_error']);
        expect(error.message).to.include('maximum context length is 8192 tokens');
      }
      expect(got(a, 'm-pair')).to.have.length(2);
      expect(b.fake.received).to.have.length(0);
    });

    it('retries a refused connection on the next target', async () => {
      const completion = await client.chat.completions.create({ model: 'refused', messages: [{ role: 'user', content: 'x' }] });
      expect(completion.choices[0]!.message.content).to.equal('b: ok');
      const row = (await logRows(gw)).find((r) => r.model === 'refused');
      expect(row.attempts[0]).to.include({ provider: 'dead', status: 'error', error: 'upstream_error' });
      // Why, for the operator: what a client would have been told.
      expect(row.attempts[0].message).to.match(/connection|connect/i);
      expect(row.attempts[1]).to.include({ provider: 'b', status: 200 });
      expect(row.attempts[1]).to.not.have.property('message');
    });

    it('retries a first-byte timeout on the next target, and the slow upstream request is aborted', async () => {
      a.s.set({ headerDelayMs: 5000 }, 'm-sf');
      const started = Date.now();
      const completion = await client.chat.completions.create({ model: 'slowfirst', messages: [{ role: 'user', content: 'x' }] });
      expect(completion.choices[0]!.message.content).to.equal('b: ok');
      // Well before the 5 s the slow back end would take, with room for a slow machine.
      expect(Date.now() - started).to.be.below(4000);
      await eventually(() => got(a, 'm-sf')[0]?.aborted === true, 1000, 'the slow request to be aborted');
    });

    it('answers 504 upstream_timeout when the only back end is too slow to start answering', async () => {
      a.s.set({ headerDelayMs: 5000 }, 'm-ss');
      for (const stream of [false, true]) {
        const answer = await chat(gw, 'slowsolo', { stream });
        expect(answer.status).to.equal(504);
        expect(answer.body.error).to.include({ code: 'upstream_timeout', type: 'timeout_error' });
        expect(answer.ms).to.be.below(4000);
      }
    });

    it('sends each retry to a target not yet tried in this request', async () => {
      a.s.set({ status: 500 }, 'm-2');
      b.s.set({ status: 503 }, 'm-2');
      const completion = await client.chat.completions.create({ model: 'twice', messages: [{ role: 'user', content: 'x' }] });
      expect(completion.choices[0]!.message.content).to.equal('c: ok');
      expect(got(a, 'm-2')).to.have.length(1);
      expect(got(b, 'm-2')).to.have.length(1);
      expect(got(c, 'm-2')).to.have.length(1);
    });

    for (const [what, behaviour] of [
      ['cut right after its headers', { resetAfter: 0 }],
      ['whose first event is not JSON', { malformedAfter: 0 }],
    ] as const) {
      it(`retries a stream ${what} on the next target: nothing had reached the client`, async () => {
        a.s.set(behaviour, 'm-pair');
        const answer = await chat(gw, 'pair', { stream: true });
        expect(answer.status).to.equal(200);
        const received = events(answer.text);
        expect(received.map((e) => e.choices?.[0]?.delta?.content ?? '').join('')).to.equal('b: 12');
        expect(received.some((e) => e.error)).to.equal(false);
        expect(got(a, 'm-pair')).to.have.length(1);
        expect(got(b, 'm-pair')).to.have.length(1);
      });
    }

    it('does not retry once the first byte reached the client (a stream cut after one chunk)', async () => {
      a.s.set({ chunks: 5, resetAfter: 1 }, 'm-pair');
      const answer = await chat(gw, 'pair', { stream: true });
      expect(answer.status).to.equal(200);
      const received = events(answer.text);
      expect(received[0].choices[0].delta.content).to.equal('a: ');
      expect(received[received.length - 1].error).to.include({ code: 'upstream_error', type: 'api_error' });
      expect(b.fake.received).to.have.length(0);
    });

    it('honours Retry-After: the target is skipped until then, and used again after', async () => {
      a.s.set({ status: 429, headers: { 'retry-after': '2' } }, 'm-ra');
      const first = await chat(gw, 'ra');
      const limitedAt = Date.now();
      expect(answeredBy(first)).to.equal('b');
      const state = await targetState(gw, 'a', 'm-ra');
      expect(state.state).to.equal('cooling_down');
      const until_ = Date.parse(state.cooling_down_until);
      // About two seconds from the 429 (the client saw it a little after the gateway did).
      expect(until_ - limitedAt).to.be.within(1000, 2100);

      a.s.set({}, 'm-ra');
      // Skipped while the back end asked to be left alone...
      for (let i = 0; i < 5; i++) expect(answeredBy(await chat(gw, 'ra'))).to.equal('b');
      expect(got(a, 'm-ra')).to.have.length(1);
      // ...and tried again once that time is over.
      await until(async () => answeredBy(await chat(gw, 'ra')) === 'a', 6000, 'a to be used again');
      expect(Date.now()).to.be.at.least(until_);
      expect(got(a, 'm-ra')).to.have.length(2);
      expect((await targetState(gw, 'a', 'm-ra')).state).to.equal('healthy');
    });

    it('a single target that failed once: no x-should-retry, so the client SDK retries as it would against the back end itself', async () => {
      a.s.set({ status: 500 }, 'm-solo');
      const answer = await chat(gw, 'solo');
      expect(answer.status).to.equal(502);
      expect(got(a, 'm-solo')).to.have.length(1);
      expect(answer.headers.get('x-should-retry')).to.equal(null);
    });

    it('gives the client an OpenAI-shaped error with a gateway code, never the raw body, host or key; the log keeps the attempt chain', async () => {
      for (const u of [a, b, c]) u.s.set({ status: 500 }, 'm-3');
      const answer = await chat(gw, 'three');
      expect(answer.status).to.equal(502);
      expect(Object.keys(answer.body)).to.deep.equal(['error']);
      expect(answer.body.error).to.include({ code: 'upstream_error', type: 'api_error', param: null });
      for (const u of [a, b, c]) {
        expect(answer.text).to.not.include(u.fake.apiKey);
        expect(answer.text).to.not.include(u.fake.url);
      }
      for (const leak of ['db-7', 'internal', '127.0.0.1', 'backend']) expect(answer.text).to.not.include(leak);
      expect(got(a, 'm-3').length + got(b, 'm-3').length + got(c, 'm-3').length).to.equal(3);
      // Three targets tried: the client's SDK is told not to try again on top.
      expect(answer.headers.get('x-should-retry')).to.equal('false');

      const rows = await logRows(gw);
      const row = rows.find((r) => r.requestId === answer.headers.get('x-request-id'));
      expect(row).to.include({ status: 502, errorCode: 'upstream_error' });
      expect(row.attempts.map((x: any) => x.provider)).to.deep.equal(['a', 'b', 'c']);
      for (const attempt of row.attempts) {
        // The back end's own status, kept for the operator.
        expect(attempt).to.include({ model: 'm-3', status: 500, error: 'upstream_error' });
        expect(attempt.durationMs).to.be.a('number').at.least(0);
      }
      // The admin API shows the same chain.
      const logs = await admin(gw, '/admin/logs?limit=100');
      const entry = logs.data.find((e: any) => e.request_id === answer.headers.get('x-request-id'));
      expect(entry.attempts.map((x: any) => [x.provider, x.status, x.error])).to.deep.equal([
        ['a', 500, 'upstream_error'],
        ['b', 500, 'upstream_error'],
        ['c', 500, 'upstream_error'],
      ]);
      expect(entry.attempts[0].duration_ms).to.be.a('number');
      expect(JSON.stringify(logs)).to.not.include('db-7');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('retry budget: a dead back end cannot multiply the load', () => {
    let gw: RunningGateway;

    before(async () => {
      gw = await startGateway(
        config(
          // Breakers that never open: only the budget limits retries.
          { failureThreshold: 100000 },
          [provider('a', a), provider('b', b)].join('\n'),
          `
  - name: only
    targets: [{ provider: a, model: m-only }]
    fallbacks: [only-again]
  - name: only-again
    targets: [{ provider: a, model: m-only }]
  - name: twodead
    targets: [{ provider: a, model: m-dead }, { provider: b, model: m-dead, priority: 1 }]
`,
        ),
      );
    });
    after(async () => gw?.stop());

    it('sends at most 1.2 upstream requests per client request when the only back end answers 503', async () => {
      a.s.set({ status: 503 });
      const answers = await many(200, 8, () => chat(gw, 'only'));
      for (const answer of answers) expect(answer.status).to.equal(503); // upstream_overloaded
      const upstream = got(a, 'm-only').length;
      expect(upstream / 200).to.be.at.most(1.2);
      expect(upstream).to.equal(200); // the same back end behind a fallback is not tried twice
    });

    it('keeps two dead back ends to the budget: about 1.2x plus the burst of 10', async () => {
      a.s.set({ status: 503 });
      b.s.set({ status: 500 });
      const answers = await many(200, 8, () => chat(gw, 'twodead'));
      // The last failure answers: a's 503 when the retry budget let nothing more go, else b's 500.
      for (const answer of answers) expect([502, 503]).to.include(answer.status);
      const upstream = got(a, 'm-dead').length + got(b, 'm-dead').length;
      expect(got(a, 'm-dead')).to.have.length(200);
      // 200 first attempts; retries: the burst (10) plus 0.2 per call.
      expect(upstream).to.be.at.most(200 + 10 + 0.2 * 200);
      expect(upstream).to.be.above(200 + 10);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('circuit breaker, half-open probe, every target cooling down', () => {
    let gw: RunningGateway;
    // Long enough for the several calls a test makes inside one cooldown on a slow machine; at most
    // a second, so that the Retry-After of a call inside it is 1.
    const COOLDOWN = 1000;

    before(async () => {
      gw = await startGateway(
        config(
          { cooldownMs: COOLDOWN },
          [provider('a', a), provider('a-idle', a, 'timeouts: { idleMs: 300 }'), provider('b', b)].join('\n'),
          `
  - name: cb
    targets: [{ provider: a, model: m-cb }, { provider: b, model: m-cb, priority: 1 }]
  - name: probe
    targets: [{ provider: a, model: m-probe }, { provider: b, model: m-probe, priority: 1 }]
  - name: all
    targets: [{ provider: a, model: m-all }, { provider: b, model: m-all, priority: 1 }]
  - name: relay
    targets: [{ provider: b, model: m-relay }, { provider: a, model: m-relay, priority: 1 }]
  - name: direct
    targets: [{ provider: a, model: m-relay }]
  - name: ra-all
    targets: [{ provider: a, model: m-raall }, { provider: b, model: m-raall, priority: 1 }]
  - name: rl-all
    targets: [{ provider: a, model: m-rl }, { provider: b, model: m-rl, priority: 1 }]
  - name: broke
    targets: [{ provider: a, model: m-broke }, { provider: b, model: m-broke, priority: 1 }]
  - name: stall
    targets: [{ provider: a-idle, model: m-stall }, { provider: b, model: m-stall, priority: 1 }]
  - name: stall2
    targets: [{ provider: a-idle, model: m-stall2 }]
  - name: stall3
    targets: [{ provider: a-idle, model: m-stall3 }]
  - name: burst
    targets: [{ provider: a, model: m-burst }]
  - name: storm
    targets: [{ provider: a, model: m-storm }, { provider: b, model: m-storm, priority: 1 }]
`,
        ),
      );
    });
    after(async () => gw?.stop());

    it('cools a target down after 3 consecutive failures, probes it after cooldownMs, and closes on success', async () => {
      a.s.set({ status: 500 }, 'm-cb');
      for (let i = 0; i < 3; i++) expect(answeredBy(await chat(gw, 'cb'))).to.equal('b');
      expect(got(a, 'm-cb')).to.have.length(3);

      const cooling = await targetState(gw, 'a', 'm-cb');
      expect(cooling).to.include({ state: 'cooling_down', consecutive_failures: 3, recent_requests: 3, recent_error_rate: 1, last_error: 'upstream_error' });
      const left = Date.parse(cooling.cooling_down_until) - Date.now();
      expect(left).to.be.within(0, COOLDOWN);
      expect(cooling.latency_ms.avg).to.be.a('number');
      expect(cooling.latency_ms.p50).to.be.a('number');
      expect(cooling.latency_ms.p95).to.be.a('number');
      const healthyB = await targetState(gw, 'b', 'm-cb');
      expect(healthyB).to.include({ state: 'healthy', cooling_down_until: null, recent_error_rate: 0, recent_requests: 3 });

      // Skipped while cooling down.
      const skippedUntil = Date.parse(cooling.cooling_down_until);
      for (let i = 0; i < 3; i++) expect(answeredBy(await chat(gw, 'cb'))).to.equal('b');
      expect(Date.now(), 'the calls above ran inside the cooldown').to.be.below(skippedUntil);
      expect(got(a, 'm-cb')).to.have.length(3);

      // Half-open after the cooldown: the next call probes it. It fails: the cooldown doubles.
      await until(async () => (await targetState(gw, 'a', 'm-cb')).state === 'half_open', 6000, 'half_open');
      expect(Date.now()).to.be.at.least(skippedUntil);
      expect(answeredBy(await chat(gw, 'cb'))).to.equal('b');
      expect(got(a, 'm-cb')).to.have.length(4);
      const again = await targetState(gw, 'a', 'm-cb');
      expect(again.state).to.equal('cooling_down');
      expect(Date.parse(again.cooling_down_until) - Date.now()).to.be.above(COOLDOWN);

      // The back end recovers: the next probe succeeds and the circuit closes.
      a.s.set({}, 'm-cb');
      await until(async () => (await targetState(gw, 'a', 'm-cb')).state === 'half_open', 8000, 'half_open again');
      expect(answeredBy(await chat(gw, 'cb'))).to.equal('a');
      const closed = await targetState(gw, 'a', 'm-cb');
      expect(closed).to.include({ state: 'healthy', consecutive_failures: 0, cooling_down_until: null });
      for (let i = 0; i < 3; i++) expect(answeredBy(await chat(gw, 'cb'))).to.equal('a');
    });

    it('does not stretch the cooldown when calls already in flight fail after the circuit opened', async () => {
      a.s.set({ holdHeaders: true, status: 500 }, 'm-burst');
      const calls = Array.from({ length: 6 }, () => chat(gw, 'burst'));
      await eventually(() => got(a, 'm-burst').length === 6, 2000, 'six calls to reach a');
      a.fake.release();
      for (const answer of await Promise.all(calls)) expect(answer.status).to.equal(502);
      const state = await targetState(gw, 'a', 'm-burst');
      expect(state).to.include({ state: 'cooling_down', consecutive_failures: 6 });
      expect(Date.parse(state.cooling_down_until) - Date.now()).to.be.at.most(COOLDOWN);
    });

    it('counts a stream that fails midway as a failure of its target: three stalls cool it down', async () => {
      a.s.set({ chunks: 5, stallAfter: 1 }, 'm-stall');
      for (let i = 0; i < 3; i++) {
        const answer = await chat(gw, 'stall', { stream: true });
        const received = events(answer.text);
        expect(received[0].choices[0].delta.content).to.equal('a: ');
        expect(received[received.length - 1].error.code).to.equal('upstream_timeout');
      }
      const state = await targetState(gw, 'a-idle', 'm-stall');
      expect(state).to.include({ state: 'cooling_down', consecutive_failures: 3, last_error: 'upstream_timeout' });
      // The next call goes to b straight away, and streams to the end.
      const answer = await chat(gw, 'stall', { stream: true });
      expect(events(answer.text)[0].choices[0].delta.content).to.equal('b: ');
      expect(events(answer.text).at(-1)).to.equal('[DONE]');
      expect(got(a, 'm-stall')).to.have.length(3);
    });

    it('a stream that says midway its back end is rate limiting (an error event) counts as a failure of its target too', async () => {
      a.s.set({ chunks: 5, errorAfter: 1, errorEvent: { error: { message: 'Rate limit reached', type: 'rate_limit_error', code: 'rate_limit_exceeded' } } }, 'm-stall3');
      for (let i = 0; i < 3; i++) {
        const received = events((await chat(gw, 'stall3', { stream: true })).text);
        expect(received[received.length - 1].error.code).to.equal('upstream_rate_limited');
      }
      expect(await targetState(gw, 'a-idle', 'm-stall3')).to.include({ state: 'cooling_down', consecutive_failures: 3, last_error: 'upstream_rate_limited' });
    });

    it('a stream that completes counts as a success and starts the failure count again', async () => {
      a.s.set({ chunks: 5, stallAfter: 1 }, 'm-stall2');
      for (let i = 0; i < 2; i++) await chat(gw, 'stall2', { stream: true });
      expect(await targetState(gw, 'a-idle', 'm-stall2')).to.include({ state: 'healthy', consecutive_failures: 2 });
      a.s.set({}, 'm-stall2');
      const answer = await chat(gw, 'stall2', { stream: true });
      expect(events(answer.text).at(-1)).to.equal('[DONE]');
      expect(await targetState(gw, 'a-idle', 'm-stall2')).to.include({ state: 'healthy', consecutive_failures: 0, recent_requests: 3 });
    });

    it('lets exactly one probe through while it is in flight, even when calls arrive together', async () => {
      a.s.set({ status: 500 }, 'm-probe');
      for (let i = 0; i < 3; i++) await chat(gw, 'probe');
      expect(got(a, 'm-probe')).to.have.length(3);
      await until(async () => (await targetState(gw, 'a', 'm-probe')).state === 'half_open', 6000, 'half_open');
      a.s.set({ holdHeaders: true }, 'm-probe');
      const calls = Array.from({ length: 6 }, () => chat(gw, 'probe'));
      await eventually(() => got(a, 'm-probe').length === 4, 2000, 'the probe to arrive');
      expect((await targetState(gw, 'a', 'm-probe')).state).to.equal('probing');
      // The calls that are not the probe go to b and finish while the probe is held.
      await eventually(() => got(b, 'm-probe').length >= 5 + 3, 3000, 'the others to reach b');
      a.fake.release();
      const answers = await Promise.all(calls);
      expect(answers.map(answeredBy).sort()).to.deep.equal(['a', 'b', 'b', 'b', 'b', 'b']);
      expect(got(a, 'm-probe')).to.have.length(4);
      expect((await targetState(gw, 'a', 'm-probe')).state).to.equal('healthy');
    });

    it('never sends a second probe, not even as the retry of a call that chose its order earlier', async () => {
      // a/m-relay cools down, then becomes half-open.
      a.s.set({ status: 500 }, 'm-relay');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'direct')).status).to.equal(502);
      await until(async () => (await targetState(gw, 'a', 'm-relay')).state === 'half_open', 6000, 'half_open');
      a.s.set({ holdHeaders: true }, 'm-relay');
      // R1 chooses [b, a] now; b holds it, then fails, and R1 would move on to a.
      b.s.set({ holdHeaders: true, status: 500 }, 'm-relay');
      const r1 = chat(gw, 'relay');
      await eventually(() => got(b, 'm-relay').length === 1, 2000, 'R1 to reach b');
      // R2 asks for a alone while R1 still waits on b: either R2 probes a (held), or a's one
      // probe is already R1's and R2 is refused at once.
      const r2 = chat(gw, 'direct');
      await Promise.race([r2, eventually(() => got(a, 'm-relay').length === 4, 2000, 'R2 to probe a')]);
      a.s.set({}, 'm-relay'); // from now on a answers at once
      b.fake.release();
      const first = await r1;
      a.fake.release();
      const second = await r2;
      expect(got(a, 'm-relay'), 'requests to a while it was half-open').to.have.length(4);
      expect([first, second].filter((x) => answeredBy(x) === 'a')).to.have.length(1);
    });

    it('answers 503 no_upstream_available with Retry-After when every target cools down', async () => {
      a.s.set({ status: 500 }, 'm-all');
      b.s.set({ status: 502 }, 'm-all');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'all')).status).to.equal(502);
      const answer = await chat(gw, 'all');
      expect(answer.status).to.equal(503);
      expect(answer.body.error).to.include({ code: 'no_upstream_available', type: 'overloaded_error' });
      expect(answer.headers.get('retry-after')).to.equal('1');
      expect(got(a, 'm-all').length + got(b, 'm-all').length).to.equal(6);
    });

    it("sets that Retry-After to the earliest recovery (the back ends' own Retry-After)", async () => {
      a.s.set({ status: 503, headers: { 'retry-after': '7' } }, 'm-raall');
      b.s.set({ status: 429, headers: { 'retry-after': '3' } }, 'm-raall');
      const first = await chat(gw, 'ra-all');
      expect(first.status).to.equal(429);
      expect(first.body.error.code).to.equal('upstream_rate_limited');
      const answer = await chat(gw, 'ra-all');
      expect(answer.status).to.equal(503);
      expect(answer.body.error.code).to.equal('no_upstream_available');
      expect(answer.headers.get('retry-after')).to.equal('3');
      expect(got(a, 'm-raall')).to.have.length(1);
      expect(got(b, 'm-raall')).to.have.length(1);
    });

    it('every back end rate limiting us (429 with Retry-After): the calls while they cool down are 429 too, not 503', async () => {
      a.s.set({ status: 429, headers: { 'retry-after': '5' } }, 'm-rl');
      b.s.set({ status: 429, headers: { 'retry-after': '4' } }, 'm-rl');
      const first = await chat(gw, 'rl-all');
      expect(first.status).to.equal(429);
      expect(first.body.error.code).to.equal('upstream_rate_limited');
      const answer = await chat(gw, 'rl-all');
      expect(answer.status).to.equal(429);
      expect(answer.body.error).to.include({ code: 'upstream_rate_limited', type: 'rate_limit_error' });
      expect(Number(answer.headers.get('retry-after'))).to.be.within(3, 4);
      // Nothing was sent while they cool down.
      expect(got(a, 'm-rl')).to.have.length(1);
      expect(got(b, 'm-rl')).to.have.length(1);
    });

    it("a back end whose account is out of credit (429 insufficient_quota) is not a rate limit: the next target answers, and when none can the client is told not to retry", async () => {
      const outOfCredit = { status: 429, errorBody: { error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } } };
      a.s.set(outOfCredit, 'm-broke');
      const served = await chat(gw, 'broke');
      expect(served.status).to.equal(200);
      expect(answeredBy(served)).to.equal('b');
      b.s.set(outOfCredit, 'm-broke');
      const refused = await chat(gw, 'broke');
      expect(refused.status).to.equal(429);
      expect(refused.body.error).to.include({ code: 'upstream_quota_exhausted', type: 'insufficient_quota' });
      expect(refused.headers.get('x-should-retry')).to.equal('false');
      expect(JSON.stringify(refused.body)).to.not.include('billing details');
      // Once both are out of use for it (the breaker opened), the client still hears why, not "busy, retry".
      for (let i = 0; i < 5; i++) {
        const later = await chat(gw, 'broke');
        expect(later.status).to.equal(429);
        expect(later.body.error.code).to.equal('upstream_quota_exhausted');
        expect(later.headers.get('x-should-retry')).to.equal('false');
        expect(later.headers.get('retry-after')).to.equal(null);
      }
    });

    it('stops hammering two dead back ends: a few attempts each, then 503 at once', async () => {
      a.s.set({ status: 500 }, 'm-storm');
      b.s.set({ status: 500 }, 'm-storm');
      const answers = await many(100, 4, () => chat(gw, 'storm'));
      const upstream = got(a, 'm-storm').length + got(b, 'm-storm').length;
      expect(upstream).to.be.at.most(3 * 2 + 8); // the threshold each, plus calls already in flight
      expect(answers.filter((x) => x.status === 503).length).to.be.at.least(90);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('early probes: a model whose every target cools down', () => {
    let gw: RunningGateway;
    const EARLY = 300;

    before(async () => {
      gw = await startGateway(
        config(
          { cooldownMs: 60_000, earlyProbeMs: EARLY },
          [provider('a', a), provider('b', b)].join('\n'),
          `
  - name: solo
    targets: [{ provider: a, model: m-solo }]
  - name: hold
    targets: [{ provider: a, model: m-hold }]
  - name: capped
    targets: [{ provider: a, model: m-capped }]
  - name: dead
    targets: [{ provider: a, model: m-dead }]
  - name: pair
    targets: [{ provider: a, model: m-pair }, { provider: b, model: m-pair, priority: 1 }]
`,
          '  - rate-limit',
        ),
      );
    });
    after(async () => gw?.stop());

    it('a blip of its only back end: calls are refused at once for earlyProbeMs, then one probes it and the model is back, not after the 60 s cooldown', async () => {
      a.s.set({ status: 500 }, 'm-solo');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'solo')).status).to.equal(502);
      const refused = await chat(gw, 'solo');
      expect(refused.status).to.equal(503);
      expect(refused.body.error.code).to.equal('no_upstream_available');
      // The next early probe is less than a second away, not the cooldown's 60 s.
      expect(refused.headers.get('retry-after')).to.equal('1');
      expect((await targetState(gw, 'a', 'm-solo')).state).to.equal('cooling_down');
      a.s.set({}, 'm-solo');
      let last: Answer | undefined;
      await until(async () => (last = await chat(gw, 'solo')).status === 200, 5000, 'an early probe to reach the back end');
      expect(answeredBy(last!)).to.equal('a');
      // Only the probe reached it: the calls before it were refused without going up.
      expect(got(a, 'm-solo')).to.have.length(4);
      expect(await targetState(gw, 'a', 'm-solo')).to.include({ state: 'healthy', consecutive_failures: 0 });
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'solo')).status).to.equal(200);
    });

    it('a dead only back end gets one call at a time, earlyProbeMs and more apart, whatever the traffic', async () => {
      a.s.set({ status: 500 }, 'm-dead');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'dead')).status).to.equal(502);
      const began = Date.now();
      const answers: Answer[] = [];
      // Four clients call until two early probes have reached the back end.
      const client = async () => {
        while (got(a, 'm-dead').length < 5 && Date.now() - began < 10_000) answers.push(await chat(gw, 'dead'));
      };
      await Promise.all([client(), client(), client(), client()]);
      const elapsed = Date.now() - began;
      const probes = got(a, 'm-dead').length - 3;
      expect(probes).to.be.at.least(2);
      expect(probes, `${probes} early probes in ${elapsed} ms`).to.be.at.most(Math.floor(elapsed / EARLY) + 1);
      expect(answers.filter((x) => x.status === 503).length).to.be.above(probes);
      expect(answers.filter((x) => x.status === 502)).to.have.length(probes);
    });

    it('while an early probe is in flight, the others are told to come back in a second, not after the cooldown', async () => {
      a.s.set({ status: 500 }, 'm-hold');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'hold')).status).to.equal(502);
      a.s.set({ holdHeaders: true }, 'm-hold');
      // Calls one after another until one is the early probe, held by the back end.
      let last: { call: Promise<Answer>; done: boolean } | undefined;
      await until(
        async () => {
          if (got(a, 'm-hold').length === 4) return true;
          if (!last || last.done) {
            const call = chat(gw, 'hold');
            const entry = { call, done: false };
            void call.finally(() => (entry.done = true));
            last = entry;
          }
          return false;
        },
        5000,
        'an early probe held by the back end',
      );
      expect((await targetState(gw, 'a', 'm-hold')).state).to.equal('probing');
      const during = await chat(gw, 'hold');
      expect(during.status).to.equal(503);
      expect(during.headers.get('retry-after')).to.equal('1');
      a.s.set({}, 'm-hold');
      a.fake.release();
      expect((await last!.call).status).to.equal(200);
      expect((await targetState(gw, 'a', 'm-hold')).state).to.equal('healthy');
    });

    it("a call refused after it drew the early probe (its key's tpm) gives it back: the next call probes at once", async () => {
      const created = await fetch(`${gw.url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'tpm-one', tpm: 1 }),
      });
      expect(created.status).to.equal(201);
      const capped = ((await created.json()) as { key: string }).key;
      a.s.set({ status: 500 }, 'm-capped');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'capped')).status).to.equal(502);
      a.s.set({}, 'm-capped');
      // The capped key's calls are refused by routing (503) until one draws the early probe and
      // is refused by its tpm (429) before anything goes up.
      await until(async () => (await chat(gw, 'capped', { key: capped })).status === 429, 5000, 'the capped key to draw the early probe');
      const next = await chat(gw, 'capped');
      expect(next.status, JSON.stringify(next.body)).to.equal(200);
      expect(got(a, 'm-capped')).to.have.length(4);
    });

    it('a model with another target to go to sends nothing early to the one cooling down', async () => {
      a.s.set({ status: 500 }, 'm-pair');
      for (let i = 0; i < 3; i++) expect((await chat(gw, 'pair')).status).to.equal(200);
      expect((await targetState(gw, 'a', 'm-pair')).state).to.equal('cooling_down');
      const began = Date.now();
      // Calls for more than earlyProbeMs: b answers them all, a gets none.
      while (Date.now() - began < EARLY * 2) expect(answeredBy(await chat(gw, 'pair'))).to.equal('b');
      expect(got(a, 'm-pair')).to.have.length(3);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('timeouts and broken streams', () => {
    let gw: RunningGateway;
    const IDLE = 400;
    const TOTAL = 700;

    before(async () => {
      gw = await startGateway(
        config(
          { failureThreshold: 100000 },
          [
            provider('idle', a, `timeouts: { idleMs: ${IDLE} }`),
            provider('total', a, `timeouts: { totalMs: ${TOTAL}, idleMs: 5000 }`),
            provider('a', a),
          ].join('\n'),
          `
  - name: idle
    targets: [{ provider: idle, model: m-idle }]
  - name: total
    targets: [{ provider: total, model: m-total }]
  - name: plain
    targets: [{ provider: a, model: m-plain }]
`,
        ),
      );
    });
    after(async () => gw?.stop());

    /** Stream a call with fetch, noting when each event arrived. */
    async function streamed(model: string): Promise<{ status: number; events: any[]; times: number[]; endedAt: number }> {
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const out: any[] = [];
      const times: number[] = [];
      let buffer = '';
      const decoder = new TextDecoder();
      for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(piece, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) !== -1) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          out.push(...events(`${event}\n\n`));
          times.push(Date.now());
        }
      }
      return { status: res.status, events: out, times, endedAt: Date.now() };
    }

    it('ends a stalled stream with an error event in the OpenAI format within idleMs + 1 s', async () => {
      a.s.set({ chunks: 5, stallAfter: 2 }, 'm-idle');
      const result = await streamed('idle');
      expect(result.status).to.equal(200);
      expect(result.events.slice(0, 2).map((e) => e.choices[0].delta.content)).to.deep.equal(['a: ', '1']);
      const last = result.events[result.events.length - 1];
      expect(Object.keys(last)).to.deep.equal(['error']);
      expect(last.error).to.include({ type: 'timeout_error', param: null, code: 'upstream_timeout' });
      // The gateway's idle timer, or the HTTP client's body timeout set to the same idleMs.
      expect(last.error.message).to.match(/^The upstream service did not answer in time \(the (stream|response) stalled\)\.$/);
      expect(result.events).to.have.length(3);
      const silence = result.endedAt - result.times[1]!;
      // Measured by the client: its reading of chunk 2 may come a little late, so the bound has slack.
      expect(silence).to.be.at.least(IDLE - 150);
      expect(silence).to.be.below(IDLE + 1000);
      await eventually(() => got(a, 'm-idle')[0]?.aborted === true, 1000, 'the stalled upstream request to be aborted');
    });

    it('a back end that keeps a stream alive with comments while it thinks is not silent: a pause of 2.5 idleMs between chunks completes', async () => {
      a.s.set({ chunks: 3, chunkDelayMs: IDLE * 2.5, keepAliveEveryMs: IDLE / 4 }, 'm-idle');
      const result = await streamed('idle');
      expect(result.status).to.equal(200);
      expect(result.events.map((e) => (e === '[DONE]' ? e : (e.choices?.[0]?.delta.content ?? Object.keys(e).join(','))))).to.deep.equal(['a: ', '1', '2', '[DONE]']);
    });

    it('waits for a non-streamed answer whose bytes pause longer than idleMs: firstByteMs bounds the whole answer', async () => {
      a.s.set({ holdBody: true }, 'm-idle');
      const pending = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'idle', messages: [{ role: 'user', content: 'slow body' }] }),
      });
      await eventually(() => got(a, 'm-idle').length === 1, 2000, 'the call to reach the upstream');
      // Half the answer is out; the rest comes after a silence of well over idleMs.
      const timer = setTimeout(() => a.fake.release(), IDLE * 3);
      const res = await pending;
      clearTimeout(timer);
      expect(res.status).to.equal(200);
      const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
      expect(body.choices[0]!.message.content).to.equal('a: ok');
    });

    it('answers 504 upstream_timeout, before any byte of a stream, when it stalls before its first chunk', async () => {
      a.s.set({ stallAfter: 0 }, 'm-idle');
      const started = Date.now();
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'idle', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const body = (await res.json()) as { error: { code: string; type: string } };
      expect(res.status).to.equal(504);
      expect(body.error).to.include({ code: 'upstream_timeout', type: 'timeout_error' });
      expect(Date.now() - started).to.be.at.least(IDLE - 50).and.below(IDLE + 1000);
      await eventually(() => got(a, 'm-idle')[0]?.aborted === true, 1000, 'the stalled upstream request to be aborted');
    });

    it('the official client raises the stalled stream as an error instead of hanging', async () => {
      a.s.set({ chunks: 5, stallAfter: 1 }, 'm-idle');
      const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const stream = await client.chat.completions.create({ model: 'idle', stream: true, messages: [{ role: 'user', content: 'x' }] });
      let text = '';
      const error = await (async () => {
        for await (const part of stream) text += part.choices[0]?.delta.content ?? '';
      })().catch((e: unknown) => e);
      expect(text).to.equal('a: ');
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(String((error as Error).message)).to.include('did not answer in time');
    });

    it('ends a stream that keeps trickling past totalMs with an upstream_timeout event', async () => {
      a.s.set({ chunks: 1000, chunkDelayMs: 50 }, 'm-total');
      const started = Date.now();
      const result = await streamed('total');
      const last = result.events[result.events.length - 1];
      expect(last.error).to.include({ code: 'upstream_timeout' });
      expect(last.error.message).to.include('total timeout');
      expect(result.events.length).to.be.above(3);
      expect(result.endedAt - started).to.be.within(TOTAL - 50, TOTAL + 1000);
      await eventually(() => got(a, 'm-total')[0]?.aborted === true, 1000, 'the upstream request to be aborted');
    });

    it('answers 504 when a non-streamed call runs past totalMs', async () => {
      a.s.set({ headerDelayMs: 5000 }, 'm-total');
      const answer = await chat(gw, 'total');
      expect(answer.status).to.equal(504);
      expect(answer.body.error.code).to.equal('upstream_timeout');
      expect(answer.ms).to.be.within(TOTAL - 50, TOTAL + 1000);
    });

    it('does not count a slow client against the idle timeout: only upstream silence is idle', async () => {
      const CHUNKS = 20_000;
      a.s.set({ chunks: CHUNKS, chunkBytes: 1000 }, 'm-idle');
      let response: http.IncomingMessage | undefined;
      const req = http.request(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      });
      req.on('response', (res) => {
        response = res;
        res.pause();
      });
      req.end(JSON.stringify({ model: 'idle', stream: true, messages: [{ role: 'user', content: 'hi' }] }));
      // The client reads nothing for well over idleMs, while the upstream waits for it ('drain').
      await eventually(() => a.s.stats.waitingForDrain, 10_000, 'the upstream to wait for the slow client');
      const stalledAt = Date.now();
      await until(async () => got(a, 'm-idle')[0]!.aborted || Date.now() - stalledAt > IDLE * 2.5, 5000, 'twice idleMs');
      expect(got(a, 'm-idle')[0]!.aborted, 'the gateway gave up on a healthy upstream because its client was slow').to.equal(false);
      let text = '';
      response!.setEncoding('utf8');
      await new Promise<void>((resolve, reject) => {
        response!.on('data', (piece: string) => (text += piece));
        response!.on('end', resolve);
        response!.on('error', reject);
        response!.resume();
      });
      const all = events(text);
      expect(all.filter((e) => e.error), 'error events').to.deep.equal([]);
      expect(all).to.have.length(CHUNKS + 1);
      expect(all[all.length - 1]).to.equal('[DONE]');
    });

    it('turns a reset connection mid-stream into an upstream_error event', async () => {
      a.s.set({ chunks: 5, resetAfter: 2 }, 'm-plain');
      const result = await streamed('plain');
      expect(result.events).to.have.length(3);
      expect(result.events[2].error).to.include({ code: 'upstream_error', type: 'api_error' });
    });

    it('turns a malformed SSE event into an upstream_error event, without echoing it', async () => {
      a.s.set({ chunks: 5, malformedAfter: 2 }, 'm-plain');
      const result = await streamed('plain');
      expect(result.events).to.have.length(3);
      expect(result.events[2].error).to.include({ code: 'upstream_error' });
      expect(JSON.stringify(result.events[2])).to.not.include('not json');
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('client disconnects abort the upstream request within 1 s', () => {
    let gw: RunningGateway;

    before(async () => {
      gw = await startGateway(
        config(
          {},
          [provider('a', a), provider('b', b)].join('\n'),
          `
  - name: pair
    targets: [{ provider: a, model: m-d }, { provider: b, model: m-d, priority: 1 }]
`,
        ),
      );
    });
    after(async () => gw?.stop());

    /** Start a call, wait until the upstream has it (and, for a stream, until `firstChunk`), then hang up. */
    async function hangUp(stream: boolean, waitForChunk: boolean): Promise<number> {
      const controller = new AbortController();
      const res = fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'pair', stream, messages: [{ role: 'user', content: 'hi' }] }),
        signal: controller.signal,
      });
      res.catch(() => undefined);
      await eventually(() => got(a, 'm-d').length === 1, 2000, 'the upstream to receive the call');
      if (waitForChunk) {
        const body = (await res).body!.getReader();
        const first = await body.read();
        expect(new TextDecoder().decode(first.value)).to.include('a: ');
      }
      const abortedAt = Date.now();
      controller.abort();
      await eventually(() => got(a, 'm-d')[0]!.aborted, 1000, 'the upstream request to be aborted');
      return Date.now() - abortedAt;
    }

    it('before the first byte (the upstream holds its headers)', async () => {
      a.s.set({ holdHeaders: true }, 'm-d');
      expect(await hangUp(true, false)).to.be.below(1000);
      expect(b.fake.received, 'no retry for a client that left').to.have.length(0);
    });

    it('mid-stream', async () => {
      a.s.set({ chunks: 10, stallAfter: 1 }, 'm-d');
      expect(await hangUp(true, true)).to.be.below(1000);
      expect(b.fake.received).to.have.length(0);
    });

    it('for a non-streamed call waiting for its answer', async () => {
      a.s.set({ holdHeaders: true }, 'm-d');
      expect(await hangUp(false, false)).to.be.below(1000);
      expect(b.fake.received).to.have.length(0);
    });

    it('for a non-streamed call whose answer is half sent', async () => {
      a.s.set({ holdBody: true }, 'm-d');
      expect(await hangUp(false, false)).to.be.below(1000);
      expect(b.fake.received).to.have.length(0);
    });

    it('logs the call as closed by the client, and does not count it against the back end', async () => {
      a.s.set({ holdHeaders: true }, 'm-d');
      await hangUp(false, false);
      let row: any;
      await until(async () => Boolean((row = (await logRows(gw)).find((r) => r.errorCode === 'client_closed_request'))), 2000, 'the log row');
      expect(row.status).to.equal(499);
      expect(row.attempts).to.have.length(1);
      expect(row.attempts[0]).to.include({ provider: 'a', model: 'm-d', status: 'error', error: 'client_closed_request' });
      const state = await targetState(gw, 'a', 'm-d');
      expect(state).to.include({ state: 'healthy', consecutive_failures: 0 });
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('backpressure', () => {
    let gw: RunningGateway;

    before(async () => {
      gw = await startGateway(config({}, provider('a', a), '  - { name: big, targets: [{ provider: a, model: m-big }] }'));
    });
    after(async () => gw?.stop());

    it('a client that does not read stalls the upstream writes; memory stays bounded; reading resumes the stream', async () => {
      const CHUNKS = 20_000;
      const BYTES = 1000; // about 20 MB of events in all
      a.s.set({ chunks: CHUNKS, chunkBytes: BYTES }, 'm-big');
      const before = process.memoryUsage();
      // The gateway's side of the client connection: what it queued in user space.
      let serverSide: net.Socket | undefined;
      const onRequest = (req: http.IncomingMessage) => (serverSide = req.socket);
      gw.gateway.server!.once('request', onRequest);
      let response: http.IncomingMessage | undefined;
      const req = http.request(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      });
      req.on('response', (res) => {
        response = res;
        res.pause();
      });
      req.end(JSON.stringify({ model: 'big', stream: true, messages: [{ role: 'user', content: 'hi' }] }));

      // Wait until the upstream's writes stop moving (they wait for 'drain').
      let last = -1;
      let still = 0;
      await until(
        async () => {
          const now = a.s.stats.bytesWritten;
          still = now === last && a.s.stats.waitingForDrain ? still + 1 : 0;
          last = now;
          return still >= 10;
        },
        15_000,
        'the upstream writes to stall',
      );
      expect(response, 'the response began').to.not.equal(undefined);
      const written = a.s.stats.bytesWritten;
      const total = CHUNKS * (BYTES + 150);
      // What the upstream got out is what fits in the kernel's socket buffers on the two hops
      // (a few MB each on loopback) plus a few chunks inside the gateway: far from the total.
      expect(written, `${written} bytes written of about ${total}`).to.be.below(total / 2);
      expect(written).to.be.below(12 * 1024 * 1024);
      // Inside the gateway, the reply waiting for the client stays within a few stream buffers.
      expect(serverSide!.writableLength, 'bytes queued for the client in the gateway').to.be.below(256 * 1024);
      const grown = process.memoryUsage();
      const growth = grown.heapUsed + grown.arrayBuffers - (before.heapUsed + before.arrayBuffers);
      expect(growth, `memory grew by ${growth} bytes`).to.be.below(24 * 1024 * 1024);

      // Now read: everything arrives, in order, and the stream ends.
      let text = '';
      let count = 0;
      response!.setEncoding('utf8');
      await new Promise<void>((resolve, reject) => {
        response!.on('data', (piece: string) => {
          text += piece;
          const parts = text.split('\n\n');
          text = parts.pop()!;
          count += parts.length;
        });
        response!.on('end', resolve);
        response!.on('error', reject);
        response!.resume();
      });
      expect(count).to.equal(CHUNKS + 1); // every chunk and [DONE]
      expect(a.s.stats.completed).to.equal(1);
    });
  });

  // -------------------------------------------------------------------------------------------
  describe('loop detection', () => {
    const gateways: Gateway[] = [];
    let seen = 0;

    async function listenOn(yaml: string, port: number): Promise<Gateway> {
      const loaded = await loadConfig({ file: writeConfig(yaml) });
      const logger = createLogger({ level: 'error', format: 'json' }, new PassThrough().resume());
      const gateway = await createGateway({ loaded, builtins, logger });
      await gateway.listen(port, '127.0.0.1');
      gateway.server!.on('request', () => seen++);
      gateways.push(gateway);
      return gateway;
    }

    afterEach(async () => {
      for (const g of gateways.splice(0)) await g.stop();
      seen = 0;
    });

    const selfConfig = (port: number, target: number) => `
server: { host: 127.0.0.1, port: ${port} }
storage: { driver: sqlite, url: ':memory:' }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
plugins: [request-log, auth, validation, routing, openai-chat]
providers:
  - { id: self, type: openai, baseUrl: 'http://127.0.0.1:${target}/v1', apiKey: ${CLIENT_KEY}, models: [looped] }
`;

    it('stops a provider pointed at the gateway itself with 508 loop_detected, quickly and without a storm', async () => {
      const port = await freePort();
      await listenOn(selfConfig(port, port), port);
      const client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
      const started = Date.now();
      const error = (await client.chat.completions.create({ model: 'looped', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
      expect(Date.now() - started).to.be.below(3000);
      expect(error).to.be.instanceOf(OpenAI.APIError);
      expect(error.status).to.equal(508);
      expect(error.code).to.equal('loop_detected');
      expect(seen).to.equal(2); // the call, and its one trip back in
    });

    it('stops a loop through two gateways too', async () => {
      const [p1, p2] = [await freePort(), await freePort()];
      await listenOn(selfConfig(p1, p2), p1);
      await listenOn(selfConfig(p2, p1), p2);
      const res = await fetch(`http://127.0.0.1:${p1}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify({ model: 'looped', messages: [{ role: 'user', content: 'x' }] }),
      });
      expect(res.status).to.equal(508);
      expect(((await res.json()) as any).error.code).to.equal('loop_detected');
      expect(seen).to.equal(3);
    });
  });
});

