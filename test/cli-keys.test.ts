/**
 * `switchyard keys | logs | usage` as an operator runs them: `node dist/core/cli.js ...` in a
 * child process, on a SQLite file named by a temp configuration, with and without a gateway
 * running on the same file. No fixed sleeps: waits are on events or bounded polls.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { money, parseTime, UsageError } from '../core/cli-admin.js';
import { parseTime as parseAdminTime } from '../plugins/admin/index.js';
import { cliPath } from './support/paths.js';

const SCRUBBED = ['PORT', 'HOST', 'SWITCHYARD_CONFIG', 'LOG_LEVEL', 'LOG_FORMAT', 'NODE_OPTIONS'];
const SECRET = /^sk-sy-[A-Za-z0-9]{40}$/;

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SCRUBBED) delete env[name];
  return env;
}

/** A configuration in a fresh folder whose store is `./data/keys.db` next to it (a relative url, as operators write it). */
function writeConfig(extra = ''): { file: string; dir: string; db: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-cli-keys-'));
  const file = path.join(dir, 'gateway.config.yaml');
  writeFileSync(
    file,
    `server: { host: 127.0.0.1, port: 0 }
logging: { level: info }
storage:
  url: ./data/keys.db
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat]
providers:
  - id: mock
    type: mock
    models: [mock-chat]
models:
  - name: echo
    targets: [{ provider: mock, model: mock-chat }]
pricing:
  mock-chat: { input: 1000, output: 2000 }
${extra}`,
  );
  return { file, dir, db: path.join(dir, 'data', 'keys.db') };
}

const children = new Set<ChildProcess>();

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run the CLI to completion (bounded). */
function cli(args: string[], ms = 15000): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, ...args], { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`timed out after ${ms} ms: switchyard ${args.join(' ')}\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, ms);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Run and expect exit 0; the stdout. */
async function ok(args: string[]): Promise<string> {
  const result = await cli(args);
  expect(result.code, `switchyard ${args.join(' ')}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).to.equal(0);
  return result.stdout;
}

async function okJson<T = Record<string, unknown>>(args: string[]): Promise<T> {
  const out = await ok([...args, '--json']);
  return JSON.parse(out) as T;
}

/** The secret from the plain-text block `keys create` prints. */
function secretFrom(stdout: string): string {
  const match = /^\s*key:\s+(\S+)\s*$/m.exec(stdout);
  expect(match, stdout).to.not.equal(null);
  return match![1]!;
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** Poll until `probe` returns a value (not undefined); bounded, never a fixed sleep. */
async function eventually<T>(probe: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface Gateway {
  url: string;
  child: ChildProcess;
  output(): string;
  stop(): Promise<number | null>;
}

/** `switchyard start --config FILE --port 0`; the URL from the `listening` JSON line. */
function startGateway(file: string, ms = 15000): Promise<Gateway> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, 'start', '--config', file, '--port', '0'], { env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let out = '';
    let err = '';
    let partial = '';
    let found = false;
    const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
    const timer = setTimeout(() => reject(new Error(`no listening line within ${ms} ms\nstdout:\n${out}\nstderr:\n${err}`)), ms);
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      partial += chunk;
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (found || !line.includes('listening')) continue;
        found = true;
        clearTimeout(timer);
        const url = String((JSON.parse(line) as { url: string }).url);
        resolve({
          url,
          child,
          output: () => out + err,
          stop: async () => {
            child.kill('SIGTERM');
            return exited;
          },
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      if (!found) reject(new Error(`the gateway exited (${code}) before listening\nstdout:\n${out}\nstderr:\n${err}`));
    });
  });
}

async function chat(url: string, key: string, content = 'hello from the operator'): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content }] }),
  });
}

function killLeftovers(): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
}

interface KeyJson {
  id: string;
  object: string;
  name: string;
  prefix: string;
  status: string;
  source: string;
  key?: string;
  hash?: unknown;
  models: string[] | null;
  rpm: number | null;
  tpm: number | null;
  max_concurrent: number | null;
  budget: number | null;
  expires_at: string | null;
  revoked_at: string | null;
  already_revoked?: boolean;
}

