import { randomBytes, randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointMessage, CheckpointWorkerData } from './checkpoint-worker.js';
import { hashSecret, secretPrefix } from './secrets.js';
import { BatchQueue, ColumnRows, type BatchQueueOptions, type ColumnKind } from './queue.js';
import { SqliteTaskStore, TASKS_MIGRATION } from './tasks.js';
import type {
  KeyPatch,
  KeyRecord,
  KeyStore,
  NewKey,
  RequestLog,
  RequestLogEntry,
  RequestLogQuery,
  ResponseStore,
  StoredResponse,
  UsageLedger,
  UsageRecord,
  UsageTotal,
  UsageTotalsQuery,
} from './types.js';

/** Versioned migrations: each runs once, in order, in its own transaction. */
const MIGRATIONS: ReadonlyArray<{ version: number; sql: string }> = [
  {
    version: 1,
    sql: `
      CREATE TABLE keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        hash TEXT NOT NULL UNIQUE,
        prefix TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER,
        models TEXT,
        rpm INTEGER,
        tpm INTEGER,
        max_concurrent INTEGER,
        budget REAL,
        spent REAL NOT NULL DEFAULT 0,
        source TEXT NOT NULL,
        updated_at INTEGER NOT NULL
      );
      CREATE INDEX keys_name ON keys(name);

      CREATE TABLE usage (
        request_id TEXT PRIMARY KEY,
        time INTEGER NOT NULL,
        key_id TEXT,
        key_name TEXT,
        model TEXT NOT NULL,
        upstream_model TEXT,
        provider TEXT,
        operation TEXT NOT NULL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cached_tokens INTEGER,
        reasoning_tokens INTEGER,
        source TEXT,
        cost REAL NOT NULL,
        status INTEGER NOT NULL,
        end_reason TEXT NOT NULL,
        latency_ms REAL NOT NULL,
        ttfb_ms REAL
      );
      CREATE INDEX usage_time ON usage(time);
      CREATE INDEX usage_key_time ON usage(key_id, time);

      CREATE TABLE request_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        time INTEGER NOT NULL,
        request_id TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        key_id TEXT,
        key_name TEXT,
        key_prefix TEXT,
        model TEXT,
        operation TEXT,
        provider TEXT,
        status INTEGER NOT NULL,
        error_code TEXT,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cost REAL,
        duration_ms REAL NOT NULL,
        client_ip TEXT,
        user_agent TEXT,
        attempts TEXT
      );
      CREATE INDEX request_log_time ON request_log(time);
      CREATE INDEX request_log_key ON request_log(key_id, seq);
      CREATE INDEX request_log_request ON request_log(request_id);
    `,
  },
  {
    // Usage rows get an id of their own; the request id is indexed, not unique.
    version: 2,
    sql: `
      CREATE TABLE usage_v2 (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        request_id TEXT NOT NULL,
        time INTEGER NOT NULL,
        key_id TEXT,
        key_name TEXT,
        model TEXT NOT NULL,
        upstream_model TEXT,
        provider TEXT,
        operation TEXT NOT NULL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cached_tokens INTEGER,
        reasoning_tokens INTEGER,
        source TEXT,
        cost REAL NOT NULL,
        status INTEGER NOT NULL,
        end_reason TEXT NOT NULL,
        latency_ms REAL NOT NULL,
        ttfb_ms REAL
      );
      INSERT INTO usage_v2 (request_id, time, key_id, key_name, model, upstream_model, provider, operation, prompt_tokens,
        completion_tokens, cached_tokens, reasoning_tokens, source, cost, status, end_reason, latency_ms, ttfb_ms)
        SELECT request_id, time, key_id, key_name, model, upstream_model, provider, operation, prompt_tokens,
          completion_tokens, cached_tokens, reasoning_tokens, source, cost, status, end_reason, latency_ms, ttfb_ms FROM usage ORDER BY time;
      DROP TABLE usage;
      ALTER TABLE usage_v2 RENAME TO usage;
      CREATE INDEX usage_time ON usage(time);
      CREATE INDEX usage_key_time ON usage(key_id, time);
      CREATE INDEX usage_request ON usage(request_id);
    `,
  },
  {
    // What a translation between formats could not carry, per request (a JSON array of names).
    version: 3,
    sql: `ALTER TABLE request_log ADD COLUMN losses TEXT;`,
  },
  {
    // Responses API turns, for previous_response_id (input and output items as JSON).
    version: 4,
    sql: `
      CREATE TABLE responses (
        id TEXT PRIMARY KEY,
        key_id TEXT,
        provider TEXT,
        previous_response_id TEXT,
        model TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        input TEXT NOT NULL,
        output TEXT NOT NULL
      );
      CREATE INDEX responses_created ON responses(created_at);
    `,
  },
  {
    // Asynchronous (video) tasks: see tasks.ts.
    version: 5,
    sql: TASKS_MIGRATION,
  },
  {
    // What calls priced by unit used: images made, seconds of audio or video, characters spoken.
    version: 6,
    sql: `
      ALTER TABLE usage ADD COLUMN images INTEGER;
      ALTER TABLE usage ADD COLUMN seconds REAL;
      ALTER TABLE usage ADD COLUMN characters INTEGER;
    `,
  },
  {
    // A request with one attempt, at the back end and model of its row, that answered: the
    // attempt as two numbers, its status and milliseconds, with `attempts` left NULL (see
    // SqliteRequestLog.record). Anything else keeps its attempts as JSON text in `attempts`.
    version: 7,
    sql: `
      ALTER TABLE request_log ADD COLUMN attempt_status INTEGER;
      ALTER TABLE request_log ADD COLUMN attempt_ms REAL;
    `,
  },
  {
    // The spill files written (see SqliteDb.spill), by id: each is written once, whoever opens it.
    version: 8,
    sql: `CREATE TABLE spill_imports (id TEXT PRIMARY KEY, file TEXT NOT NULL, rows INTEGER NOT NULL, imported_at INTEGER NOT NULL);`,
  },
  {
    // The one attempt's back-end request id, beside its status and milliseconds (version 7).
    version: 9,
    sql: `ALTER TABLE request_log ADD COLUMN attempt_upstream_id TEXT;`,
  },
  {
    // Prompt tokens written to the back end's cache (a Messages API back end's cache_creation_input_tokens),
    // which a vendor prices above plain input: with cached_tokens, what explains a row's cost.
    version: 10,
    sql: `ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER;`,
  },
];

/**
 * The tables whose rows a closing gateway keeps in a spill file when the store is locked: every
 * table written by a queue (a Responses turn too, which a later previous_response_id names).
 */
type SpillTable = 'usage' | 'request_log' | 'responses';
const SPILL_TABLES: readonly SpillTable[] = ['usage', 'request_log', 'responses'];
/** How the log names each spill table's rows (as the queues' callbacks name them). */
const SPILL_WHAT: Readonly<Record<SpillTable, string>> = { usage: 'usage', request_log: 'request log', responses: 'responses' };

interface KeyRow {
  id: string;
  name: string;
  hash: string;
  prefix: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
  models: string | null;
  rpm: number | null;
  tpm: number | null;
  max_concurrent: number | null;
  budget: number | null;
  spent: number;
  source: KeyRecord['source'];
}

