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

/** What the worker tells the gateway: each checkpoint that copied pages, or why one failed. */
export type CheckpointMessage = { kind: 'checkpointed'; pages: number } | { kind: 'failed'; error: string };

const { file, intervalMs } = workerData as CheckpointWorkerData;
const port = parentPort!;
const db = new Database(file, { fileMustExist: true });
db.pragma('busy_timeout = 1000');
db.pragma('synchronous = NORMAL');

let copied = 0;
function checkpoint(): void {
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    // Frames copied since the log was last reset: report only what this round added.
    const total = result?.checkpointed ?? 0;
    if (total < copied) copied = 0;
    if (total > copied) port.postMessage({ kind: 'checkpointed', pages: total - copied } satisfies CheckpointMessage);
    copied = total;
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
