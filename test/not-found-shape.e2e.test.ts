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
plugins: [request-log, routing, openai-chat, anthropic-messages, gemini]
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
    const chat = await ask('/v1/chat/completions?x=1');
    expect(bodyOf(chat)).to.have.nested.property('error.code', 'body_too_large');
    // Logged with the method and path the head gave (it was read), as any other request is.
    await gw.gateway.stores.flush();
    const rows = (await gw.gateway.stores.logs.query({ limit: 50 })).entries.filter((e) => e.status === 413);
    expect(rows.map((e) => `${e.method} ${e.path}`).sort()).to.deep.equal(['POST /v1/chat/completions', 'POST /v1/messages', 'POST /v1beta/models/mock-chat:generateContent']);
  });

  /**
   * Raw bytes on a new connection, and the answer the gateway gives before it closes it. Ended
   * (half-closed) after them, or only written: then the client still waits, and only the
   * gateway's answer and close end this.
   */
  const sendRaw = (raw: string, end = true) =>
    new Promise<{ head: string; body: Record<string, unknown> }>((resolve, reject) => {
      const { port, hostname } = new URL(gw.url);
      const socket = net.connect(Number(port), hostname, () => (end ? socket.end(raw) : socket.write(raw)));
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

  it("a request node cannot parse (a broken Content-Length) or one without Host is answered in its path's shape too, with its request id", async () => {
    const claude = await sendRaw('POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(claude.head).to.match(/^HTTP\/1\.1 400 /);
    expect(claude.body).to.include({ type: 'error' });
    expect(claude.head).to.match(/\r\nrequest-id: req_/);
    const broken = await sendRaw('POST /v1beta/models/mock-chat:generateContent HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(broken.head).to.match(/^HTTP\/1\.1 400 /);
    expect(broken.body).to.have.nested.property('error.status', 'INVALID_ARGUMENT');
    const chat = await sendRaw('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}');
    expect(chat.body).to.have.nested.property('error.code', 'malformed_http');
    for (const [path, check] of [
      ['/v1/messages', (body: Record<string, unknown>) => expect(body).to.include({ type: 'error' })],
      ['/v1/chat/completions', (body: Record<string, unknown>) => expect(body).to.have.nested.property('error.message').that.includes('Host')],
    ] as const) {
      const noHost = await sendRaw(`POST ${path} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`);
      expect(noHost.head).to.match(/^HTTP\/1\.1 400 /);
      expect(noHost.head).to.match(/\r\nx-request-id: req_/i);
      expect(noHost.head).to.match(/\r\nx-switchyard-overhead-ms: /i);
      check(noHost.body);
    }
  });

  it('CONNECT (a proxy tunnel, which the gateway is not) is a JSON 404 with its id, and logged (node closed the connection without a word)', async () => {
    const connect = await sendRaw('CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n', false);
    expect(connect.head).to.match(/^HTTP\/1\.1 404 /);
    expect(connect.head).to.match(/\r\nconnection: close/i);
    const id = /\r\nx-request-id: (req_\w+)/i.exec(connect.head)?.[1];
    expect(id).to.be.a('string');
    expect(connect.body).to.have.nested.property('error.code', 'not_found');
    const logged = async () => (await gw.gateway.stores.logs.query({ limit: 50 })).entries.some((e) => e.requestId === id && e.method === 'CONNECT' && e.status === 404);
    const deadline = Date.now() + 3000;
    while (!(await logged()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await logged(), 'the request-log row').to.equal(true);
  });

  it('a client that gives up its upload after an early answer (it ends its side with the body unsent) gets no second, made-up answer, and logs no second row', async () => {
    await gw.gateway.stores.flush();
    const before = (await gw.gateway.stores.logs.query({ limit: 1000 })).entries.length;
    const { port, hostname } = new URL(gw.url);
    const received = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () => {
        socket.write('POST /v1/nonexistent HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":');
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        // The 404 came: the client gives up the rest of its body.
        if (text.includes('\r\n\r\n') && text.includes('}')) socket.end();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(received.match(/HTTP\/1\.1 /g)).to.have.length(1);
    expect(received).to.match(/^HTTP\/1\.1 404 /);
    await gw.gateway.stores.flush();
    const rows = (await gw.gateway.stores.logs.query({ limit: 1000 })).entries;
    expect(rows.length - before).to.equal(1);
    // The newest row is the request's own 404.
    expect(rows[0]).to.include({ status: 404, path: '/v1/nonexistent' });
  });

  it('a body node stops parsing midway (a chunk size that is not hex, a Transfer-Encoding it refuses) is a 400 malformed_http in its path\'s shape, and the connection closes', async () => {
    const chunked = (path: string, headers: string, te: string, body: string) =>
      sendRaw(`POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Transfer-Encoding: ${te}\r\n\r\n${body}`, false);
    const json = 'Content-Type: application/json\r\n';

    const chat = await chunked('/v1/chat/completions', json, 'chunked', 'zz\r\n{"model":"mock-chat"}\r\n0\r\n\r\n');
    expect(chat.head).to.match(/^HTTP\/1\.1 400 /);
    expect(chat.head).to.match(/\r\nconnection: close/i);
    expect(chat.head).to.match(/\r\nx-request-id: req_/i);
    expect(chat.body).to.have.nested.property('error.code', 'malformed_http');

    const refused = await chunked('/v1/chat/completions', json, 'xchunked', '5\r\nhello\r\n0\r\n\r\n');
    expect(refused.body).to.have.nested.property('error.code', 'malformed_http');
    // Another coding before chunked: node read the chunks and left the coding undone (a plain body was served).
    const coded = await chunked('/v1/chat/completions', json, 'gzip, chunked', '2\r\n{}\r\n0\r\n\r\n');
    expect(coded.head).to.match(/^HTTP\/1\.1 400 /);
    expect(coded.head).to.match(/\r\nconnection: close/i);
    expect(coded.body).to.have.nested.property('error.code', 'malformed_http');

    const gemini = await chunked('/v1beta/models/mock-chat:generateContent', json, 'chunked', '2\r\n{}\r\nqq\r\n');
    expect(gemini.head).to.match(/^HTTP\/1\.1 400 /);
    expect(gemini.body).to.have.nested.property('error.status', 'INVALID_ARGUMENT');

    const claude = await chunked('/v1/messages', `${json}anthropic-version: 2023-06-01\r\n`, 'chunked', 'zz\r\n{}\r\n');
    expect(claude.head).to.match(/^HTTP\/1\.1 400 /);
    expect(claude.body).to.include({ type: 'error' });
    expect(claude.body).to.have.nested.property('error.type', 'invalid_request_error');

    // A form, read by another reader.
    const form = await chunked('/v1/audio/transcriptions', 'Content-Type: multipart/form-data; boundary=XX\r\n', 'chunked', '6\r\n--XX\r\n\r\nqq\r\n');
    expect(form.head).to.match(/^HTTP\/1\.1 400 /);
    expect(form.body).to.have.nested.property('error.code', 'malformed_http');
  });
});
