import { readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import OpenAI, { toFile } from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { FakeSora, SORA_VIDEO } from './fakes/sora-upstream.js';
import { FakeJimeng, JIMENG_VIDEO } from './fakes/jimeng-upstream.js';
import { FakeKling, KLING_FAKE_VIDEO } from './fakes/kling-upstream.js';

const KEY = 'sk-video-openai-key-000000001';
const OTHER = 'sk-video-openai-key-000000002';
const FIXTURE = readFileSync(path.resolve('test/fixtures/tiny-16x16-1s.mp4'));
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de', 'hex');

type ApiError = InstanceType<typeof OpenAI.APIError>;
type Video = Awaited<ReturnType<OpenAI['videos']['retrieve']>>;

/** Retrieve a video until it is finished (the engine polls the back end meanwhile). */
async function finished(client: OpenAI, id: string, ms = 8000): Promise<{ final: Video; seen: string[] }> {
  const deadline = Date.now() + ms;
  const seen: string[] = [];
  for (;;) {
    const video = await client.videos.retrieve(id);
    if (seen[seen.length - 1] !== video.status) seen.push(video.status);
    if (video.status === 'completed' || video.status === 'failed') return { final: video, seen };
    if (Date.now() > deadline) throw new Error(`video ${id} still ${video.status}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function bytesOf(response: Response): Promise<Buffer> {
  return Buffer.from(await response.arrayBuffer());
}

async function error(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (e) {
    return e as ApiError;
  }
  throw new Error('expected the call to fail');
}

describe('POST /v1/videos, GET /v1/videos/{id} and /content (official openai client)', () => {
  const sora = new FakeSora();
  const jimeng = new FakeJimeng();
  const kling = new FakeKling('kling-access-video-openai', 'kling-secret-video-openai-0123456789');
  let gw: RunningGateway;
  let client: OpenAI;
  let other: OpenAI;

  async function keyId(name: string): Promise<string> {
    const keys = await gw.gateway.stores.keys.list();
    return keys.find((k) => k.name === name)!.id;
  }

  async function rows(requestId: string) {
    await gw.gateway.stores.flush();
    return gw.gateway.stores.usage.list({ requestId });
  }

  before(async () => {
    await sora.start();
    await jimeng.start();
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
  - video-openai
auth:
  keys: [{ name: maker, key: ${KEY} }, { name: stranger, key: ${OTHER} }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
  - { id: sora, type: sora, baseUrl: '${sora.url}/v1', apiKey: ${sora.apiKey}, models: [sora-2, sora-2-pro], timeouts: { idleMs: 500 } }
  - { id: volc, type: jimeng, baseUrl: '${jimeng.url}', accessKey: ${jimeng.accessKey}, secretKey: ${jimeng.secretKey}, models: [jimeng_vgfm_t2v_l20] }
  - { id: kling, type: kling, baseUrl: '${kling.url}', accessKey: ${kling.accessKey}, secretKey: ${kling.secretKey}, models: [kling-v1-6] }
pricing:
  mock-video: { perSecond: 0.1 }
  sora-2: { perSecond: 0.1 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    other = new OpenAI({ apiKey: OTHER, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await sora.stop();
    await jimeng.stop();
    await kling.stop();
  });
  beforeEach(() => {
    sora.reset();
    jimeng.reset();
  });

  for (const [model, label, bytes] of [
    ['jimeng_vgfm_t2v_l20', 'jimeng (signed Volcengine calls)', () => JIMENG_VIDEO],
    ['kling-v1-6', 'kling (JWT)', () => KLING_FAKE_VIDEO],
  ] as const) {
    it(`the ${label} back end: created, retrieved to completed, content through the gateway`, async () => {
      const created = await client.videos.create({ model, prompt: 'a kite over the sea', seconds: '5' as never });
      expect(created).to.include({ object: 'video', model, status: 'queued' });
      const { final } = await finished(client, created.id);
      expect(final.status).to.equal('completed');
      expect(JSON.stringify(final)).to.not.contain(jimeng.url).and.not.contain(kling.url);
      const content = await client.videos.downloadContent(created.id);
      expect((await bytesOf(content)).equals(bytes())).to.equal(true);
      if (model.startsWith('jimeng')) expect(jimeng.received.filter((r) => r.action).every((r) => r.signed)).to.equal(true);
    });
  }

  it('the kling back end: an uploaded input_reference reaches Kling as base64 on image2video', async () => {
    kling.received.length = 0;
    const created = await client.videos.create({
      model: 'kling-v1-6',
      prompt: 'the reference comes alive',
      seconds: '5' as never,
      input_reference: await toFile(PNG, 'reference.png', { type: 'image/png' }),
    });
    const submit = kling.received.find((r) => r.method === 'POST')!;
    expect(submit.path).to.equal('/v1/videos/image2video');
    expect(submit.body!.image).to.equal(PNG.toString('base64'));
    expect(submit.body!.duration).to.equal('5');
    expect((await finished(client, created.id)).final.status).to.equal('completed');
  });

  it('the kling back end: a duration Kling does not make becomes the nearest it does, named as a loss', async () => {
    kling.received.length = 0;
    const { response } = await client.videos.create({ model: 'kling-v1-6', prompt: 'eight seconds', seconds: '8' as never }).withResponse();
    const submit = kling.received.find((r) => r.method === 'POST')!;
    expect(submit.path).to.equal('/v1/videos/text2video');
    expect(submit.body!.duration).to.equal('10');
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ model: 'kling-v1-6', limit: 50 });
    const entry = entries.find((e) => e.requestId === response.headers.get('x-request-id'));
    expect(entry?.losses).to.deep.equal(['duration']);
  });

  it('the jimeng back end: a length Jimeng does not make is named as a loss, as for Kling', async () => {
    const { response } = await client.videos.create({ model: 'jimeng_vgfm_t2v_l20', prompt: 'eight seconds', seconds: '8' as never }).withResponse();
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ model: 'jimeng_vgfm_t2v_l20', limit: 50 });
    expect(entries.find((e) => e.requestId === response.headers.get('x-request-id'))?.losses).to.deep.equal(['duration']);
  });

  it('the mock back end: create answers the video object, retrieve follows it to completed, downloadContent streams the fixture', async () => {
    const created = await client.videos.create({ model: 'mock-video', prompt: 'a lighthouse at dusk', seconds: '4', size: '1280x720' });
    expect(created).to.include({ object: 'video', model: 'mock-video', status: 'queued', progress: 0, seconds: '4', size: '1280x720', prompt: 'a lighthouse at dusk' });
    expect(created.id).to.match(/^task_[0-9a-f]{32}$/);
    expect(created.created_at).to.be.closeTo(Date.now() / 1000, 5);
    expect(created.completed_at).to.equal(null);
    expect(created.error).to.equal(null);

    const { final, seen } = await finished(client, created.id);
    expect(final).to.include({ id: created.id, status: 'completed', progress: 100, object: 'video' });
    expect(final.completed_at).to.be.a('number');
    expect(seen).to.include('completed');
    const content = await client.videos.downloadContent(created.id);
    expect(content.headers.get('content-type')).to.match(/^video\/mp4/);
    expect((await bytesOf(content)).equals(FIXTURE)).to.equal(true);
  });

  it('a task is its key\'s: another key gets the 404 an unknown id gets, for the object and the content', async () => {
    const created = await client.videos.create({ model: 'mock-video', prompt: 'mine' });
    const foreign = await error(other.videos.retrieve(created.id));
    const unknown = await error(client.videos.retrieve('task_00000000000000000000000000000000'));
    expect(foreign.status).to.equal(404);
    expect(unknown.status).to.equal(404);
    expect((foreign.error as any).type).to.equal((unknown.error as any).type);
    await finished(client, created.id);
    expect((await error(other.videos.downloadContent(created.id))).status).to.equal(404);
  });

  it('the sora back end: the form reaches OpenAI with the reference image, the video comes through the gateway (no vendor URL, no vendor key)', async () => {
    const created = await client.videos.create({
      model: 'sora-2',
      prompt: 'a paper boat on a river',
      seconds: '8',
      size: '1280x720',
      input_reference: await toFile(PNG, 'reference.png', { type: 'image/png' }),
    });
    expect(created).to.include({ status: 'queued', seconds: '8', model: 'sora-2' });
    const sent = sora.creates()[0]!;
    expect(sent.headers.authorization).to.equal(`Bearer ${sora.apiKey}`);
    expect(sent.fields).to.deep.equal({ model: 'sora-2', prompt: 'a paper boat on a river', seconds: '8', size: '1280x720' });
    expect(sent.files.input_reference!.bytes.equals(PNG)).to.equal(true);
    expect(sent.files.input_reference!.type).to.equal('image/png');

    const { final } = await finished(client, created.id);
    expect(final).to.include({ status: 'completed', progress: 100, seconds: '8', size: '1280x720' });
    const vendorId = [...sora.videos.keys()][0]!;
    expect(JSON.stringify(final)).to.not.contain(sora.url).and.not.contain(vendorId);
    expect(JSON.stringify(created)).to.not.contain(vendorId);
    const content = await client.videos.downloadContent(created.id);
    const bytes = await bytesOf(content);
    expect(bytes.equals(SORA_VIDEO)).to.equal(true);
    expect(sora.contentDownloads).to.equal(1);
    expect(gw.logText()).to.not.contain(sora.apiKey);

    // A player seeking: one range is sent on, and the vendor's part comes back as a 206.
    const contentUrl = `${gw.url}/v1/videos/${created.id}/content`;
    const part = await fetch(contentUrl, { headers: { authorization: `Bearer ${KEY}`, range: 'bytes=10-19' } });
    expect(part.status).to.equal(206);
    expect(sora.received.at(-1)!.headers.range).to.equal('bytes=10-19');
    expect(part.headers.get('content-range')).to.equal(`bytes 10-19/${SORA_VIDEO.length}`);
    expect(part.headers.get('accept-ranges')).to.equal('bytes');
    expect(Buffer.from(await part.arrayBuffer()).equals(SORA_VIDEO.subarray(10, 20))).to.equal(true);
    const past = await fetch(contentUrl, { headers: { authorization: `Bearer ${KEY}`, range: `bytes=${SORA_VIDEO.length}-` } });
    expect(past.status).to.equal(416);
    expect(past.headers.get('content-range')).to.equal(`bytes */${SORA_VIDEO.length}`);
    const refused = (await past.json()) as any;
    expect(refused.error.code).to.equal('range_not_satisfiable');
    expect(refused.error.message).to.include(`bytes */${SORA_VIDEO.length}`);

    // A download the vendor stops sending midway is cut after its idleMs, as a CDN's is.
    sora.contentStalls = true;
    try {
      const stalled = await fetch(contentUrl, { headers: { authorization: `Bearer ${KEY}` } });
      expect(stalled.status).to.equal(200);
      const broke = await stalled.arrayBuffer().then(() => undefined, (error: unknown) => error);
      expect(broke, 'a broken transfer, not a complete-looking file').to.be.instanceOf(Error);
    } finally {
      sora.contentStalls = false;
    }

    // Metered: the estimate (8 s x 0.1) with the submit; the vendor's 8 s settle nothing more.
    const submitRows = await rows(created.id);
    expect(submitRows.reduce((sum, r) => sum + r.cost, 0)).to.be.closeTo(0, 1e-9);
  });

  it("x-switchyard-overhead-ms leaves out a slow vendor's time: a status it is asked for, the video it sends", async () => {
    const created = await client.videos.create({ model: 'sora-2', prompt: 'a slow vendor', seconds: '4' });
    await finished(client, created.id);
    const slowMs = 300;
    sora.readDelayMs = slowMs;
    try {
      const overhead = (response: Response) => Number(response.headers.get('x-switchyard-overhead-ms'));
      // staleAfterMs 0: every retrieve of an unfinished task asks the vendor; this one is done, so
      // its read is the store's. The content is fetched from the vendor each time.
      const started = performance.now();
      const content = await client.videos.downloadContent(created.id);
      expect((await bytesOf(content)).equals(SORA_VIDEO)).to.equal(true);
      expect(performance.now() - started).to.be.at.least(slowMs);
      // Before, the vendor's 300 ms were counted as the gateway's.
      expect(overhead(content)).to.be.below(slowMs / 2);
      const second = await client.videos.create({ model: 'sora-2', prompt: 'still slow', seconds: '4' });
      const before = sora.received.length;
      const asked = await client.videos.retrieve(second.id).withResponse();
      // This retrieve asked the vendor for the unfinished task's status (staleAfterMs 0), and waited 300 ms for it.
      expect(sora.received.slice(before).filter((r) => r.method === 'GET' && !r.url.endsWith('/content'))).to.have.length.at.least(1);
      expect(overhead(asked.response)).to.be.below(slowMs / 2);
    } finally {
      sora.readDelayMs = 0;
    }
  });

  it('the sora back end: content the vendor no longer has (expired) is a clear 502, not "does not serve this model"', async () => {
    const created = await client.videos.create({ model: 'sora-2', prompt: 'short-lived', seconds: '4' });
    await finished(client, created.id);
    sora.videos.clear();
    const gone = await error(client.videos.downloadContent(created.id));
    expect(gone.status).to.equal(502);
    expect((gone.error as any).code).to.equal('upstream_error');
    expect(gone.message).to.include('expired').and.not.include('does not serve');
  });

  it('seconds is always a duration: the estimate on a create without seconds, and on a failed task', async () => {
    const created = await client.videos.create({ model: 'mock-video', prompt: 'how long?' });
    expect(created.seconds).to.equal('5');
    sora.plan = [{ status: 'failed', error: { code: 'moderation_blocked', message: 'blocked' } }];
    const doomed = await client.videos.create({ model: 'sora-2', prompt: 'no seconds, then failed' });
    expect(doomed.seconds).to.equal('4');
    const { final } = await finished(client, doomed.id);
    expect(final.status).to.equal('failed');
    expect(final.seconds).to.equal('4');
  });

  it('a failed upstream task is failed with its error and refunded exactly once, however often it is read', async () => {
    sora.plan = [{ status: 'in_progress', progress: 10 }, { status: 'failed', error: { code: 'moderation_blocked', message: 'Your request was blocked by our moderation system.' } }];
    const maker = await keyId('maker');
    const before = await gw.gateway.stores.keys.spent(maker);
    const { data: created, response } = await client.videos.create({ model: 'sora-2', prompt: 'something blocked', seconds: '4' }).withResponse();
    await gw.gateway.stores.flush();
    const charged = (await gw.gateway.stores.usage.list({ requestId: response.headers.get('x-request-id')! }))[0]!;
    expect(charged.cost).to.be.closeTo(0.4, 1e-9);
    expect(await gw.gateway.stores.keys.spent(maker)).to.be.closeTo(before + 0.4, 1e-9);

    const { final } = await finished(client, created.id);
    expect(final.status).to.equal('failed');
    expect(final.error).to.deep.equal({ code: 'moderation_blocked', message: 'Your request was blocked by our moderation system.' });
    for (let i = 0; i < 3; i++) expect((await client.videos.retrieve(created.id)).status).to.equal('failed');
    const refunds = await rows(created.id);
    expect(refunds).to.have.length(1);
    expect(refunds[0]!.cost).to.be.closeTo(-0.4, 1e-9);
    expect(await gw.gateway.stores.keys.spent(maker)).to.be.closeTo(before, 1e-9);
    const notReady = await error(client.videos.downloadContent(created.id));
    expect(notReady.status).to.equal(400);
  });

  it("a vendor that echoes the gateway's key in a task's state or error: the key is in no answer, log line or stored task", async () => {
    sora.plan = [
      { status: `weird state for ${sora.apiKey}`, progress: 5 },
      { status: 'failed', error: { code: `moderation_blocked_${sora.apiKey}`, message: `bad key ${sora.apiKey} given` } },
    ];
    const created = await client.videos.create({ model: 'sora-2', prompt: 'leaky vendor', seconds: '4' });
    const { final, seen } = await finished(client, created.id);
    expect(final.status).to.equal('failed');
    expect(final.error!.code).to.equal('moderation_blocked_[redacted]');
    expect(final.error!.message).to.not.include(sora.apiKey);
    expect(JSON.stringify(seen)).to.not.include(sora.apiKey);
    expect(JSON.stringify(gw.gateway.stores.tasks.get(created.id))).to.not.include(sora.apiKey);
    expect(gw.logText()).to.include('video task in an unknown vendor state');
    expect(gw.logText()).to.not.include(sora.apiKey);
  });

  it('400 for bad fields, naming them; 415 for a JSON body', async () => {
    const badSeconds = await error(client.videos.create({ model: 'mock-video', prompt: 'p', seconds: 'four' as never }));
    expect(badSeconds.status).to.equal(400);
    expect(badSeconds.param).to.equal('seconds');
    // Longer than any video format takes (60 s): not charged as 999 s.
    const tooLong = await error(client.videos.create({ model: 'mock-video', prompt: 'p', seconds: '999' as never }));
    expect(tooLong.status).to.equal(400);
    expect(tooLong.param).to.equal('seconds');
    const badSize = await error(client.videos.create({ model: 'mock-video', prompt: 'p', size: 'huge' as never }));
    expect(badSize.status).to.equal(400);
    expect(badSize.param).to.equal('size');
    const nothing = await error(client.videos.create({ model: 'mock-video' } as never));
    expect(nothing.status).to.equal(400);
    expect(nothing.param).to.equal('prompt');
    const form = new FormData();
    form.set('model', 'mock-video');
    form.set('prompt', 'p');
    form.set('input_reference', 'not a file');
    const textRef = await fetch(`${gw.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${KEY}` }, body: form });
    expect(textRef.status).to.equal(400);
    expect(((await textRef.json()) as any).error.param).to.equal('input_reference');
    const json = await fetch(`${gw.url}/v1/videos`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: '{"prompt":"p"}' });
    expect(json.status).to.equal(415);
    const unpriced = await error(client.videos.create({ model: 'no-such-video-model', prompt: 'p' }));
    expect(unpriced.status).to.equal(404);
    expect(sora.received).to.have.length(0);
  });
});
