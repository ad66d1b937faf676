/**
 * The gateway's stores, as interfaces. Plugins only ever see these; the embedded SQLite store
 * and in-memory counters fill them today, a Postgres store and Redis counters can fill them
 * for many instances without any plugin changing.
 *
 * Rule for implementations: nothing here may make a request wait on a disk or network write.
 * `record()` methods only queue; reads that sit on the request path (key lookup) are served
 * from memory.
 */

export type KeySource = 'config' | 'cli' | 'admin';

/**
 * What a read on the request path gives: the answer itself when it is served from memory (the
 * embedded store and in-memory counters), a promise when it is not (a remote store). Callers
 * await it, or use the value at once when it is not a promise.
 */
export type MaybePromise<T> = T | Promise<T>;

export interface KeyRecord {
  id: string;
  name: string;
  /** SHA-256 of the secret, hex. The secret itself is never stored. */
  hash: string;
  /** The first characters of the secret, safe to show (`sk-sy-AbCd`). */
  prefix: string;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  /** Allowed public model names (globs); null = any. */
  models: string[] | null;
  rpm: number | null;
  tpm: number | null;
  maxConcurrent: number | null;
  /** Spending limit in currency units; null = none. */
  budget: number | null;
  /** Spent so far, including costs recorded but not yet written. */
  spent: number;
  source: KeySource;
}

export interface NewKey {
  name: string;
  /** The secret; only its hash and prefix are kept. */
  secret: string;
  expiresAt?: number | null;
  models?: string[] | null;
  rpm?: number | null;
  tpm?: number | null;
  maxConcurrent?: number | null;
  budget?: number | null;
  source: KeySource;
}

export type KeyPatch = Partial<Pick<KeyRecord, 'name' | 'expiresAt' | 'models' | 'rpm' | 'tpm' | 'maxConcurrent' | 'budget'>>;

export interface KeyStore {
  /** Look a key up by the hash of its secret. Served from memory. */
  findByHash(hash: string): MaybePromise<KeyRecord | undefined>;
  /** By id, or by exact name. */
  get(idOrName: string): Promise<KeyRecord | undefined>;
  list(): Promise<KeyRecord[]>;
  /** How many keys were ever made, revoked and expired ones included. Served from memory. */
  count(): MaybePromise<number>;
  /** Spent so far by one key, costs recorded but not yet written included. */
  spent(id: string): MaybePromise<number>;
  create(key: NewKey): Promise<KeyRecord>;
  update(id: string, patch: KeyPatch): Promise<KeyRecord | undefined>;
  /** Returns false when there is no such key or it was already revoked. */
  revoke(id: string): Promise<boolean>;
  /** Make the store's `source: config` keys exactly these (added, updated, revoked when gone). */
  syncConfigKeys(keys: NewKey[]): Promise<void>;
}

export type UsageSource = 'provider' | 'estimated';
export type EndReason = 'done' | 'client_gone' | 'upstream_error' | 'timeout' | 'rejected' | 'shutdown';

/** One per client request that reached a back end, whatever the retries and fallbacks. */
export interface UsageRecord {
  requestId: string;
  time: number;
  keyId: string | null;
  keyName: string | null;
  model: string;
  upstreamModel: string | null;
  provider: string | null;
  operation: string;
  promptTokens: number | null;
  completionTokens: number | null;
  cachedTokens: number | null;
  /** Prompt tokens written to the back end's prompt cache (priced apart by some vendors). */
  cacheWriteTokens?: number | null;
  reasoningTokens: number | null;
  /** Images made, seconds of audio or video, characters spoken: what unit-priced calls used. */
  images?: number | null;
  seconds?: number | null;
  characters?: number | null;
  /** Where the numbers came from. */
  source: UsageSource | null;
  cost: number;
  status: number;
  endReason: EndReason;
  latencyMs: number;
  ttfbMs: number | null;
}

export interface UsageTotalsQuery {
  since?: number;
  until?: number;
  keyId?: string;
  model?: string;
  /** Any of key, model, day; none = one grand total. */
  groupBy?: Array<'key' | 'model' | 'day'>;
}

export interface UsageTotal {
  key?: string | null;
  keyName?: string | null;
  model?: string;
  day?: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  images: number;
  seconds: number;
  characters: number;
  cost: number;
}

export interface UsageLedger {
  /** Queue a record (and add its cost to the key's spent at once). Never waits on the disk. */
  record(record: UsageRecord): void;
  totals(query: UsageTotalsQuery): Promise<UsageTotal[]>;
  list(query: { requestId?: string; keyId?: string; limit?: number }): Promise<UsageRecord[]>;
}

