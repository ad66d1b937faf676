/**
 * `npm run bench`: Switchyard with its default pipeline against a bare pass-through proxy, both in
 * front of the same fake OpenAI upstream, driven by autocannon from another process (on another
 * CPU where taskset exists), interleaved round by round; medians are quoted. See
 * docs/performance.md for the method.
 *
 *   npm run bench                          4 rounds × 10 s per measurement
 *   npm run bench -- --quick               1 round × 1 s (the CI smoke run)
 *   npm run bench -- --soak 600            constant load for 600 s, RSS sampled: is memory flat?
 *   npm run bench -- --history             every full run and soak in bench/results, one line each
 *
 * Options: --duration S, --rounds N, --connections N, --sequential N (concurrency-1 requests),
 * --warmup S, --workloads chat,chat-stream,..., --out DIR, --no-pin, --cpu-prof DIR (profile the
 * gateway), --perf DIR (profile both targets whole, kernel included, at the same rate: perf.ts),
 * --keep (keep the temp folder with the config, store and logs).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import type { CannonResult, LoadSpec, SequentialResult, SequentialResults, SequentialSpec } from './load.js';
import {
  choosePinning,
  cpuSeconds,
  isMain,
  eachLine,
  memoryOf,
  startNode,
  stopChild,
  waitForLine,
  type Child,
  type Pinning,
} from './proc.js';
import {
  cpuUsPerCall,
  ratioText,
  renderBench,
  throughputCheck,
  throughputTarget,
  renderSoak,
  type BenchResults,
  type BudgetCheck,
  type Machine,
  type MeasureOptions,
  type RoundResult,
  type SequentialClient,
  type SoakResults,
  type TargetMeasurement,
  type WorkloadResult,
  type WorkloadSummary,
} from './report.js';
import { median, round, soakVerdict } from './stats.js';
import { CHAT_MODEL, EMBEDDING_MODEL, WORKLOADS, type HttpCall, type Workload, type WorkloadId } from './workloads.js';

const here = path.dirname(fileURLToPath(import.meta.url));
/** The repository root, from bench/ or dist/bench/. */
const repoRoot = (() => {
  let dir = here;
  while (!existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return dir;
})();
export const distBench = path.join(repoRoot, 'dist', 'bench');
const cliJs = path.join(repoRoot, 'dist', 'core', 'cli.js');
const UPSTREAM_KEY = 'sk-bench-upstream';
const LOG_LEVEL = 'warn';

/** How `npm start` launches the gateway: the environment it sets and the flags it gives node. */
export interface StartLaunch {
  /** The `NAME=value` words that open the start script. */
  env: Record<string, string>;
  /** The words between `node` and the script it runs that begin with `-`: node and V8 flags, each written as one word (`--name=value`). */
  nodeArgs: string[];
}

/** Read the start script in package.json: the benchmark runs the gateway as an operator's `npm start` does. */
export function startScriptLaunch(script: string): StartLaunch {
  const words = script.trim().split(/\s+/);
  const env: Record<string, string> = {};
  let i = 0;
  for (; i < words.length; i++) {
    const assignment = /^([A-Za-z_][A-Za-z0-9_]*)=(\S*)$/.exec(words[i]!);
    if (!assignment) break;
    env[assignment[1]!] = assignment[2]!;
  }
  if (words[i] === 'exec') i++;
  const nodeArgs: string[] = [];
  if (words[i] === 'node') for (i++; i < words.length && words[i]!.startsWith('-'); i++) nodeArgs.push(words[i]!);
  return { env, nodeArgs };
}
const START = startScriptLaunch(
  (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { scripts?: { start?: string } }).scripts?.start ?? '',
);
const MB = 1024 * 1024;
/** Concurrency-1 requests each target gets in a row before the other's turn. */
const SEQUENTIAL_TURN = 50;

export interface Options extends MeasureOptions {
  soakS: number | undefined;
  workloads: WorkloadId[];
  out: string;
  pin: boolean;
  /** Where the concurrency-1 client runs: in the fake upstream's process (default) or a process of its own. */
  sequentialClient: SequentialClient;
  cpuProf: string | undefined;
  /** `--perf DIR`: profile both targets with Linux perf at the same rate (see perf.ts); the data go to DIR. */
  perf: string | undefined;
  keep: boolean;
  /** Give the key a budget (metering then reserves each call's worst case before it goes up). */
  budget: boolean;
  mode: BenchResults['mode'];
  /** `--compare`: the builds to measure against each other (see compare.ts), as given. */
  compare: string[] | undefined;
  /** `--compare --together RATE`: a round's builds run at the same time, each at RATE req/s. */
  together: number | undefined;
  /** `--history`: print the runs and soaks kept in `out` instead of measuring. */
  history: boolean;
}

export function parseOptions(argv: string[]): Options {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      duration: { type: 'string' },
      rounds: { type: 'string' },
      quick: { type: 'boolean', default: false },
      soak: { type: 'string' },
      connections: { type: 'string' },
      sequential: { type: 'string' },
      warmup: { type: 'string' },
      workloads: { type: 'string' },
      out: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      'c1-client': { type: 'string' },
      'cpu-prof': { type: 'string' },
      perf: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'no-budget': { type: 'boolean', default: false },
      compare: { type: 'boolean', default: false },
      together: { type: 'string' },
      history: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(
      'npm run bench -- [--quick] [--duration S] [--rounds N] [--connections N] [--sequential N] [--warmup S]\n' +
        '                 [--workloads chat,chat-stream,messages,embeddings] [--out DIR] [--no-pin] [--no-budget]\n' +
        '                 [--c1-client upstream|own-process] [--cpu-prof DIR] [--keep]\n' +
        'npm run bench -- --soak SECONDS [--connections N]\n' +
        'npm run bench -- --compare NAME=DIR[@plugin,...][#--node-flag,...] ... [--workloads ...] [--rounds N] [--duration S]\n' +
        '                 [--warmup S] [--connections N] [--no-budget] [--out DIR] [--together RATE]\n' +
        'npm run bench -- --perf DIR [--workloads ...] [--duration S] [--warmup S] [--connections N] [--no-budget]\n' +
        'npm run bench -- --history [--out DIR]\n',
    );
    process.exit(0);
  }
  const num = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} must be a number >= ${min}`);
    return value;
  };
  const quick = values.quick === true;
  if (positionals.length > 0 && !values.compare) throw new Error(`unexpected argument '${positionals[0]}' (builds are named only with --compare)`);
  if (values.compare && positionals.length === 0) throw new Error('--compare needs at least one build: NAME=DIR[@plugin,...][#--node-flag,...]');
  const workloads = (values.workloads?.split(',').map((w) => w.trim()) ?? WORKLOADS.map((w) => w.id)) as WorkloadId[];
  for (const w of workloads) if (!WORKLOADS.some((k) => k.id === w)) throw new Error(`unknown workload '${w}' (${WORKLOADS.map((k) => k.id).join(', ')})`);
  const compare = values.compare === true;
  if (values.history && (compare || values.soak !== undefined || values.perf !== undefined)) throw new Error('--history measures nothing: it takes only --out');
  if (values.together !== undefined && !compare) throw new Error('--together runs the builds of --compare side by side: it needs --compare');
  const perf = values.perf !== undefined ? path.resolve(values.perf) : undefined;
  if (perf && (compare || values.soak !== undefined)) throw new Error('--perf is a measurement of its own: not with --compare or --soak');
  const durationS = num('duration', values.duration, quick ? 1 : compare ? 8 : 10, 0.5);
  // An even number by default: each order of the two targets (A B, B A) is measured as often.
  const rounds = Math.round(num('rounds', values.rounds, quick ? 1 : compare ? 3 : 4, 1));
  const custom =
    values.duration !== undefined ||
    values.rounds !== undefined ||
    values.connections !== undefined ||
    values.sequential !== undefined ||
    values.warmup !== undefined ||
    values.workloads !== undefined ||
    values['no-budget'] === true ||
    values['c1-client'] !== undefined;
  const sequentialClient = (values['c1-client'] ?? 'upstream') as SequentialClient;
  if (sequentialClient !== 'upstream' && sequentialClient !== 'own-process') throw new Error(`--c1-client must be upstream or own-process`);
  return {
    durationS,
    // A build compared starts afresh for each measurement: its code needs longer to warm up. A
    // --perf profile would otherwise show V8's compiler threads still optimizing what the load runs.
    warmupS: num('warmup', values.warmup, quick ? 0.5 : perf ? 10 : compare ? 3 : 1, 0),
    rounds,
    connections: Math.round(num('connections', values.connections, 50, 1)),
    sequential: Math.round(num('sequential', values.sequential, quick ? 200 : 2000, 10)),
    sequentialWarmup: quick ? 50 : 200,
    soakS: values.soak !== undefined ? num('soak', values.soak, 600, 5) : undefined,
    workloads,
    out: path.resolve(values.out ?? path.join(repoRoot, 'bench', 'results')),
    pin: !values['no-pin'],
    sequentialClient,
    cpuProf: values['cpu-prof'] ? path.resolve(values['cpu-prof']) : undefined,
    perf,
    keep: values.keep === true,
    budget: !values['no-budget'],
    mode: quick ? 'quick' : custom ? 'custom' : 'full',
    compare: compare ? positionals : undefined,
    together: values.together !== undefined ? Math.round(num('together', values.together, 0, 1)) : undefined,
    history: values.history === true,
  };
}

// ---------------------------------------------------------------------------------------------
// The three servers

export interface Targets {
  tmp: string;
  upstream: Child;
  upstreamUrl: string;
  bare?: Child;
  bareUrl?: string;
  gateway: Child;
  gatewayUrl: string;
  key: string;
  /** The gateway's RSS once it listens, before any request. */
  rssAtStartMB: number;
  pinning: Pinning | null;
  children: Child[];
}

export function configYaml(upstreamUrl: string): string {
  return `# Generated by bench/run.ts: the default pipeline (no plugins: key, so every built-in plugin in
