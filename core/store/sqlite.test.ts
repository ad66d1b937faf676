import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { eventually } from '../../test/support/gateway.js';
import type { CheckpointMessage } from './checkpoint-worker.js';
import { BatchQueue } from './queue.js';
import { isStoreUnwritableForNow, openSqliteStores } from './sqlite.js';
import type { RequestLogEntry, UsageRecord } from './types.js';

const require = createRequire(import.meta.url);

function usageRow(i: number, keyId: string | null, cost: number): UsageRecord {
  return {
    requestId: `req_${i}`,
    time: 1_000 + i,
    keyId,
    keyName: keyId ? `name ${keyId}` : null,
    model: 'm',
    upstreamModel: i % 2 ? 'u' : null,
    provider: 'p',
    operation: 'chat',
    promptTokens: i,
    completionTokens: 2 * i,
    cachedTokens: i % 3 ? null : 1,
    cacheWriteTokens: i % 4 ? null : i + 3,
    reasoningTokens: null,
    images: i % 5 ? null : 2,
    seconds: null,
    characters: null,
    source: 'provider',
    cost,
    status: 200,
    endReason: 'done',
    latencyMs: i + 0.5,
    ttfbMs: i % 2 ? null : 0.25,
  };
}

function logRow(i: number): RequestLogEntry {
  return {
    time: 2_000 + i,
    requestId: `req_${i}`,
    method: 'POST',
    path: '/v1/chat/completions',
    keyId: 'key_a',
    keyName: 'a',
    keyPrefix: 'sk-sy-abcd…',
    model: 'm',
    operation: 'chat',
    provider: i % 2 ? 'p' : null,
    status: 200,
    errorCode: null,
    promptTokens: i,
    completionTokens: null,
    cost: 0.5,
    durationMs: 1.25,
    clientIp: '127.0.0.1',
    userAgent: 'ua',
    attempts: i % 2 ? [{ provider: 'p', model: 'm', status: 200, durationMs: 1 }] : [],
    losses: i % 3 ? [] : ['top_k'],
  };
}

