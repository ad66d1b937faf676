import { expect } from 'chai';
import OpenAI from 'openai';
import { solidPng } from '../plugins/providers/mock/png.js';
import { answer, FakeGemini, googleError, type GeminiReceived } from './fakes/gemini-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-gemini-fanout-key-000001';
const PNG = solidPng(2, 2, [12, 34, 56]).toString('base64');

/**
 * Gemini makes one image a call, so `n` images are `n` generateContent calls made together. When
 * one fails the others must be closed: left running, the back end would go on making (and
 * billing) images nobody gets, and a fallback target would make all `n` again beside them.
 */
describe('gemini images: n calls made together, the others closed when one fails (fake Gemini upstream, official openai client)', () => {
  const gemini = new FakeGemini();
  let gw: RunningGateway;
  let client: OpenAI;
  /** Releases the calls the fake holds (the siblings of the failing one). */
  let release: () => void = () => undefined;

  before(async () => {
    await gemini.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
auth:
  keys: [{ name: painter, key: ${KEY} }]
providers:
  - { id: gem, type: gemini, baseUrl: '${gemini.url}', apiKey: ${gemini.apiKey}, models: [gemini-image] }
  - { id: mock, type: mock, models: [mock-image] }
models:
  - name: gemini-then-mock
    targets: [{ provider: gem, model: gemini-image, priority: 0 }, { provider: mock, model: mock-image, priority: 1 }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    release();
    gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await gemini.stop();
  });

  /**
   * The first call fails (a 500) once all `n` have reached the fake; the others are held until
   * the test ends, as a slow image would be. The entries of the held ones.
   */
  function failOneHoldTheRest(n: number): GeminiReceived[] {
    let arrived = 0;
    let allArrived: () => void = () => undefined;
    const everyCall = new Promise<void>((resolve) => (allArrived = resolve));
    const held = new Promise<void>((resolve) => (release = resolve));
    const siblings: GeminiReceived[] = [];
    gemini.script(async (_body, entry) => {
      const index = arrived++;
      if (arrived === n) allArrived();
      if (index === 0) {
        await everyCall;
        return { status: 500, json: googleError(500, 'INTERNAL', 'An internal error has occurred.') };
      }
      siblings.push(entry);
      await held;
      return { json: answer([{ inlineData: { mimeType: 'image/png', data: PNG } }]) };
    });
    return siblings;
  }

  it('one of n=3 fails: the gateway answers 502, and the two other calls are closed upstream', async () => {
    const siblings = failOneHoldTheRest(3);
    const error = await client.images.generate({ model: 'gemini-image', prompt: 'three foxes', n: 3 }).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).to.equal(502);
    expect(gemini.received).to.have.length(3);
    expect(siblings).to.have.length(2);
    await eventually(() => siblings.every((entry) => entry.aborted), 3000, 'the sibling calls to be closed by the gateway');
  });

  it('with a fallback target: the next target answers, and the failed target leaves no call running', async () => {
    const siblings = failOneHoldTheRest(2);
    const { data, response } = await client.images.generate({ model: 'gemini-then-mock', prompt: 'two foxes', n: 2, response_format: 'b64_json' }).withResponse();
    expect(data.data).to.have.length(2);
    expect(response.status).to.equal(200);
    expect(siblings).to.have.length(1);
    await eventually(() => siblings.every((entry) => entry.aborted), 3000, 'the sibling call to be closed by the gateway');
    // Gemini was asked twice, once per image, and not again.
    expect(gemini.received).to.have.length(2);
  });

  it("all n succeed: n calls, n images (nothing closed), and the attempt still learns the back end's request id", async () => {
    gemini.script(() => ({ headers: { 'x-request-id': 'gem-req-0001' }, json: answer([{ inlineData: { mimeType: 'image/png', data: PNG } }]) }));
    const { data: result, response } = await client.images.generate({ model: 'gemini-image', prompt: 'four foxes', n: 4, response_format: 'b64_json' }).withResponse();
    expect(response.headers.get('x-switchyard-upstream-request-id')).to.equal('gem-req-0001');
    expect(result.data!.map((d) => d.b64_json)).to.deep.equal([PNG, PNG, PNG, PNG]);
    expect(gemini.received).to.have.length(4);
    expect(gemini.received.some((entry) => entry.aborted)).to.equal(false);
  });
});
