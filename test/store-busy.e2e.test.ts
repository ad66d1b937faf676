import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import OpenAI from 'openai';
import { callJson } from './support/calls.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-store-busy-key-00000001';

/**
 * Another process holding the SQLite file's write lock (an operator's `sqlite3` session, a VACUUM,
 * a large DELETE): the gateway serves on, keeps its rows waiting and writes them all once the
 * lock is gone; a request that must write at once gets a 503 it can try again.
 */
describe('the SQLite file locked by another process', function () {
  this.timeout(30_000);
  let dir: string;
  let gw: RunningGateway;
  let other: Database.Database;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'switchyard-busy-'));
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(path.join(dir, 'gateway.db'))} }
plugins: [request-log, auth, rate-limit, validation, routing, metering, { name: video-tasks, options: { pollIntervalMs: 40, maxPollIntervalMs: 120 } }, openai-chat, video-generations]
auth:
  keys: [{ name: busy, key: ${KEY}, budget: 100 }]
providers:
  - { id: mock, type: mock, models: [mock-chat, mock-video] }
pricing:
  mock-chat: { input: 1, output: 2 }
  mock-video: { perSecond: 0.1 }
`);
    other = new Database(path.join(dir, 'gateway.db'));
  });
  after(async () => {
    if (other.inTransaction) other.exec('ROLLBACK');
    other.close();
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves while the lock is held (no request waits on it), then writes every usage and log row, charged once', async () => {
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    await gw.gateway.stores.flush();
    other.exec('BEGIN IMMEDIATE');
    const ids: string[] = [];
    try {
      // Over a second: several batch writes come due and find the file locked.
      const started = performance.now();
      for (let i = 0; i < 12; i++) {
        const { response } = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: `call ${i}` }] }).withResponse();
        ids.push(response.headers.get('x-request-id')!);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      // The process never waited on the lock (SQLite's wait runs on the event loop: 5 s per write
      // before, each of them stopping every request and timer of the process, this test's too).
      expect(performance.now() - started).to.be.below(4000);
      const health = await fetch(`${gw.url}/healthz`);
      expect(health.status).to.equal(200);
      // A video submit makes its task's row at once: refused for now, with a Retry-After.
      const refused = await callJson<{ error: { code: string } }>(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'waves', duration: 2 }, KEY);
      expect(refused.status, refused.text).to.equal(503);
      expect(refused.json?.error.code).to.equal('store_busy');
      expect(refused.headers.get('retry-after')).to.equal('1');
    } finally {
      other.exec('ROLLBACK');
    }
    expect(gw.logs.some((l) => String(l.message).startsWith('the store is locked by another process'))).to.equal(true);
    // Once the lock is gone, the waiting rows are written (each queue's next try, within 5 s), none lost.
    const count = (table: string) =>
      (other.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE request_id IN (${ids.map(() => '?').join(',')})`).get(...ids) as { n: number }).n;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && (count('usage') < ids.length || count('request_log') < ids.length)) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(count('usage')).to.equal(ids.length);
    expect(count('request_log')).to.equal(ids.length);
    expect(gw.logs.some((l) => String(l.message).startsWith('could not write'))).to.equal(false);
    const { spent } = other.prepare('SELECT spent FROM keys WHERE name = ?').get('busy') as { spent: number };
    const { total } = other.prepare('SELECT SUM(cost) AS total FROM usage WHERE key_id = (SELECT id FROM keys WHERE name = ?)').get('busy') as { total: number };
    expect(spent).to.be.greaterThan(0).and.closeTo(total, 1e-12);
    // And a video submit works again.
    const submitted = await callJson<{ task_id: string }>(gw.url, 'POST', '/v1/video/generations', { model: 'mock-video', prompt: 'waves', duration: 2 }, KEY);
    expect(submitted.status, submitted.text).to.equal(200);
  });

  it('a gateway that stops while the lock is still held keeps its waiting rows in files beside the store; the next start writes them, charged once', async () => {
    const file = path.join(dir, 'stopping.db');
    const config = `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(file)} }
plugins: [request-log, auth, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: stopping, key: ${KEY}, budget: 100 }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1, output: 2 }
`;
    const spills = [`${file}.unwritten-usage.jsonl`, `${file}.unwritten-request_log.jsonl`];
    const first = await startGateway(config);
    const locker = new Database(file);
    const ids: string[] = [];
    try {
      await first.gateway.stores.flush();
      locker.exec('BEGIN IMMEDIATE');
      const client = new OpenAI({ apiKey: KEY, baseURL: `${first.url}/v1`, maxRetries: 0 });
      for (let i = 0; i < 5; i++) {
        const { response } = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: `call ${i}` }] }).withResponse();
        ids.push(response.headers.get('x-request-id')!);
      }
      await first.stop();
      expect(first.logs.filter((l) => String(l.message).startsWith('the store still could not be written as the gateway stopped')).map((l) => l.rows)).to.deep.equal([5, 5]);
      expect(first.logs.some((l) => String(l.message).startsWith('could not write'))).to.equal(false);
      for (const spill of spills) expect(existsSync(spill), spill).to.equal(true);
    } finally {
      if (locker.inTransaction) locker.exec('ROLLBACK');
    }
    const kept = spills.map((spill) => readFileSync(spill));

    const count = (table: string) => (locker.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE request_id IN (${ids.map(() => '?').join(',')})`).get(...ids) as { n: number }).n;
    const spentAndTotal = () => {
      const { spent } = locker.prepare('SELECT spent FROM keys WHERE name = ?').get('stopping') as { spent: number };
      const { total } = locker.prepare('SELECT SUM(cost) AS total FROM usage WHERE key_id = (SELECT id FROM keys WHERE name = ?)').get('stopping') as { total: number };
      return { spent, total };
    };
    expect(count('usage')).to.equal(0);
    const second = await startGateway(config);
    try {
      expect(second.logs.filter((l) => String(l.message).endsWith('rows kept when the store was locked are written')).map((l) => l.rows)).to.deep.equal([5, 5]);
      for (const spill of spills) expect(existsSync(spill), spill).to.equal(false);
      expect(count('usage')).to.equal(5);
      expect(count('request_log')).to.equal(5);
      const { spent, total } = spentAndTotal();
      expect(spent).to.be.greaterThan(0).and.closeTo(total, 1e-12);
    } finally {
      await second.stop();
    }
    // The same files again (a process that stopped after writing them, before deleting them): written once only.
    spills.forEach((spill, i) => writeFileSync(spill, kept[i]!));
    const third = await startGateway(config);
    try {
      for (const spill of spills) expect(existsSync(spill), spill).to.equal(false);
      expect(count('usage')).to.equal(5);
      expect(count('request_log')).to.equal(5);
      const { spent, total } = spentAndTotal();
      expect(spent).to.be.closeTo(total, 1e-12);
    } finally {
      await third.stop();
      locker.close();
    }
  });

  it('a Responses turn answered while the lock is held and still waiting when the gateway stops is kept too: after the restart its previous_response_id carries the conversation on', async () => {
    const file = path.join(dir, 'conversation.db');
    const config = `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(file)} }