/** One per request, rejected ones included. */
export interface RequestLogEntry {
  time: number;
  requestId: string;
  method: string;
  path: string;
  keyId: string | null;
  keyName: string | null;
  keyPrefix: string | null;
  model: string | null;
  operation: string | null;
  provider: string | null;
  status: number;
  errorCode: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  cost: number | null;
  durationMs: number;
  clientIp: string | null;
  userAgent: string | null;
  /** The attempt chain (target, status, duration, the back end's own request id when it gave one), for the operator. */
  attempts: Array<{ provider: string; model: string; status: number | 'error'; durationMs: number; upstreamRequestId?: string; error?: string; message?: string; unsent?: true }>;
  /** What a translation between wire formats could not carry (named losses, e.g. `top_k`). */
  losses?: string[];
}

export interface RequestLogQuery {
  keyId?: string;
  model?: string;
  status?: number;
  since?: number;
  until?: number;
  limit?: number;
  /** From a previous page's `nextCursor`. */
  cursor?: string;
}

export interface RequestLog {
  /** Queue an entry. Never waits on the disk. */
  record(entry: RequestLogEntry): void;
  /** Newest first. */
  query(query: RequestLogQuery): Promise<{ entries: RequestLogEntry[]; nextCursor: string | null }>;
}

/** The answer of a sliding-window limiter. */
export interface WindowResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the window has room again (0 when it has room now). */
  resetMs: number;
  /** Milliseconds until the window is back to its initial state (all of it free), when that is later than resetMs. */
  fullMs?: number;
  /** Hand back to `windowAdjust` to settle an estimate. */
  handle?: unknown;
}

/**
 * Shared counters for limits: per-key sliding windows (requests and tokens per minute),
 * concurrency slots, and in-flight budget reservations. In memory for one instance; Redis
 * for many.
 */
export interface Counters {
  /** Add `amount` to the window of `key` if it stays within `limit`. */
  windowHit(key: string, limit: number, windowMs: number, amount: number): MaybePromise<WindowResult>;
  /** Replace the amount an earlier hit added (settling an estimate with the actual figure). */
  windowAdjust(key: string, handle: unknown, amount: number): MaybePromise<void>;
  /** Current state of a window without adding to it. */
  windowPeek(key: string, limit: number, windowMs: number): MaybePromise<WindowResult>;
  /** Take one of `limit` concurrent slots; false when all are taken. */
  acquire(key: string, limit: number): MaybePromise<boolean>;
  release(key: string): MaybePromise<void>;
  /** Reserve `amount` if `base + reserved + amount <= limit`; atomic with other reservations. */
  reserve(key: string, amount: number, limit: number, base: number): MaybePromise<boolean>;
  /** Give back a reservation (the actual cost is recorded in the ledger at the same moment). */
  unreserve(key: string, amount: number): MaybePromise<void>;
  reserved(key: string): MaybePromise<number>;
}

/**
 * One turn of a Responses API conversation, kept so that a later call can name it in
 * `previous_response_id` whichever back end answers that call.
 */
export interface StoredResponse {
  /** The response id the client was given (`resp_...`). */
  id: string;
  /** The key that made it; null when the gateway runs without keys. Only that key may read it. */
  keyId: string | null;
  /** The provider instance that answered it. */
  provider: string | null;
  /** The response this one continued, if any: the conversation is the chain of them. */
  previousResponseId: string | null;
  model: string;
  createdAt: number;
  /** This turn's input items (not the history before it, not the instructions). */
  input: unknown[];
  /** The response's output items. */
  output: unknown[];
}

export interface ResponseStore {
  /** Queue a response to be written (never waits on the disk); get() sees it at once. */
  save(record: StoredResponse): void;
  /** A stored response, only when `keyId` made it. */
  get(id: string, keyId: string | null): Promise<StoredResponse | undefined>;
  /**
   * An item (of a stored turn's output or input) by its id, only among the responses `keyId`
   * made: what a Responses client's `item_reference` names.
   */
  findItem(itemId: string, keyId: string | null, search?: boolean): Promise<{ item: unknown; provider: string | null } | 'another key' | undefined>;
}

export interface Stores {
  readonly keys: KeyStore;
  readonly usage: UsageLedger;
  readonly logs: RequestLog;
  /** Responses API turns, for previous_response_id. */
  readonly responses: ResponseStore;
  /** Asynchronous (video) tasks. */
  readonly tasks: TaskStore;
  readonly counters: Counters;
  /** Write everything queued so far. */
  flush(): Promise<void>;
  /** Flush and close. */
  close(): Promise<void>;
}

