import { expect } from 'chai';
import net from 'node:net';
import http from 'node:http';
import type * as Undici from 'undici';
import { PoolRegistry, preciseConnector } from './pools.js';

type Connector = Undici.buildConnector.connector;
type Outcome = { error: Error | null; socket: net.Socket | null; ms: number };

function connectWith(connector: Connector): Promise<Outcome> {
  const started = performance.now();
  return new Promise((resolve) => {
    connector({ hostname: '127.0.0.1', host: '127.0.0.1', protocol: 'http:', port: '9' }, (error, socket) =>
      resolve({ error, socket: socket as net.Socket | null, ms: performance.now() - started }),
    );
  });
}

describe('preciseConnector: the connect timeout on a timer of its own', () => {
  it('gives up a connect that hangs at its limit, not at the next half-second tick, and closes the socket', async () => {
    let opened: net.Socket | undefined;
    // A connect that never completes (a back end whose listen queue is full drops the SYN).
    const hangs: Connector = () => {
      opened = new net.Socket();
      return opened as never;
    };
    const outcome = await connectWith(preciseConnector(150, hangs));
    expect(outcome.error).to.be.an('error');
    expect((outcome.error as Error & { code?: string }).code).to.equal('UND_ERR_CONNECT_TIMEOUT');
    expect(outcome.error!.message).to.include('150ms');
    expect(outcome.ms).to.be.at.least(145);
    // undici's own timeout, on its 499 ms ticks, could not fire before about 500 ms.
    expect(outcome.ms).to.be.below(450);
    expect(opened!.destroyed).to.equal(true);
  });

  it('hands on a connect that completes in time; one that completes after the limit is closed, not handed on', async () => {
    let late: ((error: null, socket: net.Socket) => void) | undefined;
    const sockets: net.Socket[] = [];
    const slow: Connector = (_options, callback) => {
      const socket = new net.Socket();
      sockets.push(socket);
      late = callback as never;
      return socket as never;
    };
    const outcome = await connectWith(preciseConnector(30, slow));
    expect(outcome.error).to.be.an('error');
    late!(null, sockets[0]!);
    expect(sockets[0]!.destroyed).to.equal(true);

    const quick: Connector = (_options, callback) => {
      const socket = new net.Socket();
      setImmediate(() => callback(null, socket));
      return socket as never;
    };
    const fine = await connectWith(preciseConnector(1000, quick));
    expect(fine.error).to.equal(null);
    expect(fine.socket).to.be.instanceOf(net.Socket);
    fine.socket!.destroy();
  });

  it("a registry's pool connects through it to a real server", async () => {
    const server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const registry = new PoolRegistry();
    try {
      const { port } = server.address() as net.AddressInfo;
      const pool = registry.get(`http://127.0.0.1:${port}`, { connectTimeoutMs: 200 });
      const answer = await pool.request({ path: '/', method: 'GET' });
      expect(answer.statusCode).to.equal(200);
      expect(await answer.body.text()).to.equal('ok');
    } finally {
      await registry.closeAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
