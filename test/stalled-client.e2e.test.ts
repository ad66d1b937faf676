import { expect } from 'chai';
import net from 'node:net';
import OpenAI from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { drainedOrClosed } from './fakes/server.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-stalled-client-key-001';

/**
 * A client that asks for a stream and then reads nothing, keeping its connection open (a leaked
 * response object): once it has read nothing for server.writeTimeoutMs while the gateway waits
 * to write to it, its connection is closed, and its concurrency slot is free again.
 */
describe('a client that stops reading a stream', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, writeTimeoutMs: 800 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, openai-chat]
auth:
  keys: [{ name: one, key: ${KEY}, maxConcurrent: 1 }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [big], timeouts: { idleMs: 800, totalMs: 1500 } }
`);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  it('is let go after writeTimeoutMs of not reading: its slot is free for the next call, and it is logged as gone', async () => {
    // A back end that answers fast and long: far more than the sockets on the way can hold.
    upstream.handle('POST /v1/chat/completions', async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const piece = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'big', choices: [{ index: 0, delta: { content: 'lorem ipsum dolor sit amet '.repeat(150) }, finish_reason: null }] })}\n\n`;
      for (let i = 0; i < 4000 && !res.destroyed; i++) {
        if (!res.write(piece)) {
          await drainedOrClosed(res);
        }
      }
      res.end('data: [DONE]\n\n');
    });
    const socket = net.connect((gw.gateway.server!.address() as net.AddressInfo).port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const body = JSON.stringify({ model: 'big', stream: true, messages: [{ role: 'user', content: 'talk' }] });
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    socket.pause(); // reads nothing, and keeps the connection open
    socket.on('error', () => undefined);
    try {
      const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      // While the stalled stream holds the key's one slot, a second call is refused ...
      await eventually(() => upstream.received.length === 1, 5000, 'the stalled call to reach the back end');
      const refused = await client.chat.completions.create({ model: 'big', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(OpenAI.APIError);
      expect((refused as InstanceType<typeof OpenAI.APIError>).status).to.equal(429);
      // ... until the gateway lets the stalled client go (the client, paused, does not see it).
      await eventually(() => gw.logs.some((l) => l.message === 'request' && l.status === 499), 10_000, 'the gateway to let the stalled stream go');
      upstream.reset();
      const stream = await client.chat.completions.create({ model: 'big', stream: true, messages: [{ role: 'user', content: 'x' }] });
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta.content) break; // the slot was free: the call began
      }
    } finally {
      socket.destroy();
    }
  });
});

/**
 * A client that reads a long stream, but slowly (never stopping long enough to be let go): the
 * attempt's total timeout still ends the stream, but that is the client's doing, not the back
 * end's. Before, each such call counted as a failure of a healthy back end, and a few opened its
 * circuit for every other key.
 */
describe('a client that reads a long stream slowly, past the total timeout', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  const ADMIN = 'admin-slow-reader-0123456789abcdef';
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, writeTimeoutMs: 5000 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, { name: routing, options: { failureThreshold: 2 } }, admin, openai-chat]
auth:
  adminKey: ${ADMIN}
  keys: [{ name: slow, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [big], timeouts: { idleMs: 1000, totalMs: 1200 } }
  - { id: drips, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [drip], timeouts: { idleMs: 1000, totalMs: 1200 } }
`);
    // `big`: as fast as the sockets take it, for far longer than the total timeout at a slow
    // reader's pace. `drip`: a chunk every 300 ms (never idle for idleMs).
    upstream.handle('POST /v1/chat/completions', async (_req, res, body) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if ((body as { model?: string }).model === 'drip') {
        const drop = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'drip', choices: [{ index: 0, delta: { content: 'drop ' }, finish_reason: null }] })}\n\n`;
        for (let i = 0; i < 40 && !res.destroyed; i++) {
          res.write(drop);
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        return void res.end('data: [DONE]\n\n');
      }
      const piece = `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'big', choices: [{ index: 0, delta: { content: 'lorem ipsum dolor sit amet '.repeat(150) }, finish_reason: null }] })}\n\n`;
      for (let i = 0; i < 4000 && !res.destroyed; i++) {
        if (!res.write(piece)) {
          await drainedOrClosed(res);
        }
      }
      res.end('data: [DONE]\n\n');
    });
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  /** A stream read a piece at a time, 50 ms apart, to its end; what its last event said. */
  const readSlowly = async (): Promise<string> => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'big', stream: true, messages: [{ role: 'user', content: 'talk' }] }),
    });
    const reader = response.body!.getReader();
    let tail = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return tail;
      tail = (tail + Buffer.from(value).toString('utf8')).slice(-2000);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  it("a back end that drips its stream past the total timeout to a quick client is the back end's failure: its circuit opens", async () => {
    // Read at once by the client.
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'drip', stream: true, messages: [{ role: 'user', content: 'talk' }] }),
      });
      const text = await response.text();
      expect(text).to.include('"code":"upstream_timeout"').and.not.include('waiting for the client');
    }
    const view = await fetch(`${gw.url}/admin/providers`, { headers: { authorization: `Bearer ${ADMIN}` } }).then(async (r) => (await r.json()) as { data: Array<{ id: string; targets: Array<{ model: string; state: string; consecutive_failures: number }> }> });
    expect(view.data.find((p) => p.id === 'drips')!.targets.find((t) => t.model === 'drip')).to.include({ consecutive_failures: 2 }).and.not.include({ state: 'healthy' });
  });

  it("ends at the total timeout, told so, and the back end's health is untouched (its circuit stays closed)", async () => {
    // Two: the failures that open this circuit (failureThreshold 2), were they counted.
    for (let i = 0; i < 2; i++) {
      const tail = await readSlowly();
      expect(tail).to.include('"code":"upstream_timeout"').and.include('waiting for the client to read the answer');
    }
    const response = await fetch(`${gw.url}/admin/providers`, { headers: { authorization: `Bearer ${ADMIN}` } });
    const view = (await response.json()) as { data: Array<{ id: string; targets: Array<{ model: string; state: string; consecutive_failures: number }> }> };
    const target = view.data.find((p) => p.id === 'up')!.targets.find((t) => t.model === 'big')!;
    expect(target).to.include({ state: 'healthy', consecutive_failures: 0 });
  });
});
