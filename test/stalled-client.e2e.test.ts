import { expect } from 'chai';
import net from 'node:net';
import OpenAI from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
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
          await new Promise<void>((resolve) => {
            const done = () => {
              res.off('drain', done);
              res.off('close', done);
              resolve();
            };
            res.on('drain', done);
            res.on('close', done);
          });
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
