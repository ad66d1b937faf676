/**
 * The command line as an operator runs it: `node dist/core/cli.js <command> ...` in a child
 * process. No fixed sleeps: every wait is on an event (a stdout line, response data, exit) with
 * a deadline.
 */
import { expect } from 'chai';
import Database from 'better-sqlite3';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cliPath, repoRoot } from './support/paths.js';
import { freePort } from './support/ports.js';

const corpus = path.join(repoRoot, 'test', 'config-corpus');

/** Variables that would change what the child does; the tests set them explicitly when needed. */
const SCRUBBED = ['PORT', 'HOST', 'SWITCHYARD_CONFIG', 'LOG_LEVEL', 'LOG_FORMAT', 'NODE_OPTIONS'];

function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of SCRUBBED) delete env[name];
  return { ...env, ...extra };
}

function tempDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'switchyard-cli-'));
}

function writeYaml(text: string, name = 'gateway.config.yaml'): string {
  const file = path.join(tempDir(), name);
  writeFileSync(file, text);
  return file;
}

function mockConfig(options: { chunkDelayMs?: number; latencyMs?: number; shutdownTimeoutMs?: number; port?: number; host?: string; level?: string } = {}): string {
  return writeYaml(`server:
  host: ${options.host ?? '127.0.0.1'}
  port: ${options.port ?? 0}
  shutdownTimeoutMs: ${options.shutdownTimeoutMs ?? 10000}
logging:
  level: ${options.level ?? 'info'}
plugins: [auth, validation, routing, openai-chat]
providers:
  - id: mock
    type: mock
    chunkDelayMs: ${options.chunkDelayMs ?? 0}
    latencyMs: ${options.latencyMs ?? 0}
    models: [mock-chat]
`);
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface CliProcess {
  child: ChildProcess;
  /** Complete stdout lines so far. */
  lines: string[];
  stdout(): string;
  stderr(): string;
  exited: Promise<Exit>;
  /** Resolves with the first stdout line (already seen or to come) that matches. */
  waitForLine(match: (line: string) => boolean, ms?: number, what?: string): Promise<string>;
  waitForExit(ms?: number): Promise<Exit>;
}

const children = new Set<ChildProcess>();

function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * `switchyard ARGS` in a process of its own; with `npm`, as `npm start -- ARGS` run from the
 * repository in a process group of its own, as a terminal runs it (a signal to the group reaches
 * npm and the gateway, as Ctrl-C does).
 */
function runCli(args: string[], options: { env?: Record<string, string>; cwd?: string; npm?: boolean } = {}): CliProcess {
  const child = options.npm
    ? spawn('npm', ['start', '--silent', '--', ...args.slice(1)], { cwd: repoRoot, env: childEnv(options.env), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    : spawn(process.execPath, [cliPath, ...args], {
        cwd: options.cwd ?? tempDir(),
        env: childEnv(options.env),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
  children.add(child);
  if (options.npm) groupLeaders.add(child);
  let out = '';
  let err = '';
  let partial = '';
  const lines: string[] = [];
  const waiters: Array<{ match: (line: string) => boolean; resolve: (line: string) => void }> = [];
  child.stdout!.setEncoding('utf8');
  child.stderr!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    out += chunk;
    partial += chunk;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.match(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
    }
  });
  child.stderr!.on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      // let the pipes drain before anyone reads stdout/stderr
      let open = 2;
      const closed = () => {
        if (--open === 0) resolve({ code, signal });
      };
      if (child.stdout!.readableEnded) closed();
      else child.stdout!.once('end', closed);
      if (child.stderr!.readableEnded) closed();
      else child.stderr!.once('end', closed);
    });
  });
  const process_: CliProcess = {
    child,
    lines,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForLine(match, ms = 10000, what = 'a stdout line') {
      const seen = lines.find(match);
      if (seen !== undefined) return Promise.resolve(seen);
      const found = new Promise<string>((resolve) => waiters.push({ match, resolve }));
      const early = exited.then((exit) => {
        throw new Error(`the process exited (${exit.code ?? exit.signal}) before ${what}\nstdout:\n${out}\nstderr:\n${err}`);
      });
      return withDeadline(Promise.race([found, early]), ms, `${what}\nstdout so far:\n${out}\nstderr so far:\n${err}`);
    },
    waitForExit(ms = 10000) {
      return withDeadline(exited, ms, `the process to exit\nstdout:\n${out}\nstderr:\n${err}`);
    },
  };
  return process_;
}

interface Listening {
  url: string;
  port: number;
  line: Record<string, unknown>;
}

/** Wait for the one `listening` line (JSON, since stdout is a pipe) and take the URL from it. */
async function listening(cli: CliProcess): Promise<Listening> {
  const raw = await cli.waitForLine((line) => line.includes('listening'), 15000, 'the listening line');
  const line = JSON.parse(raw) as Record<string, unknown>;
  const match = /listening on (http:\/\/\S+)/.exec(String(line.message));
  expect(match, `no URL in ${raw}`).to.not.equal(null);
  const url = match![1]!;
  expect(line.url).to.equal(url);
  return { url, port: Number(new URL(url).port), line };
}

interface Reply {
  status: number;
  body: string;
}

/** GET on a fresh connection (no keep-alive pool). */
function get(url: string, ms = 5000): Promise<Reply> {
  return withDeadline(
    new Promise<Reply>((resolve, reject) => {
      const req = http.get(url, { agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
        res.on('error', reject);
      });
      req.on('error', reject);
    }),
    ms,
    `GET ${url}`,
  );
}


interface Stream {
  /** Resolves on the first body bytes. */
  firstData: Promise<void>;
  /** Resolves when the response ends or is cut; `complete` says which. */
  finished: Promise<{ status: number; body: string; complete: boolean }>;
}