export interface SqliteStoreOptions {
  /** A file path or `:memory:`. */
  file: string;
  queue?: BatchQueueOptions;
  onWriteError?(what: string, error: unknown, lost: number): void;
  /** A queue found the file locked by another process: its rows wait and are tried again (told once a busy spell). */
  onWriteBusy?(what: string, error: unknown): void;
  /**
   * At close, the file was still locked by another process: `rows` rows were kept in `file`
   * instead, to be written the next time the store opens (see `onSpillWritten`).
   */
  onSpilled?(what: string, rows: number, file: string): void;
  /** Rows a closing gateway kept in a spill file were written to the store as it opened. */
  onSpillWritten?(what: string, rows: number, file: string): void;
  /** A spill file could not be written now (the store locked, the file unreadable): it stays for the next opening. */
  onSpillFailed?(what: string, error: unknown, file: string): void;
  /**
   * The file at the store's path is no longer the one this process opened (`gone`: removed, or
   * replaced by another), or is that file again (`gone` false). What is written meanwhile goes to
   * the file this process holds open, which no other process (the CLI, the next start) can see.
   * Checked once a second, off the request path; only given, the check runs.
   */
  onFileGone?(gone: boolean, file: string): void;
  /**
   * The file was migrated by a newer version than this one (an upgrade rolled back): this one
   * still opens it, but does not know what the migrations past `known` changed.
   */
  onNewerSchema?(found: number, known: number): void;
  /**
   * How long a write waits for another process's lock before it gives way (SQLite's busy
   * timeout; default 5 s, what a short CLI command may wait). SQLite waits on the calling
   * thread: the gateway sets it short, and its queues try again later instead (see BUSY_TIMEOUT_MS).
   */
  busyTimeoutMs?: number;
  /**
   * Checkpoint the write-ahead log on a worker thread every `intervalMs` instead of inside the
   * commits of this connection (the long-running gateway does; the CLI's short commands do not).
   */
  backgroundCheckpoint?: {
    intervalMs: number;
    /** The log's length (pages) past which this connection copies the rest itself; default 4,000 (16 MB). */
    logLimitPages?: number;
    onMessage?(message: CheckpointMessage): void;
    /** A round that failed (the thread goes on; after three in a row, `onFallback`). */
    onError?(error: string): void;
    onFallback?(reason: string): void;
  };
}

/** SQLite's own threshold for checkpointing inside a commit: the log's length in pages. */
const AUTOCHECKPOINT_PAGES = 1000;
/** A log this long after the thread's round (16 MB): the thread is not keeping up, the connection steps in. */
const LOG_LIMIT_PAGES = 4000;
/** What the log file is cut back to when it restarts after growing past it. */
const LOG_FILE_LIMIT_BYTES = 32 * 1024 * 1024;
/**
 * The connection's page cache, in KiB: SQLite's own default, where better-sqlite3 builds it with
 * 16 MB. The gateway's writes append, so a batch touches a few dozen pages (the right edge of each
 * table and index, a key's place in the per-key index), and pages written once are rarely needed
 * again; a report that reads old ones gets them from the OS's cache. The 16 MB cache filled with
 * such pages under load: about 15 MB more resident memory after a benchmark run.
 */
const PAGE_CACHE_KIB = 2000;
/**
 * The gateway's busy timeout: a write that finds the file locked by another process (the CLI, a
 * second gateway, an operator's `sqlite3` session, a VACUUM) waits this long on the event loop,
 * then gives way; the batch waits and is tried again (BatchQueue's `busy`), a request that must
 * write at once gets a 503 (`store_busy`). At 5 s, as before, a lock held by another process
 * stopped every request for 5 s, and the batch was lost; at 100 ms, each try held the event loop
 * that long (two queues: about 0.2 s every few seconds while the lock lasted).
 */
export const BUSY_TIMEOUT_MS = 10;
/** The busy timeout of a store that opens or closes (migrations, its queues' last batches): nothing is served then. */
const PATIENT_BUSY_TIMEOUT_MS = 5000;

/**
 * `dir` and the folders above it that are missing, one level at a time: node 20's
 * `mkdirSync(dir, { recursive: true })` never returns for a path under /proc (it retries the
 * same failing step forever, ignoring SIGTERM), where this fails with the step's own error.
 */
function makeFolder(dir: string): void {
  const missing: string[] = [];
  for (let at = path.resolve(dir); !existsSync(at); at = path.dirname(at)) {
    missing.unshift(at);
    if (path.dirname(at) === at) break;
  }
  for (const level of missing) {
    try {
      mkdirSync(level);
    } catch (error) {
      if ((error as NodeJS.ErrnoException)?.code !== 'EEXIST') throw error;
    }
  }
}

/** Whether an error is SQLite's "the file is locked by another connection for now". */
export function isStoreBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/**
 * Whether a write failed for a reason of the file's, not of the rows': locked by another process,
 * the disk full, an I/O error, the file or its folder made read-only or taken away. Rows that
 * failed so are kept and written again later (and kept in a file at close), as for a lock; a
 * write the rows themselves make fail (a constraint) would fail again, and is given up.
 */
export function isStoreUnwritableForNow(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return isStoreBusy(error) || (typeof code === 'string' && /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN)/.test(code));
}

/**
 * Whether a write failed because of one row of it (a constraint it breaks, a value SQLite cannot
 * bind or hold), not because the store refuses every write (a corrupt file, a missing table, a
 * closed connection): the rest of its batch can still be written (see BatchQueue's itemRefused).
 */
export function isRowRefused(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') return /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code);
  // better-sqlite3's own refusal of a value it cannot bind; not its closed connection.
  return (error instanceof TypeError || error instanceof RangeError) && !/not open/i.test(error.message);
}

/** Rounds in a row that fail before the connection checkpoints in its commits again. */
const FAILURES_BEFORE_FALLBACK = 3;

/**
 * The write-ahead log copied into the database file on a worker thread. SQLite otherwise does it
 * inside the commit that takes the log past 1,000 pages: at a few thousand calls a second, about
 * once a second the gateway's event loop stops for the copy of 4 MB and two fsyncs, which on a
 * busy or networked disk take milliseconds each, for every request in flight.
 *
 * The log restarts from its beginning only when this connection begins a write after a copy
 * that caught up with it. The thread's copies race this connection's commits: when commits come
 * faster than a copy and its fsyncs take, the log would grow for ever. So when it passes 16 MB
 * after a round, this connection copies the rest itself, between two of its commits (it is the
 * only writer, so its copy catches up), and its next write restarts the log. If the thread fails
 * three rounds in a row or stops, the connection checkpoints in its commits again.
 */
class BackgroundCheckpoint {
  private readonly worker: Worker;
  private stopping = false;
  private failures = 0;
  private readonly exited: Promise<void>;

  constructor(
    private readonly db: Database.Database,
    file: string,
    private readonly options: NonNullable<SqliteStoreOptions['backgroundCheckpoint']>,
  ) {
    db.pragma('wal_autocheckpoint = 0');
    db.pragma(`journal_size_limit = ${LOG_FILE_LIMIT_BYTES}`);
    const data: CheckpointWorkerData = { file, intervalMs: options.intervalMs };
    // A thread that holds one connection and a timer: the smallest heaps V8 allows.
    this.worker = new Worker(new URL('./checkpoint-worker.js', import.meta.url), {
      workerData: data,
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 8 },
    });
    this.worker.on('message', (message: CheckpointMessage) => this.onMessage(message));
    this.worker.on('error', (error) => this.fallBack(`the checkpoint thread failed: ${threadError(error)}`));
    this.exited = new Promise((resolve) =>
      this.worker.on('exit', (code) => {
        this.fallBack(`the checkpoint thread stopped (exit ${code})`);
        resolve();
      }),
    );
    // After the listeners: adding a 'message' listener holds the process open again.
    this.worker.unref();
  }

  private onMessage(message: CheckpointMessage): void {
    this.options.onMessage?.(message);
    if (this.stopping) return;
    if (message.kind === 'failed') {
      this.options.onError?.(message.error);
      if (++this.failures >= FAILURES_BEFORE_FALLBACK) this.fallBack(`${this.failures} checkpoints in a row failed: ${message.error}`);
      return;
    }
    this.failures = 0;
    if (message.log >= (this.options.logLimitPages ?? LOG_LIMIT_PAGES) && this.db.open) {
      try {
        this.db.pragma('wal_checkpoint(PASSIVE)');
      } catch (error) {
        this.options.onError?.(String(error));
      }
    }
  }

  private fallBack(reason: string): void {
    if (this.stopping) return;
    this.stopping = true;
    if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
    // A thread whose rounds keep failing is let go too (one that already stopped ignores this).
    this.worker.postMessage('stop');
    this.options.onFallback?.(reason);
  }

  /** Stop the thread: it checkpoints once more and closes its connection on its own time. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.worker.postMessage('stop');
  }

  /** Stop the thread and wait until it has closed its connection (or `timeoutMs` passed: then it is ended). */
  async stopAndWait(timeoutMs: number): Promise<void> {
    this.stop();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
    const outcome = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (outcome === 'late') await this.worker.terminate();
  }
}

