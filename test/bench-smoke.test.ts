import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { busiestRound, pairedRatio, parseBuild, renderCompare, type BuildMeasurement, type CompareResults } from '../bench/compare.js';
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

/**
 * A quick `--compare` of chat (one round) with `args`: it must exit 0 and write one results file
 * in which each of `builds` was measured once, in that order, and answered every call.
 */
async function compareOnce(args: string[], builds: string[]): Promise<{ results: CompareResults; output: string }> {
  const out = args[args.indexOf('--out') + 1]!;
  const { code, output } = await runBench(['--compare', '--quick', ...args]);
  expect(code, output).to.equal(0);
  const files = readdirSync(out).filter((f) => f.endsWith('-compare.json'));
  expect(files, output).to.have.length(1);
  const results = JSON.parse(readFileSync(path.join(out, files[0]!), 'utf8')) as CompareResults;
  expect(results.kind).to.equal('compare');
  expect(results.measurements.map((m) => [m.round, m.workload, m.build])).to.deep.equal(builds.map((b) => [1, 'chat', b]));
  for (const m of results.measurements) {
    expect(m.requests, m.build).to.be.greaterThan(0);
    expect(m.failed, m.build).to.equal(0);
    if (existsSync('/proc/self/stat')) expect(m.cpuUsPerCall, m.build).to.be.a('number').and.greaterThan(0);
  }
  return { results, output };
}