describe('cli: keys, logs, usage', function () {
  this.timeout(60000);
  afterEach(killLeftovers);
  after(killLeftovers);

  describe('keys (no gateway running)', () => {
    it('create prints a new sk-sy- key once, in a short block; the store is storage.url relative to the config', async () => {
      const { file, db } = writeConfig();
      const out = await ok(['keys', 'create', '--config', file, '--name', 'ci-bot']);
      const secret = secretFrom(out);
      expect(secret).to.match(SECRET);
      expect(out).to.match(/^\s*id:\s+key_[0-9a-f]{16}$/m);
      expect(out).to.match(/^\s*name:\s+ci-bot$/m);
      expect(out).to.match(new RegExp(`^\\s*prefix:\\s+${secret.slice(0, 10)}…$`, 'm'));
      expect(out.split(secret)).to.have.length(2); // shown exactly once
      expect(existsSync(db), `${db} should exist`).to.equal(true);
    });

    it("needs no credential in the shell: keys, logs and usage only use the stores (check and start still refuse an unset one)", async () => {
      // A provider's credential, the admin key and two client keys' secrets, each from a variable
      // this shell does not have (as the configuration contract's examples write them).
      const { file } = writeConfig(
        'auth:\n  adminKey: ${SWITCHYARD_TEST_UNSET_ADMIN_KEY}\n  keys:\n    - name: tester\n      key: ${SWITCHYARD_TEST_UNSET_TESTER_KEY}\n    - name: other\n      key: ${SWITCHYARD_TEST_UNSET_OTHER_KEY}\n',
      );
      const vendor = `  - { id: vendor, type: openai, baseUrl: 'https://api.vendor.example/v1', apiKey: '\${SWITCHYARD_TEST_UNSET_VENDOR_KEY}', models: [vendor-1] }\n`;
      writeFileSync(file, readFileSync(file, 'utf8').replace('providers:\n', `providers:\n${vendor}`));
      // The declared keys' names are still known: one of them cannot be taken.
      const taken = await cli(['keys', 'create', '--config', file, '--name', 'tester']);
      expect(taken.code).to.equal(1);
      expect(taken.stderr).to.contain('declared in auth.keys');
      const created = await cli(['keys', 'create', '--config', file, '--name', 'no-secrets']);
      expect(created.code, created.stderr).to.equal(0);
      for (const args of [['keys', 'list'], ['logs'], ['usage']]) {
        const result = await cli([...args, '--config', file]);
        expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0);
      }
      const checked = await cli(['check', '--config', file]);
      expect(checked.code).to.equal(1);
      for (const name of ['VENDOR_KEY', 'ADMIN_KEY', 'TESTER_KEY', 'OTHER_KEY']) expect(checked.stderr).to.contain(`SWITCHYARD_TEST_UNSET_${name}`);
    });

    it('list shows the key (id, name, prefix, status, limits) but never its secret nor its hash', async () => {
      const { file } = writeConfig();
      const secret = secretFrom(
        await ok(['keys', 'create', '--config', file, '--name', 'alice', '--models', 'gpt-4o*,echo', '--budget', '2.5', '--rpm', '60', '--expires-in-days', '30']),
      );
      const table = await ok(['keys', 'list', '--config', file]);
      expect(table).to.match(/^ID\s+NAME\s+PREFIX\s+CREATED\s+EXPIRES\s+STATUS\s+SPENT \/ BUDGET\s+MODELS$/m);
      const row = table.split('\n').find((line) => line.includes('alice'))!;
      expect(row).to.contain(secret.slice(0, 10)).and.to.contain('active').and.to.contain('0 / 2.5').and.to.contain('gpt-4o*,echo');
      const listed = await ok(['keys', 'list', '--config', file, '--json']);
      for (const text of [table, listed]) {
        expect(text).not.to.contain(secret);
        expect(text).not.to.contain(secret.slice(10));
        expect(text).not.to.contain(sha256(secret));
      }
      const list = JSON.parse(listed) as { object: string; data: KeyJson[] };
      expect(list.object).to.equal('list');
      expect(list.data).to.have.length(1);
      const key = list.data[0]!;
      expect(key).to.include({ name: 'alice', prefix: `${secret.slice(0, 10)}…`, status: 'active', source: 'cli', rpm: 60, budget: 2.5 });
      expect(key.models).to.deep.equal(['gpt-4o*', 'echo']);
      expect(key).not.to.have.property('hash');
      expect(key).not.to.have.property('key');
      const days = (Date.parse(key.expires_at!) - Date.now()) / 86_400_000;
      expect(days).to.be.within(29.9, 30.1);
    });

    it('create --json prints one object with the key; show finds it by id and by name', async () => {
      const { file } = writeConfig();
      const created = await okJson<KeyJson>([
        'keys', 'create', '--config', file, '--name', 'bob', '--tpm', '10000', '--max-concurrent', '4', '--expires', '2099-01-31T12:00:00Z',
      ]);
      expect(created.key).to.match(SECRET);
      expect(created).to.include({ object: 'api_key', name: 'bob', tpm: 10000, max_concurrent: 4, status: 'active', expires_at: '2099-01-31T12:00:00.000Z' });
      expect(created.id).to.match(/^key_[0-9a-f]{16}$/);

      const byId = await okJson<KeyJson>(['keys', 'show', created.id, '--config', file]);
      const byName = await okJson<KeyJson>(['keys', 'show', 'bob', '--config', file]);
      expect(byId).to.deep.equal(byName);
      expect(byId.id).to.equal(created.id);
      expect(JSON.stringify(byId)).not.to.contain(created.key!);
      expect(JSON.stringify(byId)).not.to.contain(sha256(created.key!));

      const text = await ok(['keys', 'show', 'bob', '--config', file]);
      expect(text).to.match(new RegExp(`^\\s*id:\\s+${created.id}$`, 'm'));
      expect(text).to.match(/^\s*max concurrent:\s+4$/m);
      expect(text).to.match(/^\s*expires:\s+2099-01-31 12:00Z$/m);
      expect(text).not.to.contain(created.key!);
      // 128 characters as the admin API counts them (code points): 128 emoji are 256 UTF-16 units.
      const emoji = '\u{1F600}'.repeat(128);
      expect((await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', emoji])).name).to.equal(emoji);
    });

    it('revoke hides the key from list (not from list --all); revoking twice says so and exits 0', async () => {
      const { file } = writeConfig();
      const created = await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', 'temp']);
      await ok(['keys', 'create', '--config', file, '--name', 'keeper']);

      const first = await ok(['keys', 'revoke', 'temp', '--config', file]);
      expect(first).to.contain('Revoked key').and.to.contain(created.id);
      const second = await cli(['keys', 'revoke', created.id, '--config', file]);
      expect(second.code, second.stderr).to.equal(0);
      expect(second.stdout).to.contain('already revoked');
      const again = await okJson<KeyJson>(['keys', 'revoke', 'temp', '--config', file]);
      expect(again.already_revoked).to.equal(true);
      expect(again.status).to.equal('revoked');

      const list = await ok(['keys', 'list', '--config', file]);
      expect(list).to.contain('keeper').and.not.to.contain('temp');
      expect(list).to.contain('1 revoked key hidden');
      const all = await okJson<{ data: KeyJson[] }>(['keys', 'list', '--all', '--config', file]);
      expect(all.data.map((k) => [k.name, k.status])).to.deep.equal([
        ['temp', 'revoked'],
        ['keeper', 'active'],
      ]);
      expect(all.data[0]!.revoked_at).to.be.a('string');

      // the name is free again once its key is revoked; show by name then means the live key
      const reborn = await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', 'temp']);
      expect((await okJson<KeyJson>(['keys', 'show', 'temp', '--config', file])).id).to.equal(reborn.id);
    });

    it('a name already in use by a live key is refused (exit 1)', async () => {
      const { file } = writeConfig();
      await ok(['keys', 'create', '--config', file, '--name', 'dup']);
      const result = await cli(['keys', 'create', '--config', file, '--name', 'dup']);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.contain("a key named 'dup' already exists");
      expect(result.stdout).to.equal('');
    });

    it('an unknown key exits 1 with a clear message (show, revoke, logs --key, usage --key)', async () => {
      const { file } = writeConfig();
      for (const args of [
        ['keys', 'show', 'nobody'],
        ['keys', 'revoke', 'nobody'],
        ['logs', '--key', 'nobody'],
        ['usage', '--key', 'nobody'],
      ]) {
        const result = await cli([...args, '--config', file]);
        expect(result.code, args.join(' ')).to.equal(1);
        expect(result.stderr).to.contain("no key with id or name 'nobody'");
        expect(result.stderr).not.to.contain('Usage:');
      }
    });

    it('bad arguments exit 2 with the usage text, before the configuration is read', async () => {
      const missing = path.join(tmpdir(), 'switchyard-no-such-dir', 'absent.yaml');
      const cases: Array<[string[], string]> = [
        [['keys', 'create', '--name', 'x', '--rpm', 'abc'], '--rpm must be a whole number'],
        [['keys', 'create', '--name', 'x', '--rpm', '0'], '--rpm must be between 1'],
        [['keys', 'create', '--name', 'x', '--tpm', '1.5'], '--tpm must be a whole number'],
        [['keys', 'create', '--name', 'x', '--max-concurrent', '-3'], ''],
        [['keys', 'create', '--name', 'x', '--budget', 'lots'], '--budget must be a number'],
        [['keys', 'create', '--name', 'x', '--budget=-1'], '--budget must be a number'],
        [['keys', 'create', '--name', 'x', '--expires', 'tomorrow'], '--expires takes a date-time'],
        [['keys', 'create', '--name', 'x', '--expires', '2001-01-01T00:00:00Z'], 'is in the past'],
        [['keys', 'create', '--name', 'x', '--expires', '2030-02-30T00:00:00Z'], '--expires must be an ISO date-time'],
        [['keys', 'create', '--name', 'x', '--expires-in-days', '0'], '--expires-in-days must be more than 0'],
        [['keys', 'create', '--name', 'x', '--expires-in-days', '5', '--expires', '2099-01-01T00:00:00Z'], 'not both'],
        [['keys', 'create'], 'needs --name'],
        [['keys', 'create', '--name', ''], '--name must not be empty'],
        [['keys', 'create', '--name', 'key_0123456789abcdef'], 'looks like a key id'],
        [['keys', 'create', '--name', 'x', '--no-such-flag'], "Unknown option '--no-such-flag'"],
        [['keys', 'create', '--name', 'x', '--models', ','], '--models needs at least one'],
        [['keys', 'create', '--name', 'x', '--models', 'none'], "--models none would allow no model at all; to allow every model give --models '*'"],
        [['keys', 'update', 'x', '--models', 'None'], '--models none would allow no model at all'],
        [['keys', 'list', '--name', 'x'], "option --name does not apply to 'keys list'"],
        [['keys', 'list', 'extra'], "unexpected argument 'extra'"],
        [['keys'], 'needs a subcommand'],
        [['keys', 'rotate'], "unknown keys subcommand 'rotate'"],
        [['keys', 'show'], 'needs a key id or name'],
        [['keys', 'revoke', 'a', 'b'], "unexpected argument 'b'"],
        [['logs', '--limit', '0'], '--limit must be between 1 and 1000'],
        [['logs', '--limit', '1001'], '--limit must be between 1 and 1000'],
        [['logs', '--status', 'ok'], '--status must be a whole number'],
        [['logs', '--since', 'yesterday'], '--since must be an ISO date-time'],
        [['logs', '--since', '1700000000'], 'looks like epoch seconds'],
        [['logs', '--since', '1h', '--until', '2h'], '--until must not be before --since'],
        [['usage', '--since', '99999999999d'], 'reaches back before any date there is'],
        [['logs', '--by', 'key'], "option --by does not apply to 'logs'"],
        [['usage', '--by', 'week'], '--by takes key, model and day'],
        [['usage', '--status', '200'], "option --status does not apply to 'usage'"],
        [['start', '--json'], "option --json does not apply to 'start'"],
      ];
      // Four at a time: each is its own process.
      for (let i = 0; i < cases.length; i += 4) {
        const batch = cases.slice(i, i + 4);
        const results = await Promise.all(batch.map(([args]) => cli([...args, '--config', missing])));
        batch.forEach(([args, message], j) => {
          const result = results[j]!;
          expect(result.code, `${args.join(' ')}\n${result.stderr}`).to.equal(2);
          expect(result.stderr, args.join(' ')).to.contain(message).and.to.contain('Usage:');
          expect(result.stdout, args.join(' ')).to.equal('');
        });
      }
    });

    it('an invalid --cursor exits 2; a missing configuration exits 1', async () => {
      const { file } = writeConfig();
      const bad = await cli(['logs', '--cursor', 'not-a-cursor', '--config', file]);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.contain('--cursor');
      const missing = path.join(tmpdir(), 'switchyard-no-such-dir', 'absent.yaml');
      const absent = await cli(['keys', 'list', '--config', missing]);
      expect(absent.code).to.equal(1);
      expect(absent.stderr).to.contain('file not found');
    });

    it('storage.url :memory: is refused with a reason (exit 1)', async () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-cli-keys-'));
      const file = path.join(dir, 'gateway.config.yaml');
      writeFileSync(file, "storage: { url: ':memory:' }\nproviders: [{ id: mock, type: mock, models: [mock-chat] }]\n");
      const result = await cli(['keys', 'list', '--config', file]);
      expect(result.code).to.equal(1);
      expect(result.stderr).to.contain(':memory:');
    });

    it('keys from auth.keys: their names are taken, revoking one warns it comes back; a name with control characters is refused there as the CLI refuses it', async () => {
      const evil = writeConfig('auth:\n  keys:\n    - { name: "evil\\u001b[31mred", key: sk-config-9876543210 }\n');
      const refused = await cli(['keys', 'list', '--config', evil.file]);
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.contain('auth.keys[0].name').and.contain('no control or invisible characters');
      expect(refused.stderr).not.to.contain('\u001b');
      const { file } = writeConfig('auth:\n  keys:\n    - { name: from-file, key: sk-config-0123456789 }\n');
      const taken = await cli(['keys', 'create', '--name', 'from-file', '--config', file]);
      expect(taken.code).to.equal(1);
      expect(taken.stderr).to.contain("a key named 'from-file' is declared in auth.keys");

      // The gateway copies auth.keys into the store when it starts.
      const gateway = await startGateway(file);
      expect(await gateway.stop()).to.equal(0);
      expect(await ok(['keys', 'list', '--config', file])).to.contain('from-file');

      const revoked = await cli(['keys', 'revoke', 'from-file', '--config', file]);
      expect(revoked.code).to.equal(0);
      expect(revoked.stdout).to.contain('Revoked key');
      expect(revoked.stderr).to.contain('auth.keys').and.to.contain('restores it at its next start');
    });
  });

  describe('logs and usage (no gateway running)', () => {
    it('are empty on a new store, and --json parses', async () => {
      const { file } = writeConfig();
      expect(await ok(['logs', '--config', file])).to.contain('No requests match.');
      const logs = await okJson<{ object: string; data: unknown[]; next_cursor: string | null }>(['logs', '--config', file]);
      expect(logs).to.deep.equal({ object: 'list', data: [], next_cursor: null });
      const usage = await okJson<{ data: Array<Record<string, unknown>>; since: string | null }>(['usage', '--since', '24h', '--config', file]);
      expect(usage.data).to.have.length(1);
      expect(usage.data[0]).to.include({ requests: 0, cost: 0 });
      expect(Date.now() - Date.parse(usage.since!)).to.be.within(86_400_000 - 60_000, 86_400_000 + 60_000);
      const grouped = await okJson<{ data: unknown[] }>(['usage', '--by', 'key,model,day', '--config', file]);
      expect(grouped.data).to.deep.equal([]);
      // `none` is the grand total, as the admin API's group_by=none.
      const total = await okJson<{ data: Array<Record<string, unknown>> }>(['usage', '--by', 'none', '--config', file]);
      expect(total.data).to.have.length(1);
      expect(total.data[0]).to.include({ requests: 0, cost: 0 });
      // An empty range (since = until) is no mistake, as the admin API takes it: nothing in it.
      const empty = await okJson<{ data: unknown[] }>(['logs', '--since', '2026-01-01', '--until', '2026-01-01', '--config', file]);
      expect(empty.data).to.deep.equal([]);
    });
  });

  describe('the operator story, with a gateway running on the same file', () => {
    it('create a key while it runs, use it, read its tokens and cost from usage and logs, revoke it: 401 revoked_api_key', async () => {
      const { file } = writeConfig();
      const gateway = await startGateway(file);
      try {
        const created = await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', 'operator', '--budget', '100']);
        const secret = created.key!;
        expect(secret).to.match(SECRET);

        // The gateway notices the new key (SQLite data_version) without a restart.
        const res = await chat(gateway.url, secret, 'one two three four');
        const body = (await res.json()) as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; completion_tokens: number } };
        expect(res.status, JSON.stringify(body)).to.equal(200);
        expect(body.choices[0]!.message.content).to.equal('one two three four');
        const requestId = res.headers.get('x-request-id')!;
        expect(requestId).to.be.a('string').and.not.equal('');
        const { prompt_tokens: prompt, completion_tokens: completion } = body.usage;
        expect(completion).to.equal(4);

        // Usage rows are written in batches (about every 250 ms): poll, bounded.
        type Totals = { data: Array<{ requests: number; prompt_tokens: number; completion_tokens: number; cost: number }> };
        const usage = await eventually(
          async () => {
            const totals = await okJson<Totals>(['usage', '--key', 'operator', '--config', file]);
            return totals.data[0]!.requests >= 1 ? totals.data[0]! : undefined;
          },
          5000,
          'the usage row',
        );
        expect(usage.requests).to.equal(1);
        expect(usage.prompt_tokens).to.equal(prompt);
        expect(usage.completion_tokens).to.equal(completion);
        const expectedCost = (prompt * 1000 + completion * 2000) / 1_000_000;
        expect(usage.cost).to.be.greaterThan(0).and.closeTo(expectedCost, 1e-9);

        const text = await ok(['usage', '--key', 'operator', '--by', 'model', '--config', file]);
        expect(text).to.match(/^MODEL\s+REQUESTS\s+PROMPT\s+COMPLETION\s+CACHED\s+CACHE WRITE\s+REASONING\s+COST$/m);
        expect(text).to.match(new RegExp(`^mock-chat\\s+1\\s+${prompt}\\s+${completion}\\s+0\\s+0\\s+0\\s+${money(expectedCost).replace('.', '\\.')}$`, 'm'));

        type Logs = { data: Array<{ request_id: string; key_name: string; key_prefix: string; status: number; cost: number | null; prompt_tokens: number | null }>; next_cursor: string | null };
        const entry = await eventually(
          async () => (await okJson<Logs>(['logs', '--key', 'operator', '--config', file])).data.find((e) => e.request_id === requestId),
          5000,
          'the request-log row',
        );
        expect(entry).to.include({ key_name: 'operator', key_prefix: created.prefix, status: 200, prompt_tokens: prompt });
        expect(entry.cost).to.be.closeTo(expectedCost, 1e-9);
        const logText = await ok(['logs', '--key', 'operator', '--config', file]);
        expect(logText).to.contain(requestId).and.to.contain(`operator (${created.prefix})`);

        // The key's spent follows the ledger.
        const shown = await eventually(
          async () => {
            const key = await okJson<KeyJson & { spent: number }>(['keys', 'show', 'operator', '--config', file]);
            return key.spent > 0 ? key : undefined;
          },
          5000,
          'spent to be written',
        );
        expect(shown.spent).to.be.closeTo(expectedCost, 1e-9);

        // Revoke it with the CLI while the gateway runs: the next call is refused.
        await ok(['keys', 'revoke', 'operator', '--config', file]);
        const refused = await chat(gateway.url, secret);
        const error = (await refused.json()) as { error: { code: string } };
        expect(refused.status).to.equal(401);
        expect(error.error.code).to.equal('revoked_api_key');

        // Neither the secret nor its hash ever shows in anything the CLI printed or the gateway logged.
        const everything = [await ok(['keys', 'list', '--all', '--config', file]), await ok(['logs', '--json', '--config', file]), gateway.output()].join('\n');
        expect(everything).not.to.contain(secret);
        expect(everything).not.to.contain(sha256(secret));

        // And the refusal is in the log too, newest first, with its error code.
        const latest = await eventually(
          async () => {
            const page = await okJson<Logs & { data: Array<{ error_code: string | null }> }>(['logs', '--status', '401', '--limit', '1', '--config', file]);
            return page.data[0];
          },
          5000,
          'the 401 log row',
        );
        expect(latest.error_code).to.equal('revoked_api_key');
      } finally {
        expect(await gateway.stop()).to.equal(0);
      }
    });

    it('update changes a key while the gateway runs: models, rpm, name, budget and expiry apply from its next call; none and * clear them', async () => {
      const { file } = writeConfig(`auth:\n  keys: [{ name: from-file, key: sk-from-the-config-file-0001 }]\n`);
      const gateway = await startGateway(file);
      try {
        const created = await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', 'tuned']);
        const secret = created.key!;
        expect((await chat(gateway.url, secret)).status).to.equal(200);

        const narrowed = await okJson<KeyJson & { models: string[] | null; rpm: number | null }>(['keys', 'update', 'tuned', '--models', 'other-*', '--config', file]);
        expect(narrowed.models).to.deep.equal(['other-*']);
        expect(narrowed.rpm).to.equal(null);
        const refused = await eventually(async () => {
          const res = await chat(gateway.url, secret);
          return res.status === 403 ? ((await res.json()) as { error: { code: string } }) : undefined;
        }, 5000, 'the models list to apply');
        expect(refused.error.code).to.equal('model_not_allowed');

        const text = await ok(['keys', 'update', created.id!, '--models', '*', '--name', 'retuned', '--budget', '50', '--expires-in-days', '2', '--config', file]);
        expect(text).to.contain("Updated key 'tuned'").and.to.match(/models:\s+any/).and.to.match(/budget:\s+50/).and.to.match(/name:\s+retuned/);
        expect(text).not.to.contain(secret);
        await eventually(async () => ((await chat(gateway.url, secret)).status === 200 ? true : undefined), 5000, 'any model again');
        // rpm 1, with this minute's calls already counted: refused.
        await ok(['keys', 'update', 'retuned', '--rpm', '1', '--config', file]);
        await eventually(async () => ((await chat(gateway.url, secret)).status === 429 ? true : undefined), 5000, 'rpm 1');
        const cleared = await okJson<KeyJson & { rpm: number | null; budget: number | null; expires_at: string | null }>(['keys', 'update', 'retuned', '--rpm', 'none', '--budget', 'none', '--expires', 'never', '--config', file]);
        expect([cleared.rpm, cleared.budget, cleared.expires_at]).to.deep.equal([null, null, null]);
        await eventually(async () => ((await chat(gateway.url, secret)).status === 200 ? true : undefined), 5000, 'no rpm limit');

        for (const [args, code, message] of [
          [['keys', 'update', 'retuned'], 2, 'needs something to change'],
          [['keys', 'update', 'retuned', '--rpm', '0'], 2, '--rpm must be between 1'],
          [['keys', 'update', 'from-file', '--rpm', '5'], 1, 'declared in auth.keys'],
          [['keys', 'update', 'retuned', '--name', 'from-file'], 1, "a key named 'from-file'"],
        ] as Array<[string[], number, string]>) {
          const result = await cli([...args, '--config', file]);
          expect(result.code, args.join(' ')).to.equal(code);
          expect(result.stderr).to.contain(message);
        }
        await ok(['keys', 'revoke', 'retuned', '--config', file]);
        const revoked = await cli(['keys', 'update', 'retuned', '--rpm', '5', '--config', file]);
        expect(revoked.code).to.equal(1);
        expect(revoked.stderr).to.contain('revoked');
      } finally {
        expect(await gateway.stop()).to.equal(0);
      }
    });

    it('logs pages newest first with --limit and the printed cursor', async () => {
      const { file } = writeConfig();
      const created = await okJson<KeyJson>(['keys', 'create', '--config', file, '--name', 'pager']);
      const gateway = await startGateway(file);
      const ids: string[] = [];
      try {
        for (let i = 0; i < 3; i++) {
          const res = await chat(gateway.url, created.key!, `call ${i}`);
          expect(res.status).to.equal(200);
          await res.arrayBuffer();
          ids.push(res.headers.get('x-request-id')!);
        }
      } finally {
        expect(await gateway.stop()).to.equal(0); // a clean stop writes what was queued
      }
      type Page = { data: Array<{ request_id: string }>; next_cursor: string | null };
      const first = await okJson<Page>(['logs', '--key', created.id, '--limit', '2', '--config', file]);
      expect(first.data.map((e) => e.request_id)).to.deep.equal([ids[2], ids[1]]);
      expect(first.next_cursor).to.be.a('string');
      const text = await ok(['logs', '--key', created.id, '--limit', '2', '--config', file]);
      expect(text).to.contain(`--cursor ${first.next_cursor}`);
      const second = await okJson<Page>(['logs', '--key', created.id, '--limit', '2', '--cursor', first.next_cursor!, '--config', file]);
      expect(second.data.map((e) => e.request_id)).to.deep.equal([ids[0]]);
      expect(second.next_cursor).to.equal(null);
      expect((await okJson<Page>(['logs', '--model', 'no-such-model', '--config', file])).data).to.deep.equal([]);
      expect((await okJson<Page>(['logs', '--since', '1h', '--key', 'pager', '--config', file])).data).to.have.length(3);
      expect((await okJson<Page>(['logs', '--until', '1h', '--key', 'pager', '--config', file])).data).to.have.length(0);

      const byDay = await okJson<{ data: Array<{ key_id: string; key_name: string; model: string; day: string; requests: number }> }>([
        'usage', '--by', 'day,key,model', '--config', file,
      ]);
      expect(byDay.data).to.have.length(1);
      expect(byDay.data[0]).to.include({ key_id: created.id, key_name: 'pager', model: 'mock-chat', requests: 3, day: new Date().toISOString().slice(0, 10) });
    });
  });
});