/**
 * What a worker thread's uncaught error says. An Error arrives as one; SQLite's own error class
 * does not survive the copy between threads and arrives as a plain object with only its `code`.
 */
function threadError(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error !== null && typeof error === 'object') {
    const { code, message } = error as { code?: unknown; message?: unknown };
    const parts = [code, message].filter((part): part is string => typeof part === 'string' && part !== '');
    if (parts.length > 0) return parts.join(': ');
  }
  return String(error);
}

/** Where a `storage.url` points, resolved against the configuration's folder. */
export function sqliteFile(url: string, baseDir: string): string {
  if (url === ':memory:') return url;
  const plain = url.replace(/^sqlite:(\/\/)?/, '');
  return path.resolve(baseDir, plain);
}

/** How often the gateway checks that its store's path still leads to the file it has open. */
const FILE_CHECK_MS = 1000;

/** The open database and what its three stores share. */
class SqliteDb {
  readonly db: Database.Database;
  /** Cost recorded but not yet written, per key: part of `spent` until the batch is written. */
  readonly pendingCost = new Map<string, number>();
  /** Key cache by hash (null = known not to exist). */
  readonly byHash = new Map<string, KeyRecord | null>();
  /**
   * The same cached records by key id, so that a call's cost reaches its key's cached record in
   * one lookup: the hash cache may hold up to 50,000 entries (unknown hashes included), too many
   * to walk on every metered call.
   */
  readonly cachedById = new Map<string, KeyRecord>();
  /** Cached count of keys ever made; undefined when it must be read again. */
  active: number | undefined;
  /** keys.spent as written in the file, per key id, so budget checks do not read the disk per call. */
  readonly writtenSpent = new Map<string, number>();
  private dataVersion: number;
  private checkedAt = 0;
  private readonly checkpoints: BackgroundCheckpoint | undefined;

  private readonly file: string;

  constructor(options: SqliteStoreOptions) {
    const { file, backgroundCheckpoint, busyTimeoutMs = PATIENT_BUSY_TIMEOUT_MS } = options;
    this.file = file;
    if (file !== ':memory:') makeFolder(path.dirname(file));
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    // Patient while it opens (migrations), then as asked.
    this.db.pragma(`busy_timeout = ${PATIENT_BUSY_TIMEOUT_MS}`);
    this.db.pragma(`cache_size = -${PAGE_CACHE_KIB}`);
    this.migrate(options.onNewerSchema);
    this.writeSpills(options.onSpillWritten, options.onSpillFailed);
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    this.dataVersion = this.readDataVersion();
    if (backgroundCheckpoint && file !== ':memory:') this.checkpoints = new BackgroundCheckpoint(this.db, file, backgroundCheckpoint);
    if (options.onFileGone && file !== ':memory:') this.watchFile(options.onFileGone);
  }

  private fileWatch: NodeJS.Timeout | undefined;

  /** Tell `onGone` when the path stops (or starts again) leading to the file opened (see onFileGone). */
  private watchFile(onGone: NonNullable<SqliteStoreOptions['onFileGone']>): void {
    const opened = statSync(this.file);
    let gone = false;
    let checking = false;
    this.fileWatch = setInterval(() => {
      if (checking) return;
      checking = true;
      stat(this.file)
        .then(
          (now) => now.ino === opened.ino && now.dev === opened.dev,
          // Gone only when nothing is there; another failure (EACCES, EMFILE) says nothing of the file.
          (error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? false : !gone),
        )
        .then((same) => {
          if (same !== gone || !this.db.open) return;
          gone = !same;
          onGone(gone, this.file);
        })
        .catch(() => undefined)
        .finally(() => {
          checking = false;
        });
    }, FILE_CHECK_MS);
    this.fileWatch.unref();
  }

  close(): void {
    clearInterval(this.fileWatch);
    this.checkpoints?.stop();
    if (this.db.open) this.db.close();
  }

  /**
   * Run a write that must not give way to another process's lock after the gateway's short wait
   * (the keys of the configuration at start, a video task's vendor id, the queues' last batches
   * at close): it waits up to 5 s, as SQLite's wait does, on the event loop. Rare writes only.
   */
  patiently<T>(write: () => T): T {
    if (!this.db.open) return write();
    const current = this.db.pragma('busy_timeout', { simple: true }) as number;
    if (current >= PATIENT_BUSY_TIMEOUT_MS) return write();
    this.db.pragma(`busy_timeout = ${PATIENT_BUSY_TIMEOUT_MS}`);
    try {
      return write();
    } finally {
      this.db.pragma(`busy_timeout = ${current}`);
    }
  }

  /**
   * Close once the checkpoint thread has closed its connection: this one is then the last, and
   * SQLite copies what is left of the log into the file and deletes the log as it closes.
   */
  async closeAfterCheckpoints(): Promise<void> {
    await this.checkpoints?.stopAndWait(2000);
    this.close();
  }

  /** Where a closing gateway keeps `table`'s rows it could not write (none for a store in memory). */
  spillFile(table: SpillTable): string | undefined {
    return this.file === ':memory:' ? undefined : `${this.file}.unwritten-${table}.jsonl`;
  }

  /**
   * Keep rows the store could not take at close in `table`'s spill file, appended: a line naming
   * the batch (an id of its own) and its columns, then a line per row (its values as a JSON
   * array). The next process to open the store writes them (see writeSpills). Throws if the file
   * cannot be written.
   */
  spill(table: SpillTable, columns: readonly string[], rows: unknown[][]): string {
    const file = this.spillFile(table);
    if (!file) throw new Error('the store is in memory');
    const lines = [JSON.stringify({ spill: randomUUID(), table, columns })];
    for (const row of rows) lines.push(JSON.stringify(row));
    // On a line of its own even after a line an earlier spill did not finish.
    appendFileSync(file, `\n${lines.join('\n')}\n`, { mode: 0o600 });
    // The other queues do not wait again: the lock outlasted the long wait already.
    this.db.pragma('busy_timeout = 0');
    return file;
  }

  /**
   * Write the rows of every spill file into their table, a file in one transaction with the ids
   * of its batches, so that a batch is written once even if two processes open the store at once
   * or this one stops before it deletes the file; a usage row's cost is added to its key's spent
   * amount, as when it is written by the queue. A file is first moved aside under a name of its
   * own (a gateway closing at that moment starts a new one), and one left aside by a process that
   * stopped is taken up too. A line that is not whole (a spill cut short) is left out, and so is a
   * row the table refuses. A file that cannot be written now (the store locked, the file
   * unreadable) stays for the next opening and is reported: the store opens all the same.
   */
  private writeSpills(onWritten: SqliteStoreOptions['onSpillWritten'], onFailed: SqliteStoreOptions['onSpillFailed']): void {
    if (this.file === ':memory:') return;
    const dir = path.dirname(this.file);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    /** The store found locked by another process: the other files are not tried (each would wait again). */
    let locked: unknown;
    for (const table of SPILL_TABLES) {
      const file = this.spillFile(table)!;
      const what = SPILL_WHAT[table];
      const aside = `${path.basename(file)}.importing-`;
      const files = names.filter((name) => name.startsWith(aside)).map((name) => path.join(dir, name));
      if (names.includes(path.basename(file))) {
        const moved = `${file}.importing-${process.pid}-${randomUUID()}`;
        try {
          renameSync(file, moved);
          files.push(moved);
        } catch (error) {
          // ENOENT: another process took it first. Anything else (no permission): it stays, and is told.
          if ((error as NodeJS.ErrnoException)?.code !== 'ENOENT') onFailed?.(what, error, file);
        }
      }
      for (const taken of files) {
        if (locked !== undefined) {
          onFailed?.(what, locked, taken);
          continue;
        }
        try {
          const written = this.writeSpill(table, taken);
          rmSync(taken, { force: true });
          if (written > 0) onWritten?.(what, written, taken);
        } catch (error) {
          if ((error as NodeJS.ErrnoException)?.code === 'ENOENT') continue; // another process wrote it
          if (isStoreBusy(error)) locked = error;
          onFailed?.(what, error, taken);
        }
      }
    }
  }