const PROMPT = 'one two three four five six seven eight';

function streamChat(url: string): Stream {
  let firstData!: () => void;
  let failFirst!: (error: Error) => void;
  const first = new Promise<void>((resolve, reject) => {
    firstData = resolve;
    failFirst = reject;
  });
  const finished = new Promise<{ status: number; body: string; complete: boolean }>((resolve, reject) => {
    const payload = JSON.stringify({ model: 'mock-chat', stream: true, messages: [{ role: 'user', content: PROMPT }] });
    const req = http.request(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        let body = '';
        let settled = false;
        const settle = (complete: boolean) => {
          if (settled) return;
          settled = true;
          resolve({ status: res.statusCode!, body, complete });
        };
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
          firstData();
        });
        res.on('end', () => settle(true));
        res.on('aborted', () => settle(false));
        res.on('error', () => settle(false));
        res.on('close', () => settle(res.complete));
      },
    );
    req.on('error', (error) => {
      failFirst(error);
      reject(error);
    });
    req.end(payload);
  });
  finished.catch(() => undefined);
  first.catch(() => undefined);
  return { firstData: first, finished };
}

/** The text of an OpenAI SSE body. */
function contentOf(body: string): string {
  let text = '';
  for (const event of body.split('\n\n')) {
    const data = event.replace(/^data: /, '').trim();
    if (!data || data === '[DONE]') continue;
    const chunk = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string | null } }> };
    // The error event a stream may end with carries no choices.
    for (const choice of chunk.choices ?? []) text += choice.delta?.content ?? '';
  }
  return text;
}

/** A new connection to /readyz after SIGTERM: refused, or answered 503, never 200. */
async function readyzRefusedOr503(url: string): Promise<string> {
  try {
    const reply = await get(`${url}/readyz`, 3000);
    expect(reply.status, `readyz after SIGTERM: ${reply.body}`).to.equal(503);
    return '503';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    expect(['ECONNREFUSED', 'ECONNRESET'], String(error)).to.include(code);
    return code!;
  }
}

/** Children started in a process group of their own (npm start): the whole group is killed. */
const groupLeaders = new WeakSet<ChildProcess>();

function killLeftovers(): void {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    if (groupLeaders.has(child) && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    } else child.kill('SIGKILL');
  }
  children.clear();
}

