import type { AddressInfo } from 'node:net';
import http from 'node:http';
import { expect } from 'chai';
import { createHmac } from 'node:crypto';
import { FakeKling, KLING_FAKE_VIDEO } from './fakes/kling-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { callJson, pollUntil } from './support/calls.js';
import { klingToken } from '../plugins/providers/kling/index.js';

const KEY_A = 'sk-kling-key-a-000000001';
const KEY_B = 'sk-kling-key-b-000000002';
const KEY_TIGHT = 'sk-kling-key-tight-00003';
const ACCESS = 'ak-test-kling-0001';
const SECRET = 'sk-test-kling-secret-0001';
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

const call = (url: string, method: string, route: string, body?: unknown, key = KEY_A) => callJson<any>(url, method, route, body, key);

/** A JWT made here independently of the gateway's code. */
function jwt(payload: Record<string, unknown>, secret: string, header: Record<string, unknown> = { alg: 'HS256', typ: 'JWT' }): string {
  const h = Buffer.from(JSON.stringify(header)).toString('base64url');
  const p = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${h}.${p}.${createHmac('sha256', secret).update(`${h}.${p}`).digest('base64url')}`;
}

describe('the fake Kling checks tokens the way Kling does', () => {
  const fake = new FakeKling(ACCESS, SECRET);
  const now = Math.floor(Date.now() / 1000);
  it('accepts a good token and refuses bad ones with Kling codes', () => {
    expect(fake.checkToken(`Bearer ${jwt({ iss: ACCESS, exp: now + 1800, nbf: now - 5 }, SECRET)}`, now)).to.equal(undefined);
    expect(fake.checkToken(undefined, now)?.code).to.equal(1001);
    expect(fake.checkToken(`Bearer ${jwt({ iss: ACCESS, exp: now + 1800, nbf: now - 5 }, 'wrong')}`, now)?.code).to.equal(1000);
    expect(fake.checkToken(`Bearer ${jwt({ iss: 'someone-else', exp: now + 1800, nbf: now - 5 }, SECRET)}`, now)?.code).to.equal(1000);
    expect(fake.checkToken(`Bearer ${jwt({ iss: ACCESS, exp: now - 1, nbf: now - 5 }, SECRET)}`, now)?.code).to.equal(1004);
    expect(fake.checkToken(`Bearer ${jwt({ iss: ACCESS, exp: now + 1800, nbf: now + 60 }, SECRET)}`, now)?.code).to.equal(1003);
    expect(fake.checkToken(`Bearer ${jwt({ iss: ACCESS, exp: now + 1800, nbf: now - 5 }, SECRET, { alg: 'none' })}`, now)?.code).to.equal(1002);
  });

  it("the gateway's token: HS256, iss = access key, exp = now + 1800, nbf = now - 5", () => {
    const token = klingToken(ACCESS, SECRET, now);
    const [h, p] = token.split('.');
    expect(JSON.parse(Buffer.from(h!, 'base64url').toString())).to.deep.equal({ alg: 'HS256', typ: 'JWT' });
    expect(JSON.parse(Buffer.from(p!, 'base64url').toString())).to.deep.equal({ iss: ACCESS, exp: now + 1800, nbf: now - 5 });
    expect(token).to.equal(jwt({ iss: ACCESS, exp: now + 1800, nbf: now - 5 }, SECRET));
  });
});

describe('video-kling and video-generations against a fake Kling', () => {
  let fake: FakeKling;
  let gw: RunningGateway;
  let wrong: RunningGateway;
  /** One whose operator opened `localhost` for finished videos (video-tasks' downloadPrivateHosts). */
  let opened: RunningGateway;

  const yaml = (secret: string, more = '') => `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, { name: video-tasks, options: { pollIntervalMs: 30, maxPollIntervalMs: 100, staleAfterMs: 3600000${more} } }, video-generations, video-kling]
auth:
  keys: [{ name: a, key: ${KEY_A} }, { name: b, key: ${KEY_B} }, { name: tight, key: ${KEY_TIGHT}, budget: 0.9 }]
providers:
  - { id: kling, type: kling, baseUrl: '${fake.url}', accessKey: ${ACCESS}, secretKey: ${secret}, models: [kling-v1-6, kling-v1-5], timeouts: { firstByteMs: 1000, idleMs: 400 } }
