import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { jsonOrText } from './support/json.js';
import { FakeJimeng, JIMENG_VIDEO } from './fakes/jimeng-upstream.js';
import { FakeSora, SORA_VIDEO } from './fakes/sora-upstream.js';
import { FakeKling, KLING_FAKE_VIDEO } from './fakes/kling-upstream.js';

const KEY = 'sk-video-jimeng-key-000000001';
const OTHER = 'sk-video-jimeng-key-000000002';
const THRIFTY = 'sk-video-jimeng-key-000000003';
const FIXTURE = readFileSync(path.resolve('test/fixtures/tiny-16x16-1s.mp4'));
const PNG_B64 = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de', 'hex').toString('base64');
const SUBMIT = 'Action=CVSync2AsyncSubmitTask&Version=2022-08-31';
const RESULT = 'Action=CVSync2AsyncGetResult&Version=2022-08-31';

interface Reply {
  status: number;
  json: any;
  headers: Headers;
}

describe('POST /videob/ and /jimeng/ (Jimeng visual API shape)', () => {
  const jimeng = new FakeJimeng();
  const sora = new FakeSora();
  const kling = new FakeKling('kling-access-video-jimeng', 'kling-secret-video-jimeng-0123456789');
  let gw: RunningGateway;

  async function post(pathAndQuery: string, body: unknown, key = KEY): Promise<Reply> {
    const reply = await postJson(gw.url, pathAndQuery, body, key);
    return { status: reply.status, json: jsonOrText(reply.text), headers: reply.headers };
  }

  /** GetResult until the task leaves in_queue / generating. */
  async function result(prefix: string, reqKey: string, taskId: string, key = KEY, ms = 8000): Promise<{ final: Reply; seen: string[] }> {
    const deadline = Date.now() + ms;
    const seen: string[] = [];
    for (;;) {
      const reply = await post(`${prefix}/?${RESULT}`, { req_key: reqKey, task_id: taskId }, key);
      expect(reply.status).to.equal(200);
      const status = reply.json.data?.status as string;
      if (seen[seen.length - 1] !== status) seen.push(status);
      if (status !== 'in_queue' && status !== 'generating') return { final: reply, seen };
      if (Date.now() > deadline) throw new Error(`task ${taskId} still ${status}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  before(async () => {
    await jimeng.start();
    await sora.start();
    await kling.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - routing
  - metering
  - { name: video-tasks, options: { pollIntervalMs: 20, maxPollIntervalMs: 50, staleAfterMs: 0 } }
  - video-jimeng
auth:
  keys: [{ name: maker, key: ${KEY} }, { name: stranger, key: ${OTHER} }, { name: thrifty, key: ${THRIFTY}, budget: 1.1 }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
  - id: volc
    type: jimeng
    baseUrl: ${jimeng.url}
    accessKey: ${jimeng.accessKey}
    secretKey: ${jimeng.secretKey}
    models: [jimeng_vgfm_t2v_l20, jimeng_vgfm_i2v_l20, jimeng_t2v_v30]
  - id: volc-bad
    type: jimeng
    baseUrl: ${jimeng.url}
    accessKey: ${jimeng.accessKey}
    secretKey: not-the-secret-key
    models: [jimeng-wrong-secret]
  - { id: sora, type: sora, baseUrl: '${sora.url}/v1', apiKey: ${sora.apiKey}, models: [sora-2] }
  - { id: kling, type: kling, baseUrl: '${kling.url}', accessKey: ${kling.accessKey}, secretKey: ${kling.secretKey}, models: [kling-v1-6] }
pricing:
  mock-video: { perSecond: 0.1 }
  jimeng_vgfm_t2v_l20: { perSecond: 0.2 }
`);
  });
  after(async () => {
    await gw?.stop();
    await jimeng.stop();
    await sora.stop();
    await kling.stop();
  });
  beforeEach(() => {
    jimeng.reset();
    sora.reset();
  });

  for (const [reqKey, label, bytes] of [
    ['sora-2', 'sora (OpenAI /v1/videos)', () => SORA_VIDEO],
    ['kling-v1-6', 'kling (JWT)', () => KLING_FAKE_VIDEO],
  ] as const) {
    it(`the ${label} back end through /videob/: submitted, polled to done, content through the gateway`, async () => {
      const submitted = await post(`/videob/?${SUBMIT}`, { req_key: reqKey, prompt: 'a kite over the sea', binary_data_base64: [PNG_B64] });
      expect(submitted.status).to.equal(200);
      expect(submitted.json.code).to.equal(10000);
      const { final } = await result('/videob', reqKey, submitted.json.data.task_id);
      expect(final.json.data.status).to.equal('done');
      expect(JSON.stringify(final.json)).to.not.contain(sora.url).and.not.contain(kling.url);
      const video = await fetch(`${gw.url}${final.json.data.video_url}`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(Buffer.from(await video.arrayBuffer()).equals(bytes())).to.equal(true);
      if (reqKey === 'sora-2') expect(sora.creates()[0]!.files.input_reference!.type).to.equal('image/png');
    });
  }

  it('the jimeng back end: a submit is signed as Volcengine checks it, polled in_queue -> generating -> done, video_url is the gateway\'s and serves the vendor\'s bytes', async () => {
    const submitted = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng_vgfm_t2v_l20', prompt: '一只小猫在草地上奔跑', seed: 11, aspect_ratio: '16:9' });
    expect(submitted.status).to.equal(200);
    expect(submitted.json).to.deep.include({ code: 10000, message: 'Success', status: 10000 });
    const taskId = submitted.json.data.task_id as string;
    expect(taskId).to.match(/^task_[0-9a-f]{32}$/);
    expect(submitted.json.request_id).to.be.a('string');
    const sent = jimeng.calls('CVSync2AsyncSubmitTask');
    expect(sent).to.have.length(1);
    expect(sent[0]!.signed).to.equal(true);
    expect(sent[0]!.body).to.deep.equal({ req_key: 'jimeng_vgfm_t2v_l20', prompt: '一只小猫在草地上奔跑', seed: 11, aspect_ratio: '16:9' });

    const { final, seen } = await result('/videob', 'jimeng_vgfm_t2v_l20', taskId);
    expect(final.json).to.deep.include({ code: 10000, message: 'Success' });
    expect(final.json.data).to.include({ task_id: taskId, status: 'done' });
    expect(seen[seen.length - 1]).to.equal('done');
    expect(jimeng.calls('CVSync2AsyncGetResult').length).to.be.greaterThan(0);
    expect(jimeng.received.every((r) => r.signed)).to.equal(true);
    const url = final.json.data.video_url as string;
    expect(url.startsWith(`/videob/tasks/${taskId}/content`)).to.equal(true);
    expect(JSON.stringify(final.json)).to.not.contain(jimeng.url);
    expect(JSON.stringify(final.json)).to.not.contain('700000000');

    const video = await fetch(`${gw.url}${url}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(video.status).to.equal(200);
    expect(video.headers.get('content-type')).to.equal('video/mp4');
    expect(Buffer.from(await video.arrayBuffer()).equals(JIMENG_VIDEO)).to.equal(true);
    const stranger = await fetch(`${gw.url}${url}`, { headers: { authorization: `Bearer ${OTHER}` } });
    expect(stranger.status).to.equal(404);
    expect(gw.logText()).to.not.contain(jimeng.secretKey);
  });

  it('image-to-video at the vendor path /jimeng/: binary_data_base64 goes up as it came, with the i2v req_key', async () => {
    const submitted = await post(`/jimeng/?${SUBMIT}`, { req_key: 'jimeng_vgfm_i2v_l20', prompt: 'make it move', binary_data_base64: [PNG_B64] });
    expect(submitted.status).to.equal(200);
    expect(jimeng.last().body).to.deep.equal({ req_key: 'jimeng_vgfm_i2v_l20', prompt: 'make it move', binary_data_base64: [PNG_B64] });
    const { final } = await result('/jimeng', 'jimeng_vgfm_i2v_l20', submitted.json.data.task_id);
    expect(final.json.data.status).to.equal('done');
    expect(final.json.data.video_url).to.match(/^\/jimeng\/tasks\/task_/);
  });

  it('a first and a last frame: in order to the 3.0 first-and-last-frame req_key; one of each kind (URL, data) refused before any call or charge', async () => {
    const both = await post(`/jimeng/?${SUBMIT}`, { req_key: 'jimeng_t2v_v30', prompt: 'p', binary_data_base64: [PNG_B64, PNG_B64.slice(0, 20)] });
    expect(both.status, JSON.stringify(both.json)).to.equal(200);
    expect(jimeng.last().body).to.deep.include({ req_key: 'jimeng_i2v_first_tail_v30', binary_data_base64: [PNG_B64, PNG_B64.slice(0, 20)] });
    const calls = jimeng.received.length;
    const mixed = await post(`/jimeng/?${SUBMIT}`, { req_key: 'jimeng_t2v_v30', prompt: 'p', binary_data_base64: [PNG_B64], image_urls: ['https://example.com/last.png'] });
    expect(mixed.status, JSON.stringify(mixed.json)).to.equal(400);
    expect(JSON.stringify(mixed.json)).to.include('both as http(s) URLs or both as image data');
    expect(jimeng.received.length).to.equal(calls);
    await gw.gateway.stores.flush();
    const rows = await gw.gateway.stores.usage.list({ requestId: mixed.headers.get('x-request-id')! });
    expect(rows).to.have.length(0);
  });

  it('the mock back end through /videob/: submitted and polled to done, the content is the fixture', async () => {
    const submitted = await post(`/videob/?${SUBMIT}`, { req_key: 'mock-video', prompt: 'a small test video' });
    expect(submitted.json.code).to.equal(10000);
    // Its content before it is done: a 400 saying so, as every format answers (not a 404).
    const early = await fetch(`${gw.url}/videob/tasks/${submitted.json.data.task_id}/content`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(early.status).to.equal(400);
    expect(((await early.json()) as { error: { message: string } }).error.message).to.match(/has no video/);
    const { final, seen } = await result('/videob', 'mock-video', submitted.json.data.task_id);
    expect(final.json.data.status).to.equal('done');
    expect(seen).to.include('done');
    const video = await fetch(`${gw.url}${final.json.data.video_url}`, { headers: { authorization: `Bearer ${KEY}` } });
    expect(Buffer.from(await video.arrayBuffer()).equals(FIXTURE)).to.equal(true);
  });

  it('reading a paid task costs nothing and is never refused for the budget, even with almost none of it left', async () => {
    const submitted = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng_vgfm_t2v_l20', prompt: 'all my budget' }, THRIFTY);
    expect(submitted.json.code, JSON.stringify(submitted.json)).to.equal(10000);
    // 5 s at 0.2 charged: 0.1 of the key's 1.1 left, less than another video would cost.
    const again = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng_vgfm_t2v_l20', prompt: 'one more' }, THRIFTY);
    expect(again.status).to.equal(429);
    const { final } = await result('/videob', 'jimeng_vgfm_t2v_l20', submitted.json.data.task_id, THRIFTY);
    expect(final.status).to.equal(200);
    expect(final.json.data.status).to.equal('done');
    // The reads are no calls of a back end: the request log has them, the usage ledger not (a
    // client polling every second made thousands of "requests" in /admin/usage).
    await gw.gateway.stores.flush();
    const rows = (await gw.gateway.stores.usage.list({ limit: 1000 })).filter((row) => row.keyName === 'thrifty');
    expect(rows.map((row) => row.provider)).to.deep.equal(['volc']);
    expect(final.headers.get('x-switchyard-cost')).to.be.oneOf([null, '0']);
  });

  it('an expired vendor task reads expired and is refunded exactly once; another key and an unknown id read not_found', async () => {
    jimeng.plan = [{ status: 'generating' }, { status: 'expired' }];
    const submitted = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng_vgfm_t2v_l20', prompt: 'will expire' });
    const taskId = submitted.json.data.task_id as string;
    await gw.gateway.stores.flush();
    const charge = (await gw.gateway.stores.usage.list({ requestId: submitted.headers.get('x-request-id')! }))[0]!;
    expect(charge.cost).to.be.closeTo(1, 1e-9); // 5 s x 0.2
    const { final } = await result('/videob', 'jimeng_vgfm_t2v_l20', taskId);
    expect(final.json).to.deep.include({ code: 10000 });
    expect(final.json.data).to.include({ status: 'expired', video_url: '' });
    for (let i = 0; i < 3; i++) await post(`/videob/?${RESULT}`, { req_key: 'jimeng_vgfm_t2v_l20', task_id: taskId });
    await gw.gateway.stores.flush();
    const refunds = await gw.gateway.stores.usage.list({ requestId: taskId });
    expect(refunds).to.have.length(1);
    expect(refunds[0]!.cost).to.be.closeTo(-1, 1e-9);

    const foreign = await post(`/videob/?${RESULT}`, { req_key: 'jimeng_vgfm_t2v_l20', task_id: taskId }, OTHER);
    expect(foreign.json.data.status).to.equal('not_found');
    const unknown = await post(`/videob/?${RESULT}`, { req_key: 'jimeng_vgfm_t2v_l20', task_id: 'task_0000' });
    expect(unknown.json.data).to.deep.equal({ status: 'not_found', video_url: '' });
  });

  it('a task the vendor fails reads with the vendor\'s code and message', async () => {
    jimeng.plan = [{ code: 50411, message: 'Pre Img Risk Not Pass' }];
    const submitted = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng_vgfm_t2v_l20', prompt: 'risky' });
    const { final } = await result('/videob', 'jimeng_vgfm_t2v_l20', submitted.json.data.task_id);
    expect(final.json).to.deep.include({ code: 50411, message: 'Pre Img Risk Not Pass', status: 50411 });
  });

  it('a back end whose signature Volcengine refuses: 502, nothing charged, the secret never shown', async () => {
    const reply = await post(`/videob/?${SUBMIT}`, { req_key: 'jimeng-wrong-secret', prompt: 'p' });
    expect(reply.status).to.equal(502);
    expect(reply.json.error.message).to.contain('SignatureDoesNotMatch');
    expect(jimeng.last().signed).to.equal(false);
    expect(JSON.stringify(reply.json)).to.not.contain('not-the-secret-key');
    await gw.gateway.stores.flush();
    const charged = await gw.gateway.stores.usage.list({ requestId: reply.headers.get('x-request-id')! });
    expect(charged.reduce((sum, r) => sum + r.cost, 0)).to.equal(0);
  });

  it('400 error objects: Action missing or unknown, Version missing, a bad body, a GetResult without task_id', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/videob/?Version=2022-08-31', { req_key: 'mock-video', prompt: 'p' }, 'Action'],
      ['/videob/?Action=CVProcess&Version=2022-08-31', { req_key: 'mock-video', prompt: 'p' }, 'Action'],
      ['/videob/?Action=CVSync2AsyncSubmitTask', { req_key: 'mock-video', prompt: 'p' }, 'Version'],
      [`/videob/?${SUBMIT}`, { prompt: 'p' }, 'req_key'],
      [`/videob/?${SUBMIT}`, { req_key: 'mock-video', binary_data_base64: 'not-an-array' }, 'binary_data_base64'],
      [`/videob/?${SUBMIT}`, { req_key: 'mock-video', prompt: 'p', aspect_ratio: '2:1' }, 'aspect_ratio'],
      // Base64 characters that decode to nothing whole: no image, refused before any charge.
      [`/videob/?${SUBMIT}`, { req_key: 'mock-video', prompt: 'p', binary_data_base64: ['A=='] }, 'binary_data_base64[0]'],
      [`/videob/?${SUBMIT}`, { req_key: 'mock-video' }, 'prompt'],
      [`/videob/?${RESULT}`, { req_key: 'mock-video' }, 'task_id'],
    ];
    for (const [url, body, param] of cases) {
      const reply = await post(url, body);
      expect(reply.status, url).to.equal(400);
      expect(reply.json.error, url).to.include({ type: 'invalid_request_error' });
      expect(reply.json.error.param, `${url} ${JSON.stringify(body)}`).to.equal(param);
    }
    const empty = await post(`/videob/?${SUBMIT}`, { req_key: 'mock-video' });
    expect(empty.status).to.equal(400);
    // A model nobody serves is named by the client's own field.
    const unknown = await post(`/videob/?${SUBMIT}`, { req_key: 'no-such-video-model', prompt: 'p' });
    expect(unknown.status).to.equal(404);
    expect(unknown.json.error.param).to.equal('req_key');
    expect(jimeng.received).to.have.length(0);
  });
});
