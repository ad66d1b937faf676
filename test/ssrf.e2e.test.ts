import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const CLIENT_KEY = 'sk-client-ssrf-0123456789';
/** A 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);
const MAX_BYTES = 4096;

type Json = Record<string, any>;

/**
 * An image server on 127.0.0.1 (a loopback address: the gateway fetches from it only for the
 * provider whose imageFetch.allowPrivateHosts names 127.0.0.1).
 */
class ImageServer {
  private server?: http.Server;
  url = '';
  port = 0;
  hits: string[] = [];
  /** Requests being answered at once, and the most seen. */
  open = 0;
  mostOpen = 0;

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      this.hits.push(req.url ?? '');
      const sized = /^\/sized\/(\d+)\/\w+$/.exec(req.url ?? '');
      if (sized) {
        // A PNG of the size asked, answered on a later turn so that fetches under way overlap.
        this.open++;
        this.mostOpen = Math.max(this.mostOpen, this.open);
        const body = Buffer.concat([PNG, Buffer.alloc(Math.max(0, Number(sized[1]) - PNG.length), 1)]);
        setTimeout(() => {
          this.open--;
          res.writeHead(200, { 'content-type': 'image/png', 'content-length': body.length });
          res.end(body);
        }, 5);
        return;
      }
      switch (req.url) {
        case '/cat.png':
          res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
          res.end(PNG);
          return;
        case '/hop':
          res.writeHead(302, { location: '/cat.png' });
          res.end();
          return;
        case '/to-localhost':
          // Same server, but named `localhost`: a host the allow-list does not name.
          res.writeHead(302, { location: `http://localhost:${this.port}/cat.png` });
          res.end();
          return;
        case '/to-private':
          res.writeHead(307, { location: 'http://10.0.0.7/cat.png' });
          res.end();
          return;
        case '/to-metadata':
          res.writeHead(301, { location: 'http://169.254.169.254/latest/meta-data/' });
          res.end();
          return;
        case '/loop':
          res.writeHead(302, { location: '/loop' });
          res.end();
          return;
        case '/big':
          // No content-length: the cap must hold while streaming.
          res.writeHead(200, { 'content-type': 'image/png' });
          res.write(PNG);
          for (let i = 0; i < 10; i++) res.write(Buffer.alloc(1024, 1));
          res.end();
          return;
        case '/big-declared':
          res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(MAX_BYTES * 4) });
          res.end(Buffer.alloc(MAX_BYTES * 4, 1));
          return;
        case '/slow':
          // Headers, a first piece, then nothing: the total time cap must end it.
          res.writeHead(200, { 'content-type': 'image/png' });
          res.write(PNG.subarray(0, 8));
          return;
        case '/page':
          res.writeHead(200, { 'content-type': 'text/html' });
          res.end('<html>not an image</html>');
          return;
        default:
          res.writeHead(404, { 'content-type': 'text/plain' });
          res.end('no');
      }
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    this.url = `http://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}

describe('image URLs a back end needs as bytes go through the SSRF guard (gemini provider)', () => {
  const upstream = new FakeGemini();
  const images = new ImageServer();
  let gw: RunningGateway;
  let openai: OpenAI;

  before(async () => {
    await upstream.start();
    await images.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
# A refused image URL is the client's error, but the routing plugin counts every error but
# upstream_bad_request against the back end: keep its breaker out of these tests.
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
  - gemini
providers:
  - id: google-open
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [open-model]
    imageFetch: { allowPrivateHosts: ['127.0.0.1'], maxBytes: ${MAX_BYTES}, timeoutMs: 800, maxRedirects: 2 }
  - id: google-closed
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [closed-model]
  - id: google-bounded
    type: gemini
    baseUrl: ${upstream.url}
    apiKey: ${upstream.apiKey}
    models: [bounded-model]
    imageFetch: { allowPrivateHosts: ['127.0.0.1'], maxBytes: 8192, maxImages: 8, maxTotalBytes: 12000 }
`);
    openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    upstream.reset();
    images.hits = [];
    images.mostOpen = 0;
  });
  after(async () => {
    await gw?.stop();
    await images.stop();
    await upstream.stop();
  });

  function ask(model: string, url: string) {
    return openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this?' }, { type: 'image_url', image_url: { url } }] }],
    });
  }

  async function refused(model: string, url: string): Promise<Json> {
    try {
      await ask(model, url);
    } catch (error) {
      if (!(error instanceof OpenAI.APIError)) throw error;
      expect(error.status).to.equal(400);
      expect(upstream.received, 'the back end was not called').to.have.length(0);
      return error.error as Json;
    }
    throw new Error('the call was not refused');
  }

  it('an allowed host: the image is fetched and sent to Gemini as inlineData bytes', async () => {
    const completion = await ask('open-model', `${images.url}/cat.png`);
    expect(completion.choices[0]!.message.content).to.equal('upstream says: what is this?');
    expect(upstream.last().body!.contents).to.deep.equal([
      { role: 'user', parts: [{ text: 'what is this?' }, { inlineData: { mimeType: 'image/png', data: PNG.toString('base64') } }] },
    ]);
    expect(images.hits).to.deep.equal(['/cat.png']);
  });

  describe("a call's fetches are bounded together (imageFetch.maxImages, maxTotalBytes), each URL fetched once, four at a time", () => {
    const many = (urls: string[]) =>
      openai.chat.completions.create({
        model: 'bounded-model',
        messages: [{ role: 'user', content: [{ type: 'text', text: 'compare' }, ...urls.map((url) => ({ type: 'image_url' as const, image_url: { url } }))] }],
      });

    it('the same URL named twenty times is fetched once, and sent twenty times', async () => {
      await many(Array.from({ length: 20 }, () => `${images.url}/sized/500/same`));
      expect(images.hits).to.deep.equal(['/sized/500/same']);
      expect(upstream.last().body!.contents[0].parts.filter((p: Json) => p.inlineData)).to.have.length(20);
    });

    it('one image named so often that its copies pass maxTotalBytes: 400, fetched once, the back end not called', async () => {
      const error = await many(Array.from({ length: 3 }, () => `${images.url}/sized/5000/again`)).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      if (!error) throw new Error('the call was not refused');
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.message).to.match(/more than 12000 bytes together/);
      expect(images.hits).to.deep.equal(['/sized/5000/again']);
      expect(upstream.received).to.have.length(0);
    });

    it('eight images are fetched at most four at a time', async () => {
      await many(Array.from({ length: 8 }, (_, i) => `${images.url}/sized/1000/i${i}`));
      expect(images.hits).to.have.length(8);
      expect(images.mostOpen).to.be.within(1, 4);
    });

    it('more URLs than maxImages: 400 naming the first one past it, the back end not called', async () => {
      const error = await many(Array.from({ length: 9 }, (_, i) => `${images.url}/sized/100/n${i}`)).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      if (!error) throw new Error('the call was not refused');
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.error).to.deep.include({ code: 'invalid_value', param: 'messages[0].content[9].image_url.url' });
      expect(error.message).to.match(/at most 8 image URLs/);
      expect(upstream.received).to.have.length(0);
    });

    it('images that come to more than maxTotalBytes together: 400, the back end not called', async () => {
      const error = await many(Array.from({ length: 3 }, (_, i) => `${images.url}/sized/5000/t${i}`)).then(() => undefined, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
      if (!error) throw new Error('the call was not refused');
      expect(error).to.be.instanceOf(OpenAI.BadRequestError);
      expect(error.error).to.deep.include({ code: 'invalid_value' });
      expect(error.message).to.match(/more than 12000 bytes together/);
      expect(upstream.received).to.have.length(0);
    });
  });

  it('a redirect to an allowed host is followed', async () => {
    await ask('open-model', `${images.url}/hop`);
    expect(upstream.last().body!.contents[0].parts[1].inlineData.data).to.equal(PNG.toString('base64'));
    expect(images.hits).to.deep.equal(['/hop', '/cat.png']);
  });

  it('without the allow-list a loopback URL is refused: 400 invalid_value naming the part, nothing fetched', async () => {
    const error = await refused('closed-model', `${images.url}/cat.png`);
    expect(error).to.deep.include({ type: 'invalid_request_error', code: 'invalid_value', param: 'messages[0].content[1].image_url.url' });
    expect(error.message).to.match(/loopback address/);
    expect(error.message).not.to.include('127.0.0.1');
    expect(images.hits).to.deep.equal([]);
  });

  it('a Responses client is told the field it sent (input[1].content[1].image_url), whatever instructions come before it', async () => {
    const error = (await openai.responses
      .create({
        model: 'closed-model',
        instructions: 'be brief',
        input: [
          { role: 'user', content: 'hello' },
          { role: 'user', content: [{ type: 'input_text', text: 'what is this?' }, { type: 'input_image', image_url: `${images.url}/cat.png`, detail: 'auto' }] },
        ],
      })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.error as Json).to.deep.include({ code: 'invalid_value', param: 'input[1].content[1].image_url' });
    expect(images.hits).to.deep.equal([]);
  });

  it("an image a tool returned (a function_call_output's own parts) is named where the client sent it: input[2].output[1].image_url", async () => {
    const error = (await openai.responses
      .create({
        model: 'closed-model',
        instructions: 'be brief',
        input: [
          { role: 'user', content: 'look at the picture' },
          { type: 'function_call', call_id: 'c1', name: 'snap', arguments: '{}' },
          { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'here' }, { type: 'input_image', image_url: `${images.url}/cat.png`, detail: 'auto' }] },
        ],
      })
      .catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.error as Json).to.deep.include({ code: 'invalid_value', param: 'input[2].output[1].image_url' });
    expect(images.hits).to.deep.equal([]);
  });

  it('a redirect to a host the allow-list does not name (localhost) is re-checked and refused', async () => {
    const error = await refused('open-model', `${images.url}/to-localhost`);
    expect(error.message).to.match(/loopback address/);
    expect(images.hits).to.deep.equal(['/to-localhost']);
  });

  it('a redirect to a private address is refused', async () => {
    const error = await refused('open-model', `${images.url}/to-private`);
    expect(error.message).to.match(/private address/);
  });

  it('a redirect to the metadata address is refused, allow-list or not', async () => {
    const error = await refused('open-model', `${images.url}/to-metadata`);
    expect(error.message).to.match(/metadata address/);
  });

  it('too many redirects are refused', async () => {
    const error = await refused('open-model', `${images.url}/loop`);
    expect(error.message).to.match(/redirected more than 2 times/);
  });

  it('an image larger than maxBytes is refused, streamed or declared', async () => {
    for (const path of ['/big', '/big-declared']) {
      const error = await refused('open-model', `${images.url}${path}`);
      expect(error.message).to.match(new RegExp(`larger than ${MAX_BYTES} bytes`));
    }
  });

  it('a URL that does not finish within timeoutMs is refused', async () => {
    const started = Date.now();
    const error = await refused('open-model', `${images.url}/slow`);
    expect(error.message).to.match(/did not answer within 800 ms/);
    expect(Date.now() - started).to.be.lessThan(5000);
  });

  it('a URL that is not an image, or not http(s), is refused', async () => {
    expect((await refused('open-model', `${images.url}/page`)).message).to.match(/not point to an image \(content type text\/html\)/);
    expect((await refused('open-model', `${images.url}/missing.png`)).message).to.match(/HTTP status 404/);
    // Not http(s): refused by validation, whichever back end the model has, before any is called.
    for (const url of ['file:///etc/passwd', 'ftp://example.com/a.png', 'gopher://127.0.0.1/x']) {
      const error = await refused('open-model', url);
      expect(error, url).to.deep.include({ param: 'messages[0].content[1].image_url.url', code: 'invalid_value' });
    }
    const anthropic = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    try {
      await anthropic.messages.create({
        model: 'open-model',
        max_tokens: 20,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'file:///etc/passwd' } }] }],
      });
      expect.fail('not refused');
    } catch (error) {
      expect(error).to.be.instanceOf(Anthropic.BadRequestError);
      expect(JSON.stringify((error as InstanceType<typeof Anthropic.BadRequestError>).error)).to.match(/http\(s\) URL/);
    }
    expect(upstream.received).to.have.length(0);
  });

  it('an Anthropic client\'s URL image source and a Gemini client\'s http fileData are fetched the same way', async () => {
    const anthropic = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    await anthropic.messages.create({
      model: 'open-model',
      max_tokens: 20,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: `${images.url}/cat.png` } }, { type: 'text', text: 'describe' }] }],
    });
    expect(upstream.last().body!.contents[0].parts[0]).to.deep.equal({ inlineData: { mimeType: 'image/png', data: PNG.toString('base64') } });

    const ai = new GoogleGenAI({ apiKey: CLIENT_KEY, httpOptions: { baseUrl: gw.url } });
    await ai.models.generateContent({
      model: 'open-model',
      contents: [{ role: 'user', parts: [{ fileData: { mimeType: 'image/png', fileUri: `${images.url}/cat.png` } }, { text: 'and this?' }] }],
    });
    expect(upstream.last().body!.contents[0].parts[0]).to.deep.equal({ inlineData: { mimeType: 'image/png', data: PNG.toString('base64') } });

    // A YouTube video, as Google's guide gives it (no MIME type): Google reads it itself, the gateway fetches nothing.
    const video = { fileData: { fileUri: 'https://www.youtube.com/watch?v=9hE5-98ZeCg' } };
    await ai.models.generateContent({ model: 'open-model', contents: [{ role: 'user', parts: [{ text: 'summarise' }, video] }] });
    expect(upstream.last().body!.contents[0].parts[1]).to.deep.equal(video);

    // An image uploaded with the Files API: Google reads it with the gateway's key; the gateway fetches nothing.
    const uploaded = { fileData: { mimeType: 'image/png', fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/abc123' } };
    await ai.models.generateContent({ model: 'open-model', contents: [{ role: 'user', parts: [{ text: 'describe' }, uploaded] }] });
    expect(upstream.last().body!.contents[0].parts[1]).to.deep.equal(uploaded);

    // Refused for a Claude-style client in its own error shape, naming the field it sent: its
    // system prompt and tool results are other messages in the canonical request.
    try {
      await anthropic.messages.create({
        model: 'closed-model',
        max_tokens: 20,
        system: 'be brief',
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'w', input: {} }, { type: 'tool_use', id: 'toolu_2', name: 'w', input: {} }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'toolu_1', content: 'sun' },
              { type: 'tool_result', tool_use_id: 'toolu_2', content: [{ type: 'text', text: 'rain' }] },
              { type: 'image', source: { type: 'url', url: `${images.url}/cat.png` } },
            ],
          },
        ],
        tools: [{ name: 'w', input_schema: { type: 'object' } }],
      });
      expect.fail('not refused');
    } catch (error) {
      expect(error).to.be.instanceOf(Anthropic.BadRequestError);
      const body = (error as InstanceType<typeof Anthropic.BadRequestError>).error as { type: string; error: { message: string } };
      expect(body).to.deep.include({ type: 'error' });
      expect(body.error.message).to.match(/loopback address/);
      expect(body.error.message).to.include("'messages[2].content[2].source.url'");
    }
    // An image inside a tool result: its place in the tool result.
    const inResult = (await anthropic.messages
      .create({
        model: 'closed-model',
        max_tokens: 20,
        messages: [
          { role: 'user', content: 'weather?' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'w', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'map:' }, { type: 'image', source: { type: 'url', url: `${images.url}/cat.png` } }] }] },
        ],
        tools: [{ name: 'w', input_schema: { type: 'object' } }],
      })
      .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.BadRequestError>;
    expect(inResult).to.be.instanceOf(Anthropic.BadRequestError);
    expect((inResult.error as { error: { message: string } }).error.message).to.include("'messages[2].content[0].content[1].source.url'");
  });
});
