import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';
import { AttemptClock, slowedByClient, watchAbort } from './attempt.js';
import { ClientLink } from './context.js';
import { sendUpstream } from './http/client.js';

const TIMEOUTS = { connectMs: 1_000, firstByteMs: 60_000, idleMs: 60_000, totalMs: 60_000 };

describe('the attempt clock as an abort watch', () => {
  it('tells onAbort watchers once when the client leaves, and a signal read afterwards is already aborted', () => {
    const client = new ClientLink();
    const clock = new AttemptClock(client, TIMEOUTS);
    const calls: string[] = [];
    const stop = watchAbort(clock, () => calls.push('watcher'));
    const removed = () => calls.push('removed');
    clock.onAbort(removed);
    clock.offAbort(removed);
    expect(clock.aborted).to.equal(false);
    client.leave();
    expect(calls).to.deep.equal(['watcher']);
    expect(clock.aborted).to.equal(true);
    expect((clock.reason as { code?: string }).code).to.equal('client_closed_request');
    expect(clock.signal.aborted).to.equal(true);
    stop();
    clock.onAbort(() => calls.push('late'));
    expect(calls).to.deep.equal(['watcher', 'late']);
    clock.finish();
  });

  it("a total timeout run out while the back end was awaited is the back end's; one run out while the client was (no chunk awaited) is the client's", async () => {
    const silent: AsyncIterator<number> = { next: () => new Promise<IteratorResult<number>>(() => undefined) };
    // The back end answers at once and then sends nothing: the whole wait is on it.
    const slowBackEnd = new AttemptClock(new ClientLink(), { ...TIMEOUTS, totalMs: 60 });
    slowBackEnd.answered();
    const waited = await slowBackEnd.next(silent).catch((e: unknown) => e);
    expect((waited as { code?: string }).code).to.equal('upstream_timeout');
    expect(slowBackEnd.reason).to.equal(waited);
    expect(slowBackEnd.reason!.message).to.not.include('client');
    expect(slowBackEnd.reason).to.satisfy((e: unknown) => !slowedByClient(e));
    slowBackEnd.finish();
    // Each chunk comes at once, and the time goes between the reads (the client taking them).
    const slowClient = new AttemptClock(new ClientLink(), { ...TIMEOUTS, totalMs: 60 });
    slowClient.answered();
    const ready: AsyncIterator<number> = { next: async () => ({ done: false, value: 1 }) };
    const aborted = new Promise<void>((resolve) => slowClient.onAbort(resolve));
    await slowClient.next(ready);
    await aborted;
    expect(slowClient.reason!.code).to.equal('upstream_timeout');
    expect(slowClient.reason!.message).to.include('waiting for the client to read the answer');
    expect(slowedByClient(slowClient.reason)).to.equal(true);
    slowClient.finish();
  });

  it('a signal read before the abort aborts with it, with the timeout as its reason', async () => {
    const clock = new AttemptClock(new ClientLink(), { ...TIMEOUTS, firstByteMs: 20 });
    const signal = clock.signal;
    const reason = await new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)));
    expect((reason as { code?: string }).code).to.equal('upstream_timeout');
    clock.finish();
  });

  it('sendUpstream given the clock stops a back end that never answers when the clock aborts', async () => {
    let arrived!: () => void;
    let closed!: () => void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    const closing = new Promise<void>((resolve) => (closed = resolve));
    const server = http.createServer((req, res) => {
      arrived();
      res.on('close', () => closed());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const client = new ClientLink();
    const clock = new AttemptClock(client, TIMEOUTS);
    try {
      const pending = sendUpstream(pool, { method: 'POST', path: '/', headers: {}, body: '{}', signal: clock });
      await arrival;
      client.leave();
      const error = await pending.catch((e: unknown) => e);
      expect((error as { code?: string }).code).to.equal('client_closed_request');
      // The back end sees its connection closed (the test times out otherwise).
      await closing;
    } finally {
      clock.finish();
      await pool.destroy();
      server.closeAllConnections();
      server.close();
    }
  });

  it("a request that waits for a free connection of the pool is not the back end's time: its first-byte deadline begins on the connection", async () => {
    let releaseFirst!: () => void;
    const held = new Promise<void>((resolve) => (releaseFirst = resolve));
    let arrived!: () => void;
    const arrival = new Promise<void>((resolve) => (arrived = resolve));
    const server = http.createServer((req, res) => {
      if (req.url === '/first') {
        arrived();
        void held.then(() => res.end('{}'));
      } else res.end('{}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // One connection: the second request waits for the first to end.
    const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 1, pipelining: 1 });
    const first = new AttemptClock(new ClientLink(), TIMEOUTS);
    const second = new AttemptClock(new ClientLink(), { ...TIMEOUTS, firstByteMs: 50 });
    try {
      const one = sendUpstream(pool, { method: 'POST', path: '/first', headers: {}, body: '{}', signal: first });
      await arrival;
      const two = sendUpstream(pool, { method: 'POST', path: '/second', headers: {}, body: '{}', signal: second });
      // The pool stays busy three times the second request's first-byte deadline.
      const heldMs = 150;
      const start = performance.now();
      await new Promise((resolve) => setTimeout(resolve, heldMs));
      releaseFirst();
      await (await one).body.text();
      const answer = await two;
      expect(answer.statusCode).to.equal(200);
      await answer.body.text();
      expect(second.aborted).to.equal(false);
      // The back end's time is from the connection on, not from the wait in the pool.
      expect(second.upstreamMs()).to.be.lessThan(performance.now() - start - heldMs / 2);
    } finally {
      first.finish();
      second.finish();
      await pool.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});

describe("the attempt clock measures a stream's silence from its last chunk", () => {
  it('a wait that begins while another is pending (a primed stream handed on during a read) does not start the silence again', async () => {
    const clock = new AttemptClock(new ClientLink(), { ...TIMEOUTS, idleMs: 1500 });
    clock.answered();
    const silent: AsyncIterator<never> = { next: () => new Promise<never>(() => undefined) };
    // The priming read, still pending when its window ends...
    const pending = clock.next(silent);
    pending.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 700));
    // ...is what the stream's reader then awaits.
    const began = performance.now();
    const error = await clock.next({ next: () => pending }).catch((e: unknown) => e);
    expect((error as { code?: string }).code).to.equal('upstream_timeout');
    // 1500 ms from the first wait, about 800 after the second; not 1500 after it (the halfway
    // mark leaves either side 350 ms for a slow machine).
    expect(performance.now() - began).to.be.below(1150);
    clock.finish();
  });
});