describe('usage ledger and request log (sqlite)', () => {
  it('a batch larger than one multi-row insert keeps every row, its values, its order, and each key spent', async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      const a = await stores.keys.create({ name: 'a', secret: 'sk-test-aaaaaaaaaaaaaaaaaaaaaaaa', source: 'cli' });
      const b = await stores.keys.create({ name: 'b', secret: 'sk-test-bbbbbbbbbbbbbbbbbbbbbbbb', source: 'cli' });
      const rows: UsageRecord[] = [];
      // 63 rows: two full multi-row inserts and 13 single ones.
      for (let i = 0; i < 63; i++) rows.push(usageRow(i, i % 3 === 0 ? a.id : i % 3 === 1 ? b.id : null, i % 7 === 0 ? 0 : 0.125));
      for (const row of rows) stores.usage.record(row);
      const listed = await stores.usage.list({ limit: 1000 });
      expect(listed.map((r) => r.requestId)).to.deep.equal(rows.map((r) => r.requestId).reverse());
      expect([...listed].reverse()).to.deep.equal(rows);
      const spentOf = (keyId: string) => rows.filter((r) => r.keyId === keyId).reduce((sum, r) => sum + r.cost, 0);
      expect(await stores.keys.spent(a.id)).to.equal(spentOf(a.id));
      expect((await stores.keys.get(b.id))!.spent).to.equal(spentOf(b.id));

      for (let i = 0; i < 30; i++) stores.logs.record(logRow(i));
      const { entries } = await stores.logs.query({ limit: 100 });
      expect(entries).to.deep.equal(Array.from({ length: 30 }, (_, i) => logRow(29 - i)));
    } finally {
      stores.close();
    }
  });

  it('a burst of rows past the queued columns\' capacity (several batches) is written whole, and the next rows after it too', async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      const a = await stores.keys.create({ name: 'a', secret: 'sk-test-aaaaaaaaaaaaaaaaaaaaaaaa', source: 'cli' });
      const rows = Array.from({ length: 1300 }, (_, i) => usageRow(i, a.id, 0.25));
      for (const row of rows) stores.usage.record(row);
      for (let i = 0; i < 1300; i++) stores.logs.record(logRow(i));
      stores.usage.flush();
      const after = usageRow(5000, null, 0);
      stores.usage.record(after);
      const listed = await stores.usage.list({ limit: 10_000 });
      expect([...listed].reverse()).to.deep.equal([...rows, after]);
      expect(await stores.keys.spent(a.id)).to.equal(1300 * 0.25);
      const { entries } = await stores.logs.query({ limit: 1000 });
      expect(entries[0]).to.deep.equal(logRow(1299));
      expect(entries[999]).to.deep.equal(logRow(300));
    } finally {
      stores.close();
    }
  });

  it('a batch with a row the table refuses loses that row alone: the rest of the batch kept, the loss reported, its cost still counted in memory', async () => {
    const lost: Array<{ what: string; count: number }> = [];
    const stores = openSqliteStores({ file: ':memory:', onWriteError: (what, _error, count) => lost.push({ what, count }) });
    try {
      const a = await stores.keys.create({ name: 'a', secret: 'sk-test-aaaaaaaaaaaaaaaaaaaaaaaa', source: 'cli' });
      stores.usage.record(usageRow(0, a.id, 1));
      stores.usage.flush();
      // 60 rows in one batch; row 30 (inside the second multi-row insert) breaks a NOT NULL column.
      const rows = Array.from({ length: 60 }, (_, i) => usageRow(i + 1, a.id, 0.5));
      (rows[30] as { model: string | null }).model = null;
      for (const row of rows) stores.usage.record(row);
      stores.usage.flush();
      expect(lost).to.deep.equal([{ what: 'usage', count: 1 }]);
      const kept = (await stores.usage.list({ limit: 1000 })).map((r) => r.requestId);
      expect(kept).to.have.length(60);
      expect(kept).to.include('req_0').and.not.include('req_31');
      // The call was made, and its back end charged it: what it cost still counts against the
      // key (its budget) while this process runs, though its row is lost.
      expect((await stores.keys.get(a.id))!.spent).to.equal(31);
      expect(stores.keys.spent(a.id)).to.equal(31);
    } finally {
      stores.close();
    }
  });

  it('a disk that fills up (a real SQLITE_FULL) keeps the rows waiting and writes them once there is room; a row the table refuses does not wait', () => {
    const db = new Database(':memory:');
    try {
      db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, text TEXT NOT NULL)');
      const insert = db.prepare('INSERT INTO t (id, text) VALUES (?, ?)');
      const write = db.transaction((batch: Array<[number, string | null]>) => {
        for (const row of batch) insert.run(...row);
      });
      const pages = (db.pragma('page_count', { simple: true }) as number) + 2;
      db.pragma(`max_page_count = ${pages}`);
      const errors: unknown[] = [];
      const waits: unknown[] = [];
      const queue = new BatchQueue<[number, string | null]>((batch) => write(batch), {
        maxBatch: 50,
        busy: isStoreUnwritableForNow,
        onBusy: (error) => waits.push(error),
        onError: (error) => errors.push(error),
      });
      for (let i = 0; i < 400; i++) queue.push([i, 'x'.repeat(200)]);
      queue.flushNow();
      expect(waits).to.have.length(1);
      expect((waits[0] as { code: string }).code).to.equal('SQLITE_FULL');
      expect(errors).to.deep.equal([]);
      expect(queue.size).to.be.greaterThan(0);
      // Room again (an operator freed the disk): the next try writes every row, once.
      db.pragma('max_page_count = 1000000');
      queue.flushNow();
      expect(queue.size).to.equal(0);
      expect((db.prepare('SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM t').get() as { n: number; d: number })).to.deep.equal({ n: 400, d: 400 });
      // A row the table refuses would be refused again: its batch is given up at once.
      queue.push([1000, null]);
      queue.flushNow();
      expect(errors).to.have.length(1);
      expect((errors[0] as { code: string }).code).to.match(/^SQLITE_CONSTRAINT/);
      expect(queue.size).to.equal(0);
      queue.close();
    } finally {
      db.close();
    }
  });

  it('request-path key reads (by hash, count, spent) answer at once', async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      const a = await stores.keys.create({ name: 'a', secret: 'sk-test-aaaaaaaaaaaaaaaaaaaaaaaa', source: 'cli' });
      expect(stores.keys.findByHash(a.hash)).to.include({ id: a.id, name: 'a' });
      expect(stores.keys.findByHash('0'.repeat(64))).to.equal(undefined);
      expect(stores.keys.count()).to.equal(1);
      expect(stores.keys.spent(a.id)).to.equal(0);
    } finally {
      stores.close();
    }
  });

  it("a recorded cost shows at once in the key's cached record, among many cached unknown hashes; written, it stays counted once", async () => {
    const stores = openSqliteStores({ file: ':memory:', queue: { intervalMs: 60_000 } });
    try {
      const a = await stores.keys.create({ name: 'a', secret: 'sk-test-aaaaaaaaaaaaaaaaaaaaaaaa', source: 'cli' });
      const b = await stores.keys.create({ name: 'b', secret: 'sk-test-bbbbbbbbbbbbbbbbbbbbbbbb', source: 'cli' });
      expect(stores.keys.findByHash(a.hash)!.spent).to.equal(0);
      expect(stores.keys.findByHash(b.hash)!.spent).to.equal(0);
      // Clients probing with wrong keys fill the hash cache with unknown hashes.
      for (let i = 0; i < 2_000; i++) expect(stores.keys.findByHash(i.toString(16).padStart(64, 'f'))).to.equal(undefined);
      stores.usage.record(usageRow(1, a.id, 0.25));
      stores.usage.record(usageRow(2, a.id, 0.5));
      stores.usage.record(usageRow(3, b.id, 2));
      // Not written yet: the cached records (what auth hands the budget check) already carry it.
      expect(stores.keys.findByHash(a.hash)!.spent).to.equal(0.75);
      expect(stores.keys.findByHash(b.hash)!.spent).to.equal(2);
      expect(stores.keys.spent(a.id)).to.equal(0.75);
      stores.flush();
      expect(stores.keys.findByHash(a.hash)!.spent).to.equal(0.75);
      expect(stores.keys.spent(a.id)).to.equal(0.75);
      expect(stores.keys.spent(b.id)).to.equal(2);
    } finally {
      stores.close();
    }
  });

  it("the log's attempts are JSON: names escaped, durations to the microsecond, an error code only where there was one", async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      const attempts: RequestLogEntry['attempts'] = [
        { provider: 'p "one"', model: 'm\\ü\n', status: 'error', durationMs: 12.3456789, error: 'upstream_timeout' },
        { provider: 'p2', model: 'm2', status: 200, durationMs: 0.0004 },
        { provider: 'p3', model: 'm3', status: 503, durationMs: Number.NaN, error: 'upstream_error' },
        // Not what the pipeline writes, but a plugin could: still JSON, as JSON.stringify has it.
        { provider: 'p4', model: 'm4', status: Number.POSITIVE_INFINITY, durationMs: 1 },
        { provider: undefined, model: 'm5', status: 200, durationMs: 1, note: 'x' } as unknown as RequestLogEntry['attempts'][number],
      ];
      stores.logs.record({ ...logRow(1), attempts });
      const { entries } = await stores.logs.query({});
      expect(entries[0]!.attempts).to.deep.equal([
        { provider: 'p "one"', model: 'm\\ü\n', status: 'error', durationMs: 12.346, error: 'upstream_timeout' },
        { provider: 'p2', model: 'm2', status: 200, durationMs: 0 },
        { provider: 'p3', model: 'm3', status: 503, durationMs: null, error: 'upstream_error' },
        { provider: 'p4', model: 'm4', status: null, durationMs: 1 },
        { model: 'm5', status: 200, durationMs: 1, note: 'x' },
      ]);
    } finally {
      stores.close();
    }
  });

  it("a request's one answered attempt at its row's back end and model is kept as two numbers, anything else as JSON; both read back the same", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-attempts-'));
    const file = path.join(dir, 'store.db');
    const stores = openSqliteStores({ file });
    try {
      const base = { ...logRow(1), provider: 'p', model: 'm' };
      const cases: RequestLogEntry[] = [
        { ...base, requestId: 'one', attempts: [{ provider: 'p', model: 'm', status: 200, durationMs: 12.3456789 }] },
        // The back end's model is not the one asked for (an alias): its name must be kept.
        { ...base, requestId: 'alias', attempts: [{ provider: 'p', model: 'm-2025', status: 200, durationMs: 1 }] },
        { ...base, requestId: 'failed', attempts: [{ provider: 'p', model: 'm', status: 'error', durationMs: 3, error: 'upstream_timeout' }] },
        { ...base, requestId: 'two', attempts: [{ provider: 'q', model: 'm', status: 503, durationMs: 2, error: 'upstream_error' }, { provider: 'p', model: 'm', status: 200, durationMs: 4 }] },
        { ...base, requestId: 'none', attempts: [] },
      ];
      for (const entry of cases) stores.logs.record(entry);
      const { entries } = await stores.logs.query({});
      const byId = new Map(entries.map((e) => [e.requestId, e]));
      expect(byId.get('one')!.attempts).to.deep.equal([{ provider: 'p', model: 'm', status: 200, durationMs: 12.346 }]);
      for (const entry of cases.slice(1)) expect(byId.get(entry.requestId)!.attempts, entry.requestId).to.deep.equal(entry.attempts);
      // What the file holds: the numbers for the first only.
      const reader = new Database(file, { readonly: true });
      try {
        const raw = reader.prepare('SELECT request_id AS id, attempts, attempt_status AS status, attempt_ms AS ms FROM request_log ORDER BY seq').all() as Array<{ id: string; attempts: string | null; status: number | null; ms: number | null }>;
        expect(raw[0]).to.deep.equal({ id: 'one', attempts: null, status: 200, ms: 12.346 });
        for (const row of raw.slice(1, 4)) expect(row, row.id).to.include({ status: null, ms: null }).and.have.property('attempts').that.is.a('string');
        expect(raw[4]).to.deep.equal({ id: 'none', attempts: null, status: null, ms: null });
      } finally {
        reader.close();
      }
    } finally {
      stores.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('checkpoints of the write-ahead log', () => {
    const MB = 1024 * 1024;
    let dir: string;
    beforeEach(() => (dir = mkdtempSync(path.join(os.tmpdir(), 'sy-wal-'))));
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    /** The usage rows in the file, read by a connection of its own once the store has closed. */
    const usageRowsIn = (file: string): number => {
      const reader = new Database(file, { readonly: true });
      try {
        return (reader.prepare('SELECT COUNT(*) AS n FROM usage').get() as { n: number }).n;
      } finally {
        reader.close();
      }
    };

    /** One transaction of 60,000 usage rows: about 6 MB of pages, past SQLite's 1,000-page checkpoint threshold. */
    const writeBig = (stores: ReturnType<typeof openSqliteStores>) => {
      for (let i = 0; i < 60_000; i++) stores.usage.record(usageRow(i, null, 0));
      stores.usage.flush();
    };

    it('without a checkpoint thread, the commit that passes 1,000 pages copies the log into the file itself', () => {
      const file = path.join(dir, 'plain.db');
      const stores = openSqliteStores({ file, queue: { maxBatch: 60_000, maxQueued: 60_000 } });
      try {
        writeBig(stores);
        expect(statSync(file).size).to.be.greaterThan(4 * MB);
      } finally {
        stores.close();
      }
    });

    it('with one, the commit only appends to the log: the file is as small as before', () => {
      const file = path.join(dir, 'appended.db');
      // A thread whose first round is ten minutes away cannot copy anything during this test, so
      // what the file holds after the commit is what the commit itself wrote there.
      const stores = openSqliteStores({ file, queue: { maxBatch: 60_000, maxQueued: 60_000 }, backgroundCheckpoint: { intervalMs: 600_000 } });
      try {
        writeBig(stores);
        expect(statSync(file).size).to.be.lessThan(MB);
        expect(statSync(`${file}-wal`).size).to.be.greaterThan(4 * MB);
      } finally {
        stores.close();
      }
    });

    it('the thread copies the log into the file soon after, and nothing is lost', async () => {
      const file = path.join(dir, 'background.db');
      const messages: CheckpointMessage[] = [];
      const stores = openSqliteStores({ file, queue: { maxBatch: 60_000, maxQueued: 60_000 }, backgroundCheckpoint: { intervalMs: 25, onMessage: (m) => messages.push(m) } });
      try {
        writeBig(stores);
        await eventually(() => statSync(file).size > 4 * MB, 5000, 'the checkpoint thread to copy the log');
        await eventually(() => messages.some((m) => m.kind === 'checkpointed' && m.pages > 1000), 5000, 'its report');
        expect(messages.filter((m) => m.kind === 'failed')).to.deep.equal([]);
        expect(await stores.usage.list({ limit: 1 })).to.have.length(1);
      } finally {
        stores.close();
      }
      expect(usageRowsIn(file)).to.equal(60_000);
    });

    it('a thread that cannot work: the connection goes back to checkpointing in its own commits, and nothing is lost', async () => {
      const file = path.join(dir, 'fallback.db');
      const moved = path.join(dir, 'moved.db');
      const fallbacks: string[] = [];
      const stores = openSqliteStores({
        file,
        queue: { maxBatch: 60_000, maxQueued: 60_000 },
        backgroundCheckpoint: { intervalMs: 25, onFallback: (reason) => fallbacks.push(reason) },
      });
      // Before the thread has started (it must boot a whole node environment first): the file it
      // opens by name is gone, so it fails. This connection keeps its open file under the new name.
      renameSync(file, moved);
      try {
        await eventually(() => fallbacks.length > 0, 5000, 'the fallback');
        expect(fallbacks[0]).to.match(/unable to open|SQLITE_CANTOPEN/i);
        writeBig(stores);
        // The commit that passed 1,000 pages copied the log into the file itself, as without a thread.
        expect(statSync(moved).size).to.be.greaterThan(4 * MB);
        expect(await stores.usage.list({ limit: 1 })).to.have.length(1);
      } finally {
        await stores.closeGracefully();
      }
      expect(fallbacks).to.have.length(1);
      expect(usageRowsIn(moved)).to.equal(60_000);
    });

    it('commits faster than the thread can catch up with: the connection copies the rest itself, so the log stays bounded', async () => {
      const file = path.join(dir, 'busy.db');
      const messages: CheckpointMessage[] = [];
      // A 2 MB limit, checked after each of the thread's rounds (every 50 ms).
      const stores = openSqliteStores({
        file,
        queue: { maxBatch: 100_000, maxQueued: 100_000 },
        backgroundCheckpoint: { intervalMs: 50, logLimitPages: 500, onMessage: (m) => messages.push(m) },
      });
      let largest = 0;
      let written = 0;
      try {
        // A commit of 300 rows every 2 ms for 2 s: far more log than the limit, always being appended to.
        const until = Date.now() + 2000;
        while (Date.now() < until) {
          for (let i = 0; i < 300; i++) stores.usage.record(usageRow(written++, null, 0));
          stores.usage.flush();
          largest = Math.max(largest, statSync(`${file}-wal`).size);
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        const logged = messages.filter((m): m is Extract<CheckpointMessage, { kind: 'checkpointed' }> => m.kind === 'checkpointed');
        expect(logged.length).to.be.greaterThan(5);
        // Several restarts of the log: its length went down between rounds.
        expect(logged.filter((m, i) => i > 0 && m.log < logged[i - 1]!.log).length).to.be.greaterThan(1);
        expect(largest).to.be.lessThan(8 * MB);
      } finally {
        await stores.closeGracefully();
      }
      // The thread closed its connection first: the gateway's, closing last, copied the log and deleted it.
      expect(() => statSync(`${file}-wal`)).to.throw();
      expect(usageRowsIn(file)).to.equal(written);
    });
  });

  it('a file a newer version migrated (an upgrade rolled back) opens, and says so; one this version migrated does not', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-schema-'));
    const file = path.join(dir, 'store.db');
    try {
      const told: Array<[number, number]> = [];
      openSqliteStores({ file, onNewerSchema: (found, known) => told.push([found, known]) }).close();
      expect(told).to.deep.equal([]);
      const db = new Database(file);
      const known = (db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number }).v;
      db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(known + 1, Date.now());
      db.close();
      const opened = openSqliteStores({ file, onNewerSchema: (found, newest) => told.push([found, newest]) });
      opened.logs.record(logRow(1));
      opened.close();
      expect(told).to.deep.equal([[known + 1, known]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('rows kept in spill files when the store was locked at close', () => {
    it('a spill file that cannot be moved aside to be written (here: the name would be too long) is reported, and stays', () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-spill-'));
      // 220 characters: the spill file's name fits in 255, the name it is moved aside under does not.
      const file = path.join(dir, `${'s'.repeat(217)}.db`);
      try {
        openSqliteStores({ file }).close();
        const other = new Database(file);
        other.exec('BEGIN IMMEDIATE');
        const closing = openSqliteStores({ file, busyTimeoutMs: 1 });
        closing.usage.record(usageRow(3, null, 0));
        closing.close();
        other.exec('ROLLBACK');
        other.close();
        const failed: Array<[string, string]> = [];
        openSqliteStores({ file, onSpillFailed: (what, error) => failed.push([what, String((error as NodeJS.ErrnoException).code)]) }).close();
        expect(failed).to.deep.equal([['usage', 'ENAMETOOLONG']]);
        expect(statSync(`${file}.unwritten-usage.jsonl`).size).to.be.greaterThan(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('a spill file the store cannot take as it opens (locked) stays for the next opening; the store opens all the same', () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-spill-'));
      const file = path.join(dir, 'store.db');
      try {
        // A closing store that finds the file locked keeps its rows in a file.
        openSqliteStores({ file }).close();
        const other = new Database(file);
        other.exec('BEGIN IMMEDIATE');
        const spilled: string[] = [];
        const closing = openSqliteStores({ file, onSpilled: (what) => spilled.push(what), busyTimeoutMs: 1 });
        closing.usage.record(usageRow(2, null, 0));
        closing.logs.record(logRow(2));
        closing.close();
        expect(spilled).to.deep.equal(['usage', 'request log']);
        // Opening while the lock is still held: the store opens, the rows wait in their files.
        const failed: string[] = [];
        const locked = openSqliteStores({ file, onSpillFailed: (what) => failed.push(what) });
        expect(failed).to.deep.equal(['usage', 'request log']);
        locked.close();
        other.exec('ROLLBACK');
        const written: Array<[string, number]> = [];
        const opened = openSqliteStores({ file, onSpillWritten: (what, rows) => written.push([what, rows]) });
        expect(written).to.deep.equal([
          ['usage', 1],
          ['request log', 1],
        ]);
        opened.close();
        const count = (table: string) => (other.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE request_id = 'req_2'`).get() as { n: number }).n;
        expect([count('usage'), count('request_log')]).to.deep.equal([1, 1]);
        other.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});

describe('config keys synced while another process holds the write lock', function () {
  this.timeout(20_000);

  it('waits for the lock (as the store waits at start) instead of failing at once with "database is locked"', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-sync-lock-'));
    const file = path.join(dir, 'keys.db');
    // The store made, then closed: its tables exist for the other process to lock.
    openSqliteStores({ file }).close();
    // Another process takes the write lock, says so, and keeps it a moment.
    const holder = spawn(process.execPath, ['-e', `
      const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});
      const db = new Database(${JSON.stringify(file)});
      db.exec('BEGIN EXCLUSIVE');
      process.stdout.write('locked\\n');
      setTimeout(() => { db.exec('COMMIT'); db.close(); }, 1500);
    `]);
    await new Promise<void>((resolve, reject) => {
      holder.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('locked') && resolve());
      holder.once('exit', (code) => reject(new Error(`the lock holder exited (${code})`)));
    });
    const stores = openSqliteStores({ file });
    try {
      await stores.keys.syncConfigKeys([{ name: 'svc', secret: 'sk-sync-under-lock-000000001', source: 'config' }]);
      expect((await stores.keys.list()).map((k) => k.name)).to.deep.equal(['svc']);
    } finally {
      stores.close();
      holder.kill();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('stored Responses turns: items found by their id (item_reference)', () => {
  it("finds an item of the key's own turns, from memory and, after a restart, from the file; never another key's", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-items-'));
    const file = path.join(dir, 'responses.db');
    const said = { id: 'msg_sy_1%x', type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'hi Zed' }] };
    const first = openSqliteStores({ file });
    try {
      first.responses.save({ id: 'resp_1', keyId: 'key_a', provider: 'p', previousResponseId: null, model: 'm', createdAt: 1, input: [{ id: 'in_1', role: 'user', content: 'I am Zed' }], output: [said] });
      first.responses.save({ id: 'resp_2', keyId: 'key_b', provider: 'p', previousResponseId: null, model: 'm', createdAt: 2, input: [], output: [{ id: 'msg_sy_b', type: 'message' }] });
      expect(await first.responses.findItem('msg_sy_1%x', 'key_a')).to.deep.equal({ item: said, provider: 'p' });
      expect(await first.responses.findItem('in_1', 'key_a')).to.deep.include({ provider: 'p' });
      // Another key's item, known from memory: said so, not given.
      expect(await first.responses.findItem('msg_sy_1%x', 'key_b')).to.equal('another key');
      // A later turn that names the item by reference does not become its place.
      first.responses.save({ id: 'resp_3', keyId: 'key_a', provider: 'q', previousResponseId: null, model: 'm', createdAt: 3, input: [{ type: 'item_reference', id: 'msg_sy_1%x' }], output: [] });
      expect(await first.responses.findItem('msg_sy_1%x', 'key_a')).to.deep.equal({ item: said, provider: 'p' });
      // Another key giving one of its input items the same id takes nothing from the key that made it.
      first.responses.save({ id: 'resp_4', keyId: 'key_b', provider: 'p', previousResponseId: null, model: 'm', createdAt: 4, input: [{ id: 'msg_sy_1%x', role: 'user', content: 'mine now' }], output: [] });
      expect(await first.responses.findItem('msg_sy_1%x', 'key_a')).to.deep.equal({ item: said, provider: 'p' });
    } finally {
      first.close();
    }
    const again = openSqliteStores({ file });
    try {
      expect(await again.responses.findItem('msg_sy_1%x', 'key_a')).to.deep.equal({ item: said, provider: 'p' });
      expect(await again.responses.findItem('msg_sy_1%x', 'key_a', false)).to.equal(undefined);
      expect(await again.responses.findItem('msg_sy_1', 'key_a')).to.equal(undefined);
      expect(await again.responses.findItem('msg_sy_b', 'key_a')).to.equal(undefined);
      expect(await again.responses.findItem('msg_sy_b', 'key_b')).to.deep.include({ provider: 'p' });
    } finally {
      again.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
