/**
 * The load side of the benchmark, run as its own process (pinned away from the target):
 *
 * - `cannon`: autocannon at N connections for D seconds after a warm-up, req/s and latency;
 * - `sequential`: one request at a time over one keep-alive connection (undici), timed with
 *   process.hrtime.bigint() to the microsecond: total latency, time to the first body byte, and
 *   the gateway's own `x-switchyard-overhead-ms` when it sends one. With several targets, each has
 *   its own connection and they take turns (`turn` requests each, A B A B ...), so that a slow
 *   spell of the machine falls on all of them alike instead of on whichever was being measured.
 *
 * Usage: `node dist/bench/load.js '<json spec>'`. Prints `MEASURE_START` and `MEASURE_END` around
 * the measured part (the parent reads the target's CPU time there) and `RESULT <json>` last.
 */
import autocannon from 'autocannon';
import { Client } from 'undici';
import { cpuSeconds, isMain, ticksPerSecond } from './proc.js';
import { mean, percentile, round } from './stats.js';
import type { HttpCall } from './workloads.js';

export interface CannonSpec {
  mode: 'cannon';
  url: string;
  /** Sent in turn on each connection (one entry: the same request every time). */
  requests: HttpCall[];
  connections: number;
  durationS: number;
  warmupS: number;
  /** Requests a second over all connections (autocannon's `overallRate`); absent: as fast as the target answers. */
  overallRate?: number;
  /**
   * Processes to let settle between the warm-up and the measured part (see `settle`): the target,
   * whose work left over from the warm-up would otherwise be counted in the measurement.
   */
  settle?: number[];
}

export interface SequentialSpec {
  mode: 'sequential';
  /** Measured in turns when there are several; each gets `warmup` then `count` requests. */
  targets: Array<{ url: string; call: HttpCall }>;
  warmup: number;
  count: number;
  /** Requests per target per turn (default 50). */
  turn?: number;
}

export type LoadSpec = CannonSpec | SequentialSpec;

/** One result per target of a sequential spec, in its order. */
export interface SequentialResults {
  mode: 'sequential';
  results: SequentialResult[];
  /** How many requests each target got in a row. */
  turn: number;
  /** CPU % of the process the client ran in; in the fake upstream's (the benchmark's default) it includes serving the calls. */
  loadCpuPct: number;
}

export interface CannonResult {
  mode: 'cannon';
  rps: number;
  totalRequests: number;
  durationS: number;
  /** autocannon's latency histogram is in whole milliseconds. */
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  meanMs: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  bytesPerSec: number;
  /** CPU the load process itself used during the measured part, % of one core. */
  loadCpuPct: number;
  /** How long the processes of `settle` took to go idle after the warm-up, ms (absent: none to wait for). */
  settledMs?: number;
}

export interface SequentialResult {
  mode: 'sequential';
  count: number;
  p50Us: number;
  p90Us: number;
  p99Us: number;
  meanUs: number;
  /** Until the response headers. */
  headersP50Us: number;
  /** Until the first byte of the body (for a stream: the first event). */
  ttfbP50Us: number;
  ttfbP99Us: number;
  /** Median of the target's x-switchyard-overhead-ms, in µs (null when it sends none). */
  selfReportedOverheadP50Us: number | null;
  bodyBytes: number;
  non2xx: number;
  loadCpuPct: number;
}

function cpuPct(startCpu: NodeJS.CpuUsage, startedAt: bigint): number {
  const used = process.cpuUsage(startCpu);
  const wallUs = Number(process.hrtime.bigint() - startedAt) / 1000;
  return round(((used.user + used.system) / wallUs) * 100, 1);
}

export function cannonOptions(spec: CannonSpec, durationS: number): autocannon.Options {
  const first = spec.requests[0]!;
  const base: autocannon.Options = {
    url: spec.url,
    connections: spec.connections,
    duration: durationS,
    pipelining: 1,
    timeout: 30,
    ...(spec.overallRate ? { overallRate: spec.overallRate } : {}),
  };
  if (spec.requests.length === 1) return { ...base, method: first.method, headers: first.headers, body: first.body };
  return { ...base, requests: spec.requests.map((r) => ({ method: r.method, path: r.path, headers: r.headers, body: r.body })) };
}

/** How often `settle` reads the processes' CPU time, and over what window it calls one idle. */
const SETTLE_WINDOW_MS = 100;
/** The longest `settle` waits: a target busy for longer than this is measured as it is. */
const SETTLE_MAX_MS = 5_000;

/**
 * Wait until every process in `pids` is idle: its CPU time grew by at most one clock tick over a
 * window (10 ms in 100 ms with Linux's usual 100 ticks a second), or `maxMs` passed. Returns the
 * ms waited.
 *
 * The warm-up's end cuts the calls in flight. The gateway meters each of them, and the first
 * count of a process builds its tokenizer's tables (90-125 ms of CPU for `o200k_base`), while
 * the garbage and the rows of the warm-up are still being dealt with. Without this wait, that
 * work fell into the first second of the measurement.
 */
export async function settle(
  pids: readonly number[],
  read: (pid: number) => number | undefined = cpuSeconds,
  windowMs = SETTLE_WINDOW_MS,
  maxMs = SETTLE_MAX_MS,
  tick = 1 / ticksPerSecond(),
): Promise<number> {
  const started = Date.now();
  let last = pids.map(read);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const now = pids.map(read);
    const idle = now.every((cpu, i) => cpu === undefined || last[i] === undefined || cpu - last[i]! <= tick * 1.5);
    const waited = Date.now() - started;
    if (idle || waited >= maxMs) return waited;
    last = now;
  }
}

