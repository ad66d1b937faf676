/**
 * The SQLite store's checkpointer, run on a worker thread by `BackgroundCheckpoint`
 * (core/store/sqlite.ts): its own connection copies what the write-ahead log holds into the
 * database file every `intervalMs`, so that the copy and its fsyncs never stall the gateway's
 * event loop. It only checkpoints (PASSIVE: it never waits for a reader or the writer); the
 * gateway's connection keeps writing and resets the log once everything in it was copied.
 */
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

export interface CheckpointWorkerData {
  file: string;
  intervalMs: number;
}

/**
 * What the worker tells the gateway after each round: how many pages it copied and how long the
 * log is (in pages, since its last reset), or why the round failed.
 */
export type CheckpointMessage = { kind: 'checkpointed'; pages: number; log: number } | { kind: 'failed'; error: string };

const { file, intervalMs } = workerData as CheckpointWorkerData;
const port = parentPort!;
const db = new Database(file, { fileMustExist: true });
db.pragma('busy_timeout = 1000');
db.pragma('synchronous = NORMAL');

/** The log as the last round left it: its length and how much of it was copied. */
let lastLog = 0;
let lastCopied = 0;
function checkpoint(): void {
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    const log = result?.log ?? 0;
    const total = result?.checkpointed ?? 0;
    // A log shorter than last time was reset in between: everything in it is this round's.
    const pages = log < lastLog ? total : Math.max(0, total - lastCopied);
    lastLog = log;
    lastCopied = total;
    port.postMessage({ kind: 'checkpointed', pages, log } satisfies CheckpointMessage);
  } catch (error) {
    port.postMessage({ kind: 'failed', error: String(error) } satisfies CheckpointMessage);
  }
}

const timer = setInterval(checkpoint, intervalMs);
port.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  checkpoint();
  db.close();
  port.close();
});
