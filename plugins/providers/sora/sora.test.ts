import { expect } from 'chai';
import { Pool } from 'undici';
import { createLogger } from '../../../core/logger.js';
import { estimateVideoSeconds, GatewayError, type VideoCallContext } from '../../../core/index.js';
import { FakeSora, SORA_VIDEO } from '../../../test/fakes/sora-upstream.js';
import { endpointOf, type SoraProviderConfig } from './api.js';
import { formFields, soraBackend } from './video.js';

const logger = createLogger({ level: 'error', format: 'json' });
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de', 'hex');

describe('sora provider against a fake OpenAI /v1/videos', () => {
  const fake = new FakeSora();
  let pool: Pool;
  let config: SoraProviderConfig;
  const ctx = (): VideoCallContext => ({ signal: new AbortController().signal, logger, model: 'sora-2' });
  const backend = (overrides: Partial<SoraProviderConfig> = {}) => {
    const c = { ...config, ...overrides };
    return soraBackend({ pool, endpoint: endpointOf(c), config: c });
  };

  before(async () => {
    await fake.start();
    pool = new Pool(fake.url);
    config = { id: 'sora', type: 'sora', models: ['sora-2'], baseUrl: `${fake.url}/v1`, apiKey: fake.apiKey };
  });
  after(async () => {
    await pool.close();
    await fake.stop();
  });
  beforeEach(() => fake.reset());

  it('creates with a multipart form (model, prompt, seconds, size, input_reference), polls to completed and streams the content', async () => {
    const video = backend();
    const submitted = await video.submit(
      { model: 'sora-2', prompt: 'a paper boat', duration: 8, width: 1280, height: 720, imageFile: { data: PNG, mediaType: 'image/png', filename: 'ref.png' } },
      ctx(),
    );
    expect(submitted).to.include({ status: 'queued', rawStatus: 'queued', seconds: 8 });
    const create = fake.creates()[0]!;
    expect(create.headers.authorization).to.equal(`Bearer ${fake.apiKey}`);
    expect(create.fields).to.deep.equal({ model: 'sora-2', prompt: 'a paper boat', seconds: '8', size: '1280x720' });
    expect(create.files.input_reference!.bytes.equals(PNG)).to.equal(true);
    expect(create.files.input_reference).to.include({ filename: 'ref.png', type: 'image/png' });

    expect(await video.poll(submitted.vendorTaskId, ctx())).to.deep.equal({ status: 'queued', rawStatus: 'queued', progress: 0, seconds: 8, size: '1280x720' });
    expect(await video.poll(submitted.vendorTaskId, ctx())).to.include({ status: 'in_progress', progress: 40 });
    expect(await video.poll(submitted.vendorTaskId, ctx())).to.include({ status: 'completed', progress: 100, format: 'mp4', seconds: 8 });
    const content = await video.content!(submitted.vendorTaskId, ctx());
    expect(content).to.include({ status: 200, contentType: 'video/mp4', contentLength: SORA_VIDEO.length });
    const parts: Buffer[] = [];
    for await (const chunk of content.body) parts.push(Buffer.from(chunk));
    expect(Buffer.concat(parts).equals(SORA_VIDEO)).to.equal(true);
  });

  it('a base64 image (data: URL or bare) goes up as the input_reference file', async () => {
    await backend().submit({ model: 'sora-2', prompt: 'p', image: `data:image/png;base64,${PNG.toString('base64')}` }, ctx());
    expect(fake.creates()[0]!.files.input_reference!.bytes.equals(PNG)).to.equal(true);
    await backend().submit({ model: 'sora-2', prompt: 'p', image: PNG.toString('base64') }, ctx());
    expect(fake.creates()[1]!.files.input_reference).to.include({ type: 'image/png' });
  });

  it('a failed video carries its error; an unknown status is unknown', async () => {
    fake.plan = [{ status: 'failed', error: { code: 'moderation_blocked', message: 'Your request was blocked by our moderation system.' } }];
    const video = backend();
    const submitted = await video.submit({ model: 'sora-2', prompt: 'p' }, ctx());
    expect(await video.poll(submitted.vendorTaskId, ctx())).to.deep.include({
      status: 'failed',
      error: { code: 'moderation_blocked', message: 'Your request was blocked by our moderation system.' },
    });
    fake.plan = [{ status: 'post_processing' }];
    const odd = await video.submit({ model: 'sora-2', prompt: 'p' }, ctx());
    expect(await video.poll(odd.vendorTaskId, ctx())).to.include({ status: 'unknown', rawStatus: 'post_processing' });
  });

  it('a video the vendor no longer has (404) fails as not_found', async () => {
    expect(await backend().poll('video_gone', ctx())).to.deep.equal({
      status: 'failed',
      rawStatus: 'not_found',
      error: { code: 'not_found', message: 'The back end no longer has this video.' },
    });
  });

  it('a refused key is a 502 that does not name the key; a bad value a 400', async () => {
    const refused = await backend({ apiKey: 'sk-wrong-key-0000000000000' }).submit({ model: 'sora-2', prompt: 'p' }, ctx()).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(GatewayError);
    expect((refused as GatewayError).status).to.equal(502);
    expect((refused as GatewayError).message).to.not.contain('sk-wrong');
    const bad = await backend().submit({ model: 'sora-2', prompt: 'p', duration: 5 }, ctx()).catch((e: unknown) => e);
    expect((bad as GatewayError).status).to.equal(400);
  });

  it('names what it has no field for (n above 1, fps, seed) as losses, only when asked; one video a task is estimated once', () => {
    const losses: string[] = [];
    expect(formFields({ model: 'sora-2', prompt: 'p', n: 3, fps: 24, seed: 7 }, losses)).to.deep.equal({ model: 'sora-2', prompt: 'p' });
    expect(losses).to.deep.equal(['n', 'fps', 'seed']);
    const all: string[] = [];
    formFields({ model: 'sora-2', prompt: 'p', imageTail: 'https://e.com/t.png', negativePrompt: 'no', aspectRatio: '16:9', cfgScale: 0.5, mode: 'pro', width: 1280 }, all);
    expect(all).to.deep.equal(['imageTail', 'negativePrompt', 'aspectRatio', 'cfgScale', 'mode', 'width']);
    // Another vendor's field carried along: only `size` has a place here.
    const extras: string[] = [];
    expect(formFields({ model: 'sora-2', prompt: 'p', extra: { size: '720x1280', camera_control: { type: 'simple' } } }, extras)).to.include({ size: '720x1280' });
    expect(extras).to.deep.equal(['camera_control']);
    const none: string[] = [];
    formFields({ model: 'sora-2', prompt: 'p', n: 1 }, none);
    expect(none).to.deep.equal([]);
    expect(estimateVideoSeconds(backend(), { model: 'sora-2', duration: 8, n: 3 })).to.equal(8);
  });
});
