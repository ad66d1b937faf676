import type Database from 'better-sqlite3';
import type { BatchQueueOptions } from './queue.js';
import type { StoredTask, TaskAccepted, TaskOutcome, TaskProgress, TaskStore, UsageRecord } from './types.js';

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
 * Video tasks in the gateway's SQLite file. A task is money the vendor already bills for, so it
 * is written synchronously (one small INSERT before the vendor is asked, one small UPDATE with
 * the vendor's id once it accepted), never queued: a gateway killed right after answering 200
 * still has the task. Every status change is one compare-and-set statement on an unfinished
 * row, and a finish writes its settle/refund usage row and the key's spent in the same transaction.
 */
export class SqliteTaskStore implements TaskStore {
  private readonly insertStmt;
  private readonly attachStmt;
  private readonly discardStmt;
  private readonly refreshStmt;
  private readonly byId;
  private readonly dueStmt;
  private readonly stuckStmt;
  private readonly nextStmt;
  private readonly advanceStmt;
  private readonly finishTx;
  private readonly createTx;
  private readonly attachTx;

  constructor(
    db: Database.Database,
    /** The cached written `keys.spent` per key id (kept in step when a charge or a finish changes it). */
    private readonly writtenSpent: Map<string, number>,
    _options: { queue?: BatchQueueOptions; onWriteError?(what: string, error: unknown, lost: number): void },
    /** Runs a write that must not give way to another process's lock quickly (see SqliteDb.patiently). */
    private readonly patiently: <T>(write: () => T) => T = (write) => write(),
  ) {
    this.insertStmt = db.prepare(
      `INSERT OR IGNORE INTO tasks (id, key_id, key_name, provider, format, model, upstream_model, vendor_task_id, status, progress,
         result_url, container, seconds, size, error_code, error_message, raw_status, metadata, created_at, updated_at, completed_at,
         polled_at, next_poll_at, attempts, estimate_seconds, cost)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    // Only a task the vendor has not confirmed yet (empty vendor id) takes the vendor's answer.
    this.attachStmt = db.prepare(
      `UPDATE tasks SET vendor_task_id = @vendor_task_id, provider = @provider, upstream_model = @upstream_model, status = @status,
         raw_status = @raw_status, next_poll_at = @next_poll_at, estimate_seconds = @estimate_seconds, cost = @cost, updated_at = @at
       WHERE id = @id AND vendor_task_id = '' AND ${UNFINISHED}`,
    );
    this.refreshStmt = db.prepare(`UPDATE tasks SET result_url = ? WHERE id = ? AND status = 'completed'`);
    this.discardStmt = db.prepare(`DELETE FROM tasks WHERE id = ? AND vendor_task_id = '' AND ${UNFINISHED}`);
    this.byId = db.prepare<[string], TaskRow>('SELECT * FROM tasks WHERE id = ?');
    this.dueStmt = db.prepare<[number, number], TaskRow>(`SELECT * FROM tasks WHERE ${UNFINISHED} AND next_poll_at <= ? ORDER BY next_poll_at LIMIT ?`);
    this.stuckStmt = db.prepare<[number, number], TaskRow>(`SELECT * FROM tasks WHERE ${UNFINISHED} AND created_at < ? ORDER BY created_at LIMIT ?`);
    this.nextStmt = db.prepare<[string], { at: number | null }>(
      `SELECT MIN(next_poll_at) AS at FROM tasks WHERE ${UNFINISHED} AND id NOT IN (SELECT value FROM json_each(?))`,
    );
    // Forward only: a queued task may stay queued or start; an in_progress one never goes back to
    // queued (a vendor that says so keeps it in_progress). The poll's time, its next one and the
    // count move on whatever the poll said, a failed or unreadable one (no status) included.
    this.advanceStmt = db.prepare(
      `UPDATE tasks SET status = CASE WHEN status = 'in_progress' AND @status = 'queued' THEN status ELSE COALESCE(@status, status) END,
         progress = MAX(progress, COALESCE(@progress, progress)),
         raw_status = COALESCE(@raw_status, raw_status), polled_at = @polled_at, next_poll_at = @next_poll_at, attempts = @attempts,
         updated_at = @polled_at
       WHERE id = @id AND ${UNFINISHED}`,
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
         completion_tokens, cached_tokens, reasoning_tokens, source, cost, status, end_reason, latency_ms, ttfb_ms, images, seconds, characters)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    const addSpent = db.prepare('UPDATE keys SET spent = spent + ? WHERE id = ?');
    /** A usage row and the key's spent, inside the caller's transaction. */
    const ledger = (r: UsageRecord | null): void => {
      if (!r) return;
      usageInsert.run(r.requestId, r.time, r.keyId, r.keyName, r.model, r.upstreamModel, r.provider, r.operation, r.promptTokens,
        r.completionTokens, r.cachedTokens, r.reasoningTokens, r.source, r.cost, r.status, r.endReason, r.latencyMs, r.ttfbMs,
        r.images ?? null, r.seconds ?? null, r.characters ?? null);
      if (r.keyId && r.cost !== 0) addSpent.run(r.cost, r.keyId);
    };
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
      ledger(r);
      return true;
    });
    const insertTask = this.insertStmt;
    const attachTask = this.attachStmt;
    this.createTx = db.transaction((t: StoredTask, charge: UsageRecord | null): boolean => {
      const inserted = insertTask.run(t.id, t.keyId, t.keyName, t.provider, t.format, t.model, t.upstreamModel, t.vendorTaskId, t.status,
        t.progress, t.resultUrl, t.container, t.seconds, t.size, t.errorCode, t.errorMessage, t.rawStatus, t.metadata ? JSON.stringify(t.metadata) : null,
        t.createdAt, t.updatedAt, t.completedAt, t.polledAt, t.nextPollAt, t.attempts, t.estimateSeconds, t.cost).changes;
      if (inserted !== 1) return false;
      ledger(charge);
      return true;
    });
    this.attachTx = db.transaction((id: string, a: TaskAccepted): boolean => {
      const changed = attachTask.run({
        id,
        vendor_task_id: a.vendorTaskId,
        provider: a.provider,
        upstream_model: a.upstreamModel,
        status: a.status,
        raw_status: a.rawStatus,
        next_poll_at: a.nextPollAt,
        estimate_seconds: a.estimateSeconds,
        cost: a.cost,
        at: a.at,
      }).changes;
      if (changed !== 1) return false;
      ledger(a.charge ?? null);
      return true;
    });
    this.finishTx = (id: string, o: TaskOutcome, r: UsageRecord | null): boolean => {
      const finished = tx(id, o, r);
      if (finished) this.charged(r);
      return finished;
    };
  }

  create(task: StoredTask, charge: UsageRecord | null = null): void {
    // Synchronous on purpose (see the class comment): one small statement per submit, and the
    // submit's charge with it.
    if (this.createTx(task, charge)) this.charged(charge);
  }

  attach(id: string, a: TaskAccepted): boolean {
    // The vendor has taken the job (and bills it): its id must reach the file, even past a lock
    // another process holds for a while (a task without it is failed, uncharged, by the poller).
    const attached = this.patiently(() => this.attachTx(id, a));
    if (attached) this.charged(a.charge ?? null);
    return attached;
  }

  /** A charge committed: the cached written spent follows the file. */
  private charged(charge: UsageRecord | null): void {
    if (!charge?.keyId || charge.cost === 0) return;
    const written = this.writtenSpent.get(charge.keyId);
    if (written !== undefined) this.writtenSpent.set(charge.keyId, written + charge.cost);
  }

  refreshResult(id: string, resultUrl: string): boolean {
    return this.refreshStmt.run(resultUrl, id).changes === 1;
  }

  discard(id: string): boolean {
    return this.discardStmt.run(id).changes === 1;
  }

  get(id: string): StoredTask | undefined {
    const row = this.byId.get(id);
    return row ? fromRow(row) : undefined;
  }

  due(now: number, limit: number): StoredTask[] {
    return this.dueStmt.all(now, limit).map(fromRow);
  }

  stuck(before: number, limit: number): StoredTask[] {
    return this.stuckStmt.all(before, limit).map(fromRow);
  }

  nextDue(exclude: readonly string[] = []): number | undefined {
    const at = this.nextStmt.get(JSON.stringify(exclude))?.at;
    return typeof at === 'number' && Number.isFinite(at) ? at : undefined;
  }

  advance(id: string, p: TaskProgress): boolean {
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
    return this.finishTx(id, outcome, usage);
  }

  /** Nothing is queued (tasks are written synchronously): kept for the stores' flush/close. */
  flush(): void {}

  close(): void {}
}