  /** One spill file's batches written (see writeSpills); the rows written. */
  private writeSpill(table: SpillTable, file: string): number {
    const batches: Array<{ id: string; columns: string[]; rows: unknown[][] }> = [];
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        continue;
      }
      const head = value as { spill?: unknown; table?: unknown; columns?: unknown } | null;
      if (head && typeof head.spill === 'string' && head.table === table && Array.isArray(head.columns) && head.columns.every((c) => typeof c === 'string' && /^[a-z_]+$/.test(c))) {
        batches.push({ id: head.spill, columns: head.columns as string[], rows: [] });
      } else if (Array.isArray(value) && batches.length > 0 && value.length === batches[batches.length - 1]!.columns.length) {
        batches[batches.length - 1]!.rows.push(value);
      }
    }
    let written = 0;
    const done = this.db.prepare<[string]>('SELECT 1 FROM spill_imports WHERE id = ?');
    const mark = this.db.prepare('INSERT INTO spill_imports (id, file, rows, imported_at) VALUES (?, ?, ?, ?)');
    const addSpent = this.db.prepare('UPDATE keys SET spent = spent + ? WHERE id = ?');
    // IMMEDIATE: the write lock from the start, so that a busy store is waited for (its busy
    // timeout) rather than failing at the first write after a read.
    this.db
      .transaction(() => {
        for (const batch of batches) {
          if (done.get(batch.id)) continue;
          // Column names were checked above (letters and underscores), the table is one of ours, and the values are bound.
          const insert = this.db.prepare(`INSERT INTO ${table} (${batch.columns.join(', ')}) VALUES (${batch.columns.map(() => '?').join(', ')})`);
          const key = batch.columns.indexOf('key_id');
          const cost = batch.columns.indexOf('cost');
          for (const row of batch.rows) {
            try {
              insert.run(...row);
            } catch (error) {
              if (isStoreBusy(error)) throw error;
              continue; // a row the table refuses
            }
            if (table === 'usage' && typeof row[key] === 'string' && typeof row[cost] === 'number' && row[cost] > 0) addSpent.run(row[cost], row[key]);
            written++;
          }
          mark.run(batch.id, path.basename(file), batch.rows.length, Date.now());
        }
      })
      .immediate();
    return written;
  }

  private migrate(onNewerSchema?: SqliteStoreOptions['onNewerSchema']): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
    const applied = new Set(this.db.prepare<[], { version: number }>('SELECT version FROM schema_migrations').all().map((r) => r.version));
    const known = Math.max(...MIGRATIONS.map((m) => m.version));
    const found = Math.max(0, ...applied);
    if (found > known) onNewerSchema?.(found, known);
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      this.db.transaction(() => {
        this.db.exec(migration.sql);
        this.db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(migration.version, Date.now());
      })();
    }
  }

  /** Prepared once: `db.pragma()` compiles its statement on every call. */
  private dataVersionStmt: Database.Statement<[], number> | undefined;

  private readDataVersion(): number {
    this.dataVersionStmt ??= this.db.prepare<[], number>('PRAGMA data_version').pluck();
    return this.dataVersionStmt.get()!;
  }

  /** Drop cached keys when another connection (the CLI) changed the file; at most one check per 50 ms. */
  freshen(): void {
    const now = Date.now();
    if (now - this.checkedAt < 50) return;
    this.checkedAt = now;
    const version = this.readDataVersion();
    if (version !== this.dataVersion) {
      this.dataVersion = version;
      this.invalidate();
    }
  }

  /** Remember a key looked up by its hash (null: no key has that hash). */
  cacheByHash(hash: string, found: KeyRecord | null): void {
    // Unknown hashes must not grow memory.
    if (this.byHash.size > 50_000) {
      this.byHash.clear();
      this.cachedById.clear();
    }
    this.byHash.set(hash, found);
    if (found) this.cachedById.set(found.id, found);
  }

  invalidate(): void {
    this.byHash.clear();
    this.cachedById.clear();
    this.active = undefined;
    this.writtenSpent.clear();
  }

  addPending(keyId: string, cost: number): void {
    this.pendingCost.set(keyId, (this.pendingCost.get(keyId) ?? 0) + cost);
    const cached = this.cachedById.get(keyId);
    if (cached) cached.spent += cost;
  }

  /** The cost is now in keys.spent (or was lost and reported): no longer pending. */
  settlePending(keyId: string, cost: number): void {
    const left = (this.pendingCost.get(keyId) ?? 0) - cost;
    if (left <= 1e-12) this.pendingCost.delete(keyId);
    else this.pendingCost.set(keyId, left);
  }
}

function keyRecord(row: KeyRow, pending: number): KeyRecord {
  return {
    id: row.id,
    name: row.name,
    hash: row.hash,
    prefix: row.prefix,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    models: row.models ? (JSON.parse(row.models) as string[]) : null,
    rpm: row.rpm,
    tpm: row.tpm,
    maxConcurrent: row.max_concurrent,
    budget: row.budget,
    spent: row.spent + pending,
    source: row.source,
  };
}

function keyParams(id: string, key: NewKey, now: number) {
  return {
    id,
    name: key.name,
    hash: hashSecret(key.secret),
    prefix: secretPrefix(key.secret),
    created_at: now,
    updated_at: now,
    expires_at: key.expiresAt ?? null,
    models: key.models ? JSON.stringify(key.models) : null,
    rpm: key.rpm ?? null,
    tpm: key.tpm ?? null,
    max_concurrent: key.maxConcurrent ?? null,
    budget: key.budget ?? null,
    source: key.source,
  };
}

const KEY_COLUMNS: Record<keyof KeyPatch, string> = {
  name: 'name',
  expiresAt: 'expires_at',
  models: 'models',
  rpm: 'rpm',
  tpm: 'tpm',
  maxConcurrent: 'max_concurrent',
  budget: 'budget',
};

/** Keys: looked up by hash from memory; every statement binds its values. */
class SqliteKeyStore implements KeyStore {
  private readonly byHashStmt;
  private readonly byId;
  private readonly byName;
  private readonly all;
  private readonly insertStmt;
  private readonly updateConfigStmt;
  private readonly revokeStmt;
  private readonly countAll;

  constructor(private readonly s: SqliteDb) {
    const db = s.db;
    this.byHashStmt = db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE hash = ?');
    this.byId = db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE id = ?');
    this.byName = db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE name = ? ORDER BY created_at DESC, rowid DESC LIMIT 1');
    this.all = db.prepare<[], KeyRow>('SELECT * FROM keys ORDER BY created_at, id');
    this.insertStmt = db.prepare(
      `INSERT INTO keys (id, name, hash, prefix, created_at, expires_at, revoked_at, models, rpm, tpm, max_concurrent, budget, spent, source, updated_at)
       VALUES (@id, @name, @hash, @prefix, @created_at, @expires_at, NULL, @models, @rpm, @tpm, @max_concurrent, @budget, 0, @source, @updated_at)`,
    );
    this.updateConfigStmt = db.prepare(
      `UPDATE keys SET hash = @hash, prefix = @prefix, expires_at = @expires_at, revoked_at = NULL, models = @models, rpm = @rpm,
         tpm = @tpm, max_concurrent = @max_concurrent, budget = @budget, updated_at = @updated_at WHERE id = @id`,
    );
    this.revokeStmt = db.prepare('UPDATE keys SET revoked_at = ?, updated_at = ? WHERE id = ? AND revoked_at IS NULL');
    this.countAll = db.prepare<[], { n: number }>('SELECT COUNT(*) AS n FROM keys');
  }

  private record(row: KeyRow): KeyRecord {
    return keyRecord(row, this.s.pendingCost.get(row.id) ?? 0);
  }

