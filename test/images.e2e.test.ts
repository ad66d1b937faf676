import { createHash } from 'node:crypto';
import { inflateSync, crc32 } from 'node:zlib';
import { expect } from 'chai';
import OpenAI from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-images-key-000000000001';

type ApiError = InstanceType<typeof OpenAI.APIError>;

interface Reply {
  status: number;
  json: any;
  headers: Headers;
}

async function post(url: string, path: string, body: unknown, key = KEY): Promise<Reply> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json, headers: res.headers };
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

/** The usage row of one request, once metering has written it. */
async function usageRow(gw: RunningGateway, requestId: string) {
  let row: Awaited<ReturnType<RunningGateway['gateway']['stores']['usage']['list']>>[number] | undefined;
  const deadline = Date.now() + 3000;
  while (!row && Date.now() < deadline) {
    await gw.gateway.stores.flush();
    row = (await gw.gateway.stores.usage.list({ requestId }))[0];
    if (!row) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  if (!row) throw new Error(`no usage row for ${requestId}`);
  return row;
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
    expect(row).to.include({ operation: 'image', model: 'mock-image', provider: 'mock', status: 200, promptTokens: 0, completionTokens: 0 });
    expect(row.cost).to.be.closeTo(0.12, 1e-12);
    const edit = await post(gw.url, '/v1/images/edits', {
      model: 'mock-image',
      input: { messages: [{ role: 'user', content: [{ image: 'https://images.example/a.png' }, { text: 'x' }] }] },
      parameters: { n: 2 },
    });
    expect(Number(edit.headers.get('x-switchyard-cost'))).to.be.closeTo(0.08, 1e-12);
    const editRow = await usageRow(gw, edit.headers.get('x-request-id')!);
    expect(editRow).to.include({ operation: 'image-edit' });
  });

  it('refuses an unknown model with 404 model_not_found', async () => {
    const error = (await client.images.generate({ model: 'no-such-model', prompt: 'x' }).catch((e: unknown) => e)) as ApiError;
    expect(error).to.be.instanceOf(OpenAI.NotFoundError);
    expect(error.param).to.equal('model');
  });

  describe('validation: 400 with the param named', () => {
    const text = (t: string) => ({ role: 'user', content: [{ text: t }] });
    const gen: Array<[string, Record<string, unknown>, string | null, string]> = [
      ['neither shape', { model: 'mock-image', size: '8x8' }, '', 'invalid_request'],
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

