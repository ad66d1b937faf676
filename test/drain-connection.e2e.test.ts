import net from 'node:net';
import http from 'node:http';
import { expect } from 'chai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-drain-client-000000001';

/** A raw connection to the gateway at `url`, once connected (`allowHalfOpen`: it keeps its side open after the gateway ends its own). */
async function rawSocket(url: string, allowHalfOpen = false): Promise<net.Socket> {
  const socket = net.connect({ port: Number(new URL(url).port), host: '127.0.0.1', allowHalfOpen });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return socket;
}

interface Outcome {
  status?: number;
  connection?: string;
  error?: string;
}

/** A POST on `agent`, settled with its status and connection header, or the socket error it met. */
function post(url: string, agent: http.Agent, body: unknown): Promise<Outcome> {
  return new Promise((resolve) => {
    const req = http.request(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, connection: String(res.headers.connection) }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.end(JSON.stringify(body));
  });
}

/**
 * A gateway that drains answers what it still has to with `connection: close`: a client that
 * reuses its kept-alive connection for the next request must find the gateway gone (refused, a
 * request it knows was not sent), not a connection reset under a request that may have run.
 */
describe('a draining gateway closes the connections of the answers still to come', function () {
  this.timeout(20_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway | undefined;

  before(async () => {
    await upstream.start();
    upstream.handle('POST /v1/chat/completions', async (_req, res, _body, fake) => {
      await fake.gate();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'late' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 10000 }
storage: { url: ':memory:' }
plugins: [auth, validation, routing, openai-chat]
auth:
  keys: [{ name: k, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [m] }
`);
  });
  after(async () => {
    upstream.release();
    await gw?.stop();
    await upstream.stop();
  });

  it('an answer that finishes during the drain says connection: close; the next request on that agent is refused, not reset', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }] };
      const first = post(gw!.url, agent, body);
      await eventually(() => upstream.received.length === 1, 5000, 'the first call at the back end');
      // Queued behind the first on the agent's one socket.
      const second = post(gw!.url, agent, body);
      const stopping = gw!.stop();
      upstream.release();
      expect(await first).to.deep.equal({ status: 200, connection: 'close' });
      expect(await second).to.deep.equal({ error: 'ECONNREFUSED' });
      await stopping;
      gw = undefined;
      expect(upstream.received).to.have.length(1);
    } finally {
      agent.destroy();
    }
  });
});

describe('a drain that runs out of time answers a request whose body is still coming', function () {
  this.timeout(20_000);

  it('503 gateway_shutdown in the client format, not a connection closed without a word', async () => {
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 300 }
storage: { url: ':memory:' }
plugins: [auth, validation, routing, openai-chat]
auth:
  keys: [{ name: k, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [m] }
`);
    const socket = await rawSocket(gw.url);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    try {
      // Ten bytes of a hundred, and no more.
      socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":"`);
      // Answered after the partial request arrived, on a later turn of the gateway's event loop: by
      // then that request is being served (waiting for the rest of its body).
      expect((await fetch(`${gw.url}/healthz`)).status).to.equal(200);
      await gw.stop();
      await closed;
    } finally {
      socket.destroy();
    }
    expect(text).to.match(/^HTTP\/1\.1 503 /);
    const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string; type: string } };
    expect(body.error.code).to.equal('gateway_shutdown');
  });
});

describe('connections a client drops or stops reading', function () {
  this.timeout(20_000);
  let gw: RunningGateway;
  // An answer far larger than the socket buffers take.
  const big = new FakeOpenAI();

  before(async () => {
    await big.start();
    const content = 'x'.repeat(16 * 1024 * 1024);
    big.handle('POST /v1/chat/completions', (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'big', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, writeTimeoutMs: 1000 }
logging: { level: info, format: json }
storage: { url: ':memory:' }
plugins: [auth, validation, routing, openai-chat]
auth:
  keys: [{ name: k, key: ${KEY} }]
providers:
  - { id: slow, type: mock, latencyMs: 400, models: [slow] }
  - { id: big, type: openai, baseUrl: ${big.url}/v1, apiKey: ${big.apiKey}, models: [quick] }
`);
  });
  after(async () => {
    await gw?.stop();
    await big.stop();
  });

  const chat = (model: string, content: string) => {
    const body = JSON.stringify({ model, messages: [{ role: 'user', content }] });
    return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  const accessLines = (model: string) => gw.logs.filter((l) => l.message === 'request' && l.model === model);

  it('requests pipelined behind another are logged and let go when the connection drops (they stayed in flight for good)', async () => {
    const socket = await rawSocket(gw.url);
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(chat('slow', 'first') + chat('slow', 'second') + chat('slow', 'third'));
    // Answered after the three arrived, on a later turn of the gateway's event loop.
    expect((await fetch(`${gw.url}/healthz`)).status).to.equal(200);
    socket.destroy();
    await closed;
    await eventually(() => accessLines('slow').length === 3, 5000, 'three access lines');
    expect(accessLines('slow').map((l) => l.status)).to.deep.equal([499, 499, 499]);
  });

  it('an answer written whole that its client never reads is let go after writeTimeoutMs, not held as long as the socket is', async () => {
    const socket = await rawSocket(gw.url);
    socket.pause();
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(chat('quick', 'a large answer, please'));
    const started = Date.now();
    await eventually(() => accessLines('quick').length === 1, 10_000, 'the access line');
    expect(Date.now() - started).to.be.lessThan(8000);
    expect(accessLines('quick')[0]!.status, JSON.stringify(accessLines('quick')[0])).to.equal(499);
    socket.destroy();
    await closed;
  });
});

describe('a CONNECT whose client keeps its side of the connection open', function () {
  this.timeout(20_000);

  it('is answered and its connection closed by the gateway, so a stop does not wait for it for good', async () => {
    const gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 1000 }
storage: { url: ':memory:' }
plugins: [auth, routing, openai-chat]
providers:
  - { id: mock, type: mock, models: [m] }
`);
    const socket = await rawSocket(gw.url, true);
    socket.on('error', () => undefined);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    try {
      socket.write('CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n');
      await new Promise<void>((resolve) => socket.once('end', () => resolve()));
      expect(text).to.match(/^HTTP\/1\.1 404 /);
      // The client never closes its side: node reads that socket no more, and a server that left
      // it open would wait for it in close() for good.
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([gw.stop().then(() => 'stopped'), new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still waiting'), 8000)))]);
      clearTimeout(timer);
      expect(outcome).to.equal('stopped');
    } finally {
      socket.destroy();
    }
  });
});
