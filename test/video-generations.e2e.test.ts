import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import { mkdtempSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../core/logger.js';
import { openStores } from '../core/store/index.js';
import type { StoredTask, Stores } from '../core/store/types.js';
import type { ProviderInstance, VideoBackend, VideoPoll } from '../core/index.js';
import { VideoEngine } from '../plugins/video-tasks/engine.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { callJson, pollUntil } from './support/calls.js';
import { repoRoot } from './support/paths.js';

const KEY_A = 'sk-video-key-a-000000001';
const KEY_B = 'sk-video-key-b-000000002';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const FIXTURE = readFileSync(path.join(repoRoot, 'test', 'fixtures', 'tiny-16x16-1s.mp4'));

const call = (url: string, method: string, route: string, body?: unknown, key = KEY_A) => callJson<any>(url, method, route, body, key);

async function spentOf(gw: RunningGateway, name: string): Promise<number> {
  await gw.gateway.stores.flush();
  return (await gw.gateway.stores.keys.get(name))!.spent;
}

const config = (engine: string) => `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, { name: video-tasks, options: ${engine} }, video-generations]
auth:
  keys: [{ name: a, key: ${KEY_A} }, { name: b, key: ${KEY_B} }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
pricing:
  mock-video: { perSecond: 0.1, perRequest: 0.01 }
`;

describe('POST /v1/video/generations against the mock (background poller)', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(config('{ pollIntervalMs: 40, maxPollIntervalMs: 120, staleAfterMs: 3600000 }'));
  });
  after(async () => gw?.stop());

  it('submits a task (queued), polls it to completed, and serves the real video through the gateway', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'a cat on a skateboard', duration: 4, metadata: { scene: 7 } });
    expect(submitted.status, submitted.text).to.equal(200);
    expect(submitted.json).to.have.keys('task_id', 'status');
    expect(submitted.json.status).to.equal('queued');
    expect(submitted.json.task_id).to.match(/^task_[0-9a-f]{32}$/);
    expect(submitted.text).not.to.include('mockvid_');
    const id = submitted.json.task_id as string;
    const states = await pollUntil(
      () => call(gw.url, 'GET', `/v1/video/generations/${id}`),
      (r) => r.json?.status === 'completed' || r.json?.status === 'failed',
    );
    const final = states.at(-1)!;
    expect(final.status).to.equal(200);
    expect(final.json.task_id).to.equal(id);
    expect(final.json.status).to.equal('completed');
    expect(final.json.format).to.equal('mp4');
    expect(final.json.metadata).to.deep.equal({ scene: 7 });
    expect(final.json).not.to.have.property('error');
    // Only forward: never back from in_progress to queued.
    const order = states.map((s) => s.json.status as string);
    const rank = { queued: 0, in_progress: 1, completed: 2, failed: 2 } as Record<string, number>;
    for (let i = 1; i < order.length; i++) expect(rank[order[i]!]!).to.be.at.least(rank[order[i - 1]!]!);
    // The url is the gateway's, not the vendor's; it serves the real MP4 to the task's key only.
    expect(final.json.url).to.equal(`/v1/video/generations/${id}/content`);
    const video = await fetch(`${gw.url}${final.json.url}`, { headers: { authorization: `Bearer ${KEY_A}` } });
    expect(video.status).to.equal(200);
    expect(video.headers.get('content-type')).to.equal('video/mp4');
    const bytes = Buffer.from(await video.arrayBuffer());
    expect(bytes.equals(FIXTURE)).to.equal(true);
    expect(bytes.subarray(4, 8).toString('latin1')).to.equal('ftyp');
    const foreign = await call(gw.url, 'GET', `/v1/video/generations/${id}/content`, undefined, KEY_B);
    expect(foreign.status).to.equal(404);
  });

  it('the result url is a path on the gateway: a forged Host header never makes it point elsewhere', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'hosts' });
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    const { port } = new URL(gw.url);
    const body = await new Promise<string>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: `/v1/video/generations/${id}`, headers: { host: 'evil.example', authorization: `Bearer ${KEY_A}` } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
    });
    expect(JSON.parse(body).url).to.equal(`/v1/video/generations/${id}/content`);
    expect(body).to.not.contain('evil.example');
  });

  it('meters the video seconds: the estimate is charged on submit and priced per second', async () => {
    const before = await spentOf(gw, 'b');
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'waves', duration: 6 }, KEY_B);
    expect(submitted.status).to.equal(200);
    expect(submitted.headers.get('x-switchyard-cost')).to.equal('0.61');
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`, undefined, KEY_B), (r) => r.json?.status === 'completed');
    expect((await spentOf(gw, 'b')) - before).to.be.closeTo(6 * 0.1 + 0.01, 1e-9);
    const task = gw.gateway.stores.tasks.get(id)!;
    expect(task.seconds).to.equal(6);
    expect(task.cost).to.be.closeTo(0.61, 1e-9);
    // Two videos of 3 s: 6 s estimated and 6 s delivered, nothing settled back.
    const two = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'waves', duration: 3, n: 2 }, KEY_B);
    expect(two.headers.get('x-switchyard-cost')).to.equal('0.61');
    const twoId = two.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${twoId}`, undefined, KEY_B), (r) => r.json?.status === 'completed');
    expect(gw.gateway.stores.tasks.get(twoId)!.seconds).to.equal(6);
    expect(gw.gateway.stores.tasks.get(twoId)!.cost).to.be.closeTo(0.61, 1e-9);
  });

  it('refunds a failed task exactly once, and reports its error', async () => {
    const before = await spentOf(gw, 'a');
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'please [fail]', duration: 3 });
    const id = submitted.json.task_id as string;
    expect(await spentOf(gw, 'a')).to.be.closeTo(before + 0.31, 1e-9);
    const states = await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'failed');
    const final = states.at(-1)!;
    expect(final.json.error).to.deep.equal({ code: 'generation_failed', message: 'The mock was asked to fail.' });
    expect(final.json).not.to.have.property('url');
    // More reads change nothing.
    await call(gw.url, 'GET', `/v1/video/generations/${id}`);
    await gw.gateway.stores.flush();
    const refunds = (await gw.gateway.stores.usage.list({ requestId: id })).filter((r) => r.cost < 0);
    expect(refunds).to.have.length(1);
    expect(refunds[0]!.cost).to.be.closeTo(-0.31, 1e-9);
    expect(await spentOf(gw, 'a')).to.be.closeTo(before, 1e-9);
    expect(gw.gateway.stores.tasks.get(id)!.cost).to.equal(0);
  });

  it('keeps polling a task in a vendor state it cannot map, instead of failing it', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'odd [unknown]' });
    const id = submitted.json.task_id as string;
    const states = await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    expect(states.some((s) => s.json.status === 'failed')).to.equal(false);
    const stored = gw.gateway.stores.tasks.get(id)!;
    expect(stored.attempts).to.be.greaterThan(2);
  });

  it('gives another key a 404 exactly like a task that does not exist', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'mine' });
    const id = submitted.json.task_id as string;
    const foreign = await call(gw.url, 'GET', `/v1/video/generations/${id}`, undefined, KEY_B);
    const missing = await call(gw.url, 'GET', `/v1/video/generations/${id.slice(0, -4)}beef`, undefined, KEY_B);
    expect(foreign.status).to.equal(404);
    expect(missing.status).to.equal(404);
    expect(foreign.json.error.code).to.equal('task_not_found');
    expect(JSON.stringify(foreign.json).replace(id, 'X')).to.equal(JSON.stringify(missing.json).replace(`${id.slice(0, -4)}beef`, 'X'));
  });

  it('refuses invalid bodies with a 400 error object naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ prompt: 'no model' }, 'model'],
      [{ model: 'mock-video', duration: -2 }, 'duration'],
      [{ model: 'mock-video', duration: 1e9 }, 'duration'],
      [{ model: 'mock-video', duration: 61 }, 'duration'],
      [{ model: 'mock-video', n: 11 }, 'n'],
      [{ model: 'mock-video', width: 'wide' }, 'width'],
      [{ model: 'mock-video', fps: 2.5 }, 'fps'],
      [{ model: 'mock-video', n: 0 }, 'n'],
      [{ model: 'mock-video', metadata: 'x' }, 'metadata'],
      [{ model: 'mock-video', image: 42 }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'not base64 !!' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'ftp://example.com/a.png' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'file:///etc/passwd' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'http://' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'data:image/png;base64,%%%' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'data:image/png,not-base64' }, 'image'],
      [{ model: 'mock-video', prompt: 'p', image: 'iVBORw0KGgo=A' }, 'image'],
    ];
    const spent = await spentOf(gw, 'a');
    for (const [body, param] of cases) {
      const r = await call(gw.url, 'POST', '/v1/video/generations', body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.json.error.param, JSON.stringify(body)).to.equal(param);
      expect(r.json.error.type).to.equal('invalid_request_error');
    }
    expect(await spentOf(gw, 'a'), 'none charged').to.equal(spent);
  });

  it('takes an image as an http(s) URL, a base64 data: URL or bare base64 (whitespace and missing padding allowed)', async () => {
    for (const image of ['https://example.com/a.png', 'http://127.0.0.1:9/a.png', `data:image/png;base64,${PNG}`, PNG, `${PNG.slice(0, 40)}\n${PNG.slice(40)}`, 'iVBORw0KGgo']) {
      const r = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'p', image });
      expect(r.status, `${image}: ${r.text}`).to.equal(200);
    }
  });
});

