/**
 * `switchyard route --model NAME [--operation OP] [--config PATH] [--json]`, run as an operator
 * runs it: `node dist/core/cli.js route ...` in a child process.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startGateway } from './support/gateway.js';
import { cliPath } from './support/paths.js';

const ADMIN_KEY = 'admin-cli-route-key-0123456789';

const CONFIG = (plugins: string) => `
server: { host: 127.0.0.1, port: 0 }
storage: { driver: sqlite, url: ':memory:' }
auth:
  adminKey: ${ADMIN_KEY}
plugins: ${plugins}
providers:
  - { id: east, type: openai, baseUrl: 'http://127.0.0.1:9/v1', apiKey: sk-east-0000000000 }
  - { id: west, type: openai, baseUrl: 'http://127.0.0.1:9/v1', apiKey: sk-west-0000000000 }
  - { id: spare, type: mock, models: [mock-chat] }
models:
  - name: smart
    targets:
      - { provider: east, model: gpt-east, weight: 3 }
      - { provider: west, model: gpt-west, weight: 1 }
      - { provider: spare, model: mock-chat, priority: 1 }
    fallbacks: [cheap]
  - name: cheap
    targets:
      - { provider: spare, model: mock-cheap }
  - name: text-only
    targets:
      - { provider: east, model: gpt-east }
`;

const WITH_ROUTING = '[request-log, auth, validation, routing, admin, openai-chat]';

function configFile(text: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-route-'));
  const file = path.join(dir, 'gateway.config.yaml');
  writeFileSync(file, text);
  return file;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env };
    for (const name of ['SWITCHYARD_CONFIG', 'LOG_LEVEL', 'LOG_FORMAT', 'NODE_OPTIONS', 'PORT']) delete env[name];
    execFile(process.execPath, [cliPath, ...args], { env, timeout: 15_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      if (error && code === -1) return reject(error);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('switchyard route (CLI)', function () {
  this.timeout(20_000);
  const file = configFile(CONFIG(WITH_ROUTING));

  it('prints tiers, weights, shares, availability, fallbacks and one drawn order', async () => {
    const run = await cli(['route', '--model', 'smart', '--config', file]);
    expect(run.code, run.stderr).to.equal(0);
    const out = run.stdout;
    expect(out).to.include(`Route of 'smart' for chat calls (${file})`);
    expect(out).to.match(/smart \(requested model\)/);
    expect(out).to.match(/tier 0\n/);
    expect(out).to.match(/tier 1 \(after the tiers above\)/);
    expect(out).to.match(/east\s+gpt-east\s+3\s+75%\s+yes\s+healthy/);
    expect(out).to.match(/west\s+gpt-west\s+1\s+25%\s+yes\s+healthy/);
    expect(out).to.match(/spare\s+mock-chat\s+1\s+100%\s+yes\s+healthy/);
    expect(out).to.match(/cheap \(fallback model, tried after every tier above\)/);
    expect(out).to.match(/spare\s+mock-cheap\s+1\s+100%\s+yes\s+healthy/);
    // One drawn order: the two weighted targets in some order, then the lower tier, then the fallback.
    const order = [...out.matchAll(/^ {2}(\d)\. (\S+) \/ (\S+)(.*)$/gm)].map((m) => `${m[2]}/${m[3]}${m[4]!.trim() ? ' fb' : ''}`);
    expect(order).to.have.length(4);
    expect(order.slice(0, 2).sort()).to.deep.equal(['east/gpt-east', 'west/gpt-west']);
    expect(order.slice(2)).to.deep.equal(['spare/mock-chat', 'spare/mock-cheap fb']);
    expect(out).to.include('fresh process, so every target counts as healthy');
    expect(out).to.include('GET /admin/route?model=smart&operation=chat');
    expect(out).to.not.include('sk-east');
  });

  it('--json prints what GET /admin/route answers on a gateway that just started', async () => {
    const run = await cli(['route', '--model', 'smart', '--operation', 'chat', '--config', file, '--json']);
    expect(run.code, run.stderr).to.equal(0);
    const printed = JSON.parse(run.stdout);
    const gw = await startGateway(file);
    try {
      const res = await fetch(`${gw.url}/admin/route?model=smart&operation=chat`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
      expect(res.status).to.equal(200);
      const live = (await res.json()) as typeof printed;
      // The same answer but for the random draw of the order.
      expect({ ...printed, order: undefined }).to.deep.equal({ ...live, order: undefined });
      expect(printed.order.map((o: any) => o.provider + '/' + o.model).sort()).to.deep.equal(live.order.map((o: any) => o.provider + '/' + o.model).sort());
    } finally {
      await gw.stop();
    }
    expect(printed).to.include({ object: 'route', model: 'smart', operation: 'chat', known: true });
    expect(printed.chain.map((c: any) => [c.model, c.role])).to.deep.equal([
      ['smart', 'requested'],
      ['cheap', 'fallback'],
    ]);
    const east = printed.chain[0].tiers[0].targets[0];
    expect(east).to.include({ provider: 'east', model: 'gpt-east', weight: 3, share: 0.75, available: true, state: 'healthy', cooling_down_until: null });
    expect(printed.order.at(-1)).to.deep.equal({ provider: 'spare', model: 'mock-cheap', via: 'cheap' });
  });

  it('exits 1 with a clear message for an unknown model', async () => {
    const run = await cli(['route', '--model', 'smrt', '--config', file]);
    expect(run.code).to.equal(1);
    expect(run.stdout).to.equal('');
    expect(run.stderr).to.include("unknown model 'smrt'");
    expect(run.stderr).to.include('known: smart, cheap, text-only, mock-chat');
  });

  it('exits 1 when no target of the model serves the operation', async () => {
    // The openai type has no video operation (the mock does, so a chain that reaches it would serve it).
    const run = await cli(['route', '--model', 'text-only', '--operation', 'video', '--config', file]);
    expect(run.code).to.equal(1);
    expect(run.stderr).to.include("serves the operation 'video'");
    expect(run.stderr).to.include('operation_not_supported');
  });

  it('exits 2 on a bad command line', async () => {
    for (const args of [
      ['route', '--config', file],
      ['route', '--model', 'smart', '--operation', 'chats', '--config', file],
      ['route', 'smart', '--config', file],
      ['route', '--model', 'smart', '--since', '1h', '--config', file],
    ]) {
      const run = await cli(args);
      expect(run.code, args.join(' ')).to.equal(2);
      expect(run.stderr).to.include('Usage: switchyard');
    }
  });

  it('says so when the routing plugin is not loaded: the targets are tried as listed', async () => {
    const plain = configFile(CONFIG('[auth, validation, openai-chat]'));
    const run = await cli(['route', '--model', 'smart', '--config', plain]);
    expect(run.code, run.stderr).to.equal(0);
    expect(run.stdout).to.include('The routing plugin is not in plugins:');
    const order = [...run.stdout.matchAll(/^ {2}(\d)\. (\S+) \/ (\S+)/gm)].map((m) => `${m[2]}/${m[3]}`);
    expect(order).to.deep.equal(['east/gpt-east', 'west/gpt-west', 'spare/mock-chat']);
    expect(run.stdout).to.not.include('fallback model');
  });
});