pricing:
  kling-v1-6: { perSecond: 0.2 }
`;

  before(async () => {
    fake = new FakeKling(ACCESS, SECRET);
    await fake.start();
    gw = await startGateway(yaml(SECRET));
    wrong = await startGateway(yaml('not-the-secret'));
    opened = await startGateway(yaml(SECRET, ', downloadPrivateHosts: [localhost]'));
  });
  after(async () => {
    await gw?.stop();
    await wrong?.stop();
    await opened?.stop();
    await fake?.stop();
  });

  it("admits a submission against the budget by the length Kling will make and charge (4 s asked is 5 s made), not the length asked", async () => {
    fake.received.length = 0;
    // 4 s at 0.2 would fit the key's 0.9; the 5 s Kling makes of it (1.0) does not.
    const refused = await fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_TIGHT}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'kling-v1-6', prompt: 'too long for the budget', duration: 4 }),
    });
    expect(refused.status).to.equal(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).to.equal('insufficient_quota');
    expect(fake.received.filter((r) => r.method === 'POST')).to.have.length(0);
  });

  it('n above 1: Kling makes one video a task, so one is charged and n is named as a loss (as are fps and seed, which Kling has no field for)', async () => {
    fake.received.length = 0;
    const submitted = await fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'kling-v1-6', prompt: 'three of them', n: 3, duration: 5, fps: 24, seed: 42 }),
    });
    expect(submitted.status).to.equal(200);
    // 5 s at 0.2, not three times that.
    expect(Number(submitted.headers.get('x-switchyard-cost'))).to.be.closeTo(1, 1e-9);
    expect(fake.received.filter((r) => r.method === 'POST')).to.have.length(1);
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ model: 'kling-v1-6', limit: 50 });
    expect(entries.find((e) => e.requestId === submitted.headers.get('x-request-id'))?.losses).to.deep.equal(['n', 'fps', 'seed']);
    expect(fake.received.find((r) => r.method === 'POST')!.body).not.to.have.any.keys('fps', 'seed', 'n');
    // Done before the next test looks at what Kling received.
    const id = ((await submitted.json()) as { task_id: string }).task_id;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
  });

  for (const route of ['/kling/v1/videos/image2video', '/videoa/v1/videos/image2video']) {
    it(`POST ${route} with the vendor's field names -> task, polled to completed, video through the gateway`, async () => {
      fake.received.length = 0;
      const submitted = await call(gw.url, 'POST', route, {
        model_name: 'kling-v1-6',
        prompt: 'the cat jumps',
        image: `data:image/png;base64,${PNG}`,
        image_tail: PNG,
        negative_prompt: 'blur',
        mode: 'pro',
        duration: '10',
        cfg_scale: 0.5,
      });
      expect(submitted.status, submitted.text).to.equal(200);
      expect(submitted.json).to.deep.equal({ task_id: submitted.json.task_id, status: 'queued' });
      const sent = fake.received.find((r) => r.method === 'POST')!;
      expect(sent.path).to.equal('/v1/videos/image2video');
      expect(sent.body).to.deep.equal({
        model_name: 'kling-v1-6',
        prompt: 'the cat jumps',
        negative_prompt: 'blur',
        image: PNG,
        image_tail: PNG,
        mode: 'pro',
        cfg_scale: 0.5,
        duration: '10',
      });
      const id = submitted.json.task_id as string;
      const states = await pollUntil(() => call(gw.url, 'GET', `${route}/${id}`), (r) => r.json?.status === 'completed' || r.json?.status === 'failed');
      const final = states.at(-1)!;
      expect(final.json.status).to.equal('completed');
      expect(final.json.url).to.equal(`${route}/${id}/content`);
      expect(final.text).not.to.include(fake.cdnToken);
      expect(final.text).not.to.match(/kt\d{6}/);
      const polls = fake.received.filter((r) => r.method === 'GET');
      expect(polls.length).to.be.at.least(2);
      for (const p of polls) expect(p.path).to.match(/^\/v1\/videos\/image2video\/kt\d{6}$/);
      const video = await fetch(`${gw.url}${final.json.url}`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(video.status).to.equal(200);
      expect(Buffer.from(await video.arrayBuffer()).equals(KLING_FAKE_VIDEO)).to.equal(true);
      // 10 s at 0.2 a second, metered.
      const task = gw.gateway.stores.tasks.get(id)!;
      expect(task.seconds).to.equal(10);
      expect(task.cost).to.be.closeTo(2, 1e-9);
    });
  }

  it("a client's callback_url and external_task_id go to no back end (the gateway polls; Kling would post its own id and video address there) and are named as losses", async () => {
    for (const route of ['/kling/v1/videos/image2video', '/v1/video/generations']) {
      fake.received.length = 0;
      const submitted = await fetch(`${gw.url}${route}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'kling-v1-6', prompt: 'call me', image: PNG, callback_url: 'https://client.example/hook', external_task_id: 'order-17' }),
      });
      expect(submitted.status, route).to.equal(200);
      const sent = fake.received.find((r) => r.method === 'POST')!;
      expect(sent.body, route).not.to.have.any.keys('callback_url', 'external_task_id');
      await gw.gateway.stores.flush();
      const { entries } = await gw.gateway.stores.logs.query({ model: 'kling-v1-6', limit: 50 });
      expect(entries.find((e) => e.requestId === submitted.headers.get('x-request-id'))?.losses, route).to.deep.equal(['callback_url', 'external_task_id']);
      const id = ((await submitted.json()) as { task_id: string }).task_id;
      await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    }
  });

  it("Kling's own fields on /v1/video/generations: negative_prompt and aspect_ratio go up as Kling names them; a field Kling has no place for is named as a loss", async () => {
    fake.received.length = 0;
    const submitted = await fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'kling-v1-6', prompt: 'a quiet lake', negative_prompt: 'people', aspect_ratio: '9:16', style: 'anime' }),
    });
    expect(submitted.status).to.equal(200);
    const sent = fake.received.find((r) => r.method === 'POST')!.body as Record<string, unknown>;
    expect(sent).to.include({ negative_prompt: 'people', aspect_ratio: '9:16' });
    expect(sent).to.not.have.property('style');
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ model: 'kling-v1-6', limit: 50 });
    expect(entries.find((e) => e.requestId === submitted.headers.get('x-request-id'))?.losses).to.deep.equal(['style']);
    const id = ((await submitted.json()) as { task_id: string }).task_id;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
  });

  it("the spec's response_format and user, which no video back end takes, are named as losses on /v1/video/generations", async () => {
    const submitted = await fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'kling-v1-6', prompt: 'named', response_format: 'url', user: 'end-user-7' }),
    });
    expect(submitted.status).to.equal(200);
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ model: 'kling-v1-6', limit: 50 });
    expect(entries.find((e) => e.requestId === submitted.headers.get('x-request-id'))?.losses).to.have.members(['response_format', 'user']);
    const id = ((await submitted.json()) as { task_id: string }).task_id;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
  });

  it('a client that hangs up while Kling takes the submit: the job Kling made becomes the task and its charge all the same (a job abandoned would be billed and recorded nowhere)', async () => {
    await gw.gateway.stores.flush();
    const spentBefore = (await gw.gateway.stores.keys.get('b'))!.spent;
    let release!: () => void;
    fake.holdSubmits = new Promise<void>((resolve) => (release = resolve));
    const before = fake.received.length;
    const leaving = new AbortController();
    // The gateway's side of the client's connection: closed once the gateway has seen it go.
    let seenGone = false;
    const watch = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => {
      if (req.url === '/v1/video/generations') res.once('close', () => (seenGone = true));
    };
    gw.gateway.server!.on('request', watch);
    try {
      const submit = fetch(`${gw.url}/v1/video/generations`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY_B}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'kling-v1-6', prompt: 'nobody waits', duration: 5 }),
        signal: leaving.signal,
      }).catch((error: unknown) => error);
      await eventually(() => fake.received.slice(before).some((r) => r.method === 'POST'), 3000, 'the submit at Kling');
      leaving.abort();
      expect(await submit).to.be.instanceOf(Error);
      // The client is gone, as the gateway sees it, before Kling answers.
      await eventually(() => seenGone, 3000, 'the gateway to see the client go');
    } finally {
      gw.gateway.server!.off('request', watch);
      fake.holdSubmits = undefined;
      release();
    }
    // The gateway polls the job Kling made: it is a task of its own, charged to the key (5 s at 0.2).
    const vendorTask = [...fake.tasks.values()].at(-1)!;
    await eventually(() => vendorTask.polls > 0, 3000, 'a poll of the job Kling made');
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.keys.get('b'))!.spent - spentBefore).to.be.closeTo(1, 1e-9);
  });

  it('POST /v1/video/generations without an image is a Kling text2video task', async () => {
    fake.received.length = 0;
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'sunrise', duration: 5 });
    expect(submitted.status, submitted.text).to.equal(200);
    expect(fake.received[0]!.path).to.equal('/v1/videos/text2video');
    expect(fake.received[0]!.body).to.deep.equal({ model_name: 'kling-v1-6', prompt: 'sunrise', duration: '5' });
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
  });

  it('a failed Kling task is reported with its message and refunded exactly once', async () => {
    const before = (await gw.gateway.stores.keys.get('b'))!.spent;
    const submitted = await call(gw.url, 'POST', '/kling/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: '[fail]', image: PNG }, KEY_B);
    const id = submitted.json.task_id as string;
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.keys.get('b'))!.spent).to.be.closeTo(before + 1, 1e-9);
    const states = await pollUntil(() => call(gw.url, 'GET', `/kling/v1/videos/image2video/${id}`, undefined, KEY_B), (r) => r.json?.status === 'failed');
    expect(states.at(-1)!.json.error).to.deep.equal({ code: 'generation_failed', message: 'Content moderation rejected the image' });
    await call(gw.url, 'GET', `/kling/v1/videos/image2video/${id}`, undefined, KEY_B);
    await gw.gateway.stores.flush();
    const rows = (await gw.gateway.stores.usage.list({ requestId: id })).filter((r) => r.cost < 0);
    expect(rows).to.have.length(1);
    expect(rows[0]!.cost).to.be.closeTo(-1, 1e-9);
    expect((await gw.gateway.stores.keys.get('b'))!.spent).to.be.closeTo(before, 1e-9);
  });

  it('a task Kling no longer knows (404, code 1203) fails as not_found and is refunded once, instead of polling until the timeout', async () => {
    const before = (await gw.gateway.stores.keys.get('b'))!.spent;
    const submitted = await call(gw.url, 'POST', '/kling/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: '[forgotten]', image: PNG }, KEY_B);
    const id = submitted.json.task_id as string;
    const states = await pollUntil(() => call(gw.url, 'GET', `/kling/v1/videos/image2video/${id}`, undefined, KEY_B), (r) => r.json?.status === 'failed');
    expect(states.at(-1)!.json.error).to.deep.equal({ code: 'not_found', message: 'Kling no longer has this task.' });
    await gw.gateway.stores.flush();
    const refunds = (await gw.gateway.stores.usage.list({ requestId: id })).filter((r) => r.cost < 0);
    expect(refunds).to.have.length(1);
    expect((await gw.gateway.stores.keys.get('b'))!.spent).to.be.closeTo(before, 1e-9);
  });

  it("a 404 that is not Kling's word that the task is gone (a proxy's page, code 1202) is polled again: the task completes and is charged", async () => {
    const before = (await gw.gateway.stores.keys.get('b'))!.spent;
    const submitted = await call(gw.url, 'POST', '/kling/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: '[proxy404]', image: PNG }, KEY_B);
    const id = submitted.json.task_id as string;
    const states = await pollUntil(() => call(gw.url, 'GET', `/kling/v1/videos/image2video/${id}`, undefined, KEY_B), (r) => r.json?.status === 'completed' || r.json?.status === 'failed');
    expect(states.at(-1)!.json.status).to.equal('completed');
    const vendorTask = [...fake.tasks.values()].find((t) => t.script.includes('proxy404'))!;
    expect(vendorTask.polls).to.be.at.least(4);
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.usage.list({ requestId: id })).filter((r) => r.cost < 0)).to.have.length(0);
    expect((await gw.gateway.stores.keys.get('b'))!.spent).to.be.closeTo(before + 1, 1e-9);
  });

  it('a state Kling never documented keeps the task polling until it finishes', async () => {
    const submitted = await call(gw.url, 'POST', '/kling/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: '[weird]', image: PNG });
    const id = submitted.json.task_id as string;
    const states = await pollUntil(() => call(gw.url, 'GET', `/kling/v1/videos/image2video/${id}`), (r) => r.json?.status === 'completed' || r.json?.status === 'failed');
    expect(states.at(-1)!.json.status).to.equal('completed');
    const vendorTask = [...fake.tasks.values()].find((t) => t.script.includes('rendering_on_mars'))!;
    expect(vendorTask.polls).to.be.at.least(4);
  });

  it('another key gets 404 for the task, as for one that does not exist', async () => {
    const submitted = await call(gw.url, 'POST', '/videoa/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: 'x', image: PNG });
    const id = submitted.json.task_id as string;
    const foreign = await call(gw.url, 'GET', `/videoa/v1/videos/image2video/${id}`, undefined, KEY_B);
    const missing = await call(gw.url, 'GET', `/videoa/v1/videos/image2video/task_nope`, undefined, KEY_B);
    expect(foreign.status).to.equal(404);
    expect(missing.status).to.equal(404);
    expect(foreign.json.error.code).to.equal('task_not_found');
    expect(missing.json.error.code).to.equal('task_not_found');
  });

  it('refuses bad vendor-style bodies with a 400 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ prompt: 'no model', image: PNG }, 'model_name'],
      [{ model_name: 'kling-v1-6', mode: 'ultra' }, 'mode'],
      [{ model_name: 'kling-v1-6', duration: 'ten' }, 'duration'],
      [{ model_name: 'kling-v1-6', duration: 1e9 }, 'duration'],
      [{ model_name: 'kling-v1-6', duration: '1000000000' }, 'duration'],
      [{ model_name: 'kling-v1-6', duration: '0' }, 'duration'],
      [{ model_name: 'kling-v1-6', aspect_ratio: '4:3' }, 'aspect_ratio'],
      [{ model_name: 'kling-v1-6', cfg_scale: 2 }, 'cfg_scale'],
      // image-to-video: an image is needed (without one Kling would make, and charge, a text2video task)
      [{ model_name: 'kling-v1-6', prompt: 'no image' }, 'image'],
      [{ model_name: 'kling-v1-6', prompt: 'x', image: 'not base64 !!' }, 'image'],
      [{ model_name: 'kling-v1-6', prompt: 'x', image: 'ftp://example.com/a.png' }, 'image'],
      [{ model_name: 'kling-v1-6', prompt: 'x', image: 'data:image/png;base64,%%%' }, 'image'],
      [{ model_name: 'kling-v1-6', prompt: 'x', image: PNG, image_tail: 'ftp://example.com/b.png' }, 'image_tail'],
    ];
    fake.received.length = 0;
    for (const route of ['/kling/v1/videos/image2video', '/videoa/v1/videos/image2video']) {
      for (const [body, param] of cases) {
        const r = await call(gw.url, 'POST', route, body);
        expect(r.status, JSON.stringify(body)).to.equal(400);
        expect(r.json.error.param, JSON.stringify(body)).to.equal(param);
        expect(r.json.error.type, JSON.stringify(body)).to.equal('invalid_request_error');
      }
    }
    expect(fake.received.filter((r) => r.method === 'POST'), 'nothing is submitted to Kling').to.have.length(0);
  });

  it('content after the CDN link expired: the gateway asks Kling for a fresh link and serves it; a CDN that refuses is a 502, not a 500', async () => {
    fake.singleUseLinks = true;
    try {
      const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'expiring', duration: 5 });
      const id = submitted.json.task_id as string;
      await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
      const served = fake.cdnServed;
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${gw.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
        expect(res.status, `download ${i + 1}`).to.equal(200);
        expect(Buffer.from(await res.arrayBuffer()).equals(KLING_FAKE_VIDEO)).to.equal(true);
      }
      expect(fake.cdnServed).to.equal(served + 2);
      fake.cdnDown = true;
      const refused = await call(gw.url, 'GET', `/v1/video/generations/${id}/content`);
      expect(refused.status, refused.text).to.equal(502);
      expect(refused.json.error.code).to.equal('upstream_error');
      expect(refused.json.error.message).to.include('HTTP 403');
      expect(refused.text).not.to.include(fake.cdnToken).and.not.to.include('cdn-sig');
      // A page answered 200 where the video should be: a 502, the page's bytes never the client's.
      fake.cdnDown = false;
      fake.singleUseLinks = false;
      await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
      fake.cdnFault = 'page';
      const page = await fetch(`${gw.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
      const pageText = await page.text();
      expect(page.status, pageText).to.equal(502);
      expect(pageText).to.include('answered a page (text/html)').and.not.include('AccessDenied');
    } finally {
      fake.cdnFault = undefined;
      fake.singleUseLinks = false;
      fake.cdnDown = false;
      fake.cdnToken = 'cdn-sig-7f3a9c';
    }
  });

  it("content from an address on a private network that is not the back end's own is refused, redirects included: the gateway never fetches it for the client", async () => {
    // Another server on this machine, standing for the metadata service or an intranet page.
    let hits = 0;
    const internal = http.createServer((_req, res) => {
      hits++;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('{"SecretAccessKey":"INTERNAL"}');
    });
    await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
    // `localhost`: a name the back end's configuration (127.0.0.1) does not give.
    const inside = `http://localhost:${(internal.address() as AddressInfo).port}`;
    try {
      const finished = async (prompt: string) => {
        const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt, duration: 5 });
        const id = submitted.json.task_id as string;
        await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
        return id;
      };
      fake.cdnBase = inside;
      const direct = await finished('an internal address');
      fake.cdnBase = undefined;
      const refused = await fetch(`${gw.url}/v1/video/generations/${direct}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
      const text = await refused.text();
      expect(refused.status).to.equal(502);
      expect(text).to.include('loopback address');
      expect(text).to.not.include('INTERNAL');

      const redirected = await finished('a redirect inside');
      fake.cdnRedirectTo = `${inside}/latest/meta-data`;
      const again = await fetch(`${gw.url}/v1/video/generations/${redirected}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(again.status).to.equal(502);
      expect(await again.text()).to.not.include('INTERNAL');
      expect(hits).to.equal(0);

      // An operator who opened that host (downloadPrivateHosts) gets its video from it.
      fake.cdnRedirectTo = undefined;
      fake.cdnBase = inside;
      const submitted = await call(opened.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'an opened host', duration: 5 });
      const id = submitted.json.task_id as string;
      await pollUntil(() => call(opened.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
      fake.cdnBase = undefined;
      const fetched = await fetch(`${opened.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(fetched.status).to.equal(200);
      expect(await fetched.text()).to.include('INTERNAL');
      expect(hits).to.equal(1);
    } finally {
      fake.cdnBase = undefined;
      fake.cdnRedirectTo = undefined;
      internal.closeAllConnections();
      await new Promise<void>((resolve) => internal.close(() => resolve()));
    }
  });

  it('content from a CDN that compresses: the gateway asks for the bytes as stored, and never sends a length that is not the body\'s', async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'compressible', duration: 5 });
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    const download = async () => {
      const res = await fetch(`${gw.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
      expect(res.status).to.equal(200);
      const length = res.headers.get('content-length');
      const bytes = Buffer.from(await res.arrayBuffer());
      expect(bytes.equals(KLING_FAKE_VIDEO), `${bytes.length} bytes against ${KLING_FAKE_VIDEO.length}`).to.equal(true);
      return length;
    };
    expect(await download()).to.equal(String(KLING_FAKE_VIDEO.length));
    expect(fake.cdnAcceptEncoding).to.equal('identity');
    fake.cdnAlwaysGzip = true;
    try {
      // Compressed anyway: the decoded video goes out without the compressed length.
      expect(await download()).to.equal(null);
    } finally {
      fake.cdnAlwaysGzip = false;
    }
  });

  it("content honours one Range as the CDN serves it: 206 with its Content-Range; past the end a 416; several ranges get the whole video", async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'seekable', duration: 5 });
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    const size = KLING_FAKE_VIDEO.length;
    const get = (range?: string) =>
      fetch(`${gw.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}`, ...(range ? { range } : {}) } });
    const whole = await get();
    expect(whole.status).to.equal(200);
    expect(whole.headers.get('accept-ranges')).to.equal('bytes');
    expect(Buffer.from(await whole.arrayBuffer()).equals(KLING_FAKE_VIDEO)).to.equal(true);
    for (const [range, start, end] of [['bytes=100-199', 100, 199], ['bytes=-10', size - 10, size - 1], [`bytes=${size - 5}-`, size - 5, size - 1]] as const) {
      const part = await get(range);
      expect(part.status, range).to.equal(206);
      expect(fake.cdnRange).to.equal(range);
      expect(part.headers.get('content-range')).to.equal(`bytes ${start}-${end}/${size}`);
      expect(part.headers.get('content-length')).to.equal(String(end - start + 1));
      expect(Buffer.from(await part.arrayBuffer()).equals(KLING_FAKE_VIDEO.subarray(start, end + 1)), range).to.equal(true);
    }
    const past = await get(`bytes=${size + 10}-`);
    expect(past.status).to.equal(416);
    expect(past.headers.get('content-range'), "the video's length, for the player to ask again").to.equal(`bytes */${size}`);
    expect(((await past.json()) as any).error.code).to.equal('range_not_satisfiable');
    const several = await get('bytes=0-1,5-6');
    expect(several.status).to.equal(200);
    expect(fake.cdnRange, 'several ranges are not sent on').to.equal(undefined);
    expect(Buffer.from(await several.arrayBuffer()).equals(KLING_FAKE_VIDEO)).to.equal(true);
  });

  it("content under the provider's timeouts: a CDN that never answers is a 504; one that goes silent or drops the connection midway breaks the download and is logged as the back end's failure, not the client's", async () => {
    const submitted = await call(gw.url, 'POST', '/v1/video/generations', { model: 'kling-v1-6', prompt: 'flaky cdn', duration: 5 });
    const id = submitted.json.task_id as string;
    await pollUntil(() => call(gw.url, 'GET', `/v1/video/generations/${id}`), (r) => r.json?.status === 'completed');
    try {
      fake.cdnFault = 'hang';
      const hung = await call(gw.url, 'GET', `/v1/video/generations/${id}/content`);
      expect(hung.status, hung.text).to.equal(504);
      expect(hung.json.error.code).to.equal('upstream_timeout');
      for (const [fault, code] of [['stall', 'upstream_timeout'], ['cut', 'upstream_error']] as const) {
        fake.cdnFault = fault;
        const res = await fetch(`${gw.url}/v1/video/generations/${id}/content`, { headers: { authorization: `Bearer ${KEY_A}` } });
        expect(res.status, fault).to.equal(200);
        const requestId = res.headers.get('x-request-id');
        let broke: unknown;
        try {
          await res.arrayBuffer();
        } catch (error) {
          broke = error;
        }
        expect(broke, `${fault}: the client sees a broken transfer, not a complete-looking file`).to.be.instanceOf(Error);
        await eventually(() => gw.logs.some((l) => l.message === 'request' && l.requestId === requestId), 3000, 'the access line');
        const line = gw.logs.find((l) => l.message === 'request' && l.requestId === requestId)!;
        expect(line.error, fault).to.equal(code);
        expect(line.status, fault).to.not.equal(499);
      }
    } finally {
      fake.cdnFault = undefined;
    }
  });

  it("a model nobody serves is a 404 naming the client's own field (model_name on Kling's routes, model on the spec's)", async () => {
    const kling = await call(gw.url, 'POST', '/videoa/v1/videos/image2video', { model_name: 'no-such-kling', image: PNG });
    expect(kling.status).to.equal(404);
    expect(kling.json.error).to.include({ code: 'model_not_found', param: 'model_name' });
    const spec = await call(gw.url, 'POST', '/v1/video/generations', { model: 'no-such-kling', prompt: 'p' });
    expect(spec.status).to.equal(404);
    expect(spec.json.error).to.include({ code: 'model_not_found', param: 'model' });
  });

  it('a wrong secret key: Kling answers 401 and the client gets an error, no task', async () => {
    fake.received.length = 0;
    const r = await call(wrong.url, 'POST', '/kling/v1/videos/image2video', { model_name: 'kling-v1-6', prompt: 'x', image: PNG });
    expect(r.status).to.be.at.least(500);
    expect(r.json.error).to.be.an('object');
    expect(r.text).not.to.include('not-the-secret');
    const posts = fake.received.filter((x) => x.method === 'POST');
    expect(posts.length).to.be.at.least(1);
    for (const post of posts) expect(fake.checkToken(post.authorization)?.code).to.equal(1000);
    // As from any back end: the refusal is said, Kling's own text is not (it goes to the log).
    expect(r.json.error.message).to.include("refused the gateway's credentials (401)");
    expect(r.text).not.to.include('Authentication failed');
    expect(wrong.logs.some((l) => l.message === 'kling answered with an error' && l.status === 401 && String(l.body).includes('Authentication failed'))).to.equal(true);
  });

  it("Kling's error page (HTML, a stack trace, a password) never reaches the client: a 502 saying the status; the page goes to the log, credentials redacted", async () => {
    const page = `<html><body><h1>500 Internal Server Error</h1><pre>java.lang.IllegalStateException: pool
  at com.kling.api.TaskController.submit(TaskController.java:88)
db_password=hunter2-prod secret=${SECRET}</pre></body></html>`;
    fake.failWith = { status: 500, contentType: 'text/html', body: page };
    try {
      for (const route of ['/kling/v1/videos/image2video', '/v1/video/generations']) {
        const r = await call(gw.url, 'POST', route, { model: 'kling-v1-6', prompt: 'x', image: PNG });
        expect(r.status, r.text).to.equal(502);
        expect(r.json.error.code).to.equal('upstream_error');
        expect(r.json.error.message).to.include('status 500');
        for (const leak of ['<html', 'db_password', 'hunter2', 'TaskController', 'IllegalState', SECRET]) expect(r.text).not.to.include(leak);
      }
      const logged = gw.logs.filter((l) => l.message === 'kling answered with an error' && l.status === 500);
      expect(logged.length).to.be.at.least(1);
      expect(String(logged[0]!.body)).to.include('db_password');
      expect(gw.logText()).not.to.include(SECRET);
    } finally {
      fake.failWith = undefined;
    }
  });

  /** A submit while Kling answers every call with `status` and the JSON `body`. */
  const submitWhileKlingAnswers = async (status: number, body: Record<string, unknown>, model = 'kling-v1-6') => {
    fake.failWith = { status, contentType: 'application/json', body: JSON.stringify(body) };
    try {
      return await call(gw.url, 'POST', '/kling/v1/videos/image2video', { model_name: model, prompt: 'x', image: PNG });
    } finally {
      fake.failWith = undefined;
    }
  };

  it('an account Kling says is out of credit (1101 arrears, 1102 resource pack used up) is upstream_quota_exhausted, not a rate limit to wait out', async () => {
    for (const [status, code] of [[429, 1102], [200, 1101]] as const) {
      // A model of its own: the failures take it out of use for a while, as any back end's would.
      const r = await submitWhileKlingAnswers(status, { code, message: 'account balance not enough', request_id: 'r2' }, 'kling-v1-5');
      expect(r.status, r.text).to.equal(429);
      expect(r.json.error.code).to.equal('upstream_quota_exhausted');
      expect(r.headers.get('x-should-retry')).to.equal('false');
    }
  });

  it("a request Kling refuses (400 with its JSON message) keeps Kling's message, scrubbed, as a 400", async () => {
    const r = await submitWhileKlingAnswers(400, { code: 1201, message: 'image is invalid, see https://kling.example/docs', request_id: 'r1' });
    expect(r.status, r.text).to.equal(400);
    expect(r.json.error.code).to.equal('upstream_bad_request');
    expect(r.json.error.message).to.include('image is invalid');
    expect(r.text).not.to.include('kling.example');
  });

  it('a Kling refusal carried in an HTTP 200 (a non-zero code) is read by its code: 1004 is a refused credential, its text not shown', async () => {
    const r = await submitWhileKlingAnswers(200, { code: 1004, message: 'token expired for ak-123 at node-7', request_id: 'r2' });
    expect(r.status, r.text).to.equal(502);
    expect(r.json.error.message).to.include("refused the gateway's credentials");
    expect(r.text).not.to.include('token expired');
  });
});
