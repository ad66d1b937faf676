import type { Counters, WindowResult } from './types.js';

/**
 * Hits that arrived within one slot of time, summed. `at` is the newest hit's time, so a slot
 * leaves the window when its last hit does: counting is never more lenient than per hit.
 */
interface Entry {
  at: number;
  amount: number;
  /** Out of the window (evicted): adjusting it changes nothing any more. */
  gone: boolean;
}

/** What windowHit hands back to adjust one hit later: its slot, and what it counted for it. */
interface Handle {
  entry: Entry;
  amount: number;
}

/** Hits closer together than this share one entry: memory per window is bounded by windowMs / SLOT_MS. */
const SLOT_MS = 100;

/** A sliding window: slots of hits inside the last `windowMs`, oldest first, with a running sum. */
class Window {
  entries: Entry[] = [];
  head = 0;
  sum = 0;
  /** When the newest slot began. */
  slotStart = -Infinity;

  evict(now: number, windowMs: number): void {
    while (this.head < this.entries.length && this.entries[this.head]!.at <= now - windowMs) {
      const entry = this.entries[this.head]!;
      this.sum -= entry.amount;
      entry.gone = true;
      this.head++;
    }
    if (this.head > 64 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  add(now: number, amount: number): Entry {
    this.sum += amount;
    const newest = this.head < this.entries.length ? this.entries[this.entries.length - 1]! : undefined;
    if (newest && now - this.slotStart < SLOT_MS) {
      newest.at = now;
      newest.amount += amount;
      return newest;
    }
    const entry: Entry = { at: now, amount, gone: false };
    this.entries.push(entry);
    this.slotStart = now;
    return entry;
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

  windowHit(key: string, limit: number, windowMs: number, amount: number): WindowResult {
    const now = this.now();
    const w = this.window(key);
    w.evict(now, windowMs);
    if (w.sum + amount > limit) {
      const newest = w.head < w.entries.length ? w.entries[w.entries.length - 1] : undefined;
      const fullMs = newest ? Math.max(0, newest.at + windowMs - now) : 0;
      return { allowed: false, limit, remaining: Math.max(0, limit - w.sum), resetMs: w.resetMs(now, windowMs, limit, amount), fullMs };
    }
    const handle: Handle = { entry: w.add(now, amount), amount };
    // reset: when the window is back to its initial state, i.e. when this newest hit ages out (O(1)).
    return { allowed: true, limit, remaining: Math.max(0, limit - w.sum), resetMs: windowMs, handle };
  }

  windowAdjust(key: string, handle: unknown, amount: number): void {
    const w = this.windows.get(key);
    const hit = handle as Handle | undefined;
    // O(1): a hit whose slot already left the window has nothing to adjust.
    if (!w || !hit || hit.entry.gone) return;
    const delta = amount - hit.amount;
    w.sum += delta;
    hit.entry.amount += delta;
    hit.amount = amount;
  }

  windowPeek(key: string, limit: number, windowMs: number): WindowResult {
    const now = this.now();
    const w = this.window(key);
    w.evict(now, windowMs);
    const newest = w.entries[w.entries.length - 1];
    const resetMs = w.head < w.entries.length && newest ? Math.max(0, newest.at + windowMs - now) : 0;
    return { allowed: w.sum < limit, limit, remaining: Math.max(0, limit - w.sum), resetMs };
  }

  acquire(key: string, limit: number): boolean {
    const used = this.slots.get(key) ?? 0;
    if (used >= limit) return false;
    this.slots.set(key, used + 1);
    return true;
  }

  release(key: string): void {
    const used = this.slots.get(key);
    // Kept at 0 rather than deleted (the sweeper drops it): deleting and adding the same key
    // call after call costs a key that makes one call at a time more than the count itself.
    if (used !== undefined) this.slots.set(key, used > 1 ? used - 1 : 0);
  }

  reserve(key: string, amount: number, limit: number, base: number): boolean {
    const held = this.reservations.get(key) ?? 0;
    if (base + held + amount > limit + 1e-12) return false;
    this.reservations.set(key, held + amount);
    return true;
  }

  unreserve(key: string, amount: number): void {
    const held = (this.reservations.get(key) ?? 0) - amount;
    // 0, not deleted, for the same reason as release(); the sweeper drops it.
    this.reservations.set(key, held <= 1e-12 ? 0 : held);
  }

  reserved(key: string): number {
    return this.reservations.get(key) ?? 0;
  }

  private sweep(): void {
    const now = this.now();
    for (const [key, w] of this.windows) {
      const last = w.entries[w.entries.length - 1];
      if (last && last.at >= now - 10 * 60_000) continue;
      // A call still running holds a handle to its hit (a stream of a quarter of an hour): its
      // settling must not land in the new window of the same name.
      for (let i = w.head; i < w.entries.length; i++) w.entries[i]!.gone = true;
      this.windows.delete(key);
    }
    for (const [key, used] of this.slots) if (used === 0) this.slots.delete(key);
    for (const [key, held] of this.reservations) if (held === 0) this.reservations.delete(key);
  }

  close(): void {
    clearInterval(this.sweeper);
  }
}