describe('cli-admin money', () => {
  it('shows tiny costs without rounding them to 0 and without exponents', () => {
    expect([0, 5.4e-6, 0.0123456, 12.3456789, 5.4e-9, null].map(money)).to.deep.equal(['0', '0.0000054', '0.01235', '12.3457', '0.0000000054', '-']);
  });
});

describe('cli-admin time parsing', () => {
  const now = Date.parse('2025-06-15T12:00:00Z');
  it('reads ISO date-times (UTC unless offset), dates, epoch milliseconds and times ago', () => {
    expect(parseTime('2025-01-31T12:00:00Z', 'since', now)).to.equal(Date.parse('2025-01-31T12:00:00Z'));
    expect(parseTime('2025-01-31T12:00', 'since', now)).to.equal(Date.parse('2025-01-31T12:00:00Z'));
    expect(parseTime('2025-01-31 12:00:00+02:00', 'since', now)).to.equal(Date.parse('2025-01-31T10:00:00Z'));
    expect(parseTime('2025-01-31T12:00:00+0200', 'since', now)).to.equal(Date.parse('2025-01-31T10:00:00Z'));
    expect(parseTime('2025-01-31', 'since', now)).to.equal(Date.parse('2025-01-31T00:00:00Z'));
    expect(parseTime('1735689600000', 'since', now)).to.equal(1735689600000);
    expect(parseTime('30m', 'since', now)).to.equal(now - 30 * 60_000);
    expect(parseTime('24h', 'since', now)).to.equal(now - 86_400_000);
    expect(parseTime('7d', 'since', now)).to.equal(now - 7 * 86_400_000);
  });

  it('refuses what it cannot read', () => {
    for (const bad of ['', 'yesterday', '2025-02-30', '2025-13-01', '24x', '-5h', '1700000000', '2025-01-31T25:00:00Z']) {
      expect(() => parseTime(bad, 'since', now), bad).to.throw(UsageError);
    }
  });

  it('reads every time as the admin API reads it (one parser): an offset of hours alone, a compact date refused as epoch seconds', () => {
    for (const text of ['2026-11-28T21:50:00+05', '2026-11-28T21:50:00.5-03:30', '2025-01-01', '1795000000000']) {
      expect(parseTime(text, 'since', now), text).to.equal(parseAdminTime('since', text));
    }
    expect(parseTime('2026-11-28T21:50:00+05', 'since', now)).to.equal(Date.UTC(2026, 10, 28, 16, 50));
    expect(() => parseTime('20261128', 'since', now)).to.throw(UsageError, 'looks like epoch seconds');
  });
});
