export interface BatchQueueOptions<T = unknown> {
  /** Write when this many items are waiting (default 500). */
  maxBatch?: number;
  /** Write at least this often while items wait (default 250 ms). */
  intervalMs?: number;
  /** Past this many waiting items, `push` writes at once instead of letting memory grow (default 20000). */
  maxQueued?: number;
  onError?(error: unknown, lost: number): void;
  /** Nothing waits any more (after a flush): storage the items pointed into may be reused. */
  drained?(): void;
  /**
   * Whether a write failed only because the store is held by someone else for now (SQLite's
   * BUSY: another process writing): the batch stays, and is written again later.
   */
  busy?(error: unknown): boolean;
  /**
   * Whether a write failed for a reason one item of it is the cause of (a row breaking a
   * constraint): the batch is then written item by item, so that only the items refused are lost.
   * Any other failure (the store refusing every write) gives the batch up at once.
   */
  itemRefused?(error: unknown): boolean;
  /** A batch given up (its write failed otherwise, or too many waited while the store stayed busy). */
  discarded?(batch: T[]): void;
  /** The store was found busy after it was not: the queue waits (told once a busy spell). */
  onBusy?(error: unknown): void;
  /**
   * At close, what a busy store still keeps waiting is handed here to be kept elsewhere (written
   * at the next start): given up only if this throws.
   */
  spill?(items: T[]): void;
}

/** The longest wait between two tries of a store that stays busy. */
const MAX_RETRY_MS = 5000;

/**
 * A bounded in-process queue written in batches off the request path: `push` only appends;
 * a timer (or a full batch) writes one transaction. `flush()` writes what is waiting now, and
 * a clean shutdown calls it. A crash loses at most what was waiting. While the store is busy
 * (see `busy`), what waits is kept and tried again after a growing pause (up to 5 s), up to
 * `maxQueued` items; past that the oldest batch is given up.
 */
export class BatchQueue<T> {
  private items: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly intervalMs: number;
  private readonly maxQueued: number;
  /** The pause before the next try while the store is busy; 0 when it is not. */
  private retryMs = 0;

  constructor(
    private readonly write: (batch: T[]) => void,
    private readonly options: BatchQueueOptions<T> = {},
  ) {
    this.maxBatch = options.maxBatch ?? 500;
    this.intervalMs = options.intervalMs ?? 250;
    this.maxQueued = options.maxQueued ?? 20_000;
  }

  get size(): number {
    return this.items.length;
  }

  /** Whether the last write found the store busy (the queue waits to try again). */
  get waiting(): boolean {
    return this.retryMs > 0;
  }

  push(item: T): void {
    this.items.push(item);
    if (this.retryMs > 0) {
      // A try is due on its timer: writing now would find the store busy again.
      this.keepWithinBound();
      return;
    }
    if (this.items.length >= this.maxQueued) {
      this.flushNow();
      return;
    }
    if (this.items.length >= this.maxBatch) {
      this.immediate ??= setImmediate(() => {
        this.immediate = undefined;
        this.flushNow();
      });
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.flushNow();
      }, this.intervalMs);
      this.timer.unref();
    }
  }

  /** Write everything waiting, synchronously, in batches of maxBatch (short of what a busy store keeps waiting). */
  flushNow(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.items.length > 0) {
      const batch = this.items.length <= this.maxBatch ? this.items : this.items.slice(0, this.maxBatch);
      let done = batch.length;
      try {
        this.write(batch);
      } catch (error) {
        // An item the store refuses (see itemRefused): each item is written on its own, so that
        // only the ones it refuses are lost, not the batch they came with.
        if (this.options.busy?.(error)) {
          this.busyError = error;
          done = 0;
        } else done = batch.length > 1 && this.options.itemRefused?.(error) ? this.writeEach(batch) : this.giveUp(batch, error);
      }
      if (done < batch.length) {
        // The store is busy: what is left of the batch waits for the next try.
        this.items.splice(0, done);
        if (this.retryMs === 0) this.options.onBusy?.(this.busyError);
        this.tryLater();
        return;
      }
      if (batch === this.items) this.items = [];
      else this.items.splice(0, batch.length);
    }
    this.retryMs = 0;
    this.options.drained?.();
  }

  async flush(): Promise<void> {
    this.flushNow();
  }

  /** Write what waits; what a busy store still keeps waiting is given up (the process is stopping). */
  close(): void {
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
    this.flushNow();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    let reason = new Error('the store was still busy when it closed');
    if (this.items.length > 0 && this.options.spill) {
      try {
        this.options.spill(this.items);
        this.items = [];
        this.options.drained?.();
      } catch (error) {
        reason = new Error(`the store was still busy when it closed, and what waited could not be kept for the next start either: ${String(error)}`);
      }
    }
    while (this.items.length > 0) this.giveUpOldest(reason);
    this.retryMs = 0;
  }

  /** The error that found the store busy, for onBusy. */
  private busyError: unknown;

  /**
   * Write `batch`'s items one at a time, giving up only those the store refuses; how many were
   * dealt with (written or given up) before the store was found busy (all of them if it never was).
   */
  private writeEach(batch: T[]): number {
    for (let i = 0; i < batch.length; i++) {
      const one = batch.slice(i, i + 1);
      try {
        this.write(one);
      } catch (error) {
        if (this.options.busy?.(error)) {
          this.busyError = error;
          return i;
        }
        // The store refuses every write now (not this item's fault): the rest goes, told once.
        if (!this.options.itemRefused?.(error)) return i + this.giveUp(batch.slice(i), error);
        this.giveUp(one, error);
      }
    }
    return batch.length;
  }

  /** `batch` refused by the store: told to onError and discarded; it counts as dealt with. */
  private giveUp(batch: T[], error: unknown): number {
    this.options.onError?.(error, batch.length);
    this.options.discarded?.(batch);
    return batch.length;
  }

  private tryLater(): void {
    this.retryMs = Math.min(this.retryMs > 0 ? this.retryMs * 2 : this.intervalMs, MAX_RETRY_MS);
    this.keepWithinBound();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.flushNow();
    }, this.retryMs);
    this.timer.unref();
  }

  /** While the store is busy: past maxQueued waiting, the oldest batches are given up. */
  private keepWithinBound(): void {
    while (this.items.length > this.maxQueued) this.giveUpOldest(new Error(`the store stayed busy with more than ${this.maxQueued} items waiting`));
  }

  private giveUpOldest(error: Error): void {
    const batch = this.items.splice(0, this.maxBatch);
    this.options.onError?.(error, batch.length);
    this.options.discarded?.(batch);
  }
}

