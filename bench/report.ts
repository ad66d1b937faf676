/** The benchmark's results file shape and its markdown rendering. */
import type { CannonResult, SequentialResult } from './load.js';
import type { SoakVerdict } from './stats.js';
import type { WorkloadId } from './workloads.js';

export interface TargetMeasurement {
  cannon: CannonResult;
  sequential: SequentialResult;
  /** The target's VmRSS right after its load, MB. */
  rssAfterMB: number;
  /** CPU the target used during the measured load, % of one core. */
  targetCpuPct: number | null;
  upstreamCpuPct: number | null;
}

export interface RoundResult {
  round: number;
  bare: TargetMeasurement;
  gateway: TargetMeasurement;
  /** gateway req/s ÷ bare req/s, this round. */
  ratio: number;
  /** Concurrency 1: gateway median − bare median, µs. */
  addedUs: number;
  /** Concurrency 1: gateway − bare median time to the first body byte, µs (streams). */
  ttfbAddedUs: number | null;
}

export interface WorkloadSummary {
  gatewayRps: number;
  bareRps: number;
  ratio: number;
  gatewayP50Ms: number;
  gatewayP99Ms: number;
  bareP50Ms: number;
  bareP99Ms: number;
  gatewayC1Us: number;
  bareC1Us: number;
  addedUs: number;
  gatewayTtfbUs: number | null;
  bareTtfbUs: number | null;
  ttfbAddedUs: number | null;
  /** What the gateway says it added (x-switchyard-overhead-ms), median, µs. */
  selfReportedOverheadUs: number | null;
  gatewayRssMB: number;
  gatewayCpuPct: number | null;
  bareCpuPct: number | null;
  /**
   * CPU one call cost each target under the load, µs (its CPU share over its throughput). The
   * bare proxy's figure says how fast the machine was in this run: runs on different machines,
   * or on one VM whose speed changes, are compared by it.
   */
  gatewayCpuUsPerCall: number | null;
  bareCpuUsPerCall: number | null;
  /** The load generator's and the upstream's CPU during the bare proxy's load (their busiest). */
  loadCpuPct: number | null;
  upstreamCpuPct: number | null;
  /** Non-2xx answers and errors over every measurement of this workload (should be 0). */
  failures: number;
}

export interface WorkloadResult {
  id: WorkloadId;
  title: string;
  stream: boolean;
  served: boolean;
  /** Why it was not measured ("not served yet: 404 not_found"). */
  note?: string;
  /** Response bytes per call (gateway, bare), and SSE events per stream. */
  probe?: {
    gatewayBytes: number;
    bareBytes: number;
    gatewayEvents?: number;
    bareEvents?: number;
    /**
     * The gateway's x-switchyard-overhead-ms on the first call of this workload since it started
     * (µs): the workloads go in order, so it includes V8 compiling, on that call, the code no
     * earlier workload ran. Absent in results from before it was recorded.
     */
    gatewayFirstOverheadUs?: number;
  };
  rounds: RoundResult[];
  summary?: WorkloadSummary;
}

/** What a run's budget check of a workload's throughput is called (`BudgetCheck.what`). */
export function throughputCheck(title: string): string {
  return `${title}: throughput vs bare proxy`;
}

/** The throughput a workload must reach against the bare proxy (issue 5): 0.8x streamed, 0.6x not. */
export function throughputTarget(stream: boolean): number {
  return stream ? 0.8 : 0.6;
}

export interface BudgetCheck {
  what: string;
  budget: string;
  measured: string;
  met: boolean | null;
}

export interface Machine {
  nproc: number;
  cpuModel: string;
  node: string;
  kernel: string;
  memTotalMB: number;
  loadavgBefore: number[];
  loadavgAfter: number[];
  pinning: { target: number; load: number } | null;
}

/**
 * Where the concurrency-1 client runs: in the fake upstream's process and event loop, or in a
 * load process of its own on the same CPU (see sequentialPair in run.ts).
 */
export type SequentialClient = 'upstream' | 'own-process';

