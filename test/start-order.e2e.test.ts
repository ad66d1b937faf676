import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import { loadConfig } from '../config/load.js';
import { createGateway } from '../core/gateway.js';
import { createLogger } from '../core/logger.js';
import { builtins } from '../plugins/builtins.js';
import { freePort } from './support/ports.js';
import { startGateway, writeConfig, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-start-order-key-0000001';

async function gatewayOf(yaml: string) {
  const loaded = await loadConfig({ file: writeConfig(yaml), env: process.env });
  return createGateway({ loaded, builtins, logger: createLogger({ level: 'error', format: 'json' }, new PassThrough()) });
}

const chat = (url: string, key: string) =>
  fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: 'hi' }] }),
  });

describe('start: the port first, then the plugins set up', function () {
  this.timeout(30_000);
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-start-'));
  const store = path.join(dir, 'shared.db');
  let running: RunningGateway;

  before(async () => {
    running = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${store} }
auth:
  keys: [{ name: svc, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(async () => running?.stop());

  it("a second gateway that cannot listen (the port in use) changes nothing in the store it shares: the first one's configured key still works", async () => {
    expect((await chat(running.url, KEY)).status).to.equal(200);
    const port = Number(new URL(running.url).port);
    // The same store, no keys configured: had it set up, auth would have revoked `svc`.
    const second = await gatewayOf(`
server: { host: 127.0.0.1, port: ${port} }
storage: { url: ${store} }
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
    let setUp = false;
    second.hooks.setup.tap('probe', () => {
      setUp = true;
    });
    const failed = await second.listen(port, '127.0.0.1').then(
      () => undefined,
      (error: NodeJS.ErrnoException) => error,
    );
    await second.stop();
    expect(failed?.code).to.equal('EADDRINUSE');
    expect(setUp).to.equal(false);
    const after = await chat(running.url, KEY);
    expect(after.status, await after.text()).to.equal(200);
    const [record] = (await running.gateway.stores.keys.list()).filter((k) => k.name === 'svc');
    expect(record!.revokedAt).to.equal(null);
  });

  it('a request that comes while the plugins set up waits for them, then is served', async () => {
    const port = await freePort();
    const gateway = await gatewayOf(`
server: { host: 127.0.0.1, port: ${port} }
storage: { url: ':memory:' }
auth:
  keys: [{ name: early, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
    let finishSetup!: () => void;
    let listening!: () => void;
    let setupDone = false;
    const setupBegun = new Promise<void>((resolve) => (listening = resolve));
    gateway.hooks.setup.tapPromise('slow', () => {
      listening();
      return new Promise<void>((resolve) => (finishSetup = resolve)).then(() => {
        setupDone = true;
      });
    });
    // Whether each request reached the pipeline before or after setup was done.
    const servedAfterSetup: boolean[] = [];
    gateway.hooks.onRequest.tap('order', () => {
      servedAfterSetup.push(setupDone);
    });
    const started = gateway.listen(port, '127.0.0.1');
    try {
      await setupBegun;
      // The port is open; the call waits for setup (auth's keys written), then is answered.
      let answered = false;
      const early = chat(`http://127.0.0.1:${port}`, KEY).then((res) => {
        answered = true;
        return res;
      });
      // Node has read the request (its server emitted it) while setup still runs.
      await new Promise((resolve) => gateway.server!.once('request', resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(answered).to.equal(false);
      expect(servedAfterSetup).to.deep.equal([]);
      finishSetup();
      await started;
      const res = await early;
      expect(res.status, await res.text()).to.equal(200);
      expect(servedAfterSetup).to.deep.equal([true]);
    } finally {
      finishSetup?.();
      await started.catch(() => undefined);
      await gateway.stop();
    }
  });

  for (const [how, end] of [
    ['a setup that fails', 'fail'],
    ['a stop that comes during setup', 'stop'],
  ] as const) {
    it(`${how}: the requests waiting for setup are answered 503 gateway_shutdown, not left with a closed connection`, async () => {
      const port = await freePort();
      const gateway = await gatewayOf(`
server: { host: 127.0.0.1, port: ${port} }
storage: { url: ':memory:' }
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
      let failSetup!: (error: Error) => void;
      let listening!: () => void;
      const setupBegun = new Promise<void>((resolve) => (listening = resolve));
      gateway.hooks.setup.tapPromise('slow', () => {
        listening();
        return new Promise<void>((_resolve, reject) => (failSetup = reject));
      });
      const started = gateway.listen(port, '127.0.0.1').then(
        (url) => ({ url }),
        (error: Error) => ({ error }),
      );
      await setupBegun;
      const waiting = chat(`http://127.0.0.1:${port}`, KEY);
      await new Promise((resolve) => gateway.server!.once('request', resolve));
      if (end === 'fail') failSetup(new Error('the plugin could not set up'));
      else await gateway.stop();
      const res = await waiting;
      expect(res.status).to.equal(503);
      expect(((await res.json()) as { error: { code: string } }).error.code).to.equal('gateway_shutdown');
      if (end === 'stop') failSetup(new Error('too late'));
      const outcome = await started;
      if (end === 'fail') expect((outcome as { error: Error }).error.message).to.match(/could not set up/);
      await gateway.stop();
    });
  }
});