  findByHash(hash: string): KeyRecord | undefined {
    this.s.freshen();
    const cached = this.s.byHash.get(hash);
    if (cached !== undefined) return cached ?? undefined;
    const row = this.byHashStmt.get(hash);
    const found = row ? this.record(row) : null;
    this.s.cacheByHash(hash, found);
    return found ?? undefined;
  }

  async get(idOrName: string): Promise<KeyRecord | undefined> {
    const row = this.byId.get(idOrName) ?? this.byName.get(idOrName);
    return row ? this.record(row) : undefined;
  }

  async list(): Promise<KeyRecord[]> {
    return this.all.all().map((row) => this.record(row));
  }

  async create(key: NewKey): Promise<KeyRecord> {
    const id = `key_${randomBytes(8).toString('hex')}`;
    this.insertStmt.run(keyParams(id, key, Date.now()));
    this.s.invalidate();
    return (await this.get(id))!;
  }

  async update(id: string, patch: KeyPatch): Promise<KeyRecord | undefined> {
    const sets: string[] = [];
    const values: Record<string, unknown> = { id, updated_at: Date.now() };
    for (const [field, column] of Object.entries(KEY_COLUMNS) as Array<[keyof KeyPatch, string]>) {
      if (!(field in patch)) continue;
      sets.push(`${column} = @${column}`);
      const value = patch[field];
      values[column] = field === 'models' ? (value ? JSON.stringify(value) : null) : (value ?? null);
    }
    if (sets.length > 0) {
      // Column names come from the fixed table above and values are bound: no caller text reaches the SQL.
      this.s.db.prepare(`UPDATE keys SET ${sets.join(', ')}, updated_at = @updated_at WHERE id = @id`).run(values);
      this.s.invalidate();
    }
    return this.get(id);
  }

  async revoke(id: string): Promise<boolean> {
    const now = Date.now();
    const changed = this.revokeStmt.run(now, now, id).changes === 1;
    if (changed) this.s.invalidate();
    return changed;
  }

  async syncConfigKeys(keys: NewKey[]): Promise<void> {
    const now = Date.now();
    const ids = new Set<string>();
    // At start, before anything is served: it may wait for another process's lock.
    this.s.patiently(() => this.s.db.transaction(() => {
      for (const key of keys) {
        const id = `cfg_${hashSecret(`config-key:${key.name}`).slice(0, 16)}`;
        ids.add(id);
        const params = keyParams(id, key, now);
        const clash = this.byHashStmt.get(params.hash);
        if (clash && clash.id !== id) throw new Error(`the secret of auth.keys '${key.name}' is already the secret of key '${clash.name}'`);
        const named = this.byName.get(key.name);
        if (named && named.id !== id && named.revoked_at === null) {
          throw new Error(`auth.keys '${key.name}': a key made with the CLI or admin API (${named.id}) already has that name`);
        }
        if (this.byId.get(id)) this.updateConfigStmt.run(params);
        else this.insertStmt.run(params);
      }
      for (const row of this.all.all()) {
        if (row.source === 'config' && !ids.has(row.id) && row.revoked_at === null) this.revokeStmt.run(now, now, row.id);
      }
      // BEGIN IMMEDIATE: the write lock first. A transaction that reads before it writes cannot
      // wait for another process's lock when it comes to write (SQLite answers busy at once).
    }).immediate());
    this.s.invalidate();
  }

  count(): number {
    this.s.freshen();
    this.s.active ??= this.countAll.get()!.n;
    return this.s.active;
  }

  spent(id: string): number {
    this.s.freshen();
    let written = this.s.writtenSpent.get(id);
    if (written === undefined) {
      written = this.byId.get(id)?.spent ?? 0;
      this.s.writtenSpent.set(id, written);
    }
    return written + (this.s.pendingCost.get(id) ?? 0);
  }
}

/** Rows per multi-row INSERT: fewer statement runs per batch, far under SQLite's limit of bound values. */
const ROWS_PER_INSERT = 25;

/**
 * An INSERT of many rows: `ROWS_PER_INSERT` rows per statement run, the rest one at a time, in
 * the order given (so AUTOINCREMENT ids follow it). Binding from one reused array costs less per
 * row than a statement run per row.
 *
 * The statements are `INSERT OR FAIL`: with the default conflict clause (ABORT) SQLite keeps a
 * statement journal for every statement that writes several rows inside a transaction, so that
 * one failing statement can be undone alone, and past 64 KiB it spills that journal to a temporary
 * file (two disk writes per page, about one page per call here). A batch is one transaction that
 * is rolled back whole when any of its statements throws, so the journal bought nothing.
 */
class MultiRowInsert<T> {
  private readonly many: Database.Statement<unknown[]>;
  private readonly one: Database.Statement<unknown[]>;
  private readonly manyParams: unknown[];
  private readonly oneParams: unknown[];

  constructor(
    db: Database.Database,
    /** `table (columns...)`: what follows INSERT OR FAIL INTO. */
    into: string,
    private readonly width: number,
    /** Writes one row's values into `out` from index `at`, in column order. */
    private readonly bind: (row: T, out: unknown[], at: number) => void,
  ) {
    const tuple = `(${new Array<string>(width).fill('?').join(', ')})`;
    const head = `INSERT OR FAIL INTO ${into}`;
    this.many = db.prepare(`${head} VALUES ${new Array<string>(ROWS_PER_INSERT).fill(tuple).join(', ')}`);
    this.one = db.prepare(`${head} VALUES ${tuple}`);
    this.manyParams = new Array<unknown>(width * ROWS_PER_INSERT).fill(null);
    this.oneParams = new Array<unknown>(width).fill(null);
  }

  run(rows: readonly T[]): void {
    let i = 0;
    try {
      for (; i + ROWS_PER_INSERT <= rows.length; i += ROWS_PER_INSERT) {
        for (let j = 0; j < ROWS_PER_INSERT; j++) this.bind(rows[i + j]!, this.manyParams, j * this.width);
        // As arguments, not one array: better-sqlite3 then reads each value from the call's
        // arguments instead of through V8's API one element at a time (2.7 against 4.5-5.8 us a row).
        this.many.run(...this.manyParams);
      }
      for (; i < rows.length; i++) {
        this.bind(rows[i]!, this.oneParams, 0);
        this.one.run(...this.oneParams);
      }
    } finally {
      // The arrays outlive the batch: they must not keep its rows' strings alive.
      this.manyParams.fill(null);
      this.oneParams.fill(null);
    }
  }
}

const USAGE_COLUMNS = `request_id AS requestId, time, key_id AS keyId, key_name AS keyName, model, upstream_model AS upstreamModel,
  provider, operation, prompt_tokens AS promptTokens, completion_tokens AS completionTokens, cached_tokens AS cachedTokens,
  reasoning_tokens AS reasoningTokens, source, cost, status, end_reason AS endReason, latency_ms AS latencyMs, ttfb_ms AS ttfbMs,
  images, seconds, characters, cache_write_tokens AS cacheWriteTokens`;

/** The usage table's columns as a batch inserts them, and the kind of value each holds. */
const USAGE_INSERT: ReadonlyArray<readonly [string, ColumnKind]> = [
  ['request_id', 'text'],
  ['time', 'number'],
  ['key_id', 'text'],
  ['key_name', 'text'],
  ['model', 'text'],
  ['upstream_model', 'text'],
  ['provider', 'text'],
  ['operation', 'text'],
  ['prompt_tokens', 'number'],
  ['completion_tokens', 'number'],
  ['cached_tokens', 'number'],
  ['reasoning_tokens', 'number'],
  ['source', 'text'],
  ['cost', 'number'],
  ['status', 'number'],
  ['end_reason', 'text'],
  ['latency_ms', 'number'],
  ['ttfb_ms', 'number'],
  ['images', 'number'],
  ['seconds', 'number'],
  ['characters', 'number'],
  ['cache_write_tokens', 'number'],
];
const USAGE_KEY = 2;
const USAGE_COST = 13;

