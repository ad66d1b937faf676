import { expect } from 'chai';
import { MemoryCounters } from './memory-counters.js';

describe('MemoryCounters', () => {
  it('concurrency slots: up to the limit, freed by release, never below zero', async () => {
    const counters = new MemoryCounters();
    try {
      expect(await counters.acquire('c', 2)).to.equal(true);
      expect(await counters.acquire('c', 2)).to.equal(true);
      expect(await counters.acquire('c', 2)).to.equal(false);
      await counters.release('c');
      expect(await counters.acquire('c', 2)).to.equal(true);
      for (let i = 0; i < 4; i++) await counters.release('c');
      await counters.release('never-acquired');
      // Released more often than acquired: still two slots, not more.
      expect(await counters.acquire('c', 2)).to.equal(true);
      expect(await counters.acquire('c', 2)).to.equal(true);
      expect(await counters.acquire('c', 2)).to.equal(false);
      expect(await counters.acquire('never-acquired', 1)).to.equal(true);
    } finally {
      counters.close();
    }
  });

  it('a refused hit says when one more fits (resetMs) and when the whole window is free again (fullMs)', () => {
    let now = 1_000_000;
    const counters = new MemoryCounters(() => now);
    try {
      for (let i = 0; i < 5; i++) expect(counters.windowHit('w', 10, 60_000, 1).allowed).to.equal(true);
      now += 20_000;
      for (let i = 0; i < 5; i++) expect(counters.windowHit('w', 10, 60_000, 1).resetMs).to.equal(60_000);
      const refused = counters.windowHit('w', 10, 60_000, 1);
      expect(refused.allowed).to.equal(false);
      // Room for one when the first five age out; all of it when the last five do.
      expect(refused.resetMs).to.equal(40_000);
      expect(refused.fullMs).to.equal(60_000);
    } finally {
      counters.close();
    }
  });

  it('reservations: held until unreserved, against a limit with a base', async () => {
    const counters = new MemoryCounters();
    try {
      expect(await counters.reserve('b', 3, 10, 5)).to.equal(true);
      expect(await counters.reserved('b')).to.equal(3);
      expect(await counters.reserve('b', 3, 10, 5)).to.equal(false);
      await counters.unreserve('b', 3);
      expect(await counters.reserved('b')).to.equal(0);
      expect(await counters.reserve('b', 0.1, 10, 0)).to.equal(true);
      expect(await counters.reserve('b', 0.2, 10, 0)).to.equal(true);
      await counters.unreserve('b', 0.1);
      await counters.unreserve('b', 0.2);
      // Float residue is dropped: nothing is held.
      expect(await counters.reserved('b')).to.equal(0);
      await counters.unreserve('other', 1);
      expect(await counters.reserved('other')).to.equal(0);
    } finally {
      counters.close();
    }
  });

  it('a sliding window counts hits, refuses past the limit, and adjusts a hit later', async () => {
    let now = 1_000_000;
    const counters = new MemoryCounters(() => now);
    try {
      const first = await counters.windowHit('w', 10, 60_000, 4);
      expect(first).to.include({ allowed: true, limit: 10, remaining: 6, resetMs: 60_000 });
      expect(await counters.windowHit('w', 10, 60_000, 7)).to.include({ allowed: false, remaining: 6 });
      await counters.windowAdjust('w', first.handle, 1);
      expect((await counters.windowHit('w', 10, 60_000, 7)).remaining).to.equal(2);
      now += 60_001;
      expect((await counters.windowHit('w', 10, 60_000, 1)).remaining).to.equal(9);
    } finally {
      counters.close();
    }
  });

  it('answers at once, not with promises (the rate-limit and metering taps stay synchronous)', () => {
    const counters = new MemoryCounters();
    try {
      expect(counters.acquire('s', 1)).to.equal(true);
      expect(counters.reserve('r', 1, 2, 0)).to.equal(true);
      expect(counters.reserved('r')).to.equal(1);
      expect(counters.windowHit('w', 5, 1000, 1)).to.include({ allowed: true, remaining: 4 });
      expect(counters.release('s')).to.equal(undefined);
    } finally {
      counters.close();
    }
  });

  it("a call that outlives its idle window's sweep settles nothing into the new window of the same name", () => {
    let now = 1_000_000;
    const counters = new MemoryCounters(() => now);
    try {
      const long = counters.windowHit('tpm', 10_000, 60_000, 1_100);
      expect(long.allowed).to.equal(true);
      // Eleven quiet minutes: the sweeper drops the idle window.
      now += 11 * 60_000;
      (counters as unknown as { sweep(): void }).sweep();
      expect(counters.windowHit('tpm', 10_000, 60_000, 100).remaining).to.equal(9_900);
      // The long call settles at last, to far more than it reserved: it belonged to the old window.
      counters.windowAdjust('tpm', long.handle, 9_000);
      now += 61_000;
      // Before, 7,900 tokens that no call in this window used stayed in it for good.
      expect(counters.windowPeek('tpm', 10_000, 60_000).remaining).to.equal(10_000);
    } finally {
      counters.close();
    }
  });
});
