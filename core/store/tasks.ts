import type Database from 'better-sqlite3';
import { BatchQueue, type BatchQueueOptions } from './queue.js';
import type { StoredTask, TaskOutcome, TaskProgress, TaskStore, UsageRecord } from './types.js';

/** Migration 5: the video task table (see core/store/sqlite.ts MIGRATIONS). */
export const TASKS_MIGRATION = `
  CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    key_id TEXT,
    key_name TEXT,
    provider TEXT NOT NULL,
    format TEXT NOT NULL,
    model TEXT NOT NULL,
    upstream_model TEXT NOT NULL,
    vendor_task_id TEXT NOT NULL,
    status TEXT NOT NULL,
    progress INTEGER NOT NULL DEFAULT 0,
    result_url TEXT,
    container TEXT,
    seconds REAL,
    size TEXT,
    error_code TEXT,
    error_message TEXT,
    raw_status TEXT,
    metadata TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    completed_at INTEGER,
    polled_at INTEGER,
    next_poll_at INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    estimate_seconds REAL NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0
  );
  CREATE INDEX tasks_due ON tasks(status, next_poll_at);
  CREATE INDEX tasks_created ON tasks(created_at);
`;

interface TaskRow {
  id: string;
  key_id: string | null;
  key_name: string | null;
  provider: string;
  format: string;
  model: string;
  upstream_model: string;
  vendor_task_id: string;
  status: StoredTask['status'];
  progress: number;
  result_url: string | null;
  container: string | null;
  seconds: number | null;
  size: string | null;
  error_code: string | null;
  error_message: string | null;
  raw_status: string | null;
  metadata: string | null;
  created_at: number;
  updated_at: number;
  completed_at: number | null;
  polled_at: number | null;
  next_poll_at: number;
  attempts: number;
  estimate_seconds: number;
  cost: number;
}

function fromRow(r: TaskRow): StoredTask {
  return {
    id: r.id,
    keyId: r.key_id,
    keyName: r.key_name,
    provider: r.provider,
    format: r.format,
    model: r.model,
    upstreamModel: r.upstream_model,
    vendorTaskId: r.vendor_task_id,
    status: r.status,
    progress: r.progress,
    resultUrl: r.result_url,
    container: r.container,
    seconds: r.seconds,
    size: r.size,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    rawStatus: r.raw_status,
    metadata: r.metadata ? (JSON.parse(r.metadata) as Record<string, unknown>) : null,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    completedAt: r.completed_at,
    polledAt: r.polled_at,
    nextPollAt: r.next_poll_at,
    attempts: r.attempts,
    estimateSeconds: r.estimate_seconds,
    cost: r.cost,
  };
}

const UNFINISHED = `status IN ('queued', 'in_progress')`;

/**
 * Video tasks in the gateway's SQLite file. A new task is queued (written off the request path,
 * served from memory until then); every status change is one compare-and-set statement on an
 * unfinished row, and a finish writes its settle/refund usage row and the key's spent in the
 * same transaction.
 */
export class SqliteTaskStore implements TaskStore {
  private readonly queue: BatchQueue<StoredTask>;
  private readonly pending = new Map<string, StoredTask>();
  private readonly byId;
  private readonly dueStmt;
  private readonly stuckStmt;
  private readonly nextStmt;
  private readonly advanceStmt;
  private readonly finishTx;