describe('npm run bench -- --compare (smoke)', function () {
  this.timeout(150_000);
  this.slow(20_000);

  it('measures each build in turns and writes a results file with the CPU of a call per build', async () => {
    const out = mkdtempSync(path.join(tmpdir(), 'switchyard-compare-smoke-'));
    try {
      const core = ['routing', 'openai-chat'];
      const { results, output } = await compareOnce(['--workloads', 'chat', '--out', out, 'full=.', `core=.@${core.join(',')}#--max-old-space-size=256`], ['full', 'core']);
      expect(results.builds.map((b) => [b.name, b.root, b.plugins, b.nodeArgs])).to.deep.equal([
        ['full', repoRoot, undefined, []],
        ['core', repoRoot, core, ['--max-old-space-size=256']],
      ]);
      expect(results.summary.map((s) => s.build)).to.deep.equal(['full', 'core']);
      expect(output).to.include('| chat | full |').and.include('| chat | core |');
      // One after the other: the second build's measured seconds begin after the first's ended.
      const [a, b] = results.measurements;
      expect(b!.window[0]).to.be.at.least(a!.window[1]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('with --together, measures a round\'s builds at the same time, each at the rate asked, and pairs them by round', async () => {
    const out = mkdtempSync(path.join(tmpdir(), 'switchyard-compare-together-'));
    try {
      const { results, output } = await compareOnce(['--together', '300', '--workloads', 'chat', '--out', out, 'a=.', 'b=.@routing,openai-chat'], ['a', 'b']);
      expect(results.options.together).to.equal(300);
      if (existsSync('/proc/self/stat')) for (const m of results.measurements) expect(m.cpuPercent, m.build).to.be.a('number');
      // Side by side: the two measured windows overlap.
      const [a, b] = results.measurements;
      expect(Math.max(a!.window[0], b!.window[0]), JSON.stringify([a!.window, b!.window])).to.be.below(Math.min(a!.window[1], b!.window[1]));
      const paired = results.summary.find((s) => s.build === 'b')!.pairedVsFirst;
      if (existsSync('/proc/self/stat')) expect(paired).to.be.a('number');
      expect(results.summary.find((s) => s.build === 'a')!.pairedVsFirst).to.equal(null);
      expect(output).to.include('the builds of a round side by side at the same time').and.include('each build at 300 req/s');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('pairs each build with the first build of the same round, and leaves out rounds with failed calls', () => {
    const m = (round: number, build: string, cpuUsPerCall: number | null, failed = 0): BuildMeasurement => ({
      round,
      workload: 'chat',
      build,
      rps: 1000,
      requests: 1000,
      failed,
      cpuUsPerCall,
      window: [0, 1],
      cpuPercent: null,
    });
    // The machine slows down from round to round; within each round b costs 10% more than a.
    const rounds = [m(1, 'a', 50), m(1, 'b', 55), m(2, 'a', 80), m(2, 'b', 88), m(3, 'a', 60), m(3, 'b', 66)];
    expect(pairedRatio(rounds, 'chat', 'a', 'b')).to.equal(0.1);
    expect(pairedRatio(rounds, 'chat', 'a', 'a')).to.equal(null);
    // A round where b failed calls, or a has no figure, does not count.
    const broken = [m(1, 'a', 50), m(1, 'b', 40, 3), m(2, 'a', null), m(2, 'b', 10), m(3, 'a', 60), m(3, 'b', 63)];
    expect(pairedRatio(broken, 'chat', 'a', 'b')).to.equal(0.05);
    expect(pairedRatio([m(1, 'a', 50), m(1, 'b', 40, 3)], 'chat', 'a', 'b')).to.equal(null);
  });

  it('says when the builds side by side kept the target CPU busy to its limit', () => {
    const results: CompareResults = {
      kind: 'compare',
      date: '2026-11-27T05:00:00.000Z',
      commit: 'abc1234',
      machine: { nproc: 2, cpuModel: 'AMD EPYC', node: 'v20.20.2' } as CompareResults['machine'],
      options: { rounds: 1, durationS: 8, warmupS: 3, connections: 20, budget: true, together: 4000 },
      builds: [
        { name: 'a', root: '/a', nodeArgs: [], commit: '' },
        { name: 'b', root: '/b', nodeArgs: [], commit: '' },
      ],
      measurements: [
        { round: 1, workload: 'chat', build: 'a', rps: 3990, requests: 31920, failed: 0, cpuUsPerCall: 70, window: [0, 8000], cpuPercent: 28 },
        { round: 1, workload: 'chat', build: 'b', rps: 3100, requests: 24800, failed: 0, cpuUsPerCall: 90, window: [0, 8000], cpuPercent: 36 },
        { round: 2, workload: 'chat', build: 'a', rps: 3990, requests: 31920, failed: 0, cpuUsPerCall: 70, window: [9000, 17000], cpuPercent: 44.5 },
        { round: 2, workload: 'chat', build: 'b', rps: 3100, requests: 24800, failed: 0, cpuUsPerCall: 90, window: [9000, 17000], cpuPercent: 51 },
      ],
      summary: [
        { workload: 'chat', build: 'a', rps: 3990, cpuUsPerCall: 70, cpuUsRange: [70, 70], vsFirst: 0, pairedVsFirst: null },
        { workload: 'chat', build: 'b', rps: 3100, cpuUsPerCall: 90, cpuUsRange: [90, 90], vsFirst: 0.2857, pairedVsFirst: 0.2857 },
      ],
    };
    const text = renderCompare(results);
    expect(text).to.include('| chat | b | 3,100 | 90.0 | 90.0 / 90.0 | +28.6% | +28.6% |');
    expect(busiestRound(results.measurements)).to.deep.equal({ round: 2, workload: 'chat', percent: 95.5 });
    expect(text).to.include('**The target CPU was 95.5% busy** (the builds together, chat in round 2)');
    results.measurements[3]!.cpuPercent = 40;
    expect(renderCompare(results)).not.to.include('busy**');
    // One after the other, each build runs at its own limit: nothing to warn about.
    delete results.options.together;
    results.measurements[3]!.cpuPercent = 99;
    expect(renderCompare(results)).not.to.include('busy**');
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
    expect(parseOptions(['--compare', 'a=.', 'b=.']).together).to.equal(undefined);
    expect(parseOptions(['--compare', '--together', '4000', 'a=.', 'b=.']).together).to.equal(4000);
    expect(() => parseOptions(['--together', '4000'])).to.throw(/needs --compare/);
    expect(() => parseOptions(['--compare', '--together', '0', 'a=.'])).to.throw(/--together must be a number >= 1/);
  });
});