describe('cli', function () {
  this.timeout(30000);
  afterEach(killLeftovers);
  after(killLeftovers);

  describe('check', () => {
    it('exits 0 for a good file and says ok', async () => {
      const file = path.join(corpus, 'good', 'full.yaml');
      const cli = runCli(['check', '--config', file], { env: { OPENAI_API_KEY: 'sk-x', TESTER_KEY: 'sk-tester-123' } });
      const exit = await cli.waitForExit();
      expect(exit.code, cli.stderr()).to.equal(0);
      expect(cli.stdout()).to.contain(`${file}: ok`);
    });

    it("exits 0 for the repository's gateway.config.yaml", async () => {
      const cli = runCli(['check', '--config', path.join(repoRoot, 'gateway.config.yaml')]);
      expect((await cli.waitForExit()).code, cli.stderr()).to.equal(0);
    });

    it('exits 1 for a bad file and names the YAML path and line on stderr', async () => {
      const file = path.join(corpus, 'bad', 'unknown-nested-key.yaml');
      const cli = runCli(['check', '--config', file]);
      const exit = await cli.waitForExit();
      expect(exit.code).to.equal(1);
      expect(cli.stderr()).to.contain(`${file}:4: server.prot: unknown key`);
      expect(cli.stdout()).not.to.contain('ok');
    });

    it('loads plugins and providers: an unknown provider type exits 1 without echoing the key', async () => {
      const file = path.join(corpus, 'bad', 'unknown-provider-type.yaml');
      const cli = runCli(['check', '--config', file]);
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain('providers[1].type').and.to.contain('unknown provider type');
      expect(cli.stderr()).not.to.contain('sk-live-unknowntype');
    });

    it('plugin options are checked: plugins[0].options.anonymous', async () => {
      const cli = runCli(['check', '--config', path.join(corpus, 'bad', 'plugin-options-schema.yaml')]);
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain('plugins[0].options.anonymous');
    });

    it('a missing variable exits 1 naming the path, without printing the environment', async () => {
      const cli = runCli(['check', '--config', path.join(corpus, 'bad', 'missing-env-var.yaml')], {
        env: { TESTER_KEY: 'sk-env-tester-5f2b9c1d7e3a' },
      });
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain('providers[0].apiKey').and.to.contain('MISSING_VAR');
      expect(cli.stderr() + cli.stdout()).not.to.contain('sk-env-tester-5f2b9c1d7e3a');
    });

    it('a missing file exits 1 naming it', async () => {
      const file = path.join(tempDir(), 'absent.yaml');
      const cli = runCli(['check', '--config', file]);
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain(file).and.to.contain('file not found');
    });

    it('honours SWITCHYARD_CONFIG', async () => {
      const file = mockConfig();
      const cli = runCli(['check'], { env: { SWITCHYARD_CONFIG: file } });
      expect((await cli.waitForExit()).code, cli.stderr()).to.equal(0);
      expect(cli.stdout()).to.contain(`${file}: ok`);
    });

    it('finds gateway.config.yaml in the working directory', async () => {
      const file = mockConfig();
      const cli = runCli(['check'], { cwd: path.dirname(file) });
      expect((await cli.waitForExit()).code, cli.stderr()).to.equal(0);
      expect(cli.stdout()).to.contain(`${file}: ok`);
    });
  });

  describe('usage', () => {
    it('an unknown command exits 2 with the usage', async () => {
      const cli = runCli(['frobnicate']);
      expect((await cli.waitForExit()).code).to.equal(2);
      expect(cli.stderr()).to.contain("unknown command 'frobnicate'").and.to.contain('Usage:');
    });

    it('an unknown option exits 2', async () => {
      const cli = runCli(['check', '--no-such-option']);
      expect((await cli.waitForExit()).code).to.equal(2);
      expect(cli.stderr()).to.contain('Usage:');
    });

    it('a file given without --config exits 2 for start and check, rather than using ./gateway.config.yaml', async () => {
      for (const command of ['start', 'check']) {
        const cli = runCli([command, 'prod.yaml']);
        expect((await cli.waitForExit()).code, command).to.equal(2);
        expect(cli.stderr()).to.contain(`unexpected argument 'prod.yaml' for '${command}' (give the file with --config prod.yaml)`);
        expect(cli.lines.filter((l) => l.includes('listening'))).to.have.length(0);
      }
    });

    it('--help exits 0 with the usage on stdout', async () => {
      const cli = runCli(['--help']);
      expect((await cli.waitForExit()).code).to.equal(0);
      expect(cli.stdout()).to.contain('Usage:').and.to.contain('--config');
    });

    it('version prints the package version', async () => {
      const cli = runCli(['version']);
      expect((await cli.waitForExit()).code).to.equal(0);
      expect(cli.stdout().trim()).to.match(/^\d+\.\d+\.\d+/);
      const extra = runCli(['version', 'extra']);
      expect((await extra.waitForExit()).code).to.equal(2);
      expect(extra.stderr()).to.contain("unexpected argument 'extra' for 'version'");
    });
  });

  describe('start', () => {
    it('logs one listening line with the URL; /healthz and /readyz answer 200; SIGTERM exits 0', async () => {
      const file = mockConfig();
      const cli = runCli(['start', '--config', file, '--port', '0']);
      const { url, port, line } = await listening(cli);
      expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(port).to.be.greaterThan(0);
      expect(line.config).to.equal(file);
      const health = await get(`${url}/healthz`);
      expect(health.status).to.equal(200);
      const ready = await get(`${url}/readyz`);
      expect(ready.status).to.equal(200);
      expect(JSON.parse(ready.body)).to.deep.equal({ status: 'ready' });

      cli.child.kill('SIGTERM');
      const exit = await cli.waitForExit();
      expect(exit, cli.stderr()).to.deep.equal({ code: 0, signal: null });
      expect(cli.lines.filter((l) => l.includes('listening'))).to.have.length(1);
      for (const l of cli.lines.filter((l) => l.trim())) expect(() => JSON.parse(l), `not a JSON line: ${l}`).not.to.throw();
    });

    it('logs the listening line even when logging.level is error', async () => {
      const cli = runCli(['start', '--config', mockConfig({ level: 'error' }), '--port', '0']);
      const { url } = await listening(cli);
      expect((await get(`${url}/readyz`)).status).to.equal(200);
      cli.child.kill('SIGTERM');
      expect(await cli.waitForExit()).to.deep.equal({ code: 0, signal: null });
      expect(cli.lines.filter((l) => l.includes('listening'))).to.have.length(1);
    });

    it('logs the listening line even when LOG_LEVEL=warn', async () => {
      const cli = runCli(['start', '--config', mockConfig(), '--port', '0'], { env: { LOG_LEVEL: 'warn' } });
      await listening(cli);
      cli.child.kill('SIGTERM');
      expect(await cli.waitForExit()).to.deep.equal({ code: 0, signal: null });
      expect(cli.lines.filter((l) => l.includes('listening'))).to.have.length(1);
    });

    it('start is the default command, and SIGINT also exits 0', async () => {
      const cli = runCli(['--config', mockConfig()]);
      const { url } = await listening(cli);
      expect((await get(`${url}/healthz`)).status).to.equal(200);
      cli.child.kill('SIGINT');
      expect(await cli.waitForExit()).to.deep.equal({ code: 0, signal: null });
    });

    it('--port N overrides server.port', async () => {
      const [configured, wanted] = [await freePort(), await freePort()];
      const cli = runCli(['start', '--config', mockConfig({ port: configured }), '--port', String(wanted)]);
      const { port, url } = await listening(cli);
      expect(port).to.equal(wanted);
      expect((await get(`${url}/healthz`)).status).to.equal(200);
    });

    it('env PORT overrides server.port', async () => {
      const [configured, wanted] = [await freePort(), await freePort()];
      const cli = runCli(['start', '--config', mockConfig({ port: configured })], { env: { PORT: String(wanted) } });
      const { port, url } = await listening(cli);
      expect(port).to.equal(wanted);
      expect((await get(`${url}/readyz`)).status).to.equal(200);
    });

    it('--port wins over env PORT', async () => {
      const [fromEnv, fromFlag] = [await freePort(), await freePort()];
      const cli = runCli(['start', '--config', mockConfig(), '--port', String(fromFlag)], { env: { PORT: String(fromEnv) } });
      expect((await listening(cli)).port).to.equal(fromFlag);
    });

    it('server.port is used when neither --port nor PORT is given', async () => {
      const configured = await freePort();
      const cli = runCli(['start', '--config', mockConfig({ port: configured })]);
      expect((await listening(cli)).port).to.equal(configured);
    });

    it('--host overrides server.host', async () => {
      const cli = runCli(['start', '--config', mockConfig({ host: '0.0.0.0' }), '--port', '0', '--host', '127.0.0.1']);
      const { url } = await listening(cli);
      expect(new URL(url).hostname).to.equal('127.0.0.1');
      expect((await get(`${url}/healthz`)).status).to.equal(200);
    });

    it('honours SWITCHYARD_CONFIG', async () => {
      const file = mockConfig();
      const cli = runCli(['start', '--port', '0'], { env: { SWITCHYARD_CONFIG: file } });
      const { line, url } = await listening(cli);
      expect(line.config).to.equal(file);
      expect((await get(`${url}/healthz`)).status).to.equal(200);
    });

    it('an invalid --port is a bad command line: exit 2 and why, before the configuration is read', async () => {
      const cli = runCli(['start', '--config', mockConfig(), '--port', 'eighty']);
      expect((await cli.waitForExit()).code).to.equal(2);
      expect(cli.stderr()).to.contain("invalid port 'eighty'");
      expect(cli.lines.some((l) => l.includes('listening'))).to.equal(false);
      // A file that does not exist is not read: the port is what is wrong.
      const missing = runCli(['start', '--config', path.join(tempDir(), 'none.yaml'), '--port', '99999']);
      expect((await missing.waitForExit()).code).to.equal(2);
      expect(missing.stderr()).to.contain("invalid port '99999'");
      // One from the environment says so: no flag was wrong.
      const fromEnv = runCli(['start', '--config', mockConfig()], { env: { PORT: 'abc' } });
      expect((await fromEnv.waitForExit()).code).to.equal(2);
      expect(fromEnv.stderr()).to.contain("invalid port 'abc' in the environment variable PORT");
      // Only digits: Number() read ' ' as 0 (a random port) and 0x10 as 16.
      const blank = runCli(['start', '--config', mockConfig()], { env: { PORT: ' ' } });
      const hex = runCli(['start', '--config', mockConfig(), '--port', '0x10']);
      const [blankExit, hexExit] = await Promise.all([blank.waitForExit(), hex.waitForExit()]);
      expect([blankExit.code, hexExit.code]).to.deep.equal([2, 2]);
      expect(hex.stderr()).to.contain("invalid port '0x10'");
      // An empty --host (a script's unset "$HOST") would have listened on every interface.
      const host = runCli(['start', '--config', mockConfig(), '--port', '0', '--host', '']);
      expect((await host.waitForExit()).code).to.equal(2);
      expect(host.stderr()).to.contain('--host needs an address');
      expect(host.lines.some((l) => l.includes('listening'))).to.equal(false);
    });

    it('a store it cannot open exits 1 naming the file and storage.url, not the port', async () => {
      const dir = tempDir();
      writeFileSync(path.join(dir, 'afile'), 'not a folder');
      const file = writeYaml(`server: { host: 127.0.0.1, port: 0 }
storage: { url: ${JSON.stringify(path.join(dir, 'afile', 'x.db'))} }
plugins: [auth, validation, routing, openai-chat]
providers: [{ id: mock, type: mock, models: [mock-chat] }]
`);
      const cli = runCli(['start', '--config', file, '--port', '0']);
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain(`cannot open the store of ${file} (storage.url '${path.join(dir, 'afile', 'x.db')}')`);
      expect(cli.stderr()).not.to.contain('port');
    });

    it('LOG_LEVEL and LOG_FORMAT are read in any case; a value that is neither is said and ignored, not taken for silence', async () => {
      const upper = runCli(['start', '--config', mockConfig({ level: 'info' }), '--port', '0'], { env: { LOG_LEVEL: 'WARN', LOG_FORMAT: 'JSON' } });
      await listening(upper);
      // At warn: the auth plugin's warning, and no info line but the listening one (always written).
      await upper.waitForLine((line) => line.includes('no API keys exist yet'), 5000, 'the warning at warn');
      upper.child.kill('SIGTERM');
      await upper.waitForExit(5000);
      expect(upper.lines.filter((l) => l.includes('"level":"info"') && !l.includes('listening'))).to.deep.equal([]);

      // LOG_FORMAT is valid and applies: only the level falls back to the file's.
      const wrong = runCli(['start', '--config', mockConfig({ level: 'info' }), '--port', '0'], { env: { LOG_LEVEL: 'Warning', LOG_FORMAT: 'json' } });
      await listening(wrong);
      wrong.child.kill('SIGTERM');
      await wrong.waitForExit(5000);
      const messages = wrong.lines.filter((l) => l.startsWith('{')).map((l) => String((JSON.parse(l) as { message?: unknown }).message));
      expect(messages, wrong.lines.join('\n')).to.include('LOG_LEVEL="Warning" is not one of error, warn, info, http, debug: ignored (logging.level of the file applies)');
      expect(messages.some((m) => m.startsWith('no API keys exist yet'))).to.equal(true);
      // The file's level (info) applies: its lines are written.
      expect(messages).to.include('shutting down');
    });

    it('a bad file exits 1 before listening, naming the YAML path', async () => {
      const cli = runCli(['start', '--config', path.join(corpus, 'bad', 'unknown-plugin.yaml'), '--port', '0']);
      expect((await cli.waitForExit()).code).to.equal(1);
      expect(cli.stderr()).to.contain('plugins[3]');
      expect(cli.lines.some((l) => l.includes('listening'))).to.equal(false);
    });

    it('a plugin whose apply() never settles: start and check exit 1 and say why, instead of exiting 0 with nothing listening', async () => {
      const dir = tempDir();
      writeFileSync(path.join(dir, 'stuck.mjs'), "export default { name: 'stuck', version: '1.0.0', apply() { return new Promise(() => {}); } };\n");
      const file = path.join(dir, 'gateway.config.yaml');
      writeFileSync(file, 'storage: { url: ":memory:" }\nplugins: [auth, routing, openai-chat, ./stuck.mjs]\nproviders: [{ id: mock, type: mock, models: [m] }]\n');
      for (const command of ['start', 'check']) {
        const cli = runCli([command, '--config', file, '--port', '0'].slice(0, command === 'check' ? 3 : 5));
        expect((await cli.waitForExit()).code, command).to.equal(1);
        expect(cli.stderr(), command).to.contain('never finished');
        expect(cli.lines.some((l) => l.includes('listening'))).to.equal(false);
      }
    });

    it('a plugin whose setup or ready tap throws: start exits 1 naming the plugin and the hook', async () => {
      for (const hook of ['setup', 'ready']) {
        const dir = tempDir();
        writeFileSync(path.join(dir, 'boot.mjs'), `export default { name: 'boot', version: '1.0.0', apply(api) { api.hooks.${hook}.tap('boot', () => { throw new Error('no database'); }); } };\n`);
        const file = path.join(dir, 'gateway.config.yaml');
        writeFileSync(file, 'storage: { url: ":memory:" }\nplugins: [auth, routing, openai-chat, ./boot.mjs]\nproviders: [{ id: mock, type: mock, models: [m] }]\n');
        const cli = runCli(['start', '--config', file, '--port', '0']);
        expect((await cli.waitForExit()).code, hook).to.equal(1);
        expect(cli.stderr(), hook).to.contain(`plugin 'boot' failed in its ${hook} tap: no database`);
      }
    });

    it('a start-up that fails lets go of what the plugins before the failure opened (their close taps run), and exits 1 even if one never lets go', async () => {
      const dir = tempDir();
      // Opens a timer that holds the process until its close tap clears it, and says that it closed.
      writeFileSync(
        path.join(dir, 'holder.mjs'),
        "import { writeFileSync } from 'node:fs';\n" +
          "export default { name: 'holder', version: '1.0.0', apply(api) { const timer = setInterval(() => {}, 1000); api.hooks.close.tap('holder', () => { clearInterval(timer); writeFileSync(new URL('./closed-' + process.argv[2] + '.txt', import.meta.url), 'closed'); }); } };\n",
      );
      // Opens one it never clears.
      writeFileSync(path.join(dir, 'leaky.mjs'), "export default { name: 'leaky', version: '1.0.0', apply() { setInterval(() => {}, 1000); } };\n");
      writeFileSync(path.join(dir, 'boom.mjs'), "export default { name: 'boom', version: '1.0.0', apply() { throw new Error('kaput'); } };\n");
      writeFileSync(path.join(dir, 'late.mjs'), "export default { name: 'late', version: '1.0.0', apply(api) { api.hooks.setup.tap('late', () => { throw new Error('no database'); }); } };\n");
      const configWith = (name: string, plugins: string) => {
        const file = path.join(dir, `${name}.yaml`);
        writeFileSync(file, `storage: { url: ":memory:" }\nplugins: [auth, routing, openai-chat, ${plugins}]\nproviders: [{ id: mock, type: mock, models: [m] }]\n`);
        return file;
      };
      for (const command of ['check', 'start']) {
        const cli = runCli([command, '--config', configWith(`apply-${command}`, './holder.mjs, ./boom.mjs'), '--port', '0'].slice(0, command === 'check' ? 3 : 5));
        expect((await cli.waitForExit(10_000)).code, command).to.equal(1);
        expect(cli.stderr(), command).to.contain("plugin 'boom' failed to start: kaput");
        expect(readFileSync(path.join(dir, `closed-${command}.txt`), 'utf8'), command).to.equal('closed');
      }
      rmSync(path.join(dir, 'closed-start.txt'));
      const setup = runCli(['start', '--config', configWith('setup', './holder.mjs, ./late.mjs'), '--port', '0']);
      expect((await setup.waitForExit(10_000)).code).to.equal(1);
      expect(setup.stderr()).to.contain("plugin 'late' failed in its setup tap: no database");
      expect(readFileSync(path.join(dir, 'closed-start.txt'), 'utf8')).to.equal('closed');
      const leaky = runCli(['check', '--config', configWith('leaky', './leaky.mjs, ./boom.mjs')]);
      expect((await leaky.waitForExit(10_000)).code).to.equal(1);
    });

    it("a plugin's options are frozen all the way down, and a format registered without routes fails its plugin's start, named", async () => {
      const dir = tempDir();
      writeFileSync(path.join(dir, 'fmt.mjs'), "export default { name: 'bad-format', version: '1.0.0', apply(api) { api.registerFormat({ id: 'x' }); } };\n");
      writeFileSync(
        path.join(dir, 'opts.mjs'),
        "export default { name: 'opts', version: '1.0.0', optionsSchema: { type: 'object', properties: { nested: { type: 'object' } } }, apply(api) { try { api.options.nested.a = 2; process.stdout.write('changed'); } catch { process.stdout.write(Object.isFrozen(api.options.nested) && api.options.nested.a === 1 && !Object.isFrozen(api.config.plugins.at(-1).options.nested) ? 'frozen' : 'not so'); } } };\n",
      );
      const configWith = (name: string, plugin: string) => {
        const file = path.join(dir, `${name}.yaml`);
        writeFileSync(file, `storage: { url: ":memory:" }\nplugins: [auth, routing, openai-chat, ${plugin}]\nproviders: [{ id: mock, type: mock, models: [m] }]\n`);
        return file;
      };
      const format = runCli(['check', '--config', configWith('fmt', './fmt.mjs')]);
      expect((await format.waitForExit(10_000)).code).to.equal(1);
      expect(format.stderr()).to.contain("plugin 'bad-format' failed to start: registerFormat: the format 'x' has no routes (an array)");
      const options = runCli(['check', '--config', configWith('opts', '{ name: ./opts.mjs, options: { nested: { a: 1 } } }')]);
      expect((await options.waitForExit(10_000)).code).to.equal(0);
      expect(options.stdout()).to.contain('frozen');
    });

    it("a setup or ready tap that fails with a configured credential in its message: printed redacted", async () => {
      const dir = tempDir();
      const KEY = 'sk-live-provider-key-0123456789';
      for (const hook of ['setup', 'ready']) {
        writeFileSync(path.join(dir, `${hook}.mjs`), `export default { name: 'leaks-${hook}', version: '1.0.0', apply(api) { api.hooks.${hook}.tap('leaks-${hook}', () => { throw new Error('cannot reach it with ' + api.config.providers[0].apiKey); }); } };\n`);
        const file = path.join(dir, `${hook}.yaml`);
        writeFileSync(file, `storage: { url: ":memory:" }\nplugins: [auth, routing, openai-chat, ./${hook}.mjs]\nproviders: [{ id: up, type: openai, baseUrl: "http://127.0.0.1:9", apiKey: ${KEY}, models: [m] }]\n`);
        const cli = runCli(['start', '--config', file, '--port', '0']);
        expect((await cli.waitForExit(10_000)).code, hook).to.equal(1);
        expect(cli.stderr(), hook).to.contain(`plugin 'leaks-${hook}' failed in its ${hook} tap: cannot reach it with [redacted]`);
        expect(cli.stderr() + cli.stdout(), hook).to.not.contain(KEY);
      }
    });

    it('a host the machine has no address of, or that does not resolve, exits 1 naming the host; a store folder under /proc exits 1 (it hung)', async () => {
      const noAddress = runCli(['start', '--config', mockConfig(), '--port', '0', '--host', '192.0.2.1']);
      const noName = runCli(['start', '--config', mockConfig(), '--port', '0', '--host', 'no-such-host.invalid']);
      const dir = tempDir();
      const file = path.join(dir, 'proc.yaml');
      writeFileSync(file, 'storage: { url: /proc/switchyard-nope/x.db }\nproviders: [{ id: mock, type: mock, models: [m] }]\n');
      const proc = runCli(['keys', 'list', '--config', file]);
      const [a, b, c] = await Promise.all([noAddress.waitForExit(10_000), noName.waitForExit(10_000), proc.waitForExit(10_000)]);
      expect([a.code, b.code, c.code]).to.deep.equal([1, 1, 1]);
      expect(noAddress.stderr()).to.contain('cannot listen: this machine has no such address (server.host or --host: 192.0.2.1)');
      expect(noName.stderr()).to.contain('cannot listen: the host name does not resolve (server.host or --host: no-such-host.invalid)');
      expect(proc.stderr()).to.contain("cannot open the store").and.contain("mkdir '/proc/switchyard-nope'");
    });

    it('a second gateway on the same store says another one serves it (each keeps its own reservations); the marks go with them', async () => {
      const config = mockConfig();
      const dataDir = path.join(path.dirname(config), 'data');
      const first = runCli(['start', '--config', config, '--port', '0']);
      await listening(first);
      const second = runCli(['start', '--config', config, '--port', '0']);
      await listening(second);
      const warning = await second.waitForLine((line) => line.includes('another gateway serves this store'), 5000, 'the warning');
      expect((JSON.parse(warning) as { pids: number[] }).pids).to.deep.equal([first.child.pid]);
      expect(first.lines.some((l) => l.includes('another gateway serves this store'))).to.equal(false);
      first.child.kill('SIGTERM');
      second.child.kill('SIGTERM');
      await Promise.all([first.waitForExit(10_000), second.waitForExit(10_000)]);
      expect(readdirSync(dataDir).filter((name) => name.includes('.gateway-'))).to.deep.equal([]);
      // Alone again: no warning.
      const third = runCli(['start', '--config', config, '--port', '0']);
      await listening(third);
      third.child.kill('SIGTERM');
      await third.waitForExit(10_000);
      expect(third.lines.some((l) => l.includes('another gateway serves this store'))).to.equal(false);
    });

    it('a port in use exits 1 and says so', async () => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = blocker.address() as net.AddressInfo;
        const cli = runCli(['start', '--config', mockConfig(), '--port', String(port)]);
        expect((await cli.waitForExit()).code).to.equal(1);
        expect(cli.stderr()).to.contain('already in use');
      } finally {
        await new Promise<void>((resolve) => blocker.close(() => resolve()));
      }
    });
  });

  describe('shutdown', () => {
    it('SIGTERM lets an in-flight stream finish, refuses new connections, then exits 0', async () => {
      // 8 words: 9 pauses of 110 ms, about 1 s of streaming.
      const cli = runCli(['start', '--config', mockConfig({ chunkDelayMs: 110, shutdownTimeoutMs: 10000 }), '--port', '0']);
      const { url } = await listening(cli);
      const stream = streamChat(url);
      await withDeadline(stream.firstData, 5000, 'the first bytes of the stream');

      const signalledAt = Date.now();
      cli.child.kill('SIGTERM');
      await cli.waitForLine((line) => line.includes('shutting down'), 5000, 'the shutting down line');
      await readyzRefusedOr503(url);

      const result = await withDeadline(stream.finished, 10000, 'the stream to end');
      expect(result.status).to.equal(200);
      expect(result.complete, `the stream was cut:\n${result.body}`).to.equal(true);
      expect(result.body.trimEnd().endsWith('data: [DONE]'), result.body).to.equal(true);
      expect(contentOf(result.body)).to.equal(PROMPT);

      const exit = await cli.waitForExit(10000);
      expect(exit, cli.stderr()).to.deep.equal({ code: 0, signal: null });
      // it waited for the stream rather than the shutdown timeout
      expect(Date.now() - signalledAt).to.be.lessThan(8000);
      expect(cli.lines.filter((l) => l.includes('listening'))).to.have.length(1);
    });

    it('Ctrl-C on `npm start` (SIGINT to its process group, and forwarded by npm: two at once) is one graceful stop', async () => {
      const config = writeYaml(readFileSync(mockConfig({ chunkDelayMs: 110, shutdownTimeoutMs: 10000 }), 'utf8') + "storage: { url: ':memory:' }\n");
      const cli = runCli(['start', '--config', config, '--port', '0'], { npm: true });
      const { url } = await listening(cli);
      const stream = streamChat(url);
      await withDeadline(stream.firstData, 5000, 'the first bytes of the stream');
      process.kill(-cli.child.pid!, 'SIGINT');
      await cli.waitForLine((line) => line.includes('shutting down'), 5000, 'the shutting down line');
      const result = await withDeadline(stream.finished, 10000, 'the stream to end');
      // Before, the second SIGINT made the gateway exit 1 at once, cutting the stream.
      expect(result.complete, `the stream was cut:\n${result.body}\n${cli.stdout()}`).to.equal(true);
      expect(contentOf(result.body)).to.equal(PROMPT);
      await cli.waitForLine((line) => line.includes('"stopped"') || line.includes(' stopped'), 10000, 'the stopped line');
      await cli.waitForExit(10000);
      expect(cli.stdout()).to.not.contain('again: exiting now');
    });

    it('a second signal a second or more after the first exits 1 at once, the stream cut', async () => {
      const cli = runCli(['start', '--config', mockConfig({ chunkDelayMs: 30000, shutdownTimeoutMs: 20000 }), '--port', '0']);
      const { url } = await listening(cli);
      const stream = streamChat(url);
      await withDeadline(stream.firstData, 5000, 'the first bytes of the stream');
      cli.child.kill('SIGTERM');
      await cli.waitForLine((line) => line.includes('shutting down'), 5000, 'the shutting down line');
      // The same signal again at once (a terminal and npm) is the same stop: the stream goes on.
      cli.child.kill('SIGTERM');
      // Past the second within which a repeat is the same stop: an operator insisting.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(cli.child.exitCode).to.equal(null);
      cli.child.kill('SIGTERM');
      const exit = await cli.waitForExit(5000);
      expect(exit.code).to.equal(1);
      expect(cli.stdout()).to.contain('SIGTERM again: exiting now');
      expect((await withDeadline(stream.finished, 5000, 'the stream to end')).complete).to.equal(false);
    });

    it('past server.shutdownTimeoutMs a slow stream ends with an error event saying so, and the process still exits 0', async () => {
      const cli = runCli(['start', '--config', mockConfig({ chunkDelayMs: 30000, shutdownTimeoutMs: 200 }), '--port', '0']);
      const { url } = await listening(cli);
      const stream = streamChat(url);
      await withDeadline(stream.firstData, 5000, 'the first bytes of the stream');

      const signalledAt = Date.now();
      cli.child.kill('SIGTERM');
      await cli.waitForLine((line) => line.includes('shutting down'), 5000, 'the shutting down line');
      await readyzRefusedOr503(url);

      const exit = await cli.waitForExit(5000);
      const took = Date.now() - signalledAt;
      expect(exit, cli.stderr()).to.deep.equal({ code: 0, signal: null });
      expect(took, 'exit soon after the 200 ms timeout').to.be.lessThan(4500);
      expect(took, 'not before the timeout').to.be.at.least(150);

      const result = await withDeadline(stream.finished, 5000, 'the stream to end');
      expect(result.body).not.to.contain('[DONE]');
      // The client is told why, in its format's error event, before its connection closes.
      const events = result.body.split('\n\n').filter((e) => e.startsWith('data: {'));
      const last = JSON.parse(events.at(-1)!.slice('data: '.length)) as { error?: { code?: string; message?: string } };
      expect(last.error?.code, result.body).to.equal('gateway_shutdown');
      expect(last.error?.message).to.include('shut down');
      // Logged as the gateway's doing, not as a client that left.
      const access = cli.lines
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.message === 'request' && l.path === '/v1/chat/completions');
      expect(access, cli.lines.join('\n')).to.include({ status: 503, error: 'gateway_shutdown' });
    });

    it('past server.shutdownTimeoutMs a call still waiting for its answer gets a 503 gateway_shutdown in its own format', async () => {
      // A back end that takes the call and never answers; it says when the call reached it.
      let arrived!: () => void;
      const reached = new Promise<void>((resolve) => (arrived = resolve));
      const hung = http.createServer(() => arrived());
      await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
      try {
        const file = writeYaml(`server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 200 }
plugins: [auth, validation, routing, openai-chat, anthropic-messages]
providers:
  - { id: hung, type: openai, baseUrl: 'http://127.0.0.1:${(hung.address() as { port: number }).port}/v1', apiKey: sk-hung, models: [slow] }
`);
        const cli = runCli(['start', '--config', file, '--port', '0']);
        const { url } = await listening(cli);
        const answer = fetch(`${url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
          body: JSON.stringify({ model: 'slow', max_tokens: 10, messages: [{ role: 'user', content: PROMPT }] }),
        }).then(async (res) => ({ status: res.status, body: (await res.json()) as { type?: string; error?: { type?: string; message?: string } } }));
        await withDeadline(reached, 5000, 'the call to reach the back end');
        cli.child.kill('SIGTERM');
        const got = await withDeadline(answer, 5000, 'the answer');
        // Anthropic's shape, as its client expects.
        expect(got.status).to.equal(503);
        expect(got.body.type).to.equal('error');
        expect(got.body.error?.message).to.include('shut down');
        expect(await cli.waitForExit(5000), cli.stderr()).to.deep.equal({ code: 0, signal: null });
      } finally {
        hung.closeAllConnections();
        await new Promise<void>((resolve) => hung.close(() => resolve()));
      }
    });

    it('a request cut at the shutdown timeout still gets its request-log row and its usage, counted from what was delivered', async () => {
      const dir = tempDir();
      const db = path.join(dir, 'store.db');
      const file = writeYaml(`server: { host: 127.0.0.1, port: 0, shutdownTimeoutMs: 1000 }
storage: { url: ${JSON.stringify(db)} }
plugins: [request-log, auth, validation, routing, metering, openai-chat]
providers:
  - { id: mock, type: mock, chunkDelayMs: 400, models: [mock-chat] }
pricing:
  mock-chat: { input: 1, output: 1 }
`);
      const cli = runCli(['start', '--config', file, '--port', '0']);
      const { url } = await listening(cli);
      const stream = streamChat(url);
      await withDeadline(stream.firstData, 5000, 'the first bytes of the stream');
      cli.child.kill('SIGTERM');
      expect(await cli.waitForExit(8000), cli.stderr()).to.deep.equal({ code: 0, signal: null });
      const result = await withDeadline(stream.finished, 5000, 'the stream to end');
      expect(result.body).to.include('"code":"gateway_shutdown"');
      const delivered = contentOf(result.body);
      expect(delivered.length).to.be.greaterThan(0);

      const store = new Database(db, { readonly: true });
      try {
        const log = store.prepare("SELECT status, error_code FROM request_log WHERE path = '/v1/chat/completions'").all();
        expect(log).to.deep.equal([{ status: 503, error_code: 'gateway_shutdown' }]);
        const usage = store.prepare('SELECT source, completion_tokens, prompt_tokens, cost, end_reason FROM usage').all() as Array<Record<string, unknown>>;
        expect(usage).to.have.length(1);
        expect(usage[0]).to.include({ source: 'estimated', end_reason: 'shutdown' });
        expect(usage[0]!.completion_tokens).to.equal(delivered.trim().split(' ').length);
        expect(usage[0]!.prompt_tokens as number).to.be.greaterThan(0);
        expect(usage[0]!.cost as number).to.be.greaterThan(0);
      } finally {
        store.close();
      }
    });

    it('SIGHUP is a graceful stop too; a plugin whose onResponse throws and whose close never settles costs no row: each is logged by name', async function () {
      this.timeout(30_000);
      const dir = tempDir();
      const db = path.join(dir, 'store.db');
      // Listed before metering: its observers run first.
      writeFileSync(
        path.join(dir, 'buggy.mjs'),
        "export default { name: 'buggy', version: '1.0.0', apply(api) {\n" +
          "  api.hooks.onResponse.tap('buggy', () => { throw new Error('observer bug'); });\n" +
          "  api.hooks.close.tap('buggy', () => new Promise(() => {}));\n" +
          '} };\n',
      );
      const file = path.join(dir, 'gateway.config.yaml');
      writeFileSync(file, `storage: { url: ${JSON.stringify(db)} }
plugins: [request-log, auth, validation, routing, ./buggy.mjs, metering, openai-chat]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
pricing:
  mock-chat: { input: 1, output: 1 }
`);
      const cli = runCli(['start', '--config', file, '--port', '0']);
      const { url } = await listening(cli);
      for (let i = 0; i < 3; i++) {
        const reply = await fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'mock-chat', messages: [{ role: 'user', content: `call ${i}` }] }),
        });
        expect(reply.status, await reply.text()).to.equal(200);
      }
      cli.child.kill('SIGHUP');
      expect(await cli.waitForExit(15_000), cli.stderr()).to.deep.equal({ code: 0, signal: null });
      const lines = cli.lines.filter((l) => l.trim()).map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.filter((l) => l.message === 'onResponse tap failed' && l.plugin === 'buggy' && String(l.error).includes('observer bug'))).to.have.length(3);
      expect(lines.some((l) => l.message === 'close hook failed' && l.plugin === 'buggy')).to.equal(true);
      expect(lines.some((l) => l.message === 'shutting down' && l.signal === 'SIGHUP')).to.equal(true);
      expect(lines.some((l) => l.message === 'stopped')).to.equal(true);
      const store = new Database(db, { readonly: true });
      try {
        expect(store.prepare('SELECT count(*) AS n FROM usage').get()).to.deep.equal({ n: 3 });
        expect(store.prepare("SELECT count(*) AS n FROM request_log WHERE path = '/v1/chat/completions'").get()).to.deep.equal({ n: 3 });
      } finally {
        store.close();
      }
    });

    it('SIGTERM the moment the listening line appears is still a graceful stop (exit 0)', async () => {
      const file = mockConfig();
      for (let round = 0; round < 3; round++) {
        const cli = runCli(['start', '--config', file, '--port', '0']);
        await cli.waitForLine((line) => line.includes('listening'), 15000, 'the listening line');
        cli.child.kill('SIGTERM');
        expect(await cli.waitForExit(5000), cli.stderr()).to.deep.equal({ code: 0, signal: null });
      }
    });

    it('SIGTERM with nothing in flight exits 0 at once', async () => {
      const cli = runCli(['start', '--config', mockConfig({ shutdownTimeoutMs: 10000 }), '--port', '0']);
      const { url } = await listening(cli);
      expect((await get(`${url}/readyz`)).status).to.equal(200);
      const signalledAt = Date.now();
      cli.child.kill('SIGTERM');
      expect(await cli.waitForExit(5000)).to.deep.equal({ code: 0, signal: null });
      // Far from the 10 s shutdown timeout.
      expect(Date.now() - signalledAt).to.be.lessThan(5000);
    });
  });
});
