import { expect } from 'chai';
import { Pool } from 'undici';
import { createLogger } from '../../../core/logger.js';
import { GatewayError, type VideoBackend, type VideoCallContext } from '../../../core/index.js';
import { FakeJimeng } from '../../../test/fakes/jimeng-upstream.js';
import { endpointOf, reqKeyFor, type JimengProviderConfig } from './api.js';
import { jimengBackend, jimengError, statusOf, submitBody } from './video.js';

const logger = createLogger({ level: 'error', format: 'json' });

describe('jimeng provider against a fake Volcengine visual API that checks signatures', () => {
  const fake = new FakeJimeng();
  let pool: Pool;
  let config: JimengProviderConfig;
  const ctx = (): VideoCallContext => ({ signal: new AbortController().signal, logger, model: 'jimeng-video' });
  const backend = (overrides: Partial<JimengProviderConfig> = {}, now?: () => Date): VideoBackend =>
    jimengBackend({ pool, endpoint: endpointOf({ ...config, ...overrides }), config: { ...config, ...overrides }, now });

  before(async () => {
    await fake.start();
    pool = new Pool(fake.url);
    config = {
      id: 'jimeng',
      type: 'jimeng',
      models: ['jimeng-video'],
      baseUrl: fake.url,
      accessKey: fake.accessKey,
      secretKey: fake.secretKey,
      region: 'cn-north-1',
      service: 'cv',
      version: '2022-08-31',
    };
  });
  after(async () => {
    await pool.close();
    await fake.stop();
  });
  beforeEach(() => fake.reset());

  it('submits text-to-video with jimeng_vgfm_t2v_l20, signed, and polls through in_queue, generating, done', async () => {
    const video = backend();
    const submitted = await video.submit({ model: 'jimeng-video', prompt: 'a red fox in snow', seed: 7, width: 1280, height: 720 }, ctx());
    expect(submitted.status).to.equal('queued');
    expect(submitted.seconds).to.equal(5);
    const sent = fake.calls('CVSync2AsyncSubmitTask')[0]!;
    expect(sent.signed).to.equal(true);
    expect(sent.url).to.equal('/?Action=CVSync2AsyncSubmitTask&Version=2022-08-31');
    expect(sent.body).to.deep.equal({ req_key: 'jimeng_vgfm_t2v_l20', prompt: 'a red fox in snow', seed: 7, aspect_ratio: '16:9' });
    expect(sent.headers.authorization).to.match(/^HMAC-SHA256 Credential=AKLTfakejimengaccesskey0001\/\d{8}\/cn-north-1\/cv\/request, SignedHeaders=content-type;host;x-content-sha256;x-date, Signature=[0-9a-f]{64}$/);
    expect(submitted.vendorTaskId).to.not.equal('');

    const first = await video.poll(submitted.vendorTaskId, ctx());
    expect(first).to.include({ status: 'queued', rawStatus: 'in_queue' });
    const second = await video.poll(submitted.vendorTaskId, ctx());
    expect(second).to.include({ status: 'in_progress', rawStatus: 'generating' });
    const third = await video.poll(submitted.vendorTaskId, ctx());
    expect(third).to.include({ status: 'completed', rawStatus: 'done', format: 'mp4', progress: 100 });
    expect(third.url).to.match(new RegExp(`^${fake.url}/videos/`));
    const polled = fake.calls('CVSync2AsyncGetResult');
    expect(polled.every((r) => r.signed)).to.equal(true);
    expect(polled[0]!.body).to.deep.include({ req_key: 'jimeng_vgfm_t2v_l20' });
  });

  it('image-to-video goes with jimeng_vgfm_i2v_l20: base64 as binary_data_base64 (data: prefix removed), URLs as image_urls; a last frame it cannot take is named', async () => {
    const video = backend();
    const losses: string[] = [];
    await video.submit({ model: 'jimeng-video', prompt: 'move', image: 'data:image/png;base64,iVBORw0KGgo=', imageTail: 'https://example.com/last.png' }, { ...ctx(), losses });
    expect(fake.last().body).to.deep.equal({ req_key: 'jimeng_vgfm_i2v_l20', prompt: 'move', binary_data_base64: ['iVBORw0KGgo='] });
    expect(losses).to.deep.equal(['imageTail']);
    await video.submit({ model: 'jimeng-video', prompt: 'move', image: 'https://example.com/first.png' }, ctx());
    expect(fake.last().body).to.deep.equal({ req_key: 'jimeng_vgfm_i2v_l20', prompt: 'move', image_urls: ['https://example.com/first.png'] });
    await video.submit({ model: 'jimeng-video', imageFile: { data: Buffer.from('PNGDATA'), mediaType: 'image/png' } }, ctx());
    expect(fake.last().body).to.deep.equal({ req_key: 'jimeng_vgfm_i2v_l20', binary_data_base64: [Buffer.from('PNGDATA').toString('base64')] });
  });

  it('a first and a last frame go in order in one list to a first_tail req_key; one URL and one image data are refused before any call', async () => {
    const video = backend();
    const model = 'jimeng_i2v_first_tail_v30';
    await video.submit({ model, image: 'data:image/png;base64,Rk9P', imageTail: 'QkFS' }, ctx());
    expect(fake.last().body).to.deep.include({ req_key: model, binary_data_base64: ['Rk9P', 'QkFS'] });
    await video.submit({ model, image: 'https://example.com/a.png', imageTail: 'https://example.com/b.png' }, ctx());
    expect(fake.last().body).to.deep.include({ req_key: model, image_urls: ['https://example.com/a.png', 'https://example.com/b.png'] });
    const calls = fake.calls('CVSync2AsyncSubmitTask').length;
    const mixed = await video.submit({ model, image: 'https://example.com/a.png', imageTail: 'QkFS' }, ctx()).catch((e: unknown) => e);
    expect(mixed).to.be.instanceOf(GatewayError);
    expect(mixed).to.include({ code: 'invalid_value', status: 400, param: 'image' });
    expect(fake.calls('CVSync2AsyncSubmitTask')).to.have.length(calls);
    // A Jimeng 3.0 model asked with a last frame goes to its first-and-last-frame req_key.
    await video.submit({ model: 'jimeng_t2v_v30', image: 'Rk9P', imageTail: 'QkFS' }, ctx());
    expect(fake.last().body).to.deep.include({ req_key: 'jimeng_i2v_first_tail_v30', binary_data_base64: ['Rk9P', 'QkFS'] });
    await video.submit({ model: 'jimeng_t2v_v30_1080p', image: 'Rk9P' }, ctx());
    expect(fake.last().body).to.deep.include({ req_key: 'jimeng_i2v_first_v30_1080', binary_data_base64: ['Rk9P'] });
    await video.submit({ model: 'jimeng_i2v_first_v30_1080', image: 'Rk9P', imageTail: 'QkFS' }, ctx());
    expect(fake.last().body).to.deep.include({ req_key: 'jimeng_i2v_first_tail_v30_1080', binary_data_base64: ['Rk9P', 'QkFS'] });
  });

  it('maps the two other result states, not_found and expired, to failed with a reason; an unknown state keeps polling', async () => {
    const video = backend();
    fake.plan = [{ status: 'expired' }];
    const expired = await video.submit({ model: 'jimeng-video', prompt: 'p' }, ctx());
    expect(await video.poll(expired.vendorTaskId, ctx())).to.deep.include({ status: 'failed', rawStatus: 'expired', error: { code: 'expired', message: 'The task expired at the back end before its video was fetched.' } });
    const missing = await video.poll('jimeng_vgfm_t2v_l20:123', ctx());
    expect(missing).to.include({ status: 'failed', rawStatus: 'not_found' });
    fake.plan = [{ status: 'rendering_frames' }];
    const odd = await video.submit({ model: 'jimeng-video', prompt: 'p' }, ctx());
    expect(await video.poll(odd.vendorTaskId, ctx())).to.deep.equal({ status: 'unknown', rawStatus: 'rendering_frames' });
    fake.plan = [{ status: 'done', video: false }];
    const empty = await video.submit({ model: 'jimeng-video', prompt: 'p' }, ctx());
    expect(await video.poll(empty.vendorTaskId, ctx())).to.include({ status: 'failed' });
  });

  it('a task the vendor fails (content check code) is failed; a rate limit code is thrown for a later poll', async () => {
    const video = backend();
    fake.plan = [{ code: 50411, message: 'Pre Img Risk Not Pass' }];
    const risky = await video.submit({ model: 'jimeng-video', prompt: 'p' }, ctx());
    expect(await video.poll(risky.vendorTaskId, ctx())).to.deep.include({ status: 'failed', error: { code: '50411', message: 'Pre Img Risk Not Pass' } });
    fake.plan = [{ code: 50430, message: 'Request Has Reached API Concurrent Limit' }];
    const limited = await video.submit({ model: 'jimeng-video', prompt: 'p' }, ctx());
    const error = await video.poll(limited.vendorTaskId, ctx()).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(GatewayError);
    expect((error as GatewayError).code).to.equal('upstream_rate_limited');
  });

  it('a wrong secret, a wrong access key or a stale X-Date are refused by the fake (401, Volcengine shape) and become a 502 without the secret', async () => {
    for (const [overrides, now, code] of [
      [{ secretKey: 'not-the-secret-key' }, undefined, 'SignatureDoesNotMatch'],
      [{ accessKey: 'AKLTsomeoneelse' }, undefined, 'InvalidAccessKey'],
      [{}, () => new Date(Date.now() - 3600_000), 'InvalidTimestamp'],
    ] as const) {
      fake.reset();
      const error = await backend(overrides, now)
        .submit({ model: 'jimeng-video', prompt: 'p' }, ctx())
        .catch((e: unknown) => e);
      expect(error, code).to.be.instanceOf(GatewayError);
      expect((error as GatewayError).status).to.equal(502);
      expect((error as GatewayError).message).to.contain(code);
      expect((error as GatewayError).message).to.not.contain('not-the-secret-key');
      expect(fake.last().signed).to.equal(false);
    }
  });

  it('the fake refuses a tampered body (X-Content-Sha256 and the signature no longer hold)', async () => {
    const body = JSON.stringify({ req_key: 'jimeng_vgfm_t2v_l20', prompt: 'p' });
    const { sign } = await import('./sign.js');
    const signed = sign({
      method: 'POST',
      host: new URL(fake.url).host,
      path: '/',
      query: { Action: 'CVSync2AsyncSubmitTask', Version: '2022-08-31' },
      headers: { 'content-type': 'application/json' },
      body,
      accessKey: fake.accessKey,
      secretKey: fake.secretKey,
      region: 'cn-north-1',
      service: 'cv',
    });
    const good = await fetch(`${fake.url}/?Action=CVSync2AsyncSubmitTask&Version=2022-08-31`, { method: 'POST', headers: signed.headers, body });
    expect(good.status).to.equal(200);
    const tampered = await fetch(`${fake.url}/?Action=CVSync2AsyncSubmitTask&Version=2022-08-31`, { method: 'POST', headers: signed.headers, body: body.replace('"p"', '"q"') });
    expect(tampered.status).to.equal(401);
    expect(((await tampered.json()) as any).ResponseMetadata.Error.Code).to.equal('SignatureDoesNotMatch');
    const rehashed = await fetch(`${fake.url}/?Action=CVSync2AsyncSubmitTask&Version=2022-08-31`, {
      method: 'POST',
      headers: { ...signed.headers, 'x-content-sha256': (await import('./sign.js')).sha256Hex(body.replace('"p"', '"q"')) },
      body: body.replace('"p"', '"q"'),
    });
    expect(rehashed.status).to.equal(401);
  });

  it('maps req_keys and states', () => {
    expect(reqKeyFor({}, 'jimeng-video', false)).to.equal('jimeng_vgfm_t2v_l20');
    expect(reqKeyFor({}, 'jimeng-video', true)).to.equal('jimeng_vgfm_i2v_l20');
    expect(reqKeyFor({}, 'jimeng_t2v_v30', true)).to.equal('jimeng_i2v_first_v30');
    expect(reqKeyFor({ reqKeys: { x: { text: 'jimeng_a', image: 'jimeng_b' } } }, 'x', true)).to.equal('jimeng_b');
    expect(submitBody({}, { model: 'jimeng_t2v_v30', prompt: 'p', duration: 10 }).body.frames).to.equal(241);
    // No frame rate field, one video a task: named when asked for; a seed is sent.
    const losses: string[] = [];
    expect(submitBody({}, { model: 'jimeng_t2v_v30', prompt: 'p', fps: 30, n: 2, seed: 3 }, losses).body.seed).to.equal(3);
    expect(losses).to.deep.equal(['n', 'fps']);
    const all: string[] = [];
    submitBody({}, { model: 'jimeng_t2v_v30', prompt: 'p', negativePrompt: 'no', cfgScale: 0.5, mode: 'pro' }, all);
    expect(all).to.deep.equal(['negativePrompt', 'cfgScale', 'mode']);
    const none: string[] = [];
    submitBody({}, { model: 'jimeng_t2v_v30', prompt: 'p', n: 1, seed: 3 }, none);
    expect(none).to.deep.equal([]);
    // Another vendor's field carried along: one Jimeng knows goes up, any other is named.
    const extras: string[] = [];
    expect(submitBody({}, { model: 'jimeng_t2v_v30', prompt: 'p', extra: { camera_control: { type: 'simple' }, return_url: true } }, extras).body).to.include({ return_url: true });
    expect(extras).to.deep.equal(['camera_control']);
    expect(['in_queue', 'generating', 'done', 'not_found', 'expired', 'other'].map(statusOf)).to.deep.equal(['queued', 'in_progress', 'completed', 'failed', 'failed', 'unknown']);
  });

  it("a Volcengine error code is scrubbed before it reaches a client's message, as its message is", () => {
    const secret = 'AKLTjimengsecretaccesskey0123456789';
    const error = jimengError(403, JSON.stringify({ ResponseMetadata: { Error: { Code: `Denied key=${secret} at https://internal.example/x`, Message: 'no' } } }), [secret]);
    expect(error.message).to.include("refused the gateway's credentials");
    expect(error.message).to.not.include(secret).and.not.include('internal.example');
  });
});
