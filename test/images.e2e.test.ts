import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { inflateSync, crc32 } from 'node:zlib';
import { expect } from 'chai';
import OpenAI, { toFile } from 'openai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { postJson } from './support/calls.js';
import { jsonOrText } from './support/json.js';
import { usageRow } from './support/rows.js';
import { FAKE_PNG_B64, FakeOpenAIImages } from './fakes/openai-images.js';
import { dashscopeError, FakeDashScope, GENERATION_PATH } from './fakes/dashscope-upstream.js';
import { answer, FakeGemini, googleError } from './fakes/gemini-upstream.js';
import { imageEditHandler } from '../plugins/providers/openai/images.js';
import { endpointOf } from '../plugins/providers/openai/api.js';
import { solidPng } from '../plugins/providers/mock/png.js';
import { toImageRequest } from '../plugins/formats/openai-chat/images.js';
import { aspectRatioOf } from '../plugins/providers/gemini/images.js';

const KEY = 'sk-images-key-000000000001';
const THRIFTY_KEY = 'sk-images-thrifty-00000001';

type ApiError = InstanceType<typeof OpenAI.APIError>;

interface Reply {
  status: number;
  json: any;
  headers: Headers;
}

/** POST JSON with this file's key; the answer's JSON (its text when it is not JSON). */
async function post(url: string, path: string, body: unknown, key = KEY): Promise<Reply> {
  const reply = await postJson(url, path, body, key);
  return { status: reply.status, json: jsonOrText(reply.text), headers: reply.headers };
}

/**
 * A PNG read back independently of the gateway's encoder: signature, every chunk's CRC, IHDR,
 * and the pixels of an 8-bit RGB image without filters.
 */
function decodePng(bytes: Buffer): { width: number; height: number; pixel(x: number, y: number): number[] } {
  expect(bytes.subarray(0, 8).toString('hex')).to.equal('89504e470d0a1a0a');
  let offset = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  let ended = false;
  while (offset < bytes.length) {
    const length = bytes.readUInt32BE(offset);
    const type = bytes.toString('latin1', offset + 4, offset + 8);
    const data = bytes.subarray(offset + 8, offset + 8 + length);
    expect(bytes.readUInt32BE(offset + 8 + length), `${type} crc`).to.equal(crc32(bytes.subarray(offset + 4, offset + 8 + length)));
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect([data[8], data[9], data[12]]).to.deep.equal([8, 2, 0]);
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') ended = true;
    offset += 12 + length;
  }
  expect(ended, 'IEND').to.equal(true);
  const raw = inflateSync(Buffer.concat(idat));
  const stride = 1 + width * 3;
  expect(raw.length).to.equal(stride * height);
  return {
    width,
    height,
    pixel: (x, y) => {
      expect(raw[y * stride]).to.equal(0);
      const at = y * stride + 1 + x * 3;
      return [raw[at]!, raw[at + 1]!, raw[at + 2]!];
    },
  };
}

/** The colour the mock should paint image `index`: computed here from its documented rule. */
function expectedColour(model: string, prompt: string, index: number, inputs: string[] = []): number[] {
  const hash = createHash('sha256').update(model).update('\u0000').update(prompt).update('\u0000');
  for (const input of inputs) hash.update(input).update('\u0000');
  const digest = hash.update(String(index)).digest();
  return [digest[0]!, digest[1]!, digest[2]!];
}

const PLUGINS = '[request-log, auth, rate-limit, validation, routing, metering, openai-chat]';