# the default order), one OpenAI-compatible back end (the benchmark's fake upstream), pricing.
server:
  host: 127.0.0.1
  port: 0
logging:
  level: ${LOG_LEVEL}
  format: json
storage:
  driver: sqlite
  url: ./switchyard-bench.db
providers:
  - id: upstream
    type: openai
    baseUrl: ${upstreamUrl}/v1
    apiKey: ${UPSTREAM_KEY}
    models: [${CHAT_MODEL}, ${EMBEDDING_MODEL}]
pricing:
  ${CHAT_MODEL}: { input: 0.15, output: 0.6, cachedInput: 0.075 }
  ${EMBEDDING_MODEL}: { input: 0.02 }
`;
}

/** The key every call uses: real, in the gateway's SQLite store, with limits that never trigger. */
const KEY_ARGS = ['--name', 'bench', '--rpm', '1000000000', '--tpm', '1000000000000', '--max-concurrent', '1000000'];
const BUDGET_ARGS = ['--budget', '1000000'];
export function keyDescription(budget: boolean): string {
  return `created with \`switchyard keys create\`: rpm 1e9, tpm 1e12, max-concurrent 1e6${budget ? ', budget 1e6' : ', no budget'}`;
}

/** The line a gateway prints once it listens; its URL is the first group. */
export const GATEWAY_LISTENING = /listening on (http:\/\/[^\s"]+)/;

/**
 * Start the gateway of the build whose CLI is `cli` as `npm start` starts it (its environment and
 * node flags, then `nodeArgs`), on `cpu`, in `cwd`, at the benchmark's log level.
 */
export function startGatewayProcess(name: string, cli: string, configFile: string, cwd: string, nodeArgs: string[], cpu: number | undefined): Child {
  return startNode(name, [...START.nodeArgs, ...nodeArgs, cli, 'start', '--config', configFile, '--port', '0'], {
    cpu,
    cwd,
    env: { ...process.env, ...START.env, LOG_LEVEL, LOG_FORMAT: 'json', SWITCHYARD_CONFIG: undefined, PORT: undefined },
  });
}

/** A key in the store of `configFile`, made by the CLI of the build at `cli` (this one's by default). */
export function createKey(configFile: string, budget: boolean, cli = cliJs): string {
  const args = [cli, 'keys', 'create', ...KEY_ARGS, ...(budget ? BUDGET_ARGS : []), '--json', '--config', configFile];
  const out = spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`switchyard keys create failed (${out.status}): ${out.stderr}`);
  const key = (JSON.parse(out.stdout) as { key?: string }).key;
  if (!key) throw new Error(`switchyard keys create printed no key: ${out.stdout}`);
  return key;
}

/** Start the upstream, the gateway and (`withBare`) the bare proxy; `nodeArgs` go to both targets' node. */
export async function startTargets(options: Options, withBare: boolean, nodeArgs: string[] = []): Promise<Targets> {
  if (!existsSync(cliJs) || !existsSync(path.join(distBench, 'load.js'))) throw new Error('dist/ is not built: run `npm run build` (npm run bench does it)');
  const pinning = choosePinning(!options.pin);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'switchyard-bench-'));
  const children: Child[] = [];
  const targets: Partial<Targets> = { tmp, pinning, children };
  try {
    const upstream = startNode('upstream', [path.join(distBench, 'upstream.js')], { cpu: pinning?.load, stdin: true });
    children.push(upstream);
    targets.upstream = upstream;
    targets.upstreamUrl = await waitForLine(upstream, /READY (\S+)/);

    const configFile = path.join(tmp, 'gateway.config.yaml');
    writeFileSync(configFile, configYaml(targets.upstreamUrl));
    targets.key = createKey(configFile, options.budget);

    const gatewayArgs = options.cpuProf ? [...nodeArgs, '--cpu-prof', '--cpu-prof-dir', options.cpuProf] : nodeArgs;
    if (options.cpuProf) mkdirSync(options.cpuProf, { recursive: true });
    const gateway = startGatewayProcess('switchyard', cliJs, configFile, tmp, gatewayArgs, pinning?.target);
    children.push(gateway);
    targets.gateway = gateway;
    targets.gatewayUrl = await waitForLine(gateway, GATEWAY_LISTENING);
    const memory = memoryOf(gateway.pid);
    targets.rssAtStartMB = memory ? round(memory.rss / MB, 1) : NaN;

    if (withBare) {
      const bare = startNode('bare proxy', [...nodeArgs, path.join(distBench, 'bare-proxy.js'), '--upstream', targets.upstreamUrl], { cpu: pinning?.target });
      children.push(bare);
      targets.bare = bare;
      targets.bareUrl = await waitForLine(bare, /READY (\S+)/);
    }
    return targets as Targets;
  } catch (error) {
    await stopTargets(targets as Targets, options);
    throw error;
  }
}

