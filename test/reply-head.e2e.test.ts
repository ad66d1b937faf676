import http from 'node:http';
import net from 'node:net';
import { expect } from 'chai';
import { ReplyHead } from '../core/pipeline.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-head-key-000000000001';

interface RawAnswer {
  status: number;
  /** Header lines as they came on the wire, names in their case. */
  raw: string[];
  body: string;
}

/** One request over a fresh connection; the head as node read it off the wire. */
function call(url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}${path}`, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, raw: res.rawHeaders, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Each header name (lower-cased) with how often the head gives it. */
function names(raw: string[]): Map<string, number> {
  const seen = new Map<string, number>();
  for (let i = 0; i < raw.length; i += 2) seen.set(raw[i]!.toLowerCase(), (seen.get(raw[i]!.toLowerCase()) ?? 0) + 1);
  return seen;
}

function header(raw: string[], name: string): string | undefined {
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) return raw[i + 1];
  return undefined;
}

describe('the head of every kind of answer (written in one writeHead)', function () {
  this.timeout(30_000);
  let gw: RunningGateway;
  const auth = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const chat = (extra: Record<string, unknown> = {}) => JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello there' }], ...extra });

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: head, key: ${KEY}, rpm: 1000, tpm: 1000000 }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1, output: 2 }
`);
  });
  after(async () => {
    await gw?.stop();
  });

  const answers: Array<[string, () => Promise<RawAnswer>, number]> = [
    ['a chat answer', () => call(gw.url, 'POST', '/v1/chat/completions', auth, chat()), 200],
    ['a streamed chat answer', () => call(gw.url, 'POST', '/v1/chat/completions', auth, chat({ stream: true })), 200],
    ['a messages answer (translated)', () => call(gw.url, 'POST', '/v1/messages', { 'x-api-key': KEY, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, JSON.stringify({ model: 'mock-chat', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] })), 200],
    ['a 400 from validation', () => call(gw.url, 'POST', '/v1/chat/completions', auth, JSON.stringify({ model: 'mock-chat', messages: 'nope' })), 400],
    ['a 401 without a key', () => call(gw.url, 'POST', '/v1/chat/completions', { 'content-type': 'application/json' }, chat()), 401],
    ['a 404 for an unknown model', () => call(gw.url, 'POST', '/v1/chat/completions', auth, chat({ model: 'nobody' })), 404],
    ['a 404 for an unknown path (through the router)', () => call(gw.url, 'GET', '/v1/nowhere', auth), 404],
    ['a listing (a handler route)', () => call(gw.url, 'GET', '/v1/models', auth), 200],
    ['/healthz', () => call(gw.url, 'GET', '/healthz', {}), 200],
    ['/readyz', () => call(gw.url, 'GET', '/readyz', {}), 200],
  ];

  for (const [what, send, status] of answers) {
    it(`${what}: its status, one x-request-id, the gateway's overhead, no header twice`, async () => {
      const answer = await send();
      expect(answer.status).to.equal(status);
      const counts = names(answer.raw);
      for (const [name, count] of counts) expect(count, `${name} given ${count} times`).to.equal(1);
      expect(header(answer.raw, 'x-request-id')).to.match(/^req_[0-9a-f]{32}$/);
      expect(header(answer.raw, 'x-switchyard-overhead-ms')).to.match(/^\d+\.\d{3}$/);
      const type = header(answer.raw, 'content-type')!;
      expect(type).to.be.a('string');
      if (type.startsWith('text/event-stream')) {
        expect(header(answer.raw, 'cache-control')).to.equal('no-cache');
        expect(answer.body).to.contain('data: [DONE]');
      } else {
        expect(Number(header(answer.raw, 'content-length'))).to.equal(Buffer.byteLength(answer.body));
        expect(() => JSON.parse(answer.body)).to.not.throw();
      }
    });
  }

  it("a metered call's head carries its cost, its rate-limit headers and the gateway's overhead", async () => {
    const answer = await call(gw.url, 'POST', '/v1/chat/completions', auth, chat());
    expect(Number(header(answer.raw, 'x-switchyard-cost'))).to.be.greaterThan(0);
    expect(header(answer.raw, 'x-ratelimit-limit-requests')).to.equal('1000');
    expect(Number(header(answer.raw, 'x-ratelimit-remaining-requests'))).to.be.below(1000);
    expect(Number(header(answer.raw, 'x-switchyard-overhead-ms'))).to.be.at.least(0);
  });

  // Answered before any route: node could not parse the request, or its announced body is too large to ask for.
  const rawAnswers: Array<[string, string, number]> = [
    ['a request node cannot parse', 'GARBAGE\r\n\r\n', 400],
    [
      'Expect: 100-continue with a body over the limit',
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${KEY}\r\ncontent-type: application/json\r\ncontent-length: 999999999999\r\nexpect: 100-continue\r\n\r\n`,
      413,
    ],
    ['an Expect other than 100-continue', 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\nexpect: something-else\r\n\r\n{}', 417],
  ];
  for (const [what, request, status] of rawAnswers) {
    it(`${what}: a JSON ${status} with its x-request-id and the gateway's overhead`, async () => {
      const { port } = new URL(gw.url);
      const text = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request));
        let got = '';
        socket.setEncoding('utf8');
        socket.on('data', (chunk: string) => (got += chunk));
        socket.on('end', () => resolve(got));
        socket.on('error', reject);
      });
      const [head, body] = text.split('\r\n\r\n', 2) as [string, string];
      const lines = head.split('\r\n');
      expect(lines[0]).to.equal(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`);
      const raw = lines.slice(1).flatMap((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()]);
      expect(header(raw, 'x-request-id')).to.match(/^req_[0-9a-f]{32}$/);
      expect(header(raw, 'x-switchyard-overhead-ms')).to.match(/^\d+\.\d{3}$/);
      expect(JSON.parse(body)).to.have.property('error');
    });
  }

  it('ReplyHead: the request id first, a name set again replaces its value in place, names from plugins lower-cased', () => {
    const head = new ReplyHead('req_1');
    head.set('x-a', '1');
    head.setAll({ 'Content-Type': 'text/plain', 'X-A': '2' });
    head.set('content-type', 'application/json');
    expect(head.list).to.deep.equal(['x-request-id', 'req_1', 'x-a', '2', 'content-type', 'application/json']);
    expect(head.get('x-a')).to.equal('2');
    head.remove('x-a');
    expect(head.list).to.deep.equal(['x-request-id', 'req_1', 'content-type', 'application/json']);
    expect(head.get('x-a')).to.equal(undefined);
  });
});
