import net from 'node:net';
import { expect } from 'chai';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-continue-key-00000000001';
const ADMIN = 'admin-continue-key-0000000001';
const BROKE = 'sk-continue-broke-000000001';

/**
 * A client that asks `Expect: 100-continue` (curl for large uploads, .NET, Java): it sends the
 * head, then waits. What it reads before sending its body, and then the whole answer.
 */
class WaitingClient {
  private socket!: net.Socket;
  private got = '';
  private ended = false;
  private waiters: Array<() => void> = [];

  static async open(url: string): Promise<WaitingClient> {
    const client = new WaitingClient();
    const { port } = new URL(url);
    await new Promise<void>((resolve, reject) => {
      client.socket = net.connect(Number(port), '127.0.0.1', resolve);
      client.socket.once('error', reject);
    });
    client.socket.setEncoding('utf8');
    client.socket.on('data', (chunk: string) => {
      client.got += chunk;
      client.wake();
    });
    client.socket.on('end', () => {
      client.ended = true;
      client.wake();
    });
    client.socket.on('error', () => undefined);
    return client;
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  send(text: string | Buffer): void {
    this.socket.write(text);
  }

  /** What the server wrote, once it holds `until` (or the connection ended). */
  async read(until: (text: string) => boolean): Promise<string> {
    while (!until(this.got) && !this.ended) await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.got;
  }

  close(): void {
    this.socket.destroy();
  }
}

const finalAnswer = (text: string): boolean => /HTTP\/1\.1 [2-5]\d\d [^\r]*\r\n(?:.*\r\n)*?\r\n/.test(text) && /\r\n\r\n[\s\S]*\}\s*$/.test(text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, ''));

describe('Expect: 100-continue: the body is asked for only once the key and limits let the call in', function () {
  this.timeout(30_000);
  let gw: RunningGateway;

  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  adminKey: ${ADMIN}
  keys: [{ name: waiting, key: ${KEY}, rpm: 1000, tpm: 1000000 }, { name: broke, key: ${BROKE}, budget: 0 }]
providers:
  - { id: mock, type: mock, models: [mock-chat, mock-whisper] }
`);
  });
  after(async () => gw?.stop());

  const chat = JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hello there' }] });
  const head = (path: string, auth: string, length: number, type = 'application/json') =>
    `POST ${path} HTTP/1.1\r\nhost: x\r\n${auth}content-type: ${type}\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;

  it('a wrong key is refused (401) without a 100 Continue: the client never uploads its body', async () => {
    const client = await WaitingClient.open(gw.url);
    try {
      client.send(head('/v1/chat/completions', 'authorization: Bearer sk-not-a-key-000000000\r\n', 5_000_000));
      const text = await client.read((t) => /\r\n\r\n[\s\S]*\}/.test(t));
      expect(text.startsWith('HTTP/1.1 401 ')).to.equal(true, text.slice(0, 200));
      expect(text).not.to.include('100 Continue');
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code).to.equal('invalid_api_key');
      // Nothing more is expected of it: the connection ends with the refusal.
      await client.read(() => false);
    } finally {
      client.close();
    }
  });

  it('a key whose budget is spent (budget 0): 429 insufficient_quota without a 100 Continue', async () => {
    const client = await WaitingClient.open(gw.url);
    try {
      client.send(head('/v1/chat/completions', `authorization: Bearer ${BROKE}\r\n`, 5_000_000));
      const text = await client.read((t) => /\r\n\r\n[\s\S]*\}/.test(t));
      expect(text.startsWith('HTTP/1.1 429 ')).to.equal(true, text.slice(0, 200));
      expect(text).not.to.include('100 Continue');
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code).to.equal('insufficient_quota');
    } finally {
      client.close();
    }
  });

  it('no key at all: 401 without a 100 Continue', async () => {
    const client = await WaitingClient.open(gw.url);
    try {
      client.send(head('/v1/messages', '', 1_000));
      const text = await client.read((t) => /\r\n\r\n[\s\S]*\}/.test(t));
      expect(text.startsWith('HTTP/1.1 401 ')).to.equal(true, text.slice(0, 200));
      expect(text).not.to.include('100 Continue');
    } finally {
      client.close();
    }
  });

  it('a good key gets its 100 Continue, sends its body, and gets its answer', async () => {
    const client = await WaitingClient.open(gw.url);
    try {
      client.send(head('/v1/chat/completions', `authorization: Bearer ${KEY}\r\n`, Buffer.byteLength(chat)));
      const first = await client.read((t) => t.includes('\r\n\r\n'));
      expect(first).to.equal('HTTP/1.1 100 Continue\r\n\r\n');
      client.send(chat);
      const text = await client.read(finalAnswer);
      const answer = text.slice('HTTP/1.1 100 Continue\r\n\r\n'.length);
      expect(answer.startsWith('HTTP/1.1 200 ')).to.equal(true, answer.slice(0, 200));
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)).object).to.equal('chat.completion');
    } finally {
      client.close();
    }
  });

  it('a multipart upload with a good key gets its 100 Continue; with a wrong key its 401 at once', async () => {
    const boundary = 'xcontinuex';
    const form = Buffer.concat([
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\nmock-whisper\r\n--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="a.wav"\r\ncontent-type: audio/wav\r\n\r\n`),
      Buffer.alloc(2_000, 1),
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]);
    const type = `multipart/form-data; boundary=${boundary}`;
    const bad = await WaitingClient.open(gw.url);
    try {
      bad.send(head('/v1/audio/transcriptions', 'authorization: Bearer sk-not-a-key-000000000\r\n', form.length, type));
      const text = await bad.read((t) => /\r\n\r\n[\s\S]*\}/.test(t));
      expect(text.startsWith('HTTP/1.1 401 ')).to.equal(true, text.slice(0, 200));
    } finally {
      bad.close();
    }
    const good = await WaitingClient.open(gw.url);
    try {
      good.send(head('/v1/audio/transcriptions', `authorization: Bearer ${KEY}\r\n`, form.length, type));
      expect(await good.read((t) => t.includes('\r\n\r\n'))).to.equal('HTTP/1.1 100 Continue\r\n\r\n');
      good.send(form);
      const text = await good.read((t) => /HTTP\/1\.1 [2-5]\d\d[\s\S]*\r\n\r\n[\s\S]*\}/.test(t.slice(25)));
      expect(text.slice('HTTP/1.1 100 Continue\r\n\r\n'.length, 'HTTP/1.1 100 Continue\r\n\r\n'.length + 13)).to.match(/^HTTP\/1\.1 [24]\d\d/);
    } finally {
      good.close();
    }
  });

  it('an admin call with the admin key gets its 100 Continue and creates its key', async () => {
    const body = JSON.stringify({ name: 'made-after-continue' });
    const client = await WaitingClient.open(gw.url);
    try {
      client.send(head('/admin/keys', `authorization: Bearer ${ADMIN}\r\n`, Buffer.byteLength(body)));
      expect(await client.read((t) => t.includes('\r\n\r\n'))).to.equal('HTTP/1.1 100 Continue\r\n\r\n');
      client.send(body);
      const text = await client.read((t) => /HTTP\/1\.1 2\d\d[\s\S]*\r\n\r\n[\s\S]*\}/.test(t.slice(25)));
      expect(text).to.match(/HTTP\/1\.1 201 /);
    } finally {
      client.close();
    }
  });
});