describe('images against the mock provider', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: ${PLUGINS}
auth:
  keys: [{ name: painter, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-image, mock-chat] }
pricing:
  mock-image: { perImage: 0.04 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it('client.images.generate with b64_json: real PNGs of the asked size, one colour each, deterministic', async () => {
    const result = await client.images.generate({ model: 'mock-image', prompt: 'a red fox', n: 2, size: '256x256', response_format: 'b64_json' });
    expect(result.created).to.be.a('number');
    expect(result.data).to.have.length(2);
    const colours = result.data!.map((datum, i) => {
      expect(datum.url).to.equal(undefined);
      expect(datum.revised_prompt).to.equal('a red fox');
      const png = decodePng(Buffer.from(datum.b64_json!, 'base64'));
      expect([png.width, png.height]).to.deep.equal([256, 256]);
      expect(png.pixel(0, 0)).to.deep.equal(expectedColour('mock-image', 'a red fox', i));
      expect(png.pixel(255, 255)).to.deep.equal(png.pixel(0, 0));
      return png.pixel(0, 0);
    });
    expect(colours[0]).to.not.deep.equal(colours[1]);
    const again = await client.images.generate({ model: 'mock-image', prompt: 'a red fox', n: 2, size: '256x256', response_format: 'b64_json' });
    expect(again.data!.map((d) => d.b64_json)).to.deep.equal(result.data!.map((d) => d.b64_json));
  });

  it('client.images.generate with url: a data:image/png URL; a large size is drawn at 64x64', async () => {
    const result = await client.images.generate({ model: 'mock-image', prompt: 'a blue whale', size: '1024x1024', response_format: 'url' });
    expect(result.data).to.have.length(1);
    const url = result.data![0]!.url!;
    expect(url).to.match(/^data:image\/png;base64,/);
    expect(result.data![0]!.b64_json).to.equal(undefined);
    const png = decodePng(Buffer.from(url.slice('data:image/png;base64,'.length), 'base64'));
    expect([png.width, png.height]).to.deep.equal([64, 64]);
    expect(png.pixel(10, 20)).to.deep.equal(expectedColour('mock-image', 'a blue whale', 0));
  });

  it("the spec's body (input.messages, parameters) through fetch: the texts are the prompt, W*H a size", async () => {
    const res = await post(gw.url, '/v1/images/generations', {
      model: 'mock-image',
      input: { messages: [{ role: 'user', content: [{ text: 'a green' }, { text: 'meadow' }] }] },
      parameters: { negative_prompt: 'people', prompt_extend: false, watermark: false, size: '32*16' },
    });
    expect(res.status, JSON.stringify(res.json)).to.equal(200);
    expect(Object.keys(res.json).sort()).to.deep.equal(['created', 'data']);
    expect(res.json.data).to.have.length(1);
    const png = decodePng(Buffer.from(res.json.data[0].b64_json, 'base64'));
    expect([png.width, png.height]).to.deep.equal([32, 16]);
    expect(png.pixel(31, 15)).to.deep.equal(expectedColour('mock-image', 'a green\nmeadow', 0));
  });

  it("edits: the spec's body with image URLs, and the OpenAI shape's JSON image", async () => {
    const image = 'https://images.example/cat.png';
    const spec = await post(gw.url, '/v1/images/edits', {
      model: 'mock-image',
      input: { messages: [{ role: 'user', content: [{ image }, { text: 'make it blue' }] }] },
      parameters: { n: 3, size: '8*8' },
    });
    expect(spec.status, JSON.stringify(spec.json)).to.equal(200);
    expect(spec.json.data).to.have.length(3);
    spec.json.data.forEach((datum: { b64_json: string }, i: number) => {
      const png = decodePng(Buffer.from(datum.b64_json, 'base64'));
      expect(png.pixel(0, 0)).to.deep.equal(expectedColour('mock-image', 'make it blue', i, [image]));
    });
    const openai = await post(gw.url, '/v1/images/edits', { model: 'mock-image', prompt: 'make it blue', image: [image], size: '8x8', response_format: 'url' });
    expect(openai.status, JSON.stringify(openai.json)).to.equal(200);
    expect(openai.json.data[0].url).to.equal(`data:image/png;base64,${spec.json.data[0].b64_json}`);
  });

  it('meters every image: usage.images priced by perImage, in the cost header and the usage row', async () => {
    const { response } = await client.images.generate({ model: 'mock-image', prompt: 'three cats', n: 3, size: '16x16' }).withResponse();
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(0.12, 1e-12);
    const row = await usageRow(gw, response.headers.get('x-request-id')!);
    expect(row).to.include({ operation: 'image', model: 'mock-image', provider: 'mock', status: 200, promptTokens: 0, completionTokens: 0, images: 3 });
    expect(row.cost).to.be.closeTo(0.12, 1e-12);
    const edit = await post(gw.url, '/v1/images/edits', {
      model: 'mock-image',
      input: { messages: [{ role: 'user', content: [{ image: 'https://images.example/a.png' }, { text: 'x' }] }] },
      parameters: { n: 2 },
    });
    expect(Number(edit.headers.get('x-switchyard-cost'))).to.be.closeTo(0.08, 1e-12);
    const editRow = await usageRow(gw, edit.headers.get('x-request-id')!);
    expect(editRow).to.include({ operation: 'image-edit', images: 2 });
    const totals = await gw.gateway.stores.usage.totals({ model: 'mock-image' });
    expect(totals[0]!.images).to.be.at.least(5);
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const error = (await client.images.generate({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.NotFoundError);
    expect(error.param).to.equal('model');
  });

  describe('validation: 400 with the param named', () => {
    const text = (t: string) => ({ role: 'user', content: [{ text: t }] });
    const gen: Array<[string, Record<string, unknown>, string | null, string]> = [
      ['neither shape (nothing to tell them apart)', { model: 'mock-image' }, null, 'invalid_request'],
      ['the OpenAI shape told by its fields, no prompt', { model: 'mock-image', size: '8x8' }, 'prompt', 'missing_required_parameter'],
      ["the spec's shape told by its parameters, no input", { model: 'mock-image', parameters: { size: '8*8' } }, 'input', 'missing_required_parameter'],
      ['spec: no model', { input: { messages: [text('x')] } }, 'model', 'missing_required_parameter'],
      ['spec: no messages', { model: 'mock-image', input: {} }, 'input.messages', 'missing_required_parameter'],
      ['spec: input not an object', { model: 'mock-image', input: 'x' }, 'input', 'invalid_type'],
      ['spec: empty messages', { model: 'mock-image', input: { messages: [] } }, 'input.messages', 'invalid_value'],
      ['spec: a message without role', { model: 'mock-image', input: { messages: [{ content: [{ text: 'x' }] }] } }, 'input.messages[0].role', 'missing_required_parameter'],
      ['spec: role not a string', { model: 'mock-image', input: { messages: [{ role: 1, content: [{ text: 'x' }] }] } }, 'input.messages[0].role', 'invalid_type'],
      ['spec: content not an array', { model: 'mock-image', input: { messages: [{ role: 'user', content: 'x' }] } }, 'input.messages[0].content', 'invalid_type'],
      ['spec: a content item without text', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{}] }] } }, 'input.messages[0].content[0].text', 'missing_required_parameter'],
      ['spec: text not a string', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ text: 3 }] }] } }, 'input.messages[0].content[0].text', 'invalid_type'],
      ['spec: an image in a generation', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ text: 'x', image: 'https://a.example/b.png' }] }] } }, 'input.messages[0].content[0].image', 'unknown_parameter'],
      ['spec: negative_prompt not a string', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { negative_prompt: 1 } }, 'parameters.negative_prompt', 'invalid_type'],
      ['spec: prompt_extend not a boolean', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { prompt_extend: 'yes' } }, 'parameters.prompt_extend', 'invalid_type'],
      ['spec: watermark not a boolean', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { watermark: 1 } }, 'parameters.watermark', 'invalid_type'],
      ['spec: size not a string', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { size: 1024 } }, 'parameters.size', 'invalid_type'],
      ['spec: a size that is not WxH', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { size: 'big' } }, 'parameters.size', 'invalid_value'],
      ['spec: n on a generation', { model: 'mock-image', input: { messages: [text('x')] }, parameters: { n: 2 } }, 'parameters.n', 'unknown_parameter'],
      ['spec: parameters not an object', { model: 'mock-image', input: { messages: [text('x')] }, parameters: [] }, 'parameters', 'invalid_type'],
      ['spec: a prompt beside input', { model: 'mock-image', input: { messages: [text('x')] }, prompt: 'y' }, 'prompt', 'unknown_parameter'],
      ['openai: no model', { prompt: 'x' }, 'model', 'missing_required_parameter'],
      ['openai: empty prompt', { model: 'mock-image', prompt: '' }, 'prompt', 'invalid_value'],
      ['openai: n 0', { model: 'mock-image', prompt: 'x', n: 0 }, 'n', 'invalid_value'],
      ['openai: n 11', { model: 'mock-image', prompt: 'x', n: 11 }, 'n', 'invalid_value'],
      ['openai: n 1.5', { model: 'mock-image', prompt: 'x', n: 1.5 }, 'n', 'invalid_type'],
      ['openai: an unknown response_format', { model: 'mock-image', prompt: 'x', response_format: 'png' }, 'response_format', 'invalid_value'],
      ['openai: an unknown quality', { model: 'mock-image', prompt: 'x', quality: 'ultra' }, 'quality', 'invalid_value'],
      ['openai: an unknown style', { model: 'mock-image', prompt: 'x', style: 'gothic' }, 'style', 'invalid_value'],
      ['openai: an unknown background', { model: 'mock-image', prompt: 'x', background: 'green' }, 'background', 'invalid_value'],
      ['openai: an unknown output_format', { model: 'mock-image', prompt: 'x', output_format: 'gif' }, 'output_format', 'invalid_value'],
      ['openai: output_compression 101', { model: 'mock-image', prompt: 'x', output_compression: 101 }, 'output_compression', 'invalid_value'],
      ['openai: a bad size', { model: 'mock-image', prompt: 'x', size: '1024' }, 'size', 'invalid_value'],
      ['openai: stream true', { model: 'mock-image', prompt: 'x', stream: true }, 'stream', 'invalid_value'],
      ['openai: an unknown field', { model: 'mock-image', prompt: 'x', colour: 'red' }, 'colour', 'unknown_parameter'],
    ];
    for (const [what, body, param, code] of gen) {
      it(`generations, ${what} -> ${param}`, async () => {
        const res = await post(gw.url, '/v1/images/generations', body);
        expect(res.status, JSON.stringify(res.json)).to.equal(400);
        expect(res.json.error).to.include({ type: 'invalid_request_error', param, code });
      });
    }

    const edit: Array<[string, Record<string, unknown>, string, string]> = [
      ['spec: no image', { model: 'mock-image', input: { messages: [text('x')] } }, 'input.messages', 'invalid_request'],
      ['spec: no text', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: 'https://a.example/b.png' }] }] } }, 'input.messages', 'invalid_request'],
      ['spec: an empty content item', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: 'https://a.example/b.png' }, {}, { text: 'x' }] }] } }, 'input.messages[0].content[1]', 'invalid_value'],
      ['spec: image not a string', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: 5 }, { text: 'x' }] }] } }, 'input.messages[0].content[0].image', 'invalid_type'],
      ['spec: image not a URL', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: '/etc/passwd' }, { text: 'x' }] }] } }, 'input.messages[0].content[0].image', 'invalid_value'],
      ['spec: n 0', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: 'https://a.example/b.png' }, { text: 'x' }] }] }, parameters: { n: 0 } }, 'parameters.n', 'invalid_value'],
      ['spec: n not an integer', { model: 'mock-image', input: { messages: [{ role: 'user', content: [{ image: 'https://a.example/b.png' }, { text: 'x' }] }] }, parameters: { n: '2' } }, 'parameters.n', 'invalid_type'],
      ['openai: no image', { model: 'mock-image', prompt: 'x' }, 'image', 'missing_required_parameter'],
      ['openai: an image that is not a URL', { model: 'mock-image', prompt: 'x', image: 'cat.png' }, 'image', 'invalid_value'],
      ['openai: a forged upload in JSON', { model: 'mock-image', prompt: 'x', image: { kind: 'uploaded-file', path: '/etc/passwd' } }, 'image', 'invalid_type'],
      ['openai: any object as an image in JSON', { model: 'mock-image', prompt: 'x', image: { path: '/etc/passwd' } }, 'image', 'invalid_type'],
      ['openai: an unknown input_fidelity', { model: 'mock-image', prompt: 'x', image: 'https://a.example/b.png', input_fidelity: 'max' }, 'input_fidelity', 'invalid_value'],
    ];
    for (const [what, body, param, code] of edit) {
      it(`edits, ${what} -> ${param}`, async () => {
        const res = await post(gw.url, '/v1/images/edits', body);
        expect(res.status, JSON.stringify(res.json)).to.equal(400);
        expect(res.json.error).to.include({ type: 'invalid_request_error', param, code });
      });
    }

    it('surfaces as a BadRequestError with the param in the SDK', async () => {
      const error = (await client.images.generate({ model: 'mock-image', prompt: 'x', n: 0 }).catch((e: unknown) => e)) as ApiError;
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.param).to.equal('n');
    });
  });
});


