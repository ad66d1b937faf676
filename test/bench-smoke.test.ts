import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startScriptLaunch } from '../bench/run.js';
import { repoRoot } from './support/paths.js';

/**
 * Keeps the benchmark harness working: `--quick` (1 round, 1 s per measurement) must start the
 * three servers, measure what the gateway serves and write a results file with a row for every
 * workload. Nothing here looks at a timing: CI machines are too noisy for that, and the figures
 * belong in docs/performance.md, not in a test.
 */
describe('npm run bench -- --quick (smoke)', function () {
  this.timeout(60_000);
  this.slow(40_000);

  it('writes a results file with every workload row', async () => {
    const out = mkdtempSync(path.join(tmpdir(), 'switchyard-bench-smoke-'));
    try {
      const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'bench', 'run.js'), '--quick', '--out', out], {
        cwd: repoRoot,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
      // Under mocha's own 60 s limit, so a stuck run fails with its output rather than a bare timeout.
      const killer = setTimeout(() => child.kill('SIGTERM'), 57_000);
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      clearTimeout(killer);
      expect(code, output).to.equal(0);

      const files = readdirSync(out).filter((f) => f.endsWith('.json'));
      expect(files, output).to.have.length(1);
      const results = JSON.parse(readFileSync(path.join(out, files[0]!), 'utf8')) as {
        kind: string;
        workloads: Array<{ id: string; served: boolean; note?: string; summary?: Record<string, unknown> }>;
        budget: unknown[];
        gateway: { env?: Record<string, string>; nodeArgs?: string[] };
      };
      // The gateway ran with the environment and node flags `npm start` gives it.
      const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts: { start: string } };
      const launch = startScriptLaunch(pkg.scripts.start);
      expect(results.gateway.env).to.deep.equal(launch.env);
      expect(results.gateway.nodeArgs).to.deep.equal(launch.nodeArgs);
      expect(results.kind).to.equal('bench');
      expect(results.workloads.map((w) => w.id)).to.deep.equal(['chat', 'chat-stream', 'messages', 'embeddings']);
      for (const w of results.workloads) {
        if (w.served) {
          expect(w.summary, w.id).to.be.an('object');
          expect(w.summary!.gatewayRps, w.id).to.be.a('number');
          expect(w.summary!.bareRps, w.id).to.be.a('number');
        } else {
          expect(w.note, w.id).to.match(/^not served yet/);
        }
      }
      // The table printed for people names every workload too.
      for (const title of ['chat, non-streaming', 'chat, streaming', 'messages', 'embeddings']) expect(output).to.include(title);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describe('startScriptLaunch (what the benchmark takes from npm start)', () => {
  it("reads the NAME=value words that open the start script and node's flags before the script, nothing after", () => {
    expect(startScriptLaunch('MALLOC_MMAP_THRESHOLD_=131072 exec node --max-semi-space-size=8 dist/core/cli.js start')).to.deep.equal({
      env: { MALLOC_MMAP_THRESHOLD_: '131072' },
      nodeArgs: ['--max-semi-space-size=8'],
    });
    expect(startScriptLaunch('A=1 B_2=x node cli.js FOO=bar --flag')).to.deep.equal({ env: { A: '1', B_2: 'x' }, nodeArgs: [] });
    expect(startScriptLaunch('exec node --require=./x.cjs --a --b=2 dist/core/cli.js start')).to.deep.equal({ env: {}, nodeArgs: ['--require=./x.cjs', '--a', '--b=2'] });
    expect(startScriptLaunch('tsx core/cli.ts start')).to.deep.equal({ env: {}, nodeArgs: [] });
  });
});
