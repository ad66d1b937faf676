/**
 * `npm run bench -- --compare NAME=DIR[@plugin,...][#--node-flag,...] ...`: what one call costs in
 * each of several builds of the gateway, measured in turns under the same load.
 *
 * Each build is a folder holding a built `dist/` (a checkout, a `git worktree`, or a copy of
 * `dist/` beside links to this repository's `node_modules`, `package.json` and `config/`); `.` is
 * this one. `@plugin,...` gives the build's configuration that `plugins:` list instead of the
 * default pipeline; `#--flag,...` adds node flags to the ones `npm start` uses. Every round
 * measures every build once per workload (in the order given in odd rounds, reversed in even
 * ones), each in a fresh process (its own store and key) pinned to the target CPU, warmed up,
 * then loaded at 50 connections from the other CPU. The figure that counts is the **CPU one call costs** (the gateway process's user and
 * system time, all of its threads, over the measured seconds, divided by the calls answered):
 * unlike requests a second it does not depend on how busy the load generator's CPU was. Two
 * processes of the same build differ by a few per cent, and a machine drifts between runs:
 * compare builds within one run, over several rounds, by their medians.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CannonResult, CannonSpec } from './load.js';
import { choosePinning, startNode, stopChild, waitForLine, type Child } from './proc.js';
import { commit, configYaml, createKey, distBench, GATEWAY_LISTENING, machine, runLoadProcess, startGatewayProcess, writeResults, type Options } from './run.js';
import { median, round } from './stats.js';
import { WORKLOADS, type WorkloadId } from './workloads.js';

export interface Build {
  name: string;
  /** The folder whose `dist/core/cli.js` is started. */
  root: string;
  /** The configuration's `plugins:` list; absent: the default pipeline. */
  plugins?: string[];
  /** Node flags after those of `npm start`. */
  nodeArgs: string[];
}

/**
 * `NAME=DIR[@plugin,...][#--flag,...]`, DIR relative to `cwd`. `@` and `#` count only after DIR's
 * last `/`, so a folder may hold them (`wt@v2/`, with the slash).
 */
export function parseBuild(spec: string, cwd: string): Build {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`'${spec}': a build is NAME=DIR[@plugin,...][#--node-flag,...]`);
  const name = spec.slice(0, eq);
  let rest = spec.slice(eq + 1);
  const tail = rest.lastIndexOf('/') + 1;
  let nodeArgs: string[] = [];
  const hash = rest.indexOf('#', tail);
  if (hash >= 0) {
    nodeArgs = rest.slice(hash + 1).split(',').map((f) => f.trim()).filter(Boolean);
    rest = rest.slice(0, hash);
    for (const flag of nodeArgs) if (!flag.startsWith('-')) throw new Error(`'${spec}': '${flag}' is not a node flag`);
  }
  let plugins: string[] | undefined;
  const at = rest.indexOf('@', tail);
  if (at >= 0) {
    plugins = rest.slice(at + 1).split(',').map((p) => p.trim()).filter(Boolean);
    rest = rest.slice(0, at);
    if (plugins.length === 0) throw new Error(`'${spec}': an empty plugins list`);
  }
  const root = path.resolve(cwd, rest || '.');
  return { name, root, plugins, nodeArgs };
}

export interface BuildMeasurement {
  round: number;
  workload: WorkloadId;
  build: string;
  rps: number;
  requests: number;
  failed: number;
  /** CPU of the gateway process (all threads) per answered call, µs. */
  cpuUsPerCall: number | null;
}

