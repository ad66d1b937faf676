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
 *
 * With `--together RATE` the builds of a round run **at the same time**, side by side on the
 * target CPU, each loaded at RATE requests a second by a load process of its own, and measured
 * over the same seconds. A slow spell of a shared machine (a neighbour's load, a slower clock)
 * then falls on every build of the round alike: the builds' ratio within a round ("paired") moves
 * by what two processes of one build differ by (a few per cent), where the one-after-the-other
 * measurements of one build moved by up to 35% (see docs/performance.md). At a set rate below the CPU's limit, a call costs more than at the limit
 * (fewer calls share each turn of the event loop): the figures compare builds, they are not the
 * gateway's throughput.
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
  /** Requests a second answered; with `--together`, the rate it was asked for is in the options. */
  rps: number;
  requests: number;
  failed: number;
  /** CPU of the gateway process (all threads) per answered call, µs. */
  cpuUsPerCall: number | null;
  /** The measured seconds: from, to (ms since the epoch). */
  window: [number, number];
  /** The gateway process's CPU over those seconds, % of one core. */
  cpuPercent: number | null;
}

export interface CompareResults {
  kind: 'compare';
  /** Written after a measurement failed: what was measured before it. */
  partial?: boolean;
  date: string;
  commit: string;
  machine: ReturnType<typeof machine>;
  /** `together`: the rate each build was loaded at, all builds of a round at once (absent: one after the other, each at its limit). */
  options: { rounds: number; durationS: number; warmupS: number; connections: number; budget: boolean; together?: number };
  /** `commit`: the build folder's own checkout's commit; '' for a copy of dist/. */
  builds: Array<Build & { commit: string }>;
  measurements: BuildMeasurement[];
  summary: Array<{
    workload: WorkloadId;
    build: string;
    rps: number;
    cpuUsPerCall: number | null;
    cpuUsRange: [number, number] | null;
    /** The build's median against the first build's median. */
    vsFirst: number | null;
    /** The median, over the rounds, of the build against the first build in the same round. */
    pairedVsFirst: number | null;
  }>;
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** A build's gateway started for one measurement: a fresh process with its own folder, store and key. */
interface Started {
  build: Build;
  tmp: string;
  gateway?: Child;
  url: string;
  key: string;
}

/** What is running now, for a signal to stop: the gateways started and their folders. */
type Running = Set<Started>;

async function startBuild(options: Options, build: Build, upstreamUrl: string, pinning: ReturnType<typeof choosePinning>, running: Running): Promise<Started> {
  const started: Started = { build, tmp: mkdtempSync(path.join(os.tmpdir(), 'switchyard-compare-')), url: '', key: '' };
  running.add(started);
  try {
    const cli = path.join(build.root, 'dist', 'core', 'cli.js');
    const configFile = path.join(started.tmp, 'gateway.config.yaml');
    writeFileSync(configFile, configYaml(upstreamUrl) + (build.plugins ? `plugins: [${build.plugins.join(', ')}]\n` : ''));
    started.key = createKey(configFile, options.budget, cli);
    started.gateway = startGatewayProcess(build.name, cli, configFile, started.tmp, build.nodeArgs, pinning?.target);
    started.url = await waitForLine(started.gateway, GATEWAY_LISTENING);
    return started;
  } catch (error) {
    await stopBuild(started, running);
    throw error;
  }
}

async function stopBuild(started: Started, running: Running, timeoutMs = 10_000): Promise<void> {
  if (started.gateway) await stopChild(started.gateway, timeoutMs);
  rmSync(started.tmp, { recursive: true, force: true });
  running.delete(started);
}

/** Load one started build (at `rate` requests a second, or as fast as it answers) and read what a call cost it. */
async function loadBuild(
  options: Options,
  started: Started,
  workload: (typeof WORKLOADS)[number],
  pinning: ReturnType<typeof choosePinning>,
  rate: number | undefined,
): Promise<Omit<BuildMeasurement, 'round'>> {
  const pid = started.gateway!.pid;
  const spec: CannonSpec = {
    mode: 'cannon',
    url: started.url,
    requests: [workload.gateway(started.key)],
    connections: options.connections,
    durationS: options.durationS,
    warmupS: options.warmupS,
    ...(rate === undefined ? { settle: [pid] } : { overallRate: rate }),
  };
  const { result, cpu, cpuSeconds, window } = await runLoadProcess<CannonResult>(spec, pinning, [pid], (options.durationS + options.warmupS) * 3000 + 30_000);
  const used = cpuSeconds.get(pid) ?? null;
  const answered = result.totalRequests;
  return {
    workload: workload.id,
    build: started.build.name,
    rps: result.rps,
    requests: answered,
    failed: result.non2xx + result.errors,
    cpuUsPerCall: used === null || answered === 0 ? null : round((used * 1e6) / answered, 1),
    window,
    cpuPercent: cpu.get(pid) ?? null,
  };
}

/** One build serving one workload: a fresh process, warmed up, then loaded as fast as it answers. */
async function measureBuild(
  options: Options,
  build: Build,
  upstreamUrl: string,
  workload: (typeof WORKLOADS)[number],
  pinning: ReturnType<typeof choosePinning>,
  running: Running,
): Promise<Omit<BuildMeasurement, 'round'>> {
  const started = await startBuild(options, build, upstreamUrl, pinning, running);
  try {
    return await loadBuild(options, started, workload, pinning, undefined);
  } finally {
    await stopBuild(started, running);
  }
}

/**
 * Every build serving one workload at the same time (`--together`): fresh processes side by
 * side on the target CPU, each loaded at `rate` by a load process of its own, all measured over
 * the same seconds.
 */
async function measureTogether(
  options: Options,
  builds: readonly Build[],
  upstreamUrl: string,
  workload: (typeof WORKLOADS)[number],
  pinning: ReturnType<typeof choosePinning>,
  running: Running,
  rate: number,
): Promise<Array<Omit<BuildMeasurement, 'round'>>> {
  const started: Started[] = [];
  try {
    for (const build of builds) started.push(await startBuild(options, build, upstreamUrl, pinning, running));
    return await Promise.all(started.map((one) => loadBuild(options, one, workload, pinning, rate)));
  } finally {
    for (const one of started) await stopBuild(one, running);
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
    `### Builds compared (medians of ${results.options.rounds} round(s), each build in a fresh process per measurement` +
      `${results.options.together !== undefined ? ', the builds of a round side by side at the same time' : ''})`,
    '',
    `${results.date}; ${results.machine.nproc} CPUs (${results.machine.cpuModel}), Node ${results.machine.node}; ` +
      `${results.options.durationS} s measured after ${results.options.warmupS} s of warm-up, ${results.options.connections} connections` +
      `${results.options.together !== undefined ? `, each build at ${results.options.together} req/s` : ', each build as fast as it answers'}` +
      `${results.machine.pinning ? `; gateways on CPU ${results.machine.pinning.target}, load and upstream on CPU ${results.machine.pinning.load}` : ''}.`,
    '',
    '| workload | build | req/s | CPU µs a call | rounds (µs a call) | vs ' + first + ' | vs ' + first + ', round by round |',
    '|---|---|---:|---:|---|---:|---:|',
  ];
  for (const row of results.summary) {
    const perRound = results.measurements
      .filter((m) => m.workload === row.workload && m.build === row.build)
      .map((m) => (m.cpuUsPerCall === null ? '–' : m.cpuUsPerCall.toFixed(1)))
      .join(' / ');
    const percent = (value: number | null) => (row.build === first ? '' : value === null ? '–' : `${value > 0 ? '+' : ''}${(value * 100).toFixed(1)}%`);
    lines.push(
      `| ${row.workload} | ${row.build} | ${Math.round(row.rps).toLocaleString('en-US')} | ${row.cpuUsPerCall === null ? '–' : row.cpuUsPerCall.toFixed(1)} | ${perRound} | ${percent(row.vsFirst)} | ${percent(row.pairedVsFirst)} |`,
    );
  }
  if (results.options.together !== undefined) {
    const busiest = busiestRound(results.measurements);
    if (busiest && busiest.percent >= SATURATED_PERCENT) {
      lines.push(
        '',
        `**The target CPU was ${busiest.percent}% busy** (the builds together, ${busiest.workload} in round ${busiest.round}): ` +
          `at ${results.options.together} req/s each they left it no slack, so a build that costs more also answered fewer calls ` +
          `and waited longer on the others. Lower \`--together\`.`,
      );
    }
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
  const running: Running = new Set();
  const stopOnSignal = () => {
    void (async () => {
      for (const one of [...running]) await stopBuild(one, running, 5_000);
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
    options: {
      rounds: options.rounds,
      durationS: options.durationS,
      warmupS: options.warmupS,
      connections: options.connections,
      budget: options.budget,
      ...(options.together !== undefined ? { together: options.together } : {}),
    },
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
        const measured: Array<Omit<BuildMeasurement, 'round'>> = [];
        if (options.together !== undefined) measured.push(...(await measureTogether(options, order, upstreamUrl, workload, pinning, running, options.together)));
        for (const [i, build] of order.entries()) {
          const m = options.together !== undefined ? measured[i]! : await measureBuild(options, build, upstreamUrl, workload, pinning, running);
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
        pairedVsFirst: pairedRatio(measurements, workload, builds[0]!.name, build.name),
      });
    }
  }
  return summary;
}

/**
 * The median over the rounds of `build`'s CPU a call against `first`'s in the same round (rounds
 * where either failed calls or has no figure left out); null for the first build itself.
 */
export function pairedRatio(measurements: readonly BuildMeasurement[], workload: WorkloadId, first: string, build: string): number | null {
  if (build === first) return null;
  const cpuIn = (r: number, name: string) => {
    const m = measurements.find((one) => one.round === r && one.workload === workload && one.build === name);
    return m && m.failed === 0 ? m.cpuUsPerCall : null;
  };
  const ratios: number[] = [];
  for (const r of new Set(measurements.map((m) => m.round))) {
    const base = cpuIn(r, first);
    const mine = cpuIn(r, build);
    if (base && mine !== null) ratios.push(mine / base - 1);
  }
  return ratios.length ? round(median(ratios), 4) : null;
}

/** The builds side by side used this much of the target CPU together, or more: it was their limit. */
const SATURATED_PERCENT = 90;

/** How busy the builds of one round and workload kept the target CPU together, % of one core. */
interface RoundLoad {
  round: number;
  workload: WorkloadId;
  percent: number;
}

/** The round and workload in which the builds together kept the target CPU busiest (with `--together`). */
export function busiestRound(measurements: readonly BuildMeasurement[]): RoundLoad | undefined {
  const sums = new Map<string, RoundLoad>();
  for (const m of measurements) {
    if (m.cpuPercent === null) continue;
    const key = `${m.round} ${m.workload}`;
    const sum = sums.get(key) ?? { round: m.round, workload: m.workload, percent: 0 };
    sum.percent += m.cpuPercent;
    sums.set(key, sum);
  }
  let busiest: RoundLoad | undefined;
  for (const sum of sums.values()) if (!busiest || sum.percent > busiest.percent) busiest = sum;
  return busiest && { ...busiest, percent: round(busiest.percent, 1) };
}