/**
 * The usage ledger: one row per call (the metering plugin records each request once); its cost
 * is added to the key's spent in the same transaction.
 */
const USAGE_COLUMNS_WRITTEN = USAGE_INSERT.map(([name]) => name);

/** Rows of `rows`, each as its values in column order. */
function rowValues(rows: ColumnRows, batch: readonly number[]): unknown[][] {
  return batch.map((row) => {
    const values = new Array<unknown>(rows.width);
    rows.copyRow(row, values, 0);
    return values;
  });
}

class SqliteUsageLedger implements UsageLedger {
  private readonly queue: BatchQueue<number>;
  /** The rows waiting, as columns in USAGE_INSERT's order (see ColumnRows). */
  private readonly rows = new ColumnRows(USAGE_INSERT.map(([, kind]) => kind));

  constructor(
    private readonly s: SqliteDb,
    options: SqliteStoreOptions,
  ) {
    const rows = this.rows;
    const insert = new MultiRowInsert<number>(s.db, `usage (${USAGE_INSERT.map(([name]) => name).join(', ')})`, rows.width, (row, out, at) => rows.copyRow(row, out, at));
    const keyOf = (row: number) => rows.get(row, USAGE_KEY) as string | null;
    const costOf = (row: number) => rows.get(row, USAGE_COST) as number;
    const addSpent = s.db.prepare('UPDATE keys SET spent = spent + ? WHERE id = ?');
    const write = s.db.transaction((batch: number[]) => {
      insert.run(batch);
      // One update per key and batch, with the batch's costs summed in row order.
      const costs = new Map<string, number>();
      for (const row of batch) {
        const keyId = keyOf(row);
        const cost = costOf(row);
        if (keyId && cost > 0) costs.set(keyId, (costs.get(keyId) ?? 0) + cost);
      }
      for (const [keyId, cost] of costs) addSpent.run(cost, keyId);
    });
    /** The batch's costs out of what is pending per key: written, or given up. */
    const settle = (batch: number[]): void => {
      for (const row of batch) {
        const keyId = keyOf(row);
        if (keyId && costOf(row) > 0) s.settlePending(keyId, costOf(row));
      }
    };
    this.queue = new BatchQueue<number>(
      (batch) => {
        // A batch that fails stays pending: it is tried again (a busy file) or given up (discarded).
        write(batch);
        // Committed: the cached written amounts follow the file.
        for (const row of batch) {
          const keyId = keyOf(row);
          const written = keyId ? s.writtenSpent.get(keyId) : undefined;
          if (written !== undefined && costOf(row) > 0) s.writtenSpent.set(keyId!, written + costOf(row));
        }
        settle(batch);
      },
      {
        ...options.queue,
        onError: (error, lost) => options.onWriteError?.('usage', error, lost),
        drained: () => rows.clear(),
        busy: isStoreUnwritableForNow,
        itemRefused: isRowRefused,
        onBusy: (error) => options.onWriteBusy?.('usage', error),
        // Given up (logged as lost): the cost stays pending, so the key's spent, and its budget,
        // still count it for as long as this process runs.
        discarded: () => undefined,
        spill: (batch) => {
          const file = s.spill('usage', USAGE_COLUMNS_WRITTEN, rowValues(rows, batch));
          options.onSpilled?.('usage', batch.length, file);
        },
      },
    );
  }

  record(record: UsageRecord): void {
    if (record.keyId && record.cost > 0) this.s.addPending(record.keyId, record.cost);
    const rows = this.rows;
    const row = rows.add();
    rows.set(row, 0, record.requestId);
    rows.set(row, 1, record.time);
    rows.set(row, 2, record.keyId);
    rows.set(row, 3, record.keyName);
    rows.set(row, 4, record.model);
    rows.set(row, 5, record.upstreamModel);
    rows.set(row, 6, record.provider);
    rows.set(row, 7, record.operation);
    rows.set(row, 8, record.promptTokens);
    rows.set(row, 9, record.completionTokens);
    rows.set(row, 10, record.cachedTokens);
    rows.set(row, 11, record.reasoningTokens);
    rows.set(row, 12, record.source);
    rows.set(row, 13, record.cost);
    rows.set(row, 14, record.status);
    rows.set(row, 15, record.endReason);
    rows.set(row, 16, record.latencyMs);
    rows.set(row, 17, record.ttfbMs);
    rows.set(row, 18, record.images);
    rows.set(row, 19, record.seconds);
    rows.set(row, 20, record.characters);
    rows.set(row, 21, record.cacheWriteTokens);
    this.queue.push(row);
  }

  async totals(query: UsageTotalsQuery): Promise<UsageTotal[]> {
    this.queue.flushNow();
    const where: string[] = [];
    const params: Record<string, unknown> = {};
    if (query.since !== undefined) (where.push('time >= @since'), (params.since = query.since));
    if (query.until !== undefined) (where.push('time < @until'), (params.until = query.until));
    if (query.keyId !== undefined) (where.push('key_id = @keyId'), (params.keyId = query.keyId));
    if (query.model !== undefined) (where.push('model = @model'), (params.model = query.model));
    const groups = query.groupBy ?? [];
    const select: string[] = [];
    const groupBy: string[] = [];
    // The key's name now (a key renamed since keeps its rows under its new name); the ledger's
    // own only for a key the store no longer has.
    if (groups.includes('key')) {
      select.push('key_id AS key', 'COALESCE((SELECT name FROM keys WHERE keys.id = usage.key_id), MAX(key_name)) AS keyName');
      groupBy.push('key_id');
    }
    if (groups.includes('model')) (select.push('model'), groupBy.push('model'));
    if (groups.includes('day')) (select.push("strftime('%Y-%m-%d', time / 1000, 'unixepoch') AS day"), groupBy.push('day'));
    select.push(
      'COUNT(*) AS requests',
      'COALESCE(SUM(prompt_tokens), 0) AS promptTokens',
      'COALESCE(SUM(completion_tokens), 0) AS completionTokens',
      'COALESCE(SUM(cached_tokens), 0) AS cachedTokens',
      'COALESCE(SUM(cache_write_tokens), 0) AS cacheWriteTokens',
      'COALESCE(SUM(reasoning_tokens), 0) AS reasoningTokens',
      'COALESCE(SUM(images), 0) AS images',
      'COALESCE(SUM(seconds), 0) AS seconds',
      'COALESCE(SUM(characters), 0) AS characters',
      'COALESCE(SUM(cost), 0) AS cost',
    );
    const sql = `SELECT ${select.join(', ')} FROM usage ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      ${groupBy.length ? `GROUP BY ${groupBy.join(', ')} ORDER BY ${groupBy.join(', ')}` : ''}`;
    return this.s.db.prepare(sql).all(params) as UsageTotal[];
  }

  async list(query: { requestId?: string; keyId?: string; limit?: number }): Promise<UsageRecord[]> {
    this.queue.flushNow();
    const where: string[] = [];
    const params: Record<string, unknown> = { limit: Math.min(Math.max(query.limit ?? 100, 1), 10_000) };
    if (query.requestId !== undefined) (where.push('request_id = @requestId'), (params.requestId = query.requestId));
    if (query.keyId !== undefined) (where.push('key_id = @keyId'), (params.keyId = query.keyId));
    const sql = `SELECT ${USAGE_COLUMNS} FROM usage ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY seq DESC LIMIT @limit`;
    return this.s.db.prepare(sql).all(params) as UsageRecord[];
  }

  flush(): void {
    this.queue.flushNow();
  }

  close(): void {
    this.queue.close();
  }
}

const LOG_COLUMNS = `seq, time, request_id AS requestId, method, path, key_id AS keyId, key_name AS keyName, key_prefix AS keyPrefix,
  model, operation, provider, status, error_code AS errorCode, prompt_tokens AS promptTokens, completion_tokens AS completionTokens,
  cost, duration_ms AS durationMs, client_ip AS clientIp, user_agent AS userAgent, attempts, losses,
  attempt_status AS attemptStatus, attempt_ms AS attemptMs, attempt_upstream_id AS attemptUpstreamId`;