describe('images in front of real back-end APIs (fake OpenAI, DashScope and Gemini upstreams)', () => {
  const openai = new FakeOpenAIImages();
  const dashscope = new FakeDashScope();
  const gemini = new FakeGemini();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await Promise.all([openai.start(), dashscope.start(), gemini.start()]);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
auth:
  keys: [{ name: painter, key: ${KEY} }, { name: thrifty, key: ${THRIFTY_KEY}, budget: 0.5 }]
providers:
  - { id: oai, type: openai, baseUrl: ${openai.url}/v1, apiKey: ${openai.apiKey}, models: [gpt-image-1, dall-e-3] }
  - { id: oai-bad, type: openai, baseUrl: ${openai.url}/v1, apiKey: sk-wrong-openai-provider-key-000, models: [oai-bad-creds] }
  - { id: ds, type: dashscope, baseUrl: ${dashscope.url}, apiKey: ${dashscope.apiKey}, models: [qwen-image, qwen-image-edit-plus] }
  - { id: ds-bad, type: dashscope, baseUrl: ${dashscope.url}/api/v1, apiKey: sk-wrong-dashscope-provider-key-00, models: [ds-bad-creds] }
  - { id: gem, type: gemini, baseUrl: ${gemini.url}, apiKey: ${gemini.apiKey}, models: [gemini-image, gemini-image-tokens] }
  - { id: gem-bad, type: gemini, baseUrl: ${gemini.url}, apiKey: AIzaWrongGeminiProviderKey000000, models: [gem-bad-creds] }
pricing:
  gpt-image-1: { perImage: 0.01, input: 5, output: 40 }
  qwen-image: { perImage: 0.035 }
  qwen-image-edit-plus: { perImage: 0.03 }
  gemini-image: { perImage: 0.039, input: 0.3, output: 30 }
  gemini-image-tokens: { input: 0.3, output: 30 }
models:
  - name: dall-e-like
    targets: [{ provider: oai, model: gpt-image-1 }]
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    openai.reset();
    dashscope.reset();
    gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([openai.stop(), dashscope.stop(), gemini.stop()]);
  });

  describe('openai provider', () => {
    it("generate (b64_json): the OpenAI body goes up with the back end's model and key; images and token usage come back, metered", async () => {
      const { data, response } = await client.images
        .generate({ model: 'dall-e-like', prompt: 'an otter', n: 2, size: '1024x1536', quality: 'high', response_format: 'b64_json', background: 'opaque' })
        .withResponse();
      const sent = openai.last();
      expect(sent.url).to.equal('/v1/images/generations');
      expect(sent.headers.authorization).to.equal(`Bearer ${openai.apiKey}`);
      // No response_format for a GPT image model, which refuses it (it always answers base64).
      expect(sent.json).to.deep.equal({ model: 'gpt-image-1', prompt: 'an otter', n: 2, size: '1024x1536', quality: 'high', background: 'opaque' });
      expect(data.created).to.equal(1_700_000_123);
      expect(data.data!.map((d) => d.b64_json)).to.deep.equal([FAKE_PNG_B64, FAKE_PNG_B64]);
      expect(data.data![0]!.revised_prompt).to.equal('revised: an otter');
      // What the model says besides the images reaches the client as it came, usage included.
      expect(data).to.deep.include({ size: '1024x1536', quality: 'high', background: 'opaque', output_format: 'png' });
      expect(data.usage).to.deep.equal({ input_tokens: 12, output_tokens: 200, total_tokens: 212, input_tokens_details: { text_tokens: 12, image_tokens: 0 } });
      expect(decodePng(Buffer.from(data.data![0]!.b64_json!, 'base64')).pixel(0, 0)).to.deep.equal([255, 128, 0]);
      // 2 images at 0.01, 12 input tokens at 5/M, 200 output tokens at 40/M
      const cost = 2 * 0.01 + (12 * 5 + 200 * 40) / 1e6;
      expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(cost, 1e-12);
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect(row).to.include({ operation: 'image', provider: 'oai', upstreamModel: 'gpt-image-1', promptTokens: 12, completionTokens: 200 });
      expect(row.cost).to.be.closeTo(cost, 1e-12);
    });

    it("generate (url): the back end's URL reaches the client (DALL·E); a GPT image model, which answers base64 only and refuses the field, gives a data: URL", async () => {
      const result = await client.images.generate({ model: 'dall-e-3', prompt: 'a heron', response_format: 'url' });
      expect(openai.last().json).to.include({ response_format: 'url' });
      expect(result.data).to.deep.equal([{ url: 'https://images.fake.example/0.png', revised_prompt: 'revised: a heron' }]);
      const gpt = await client.images.generate({ model: 'gpt-image-1', prompt: 'a heron', response_format: 'url' });
      expect(openai.last().json).to.not.have.property('response_format');
      expect(gpt.data![0]!.url).to.equal(`data:image/png;base64,${FAKE_PNG_B64}`);
    });

    it("the spec's body through the openai provider: texts as prompt, W*H as WxH; parameters it has no field for are named losses", async () => {
      const res = await post(gw.url, '/v1/images/generations', {
        model: 'gpt-image-1',
        input: { messages: [{ role: 'user', content: [{ text: 'a quiet lake' }] }] },
        parameters: { negative_prompt: 'boats', watermark: false, size: '1024*1024' },
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      expect(openai.last().json).to.deep.equal({ model: 'gpt-image-1', prompt: 'a quiet lake', size: '1024x1024' });
      expect(res.json).to.deep.equal({
        created: 1_700_000_123,
        data: [{ b64_json: FAKE_PNG_B64, revised_prompt: 'revised: a quiet lake' }],
        size: '1024x1024',
        quality: 'auto',
        background: 'auto',
        output_format: 'png',
        usage: { input_tokens: 12, output_tokens: 100, total_tokens: 112, input_tokens_details: { text_tokens: 12, image_tokens: 0 } },
      });
      expect(res.headers.get('x-switchyard-losses')).to.equal('negative_prompt,watermark');
    });

    it('a JSON edit with data: URLs goes up as multipart/form-data: image[] files with their bytes, mask, fields', async () => {
      const first = solidPng(4, 4, [1, 2, 3]);
      const second = solidPng(2, 2, [9, 8, 7]);
      const mask = solidPng(4, 4, [0, 0, 0]);
      const res = await post(gw.url, '/v1/images/edits', {
        model: 'gpt-image-1',
        prompt: 'merge them',
        image: [`data:image/png;base64,${first.toString('base64')}`, `data:image/png;base64,${second.toString('base64')}`],
        mask: `data:image/png;base64,${mask.toString('base64')}`,
        n: 2,
        input_fidelity: 'high',
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      expect(res.json.data).to.have.length(2);
      const sent = openai.last();
      expect(sent.url).to.equal('/v1/images/edits');
      expect(sent.headers.authorization).to.equal(`Bearer ${openai.apiKey}`);
      expect(String(sent.headers['content-type'])).to.match(/^multipart\/form-data; boundary=/);
      const form = sent.form!;
      expect(form.get('model')).to.equal('gpt-image-1');
      expect(form.get('prompt')).to.equal('merge them');
      expect(form.get('n')).to.equal('2');
      expect(form.get('input_fidelity')).to.equal('high');
      const images = form.getAll('image[]') as File[];
      expect(images).to.have.length(2);
      expect(Buffer.from(await images[0]!.arrayBuffer()).equals(first)).to.equal(true);
      expect(Buffer.from(await images[1]!.arrayBuffer()).equals(second)).to.equal(true);
      expect(images[0]!.type).to.equal('image/png');
      expect(Buffer.from(await (form.get('mask') as File).arrayBuffer()).equals(mask)).to.equal(true);
    });

    it("the spec's edit body through the openai provider: one image as the 'image' field", async () => {
      const png = solidPng(3, 3, [50, 60, 70]);
      const res = await post(gw.url, '/v1/images/edits', {
        model: 'gpt-image-1',
        input: { messages: [{ role: 'user', content: [{ image: `data:image/png;base64,${png.toString('base64')}` }, { text: 'brighter' }] }] },
        parameters: { n: 1 },
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      const form = openai.last().form!;
      expect(Buffer.from(await (form.get('image') as File).arrayBuffer()).equals(png)).to.equal(true);
      expect(form.get('prompt')).to.equal('brighter');
    });

    it('an http(s) image URL on a private address is not fetched: 400 naming the image', async () => {
      const res = await post(gw.url, '/v1/images/edits', { model: 'gpt-image-1', prompt: 'x', image: `${openai.url}/secret.png` });
      expect(res.status, JSON.stringify(res.json)).to.equal(400);
      expect(res.json.error.param).to.equal('image');
      expect(openai.received.filter((r) => r.url === '/v1/images/edits')).to.have.length(0);
    });

    it('an uploaded file (as the multipart reader hands it over) is streamed up from where it was spooled', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'images-test-'));
      const file = path.join(dir, 'spooled');
      const png = solidPng(64, 64, [10, 200, 30]);
      writeFileSync(file, png);
      const endpoint = endpointOf({ id: 'x', type: 'openai', models: [], baseUrl: `${openai.url}/v1`, apiKey: openai.apiKey });
      const pool = new Pool(endpoint.origin);
      try {
        const handler = imageEditHandler(pool, endpoint, [openai.apiKey]);
        const upload = { kind: 'uploaded-file', path: file, filename: 'otter.png', contentType: 'image/png', size: png.length };
        const result = await handler(
          {
            operation: 'image-edit',
            model: 'gpt-image-1',
            stream: false,
            clientWantsStreamUsage: false,
            forwardHeaders: {},
            body: { model: 'x', prompt: 'hat', options: {}, shape: 'openai', images: [{ kind: 'file', file: upload }] },
          },
          { requestId: 'r', signal: new AbortController().signal, logger: gw.gateway as never, request: {} as never },
        );
        expect(result.kind).to.equal('json');
        const image = openai.last().form!.get('image') as File;
        expect(image.name).to.equal('otter.png');
        expect(Buffer.from(await image.arrayBuffer()).equals(png)).to.equal(true);
      } finally {
        await pool.close();
      }
    });

    describe('upstream errors', () => {
      it("a refused provider key is a 502 that shows neither key", async () => {
        const error = (await client.images.generate({ model: 'oai-bad-creds', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
        expect(openai.last().url).to.equal('/v1/images/generations');
        expect(error.status).to.equal(502);
        expect(JSON.stringify(error.error)).to.not.include('sk-wrong');
        expect(gw.logText()).to.not.include('sk-wrong-openai-provider-key-000');
      });

      it('an upstream 400 keeps its message, scrubbed, as a 400', async () => {
        openai.script(() => ({ status: 400, json: { error: { message: `Your request was rejected by the safety system (key ${openai.apiKey})`, type: 'invalid_request_error', param: null, code: 'content_policy_violation' } } }));
        const error = (await client.images.generate({ model: 'gpt-image-1', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
        expect(error).to.be.instanceOf(OpenAI.BadRequestError);
        expect(error.code).to.equal('upstream_bad_request');
        expect(error.message).to.include('safety system');
        expect(error.message).to.not.include(openai.apiKey);
      });

      it('an answer that is not an image list is a 502; so is an empty list, uncharged', async () => {
        openai.script(() => ({ json: { created: 1, data: [{ nothing: true }] } }));
        const error = (await client.images.generate({ model: 'gpt-image-1', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
        expect(error.status).to.equal(502);
        expect(error.code).to.equal('upstream_error');
        openai.script(() => ({ json: { created: 1, data: [] } }));
        const empty = (await client.images.generate({ model: 'gpt-image-1', prompt: 'x', n: 2 }).catch((e: unknown) => e)) as ApiError;
        expect(empty.status).to.equal(502);
        expect(empty.message).to.include('no image');
        expect(empty.headers?.get('x-switchyard-cost') ?? null).to.equal(null);
      });
    });
  });

  describe('multipart edits: the official client.images.edit with real PNG uploads', () => {
    it('one image: streamed up as the image file with its bytes, fields as text', async function () {
      const png = solidPng(8, 8, [200, 100, 50]);
      const result = await client.images.edit({ model: 'gpt-image-1', image: await toFile(png, 'otter.png', { type: 'image/png' }), prompt: 'add a hat', n: 2, size: '1024x1024' });
      expect(result.data).to.have.length(2);
      const form = openai.last().form!;
      expect(openai.last().url).to.equal('/v1/images/edits');
      const image = form.get('image') as File;
      expect(image.name).to.equal('otter.png');
      expect(Buffer.from(await image.arrayBuffer()).equals(png)).to.equal(true);
      expect([form.get('model'), form.get('prompt'), form.get('n'), form.get('size')]).to.deep.equal(['gpt-image-1', 'add a hat', '2', '1024x1024']);
    });

    it('several images and a mask: image[] files and mask', async function () {
      const a = solidPng(4, 4, [1, 2, 3]);
      const b = solidPng(4, 4, [4, 5, 6]);
      const mask = solidPng(4, 4, [0, 0, 0]);
      await client.images.edit({
        model: 'gpt-image-1',
        image: [await toFile(a, 'a.png', { type: 'image/png' }), await toFile(b, 'b.png', { type: 'image/png' })],
        mask: await toFile(mask, 'mask.png', { type: 'image/png' }),
        prompt: 'merge',
      });
      const form = openai.last().form!;
      const images = form.getAll('image[]') as File[];
      expect(images.map((f) => f.name)).to.deep.equal(['a.png', 'b.png']);
      expect(Buffer.from(await images[1]!.arrayBuffer()).equals(b)).to.equal(true);
      expect(Buffer.from(await (form.get('mask') as File).arrayBuffer()).equals(mask)).to.equal(true);
    });

    it('an upload to dashscope goes as a data: URL', async function () {
      const png = solidPng(2, 2, [7, 7, 7]);
      await client.images.edit({ model: 'qwen-image-edit-plus', image: await toFile(png, 'x.png', { type: 'image/png' }), prompt: 'grey' });
      expect(dashscope.last().body!.input.messages[0].content).to.deep.equal([{ image: `data:image/png;base64,${png.toString('base64')}` }, { text: 'grey' }]);
    });
  });

  describe('dashscope provider', () => {
    it("the spec's body goes up as DashScope's native body, with Bearer auth; its image URLs come back", async () => {
      const res = await post(gw.url, '/v1/images/generations', {
        model: 'qwen-image',
        input: { messages: [{ role: 'user', content: [{ text: 'a couplet in a hall' }] }] },
        parameters: { negative_prompt: 'blurry', prompt_extend: true, watermark: false, size: '1328*1328', seed: 7 },
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      const sent = dashscope.last();
      expect(sent.url).to.equal(GENERATION_PATH);
      expect(sent.headers.authorization).to.equal(`Bearer ${dashscope.apiKey}`);
      expect(sent.body).to.deep.equal({
        model: 'qwen-image',
        input: { messages: [{ role: 'user', content: [{ text: 'a couplet in a hall' }] }] },
        parameters: { negative_prompt: 'blurry', prompt_extend: true, watermark: false, size: '1328*1328', seed: 7 },
      });
      expect(res.json.data).to.deep.equal([{ url: `${dashscope.url}/results/1-0.png?Expires=1767927258&Signature=abc` }]);
      expect(res.json.created).to.be.a('number');
      expect(Number(res.headers.get('x-switchyard-cost'))).to.be.closeTo(0.035, 1e-12);
    });

    it('client.images.generate (url): prompt and WxH become text and W*H', async () => {
      const result = await client.images.generate({ model: 'qwen-image', prompt: 'a lantern', size: '1024x768', response_format: 'url' });
      expect(dashscope.last().body).to.deep.equal({
        model: 'qwen-image',
        input: { messages: [{ role: 'user', content: [{ text: 'a lantern' }] }] },
        parameters: { size: '1024*768' },
      });
      expect(result.data![0]!.url).to.match(/\/results\/1-0\.png/);
    });

    it('b64_json asked of a back end that gives URLs: the URL is returned and the loss named; OpenAI-only settings are losses too', async () => {
      const { data, response } = await client.images.generate({ model: 'qwen-image', prompt: 'x', response_format: 'b64_json', quality: 'hd' }).withResponse();
      expect(data.data![0]!.b64_json).to.equal(undefined);
      expect(data.data![0]!.url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/results\//);
      expect(response.headers.get('x-switchyard-losses')).to.equal('quality,response_format');
      expect(dashscope.last().body!.parameters).to.deep.equal({});
    });

    it("edits: images first, then the text; n images metered at the edit model's price", async () => {
      const image = 'https://images.example/girl.png';
      const res = await post(gw.url, '/v1/images/edits', {
        model: 'qwen-image-edit-plus',
        input: { messages: [{ role: 'user', content: [{ text: 'the girl in' }, { image }, { image: 'https://images.example/dress.png' }, { text: 'the dress' }] }] },
        parameters: { n: 2, prompt_extend: false },
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      expect(dashscope.last().body).to.deep.equal({
        model: 'qwen-image-edit-plus',
        input: { messages: [{ role: 'user', content: [{ image }, { image: 'https://images.example/dress.png' }, { text: 'the girl in\nthe dress' }] }] },
        parameters: { prompt_extend: false, n: 2 },
      });
      expect(res.json.data).to.have.length(2);
      expect(Number(res.headers.get('x-switchyard-cost'))).to.be.closeTo(0.06, 1e-12);
      const row = await usageRow(gw, res.headers.get('x-request-id')!);
      expect(row).to.include({ operation: 'image-edit', provider: 'ds', status: 200 });
      expect(row.cost).to.be.closeTo(0.06, 1e-12);
    });

    it("the OpenAI edit shape (JSON) through dashscope: image URL and a mask it cannot use (a loss)", async () => {
      const res = await post(gw.url, '/v1/images/edits', { model: 'qwen-image-edit-plus', prompt: 'add a hat', image: 'https://images.example/cat.png', mask: 'https://images.example/mask.png' });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      expect(dashscope.last().body!.input.messages[0].content).to.deep.equal([{ image: 'https://images.example/cat.png' }, { text: 'add a hat' }]);
      expect(res.headers.get('x-switchyard-losses')).to.equal('mask');
    });

    describe('upstream errors', () => {
      it("a refused key (DashScope's 401 InvalidApiKey) is a 502 that shows neither key", async () => {
        const res = await post(gw.url, '/v1/images/generations', { model: 'ds-bad-creds', prompt: 'x' });
        expect(dashscope.last().url).to.equal(GENERATION_PATH);
        expect(res.status).to.equal(502);
        expect(res.json.error.code).to.equal('upstream_error');
        expect(JSON.stringify(res.json)).to.not.include('sk-wrong');
        expect(gw.logText()).to.not.include('sk-wrong-dashscope-provider-key-00');
      });

      it("a 400 InvalidParameter keeps DashScope's message, scrubbed", async () => {
        dashscope.script(() => ({ status: 400, json: dashscopeError('DataInspectionFailed', `Input data may contain inappropriate content. (key ${dashscope.apiKey}, https://dashscope.internal.example/x)`) }));
        const res = await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x' });
        expect(res.status).to.equal(400);
        expect(res.json.error.code).to.equal('upstream_bad_request');
        expect(res.json.error.message).to.include('inappropriate content');
        expect(res.json.error.message).to.not.include(dashscope.apiKey);
        expect(res.json.error.message).to.not.include('dashscope.internal');
      });

      it('the account out of balance (Arrearage, a 400) is the operator\'s: 429 upstream_quota_exhausted, another target may answer; not the client\'s bad request', async () => {
        dashscope.script(() => ({ status: 400, json: dashscopeError('Arrearage', 'Access denied, please make sure your account is in good standing.') }));
        const res = await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x' });
        expect(res.status).to.equal(429);
        expect(res.json.error.code).to.equal('upstream_quota_exhausted');
        expect(res.headers.get('x-should-retry')).to.equal('false');
      });

      it('the fake itself refuses a malformed size (a test that the mapping sends W*H)', async () => {
        const res = await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x', size: '640x480' });
        expect(res.status, JSON.stringify(res.json)).to.equal(200);
        expect(dashscope.last().body!.parameters.size).to.equal('640*480');
      });

      it('429 Throttling is a 429; 500 a 502; an answer without images a 502', async () => {
        dashscope.script(() => ({ status: 429, json: dashscopeError('Throttling.RateQuota', 'Requests rate limit exceeded, please try again later.') }));
        expect((await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x' })).status).to.equal(429);
        dashscope.script(() => ({ status: 500, json: dashscopeError('InternalError', 'boom') }));
        const failed = await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x' });
        expect(failed.status).to.equal(502);
        expect(failed.json.error.message).to.not.include('boom');
        dashscope.script(() => ({ json: { output: { choices: [{ finish_reason: 'stop', message: { role: 'assistant', content: [] } }] }, usage: { image_count: 0 }, request_id: 'r' } }));
        const empty = await post(gw.url, '/v1/images/generations', { model: 'qwen-image', prompt: 'x' });
        expect(empty.status).to.equal(502);
        expect(empty.json.error.code).to.equal('upstream_error');
      });
    });
  });

  describe('gemini provider (image output)', () => {
    const png = solidPng(2, 2, [12, 34, 56]).toString('base64');
    const withImage = () => ({ json: answer([{ text: 'Here is your image.' }, { inlineData: { mimeType: 'image/png', data: png } }]) });

    it('generateContent with responseModalities IMAGE; inlineData comes back as b64_json; tokens and images metered', async () => {
      gemini.script(withImage);
      const { data, response } = await client.images.generate({ model: 'gemini-image', prompt: 'a tiny square', n: 2, size: '1024x1024', response_format: 'b64_json' }).withResponse();
      expect(data.data!.map((d) => d.b64_json)).to.deep.equal([png, png]);
      expect(gemini.received).to.have.length(2);
      const sent = gemini.last();
      expect(sent.url).to.equal('/v1beta/models/gemini-image:generateContent');
      expect(sent.headers['x-goog-api-key']).to.equal(gemini.apiKey);
      expect(sent.headers.authorization).to.equal(undefined);
      expect(sent.body).to.deep.equal({
        contents: [{ role: 'user', parts: [{ text: 'a tiny square' }] }],
        generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '1:1' } },
      });
      expect(response.headers.get('x-switchyard-losses')).to.equal(null);
      // 2 images at 0.039, 2 x 11 prompt tokens at 0.3/M, 2 x 7 output tokens at 30/M
      const cost = 2 * 0.039 + (22 * 0.3 + 14 * 30) / 1e6;
      expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(cost, 1e-12);
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect(row).to.include({ operation: 'image', provider: 'gem', promptTokens: 22, completionTokens: 14 });
    });

    it('url asked: a data: URL; a size with no exact ratio is the nearest one and a named loss', async () => {
      gemini.script(withImage);
      const { data, response } = await client.images.generate({ model: 'gemini-image', prompt: 'wide', size: '1000x560', response_format: 'url' }).withResponse();
      expect(data.data![0]!.url).to.equal(`data:image/png;base64,${png}`);
      expect(gemini.last().body!.generationConfig.imageConfig).to.deep.equal({ aspectRatio: '16:9' });
      expect(response.headers.get('x-switchyard-losses')).to.equal('size');
    });

    it("edits: data: URL images go up as inlineData before the prompt", async () => {
      gemini.script(withImage);
      const input = solidPng(1, 1, [1, 1, 1]).toString('base64');
      const res = await post(gw.url, '/v1/images/edits', {
        model: 'gemini-image',
        input: { messages: [{ role: 'user', content: [{ image: `data:image/png;base64,${input}` }, { text: 'recolour' }] }] },
      });
      expect(res.status, JSON.stringify(res.json)).to.equal(200);
      expect(gemini.last().body!.contents[0].parts).to.deep.equal([{ inlineData: { mimeType: 'image/png', data: input } }, { text: 'recolour' }]);
      expect(res.json.data).to.deep.equal([{ b64_json: png }]);
      // An image by a private address is not fetched: a 400 naming the field it came in (one: `image`).
      const refused = await post(gw.url, '/v1/images/edits', { model: 'gemini-image', prompt: 'hat', image: `${gemini.url}/x.png` });
      expect(refused.status, JSON.stringify(refused.json)).to.equal(400);
      expect(refused.json.error.param).to.equal('image');
    });

    it("a model priced by its tokens alone (as Google bills image output): a budget reserves each image's worst case, so a call it cannot cover is refused, not charged past it", async () => {
      // Google bills 1,290 output tokens an image made: 0.0387 each at 30 a million.
      gemini.script(() => ({ json: answer([{ inlineData: { mimeType: 'image/png', data: png } }], { usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 1290, totalTokenCount: 1300 } }) }));
      const thrifty = new OpenAI({ apiKey: THRIFTY_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      // Four images may cost 4 x 6,240 output tokens at most (0.75): past the 0.5 left.
      const refused = await thrifty.images.generate({ model: 'gemini-image-tokens', prompt: 'a', n: 4 }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
      expect((refused as ApiError).code).to.equal('insufficient_quota');
      expect(gemini.received).to.have.length(0);
      // Two fit (0.37 at most), and are charged what they cost.
      const { response } = await thrifty.images.generate({ model: 'gemini-image-tokens', prompt: 'a', n: 2 }).withResponse();
      const row = await usageRow(gw, response.headers.get('x-request-id')!);
      expect(row.cost).to.be.closeTo((20 * 0.3 + 2580 * 30) / 1e6, 1e-12);
      await gw.gateway.stores.flush();
      expect((await gw.gateway.stores.keys.get('thrifty'))!.spent).to.be.at.most(0.5);
    });

    it('n calls of which one fails: the call fails, charged the images its back end made and billed before it', async () => {
      let calls = 0;
      // One call makes its image at once; the other fails after thinking 300 ms (the back end's time, as Google's 500s take).
      gemini.script(async () => {
        if (++calls % 2 === 1) return { json: answer([{ inlineData: { mimeType: 'image/png', data: png } }], { usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 1290, totalTokenCount: 1300 } }) };
        await new Promise((resolve) => setTimeout(resolve, 300));
        return { status: 500, json: googleError(500, 'INTERNAL', 'boom') };
      });
      const res = await post(gw.url, '/v1/images/generations', { model: 'gemini-image-tokens', prompt: 'x', n: 2 });
      expect(res.status).to.equal(502);
      const row = await usageRow(gw, res.headers.get('x-request-id')!);
      expect(row).to.include({ promptTokens: 10, completionTokens: 1290, images: 1 });
      expect(row.cost).to.be.closeTo((10 * 0.3 + 1290 * 30) / 1e6, 1e-12);
    });

    it('a blocked prompt is a 400; an answer with only text a 502; a refused key a 502', async () => {
      gemini.script(() => ({ json: { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, usageMetadata: { promptTokenCount: 3, totalTokenCount: 3 } } }));
      const blocked = await post(gw.url, '/v1/images/generations', { model: 'gemini-image', prompt: 'x' });
      expect(blocked.status).to.equal(400);
      expect(blocked.json.error.code).to.equal('upstream_bad_request');
      expect(blocked.json.error.message).to.include('PROHIBITED_CONTENT');
      gemini.script(() => ({ json: answer([{ text: 'I cannot draw that.' }]) }));
      expect((await post(gw.url, '/v1/images/generations', { model: 'gemini-image', prompt: 'x' })).status).to.equal(502);
      gemini.script(() => ({ status: 500, json: googleError(500, 'INTERNAL', 'boom') }));
      expect((await post(gw.url, '/v1/images/generations', { model: 'gemini-image', prompt: 'x' })).status).to.equal(502);
      gemini.reset();
      const refused = await post(gw.url, '/v1/images/generations', { model: 'gem-bad-creds', prompt: 'x' });
      expect(refused.status).to.equal(502);
      expect(JSON.stringify(refused.json)).to.not.include('AIzaWrong');
    });
  });
});

describe('image request normalisation (units)', () => {
  const upload = { kind: 'uploaded-file', path: '/tmp/spooled-1', filename: 'a.png', contentType: 'image/png', size: 10 };
  const input = (type: string) => ({ body: {}, params: {}, query: {}, headers: { 'content-type': type } });

  it('a multipart form: uploaded files become file inputs, in order, with the mask', () => {
    const request = toImageRequest({ model: 'm', prompt: 'p', image: [upload, { ...upload, path: '/tmp/spooled-2' }], mask: upload, n: 2 }, input('multipart/form-data; boundary=x'));
    expect(request).to.deep.include({ model: 'm', prompt: 'p', n: 2, shape: 'openai' });
    expect(request.images).to.deep.equal([
      { kind: 'file', file: upload },
      { kind: 'file', file: { ...upload, path: '/tmp/spooled-2' } },
    ]);
    expect(request.mask).to.deep.equal({ kind: 'file', file: upload });
  });

  it('a JSON body cannot pass an object off as an upload', () => {
    expect(() => toImageRequest({ model: 'm', prompt: 'p', image: upload }, input('application/json'))).to.throw().with.property('param', 'image');
    expect(() => toImageRequest({ model: 'm', prompt: 'p', image: ['https://a.example/x.png', upload] }, input('application/json'))).to.throw().with.property('param', 'image[1]');
  });

  it('the spec shape: texts joined, images in order, W*H as WxH, OpenAI options empty', () => {
    const request = toImageRequest({
      model: 'm',
      input: { messages: [{ role: 'system', content: [{ text: 'a' }] }, { role: 'user', content: [{ image: 'https://x.example/1.png', text: 'b' }, { image: 'data:image/png;base64,AAAA' }] }] },
      parameters: { size: '640*480', n: 3, seed: 1, watermark: true },
    });
    expect(request).to.deep.equal({
      model: 'm',
      prompt: 'a\nb',
      options: {},
      shape: 'spec',
      size: '640x480',
      n: 3,
      seed: 1,
      watermark: true,
      images: [
        { kind: 'url', url: 'https://x.example/1.png' },
        { kind: 'url', url: 'data:image/png;base64,AAAA' },
      ],
    });
  });

  it("Gemini's aspect ratio: exact where it exists, the nearest otherwise", () => {
    expect(aspectRatioOf('1024x1024')).to.deep.equal({ ratio: '1:1', exact: true });
    expect(aspectRatioOf('1920x1080')).to.deep.equal({ ratio: '16:9', exact: true });
    expect(aspectRatioOf('1024x1536')).to.deep.equal({ ratio: '2:3', exact: true });
    expect(aspectRatioOf('1000x560')).to.deep.equal({ ratio: '16:9', exact: false });
    expect(aspectRatioOf('auto')).to.equal(undefined);
  });
});

describe("image edits at a gemini back end: the input images' URLs are bounded as a chat call's are (imageFetch)", function () {
  this.timeout(30_000);
  const gemini = new FakeGemini();
  const png = solidPng(4, 4, [10, 20, 30]);
  let hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': png.length });
    res.end(png);
  });
  let gw: RunningGateway;
  let imagesUrl = '';

  before(async () => {
    await gemini.start();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    imagesUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
providers:
  - id: gem
    type: gemini
    baseUrl: ${gemini.url}
    apiKey: ${gemini.apiKey}
    models: [gemini-image]
    imageFetch: { allowPrivateHosts: ['127.0.0.1'], maxImages: 2 }
`);
  });
  beforeEach(() => {
    hits = [];
    gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await gemini.stop();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('more image URLs than maxImages: 400 naming the first one past it, the back end not called', async () => {
    const res = await postJson(gw.url, '/v1/images/edits', { model: 'gemini-image', prompt: 'x', image: [1, 2, 3].map((i) => `${imagesUrl}/i${i}.png`) }, 'sk-no-keys-configured-000');
    expect(res.status, res.text).to.equal(400);
    expect(JSON.parse(res.text).error).to.deep.include({ code: 'invalid_value', param: 'image[2]' });
    expect(hits).to.deep.equal(['/i1.png', '/i2.png']);
    expect(gemini.received).to.have.length(0);
  });

  it('the same URL given twice is fetched once', async () => {
    gemini.script(() => ({ json: answer([{ inlineData: { mimeType: 'image/png', data: png.toString('base64') } }]) }));
    const res = await postJson(gw.url, '/v1/images/edits', { model: 'gemini-image', prompt: 'x', image: [`${imagesUrl}/same.png`, `${imagesUrl}/same.png`], response_format: 'b64_json' }, 'sk-no-keys-configured-000');
    expect(res.status, res.text).to.equal(200);
    expect(hits).to.deep.equal(['/same.png']);
    expect(gemini.last().body!.contents[0].parts.filter((p: Record<string, unknown>) => p.inlineData)).to.have.length(2);
  });
});