/** How long and how hard each measurement runs (the command line's, recorded in every results file). */
export interface MeasureOptions {
  durationS: number;
  warmupS: number;
  rounds: number;
  connections: number;
  sequential: number;
  sequentialWarmup: number;
}

export interface BenchResults {
  kind: 'bench';
  version: 1;
  date: string;
  mode: 'full' | 'quick' | 'custom';
  commit: string;
  options: MeasureOptions & {
    /** Concurrency-1 requests per target in a row (the targets take turns); absent in results from before turns. */
    sequentialTurn?: number;
    /** Where the concurrency-1 client ran (see sequentialPair in run.ts); absent in results from before it could run in the upstream's process (it had a process of its own). */
    sequentialClient?: SequentialClient;
  };
  machine: Machine;
  /** `env`, `nodeArgs`: what `npm start` sets for the gateway and gives node, given here too (older results have neither or no `nodeArgs`). */
  gateway: { logLevel: string; env?: Record<string, string>; nodeArgs?: string[]; plugins: string; key: string; rssAtStartMB: number; rssAfterAllMB: number; rssPeakMB: number };
  workloads: WorkloadResult[];
  budget: BudgetCheck[];
}

export interface SoakResults {
  kind: 'soak';
  version: 1;
  date: string;
  commit: string;
  options: { durationS: number; connections: number; sampleEveryS: number };
  machine: Machine;
  workloads: WorkloadId[];
  load: CannonResult;
  samples: Array<{ t: number; rssMB: number }>;
  rssStartMB: number;
  rssEndMB: number;
  rssMaxMB: number;
  verdict: SoakVerdict;
  /** How the gateway was started (absent in files written before it was recorded). */
  gateway?: Pick<BenchResults['gateway'], 'env' | 'nodeArgs'>;
}

/** A figure for a table: grouped thousands, `digits` decimals, '–' when there is none. */
export const n = (value: number | null | undefined, digits = 0): string =>
  value === null || value === undefined || !Number.isFinite(value) ? '–' : value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
/**
 * A throughput ratio as every table and line prints it: two decimals, rounded from the shortest
 * decimal form (0.615 reads 0.62x). When a budget's verdict would read the other way than those
 * two decimals suggest (0.5951 shown as 0.60x but missed), more are printed (0.595x).
 */
export function ratioText(value: number, target?: number): string {
  let digits = 2;
  let text = n(value, digits);
  if (target !== undefined) {
    while (digits < 6 && Number(text) >= target !== value >= target) text = n(value, ++digits);
  }
  return `${text}x`;
}
/** A difference for a table: its sign always written ('+' or '−'), whole numbers. */
export const signed = (value: number | null | undefined): string =>
  value === null || value === undefined || !Number.isFinite(value) ? '–' : `${value >= 0 ? '+' : '−'}${n(Math.abs(value))}`;

/** The main table: one row per workload; not served ones say so. */
export function markdownTable(results: BenchResults): string {
  const head =
    '| workload | gateway req/s | bare req/s | ratio | gateway p50 / p99 ms | bare p50 / p99 ms | c=1 gateway µs | c=1 bare µs | c=1 added µs | TTFB added µs | gateway RSS MB |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = results.workloads.map((w) => {
    const s = w.summary;
    if (!w.served || !s) return `| ${w.title} | ${w.note ?? 'not served yet'} | | | | | | | | | |`;
    return (
      `| ${w.title} | ${n(s.gatewayRps)} | ${n(s.bareRps)} | ${ratioText(s.ratio)} | ${n(s.gatewayP50Ms)} / ${n(s.gatewayP99Ms)} | ` +
      `${n(s.bareP50Ms)} / ${n(s.bareP99Ms)} | ${n(s.gatewayC1Us)} | ${n(s.bareC1Us)} | ${signed(s.addedUs)} | ` +
      `${w.stream ? signed(s.ttfbAddedUs) : '–'} | ${n(s.gatewayRssMB)} |`
    );
  });
  return [head, ...rows].join('\n');
}

