/**
 * `npm run bench -- --compare NAME=DIR[@plugin,...][#--node-flag,...] ...`: what one call costs in
 * each of several builds of the gateway, measured in turns under the same load.
 *
 * Each build is a folder holding a built `dist/` (a checkout, a `git worktree`, or a copy of
 * `dist/` beside links to this repository's `node_modules`, `package.json` and `config/`); `.` is
 * this one. `@plugin,...` gives the build's configuration that `plugins:` list instead of the
 * default pipeline; `#--flag,...` adds node flags to the ones `npm start` uses. Every round
 * measures every build once per workload, in the order given, each in a fresh process (its own
 * store and key) pinned to the target CPU, warmed up, then loaded at 50 connections from the
 * other CPU. The figure that counts is the **CPU one call costs** (the gateway process's user and
 * system time, all of its threads, over the measured seconds, divided by the calls answered):
 * unlike requests a second it does not depend on how busy the load generator's CPU was. Two
 * processes of the same build differ by a few per cent, and a machine drifts between runs:
 * compare builds within one run, over several rounds, by their medians.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CannonResult, CannonSpec } from './load.js';
import { choosePinning, startNode, stopChild, waitForLine, type Child } from './proc.js';
import { commit, configYaml, createKey, distBench, LOG_LEVEL, machine, runLoadProcess, START, writeResults, type Options } from './run.js';
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

/** `NAME=DIR[@plugin,...][#--flag,...]`, DIR relative to `cwd`. */
export function parseBuild(spec: string, cwd: string): Build {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`'${spec}': a build is NAME=DIR[@plugin,...][#--node-flag,...]`);
  const name = spec.slice(0, eq);
  let rest = spec.slice(eq + 1);
  let nodeArgs: string[] = [];
  const hash = rest.indexOf('#');
  if (hash >= 0) {
    nodeArgs = rest.slice(hash + 1).split(',').filter(Boolean);
    rest = rest.slice(0, hash);
    for (const flag of nodeArgs) if (!flag.startsWith('-')) throw new Error(`'${spec}': '${flag}' is not a node flag`);
  }
  let plugins: string[] | undefined;
  const at = rest.indexOf('@');
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
  date: string;
  commit: string;
  machine: ReturnType<typeof machine>;
  options: { rounds: number; durationS: number; warmupS: number; connections: number; budget: boolean };
  builds: Array<Build & { commit: string }>;
  measurements: BuildMeasurement[];
  summary: Array<{ workload: WorkloadId; build: string; rps: number; cpuUsPerCall: number | null; cpuUsRange: [number, number] | null; vsFirst: number | null }>;
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

/** One build serving one workload: a fresh process, its own store and key, warmed up and loaded. */
async function measureBuild(options: Options, build: Build, upstreamUrl: string, workload: (typeof WORKLOADS)[number], pinning: ReturnType<typeof choosePinning>): Promise<Omit<BuildMeasurement, 'round'>> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'switchyard-compare-'));
  const cli = path.join(build.root, 'dist', 'core', 'cli.js');
  let gateway: Child | undefined;
  try {
    const configFile = path.join(tmp, 'gateway.config.yaml');
    writeFileSync(configFile, configYaml(upstreamUrl) + (build.plugins ? `plugins: [${build.plugins.join(', ')}]\n` : ''));
    const key = createKey(configFile, options.budget, cli);
    gateway = startNode(build.name, [...START.nodeArgs, ...build.nodeArgs, cli, 'start', '--config', configFile, '--port', '0'], {
      cpu: pinning?.target,
      cwd: tmp,
      env: { ...process.env, ...START.env, LOG_LEVEL, LOG_FORMAT: 'json', SWITCHYARD_CONFIG: undefined, PORT: undefined },
    });
    const url = await waitForLine(gateway, /listening on (http:\/\/[^\s"]+)/);
    const spec: CannonSpec = { mode: 'cannon', url, requests: [workload.gateway(key)], connections: options.connections, durationS: options.durationS, warmupS: options.warmupS };
    const { result, cpu } = await runLoadProcess<CannonResult>(spec, pinning, [gateway.pid], (options.durationS + options.warmupS) * 3000 + 30_000);
    const cpuPct = cpu.get(gateway.pid) ?? null;
    const answered = result.totalRequests;
    return {
      workload: workload.id,
      build: build.name,
      rps: result.rps,
      requests: answered,
      failed: result.non2xx + result.errors,
      cpuUsPerCall: cpuPct === null || answered === 0 ? null : round(((cpuPct / 100) * result.durationS * 1e6) / answered, 1),
    };
  } finally {
    if (gateway) await stopChild(gateway, 10_000);
    rmSync(tmp, { recursive: true, force: true });
  }
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
  if (failed > 0) lines.push('', `**${failed} calls failed** (non-2xx or errors): a build that fails is not doing the same work.`);
  return lines.join('\n');
}

/** Measure the builds against each other; writes `<date>-compare.json` into `options.out`. */
export async function runCompare(options: Options, specs: string[]): Promise<{ file: string; text: string; results: CompareResults }> {
  const builds = specs.map((spec) => parseBuild(spec, process.cwd()));
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
  const measurements: BuildMeasurement[] = [];
  try {
    const upstreamUrl = await waitForLine(upstream, /READY (\S+)/);
    const workloads = WORKLOADS.filter((w) => options.workloads.includes(w.id));
    for (let r = 1; r <= options.rounds; r++) {
      for (const workload of workloads) {
        for (const build of builds) {
          const m = await measureBuild(options, build, upstreamUrl, workload, pinning);
          measurements.push({ round: r, ...m });
          log(`round ${r}/${options.rounds} ${workload.id} ${build.name}: ${Math.round(m.rps)} req/s, ${m.cpuUsPerCall ?? '–'} µs of CPU a call${m.failed ? `, ${m.failed} failed` : ''}`);
        }
      }
    }
  } finally {
    await stopChild(upstream, 5_000);
  }
  const summary: CompareResults['summary'] = [];
  for (const workload of options.workloads) {
    let firstCpu: number | null = null;
    for (const build of builds) {
      const mine = measurements.filter((m) => m.workload === workload && m.build === build.name);
      const cpus = mine.map((m) => m.cpuUsPerCall).filter((v): v is number => v !== null);
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
  const results: CompareResults = {
    kind: 'compare',
    date: date.toISOString(),
    commit: commit(),
    machine: machine(pinning, loadavgBefore),
    options: { rounds: options.rounds, durationS: options.durationS, warmupS: options.warmupS, connections: options.connections, budget: options.budget },
    builds: builds.map((b) => ({ ...b, commit: commit(b.root) })),
    measurements,
    summary,
  };
  const file = writeResults(options, date, '-compare', results);
  return { file, text: renderCompare(results), results };
}
