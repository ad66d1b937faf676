import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const BUDGET_KEY = 'sk-attachments-budget-01';
const TPM_KEY = 'sk-attachments-tpm-00001';
const PDF_KEY = 'sk-attachments-pdf-00001';
const HIDDEN_KEY = 'sk-attachments-hidden-01';

/** A function whose description alone is about 4,700 tokens. */
const BIG_FUNCTION = {
  name: 'lookup',
  description: Array.from({ length: 600 }, (_, i) => `field${i} means value ${i * 7}`).join('; '),
  parameters: { type: 'object', properties: { q: { type: 'string' } } },
};
/** About 225 KB of a PDF, as base64. */
const PDF = Buffer.alloc(225_000, 0x41).toString('base64');

/**
 * What a prompt holds besides text and images (tools given the older way, files, audio,
 * documents) counts toward a key's budget and tokens per minute: such calls are forwarded and
 * billed, so they must be reserved before they go up.
 */
describe('a budget and a tokens-per-minute limit count the files, audio and functions a prompt holds', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, anthropic-messages]
auth:
  keys:
    - { name: budget, key: ${BUDGET_KEY}, budget: 0.01 }
    - { name: tpm, key: ${TPM_KEY}, tpm: 1000 }
    - { name: pdf, key: ${PDF_KEY}, budget: 0.05 }
    - { name: hidden, key: ${HIDDEN_KEY}, budget: 0.02 }
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [m] }
pricing:
  m: { input: 1, output: 1 }
`);
    // Each call is in flight a while, so that parallel calls are admitted side by side; each reports 6,000 prompt tokens.
    upstream.handle('POST /v1/chat/completions', async (_req, res) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      json(res, 200, {
        id: 'chatcmpl-a',
        object: 'chat.completion',
        created: 1,
        model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 6000, completion_tokens: 1, total_tokens: 6001 },
      });
    });
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  const statuses = (calls: Array<Promise<unknown>>) => Promise.all(calls.map((call) => call.then(() => 200, (error: { status?: number }) => error.status ?? 0)));

  it('functions (tools the older way): parallel calls are admitted only as far as the budget goes, as tools are', async () => {
    const client = new OpenAI({ apiKey: BUDGET_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const call = () => client.chat.completions.create({ model: 'm', max_tokens: 10, functions: [BIG_FUNCTION], messages: [{ role: 'user', content: 'find it' }] });
    const got = await statuses([call(), call(), call()]);
    // Each may cost about 4,700 tokens (0.0047): two fit in 0.01 side by side, a third does not.
    expect(got.filter((status) => status === 200)).to.have.length(2);
    expect(got.filter((status) => status === 429)).to.have.length(1);
  });

  it('a PDF, as a chat file part or a Claude document, is counted by its size: a call its bound does not fit is refused', async () => {
    // About 225,000 tokens at one a byte (0.225): more than the key's whole budget.
    const openai = new OpenAI({ apiKey: PDF_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'file', file: { filename: 'a.pdf', file_data: `data:application/pdf;base64,${PDF}` } }, { type: 'text', text: 'summarise' }] }] })
      .catch((error: { status?: number; code?: string }) => error);
    expect(chat).to.include({ status: 429, code: 'insufficient_quota' });
    const claude = new Anthropic({ apiKey: PDF_KEY, baseURL: gw.url, maxRetries: 0 });
    const message = await claude.messages
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: PDF } }, { type: 'text', text: 'summarise' }] }] })
      .catch((error: { status?: number }) => error);
    expect(message).to.include({ status: 429 });
    expect(upstream.received.filter((r) => JSON.stringify(r.body ?? '').includes('application/pdf'))).to.have.length(0);
  });

  it('audio and functions count toward tokens per minute, audio by its length: a call that alone may use more than the limit is refused, a short clip is not', async () => {
    const client = new OpenAI({ apiKey: TPM_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const functions = await client.chat.completions.create({ model: 'm', max_tokens: 10, functions: [BIG_FUNCTION], messages: [{ role: 'user', content: 'x' }] }).catch((error: { status?: number; code?: string }) => error);
    expect(functions).to.include({ status: 429, code: 'rate_limit_exceeded' });
    const clip = (bytes: number) =>
      client.chat.completions
        .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: Buffer.alloc(bytes, 1).toString('base64'), format: 'wav' } }] }] })
        .then(() => 200, (error: { status?: number; code?: string }) => error);
    // About a minute of 16 kB/s audio: some 1,250 tokens, past the key's 1,000 a minute on its own.
    expect(await clip(2_000_000)).to.include({ status: 429, code: 'rate_limit_exceeded' });
    // Eight seconds of it: some 80 tokens, admitted.
    expect(await clip(128_000)).to.equal(200);
  });

  it("what a body holds in fields the prompt walk does not read (a response schema, a Responses template's input) still counts: a call whose text would not fit is refused", async () => {
    // About 45,000 bytes of text: up to 45,000 tokens (0.045) against 0.02 left.
    const big = Array.from({ length: 3000 }, (_, i) => `clause ${i} of the schema`).join(' ');
    const client = new OpenAI({ apiKey: HIDDEN_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const schema = await client.chat.completions
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object', description: big } } } })
      .catch((error: { status?: number; code?: string }) => error);
    expect(schema).to.include({ status: 429, code: 'insufficient_quota' });
    const template = await client.responses
      .create({ model: 'm', max_output_tokens: 16, input: big, prompt: { id: 'pmpt_1' } } as never)
      .catch((error: { status?: number; code?: string }) => error);
    expect(template).to.include({ status: 429, code: 'insufficient_quota' });
    // A small call still fits.
    expect((await client.chat.completions.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })).choices[0]!.message.content).to.equal('ok');
  });

  it('an image is counted as one image whatever its size, not as text its data would be', async () => {
    // About 200 KB of image data: 1,600 tokens as an image (0.0016), 200,000 (0.2) if its data were text.
    const image = `data:image/png;base64,${Buffer.alloc(150_000, 7).toString('base64')}`;
    const client = new OpenAI({ apiKey: PDF_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const answer = await client.chat.completions.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: image } }, { type: 'text', text: 'what is it?' }] }] });
    expect(answer.choices[0]!.message.content).to.equal('ok');
  });
});