/** CPU one call cost a target during its load, µs: its share of a core over the calls a second it answered. */
export function cpuUsPerCall(t: TargetMeasurement): number | null {
  if (t.targetCpuPct === null || !(t.cannon.rps > 0)) return null;
  return (t.targetCpuPct / 100) * 1e6 / t.cannon.rps;
}

/** Where the CPU went during the load: a target well under 100% was not the bottleneck. */
export function conditionsTable(results: BenchResults): string {
  const head =
    '| workload | gateway CPU % | bare proxy CPU % | gateway CPU µs a call | bare proxy CPU µs a call | load generator CPU % (bare proxy run) | upstream CPU % (bare proxy run) | gateway self-reported overhead µs (c=1) | failed requests |\n' +
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|';
  const rows = results.workloads
    .filter((w) => w.served && w.summary)
    .map((w) => {
      const s = w.summary!;
      return `| ${w.title} | ${n(s.gatewayCpuPct)} | ${n(s.bareCpuPct)} | ${n(s.gatewayCpuUsPerCall)} | ${n(s.bareCpuUsPerCall)} | ${n(s.loadCpuPct)} | ${n(s.upstreamCpuPct)} | ${n(s.selfReportedOverheadUs)} | ${s.failures} |`;
    });
  return [head, ...rows].join('\n');
}

/**
 * A CPU this busy is all but full. The load side (the load generator and the upstream, pinned
 * together to one CPU) at or past it, while the bare proxy is below it on its own CPU, set the
 * bare proxy's rate: the bare proxy had time to spare and was not sent more.
 */
export const LOAD_BOUND_PCT = 90;

/**
 * What to say of a workload whose bare-proxy rounds were limited by the load side (its streams,
 * on a 2-CPU machine): the bare proxy's rate is then what the load side could drive, so the
 * throughput ratio is an upper bound, and the CPU each target spent a call says more.
 */
export function loadBoundNote(title: string, s: WorkloadSummary): string | undefined {
  if (s.loadCpuPct === null || s.upstreamCpuPct === null) return undefined;
  const loadSide = s.loadCpuPct + s.upstreamCpuPct;
  if (loadSide < LOAD_BOUND_PCT || s.bareCpuPct === null || s.bareCpuPct >= LOAD_BOUND_PCT) return undefined;
  const byCpu = s.gatewayCpuUsPerCall && s.bareCpuUsPerCall ? s.bareCpuUsPerCall / s.gatewayCpuUsPerCall : null;
  return (
    `${title}: while the bare proxy was loaded, the load generator and the upstream used ${n(loadSide)}% of their CPU ` +
    `(the bare proxy ${n(s.bareCpuPct)}% of its own), so the bare proxy's rate is what the load side could drive, not its own limit, ` +
    `and the ratio ${ratioText(s.ratio)} is an upper bound` +
    (byCpu === null ? '.' : `; by CPU a call the gateway is at ${ratioText(byCpu)} of the bare proxy (${n(s.gatewayCpuUsPerCall)} against ${n(s.bareCpuUsPerCall)} µs).`)
  );
}

/** loadBoundNote for every workload measured, when the load side had a CPU of its own to fill. */
function loadBoundNotes(results: BenchResults): string[] {
  if (!results.machine.pinning) return [];
  const notes: string[] = [];
  for (const w of results.workloads) {
    const note = w.served && w.summary ? loadBoundNote(w.title, w.summary) : undefined;
    if (note) notes.push(note);
  }
  return notes.length > 0 ? ['', ...notes] : [];
}

export function budgetTable(results: BenchResults): string {
  const head = '| budget | target | measured | |\n|---|---|---|---|';
  const rows = results.budget.map((b) => `| ${b.what} | ${b.budget} | ${b.measured} | ${b.met === null ? 'not measured' : b.met ? 'met' : '**missed**'} |`);
  return [head, ...rows].join('\n');
}