export interface CompareResults {
  kind: 'compare';
  /** Written after a measurement failed: what was measured before it. */
  partial?: boolean;
  date: string;
  commit: string;
  machine: ReturnType<typeof machine>;
  options: { rounds: number; durationS: number; warmupS: number; connections: number; budget: boolean };
  /** `commit`: the build folder's own checkout's commit; '' for a copy of dist/. */
  builds: Array<Build & { commit: string }>;
  measurements: BuildMeasurement[];
  summary: Array<{ workload: WorkloadId; build: string; rps: number; cpuUsPerCall: number | null; cpuUsRange: [number, number] | null; vsFirst: number | null }>;
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** What is running now, for a signal to stop: the current build's process and folder. */
interface Running {
  gateway?: Child;
  tmp?: string;
}

/** One build serving one workload: a fresh process, its own store and key, warmed up and loaded. */
async function measureBuild(
  options: Options,
  build: Build,
  upstreamUrl: string,
  workload: (typeof WORKLOADS)[number],
  pinning: ReturnType<typeof choosePinning>,
  running: Running,
): Promise<Omit<BuildMeasurement, 'round'>> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'switchyard-compare-'));
  running.tmp = tmp;
  const cli = path.join(build.root, 'dist', 'core', 'cli.js');
  let gateway: Child | undefined;
  try {
    const configFile = path.join(tmp, 'gateway.config.yaml');
    writeFileSync(configFile, configYaml(upstreamUrl) + (build.plugins ? `plugins: [${build.plugins.join(', ')}]\n` : ''));
    const key = createKey(configFile, options.budget, cli);
    gateway = startGatewayProcess(build.name, cli, configFile, tmp, build.nodeArgs, pinning?.target);
    running.gateway = gateway;
    const url = await waitForLine(gateway, GATEWAY_LISTENING);
    const spec: CannonSpec = { mode: 'cannon', url, requests: [workload.gateway(key)], connections: options.connections, durationS: options.durationS, warmupS: options.warmupS, settle: [gateway.pid] };
    const { result, cpuSeconds } = await runLoadProcess<CannonResult>(spec, pinning, [gateway.pid], (options.durationS + options.warmupS) * 3000 + 30_000);
    const used = cpuSeconds.get(gateway.pid) ?? null;
    const answered = result.totalRequests;
    return {
      workload: workload.id,
      build: build.name,
      rps: result.rps,
      requests: answered,
      failed: result.non2xx + result.errors,
      cpuUsPerCall: used === null || answered === 0 ? null : round((used * 1e6) / answered, 1),
    };
  } finally {
    if (gateway) await stopChild(gateway, 10_000);
    rmSync(tmp, { recursive: true, force: true });
    running.gateway = undefined;
    running.tmp = undefined;
  }
}

/** The commit of a build whose folder is a checkout of its own; '' for a copy of dist/ (its commit is not known). */
function buildCommit(root: string): string {
  const top = spawnSync('git', ['rev-parse', '--show-toplevel'], { cwd: root, encoding: 'utf8' });
  return top.status === 0 && path.resolve(top.stdout.trim()) === path.resolve(root) ? commit(root) : '';
}

export function renderCompare(results: CompareResults): string {
  const first = results.builds[0]!.name;
  const lines = [
    `### Builds compared (medians of ${results.options.rounds} round(s), each build in a fresh process per measurement)`,
    '',
    `${results.date}; ${results.machine.nproc} CPUs (${results.machine.cpuModel}), Node ${results.machine.node}; ` +
      `${results.options.durationS} s measured after ${results.options.warmupS} s of warm-up, ${results.options.connections} connections` +
      `${results.machine.pinning ? `; gateways on CPU ${results.machine.pinning.target}, load and upstream on CPU ${results.machine.pinning.load}` : ''}.`,
    '',
    '| workload | build | req/s | CPU µs a call | rounds (µs a call) | vs ' + first + ' |',
    '|---|---|---:|---:|---|---:|',
  ];
  for (const row of results.summary) {
    const perRound = results.measurements
      .filter((m) => m.workload === row.workload && m.build === row.build)
      .map((m) => (m.cpuUsPerCall === null ? '–' : m.cpuUsPerCall.toFixed(1)))
      .join(' / ');
    const vs = row.vsFirst === null ? '–' : row.build === first ? '' : `${row.vsFirst > 0 ? '+' : ''}${(row.vsFirst * 100).toFixed(1)}%`;
    lines.push(`| ${row.workload} | ${row.build} | ${Math.round(row.rps).toLocaleString('en-US')} | ${row.cpuUsPerCall === null ? '–' : row.cpuUsPerCall.toFixed(1)} | ${perRound} | ${vs} |`);
  }
  const failed = results.measurements.reduce((sum, m) => sum + m.failed, 0);
  if (failed > 0) lines.push('', `**${failed} calls failed** (non-2xx or errors): a build that fails is not doing the same work, so the measurements with failures are left out of its CPU figure.`);
  return lines.join('\n');
}

