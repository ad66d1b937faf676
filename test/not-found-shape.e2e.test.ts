import { expect } from 'chai';
import net from 'node:net';
import { startGateway, type RunningGateway } from './support/gateway.js';

describe('an unknown path answers 404 in the shape of the closest format', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ':memory:' }
plugins: [routing, openai-chat, anthropic-messages, gemini]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(() => gw.stop());

  const get = async (path: string) => {
    const response = await fetch(`${gw.url}${path}`);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  };

  it('Gemini paths get Gemini errors, Messages paths Anthropic ones, anything else the OpenAI shape', async () => {
    const gemini = await get('/v1beta/models/mock-chat:unknownMethod');
    expect(gemini.status).to.equal(404);
    expect(gemini.body).to.have.nested.property('error.status', 'NOT_FOUND');
    expect(gemini.body).to.have.nested.property('error.code', 404);

    const messages = await get('/v1/messages/batches');
    expect(messages.status).to.equal(404);
    expect(messages.body).to.include({ type: 'error' });
    expect(messages.body).to.have.nested.property('error.type', 'not_found_error');

    for (const path of ['/v1/unknown', '/nothing/here']) {
      const other = await get(path);
      expect(other.status).to.equal(404);
      expect(other.body).to.have.nested.property('error.code', 'not_found');
      expect(other.body).to.have.nested.property('error.type');
    }
  });

  it('a body refused before it is sent (Expect: 100-continue, over the limit) is a 413 in the shape of its path too', async () => {
    const { port, hostname } = new URL(gw.url);
    const ask = (path: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname, () => {
          socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\nExpect: 100-continue\r\n\r\n`);
        });
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString('utf8')));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
      });
    const bodyOf = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
    const gemini = await ask('/v1beta/models/mock-chat:generateContent');
    expect(gemini).to.match(/^HTTP\/1\.1 413 /);
    expect(bodyOf(gemini)).to.have.nested.property('error.status', 'INVALID_ARGUMENT');
    const messages = await ask('/v1/messages');
    expect(bodyOf(messages)).to.include({ type: 'error' });
    const chat = await ask('/v1/chat/completions');
    expect(bodyOf(chat)).to.have.nested.property('error.code', 'body_too_large');
  });

  it("a request node cannot parse (a broken Content-Length) or one without Host is answered in its path's shape too, with its request id", async () => {
    const { port, hostname } = new URL(gw.url);
    const send = (raw: string) =>
      new Promise<{ head: string; body: Record<string, unknown> }>((resolve, reject) => {
        const socket = net.connect(Number(port), hostname, () => socket.end(raw));
        let text = '';
        socket.on('data', (chunk) => (text += chunk.toString('utf8')));
        socket.on('close', () => {
          const at = text.indexOf('\r\n\r\n');
          try {
            resolve({ head: text.slice(0, at), body: JSON.parse(text.slice(at + 4)) as Record<string, unknown> });
          } catch (error) {
            reject(new Error(`not a JSON answer: ${JSON.stringify(text)} (${String(error)})`));
          }
        });
        socket.on('error', reject);
      });
    const claude = await send('POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(claude.head).to.match(/^HTTP\/1\.1 400 /);
    expect(claude.body).to.include({ type: 'error' });
    expect(claude.head).to.match(/\r\nrequest-id: req_/);
    const broken = await send('POST /v1beta/models/mock-chat:generateContent HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(broken.head).to.match(/^HTTP\/1\.1 400 /);
    expect(broken.body).to.have.nested.property('error.status', 'INVALID_ARGUMENT');
    const chat = await send('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(chat.body).to.have.nested.property('error.code', 'malformed_http');
    for (const [path, check] of [
      ['/v1/messages', (body: Record<string, unknown>) => expect(body).to.include({ type: 'error' })],
      ['/v1/chat/completions', (body: Record<string, unknown>) => expect(body).to.have.nested.property('error.message').that.includes('Host')],
    ] as const) {
      const noHost = await send(`POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      expect(noHost.head).to.match(/^HTTP\/1\.1 400 /);
      expect(noHost.head).to.match(/\r\nx-request-id: req_/i);
      expect(noHost.head).to.match(/\r\nx-switchyard-overhead-ms: /i);
      check(noHost.body);
    }
  });
});