describe('video formats in the default plugin order', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: a, key: ${KEY_A} }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
`);
  });
  after(async () => gw?.stop());

  it('a configuration without plugins: serves /v1/video/generations and /videoa, /kling image2video', async () => {
    for (const route of ['/v1/video/generations', '/videoa/v1/videos/image2video', '/kling/v1/videos/image2video']) {
      const r = await call(gw.url, 'POST', route, { model: 'mock-video', prompt: 'p', image: 'https://example.com/a.png' });
      expect(r.status, `${route}: ${r.text}`).to.equal(200);
      expect(r.json.status).to.equal('queued');
    }
  });
});

describe('video tasks: fetch-through on GET', () => {
  let gw: RunningGateway;
  before(async () => {
    // The background loop waits an hour: only GETs move the task.
    gw = await startGateway(config('{ pollIntervalMs: 3600000, maxPollIntervalMs: 3600000, staleAfterMs: 0 }'));
  });
  after(async () => gw?.stop());

  it('asks the vendor when a GET finds the task stale', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'dogs' });
    const id = submitted.json.task_id as string;
    const states = await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    expect(states.map((s) => s.json.status)).to.include('in_progress');
  });
});

describe('video tasks: racing pollers', () => {
  let dir: string;
  let one: Stores;
  let two: Stores;
  const logger = createLogger({ level: 'error', format: 'json' });

  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'switchyard-video-race-'));
    const options = { storage: { driver: 'sqlite', url: path.join(dir, 'tasks.db') }, cache: { driver: 'memory' }, baseDir: dir } as any;
    one = openStores(options);
    two = openStores(options);
  });
  after(async () => {
    await one?.close();
    await two?.close();
  });

  function task(i: number, now: number): StoredTask {
    return {
      id: `task_race${String(i).padStart(4, '0')}`, keyId: null, keyName: null, provider: 'vendor', format: 'video-generations', model: 'm',
      upstreamModel: 'm', vendorTaskId: `v${i}`, status: 'in_progress', progress: 10, resultUrl: null, container: null, seconds: null,
      size: null, errorCode: null, errorMessage: null, rawStatus: 'running', metadata: null, createdAt: now, updatedAt: now,
      completedAt: null, polledAt: null, nextPollAt: now - 1, attempts: 0, estimateSeconds: 5, cost: 0.5,
    };
  }

  /** A vendor that finishes every task (odd ones fail), answering only after both pollers have asked. */
  function vendor(): { backend: VideoBackend; asked: () => number } {
    let asked = 0;
    const backend: VideoBackend = {
      submit: async () => ({ vendorTaskId: 'x', status: 'queued' }),
      async poll(id): Promise<VideoPoll> {
        asked++;
        await new Promise((resolve) => setImmediate(resolve));
        const n = Number(id.slice(1));
        return n % 2 ? { status: 'failed', rawStatus: 'failed', error: { code: 'boom', message: 'no' } } : { status: 'completed', rawStatus: 'done', seconds: 4, url: 'http://cdn/x.mp4' };
      },
    };
    return { backend, asked: () => asked };
  }

  it('2 pollers over 200 tasks make exactly one terminal transition each (and one settle/refund)', async () => {
    const now = Date.now();
    for (let i = 0; i < 200; i++) one.tasks.create(task(i, now));
    await one.flush();
    let wins = 0;
    const counting = (stores: Stores) =>
      new Proxy(stores.tasks, {
        get(target, prop) {
          if (prop === 'finish') {
            return (...args: Parameters<typeof target.finish>) => {
              const won = target.finish(...args);
              if (won) wins++;
              return won;
            };
          }
          const value = (target as any)[prop];
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const a = vendor();
    const b = vendor();
    const engine = (stores: Stores, backend: VideoBackend) =>
      new VideoEngine({
        tasks: counting(stores),
        provider: (id) => (id === 'vendor' ? ({ id, type: 't', models: [], operations: {}, video: backend } as ProviderInstance) : undefined),
        pricing: { m: { perSecond: 0.1 } },
        logger,
        options: { batchSize: 500 },
      });
    const [first, second] = [engine(one, a.backend), engine(two, b.backend)];
    await Promise.all([first.pollDue(), second.pollDue(), first.sweep(), second.pollDue()]);
    // Both pollers really polled the same tasks.
    expect(a.asked()).to.equal(200);
    expect(b.asked()).to.be.at.least(200);
    expect(wins).to.equal(200);
    for (let i = 0; i < 200; i++) {
      const t = one.tasks.get(task(i, now).id)!;
      expect(t.status).to.equal(i % 2 ? 'failed' : 'completed');
    }
    const rows = (await one.usage.list({ limit: 10_000 })).filter((r) => r.requestId.startsWith('task_race'));
    expect(rows).to.have.length(200);
    expect(new Set(rows.map((r) => r.requestId)).size).to.equal(200);
    for (const row of rows) expect(row.cost).to.be.closeTo(Number(row.requestId.slice(-4)) % 2 ? -0.5 : -0.1, 1e-9);
  });

  it('the timeout sweep asks the vendor once more first: a task it finished while nobody polled (the gateway was down) is settled, not refunded; one still running, or a vendor that fails, is timed out', async () => {
    const old = Date.now() - 48 * 3600_000;
    const ids = { done: 'task_sweepdone01', running: 'task_sweeprun001', down: 'task_sweepdown01' };
    one.tasks.create({ ...task(9100, old), id: ids.done, vendorTaskId: 'done' });
    one.tasks.create({ ...task(9101, old), id: ids.running, vendorTaskId: 'running' });
    one.tasks.create({ ...task(9102, old), id: ids.down, vendorTaskId: 'down' });
    await one.flush();
    const asked: string[] = [];
    const backend: VideoBackend = {
      submit: async () => ({ vendorTaskId: 'x', status: 'queued' }),
      async poll(id): Promise<VideoPoll> {
        asked.push(id);
        if (id === 'down') throw new Error('connection refused');
        return id === 'done' ? { status: 'completed', rawStatus: 'done', seconds: 5, url: 'http://cdn/x.mp4' } : { status: 'in_progress', rawStatus: 'running', progress: 90 };
      },
    };
    const engine = new VideoEngine({
      tasks: one.tasks,
      provider: () => ({ id: 'vendor', type: 't', models: [], operations: {}, video: backend }) as ProviderInstance,
      pricing: { m: { perSecond: 0.1 } },
      logger,
    });
    expect(await engine.sweep()).to.equal(2);
    expect(asked.sort()).to.deep.equal(['done', 'down', 'running']);
    expect(one.tasks.get(ids.done)).to.include({ status: 'completed', seconds: 5 });
    expect(one.tasks.get(ids.done)!.cost).to.be.closeTo(0.5, 1e-9);
    for (const id of [ids.running, ids.down]) expect(one.tasks.get(id)).to.include({ status: 'failed', errorCode: 'timeout', cost: 0 });
    await one.flush();
    expect(await one.usage.list({ requestId: ids.done }), 'nothing settled: 5 s estimated, 5 s made').to.have.length(0);
    for (const id of [ids.running, ids.down]) {
      const rows = await one.usage.list({ requestId: id });
      expect(rows.map((r) => r.cost)).to.deep.equal([-0.5]);
    }
  });

  it('a stop in the middle of a sweep ends it: the polls under way are cut, no task is failed for them, and the tasks not reached wait for the next start', async () => {
    const old = Date.now() - 48 * 3600_000;
    const ids = Array.from({ length: 6 }, (_, i) => `task_sweepstop0${i}`);
    ids.forEach((id, i) => one.tasks.create({ ...task(9200 + i, old), id, vendorTaskId: `hang${i}` }));
    await one.flush();
    let asked = 0;
    const backend: VideoBackend = {
      submit: async () => ({ vendorTaskId: 'x', status: 'queued' }),
      poll: (_id, ctx) =>
        new Promise<VideoPoll>((_resolve, reject) => {
          asked++;
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason), { once: true });
        }),
    };
    const engine = new VideoEngine({
      tasks: one.tasks,
      provider: () => ({ id: 'vendor', type: 't', models: [], operations: {}, video: backend }) as ProviderInstance,
      pricing: { m: { perSecond: 0.1 } },
      logger,
      options: { batchSize: 2, pollTimeoutMs: 60_000 },
    });
    const sweeping = engine.sweep();
    await eventually(() => asked === 2, 3000, 'the first batch of polls');
    await engine.stop();
    expect(await sweeping).to.equal(0);
    expect(asked).to.equal(2);
    for (const id of ids) expect(one.tasks.get(id)!.status, id).to.equal('in_progress');
    // Out of the other sweeps' way.
    for (const id of ids) one.tasks.finish(id, { status: 'failed', errorCode: 'test', errorMessage: '', rawStatus: null, cost: 0, at: Date.now() }, null);
  });

  it('the timeout sweep fails (and refunds) a stuck task once, racing a poller that sees it complete', async () => {
    const old = Date.now() - 48 * 3600_000;
    const stuck = { ...task(9002, old), id: 'task_stuck0001' };
    one.tasks.create(stuck);
    await one.flush();
    const poller = new VideoEngine({
      tasks: one.tasks,
      provider: () => ({ id: 'vendor', type: 't', models: [], operations: {}, video: vendor().backend }) as ProviderInstance,
      pricing: { m: { perSecond: 0.1 } },
      logger,
      options: { batchSize: 500 },
    });
    const sweeper = new VideoEngine({ tasks: two.tasks, provider: () => undefined, pricing: {}, logger });
    // The poller has read the task and is waiting for the vendor when the sweep runs.
    const polling = poller.pollDue();
    const swept = (await sweeper.sweep()) + (await sweeper.sweep());
    await polling;
    expect(swept).to.equal(1);
    const t = two.tasks.get(stuck.id)!;
    expect(t.status).to.equal('failed');
    expect(t.errorCode).to.equal('timeout');
    const rows = await one.usage.list({ requestId: stuck.id });
    expect(rows).to.have.length(1);
    expect(rows[0]!.cost).to.be.closeTo(-0.5, 1e-9);
  });
});

describe('video tasks: durability, hung vendors, metered seconds', () => {
  let dir: string;
  const logger = createLogger({ level: 'error', format: 'json' });
  const opened: Stores[] = [];
  const open = (file: string) => {
    const stores = openStores({ storage: { driver: 'sqlite', url: path.join(dir, file) }, cache: { driver: 'memory' }, baseDir: dir } as any);
    opened.push(stores);
    return stores;
  };
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'switchyard-video-durable-'));
  });
  after(async () => {
    for (const stores of opened) await stores.close();
  });

  it('a task answered 200 is already in the file (a fresh handle sees it, nothing flushed)', async () => {
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(path.join(dir, 'gw.db'))} }
plugins: [auth, validation, routing, metering, { name: video-tasks, options: { pollIntervalMs: 3600000, maxPollIntervalMs: 3600000, staleAfterMs: 3600000 } }, video-generations]
auth:
  keys: [{ name: a, key: ${KEY_A} }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
pricing:
  mock-video: { perSecond: 0.1 }
`);
    try {
      const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'durable' });
      expect(submitted.status, submitted.text).to.equal(200);
      const fresh = openStores({ storage: { driver: 'sqlite', url: path.join(dir, 'gw.db') }, cache: { driver: 'memory' }, baseDir: dir } as any);
      opened.push(fresh);
      const row = fresh.tasks.get(submitted.json.task_id);
      expect(row, 'the task row is on disk when the client has its id').to.not.equal(undefined);
      expect(row!.vendorTaskId).to.match(/^mockvid_/);
      expect(row!.status).to.equal('queued');
      // Its charge is on disk with it (a crash now cannot leave a task whose refund was never paid).
      const requestId = submitted.headers.get('x-request-id')!;
      const charges = await fresh.usage.list({ requestId });
      expect(charges, 'the charge is written with the task').to.have.length(1);
      expect(charges[0]!.cost).to.be.closeTo(0.5, 1e-9);
      expect(charges[0]!.cost).to.be.closeTo(row!.cost, 1e-9);
      expect((await fresh.keys.get('a'))!.spent).to.be.closeTo(0.5, 1e-9);
      // Metering writes no second row for it.
      await gw.gateway.stores.flush();
      expect(await gw.gateway.stores.usage.list({ requestId })).to.have.length(1);
      expect(await spentOf(gw, 'a')).to.be.closeTo(0.5, 1e-9);
    } finally {
      await gw.stop();
    }
  });

  it('writes the task before the vendor is asked; one left without a vendor id fails after submitGraceMs (nothing charged)', async () => {
    const stores = open('reserve.db');
    let clock = Date.now();
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: () => ({ id: 'vendor', type: 't', models: [], operations: {}, video: { submit: async () => ({ vendorTaskId: 'x', status: 'queued' }), poll: async () => ({ status: 'in_progress', rawStatus: 'running' }) } }) as ProviderInstance,
      pricing: {},
      logger,
      options: { submitGraceMs: 60_000 },
      now: () => clock,
    });
    const id = engine.reserve({ keyId: null, keyName: null, provider: 'vendor', format: 'video-generations', model: 'lost-m', upstreamModel: 'lost-m', request: { prompt: 'x' } });
    // The gateway "dies" here: another handle on the file sees the task.
    const other = open('reserve.db');
    expect(other.tasks.get(id)?.vendorTaskId).to.equal('');
    clock += 1000;
    await engine.pollDue();
    expect(stores.tasks.get(id)!.status, 'not due before the grace').to.equal('queued');
    clock += 60_000;
    expect(await engine.pollDue()).to.equal(1);
    const t = stores.tasks.get(id)!;
    expect(t.status).to.equal('failed');
    expect(t.errorCode).to.equal('submit_lost');
    expect(await stores.usage.list({ requestId: id })).to.have.length(0);
  });

  it('a task whose back end is not in the configuration (taken out for now) is polled later, not failed and refunded; it completes once the back end is back', async () => {
    const stores = open('missing.db');
    let clock = Date.now();
    let configured = false;
    const backend = { submit: async () => ({ vendorTaskId: 'v9', status: 'queued' }), poll: async () => ({ status: 'completed', rawStatus: 'succeeded', url: 'https://cdn.example/v9.mp4', seconds: 4 }) };
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: () => (configured ? ({ id: 'vendor', type: 't', models: [], operations: {}, video: backend } as unknown as ProviderInstance) : undefined),
      pricing: {},
      logger,
      options: { pollIntervalMs: 1000, maxPollIntervalMs: 60_000 },
      now: () => clock,
    });
    const id = engine.create({ submission: { vendorTaskId: 'v9', status: 'in_progress' }, usage: undefined, request: { prompt: 'x' }, keyId: null, keyName: null, provider: 'vendor', format: 'video-generations', model: 'm', upstreamModel: 'm' }).id;
    for (let round = 0; round < 3; round++) {
      clock = stores.tasks.get(id)!.nextPollAt;
      await engine.pollDue();
      const task = stores.tasks.get(id)!;
      expect(task.status, `round ${round}`).to.equal('in_progress');
      expect(task.nextPollAt, `round ${round}: asked again later`).to.be.greaterThan(clock);
    }
    expect(await stores.usage.list({ requestId: id }), 'no refund').to.have.length(0);
    configured = true;
    clock = stores.tasks.get(id)!.nextPollAt;
    await engine.pollDue();
    expect(stores.tasks.get(id)!.status).to.equal('completed');
  });

  it('an in_progress task whose polls fail, say a state it cannot map, or say queued again backs off like any other (never polled again at once)', async () => {
    const stores = open('backoff.db');
    let clock = Date.now();
    const answers: Array<() => Promise<{ status: string; rawStatus: string }>> = [];
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: () =>
        ({ id: 'vendor', type: 't', models: [], operations: {}, video: { submit: async () => ({ vendorTaskId: 'v1', status: 'queued' }), poll: () => answers.shift()!() } }) as unknown as ProviderInstance,
      pricing: {},
      logger,
      options: { pollIntervalMs: 1000, maxPollIntervalMs: 60_000 },
      now: () => clock,
    });
    const id = engine.create({
      submission: { vendorTaskId: 'v1', status: 'in_progress' },
      usage: undefined,
      request: { prompt: 'x' },
      keyId: null,
      keyName: null,
      provider: 'vendor',
      format: 'video-generations',
      model: 'm',
      upstreamModel: 'm',
    }).id;
    const failures: Array<() => Promise<{ status: string; rawStatus: string }>> = [
      () => Promise.reject(new Error('vendor down')),
      async () => ({ status: 'rendering_weird', rawStatus: 'rendering_weird' }),
      async () => ({ status: 'queued', rawStatus: 'queued' }),
    ];
    for (const [round, answer] of failures.entries()) {
      answers.push(answer);
      clock = stores.tasks.get(id)!.nextPollAt;
      await engine.pollDue();
      expect(answers, `round ${round}: the vendor was asked`).to.have.length(0);
      const task = stores.tasks.get(id)!;
      expect(task.attempts, `round ${round}: the poll counted`).to.equal(round + 1);
      expect(task.status, `round ${round}: never back to queued`).to.equal('in_progress');
      expect(task.nextPollAt, `round ${round}: the next poll is later`).to.be.greaterThan(clock);
      // Nothing is due again at the same moment (the vendor is not asked in a loop).
      answers.push(() => Promise.reject(new Error('asked again at once')));
      await engine.pollDue();
      expect(answers, `round ${round}: not asked again at once`).to.have.length(1);
      answers.length = 0;
    }
  });

  it('a hung vendor poll holds only its task: another provider’s task completes promptly, and stop() ends the hung poll', async () => {
    const stores = open('hung.db');
    const now = Date.now();
    const base = { keyId: null, keyName: null, format: 'video-generations', model: 'h', upstreamModel: 'h', status: 'in_progress' as const, progress: 0,
      resultUrl: null, container: null, seconds: null, size: null, errorCode: null, errorMessage: null, rawStatus: 'running', metadata: null,
      createdAt: now, updatedAt: now, completedAt: null, polledAt: null, nextPollAt: now - 1, attempts: 0, estimateSeconds: 5, cost: 0 };
    stores.tasks.create({ ...base, id: 'task_hung0001', provider: 'hung', vendorTaskId: 'h1', nextPollAt: now - 10 });
    // Due only after the hung poll has started (a later round of the loop).
    stores.tasks.create({ ...base, id: 'task_fine0001', provider: 'fine', vendorTaskId: 'f1', nextPollAt: now + 100 });
    let hungAsked = 0;
    const backends: Record<string, VideoBackend> = {
      // Never answers, and ignores its abort signal too (the worst case).
      hung: { submit: async () => ({ vendorTaskId: 'h', status: 'queued' }), poll: () => { hungAsked++; return new Promise<VideoPoll>(() => undefined); } },
      fine: { submit: async () => ({ vendorTaskId: 'f', status: 'queued' }), poll: async () => ({ status: 'completed', rawStatus: 'done', seconds: 5, url: 'http://cdn/x.mp4' }) },
    };
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: (id) => ({ id, type: 't', models: [], operations: {}, video: backends[id] }) as ProviderInstance,
      pricing: {},
      logger,
      options: { pollIntervalMs: 20, maxPollIntervalMs: 40, batchSize: 8 },
    });
    engine.start();
    await eventually(() => hungAsked === 1 && stores.tasks.get('task_fine0001')!.status === 'completed', 2000, 'the other task to complete');
    expect(stores.tasks.get('task_hung0001')!.status).to.equal('in_progress');
    const started = Date.now();
    await engine.stop();
    expect(Date.now() - started, 'stop() waits on no hung poll').to.be.below(3000);
    expect(hungAsked, 'a task being polled is not polled again').to.equal(1);
  });

  it('a poll past pollTimeoutMs is given up even after a garbage collection (the deadline is held, not left to a signal nothing references)', async () => {
    const stores = open('deadline.db');
    const now = Date.now();
    const base = { keyId: null, keyName: null, format: 'video-generations', model: 'h', upstreamModel: 'h', status: 'in_progress' as const, progress: 0,
      resultUrl: null, container: null, seconds: null, size: null, errorCode: null, errorMessage: null, rawStatus: 'running', metadata: null,
      createdAt: now, updatedAt: now, completedAt: null, polledAt: null, nextPollAt: now - 1, attempts: 0, estimateSeconds: 5, cost: 0 };
    stores.tasks.create({ ...base, id: 'task_slow0001', provider: 'slow', vendorTaskId: 's1' });
    let asked = 0;
    const backends: Record<string, VideoBackend> = {
      // Never answers, and ignores its abort signal: only the engine's own deadline ends the wait.
      slow: { submit: async () => ({ vendorTaskId: 's', status: 'queued' }), poll: () => { asked++; return new Promise<VideoPoll>(() => undefined); } },
    };
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: (id) => ({ id, type: 't', models: [], operations: {}, video: backends[id] }) as ProviderInstance,
      pricing: {},
      logger,
      options: { pollIntervalMs: 3_600_000, maxPollIntervalMs: 3_600_000, pollTimeoutMs: 200, batchSize: 8 },
    });
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const round = engine.pollDue();
    await eventually(() => asked === 1, 2000, 'the poll to start');
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    gc();
    await round;
    // Given up at its deadline: the task is rescheduled (an attempt counted), not left waiting for good.
    expect(stores.tasks.get('task_slow0001')!.attempts).to.equal(1);
    await engine.stop();
  });

  it('settle and refund rows carry the seconds delta, so usage seconds are what was delivered', async () => {
    const stores = open('seconds.db');
    const now = Date.now();
    const base = { keyId: null, keyName: null, format: 'video-generations', model: 'secs-m', upstreamModel: 'secs-m', status: 'in_progress' as const, progress: 0,
      resultUrl: null, container: null, seconds: null, size: null, errorCode: null, errorMessage: null, rawStatus: 'running', metadata: null,
      createdAt: now, updatedAt: now, completedAt: null, polledAt: null, nextPollAt: now - 1, attempts: 0, estimateSeconds: 5, cost: 0.5 };
    stores.tasks.create({ ...base, id: 'task_secs0001', provider: 'v', vendorTaskId: 'ok' });
    stores.tasks.create({ ...base, id: 'task_secs0002', provider: 'v', vendorTaskId: 'bad' });
    const engine = new VideoEngine({
      tasks: stores.tasks,
      provider: (id) => ({ id, type: 't', models: [], operations: {}, video: {
        submit: async () => ({ vendorTaskId: 'x', status: 'queued' }),
        poll: async (v: string): Promise<VideoPoll> => (v === 'ok' ? { status: 'completed', rawStatus: 'done', seconds: 4, url: 'http://cdn/x.mp4' } : { status: 'failed', rawStatus: 'failed' }),
      } }) as ProviderInstance,
      pricing: { 'secs-m': { perSecond: 0.1 } },
      logger,
    });
    expect(await engine.pollDue()).to.equal(2);
    const [ok] = await stores.usage.list({ requestId: 'task_secs0001' });
    const [bad] = await stores.usage.list({ requestId: 'task_secs0002' });
    expect(ok!.seconds).to.be.closeTo(-1, 1e-9);
    expect(bad!.seconds).to.be.closeTo(-5, 1e-9);
    const [total] = await stores.usage.totals({ model: 'secs-m' });
    // With the two submits' 5 + 5 seconds, this sums to 4 delivered.
    expect(total!.seconds).to.be.closeTo(-6, 1e-9);
  });
});
