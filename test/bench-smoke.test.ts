import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { parseBuild, type CompareResults } from '../bench/compare.js';
import { parseOptions, startScriptLaunch } from '../bench/run.js';
import { repoRoot } from './support/paths.js';

/** Run `dist/bench/run.js` with `args`; its exit code and everything it printed. */
async function runBench(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'bench', 'run.js'), ...args], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
  child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
  // Under mocha's own limit, so a stuck run fails with its output rather than a bare timeout. A
  // quick run takes about 27 s on a slow 2-CPU VM; the limits leave room for a slower machine.
  const killer = setTimeout(() => child.kill('SIGTERM'), 145_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(killer);
  return { code, output };
}

/**
 * Keeps the benchmark harness working: `--quick` (1 round, 1 s per measurement) must start the
 * three servers, measure what the gateway serves and write a results file with a row for every
 * workload. Nothing here looks at a timing: CI machines are too noisy for that, and the figures
 * belong in docs/performance.md, not in a test.
 */
describe('npm run bench -- --quick (smoke)', function () {
  this.timeout(150_000);
  this.slow(40_000);

  it('writes a results file with every workload row', async () => {
    const out = mkdtempSync(path.join(tmpdir(), 'switchyard-bench-smoke-'));
    try {
      const { code, output } = await runBench(['--quick', '--out', out]);
      expect(code, output).to.equal(0);

      const files = readdirSync(out).filter((f) => f.endsWith('.json'));
      expect(files, output).to.have.length(1);
      const results = JSON.parse(readFileSync(path.join(out, files[0]!), 'utf8')) as {
        kind: string;
        workloads: Array<{ id: string; served: boolean; note?: string; summary?: Record<string, unknown>; probe?: { gatewayFirstOverheadUs?: number } }>;
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
          // What a call cost each target, from its CPU under the load (where /proc tells it).
          if (existsSync('/proc/self/stat')) {
            expect(w.summary!.gatewayCpuUsPerCall, w.id).to.be.a('number').above(0);
            expect(w.summary!.bareCpuUsPerCall, w.id).to.be.a('number').above(0);
          }
          // The gateway's own figure for its first call of the workload, read off its answer.
          expect(w.probe!.gatewayFirstOverheadUs, w.id).to.be.a('number').at.least(0);
        } else {
          expect(w.note, w.id).to.match(/^not served yet/);
        }
      }
      // The table printed for people names every workload too.
      for (const title of ['chat, non-streaming', 'chat, streaming', 'messages', 'embeddings']) expect(output).to.include(title);
      expect(output).to.include('bare proxy CPU µs a call');
      expect(output).to.match(/First call of each workload after the gateway started .*: chat, non-streaming \d+\.\d ms/);
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

describe('npm run bench -- --compare (smoke)', function () {
  this.timeout(150_000);
  this.slow(20_000);

  it('measures each build in turns and writes a results file with the CPU of a call per build', async () => {
    const out = mkdtempSync(path.join(tmpdir(), 'switchyard-compare-smoke-'));
    try {
      const core = ['routing', 'openai-chat'];
      const { code, output } = await runBench(['--compare', '--quick', '--workloads', 'chat', '--out', out, 'full=.', `core=.@${core.join(',')}#--max-old-space-size=256`]);
      expect(code, output).to.equal(0);

      const files = readdirSync(out).filter((f) => f.endsWith('-compare.json'));
      expect(files, output).to.have.length(1);
      const results = JSON.parse(readFileSync(path.join(out, files[0]!), 'utf8')) as CompareResults;
      expect(results.kind).to.equal('compare');
      expect(results.builds.map((b) => [b.name, b.root, b.plugins, b.nodeArgs])).to.deep.equal([
        ['full', repoRoot, undefined, []],
        ['core', repoRoot, core, ['--max-old-space-size=256']],
      ]);
      // One round, one workload: each build measured once, in the order given, every call answered.
      expect(results.measurements.map((m) => [m.round, m.workload, m.build])).to.deep.equal([
        [1, 'chat', 'full'],
        [1, 'chat', 'core'],
      ]);
      for (const m of results.measurements) {
        expect(m.requests, m.build).to.be.greaterThan(0);
        expect(m.failed, m.build).to.equal(0);
        if (existsSync('/proc/self/stat')) expect(m.cpuUsPerCall, m.build).to.be.a('number').and.greaterThan(0);
      }
      expect(results.summary.map((s) => s.build)).to.deep.equal(['full', 'core']);
      expect(output).to.include('| chat | full |').and.include('| chat | core |');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('reads a build as NAME=DIR[@plugins][#node flags], and refuses what is not one', () => {
    expect(parseBuild('a=.', '/repo')).to.deep.equal({ name: 'a', root: '/repo', plugins: undefined, nodeArgs: [] });
    expect(parseBuild('b=../other@auth, routing,openai-chat', '/repo/x')).to.deep.equal({ name: 'b', root: '/repo/other', plugins: ['auth', 'routing', 'openai-chat'], nodeArgs: [] });
    expect(parseBuild('c=/abs#--max-semi-space-size=16,--single-threaded-gc', '/repo')).to.deep.equal({
      name: 'c',
      root: '/abs',
      plugins: undefined,
      nodeArgs: ['--max-semi-space-size=16', '--single-threaded-gc'],
    });
    expect(parseBuild('d=@routing#--x', '/repo')).to.deep.equal({ name: 'd', root: '/repo', plugins: ['routing'], nodeArgs: ['--x'] });
    // A folder may hold @ or # before its last slash.
    expect(parseBuild('g=/home/me/wt@v2#x/', '/repo')).to.deep.equal({ name: 'g', root: '/home/me/wt@v2#x', plugins: undefined, nodeArgs: [] });
    expect(parseBuild('h=/home/me/wt@v2/@routing#--a, --b', '/repo')).to.deep.equal({ name: 'h', root: '/home/me/wt@v2', plugins: ['routing'], nodeArgs: ['--a', '--b'] });
    expect(() => parseBuild('./dist', '/repo')).to.throw(/NAME=DIR/);
    expect(() => parseBuild('e=.@', '/repo')).to.throw(/empty plugins list/);
    expect(() => parseBuild('f=.#max-old-space-size=1', '/repo')).to.throw(/not a node flag/);
    expect(() => parseOptions(['--compare'])).to.throw(/at least one build/);
    expect(() => parseOptions(['a=.'])).to.throw(/only with --compare/);
    expect(parseOptions(['--compare', 'a=.', 'b=.']).compare).to.deep.equal(['a=.', 'b=.']);
  });
});
