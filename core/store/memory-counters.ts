import type { Counters, WindowResult } from './types.js';

interface Entry {
  at: number;
  amount: number;
}

/** A sliding window: every hit inside the last `windowMs`, oldest first, with a running sum. */
class Window {
  entries: Entry[] = [];
  head = 0;
  sum = 0;

  evict(now: number, windowMs: number): void {
    while (this.head < this.entries.length && this.entries[this.head]!.at <= now - windowMs) {
      this.sum -= this.entries[this.head]!.amount;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /** When the window will have room for `amount` more under `limit`. */
  resetMs(now: number, windowMs: number, limit: number, amount: number): number {
    let freed = this.sum + amount - limit;
    if (freed <= 0) return 0;
    for (let i = this.head; i < this.entries.length; i++) {
      freed -= this.entries[i]!.amount;
      if (freed <= 0) return Math.max(1, this.entries[i]!.at + windowMs - now);
    }
    return windowMs;
  }
}

/**
 * Counters for one process. Every method changes state before it returns, so a check and its
 * update can never interleave with another request's.
 */
export class MemoryCounters implements Counters {
  private readonly windows = new Map<string, Window>();
  private readonly slots = new Map<string, number>();
  private readonly reservations = new Map<string, number>();
  private sweeper: NodeJS.Timeout;

  constructor(private readonly now: () => number = Date.now) {
    // Drop windows nobody has touched for a while, so idle keys do not hold memory.
    this.sweeper = setInterval(() => this.sweep(), 60_000);
    this.sweeper.unref();
  }

  private window(key: string): Window {
    let w = this.windows.get(key);
    if (!w) {
      w = new Window();
      this.windows.set(key, w);
    }
    return w;
  }

  async windowHit(key: string, limit: number, windowMs: number, amount: number): Promise<WindowResult> {
    const now = this.now();
    const w = this.window(key);
    w.evict(now, windowMs);
    if (w.sum + amount > limit) {
      return { allowed: false, limit, remaining: Math.max(0, limit - w.sum), resetMs: w.resetMs(now, windowMs, limit, amount) };
    }
    const entry: Entry = { at: now, amount };
    w.entries.push(entry);
    w.sum += amount;
    // reset: when the window is back to its initial state, i.e. when this newest hit ages out (O(1)).
    return { allowed: true, limit, remaining: Math.max(0, limit - w.sum), resetMs: windowMs, handle: entry };
  }

  async windowAdjust(key: string, handle: unknown, amount: number): Promise<void> {
    const w = this.windows.get(key);
    const entry = handle as Entry | undefined;
    if (!w || !entry) return;
    const index = w.entries.indexOf(entry, w.head);
    if (index === -1) return; // already out of the window
    w.sum += amount - entry.amount;
    entry.amount = amount;
  }

  async windowPeek(key: string, limit: number, windowMs: number): Promise<WindowResult> {
    const now = this.now();
    const w = this.window(key);
    w.evict(now, windowMs);
    const newest = w.entries[w.entries.length - 1];
    const resetMs = w.head < w.entries.length && newest ? Math.max(0, newest.at + windowMs - now) : 0;
    return { allowed: w.sum < limit, limit, remaining: Math.max(0, limit - w.sum), resetMs };
  }

  async acquire(key: string, limit: number): Promise<boolean> {
    const used = this.slots.get(key) ?? 0;
    if (used >= limit) return false;
    this.slots.set(key, used + 1);
    return true;
  }

  async release(key: string): Promise<void> {
    const used = (this.slots.get(key) ?? 0) - 1;
    if (used <= 0) this.slots.delete(key);
    else this.slots.set(key, used);
  }

  async reserve(key: string, amount: number, limit: number, base: number): Promise<boolean> {
    const held = this.reservations.get(key) ?? 0;
    if (base + held + amount > limit + 1e-12) return false;
    this.reservations.set(key, held + amount);
    return true;
  }

  async unreserve(key: string, amount: number): Promise<void> {
    const held = (this.reservations.get(key) ?? 0) - amount;
    if (held <= 1e-12) this.reservations.delete(key);
    else this.reservations.set(key, held);
  }

  async reserved(key: string): Promise<number> {
    return this.reservations.get(key) ?? 0;
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, w] of this.windows) {
      const last = w.entries[w.entries.length - 1];
      if (!last || last.at < now - 10 * 60_000) this.windows.delete(key);
    }
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