export async function stopTargets(targets: Targets, options: Options): Promise<void> {
  // The gateway first: a clean stop flushes its queues and writes a CPU profile if asked.
  for (const child of [...targets.children].reverse()) await stopChild(child, 10_000);
  if (!options.keep && targets.tmp) rmSync(targets.tmp, { recursive: true, force: true });
  else if (targets.tmp) process.stderr.write(`kept ${targets.tmp}\n`);
}

// ---------------------------------------------------------------------------------------------
// Measurements

interface LoadOutcome<R> {
  result: R;
  /** CPU % of one core, per watched pid, over the measured part. */
  cpu: Map<number, number | null>;
  /** CPU seconds (user + system, all threads), per watched pid, over the measured part. */
  cpuSeconds: Map<number, number | null>;
  /** When the measured part began and ended (ms since the epoch, as this process saw the load process say so). */
  window: [number, number];
}

/**
 * Run one load process (on the load CPU) and read the watched processes' CPU around its measured
 * part; `around` is called as that part begins and as it ends (a profiler started and stopped).
 */
export async function runLoadProcess<R extends CannonResult | SequentialResults>(
  spec: LoadSpec,
  pinning: Pinning | null,
  watch: number[],
  timeoutMs: number,
  around?: { start(): void; end(): void },
): Promise<LoadOutcome<R>> {
  const child = startNode('load', [path.join(distBench, 'load.js'), JSON.stringify(spec)], { cpu: pinning?.load });
  const cpu = new Map<number, number | null>();
  const used = new Map<number, number | null>();
  let startCpu = new Map<number, number | undefined>();
  let startedAt = 0n;
  const window: [number, number] = [0, 0];
  let result: R | undefined;
  eachLine(child.proc.stdout!, (line) => {
    if (line === 'MEASURE_START') {
      startedAt = process.hrtime.bigint();
      window[0] = Date.now();
      startCpu = new Map(watch.map((pid) => [pid, cpuSeconds(pid)]));
      around?.start();
    } else if (line === 'MEASURE_END') {
      window[1] = Date.now();
      around?.end();
      const wall = Number(process.hrtime.bigint() - startedAt) / 1e9;
      for (const pid of watch) {
        const before = startCpu.get(pid);
        const after = cpuSeconds(pid);
        used.set(pid, before === undefined || after === undefined ? null : after - before);
        cpu.set(pid, before === undefined || after === undefined ? null : round(((after - before) / wall) * 100, 1));
      }
    } else if (line.startsWith('RESULT ')) {
      result = JSON.parse(line.slice(7)) as R;
    }
  });
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), timeoutMs);
  const code = await child.exited;
  clearTimeout(timer);
  if (code !== 0 || !result) throw new Error(`the load process failed (exit ${code}):\n${child.tail()}`);
  return { result, cpu, cpuSeconds: used, window };
}