  constructor(
    db: Database.Database,
    /** The cached written `keys.spent` per key id (kept in step when a finish changes it). */
    writtenSpent: Map<string, number>,
    options: { queue?: BatchQueueOptions; onWriteError?(what: string, error: unknown, lost: number): void },
  ) {
    const insert = db.prepare(
      `INSERT OR IGNORE INTO tasks (id, key_id, key_name, provider, format, model, upstream_model, vendor_task_id, status, progress,
         result_url, container, seconds, size, error_code, error_message, raw_status, metadata, created_at, updated_at, completed_at,
         polled_at, next_poll_at, attempts, estimate_seconds, cost)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const write = db.transaction((batch: StoredTask[]) => {
      for (const t of batch) {
        insert.run(t.id, t.keyId, t.keyName, t.provider, t.format, t.model, t.upstreamModel, t.vendorTaskId, t.status, t.progress,
          t.resultUrl, t.container, t.seconds, t.size, t.errorCode, t.errorMessage, t.rawStatus, t.metadata ? JSON.stringify(t.metadata) : null,
          t.createdAt, t.updatedAt, t.completedAt, t.polledAt, t.nextPollAt, t.attempts, t.estimateSeconds, t.cost);
      }
    });
    this.queue = new BatchQueue<StoredTask>(
      (batch) => {
        try {
          write(batch);
        } finally {
          for (const t of batch) if (this.pending.get(t.id) === t) this.pending.delete(t.id);
        }
      },
      { ...options.queue, onError: (error, lost) => options.onWriteError?.('tasks', error, lost) },
    );
    this.byId = db.prepare<[string], TaskRow>('SELECT * FROM tasks WHERE id = ?');
    this.dueStmt = db.prepare<[number, number], TaskRow>(`SELECT * FROM tasks WHERE ${UNFINISHED} AND next_poll_at <= ? ORDER BY next_poll_at LIMIT ?`);
    this.stuckStmt = db.prepare<[number, number], TaskRow>(`SELECT * FROM tasks WHERE ${UNFINISHED} AND created_at < ? ORDER BY created_at LIMIT ?`);
    this.nextStmt = db.prepare<[], { at: number | null }>(`SELECT MIN(next_poll_at) AS at FROM tasks WHERE ${UNFINISHED}`);
    // Forward only: a queued task may stay queued or start; an in_progress one never goes back to queued.
    this.advanceStmt = db.prepare(
      `UPDATE tasks SET status = COALESCE(@status, status), progress = MAX(progress, COALESCE(@progress, progress)),
         raw_status = COALESCE(@raw_status, raw_status), polled_at = @polled_at, next_poll_at = @next_poll_at, attempts = @attempts,
         updated_at = @polled_at
       WHERE id = @id AND ${UNFINISHED} AND NOT (status = 'in_progress' AND @status = 'queued')`,
    );
    const finishStmt = db.prepare(
      `UPDATE tasks SET status = @status, progress = COALESCE(@progress, progress), result_url = COALESCE(@result_url, result_url),
         container = COALESCE(@container, container), seconds = COALESCE(@seconds, seconds), size = COALESCE(@size, size),
         error_code = @error_code, error_message = @error_message, raw_status = COALESCE(@raw_status, raw_status),
         cost = @cost, completed_at = @at, updated_at = @at, polled_at = @at
       WHERE id = @id AND ${UNFINISHED}`,
    );
    const usageInsert = db.prepare(
      `INSERT INTO usage (request_id, time, key_id, key_name, model, upstream_model, provider, operation, prompt_tokens,
         completion_tokens, cached_tokens, reasoning_tokens, source, cost, status, end_reason, latency_ms, ttfb_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const addSpent = db.prepare('UPDATE keys SET spent = spent + ? WHERE id = ?');
    const tx = db.transaction((id: string, o: TaskOutcome, r: UsageRecord | null): boolean => {
      const changed = finishStmt.run({
        id,
        status: o.status,
        progress: o.progress ?? null,
        result_url: o.resultUrl ?? null,
        container: o.container ?? null,
        seconds: o.seconds ?? null,
        size: o.size ?? null,
        error_code: o.errorCode ?? null,
        error_message: o.errorMessage ?? null,
        raw_status: o.rawStatus ?? null,
        cost: o.cost,
        at: o.at,
      }).changes;
      if (changed !== 1) return false;
      if (r) {
        usageInsert.run(r.requestId, r.time, r.keyId, r.keyName, r.model, r.upstreamModel, r.provider, r.operation, r.promptTokens,
          r.completionTokens, r.cachedTokens, r.reasoningTokens, r.source, r.cost, r.status, r.endReason, r.latencyMs, r.ttfbMs);
        if (r.keyId && r.cost !== 0) addSpent.run(r.cost, r.keyId);
      }
      return true;
    });
    this.finishTx = (id: string, o: TaskOutcome, r: UsageRecord | null): boolean => {
      const finished = tx(id, o, r);
      // Committed: the cached written spent follows the file.
      if (finished && r?.keyId && r.cost !== 0) {
        const written = writtenSpent.get(r.keyId);
        if (written !== undefined) writtenSpent.set(r.keyId, written + r.cost);
      }
      return finished;
    };
  }

  create(task: StoredTask): void {
    this.pending.set(task.id, task);
    this.queue.push(task);
  }

  get(id: string): StoredTask | undefined {
    const waiting = this.pending.get(id);
    if (waiting) return { ...waiting };
    const row = this.byId.get(id);
    return row ? fromRow(row) : undefined;
  }

  /** Status changes work on rows: a task still waiting for its batch is written first. */
  private settle(id?: string): void {
    if (this.pending.size > 0 && (id === undefined || this.pending.has(id))) this.queue.flushNow();
  }

  due(now: number, limit: number): StoredTask[] {
    this.settle();
    return this.dueStmt.all(now, limit).map(fromRow);
  }

  stuck(before: number, limit: number): StoredTask[] {
    this.settle();
    return this.stuckStmt.all(before, limit).map(fromRow);
  }

  nextDue(): number | undefined {
    const pendingDue = [...this.pending.values()].reduce((min, t) => Math.min(min, t.nextPollAt), Infinity);
    const at = this.nextStmt.get()?.at ?? Infinity;
    const next = Math.min(pendingDue, at);
    return Number.isFinite(next) ? next : undefined;
  }

  advance(id: string, p: TaskProgress): boolean {
    this.settle(id);
    return (
      this.advanceStmt.run({
        id,
        status: p.status ?? null,
        progress: p.progress ?? null,
        raw_status: p.rawStatus ?? null,
        polled_at: p.polledAt,
        next_poll_at: p.nextPollAt,
        attempts: p.attempts,
      }).changes === 1
    );
  }

  finish(id: string, outcome: TaskOutcome, usage: UsageRecord | null): boolean {
    this.settle(id);
    return this.finishTx(id, outcome, usage);
  }

  flush(): void {
    this.queue.flushNow();
  }

  close(): void {
    this.queue.close();
  }
}