export type ColumnKind = 'number' | 'text';

/** Rows kept after a drain at most: a burst's larger columns are let go. */
const KEPT_CAPACITY = 4096;

/**
 * Rows waiting for their batch, kept as columns: every number in one Float64Array (NaN for
 * null), every text in one array; a queued row is its index. Rows wait a quarter of a second,
 * hundreds of them, so they outlive a few young-generation collections: kept as objects (each
 * with its boxed numbers, its attempts list) they were copied by each collection and then
 * promoted to the old generation, for a full collection to clear later. Kept here, a row leaves
 * behind only the texts that are its own (its request id), the rest being shared strings.
 */
export class ColumnRows {
  /** Per column: whether it holds numbers, and its place among the columns of its kind. */
  private readonly numeric: boolean[];
  private readonly slot: number[];
  private readonly numberWidth: number;
  private readonly textWidth: number;
  private numbers: Float64Array;
  private texts: Array<string | null>;
  private capacity: number;
  /** Rows added since the last clear. */
  count = 0;

  constructor(
    kinds: readonly ColumnKind[],
    private readonly initialCapacity = 256,
  ) {
    this.numeric = kinds.map((kind) => kind === 'number');
    let numbers = 0;
    let texts = 0;
    this.slot = kinds.map((kind) => (kind === 'number' ? numbers++ : texts++));
    this.numberWidth = numbers;
    this.textWidth = texts;
    this.capacity = initialCapacity;
    this.numbers = new Float64Array(initialCapacity * numbers);
    this.texts = new Array<string | null>(initialCapacity * texts).fill(null);
  }

  get width(): number {
    return this.numeric.length;
  }

  /** A new row, every value null; its index. */
  add(): number {
    if (this.count === this.capacity) this.grow();
    const row = this.count++;
    this.numbers.fill(NaN, row * this.numberWidth, (row + 1) * this.numberWidth);
    return row;
  }

  set(row: number, column: number, value: string | number | null | undefined): void {
    if (this.numeric[column]) this.numbers[row * this.numberWidth + this.slot[column]!] = typeof value === 'number' ? value : NaN;
    else this.texts[row * this.textWidth + this.slot[column]!] = typeof value === 'string' ? value : null;
  }

  get(row: number, column: number): string | number | null {
    if (this.numeric[column]) {
      const value = this.numbers[row * this.numberWidth + this.slot[column]!]!;
      return Number.isNaN(value) ? null : value;
    }
    return this.texts[row * this.textWidth + this.slot[column]!]!;
  }

  /** Row `row`'s values, in column order, into `out` from index `at` (null for a null). */
  copyRow(row: number, out: unknown[], at: number): void {
    const numbers = this.numbers;
    const texts = this.texts;
    const numberAt = row * this.numberWidth;
    const textAt = row * this.textWidth;
    for (let c = 0; c < this.numeric.length; c++) {
      if (this.numeric[c]) {
        const value = numbers[numberAt + this.slot[c]!]!;
        out[at + c] = value === value ? value : null;
      } else out[at + c] = texts[textAt + this.slot[c]!]!;
    }
  }

  /** Forget every row: their texts are let go; the columns are kept, unless a burst grew them past KEPT_CAPACITY. */
  clear(): void {
    if (this.capacity > KEPT_CAPACITY) {
      this.capacity = this.initialCapacity;
      this.numbers = new Float64Array(this.capacity * this.numberWidth);
      this.texts = new Array<string | null>(this.capacity * this.textWidth).fill(null);
    } else {
      this.texts.fill(null, 0, this.count * this.textWidth);
    }
    this.count = 0;
  }

  private grow(): void {
    this.capacity *= 2;
    const numbers = new Float64Array(this.capacity * this.numberWidth);
    numbers.set(this.numbers);
    this.numbers = numbers;
    const texts = new Array<string | null>(this.capacity * this.textWidth).fill(null);
    for (let i = 0; i < this.count * this.textWidth; i++) texts[i] = this.texts[i]!;
    this.texts = texts;
  }
}