/** The request log's columns as a batch inserts them, and the kind of value each holds. */
const LOG_INSERT: ReadonlyArray<readonly [string, ColumnKind]> = [
  ['time', 'number'],
  ['request_id', 'text'],
  ['method', 'text'],
  ['path', 'text'],
  ['key_id', 'text'],
  ['key_name', 'text'],
  ['key_prefix', 'text'],
  ['model', 'text'],
  ['operation', 'text'],
  ['provider', 'text'],
  ['status', 'number'],
  ['error_code', 'text'],
  ['prompt_tokens', 'number'],
  ['completion_tokens', 'number'],
  ['cost', 'number'],
  ['duration_ms', 'number'],
  ['client_ip', 'text'],
  ['user_agent', 'text'],
  ['attempts', 'text'],
  ['losses', 'text'],
  ['attempt_status', 'number'],
  ['attempt_ms', 'number'],
  ['attempt_upstream_id', 'text'],
];

/**
 * The request's one attempt when the row can hold it as two numbers: it answered (a finite
 * status, no error), at the row's own back end and model, in a finite time.
 */
function oneAttempt(entry: RequestLogEntry): RequestLogEntry['attempts'][number] | undefined {
  if (entry.attempts.length !== 1) return undefined;
  const a = entry.attempts[0]!;
  if (a.error !== undefined || typeof a.status !== 'number' || !Number.isFinite(a.status) || !Number.isFinite(a.durationMs)) return undefined;
  if (typeof a.provider !== 'string' || a.provider !== entry.provider || typeof a.model !== 'string' || a.model !== entry.model) return undefined;
  return a;
}