export function describeRun(results: BenchResults): string {
  const m = results.machine;
  const o = results.options;
  const started = startedAs(results.gateway);
  return (
    `${results.date}, commit ${results.commit}; ${m.nproc} CPUs (${m.cpuModel}), Node ${m.node}, Linux ${m.kernel}; ` +
    `${o.rounds} round(s) × ${o.durationS} s at ${o.connections} connections (warm-up ${o.warmupS} s), ` +
    `concurrency 1: ${o.sequential} requests after ${o.sequentialWarmup}${o.sequentialTurn ? `, each target in turns of ${o.sequentialTurn}` : ''}` +
    `${o.sequentialClient === 'upstream' ? ", the client in the upstream's process" : ''}; ` +
    (m.pinning ? `targets on CPU ${m.pinning.target}, load and upstream on CPU ${m.pinning.load}; ` : 'no CPU pinning; ') +
    `load average before ${m.loadavgBefore.map((v) => v.toFixed(2)).join(' ')}, after ${m.loadavgAfter.map((v) => v.toFixed(2)).join(' ')}; ` +
    `gateway log level ${results.gateway.logLevel}` +
    (started ? `, ${started}` : '') +
    '.'
  );
}

/** How the gateway was started, as `npm start` starts it: its environment and node's flags (empty when neither is known). */
function startedAs(gateway: Pick<BenchResults['gateway'], 'env' | 'nodeArgs'>): string {
  const parts = [
    ...Object.entries(gateway.env ?? {}).map(([k, v]) => `${k}=${v}`),
    ...(gateway.nodeArgs ?? []).map((flag) => `node ${flag}`),
  ];
  return parts.length > 0 ? `started as npm start starts it (${parts.join(', ')})` : '';
}

export function renderBench(results: BenchResults): string {
  return [
    `### Switchyard vs bare proxy (medians of ${results.options.rounds} interleaved round(s))`,
    '',
    describeRun(results),
    '',
    markdownTable(results),
    '',
    conditionsTable(results),
    ...loadBoundNotes(results),
    '',
    budgetTable(results),
    '',
    `Gateway RSS: ${n(results.gateway.rssAtStartMB)} MB once listening, ${n(results.gateway.rssAfterAllMB)} MB after all the load ` +
      `(peak ${n(results.gateway.rssPeakMB)} MB). Key: ${results.gateway.key}.`,
    ...firstCalls(results),
  ].join('\n');
}

/** The gateway's overhead on the first call of each workload, before anything was warm. */
function firstCalls(results: BenchResults): string[] {
  const seen = results.workloads.filter((w) => typeof w.probe?.gatewayFirstOverheadUs === 'number');
  if (seen.length === 0) return [];
  const list = seen.map((w) => `${w.title} ${(w.probe!.gatewayFirstOverheadUs! / 1000).toFixed(1)} ms`).join(', ');
  return [
    '',
    `First call of each workload after the gateway started (its x-switchyard-overhead-ms, in this order; V8 compiles on a call the code no call ran before): ${list}.`,
  ];
}

export function renderSoak(results: SoakResults): string {
  const v = results.verdict;
  const started = results.gateway ? startedAs(results.gateway) : '';
  return [
    `### Soak: ${results.options.durationS} s of constant load (${results.workloads.join(', ')}), ${results.options.connections} connections`,
    '',
    `${results.date}, commit ${results.commit}; ${results.machine.nproc} CPUs (${results.machine.cpuModel}), Node ${results.machine.node}` +
      `${started ? `; gateway ${started}` : ''}.`,
    '',
    '| req/s | failed requests | RSS start MB | RSS max MB | RSS end MB | 2nd quarter MB | last quarter MB | growth MB | slope of the last half MB/min | memory flat? |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    `| ${n(results.load.rps)} | ${results.load.non2xx + results.load.errors} | ${n(results.rssStartMB)} | ${n(results.rssMaxMB)} | ${n(results.rssEndMB)} | ` +
      `${n(v.secondQuarterMB)} | ${n(v.lastQuarterMB)} | ${signed(v.growthMB)} | ${n(v.lastHalfSlopeMBPerMin, 1)} | ` +
      `${v.flat ? 'yes' : '**no**'} |`,
    '',
    `Flat means: ${v.rule} (here ${n(v.toleranceMB)} MB).`,
  ].join('\n');
}
