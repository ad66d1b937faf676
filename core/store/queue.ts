export interface BatchQueueOptions {
  /** Write when this many items are waiting (default 500). */
  maxBatch?: number;
  /** Write at least this often while items wait (default 250 ms). */
  intervalMs?: number;
  /** Past this many waiting items, `push` writes at once instead of letting memory grow (default 20000). */
  maxQueued?: number;
  onError?(error: unknown, lost: number): void;
}

/**
 * A bounded in-process queue written in batches off the request path: `push` only appends;
 * a timer (or a full batch) writes one transaction. `flush()` writes what is waiting now, and
 * a clean shutdown calls it. A crash loses at most what was waiting.
 */
export class BatchQueue<T> {
  private items: T[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly intervalMs: number;
  private readonly maxQueued: number;

  constructor(
    private readonly write: (batch: T[]) => void,
    private readonly options: BatchQueueOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 500;
    this.intervalMs = options.intervalMs ?? 250;
    this.maxQueued = options.maxQueued ?? 20_000;
  }

  get size(): number {
    return this.items.length;
  }

  push(item: T): void {
    this.items.push(item);
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

  /** Write everything waiting, synchronously, in batches of maxBatch. */
  flushNow(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.items.length > 0) {
      const batch = this.items.splice(0, this.maxBatch);
      try {
        this.write(batch);
      } catch (error) {
        this.options.onError?.(error, batch.length);
      }
    }
  }

  async flush(): Promise<void> {
    this.flushNow();
  }

  close(): void {
    if (this.immediate) clearImmediate(this.immediate);
    this.immediate = undefined;
    this.flushNow();
  }
}