/** Milliseconds to the microsecond, as the log keeps an attempt's duration. */
function toMicros(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/**
 * A request's attempts as the JSON text of the log's `attempts` column, durations to the
 * microsecond (a non-finite one, or status, is null). An entry not of the pipeline's shape (a
 * plugin's own) is written as it is.
 */
export function attemptsJson(attempts: RequestLogEntry['attempts']): string {
  return JSON.stringify(
    attempts.map((a) =>
      typeof a.provider === 'string' && typeof a.model === 'string' && (typeof a.status === 'number' || typeof a.status === 'string')
        ? { provider: a.provider, model: a.model, status: a.status, durationMs: toMicros(a.durationMs), upstreamRequestId: a.upstreamRequestId, error: a.error, message: a.message, ...(a.unsent ? { unsent: true } : {}) }
        : a,
    ),
  );
}

/** The request log: one row per request, newest first when read, paged by an opaque cursor. */
const LOG_COLUMNS_WRITTEN = LOG_INSERT.map(([name]) => name);

class SqliteRequestLog implements RequestLog {
  private readonly queue: BatchQueue<number>;
  /** The rows waiting, as columns in LOG_INSERT's order (see ColumnRows). */
  private readonly rows = new ColumnRows(LOG_INSERT.map(([, kind]) => kind));

  constructor(
    private readonly s: SqliteDb,
    options: SqliteStoreOptions,
  ) {
    const rows = this.rows;
    const insert = new MultiRowInsert<number>(s.db, `request_log (${LOG_INSERT.map(([name]) => name).join(', ')})`, rows.width, (row, out, at) => rows.copyRow(row, out, at));
    const write = s.db.transaction((batch: number[]) => insert.run(batch));
    this.queue = new BatchQueue<number>((batch) => write(batch), {
      ...options.queue,
      onError: (error, lost) => options.onWriteError?.('request log', error, lost),
      drained: () => rows.clear(),
      busy: isStoreUnwritableForNow,
      itemRefused: isRowRefused,
      onBusy: (error) => options.onWriteBusy?.('request log', error),
      spill: (batch) => {
        const file = s.spill('request_log', LOG_COLUMNS_WRITTEN, rowValues(rows, batch));
        options.onSpilled?.('request log', batch.length, file);
      },
    });
  }

  record(entry: RequestLogEntry): void {
    const rows = this.rows;
    const row = rows.add();
    rows.set(row, 0, entry.time);
    rows.set(row, 1, entry.requestId);
    rows.set(row, 2, entry.method);
    rows.set(row, 3, entry.path);
    rows.set(row, 4, entry.keyId);
    rows.set(row, 5, entry.keyName);
    rows.set(row, 6, entry.keyPrefix);
    rows.set(row, 7, entry.model);
    rows.set(row, 8, entry.operation);
    rows.set(row, 9, entry.provider);
    rows.set(row, 10, entry.status);
    rows.set(row, 11, entry.errorCode);
    rows.set(row, 12, entry.promptTokens);
    rows.set(row, 13, entry.completionTokens);
    rows.set(row, 14, entry.cost);
    rows.set(row, 15, entry.durationMs);
    rows.set(row, 16, entry.clientIp);
    rows.set(row, 17, entry.userAgent);
    // Most requests made one attempt, at their row's back end and model, that answered: two
    // numbers. A text per request, held until its batch is written, cost 6 µs a chat call under
    // load (for 0.25 µs of building it): the young collections copied it, and promoted it.
    const one = oneAttempt(entry);
    // Otherwise as text now: the lists themselves are not held until the batch is written.
    rows.set(row, 18, one || entry.attempts.length === 0 ? null : attemptsJson(entry.attempts));
    rows.set(row, 19, entry.losses?.length ? JSON.stringify(entry.losses) : null);
    rows.set(row, 20, one ? one.status : null);
    rows.set(row, 21, one ? toMicros(one.durationMs) : null);
    rows.set(row, 22, one?.upstreamRequestId ?? null);
    this.queue.push(row);
  }

  async query(query: RequestLogQuery): Promise<{ entries: RequestLogEntry[]; nextCursor: string | null }> {
    this.queue.flushNow();
    const limit = Math.min(Math.max(query.limit ?? 100, 1), 1000);
    const where: string[] = [];
    const params: Record<string, unknown> = { limit: limit + 1 };
    if (query.keyId !== undefined) (where.push('key_id = @keyId'), (params.keyId = query.keyId));
    if (query.model !== undefined) (where.push('model = @model'), (params.model = query.model));
    if (query.status !== undefined) (where.push('status = @status'), (params.status = query.status));
    if (query.since !== undefined) (where.push('time >= @since'), (params.since = query.since));
    if (query.until !== undefined) (where.push('time < @until'), (params.until = query.until));
    if (query.cursor) {
      const seq = decodeCursor(query.cursor);
      where.push('seq < @cursor');
      params.cursor = seq;
    }
    const sql = `SELECT ${LOG_COLUMNS} FROM request_log ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT @limit`;
    const rows = this.s.db.prepare(sql).all(params) as Array<
      Omit<RequestLogEntry, 'attempts' | 'losses'> & {
        seq: number;
        attempts: string | null;
        losses: string | null;
        attemptStatus: number | null;
        attemptMs: number | null;
        attemptUpstreamId: string | null;
      }
    >;
    const page = rows.slice(0, limit);
    const nextCursor = rows.length > limit ? Buffer.from(`seq:${page[page.length - 1]!.seq}`).toString('base64url') : null;
    const entries = page.map(({ seq: _seq, attempts, losses, attemptStatus, attemptMs, attemptUpstreamId, ...rest }) => ({
      ...rest,
      attempts: attempts
        ? (JSON.parse(attempts) as RequestLogEntry['attempts'])
        : attemptStatus !== null
          ? [{ provider: rest.provider!, model: rest.model!, status: attemptStatus, durationMs: attemptMs!, ...(attemptUpstreamId === null ? {} : { upstreamRequestId: attemptUpstreamId }) }]
          : [],
      losses: losses ? (JSON.parse(losses) as string[]) : [],
    }));
    return { entries, nextCursor };
  }

  flush(): void {
    this.queue.flushNow();
  }

  close(): void {
    this.queue.close();
  }
}

interface ResponseRow {
  id: string;
  key_id: string | null;
  provider: string | null;
  previous_response_id: string | null;
  model: string;
  created_at: number;
  input: string;
  output: string;
}

/** The responses table's columns as a turn is written (by its queue, or from a spill file). */
const RESPONSE_COLUMNS = ['id', 'key_id', 'provider', 'previous_response_id', 'model', 'created_at', 'input', 'output'] as const;

/** A turn's values in RESPONSE_COLUMNS' order. */
function responseValues(r: StoredResponse): unknown[] {
  return [r.id, r.keyId, r.provider, r.previousResponseId, r.model, r.createdAt, JSON.stringify(r.input), JSON.stringify(r.output)];
}

/**
 * Responses API turns: written in batches off the request path; a turn waiting for its batch is
 * read from memory, so the next call of a conversation finds it however soon it comes.
 */
/** Item ids remembered with the response that holds them (the latest first to go past it). */
const ITEM_INDEX_LIMIT = 10_000;
/** The key's latest turns an item id the memory no longer holds is looked for in. */
const SEARCHED_TURNS = 200;

/** An item_reference: it names an item of another turn, and holds none. */
function isReference(item: unknown): boolean {
  return (item as { type?: unknown } | null)?.type === 'item_reference';
}

class SqliteResponseStore implements ResponseStore {
  private readonly queue: BatchQueue<StoredResponse>;
  private readonly pending = new Map<string, StoredResponse>();
  private readonly byId;
  /** Recent items' ids -> their response's id, so that an item_reference is found without a scan. */
  private readonly itemIndex = new Map<string, string>();
  private readonly byItem;
  private readonly keyOfStmt;

  constructor(s: SqliteDb, options: SqliteStoreOptions) {
    const insert = s.db.prepare(`INSERT OR REPLACE INTO responses (${RESPONSE_COLUMNS.join(', ')}) VALUES (${RESPONSE_COLUMNS.map(() => '?').join(', ')})`);
    this.byId = s.db.prepare<[string, string | null], ResponseRow>('SELECT * FROM responses WHERE id = ? AND key_id IS ?');
    // An item the index no longer (or never, before a restart) had: the key's latest response
    // whose items hold it, looked for in their text.
    this.keyOfStmt = s.db.prepare<[string], { key_id: string | null }>('SELECT key_id FROM responses WHERE id = ?');
    // Among the key's latest turns only (SEARCHED_TURNS), newest first: a search is a scan of
    // their text, on the event loop.
    this.byItem = s.db.prepare<[string | null, string, string], ResponseRow>(
      `SELECT * FROM (SELECT * FROM responses WHERE key_id IS ? ORDER BY created_at DESC LIMIT ${SEARCHED_TURNS}) WHERE output LIKE ? ESCAPE '\\' OR input LIKE ? ESCAPE '\\' ORDER BY created_at DESC LIMIT 8`,
    );
    const write = s.db.transaction((batch: StoredResponse[]) => {
      for (const r of batch) insert.run(...responseValues(r));
    });
    /** Written or given up: no longer served from memory. */
    const settle = (batch: StoredResponse[]): void => {
      for (const r of batch) if (this.pending.get(r.id) === r) this.pending.delete(r.id);
    };
    this.queue = new BatchQueue<StoredResponse>(
      (batch) => {
        write(batch);
        settle(batch);
      },
      {
        ...options.queue,
        onError: (error, lost) => options.onWriteError?.('responses', error, lost),
        busy: isStoreUnwritableForNow,
        itemRefused: isRowRefused,
        onBusy: (error) => options.onWriteBusy?.('responses', error),
        discarded: settle,
        // Kept for the next start as usage and request-log rows are: a client holds the id of
        // each turn it was answered, and names it in its next call after the restart.
        spill: (batch) => {
          const file = s.spill('responses', RESPONSE_COLUMNS, batch.map(responseValues));
          options.onSpilled?.('responses', batch.length, file);
          settle(batch);
        },
      },
    );
  }

  save(record: StoredResponse): void {
    this.pending.set(record.id, record);
    this.queue.push(record);
    // The output's ids only: a back end (or this gateway) made them. An input item's id is the
    // client's to choose, and could be made to stand for another key's item.
    for (const item of record.output) {
      const id = (item as { id?: unknown } | null)?.id;
      // A reference names an item; it is not one (the turn that holds the item stays its place).
      if (typeof id !== 'string' || id === '' || isReference(item)) continue;
      this.itemIndex.delete(id);
      this.itemIndex.set(id, record.id);
    }
    while (this.itemIndex.size > ITEM_INDEX_LIMIT) this.itemIndex.delete(this.itemIndex.keys().next().value!);
  }

  async get(id: string, keyId: string | null): Promise<StoredResponse | undefined> {
    const waiting = this.pending.get(id);
    if (waiting) return waiting.keyId === keyId ? waiting : undefined;
    const row = this.byId.get(id, keyId);
    return row ? storedResponse(row) : undefined;
  }

  async findItem(itemId: string, keyId: string | null, search = true): Promise<{ item: unknown; provider: string | null } | 'another key' | undefined> {
    const holds = (response: StoredResponse | undefined) => {
      const item = [...(response?.output ?? []), ...(response?.input ?? [])].find((each) => (each as { id?: unknown } | null)?.id === itemId && !isReference(each));
      return item === undefined ? undefined : { item, provider: response!.provider };
    };
    const indexed = this.itemIndex.get(itemId);
    if (indexed !== undefined) {
      const found = holds(await this.get(indexed, keyId));
      if (found !== undefined) return found;
      // Held by a turn another key made: not this key's to name.
      const owner = this.keyOf(indexed);
      if (owner !== undefined && owner !== keyId) return 'another key';
    }
    if (!search) return undefined;
    // Turns still waiting for their batch (a few at most), newest first, then the file's.
    for (const waiting of [...this.pending.values()].reverse()) {
      if (waiting.keyId !== keyId) continue;
      const found = holds(waiting);
      if (found !== undefined) return found;
    }
    const pattern = `%"id":${JSON.stringify(itemId).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    for (const row of this.byItem.all(keyId, pattern, pattern)) {
      const found = holds(storedResponse(row));
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /** The key that made a stored response (null: none, or no such response). */
  private keyOf(id: string): string | null | undefined {
    const waiting = this.pending.get(id);
    if (waiting) return waiting.keyId;
    return this.keyOfStmt.get(id)?.key_id;
  }

  flush(): void {
    this.queue.flushNow();
  }

  close(): void {
    this.queue.close();
  }
}

function storedResponse(row: ResponseRow): StoredResponse {
  return {
    id: row.id,
    keyId: row.key_id,
    provider: row.provider,
    previousResponseId: row.previous_response_id,
    model: row.model,
    createdAt: row.created_at,
    input: JSON.parse(row.input) as unknown[],
    output: JSON.parse(row.output) as unknown[],
  };
}

export class InvalidCursorError extends Error {}

function decodeCursor(cursor: string): number {
  const match = /^seq:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!match) throw new InvalidCursorError('invalid cursor');
  return Number(match[1]);
}

/** Keys, usage ledger and request log in one SQLite file (WAL mode). */
export function openSqliteStores(options: SqliteStoreOptions) {
  const s = new SqliteDb(options);
  const keys = new SqliteKeyStore(s);
  const usage = new SqliteUsageLedger(s, options);
  const logs = new SqliteRequestLog(s, options);
  const responses = new SqliteResponseStore(s, options);
  const tasks = new SqliteTaskStore(s.db, s.writtenSpent, options, (write) => s.patiently(write));
  /** The queues written out and stopped. */
  const closeQueues = () =>
    s.patiently(() => {
      usage.close();
      logs.close();
      responses.close();
      tasks.close();
    });
  return {
    keys,
    usage,
    logs,
    responses,
    tasks,
    flush(): void {
      usage.flush();
      logs.flush();
      responses.flush();
      tasks.flush();
    },
    close(): void {
      closeQueues();
      s.close();
    },
    /** `close()`, after the checkpoint thread (if any) has let go of the file. */
    async closeGracefully(): Promise<void> {
      closeQueues();
      await s.closeAfterCheckpoints();
    },
  };
}