interface Probe {
  ok: boolean;
  status: number;
  bytes: number;
  events?: number;
  /** The answer's x-switchyard-overhead-ms, in µs (the gateway only). */
  overheadUs?: number;
  note: string;
}

/** One call, to see whether the target serves the workload at all (and how big the answer is). */
async function probe(url: string, call: HttpCall): Promise<Probe> {
  const res = await request(`${url}${call.path}`, { method: call.method, headers: call.headers, body: call.body });
  const text = await res.body.text();
  const ok = res.statusCode >= 200 && res.statusCode < 300;
  let note = `${res.statusCode}`;
  if (!ok) {
    try {
      const parsed = JSON.parse(text) as { error?: { code?: string; type?: string } };
      note = `${res.statusCode} ${parsed.error?.code ?? parsed.error?.type ?? ''}`.trim();
    } catch {
      // not JSON: the status says enough
    }
  }
  const events = text.includes('data: ') ? text.split('\n').filter((l) => l.startsWith('data: ')).length : undefined;
  const overheadMs = res.headers['x-switchyard-overhead-ms'];
  const overheadUs = typeof overheadMs === 'string' && Number.isFinite(Number(overheadMs)) ? Math.round(Number(overheadMs) * 1000) : undefined;
  return { ok, status: res.statusCode, bytes: Buffer.byteLength(text), events, overheadUs, note };
}

function log(message: string): void {
  process.stderr.write(`${message}\n`);
}

