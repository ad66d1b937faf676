import { expect } from 'chai';
import { BatchQueue, ColumnRows } from './queue.js';

describe('ColumnRows: rows waiting for their batch, as columns', () => {
  const kinds = ['text', 'number', 'text', 'number'] as const;

  it('gives back what was set, null for what was not (or was not of the column kind)', () => {
    const rows = new ColumnRows(kinds, 2);
    const a = rows.add();
    rows.set(a, 0, 'req_a');
    rows.set(a, 1, 1.5);
    rows.set(a, 3, 0);
    const b = rows.add();
    rows.set(b, 0, null);
    rows.set(b, 1, undefined);
    rows.set(b, 2, 'x');
    rows.set(b, 3, -7);
    expect([0, 1, 2, 3].map((c) => rows.get(a, c))).to.deep.equal(['req_a', 1.5, null, 0]);
    expect([0, 1, 2, 3].map((c) => rows.get(b, c))).to.deep.equal([null, null, 'x', -7]);
    const out: unknown[] = ['keep'];
    rows.copyRow(a, out, 1);
    rows.copyRow(b, out, 5);
    expect(out).to.deep.equal(['keep', 'req_a', 1.5, null, 0, null, null, 'x', -7]);
    expect(rows.count).to.equal(2);
    expect(rows.width).to.equal(4);
  });

  it('grows past its capacity keeping every row, and starts empty again after clear (a burst is let go)', () => {
    const rows = new ColumnRows(kinds, 4);
    for (let i = 0; i < 5000; i++) {
      const row = rows.add();
      rows.set(row, 0, `r${i}`);
      rows.set(row, 1, i);
    }
    expect(rows.get(0, 0)).to.equal('r0');
    expect(rows.get(4999, 0)).to.equal('r4999');
    expect(rows.get(4999, 1)).to.equal(4999);
    expect(rows.get(4999, 3)).to.equal(null);
    rows.clear();
    expect(rows.count).to.equal(0);
    const row = rows.add();
    expect(row).to.equal(0);
    expect([0, 1, 2, 3].map((c) => rows.get(row, c))).to.deep.equal([null, null, null, null]);
  });

  it('a row added after a clear does not see the values of the row that had its place', () => {
    const rows = new ColumnRows(kinds, 4);
    const first = rows.add();
    rows.set(first, 0, 'old');
    rows.set(first, 1, 42);
    rows.clear();
    const again = rows.add();
    expect(again).to.equal(first);
    expect(rows.get(again, 0)).to.equal(null);
    expect(rows.get(again, 1)).to.equal(null);
  });

  it('BatchQueue tells when nothing waits any more, after a write and after a failed one', () => {
    let drained = 0;
    const lost: number[] = [];
    let fail = false;
    const queue = new BatchQueue<number>(
      () => {
        if (fail) throw new Error('disk full');
      },
      { maxBatch: 2, onError: (_e, count) => lost.push(count), drained: () => drained++ },
    );
    queue.push(1);
    queue.push(2);
    queue.push(3);
    queue.flushNow();
    expect(drained).to.equal(1);
    fail = true;
    queue.push(4);
    queue.flushNow();
    expect(lost).to.deep.equal([1]);
    expect(drained).to.equal(2);
    expect(queue.size).to.equal(0);
    queue.close();
  });

  it('BatchQueue keeps a batch the store was too busy for, tries it again after a pause, and loses nothing', async () => {
    const written: number[][] = [];
    const busyErrors: unknown[] = [];
    let busy = true;
    let drained = 0;
    const queue = new BatchQueue<number>(
      (batch) => {
        if (busy) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
        written.push([...batch]);
      },
      {
        maxBatch: 2,
        intervalMs: 20,
        busy: (error) => (error as { code?: string }).code === 'SQLITE_BUSY',
        onBusy: (error) => busyErrors.push(error),
        onError: () => expect.fail('nothing is lost while the store is only busy'),
        discarded: () => expect.fail('nothing is given up while the store is only busy'),
        drained: () => drained++,
      },
    );
    for (const n of [1, 2, 3]) queue.push(n);
    queue.flushNow();
    expect(queue.size).to.equal(3);
    expect(queue.waiting).to.equal(true);
    expect(drained).to.equal(0);
    // Pushes while it waits only append: no write is tried before the pause is over.
    queue.push(4);
    queue.flushNow();
    expect(busyErrors).to.have.length(1);
    busy = false;
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (queue.size === 0) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    expect(written).to.deep.equal([
      [1, 2],
      [3, 4],
    ]);
    expect(queue.waiting).to.equal(false);
    expect(drained).to.equal(1);
    queue.close();
  });

  it('BatchQueue gives up the oldest batch past maxQueued while the store stays busy, and what waits when it closes; another error loses its batch at once', () => {
    const lost: number[] = [];
    const discarded: number[][] = [];
    let error: Error & { code?: string } = Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' });
    const queue = new BatchQueue<number>(
      () => {
        throw error;
      },
      {
        maxBatch: 2,
        maxQueued: 4,
        intervalMs: 60_000,
        busy: (e) => (e as { code?: string }).code === 'SQLITE_BUSY',
        onError: (_e, count) => lost.push(count),
        discarded: (batch) => discarded.push([...batch]),
      },
    );
    queue.push(1);
    queue.flushNow();
    for (const n of [2, 3, 4, 5]) queue.push(n);
    expect(discarded).to.deep.equal([[1, 2]]);
    expect(queue.size).to.equal(3);
    queue.close();
    expect(discarded).to.deep.equal([[1, 2], [3, 4], [5]]);
    expect(lost).to.deep.equal([2, 2, 1]);
    error = Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' });
    queue.push(6);
    queue.flushNow();
    expect(discarded.at(-1)).to.deep.equal([6]);
    expect(queue.waiting).to.equal(false);
  });

  it('BatchQueue writes a batch the store refuses one item at a time: only the items it refuses are lost, not the rest of their batch', () => {
    const written: number[] = [];
    const lost: number[] = [];
    const discarded: number[][] = [];
    // The store refuses item 3 (a row breaking a constraint), whatever it comes with.
    const queue = new BatchQueue<number>(
      (batch) => {
        if (batch.includes(3)) throw Object.assign(new Error('NOT NULL constraint failed'), { code: 'SQLITE_CONSTRAINT_NOTNULL' });
        written.push(...batch);
      },
      { maxBatch: 4, intervalMs: 60_000, busy: (e) => (e as { code?: string }).code === 'SQLITE_BUSY', itemRefused: (e) => (e as { code?: string }).code?.startsWith('SQLITE_CONSTRAINT') === true, onError: (_e, count) => lost.push(count), discarded: (batch) => discarded.push([...batch]) },
    );
    for (const n of [1, 2, 3, 4, 5, 6]) queue.push(n);
    queue.flushNow();
    expect(written).to.deep.equal([1, 2, 4, 5, 6]);
    expect(lost).to.deep.equal([1]);
    expect(discarded).to.deep.equal([[3]]);
    expect(queue.size).to.equal(0);
    queue.close();
  });

  it('BatchQueue: a store found busy while it writes a refused batch item by item keeps what is left of the batch for the next try', async () => {
    const written: number[] = [];
    let busy = false;
    const queue = new BatchQueue<number>(
      (batch) => {
        if (busy) throw Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' });
        if (batch.includes(2)) {
          // Refused; and the store is busy from now until the next try.
          if (batch.length === 1) return void (busy = true, written.push(-2));
          throw Object.assign(new Error('refused'), { code: 'SQLITE_CONSTRAINT_CHECK' });
        }
        written.push(...batch);
      },
      { maxBatch: 10, intervalMs: 5, busy: (e) => (e as { code?: string }).code === 'SQLITE_BUSY', itemRefused: (e) => (e as { code?: string }).code === 'SQLITE_CONSTRAINT_CHECK' },
    );
    for (const n of [1, 2, 3, 4]) queue.push(n);
    queue.flushNow();
    expect(written).to.deep.equal([1, -2]);
    expect(queue.size).to.equal(2);
    expect(queue.waiting).to.equal(true);
    busy = false;
    await new Promise<void>((resolve) => {
      const check = () => (queue.size === 0 ? resolve() : setImmediate(check));
      check();
    });
    expect(written).to.deep.equal([1, -2, 3, 4]);
    queue.close();
  });

  it('BatchQueue: a store that refuses every write (a broken file) gives a refused batch up at once, told once; a batch whose first items alone are refused keeps the rest', () => {
    const lost: number[] = [];
    let writes = 0;
    let broken = true;
    const written: number[] = [];
    const queue = new BatchQueue<number>(
      (batch) => {
        writes++;
        if (broken) throw Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' });
        if (batch.some((n) => n < 8)) throw Object.assign(new Error('NOT NULL constraint failed'), { code: 'SQLITE_CONSTRAINT_NOTNULL' });
        written.push(...batch);
      },
      { maxBatch: 500, intervalMs: 60_000, busy: (e) => (e as { code?: string }).code === 'SQLITE_BUSY', itemRefused: (e) => (e as { code?: string }).code?.startsWith('SQLITE_CONSTRAINT') === true, onError: (_e, count) => lost.push(count) },
    );
    for (let n = 0; n < 1200; n++) queue.push(n);
    queue.flushNow();
    // Three batches (500, 500, 200), each tried once.
    expect(writes).to.equal(3);
    expect(lost).to.deep.equal([500, 500, 200]);
    // Eight refused rows at the head of a batch: the 92 after them are written.
    broken = false;
    lost.length = 0;
    for (let n = 0; n < 100; n++) queue.push(n);
    queue.flushNow();
    expect(lost).to.deep.equal([1, 1, 1, 1, 1, 1, 1, 1]);
    expect(written).to.have.length(92);
    queue.close();
  });
});
