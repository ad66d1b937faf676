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
});