async function measureTarget(
  options: Options,
  targets: Targets,
  which: 'bare' | 'gateway',
  call: HttpCall,
): Promise<{ cannon: CannonResult; cannonCpu: number | null; upstreamCpu: number | null; loadCpu: number; rssAfterMB: number }> {
  const url = which === 'bare' ? targets.bareUrl! : targets.gatewayUrl;
  const pid = which === 'bare' ? targets.bare!.pid : targets.gateway.pid;
  const spec: LoadSpec = { mode: 'cannon', url, requests: [call], connections: options.connections, durationS: options.durationS, warmupS: options.warmupS, settle: [pid] };
  const { result, cpu } = await runLoadProcess<CannonResult>(spec, targets.pinning, [pid, targets.upstream.pid], (options.durationS + options.warmupS) * 1000 * 3 + 30_000);
  const memory = memoryOf(pid);
  return { cannon: result, cannonCpu: cpu.get(pid) ?? null, upstreamCpu: cpu.get(targets.upstream.pid) ?? null, loadCpu: result.loadCpuPct, rssAfterMB: memory ? round(memory.rss / MB, 1) : NaN };
}

/**
 * Concurrency 1 on both targets in one client, in turns of 50 requests (bare proxy, gateway,
 * bare proxy, ...): a slow spell of the machine, which can last the length of a whole
 * 2,000-request measurement on a shared VM, then falls on both alike.
 *
 * The client runs in the fake upstream's own process and event loop (`--c1-client upstream`, the
 * default), not in a process of its own beside it on the load CPU (`--c1-client own-process`).
 * The upstream writes a stream's 20 chunks on 20 turns of its event loop without sleeping; a
 * client process sharing its CPU, woken by its first byte, then often waits for the CPU until the
 * upstream's last chunk is written (Linux lets the running task finish its slice), and how often
 * it waits depends on how late in that loop its first byte came: hundreds of µs a call on a slow
 * machine that belong to neither target, yet land more on the slower one (docs/performance.md,
 * "time to first byte"). In one event loop the client reads what arrived between two of the
 * upstream's turns, as a client on a machine of its own would read it at once. Both targets are
 * measured the same way, and the load CPU still runs nothing else.
 */
async function sequentialPair(options: Options, targets: Targets, w: Workload): Promise<{ bare: SequentialResult; gateway: SequentialResult; turn: number }> {
  const spec: SequentialSpec = {
    mode: 'sequential',
    targets: [
      { url: targets.bareUrl!, call: w.bare() },
      { url: targets.gatewayUrl, call: w.gateway(targets.key) },
    ],
    warmup: options.sequentialWarmup,
    count: options.sequential,
    turn: SEQUENTIAL_TURN,
  };
  const timeoutMs = 120_000 + options.sequential * 100;
  const result =
    options.sequentialClient === 'upstream'
      ? await sequentialInUpstream(targets.upstream, spec, timeoutMs)
      : (await runLoadProcess<SequentialResults>(spec, targets.pinning, [], timeoutMs)).result;
  return { bare: result.results[0]!, gateway: result.results[1]!, turn: result.turn };
}

/** Run a concurrency-1 measurement in the fake upstream's process (see sequentialPair) and wait for its result. */
function sequentialInUpstream(upstream: Child, spec: SequentialSpec, timeoutMs: number): Promise<SequentialResults> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`the concurrency-1 measurement took longer than ${timeoutMs} ms`)), timeoutMs);
    const stopReading = eachLine(upstream.proc.stdout!, (line) => {
      if (line.startsWith('RESULT ')) finish(undefined, JSON.parse(line.slice(7)) as SequentialResults);
      else if (line.startsWith('FAILED ')) finish(new Error(`the concurrency-1 measurement failed: ${line.slice(7)}`));
    });
    const onExit = (code: number | null) => finish(new Error(`the upstream exited (${code}) during the concurrency-1 measurement:\n${upstream.tail()}`));
    const finish = (error?: Error, result?: SequentialResults) => {
      clearTimeout(timer);
      stopReading();
      upstream.proc.off('exit', onExit);
      if (error) reject(error);
      else resolve(result!);
    };
    upstream.proc.once('exit', onExit);
    upstream.proc.stdin!.write(`SEQUENTIAL ${JSON.stringify(spec)}\n`);
  });
}