/** The state of a video task: forward only, queued -> in_progress -> completed | failed. */
export type TaskStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

/** An asynchronous (video) task as stored. `vendorTaskId` and `resultUrl` never leave the gateway. */
export interface StoredTask {
  /** `task_...`, the public id. */
  id: string;
  keyId: string | null;
  keyName: string | null;
  provider: string;
  /** The wire format that submitted it. */
  format: string;
  /** Public model name; `upstreamModel` is the back end's. */
  model: string;
  upstreamModel: string;
  vendorTaskId: string;
  status: TaskStatus;
  progress: number;
  resultUrl: string | null;
  container: string | null;
  seconds: number | null;
  size: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  /** The vendor's own state word at the last poll. */
  rawStatus: string | null;
  metadata: Record<string, unknown> | null;
  createdAt: number;
  updatedAt: number;
  completedAt: number | null;
  /** When the vendor was last asked (null: never). */
  polledAt: number | null;
  nextPollAt: number;
  /** Polls so far (drives the backoff). */
  attempts: number;
  /** Seconds charged on submit. */
  estimateSeconds: number;
  /** Cost charged so far for the task (estimate, then settled; 0 once refunded). */
  cost: number;
}

/** What a poll changes on a task that stays unfinished. */
export interface TaskProgress {
  status?: 'queued' | 'in_progress';
  progress?: number;
  rawStatus?: string | null;
  polledAt: number;
  nextPollAt: number;
  attempts: number;
}

/** What the vendor's acceptance of a submit sets on the task written before it was asked. */
export interface TaskAccepted {
  vendorTaskId: string;
  provider: string;
  upstreamModel: string;
  status: 'queued' | 'in_progress';
  rawStatus: string | null;
  nextPollAt: number;
  estimateSeconds: number;
  cost: number;
  at: number;
  /** The submit's charge: written to the ledger and the key's spent in the same transaction. */
  charge?: UsageRecord | null;
}

/** What finishing a task sets. */
export interface TaskOutcome {
  status: 'completed' | 'failed';
  progress?: number;
  resultUrl?: string | null;
  container?: string | null;
  seconds?: number | null;
  size?: string | null;
  errorCode?: string | null;
  errorMessage?: string | null;
  rawStatus?: string | null;
  /** The task's cost after settling (0 for a refund). */
  cost: number;
  at: number;
}

/**
 * Video tasks. Status changes are compare-and-set statements (only an unfinished task moves,
 * only forward), so two pollers, or a poller and the timeout sweep, never both finish one; the
 * settle or refund of a finish is written in the same transaction as the finish, so it happens
 * exactly once.
 */
export interface TaskStore {
  /**
   * Write a new task, synchronously (a task is money the vendor bills for: it must survive a
   * crash right after the client got its id). A task written before its vendor was asked has
   * `vendorTaskId: ''` until {@link attach}.
   */
  create(task: StoredTask, charge?: UsageRecord | null): void;
  /**
   * Record the vendor's acceptance on a task written with no vendor id yet, and its charge, in one
   * transaction: a task is never on disk with a cost its key was not charged (a refund of it would
   * take the key below what it paid). False, and nothing written, when it has one or is finished.
   */
  attach(id: string, accepted: TaskAccepted): boolean;
  /** Delete a task whose vendor never accepted it (the submit failed); false when it has a vendor id. */
  discard(id: string): boolean;
  /** A completed task's fresh result address (the vendor's old one expired). */
  refreshResult(id: string, resultUrl: string): boolean;
  get(id: string): StoredTask | undefined;
  /** Unfinished tasks whose next poll is due, soonest first. */
  due(now: number, limit: number): StoredTask[];
  /** Unfinished tasks created before `before`. */
  stuck(before: number, limit: number): StoredTask[];
  /** Record a poll of an unfinished task; false when it is finished (or would move backwards). */
  advance(id: string, progress: TaskProgress): boolean;
  /**
   * Finish an unfinished task and add `usage` (the settle or refund: its cost is the change,
   * negative for a refund) to the ledger and the key's spent, in one transaction. False, and
   * nothing written, when the task was already finished.
   */
  finish(id: string, outcome: TaskOutcome, usage: UsageRecord | null): boolean;
  /** Earliest nextPollAt of an unfinished task (other than `exclude`, the ones being polled now), if any. */
  nextDue(exclude?: readonly string[]): number | undefined;
}
