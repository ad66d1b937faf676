import type { CacheConfig, StorageConfig } from '../../config/types.js';
import { MemoryCounters } from './memory-counters.js';
import { openSqliteStores, sqliteFile, type SqliteStoreOptions } from './sqlite.js';
import type { Stores } from './types.js';

export * from './types.js';
export { isPromise } from './maybe.js';
export { generateSecret, hashSecret, loggablePath, pathSecrets, secretPrefix } from './secrets.js';
export { BatchQueue } from './queue.js';
export { InvalidCursorError, isStoreBusy, isStoreUnwritableForNow, BUSY_TIMEOUT_MS } from './sqlite.js';

export interface OpenStoresOptions {
  storage: StorageConfig;
  cache: CacheConfig;
  /** Folder a relative storage.url is resolved against (the configuration file's). */
  baseDir: string;
  onWriteError?(what: string, error: unknown, lost: number): void;
  /** A queue found the store locked by another process: its rows wait (see SqliteStoreOptions). */
  onWriteBusy?(what: string, error: unknown): void;
  /** SQLite: rows kept in a spill file at close, the store being locked (see SqliteStoreOptions). */
  onSpilled?: SqliteStoreOptions['onSpilled'];
  /** SQLite: rows of a spill file written to the store as it opened. */
  onSpillWritten?: SqliteStoreOptions['onSpillWritten'];
  /** SQLite: a spill file that could not be written as the store opened (it stays for the next time). */
  onSpillFailed?: SqliteStoreOptions['onSpillFailed'];
  /** SQLite: the file at the store's path is no longer (or again) the one opened. */
  onFileGone?: SqliteStoreOptions['onFileGone'];
  /** SQLite: the file was migrated by a newer version than this one. */
  onNewerSchema?: SqliteStoreOptions['onNewerSchema'];
  /** SQLite: how long a write waits for another process's lock (default 5 s; the gateway: BUSY_TIMEOUT_MS). */
  busyTimeoutMs?: number;
  /** SQLite: checkpoint its write-ahead log on a worker thread (a long-running gateway). */
  backgroundCheckpoint?: SqliteStoreOptions['backgroundCheckpoint'];
}

/** Open the stores the configuration names. */
export function openStores(options: OpenStoresOptions): Stores {
  if (options.storage.driver !== 'sqlite') {
    throw new Error(`storage.driver '${options.storage.driver}' is not available in this version; use sqlite`);
  }
  if (options.cache.driver !== 'memory') {
    throw new Error(`cache.driver '${options.cache.driver}' is not available in this version; use memory`);
  }
  const sqlite = openSqliteStores({
    file: sqliteFile(options.storage.url, options.baseDir),
    onWriteError: options.onWriteError,
    onWriteBusy: options.onWriteBusy,
    onSpilled: options.onSpilled,
    onSpillWritten: options.onSpillWritten,
    onSpillFailed: options.onSpillFailed,
    onNewerSchema: options.onNewerSchema,
    onFileGone: options.onFileGone,
    busyTimeoutMs: options.busyTimeoutMs,
    backgroundCheckpoint: options.backgroundCheckpoint,
  });
  const counters = new MemoryCounters();
  return {
    keys: sqlite.keys,
    usage: sqlite.usage,
    logs: sqlite.logs,
    responses: sqlite.responses,
    tasks: sqlite.tasks,
    counters,
    async flush() {
      sqlite.flush();
    },
    async close() {
      await sqlite.closeGracefully();
      counters.close();
    },
  };
}