export function summarize(w: Workload, rounds: RoundResult[]): WorkloadSummary {
  const m = (pick: (r: RoundResult) => number | null) => round(median(rounds.map((r) => pick(r) ?? NaN)), 1);
  const failures = rounds.reduce(
    (sum, r) =>
      sum +
      r.bare.cannon.non2xx + r.bare.cannon.errors + r.gateway.cannon.non2xx + r.gateway.cannon.errors + r.bare.sequential.non2xx + r.gateway.sequential.non2xx,
    0,
  );
  return {
    gatewayRps: m((r) => r.gateway.cannon.rps),
    bareRps: m((r) => r.bare.cannon.rps),
    ratio: round(median(rounds.map((r) => r.ratio)), 3),
    gatewayP50Ms: m((r) => r.gateway.cannon.p50Ms),
    gatewayP99Ms: m((r) => r.gateway.cannon.p99Ms),
    bareP50Ms: m((r) => r.bare.cannon.p50Ms),
    bareP99Ms: m((r) => r.bare.cannon.p99Ms),
    gatewayC1Us: m((r) => r.gateway.sequential.p50Us),
    bareC1Us: m((r) => r.bare.sequential.p50Us),
    addedUs: m((r) => r.addedUs),
    gatewayTtfbUs: w.stream ? m((r) => r.gateway.sequential.ttfbP50Us) : null,
    bareTtfbUs: w.stream ? m((r) => r.bare.sequential.ttfbP50Us) : null,
    ttfbAddedUs: w.stream ? m((r) => r.ttfbAddedUs) : null,
    selfReportedOverheadUs: rounds.some((r) => r.gateway.sequential.selfReportedOverheadP50Us !== null)
      ? m((r) => r.gateway.sequential.selfReportedOverheadP50Us)
      : null,
    gatewayRssMB: m((r) => r.gateway.rssAfterMB),
    gatewayCpuPct: m((r) => r.gateway.targetCpuPct),
    bareCpuPct: m((r) => r.bare.targetCpuPct),
    gatewayCpuUsPerCall: m((r) => cpuUsPerCall(r.gateway)),
    bareCpuUsPerCall: m((r) => cpuUsPerCall(r.bare)),
    // The load side matters when it serves the faster target: during the bare proxy's load.
    loadCpuPct: m((r) => r.bare.cannon.loadCpuPct),
    upstreamCpuPct: m((r) => r.bare.upstreamCpuPct),
    failures,
  };
}

function budgetChecks(workloads: WorkloadResult[], rssAfterAllMB: number): BudgetCheck[] {
  const checks: BudgetCheck[] = [];
  for (const w of workloads) {
    const s = w.summary;
    const target = throughputTarget(w.stream);
    checks.push({
      what: throughputCheck(w.title),
      budget: `≥ ${target}x`,
      measured: s ? ratioText(s.ratio, target) : (w.note ?? 'not served yet'),
      met: s ? s.ratio >= target : null,
    });
    checks.push({
      what: `${w.title}: added latency at concurrency 1`,
      budget: '≤ 300 µs',
      measured: s ? `${Math.round(s.addedUs)} µs` : (w.note ?? 'not served yet'),
      met: s ? s.addedUs <= 300 : null,
    });
    if (w.stream) {
      checks.push({
        what: `${w.title}: added time to first byte at concurrency 1`,
        budget: '≤ 300 µs',
        measured: s && s.ttfbAddedUs !== null ? `${Math.round(s.ttfbAddedUs)} µs` : (w.note ?? 'not served yet'),
        met: s && s.ttfbAddedUs !== null ? s.ttfbAddedUs <= 300 : null,
      });
    }
  }
  checks.push({ what: 'gateway RSS after the load', budget: '≤ 150 MB', measured: `${Math.round(rssAfterAllMB)} MB`, met: Number.isFinite(rssAfterAllMB) ? rssAfterAllMB <= 150 : null });
  return checks;
}

/** The plugins a configuration without `plugins:` loads, as the build in dist/ has them. */
async function defaultPipeline(): Promise<string> {
  try {
    const { builtins } = (await import(pathToFileURL(path.join(repoRoot, 'dist', 'plugins', 'builtins.js')).href)) as { builtins: { defaultOrder: string[] } };
    return `the default pipeline: ${builtins.defaultOrder.join(', ')}`;
  } catch {
    return 'the default pipeline';
  }
}

function cpuModel(): string {
  try {
    return /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? os.cpus()[0]?.model ?? 'unknown';
  } catch {
    return os.cpus()[0]?.model ?? 'unknown';
  }
}

export function machine(pinning: Pinning | null, loadavgBefore: number[]): Machine {
  return {
    nproc: os.availableParallelism(),
    cpuModel: cpuModel(),
    node: process.version,
    kernel: os.release(),
    memTotalMB: Math.round(os.totalmem() / MB),
    loadavgBefore: loadavgBefore.map((v) => round(v, 2)),
    loadavgAfter: os.loadavg().map((v) => round(v, 2)),
    pinning,
  };
}

/** The commit measured, marked `+dirty` when core/, plugins/ or config/ have uncommitted changes. */
export function commit(dir = repoRoot): string {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'core', 'plugins', 'config'], { cwd: dir, encoding: 'utf8' });
  return `${head.stdout.trim()}${dirty.stdout.trim() ? '+dirty' : ''}`;
}

export function stamp(date: Date): string {
  return date.toISOString().replace(/\.\d+Z$/, 'Z').replace(/:/g, '-');
}