/**
 * Measure the builds against each other; writes `<date>-compare.json` into `options.out` (with
 * what was measured so far, marked partial, when a measurement fails). Relative folders are
 * read from where `npm run` was called (INIT_CWD), not from the package's folder.
 */
export async function runCompare(options: Options, specs: string[]): Promise<{ file: string; text: string; results: CompareResults }> {
  const builds = specs.map((spec) => parseBuild(spec, process.env.INIT_CWD ?? process.cwd()));
  const names = new Set<string>();
  for (const build of builds) {
    if (names.has(build.name)) throw new Error(`two builds are named '${build.name}'`);
    names.add(build.name);
    if (!existsSync(path.join(build.root, 'dist', 'core', 'cli.js'))) throw new Error(`${build.name}: no dist/core/cli.js under ${build.root} (build it first)`);
  }
  const date = new Date();
  const loadavgBefore = os.loadavg();
  const pinning = choosePinning(!options.pin);
  const upstream = startNode('upstream', [path.join(distBench, 'upstream.js')], { cpu: pinning?.load });
  const running: Running = {};
  const stopOnSignal = () => {
    void (async () => {
      if (running.gateway) await stopChild(running.gateway, 5_000);
      if (running.tmp) rmSync(running.tmp, { recursive: true, force: true });
      await stopChild(upstream, 5_000);
      process.exit(130);
    })();
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  const measurements: BuildMeasurement[] = [];
  const resultsOf = (partial: boolean): CompareResults => ({
    kind: 'compare',
    ...(partial ? { partial } : {}),
    date: date.toISOString(),
    commit: commit(),
    machine: machine(pinning, loadavgBefore),
    options: { rounds: options.rounds, durationS: options.durationS, warmupS: options.warmupS, connections: options.connections, budget: options.budget },
    builds: builds.map((b) => ({ ...b, commit: buildCommit(b.root) })),
    measurements,
    summary: summarize(options.workloads, builds, measurements),
  });
  try {
    const upstreamUrl = await waitForLine(upstream, /READY (\S+)/);
    const workloads = WORKLOADS.filter((w) => options.workloads.includes(w.id));
    for (let r = 1; r <= options.rounds; r++) {
      // A, B in odd rounds, B, A in even ones: a machine that drifts during the run drifts for all.
      const order = r % 2 === 1 ? builds : [...builds].reverse();
      for (const workload of workloads) {
        for (const build of order) {
          const m = await measureBuild(options, build, upstreamUrl, workload, pinning, running);
          measurements.push({ round: r, ...m });
          log(`round ${r}/${options.rounds} ${workload.id} ${build.name}: ${Math.round(m.rps)} req/s, ${m.cpuUsPerCall ?? '–'} µs of CPU a call${m.failed ? `, ${m.failed} failed` : ''}`);
        }
      }
    }
  } catch (error) {
    if (measurements.length > 0) log(`what was measured before it failed: ${writeResults(options, date, '-compare-partial', resultsOf(true))}`);
    throw error;
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await stopChild(upstream, 5_000);
  }
  const results = resultsOf(false);
  const file = writeResults(options, date, '-compare', results);
  return { file, text: renderCompare(results), results };
}

/**
 * Per workload and build: the medians. A measurement in which calls failed is left out of the
 * CPU figure (a build that answers errors is not doing the same work).
 */
function summarize(workloadIds: readonly WorkloadId[], builds: readonly Build[], measurements: readonly BuildMeasurement[]): CompareResults['summary'] {
  const summary: CompareResults['summary'] = [];
  for (const workload of workloadIds) {
    let firstCpu: number | null = null;
    for (const build of builds) {
      const mine = measurements.filter((m) => m.workload === workload && m.build === build.name);
      const cpus = mine.filter((m) => m.failed === 0).map((m) => m.cpuUsPerCall).filter((v): v is number => v !== null);
      const cpu = cpus.length ? round(median(cpus), 1) : null;
      if (build === builds[0]) firstCpu = cpu;
      summary.push({
        workload,
        build: build.name,
        rps: round(median(mine.map((m) => m.rps)), 0),
        cpuUsPerCall: cpu,
        cpuUsRange: cpus.length ? [Math.min(...cpus), Math.max(...cpus)] : null,
        vsFirst: cpu !== null && firstCpu ? round(cpu / firstCpu - 1, 4) : null,
      });
    }
  }
  return summary;
}