async function cannon(spec: CannonSpec): Promise<CannonResult> {
  // A single request: autocannon takes its path from the URL.
  const url = spec.requests.length === 1 ? `${spec.url}${spec.requests[0]!.path}` : spec.url;
  let settledMs: number | undefined;
  if (spec.warmupS > 0) {
    await autocannon(cannonOptions({ ...spec, url }, spec.warmupS));
    if (spec.settle?.length) settledMs = await settle(spec.settle);
  }
  process.stdout.write('MEASURE_START\n');
  const startCpu = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  const result = await autocannon(cannonOptions({ ...spec, url }, spec.durationS));
  const loadCpuPct = cpuPct(startCpu, startedAt);
  process.stdout.write('MEASURE_END\n');
  const seconds = Number(process.hrtime.bigint() - startedAt) / 1e9;
  return {
    mode: 'cannon',
    // Completed 2xx-or-not responses per second over the run (autocannon's average of its
    // per-second samples is the same figure, less exact for a 1 s run).
    rps: round(result.requests.total / seconds, 1),
    totalRequests: result.requests.total,
    durationS: round(seconds, 3),
    p50Ms: result.latency.p50,
    p90Ms: result.latency.p90,
    p99Ms: result.latency.p99,
    meanMs: round(result.latency.mean, 3),
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    bytesPerSec: Math.round(result.throughput.average),
    loadCpuPct,
    ...(settledMs === undefined ? {} : { settledMs }),
  };
}

/** The timings of one target of a sequential measurement, as they are collected. */
class SequentialTimings {
  readonly totals: number[] = [];
  readonly headersAt: number[] = [];
  readonly firstByte: number[] = [];
  readonly overheads: number[] = [];
  non2xx = 0;
  bodyBytes = 0;
  done = 0;

  constructor(
    readonly client: Client,
    readonly call: HttpCall,
  ) {}

  /** One request, timed; `measured` false for the warm-up. */
  async one(measured: boolean): Promise<void> {
    const { method, path, headers, body } = this.call;
    const t0 = process.hrtime.bigint();
    const res = await this.client.request({ method, path, headers, body });
    const th = process.hrtime.bigint();
    let first: bigint | undefined;
    let bytes = 0;
    for await (const chunk of res.body) {
      first ??= process.hrtime.bigint();
      bytes += (chunk as Buffer).length;
    }
    const t1 = process.hrtime.bigint();
    if (!measured) return;
    if (res.statusCode < 200 || res.statusCode >= 300) this.non2xx++;
    this.totals.push(Number(t1 - t0) / 1000);
    this.headersAt.push(Number(th - t0) / 1000);
    this.firstByte.push(Number((first ?? t1) - t0) / 1000);
    const overhead = res.headers['x-switchyard-overhead-ms'];
    if (typeof overhead === 'string') this.overheads.push(Number(overhead) * 1000);
    this.bodyBytes = bytes;
  }

  result(loadCpuPct: number): SequentialResult {
    return {
      mode: 'sequential',
      count: this.totals.length,
      p50Us: round(percentile(this.totals, 50)),
      p90Us: round(percentile(this.totals, 90)),
      p99Us: round(percentile(this.totals, 99)),
      meanUs: round(mean(this.totals)),
      headersP50Us: round(percentile(this.headersAt, 50)),
      ttfbP50Us: round(percentile(this.firstByte, 50)),
      ttfbP99Us: round(percentile(this.firstByte, 99)),
      selfReportedOverheadP50Us: this.overheads.length > 0 ? round(percentile(this.overheads, 50)) : null,
      bodyBytes: this.bodyBytes,
      non2xx: this.non2xx,
      loadCpuPct,
    };
  }
}

/** Requests of every target in turns: `turn` of the first, `turn` of the second, ... until each has had `total`. */
async function inTurns(timings: SequentialTimings[], total: number, turn: number, measured: boolean): Promise<void> {
  for (const t of timings) t.done = 0;
  while (timings.some((t) => t.done < total)) {
    for (const t of timings) {
      for (let i = 0; i < turn && t.done < total; i++, t.done++) await t.one(measured);
    }
  }
}

/** `mark` is told where the measured part begins and ends (the parent reads the targets' CPU there). */
export async function sequential(spec: SequentialSpec, mark: (line: string) => void = (line) => process.stdout.write(`${line}\n`)): Promise<SequentialResults> {
  const turn = Math.max(1, spec.turn ?? 50);
  const timings = spec.targets.map((t) => new SequentialTimings(new Client(t.url, { pipelining: 1, keepAliveTimeout: 60_000 }), t.call));
  try {
    await inTurns(timings, spec.warmup, turn, false);
    mark('MEASURE_START');
    const startCpu = process.cpuUsage();
    const startedAt = process.hrtime.bigint();
    await inTurns(timings, spec.count, turn, true);
    const loadCpuPct = cpuPct(startCpu, startedAt);
    mark('MEASURE_END');
    return { mode: 'sequential', results: timings.map((t) => t.result(loadCpuPct)), turn, loadCpuPct };
  } finally {
    await Promise.all(timings.map((t) => t.client.close()));
  }
}

export async function runLoad(spec: LoadSpec): Promise<CannonResult | SequentialResults> {
  return spec.mode === 'cannon' ? cannon(spec) : sequential(spec);
}

if (isMain(import.meta.url)) {
  const spec = JSON.parse(process.argv[2] ?? '{}') as LoadSpec;
  try {
    const result = await runLoad(spec);
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
  } catch (error) {
    process.stderr.write(`load failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  }
}