plugins: [request-log, auth, validation, routing, metering, openai-chat]
auth:
  keys: [{ name: talker, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`;
    const spill = `${file}.unwritten-responses.jsonl`;
    const first = await startGateway(config);
    const locker = new Database(file);
    let one: OpenAI.Responses.Response;
    let two: OpenAI.Responses.Response;
    try {
      await first.gateway.stores.flush();
      locker.exec('BEGIN IMMEDIATE');
      const client = new OpenAI({ apiKey: KEY, baseURL: `${first.url}/v1`, maxRetries: 0 });
      one = await client.responses.create({ model: 'mock-chat', input: 'remember the word kiwi' });
      two = await client.responses.create({ model: 'mock-chat', input: 'and the word fig', previous_response_id: one.id });
      await first.stop();
      expect(first.logs.some((l) => String(l.message).startsWith('could not write responses rows'))).to.equal(false);
      const spilled = first.logs.filter((l) => String(l.message) === 'the store still could not be written as the gateway stopped: responses rows kept in a file, written when the store next opens');
      expect(spilled.map((l) => l.rows)).to.deep.equal([2]);
      expect(existsSync(spill)).to.equal(true);
    } finally {
      if (locker.inTransaction) locker.exec('ROLLBACK');
    }
    const second = await startGateway(config);
    try {
      expect(second.logs.filter((l) => String(l.message) === 'responses rows kept when the store was locked are written').map((l) => l.rows)).to.deep.equal([2]);
      expect(existsSync(spill)).to.equal(false);
      const client = new OpenAI({ apiKey: KEY, baseURL: `${second.url}/v1`, maxRetries: 0 });
      // The mock counts a word a token: the whole conversation is read again, both earlier turns.
      const three = await client.responses.create({ model: 'mock-chat', input: 'which words?', previous_response_id: two.id });
      expect(three.status).to.equal('completed');
      expect(three.previous_response_id).to.equal(two.id);
      expect(three.usage!.input_tokens).to.be.at.least(16);
      // Still the key's own: scoped as before the restart.
      const row = locker.prepare('SELECT key_id FROM responses WHERE id = ?').get(one!.id) as { key_id: string | null };
      expect(row.key_id).to.be.a('string');
    } finally {
      await second.stop();
      locker.close();
    }
  });
});

/**
 * The store that cannot be written at all for a while (a full disk, a file made read-only, an I/O
 * error): what must write at once (an operator revoking a leaked key) hears so, as a 503 to try
 * again, not a 500 "bug"; calls go on.
 */
describe('the SQLite file that cannot be written (read-only, full)', function () {
  this.timeout(30_000);
  const ADMIN = 'admin-store-unwritable-0123456789';
  let dir: string;
  let gw: RunningGateway;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'switchyard-unwritable-'));
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(path.join(dir, 'gateway.db'))} }
plugins: [request-log, auth, validation, routing, metering, admin, openai-chat]
auth:
  adminKey: ${ADMIN}
  keys: [{ name: busy, key: ${KEY} }]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
  });
  after(async () => {
    await gw?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a key made, changed or revoked meanwhile is a 503 store_unavailable with Retry-After, told at error; chat goes on; then it works', async () => {
    const made = await callJson<{ id: string }>(gw.url, 'POST', '/admin/keys', { name: 'leaked' }, ADMIN);
    expect(made.status, made.text).to.equal(201);
    // The gateway's own connection refuses every write, as SQLite does on a read-only file (SQLITE_READONLY).
    const connection = (gw.gateway.stores.keys as unknown as { s: { db: Database.Database } }).s.db;
    connection.pragma('query_only = 1');
    try {
      for (const [method, route, body] of [
        ['POST', '/admin/keys', { name: 'another' }],
        ['PATCH', `/admin/keys/${made.json!.id}`, { rpm: 5 }],
        ['POST', `/admin/keys/${made.json!.id}/revoke`, undefined],
      ] as const) {
        const refused = await callJson<{ error: { code: string; type: string } }>(gw.url, method, route, body, ADMIN);
        expect(refused.status, `${method} ${route}: ${refused.text}`).to.equal(503);
        expect(refused.json!.error.code).to.equal('store_unavailable');
        expect(refused.headers.get('retry-after')).to.equal('5');
        expect(refused.text).to.not.include('SQLITE').and.not.include('readonly');
      }
      const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const answer = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'still here' }] });
      expect(answer.choices[0]!.message.content).to.be.a('string');
      expect(gw.logs.some((l) => l.level === 'error' && String(l.message) === 'the store cannot be written: a request that must write at once was refused')).to.equal(true);
      expect(gw.logs.some((l) => String(l.message) === 'unhandled error')).to.equal(false);
    } finally {
      connection.pragma('query_only = 0');
    }
    const revoked = await callJson(gw.url, 'POST', `/admin/keys/${made.json!.id}/revoke`, undefined, ADMIN);
    expect(revoked.status, revoked.text).to.equal(200);
  });

  it('the file removed (or replaced) under the running gateway is told at error, and its return at warn', async () => {
    const file = path.join(dir, 'gateway.db');
    const gone = 'the store file was removed or replaced while the gateway runs';
    const told = (start: string) => gw.logs.filter((l) => String(l.message).startsWith(start));
    expect(told(gone)).to.have.length(0);
    renameSync(file, `${file}.moved`);
    try {
      await eventually(() => told(gone).length > 0, 5000, 'the error about the store file');
      expect(told(gone)[0]!.level).to.equal('error');
      expect(told(gone)[0]!.file).to.equal(file);
    } finally {
      renameSync(`${file}.moved`, file);
    }
    await eventually(() => told('the store file is back').length > 0, 5000, 'the store file back');
    // Told once each way, not once a second.
    expect(told(gone)).to.have.length(1);
  });
});
