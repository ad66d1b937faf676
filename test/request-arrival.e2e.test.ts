import { expect } from 'chai';
import net from 'node:net';
import { pollUntil } from './support/calls.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

/**
 * A call is served once its body is in (see handle() in core/gateway.ts: it waits for the check
 * phase of the event loop when the body was not read with the headers). Clients that leave in
 * that wait, and bodies that come later, are still each answered or logged once, and a stop
 * waits for them rather than losing them or hanging on them.
 */
describe('a request between its headers and its body', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  const chatBody = JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello there' }] });
  const head = (length: number) => `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 8000 }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ':memory:' }
plugins: [request-log, routing, metering, openai-chat]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(() => gw?.stop());

  const connect = () =>
    new Promise<net.Socket>((resolve, reject) => {
      const { port, hostname } = new URL(gw.url);
      const socket = net.connect(Number(port), hostname, () => resolve(socket));
      socket.on('error', reject);
    });

  /** The text of the first answer on `socket` once its JSON body has come. */
  const jsonAnswer = (socket: net.Socket) =>
    new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('utf8');
        if (/\r\n\r\n[\s\S]*\}$/.test(text)) resolve(text);
      });
    });

  it("headers that do not arrive in time (node's headersTimeout) are answered 408 headers_timeout, not as malformed HTTP", async () => {
    const server = gw.gateway.server!;
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const socket = await connect();
    const answer = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString('utf8')));
      socket.on('close', () => resolve(text));
    });
    socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
    // What node does once headersTimeout passes (its check runs every 30 s: not waited for here).
    server.emit('clientError', Object.assign(new Error('Request Timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), await accepted);
    const text = await answer;
    expect(text).to.match(/^HTTP\/1\.1 408 /);
    expect(text).to.contain('"code":"headers_timeout"');
  });

  it('a request with more than 2,000 headers (well under the size limit) is read whole: its length after them is not lost', async () => {
    const socket = await connect();
    const answer = jsonAnswer(socket);
    const many = Array.from({ length: 2100 }, (_, i) => `X-H${i}: 1\r\n`).join('');
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${many}Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(chatBody)}\r\n\r\n${chatBody}`);
    const text = await answer;
    socket.destroy();
    expect(text).to.match(/^HTTP\/1\.1 200 /);
    expect(text).to.contain('"chat.completion"');
  });

  it('a body that comes in a later packet is read, and the call answered', async () => {
    const socket = await connect();
    const answer = jsonAnswer(socket);
    socket.write(head(Buffer.byteLength(chatBody)));
    await new Promise((resolve) => setTimeout(resolve, 30));
    socket.write(chatBody);
    const text = await answer;
    socket.destroy();
    expect(text).to.match(/^HTTP\/1\.1 200 /);
    expect(text).to.contain('"chat.completion"');
  });

  it('clients that send a whole request and reset the connection at once: each is logged once as gone, and a stop does not wait for them', async () => {
    const before = (await gw.gateway.stores.logs.query({ limit: 1000 })).entries.length;
    const tries = 40;
    for (let i = 0; i < tries; i++) {
      const socket = await connect();
      socket.write(head(Buffer.byteLength(chatBody)) + chatBody);
      socket.resetAndDestroy();
    }
    // And some that leave with their body only half sent.
    for (let i = 0; i < 10; i++) {
      const socket = await connect();
      socket.write(head(Buffer.byteLength(chatBody)) + chatBody.slice(0, 10));
      socket.resetAndDestroy();
    }
    // The log is written in batches: wait (polling, up to 5 s) until a client that left is in it.
    const newRows = async () => {
      const all = (await gw.gateway.stores.logs.query({ limit: 1000 })).entries;
      return all.slice(0, all.length - before);
    };
    const rows = (await pollUntil(newRows, (found) => found.some((r) => r.status === 499), 5000)).at(-1)!;
    // A reset can beat the parser to the request (no request, no row); a request that was read is logged once.
    expect(rows.length).to.be.at.most(tries + 10);
    expect(new Set(rows.map((r) => r.requestId)).size).to.equal(rows.length);
    // A request that was read is logged as itself (not also as a malformed one when its connection breaks).
    for (const row of rows) expect(row.path, JSON.stringify(row)).to.equal('/v1/chat/completions');
    // Those that left with half a body never got an answer: the client is gone.
    expect(rows.filter((r) => r.status === 499)).to.have.length.at.least(1);
    for (const row of rows) expect(row.status, JSON.stringify(row)).to.be.oneOf([499, 200]);
    const started = Date.now();
    await gw.stop();
    expect(Date.now() - started).to.be.below(2000);
  });
});