export function writeResults(options: Options, date: Date, suffix: string, results: unknown): string {
  mkdirSync(options.out, { recursive: true });
  const file = path.join(options.out, `${stamp(date)}${suffix}.json`);
  // Written whole, then renamed: a reader never sees half a file.
  writeFileSync(`${file}.tmp`, `${JSON.stringify(results, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
  return file;
}

export async function runBench(options: Options): Promise<{ file: string; results: BenchResults }> {
  const date = new Date();
  const loadavgBefore = os.loadavg();
  const targets = await startTargets(options, true);
  const stopOnSignal = () => void stopTargets(targets, options).then(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    log(`switchyard ${targets.gatewayUrl} (pid ${targets.gateway.pid}), bare proxy ${targets.bareUrl}, upstream ${targets.upstreamUrl}` +
      (targets.pinning ? `; targets on CPU ${targets.pinning.target}, load on CPU ${targets.pinning.load}` : '; no CPU pinning'));
    const selected = WORKLOADS.filter((w) => options.workloads.includes(w.id));
    const results: WorkloadResult[] = [];
    for (const w of selected) {
      const bareProbe = await probe(targets.bareUrl!, w.bare());
      if (!bareProbe.ok) throw new Error(`the bare proxy failed the ${w.id} workload (${bareProbe.note}): the harness is broken`);
      const gatewayProbe = await probe(targets.gatewayUrl, w.gateway(targets.key));
      const entry: WorkloadResult = { id: w.id, title: w.title, stream: w.stream, served: gatewayProbe.ok, rounds: [] };
      entry.probe = {
        gatewayBytes: gatewayProbe.bytes,
        bareBytes: bareProbe.bytes,
        gatewayEvents: gatewayProbe.events,
        bareEvents: bareProbe.events,
        gatewayFirstOverheadUs: gatewayProbe.overheadUs,
      };
      if (!gatewayProbe.ok) {
        // chat is served today: its failure is a broken harness or gateway, not a missing route.
        if (w.id === 'chat' || w.id === 'chat-stream') throw new Error(`Switchyard failed the ${w.id} workload (${gatewayProbe.note})`);
        entry.note = `not served yet (${gatewayProbe.note})`;
        log(`${w.id}: ${entry.note}`);
      }
      results.push(entry);
    }

    for (let r = 1; r <= options.rounds; r++) {
      for (const entry of results.filter((e) => e.served)) {
        const w = WORKLOADS.find((k) => k.id === entry.id)!;
        // Both targets in one round, so they see the same conditions; the order flips every round
        // (A B, B A, A B ...), so a machine that speeds up or slows down steadily favours neither.
        const bareFirst = r % 2 === 1;
        const first = await measureTarget(options, targets, bareFirst ? 'bare' : 'gateway', bareFirst ? w.bare() : w.gateway(targets.key));
        const second = await measureTarget(options, targets, bareFirst ? 'gateway' : 'bare', bareFirst ? w.gateway(targets.key) : w.bare());
        const [bare, gateway] = bareFirst ? [first, second] : [second, first];
        const { bare: bareSeq, gateway: gatewaySeq } = await sequentialPair(options, targets, w);
        const measurement = (m: typeof bare, seq: SequentialResult): TargetMeasurement => ({
          cannon: m.cannon,
          sequential: seq,
          rssAfterMB: m.rssAfterMB,
          targetCpuPct: m.cannonCpu,
          upstreamCpuPct: m.upstreamCpu,
        });
        const roundResult: RoundResult = {
          round: r,
          bare: measurement(bare, bareSeq),
          gateway: measurement(gateway, gatewaySeq),
          ratio: round(gateway.cannon.rps / bare.cannon.rps, 3),
          addedUs: round(gatewaySeq.p50Us - bareSeq.p50Us, 1),
          ttfbAddedUs: w.stream ? round(gatewaySeq.ttfbP50Us - bareSeq.ttfbP50Us, 1) : null,
        };
        entry.rounds.push(roundResult);
        log(
          `round ${r}/${options.rounds} ${w.id}: gateway ${Math.round(gateway.cannon.rps)} req/s, bare ${Math.round(bare.cannon.rps)} req/s ` +
            `(${ratioText(roundResult.ratio)}); c=1 ${gatewaySeq.p50Us} vs ${bareSeq.p50Us} µs; RSS ${gateway.rssAfterMB} MB`,
        );
      }
    }
    for (const entry of results) if (entry.served) entry.summary = summarize(WORKLOADS.find((k) => k.id === entry.id)!, entry.rounds);

    const memory = memoryOf(targets.gateway.pid);
    const rssAfterAllMB = memory ? round(memory.rss / MB, 1) : NaN;
    const bench: BenchResults = {
      kind: 'bench',
      version: 1,
      date: date.toISOString(),
      mode: options.mode,
      commit: commit(),
      options: {
        durationS: options.durationS,
        warmupS: options.warmupS,
        rounds: options.rounds,
        connections: options.connections,
        sequential: options.sequential,
        sequentialWarmup: options.sequentialWarmup,
        sequentialTurn: SEQUENTIAL_TURN,
        sequentialClient: options.sequentialClient,
      },
      machine: machine(targets.pinning, loadavgBefore),
      gateway: {
        logLevel: LOG_LEVEL,
        env: START.env,
        nodeArgs: START.nodeArgs,
        plugins: await defaultPipeline(),
        key: keyDescription(options.budget),
        rssAtStartMB: targets.rssAtStartMB,
        rssAfterAllMB,
        rssPeakMB: memory ? round(memory.peak / MB, 1) : NaN,
      },
      workloads: results,
      budget: budgetChecks(results, rssAfterAllMB),
    };
    const file = writeResults(options, date, options.mode === 'full' ? '' : `-${options.mode}`, bench);
    return { file, results: bench };
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await stopTargets(targets, options);
  }
}

export async function runSoak(options: Options): Promise<{ file: string; results: SoakResults }> {
  const durationS = options.soakS!;
  const date = new Date();
  const targets = await startTargets(options, false);
  const stopOnSignal = () => void stopTargets(targets, options).then(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    // Every workload the gateway serves, in turn on each connection.
    const calls: HttpCall[] = [];
    const ids: WorkloadId[] = [];
    for (const w of WORKLOADS.filter((k) => options.workloads.includes(k.id))) {
      const p = await probe(targets.gatewayUrl, w.gateway(targets.key));
      if (p.ok) {
        calls.push(w.gateway(targets.key));
        ids.push(w.id);
      } else log(`${w.id}: not served yet (${p.note}), left out of the soak`);
    }
    if (calls.length === 0) throw new Error('the gateway serves none of the workloads');
    const sampleEveryS = durationS >= 60 ? 5 : 1;
    const samples: Array<{ t: number; rssMB: number }> = [];
    const started = Date.now();
    const sample = () => {
      const memory = memoryOf(targets.gateway.pid);
      if (memory) samples.push({ t: round((Date.now() - started) / 1000, 1), rssMB: round(memory.rss / MB, 2) });
    };
    sample();
    const timer = setInterval(sample, sampleEveryS * 1000);
    log(`soak: ${durationS} s of ${ids.join(' + ')} at ${options.connections} connections, RSS every ${sampleEveryS} s`);
    let load: CannonResult;
    try {
      const spec: LoadSpec = { mode: 'cannon', url: targets.gatewayUrl, requests: calls, connections: options.connections, durationS, warmupS: 0 };
      load = (await runLoadProcess<CannonResult>(spec, targets.pinning, [], durationS * 2000 + 60_000)).result;
    } finally {
      clearInterval(timer);
    }
    sample();
    const verdict = soakVerdict(samples, durationS);
    const results: SoakResults = {
      kind: 'soak',
      version: 1,
      date: date.toISOString(),
      commit: commit(),
      options: { durationS, connections: options.connections, sampleEveryS },
      machine: machine(targets.pinning, os.loadavg()),
      workloads: ids,
      load,
      samples,
      rssStartMB: samples[0]?.rssMB ?? NaN,
      rssEndMB: samples[samples.length - 1]?.rssMB ?? NaN,
      rssMaxMB: Math.max(...samples.map((s) => s.rssMB)),
      verdict,
      gateway: { env: START.env, nodeArgs: START.nodeArgs },
    };
    const file = writeResults(options, date, '-soak', results);
    return { file, results };
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await stopTargets(targets, options);
  }
}

export async function main(argv: string[]): Promise<number> {
  let options: Options;
  try {
    options = parseOptions(argv);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    return 2;
  }
  if (options.history) {
    const { readHistory, renderHistory } = await import('./history.js');
    let history: ReturnType<typeof readHistory>;
    try {
      history = readHistory(options.out);
    } catch (error) {
      process.stderr.write(`--history: cannot read the results folder ${options.out} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})\n`);
      return 2;
    }
    const prefix = path.relative(path.join(repoRoot, 'docs'), options.out).split(path.sep).join('/');
    process.stdout.write(`${renderHistory(history, prefix ? `${prefix}/` : '')}\n`);
    return 0;
  }
  if (options.compare) {
    const { runCompare } = await import('./compare.js');
    const { file, text } = await runCompare(options, options.compare);
    process.stdout.write(`${text}\n\nResults: ${path.relative(process.cwd(), file) || file}\n`);
    return 0;
  }
  if (options.perf) {
    const { perfMissing, runPerf } = await import('./perf.js');
    const missing = perfMissing();
    if (missing) {
      process.stderr.write(`${missing}\n`);
      return 2;
    }
    const { file, text } = await runPerf(options, options.perf);
    process.stdout.write(`${text}\n\nResults: ${path.relative(process.cwd(), file) || file}\n`);
    return 0;
  }
  if (options.soakS !== undefined) {
    const { file, results } = await runSoak(options);
    process.stdout.write(`${renderSoak(results)}\n\nResults: ${path.relative(process.cwd(), file) || file}\n`);
    return 0;
  }
  const { file, results } = await runBench(options);
  process.stdout.write(`${renderBench(results)}\n\nResults: ${path.relative(process.cwd(), file) || file}\n`);
  return 0;
}

if (isMain(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
