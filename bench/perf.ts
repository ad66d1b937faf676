/**
 * `npm run bench -- --perf DIR`: where each target's CPU goes, kernel included, with the bare
 * proxy held to the gateway's rate.
 *
 * `--cpu-prof` sees the gateway's JavaScript and what it calls, nothing of the kernel, and
 * nothing of the bare proxy. This mode profiles both processes whole with Linux `perf record -g`
 * (node started with `--perf-basic-prof`, so compiled JavaScript has names): first the gateway
 * at its own limit, then the bare proxy with the load generator held to the rate the gateway
 * reached. At the same rate the load side does the same work for both, so what differs is the
 * targets' own (docs/performance.md, "the gap, function by function, at the same rate").
 *
 * Each sample is charged to an owner: the first JavaScript function on its stack, by where its
 * code lives (a native call such as `JSON.parse` or `writev` counts for the function that made
 * it; V8's inlined functions count for the one they were inlined into); garbage collection; or,
 * with no JavaScript on the stack, the event loop or other native code. JavaScript is named from
 * node's symbol map as it stands once the profiled seconds are over, the newest line winning where
 * V8 reused an address (see JitSymbols), not as perf names it. Shares of the samples
 * become µs of CPU a call through the CPU the process used over the profiled seconds (from
 * /proc), divided by the calls it answered then. The `perf.data` files stay in DIR, with the
 * symbol maps node wrote (`perf-PID.map`: copied back to /tmp, they let `perf script` read the
 * data again, with perf's own naming).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { CannonResult, CannonSpec } from './load.js';
import { eachLine, type Pinning } from './proc.js';
import { commit, machine, runLoadProcess, startTargets, stopTargets, writeResults, type Options } from './run.js';
import { n, type Machine } from './report.js';
import { round } from './stats.js';
import { WORKLOADS } from './workloads.js';

/** perf's sampling frequency, samples a second of CPU time (999: not in step with a timer of the targets). */
export const PERF_HZ = 999;

/** One frame of a `perf script -F ip,sym,dso` call chain. */
export interface PerfFrame {
  /** The address sampled (the leaf) or returned to (its callers). */
  ip: number;
  sym: string;
  dso: string;
}

/** `7f93002d192b JS:*clearBuffer node:internal/streams/writable:744:21 (/tmp/perf-1.map)`: the address, the symbol and the object it is in. */
export function parseFrame(line: string): PerfFrame | undefined {
  const match = /^\s*([0-9a-f]+)\s+(.*?)\s+\(([^()]*)\)\s*$/.exec(line);
  // A user-space address fits in 47 bits, a kernel one is read as a double: only JIT addresses are looked up.
  return match ? { ip: parseInt(match[1]!, 16), sym: match[2]!, dso: match[3]! } : undefined;
}

/** The object perf names for code that node described in its symbol map. */
const JIT_MAP = /\/perf-\d+\.map$/;

/** Where node (`--perf-basic-prof`) writes process `pid`'s symbol map, and where perf reads it. */
const jitMapOf = (pid: number): string => `/tmp/perf-${pid}.map`;

/**
 * The names in the `perf-PID.map` node writes with `--perf-basic-prof`, each address read as the
 * code that was there last.
 *
 * node appends a line each time V8 makes code and never takes one back. When V8 frees code and
 * puts new code where it was, the map holds both, and perf names a sample after whichever of the
 * two it finds, often the dead one: a sample in node's `_unrefTimer`, on a stack that writes to a
 * socket, was named after the tokenizer's `parseRankFile`, which had been compiled at that address
 * at start-up and was long gone. Read when the profiled seconds are over, with the newest line
 * winning wherever lines overlap, every address has the name of the code there at the end; code
 * replaced during the profiled seconds themselves (V8 still compiling) is the one case it misses.
 */
export class JitSymbols {
  /** Every start and end of the map's lines, sorted: the segments between them. */
  private readonly bounds: Float64Array;
  /** Per segment, the newest line that covers it (an index into `names`), or -1. */
  private readonly owner: Int32Array;
  private readonly names: string[] = [];

  constructor(text: string) {
    const starts: number[] = [];
    const ends: number[] = [];
    for (const line of text.split('\n')) {
      const match = /^([0-9a-f]+) ([0-9a-f]+) (.+)$/.exec(line);
      if (!match) continue;
      const start = parseInt(match[1]!, 16);
      const size = parseInt(match[2]!, 16);
      if (size === 0) continue;
      starts.push(start);
      ends.push(start + size);
      this.names.push(match[3]!);
    }
    this.bounds = Float64Array.from(new Set([...starts, ...ends])).sort();
    this.owner = new Int32Array(Math.max(0, this.bounds.length - 1)).fill(-1);
    // In the file's order: a later line takes its segments from any earlier one.
    for (let i = 0; i < starts.length; i++) {
      for (let k = this.segment(starts[i]!); k < this.owner.length && this.bounds[k]! < ends[i]!; k++) this.owner[k] = i;
    }
  }

  /** The name of the code at `ip`, or undefined where the map names none. */
  lookup(ip: number): string | undefined {
    const k = this.segment(ip);
    if (k < 0 || k >= this.owner.length || ip < this.bounds[k]!) return undefined;
    const i = this.owner[k]!;
    return i === -1 ? undefined : this.names[i];
  }

  /** The segment that begins at or before `address`: the last bound not above it (-1 before the first). */
  private segment(address: number): number {
    let low = 0;
    let high = this.bounds.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (this.bounds[mid]! <= address) low = mid + 1;
      else high = mid;
    }
    return low - 1;
  }
}

const GC_SYMBOL = /Scavenger|MarkCompact|MinorMC|ConcurrentMarking|Sweeper|Heap::CollectGarbage|Heap::Scavenge|GCTracer/;
/** V8 compiling on its own threads: warming up, not serving (a profile that shows much of it began too early). */
const COMPILE_SYMBOL = /OptimizingCompileDispatcher|v8::internal::compiler::|v8::internal::maglev::|BackgroundCompileTask/;

/** Where a JavaScript frame's code lives, first match wins; plugins are named by their folder. */
const JS_OWNERS: ReadonlyArray<[RegExp, string]> = [
  [/node_modules\/undici\//, 'undici'],
  [/node_modules\/better-sqlite3\//, 'core: the store (SQLite rows, counters)'],
  [/node_modules\//, 'other packages'],
  [/\/dist\/core\/store\//, 'core: the store (SQLite rows, counters)'],
  [/\/dist\/core\/http\//, 'core: bodies, the upstream client, JSON'],
  [/\/dist\/core\//, 'core: the pipeline, the gateway, the hooks'],
  [/\/dist\/bench\//, "the bare proxy's own code"],
  [/node:(_http_|net\b|stream\b|internal\/streams\/|internal\/stream_base|internal\/http)/, "node's HTTP server, sockets and streams"],
  [/node:(events\b|timers\b|internal\/process\/|internal\/timers)/, "node's events, ticks and timers"],
  [/node:/, "node's other modules"],
];

export const GC_OWNER = 'garbage collection';
export const COMPILE_OWNER = "V8 compiling on its threads (warm-up)";
export const LOOP_OWNER = 'the event loop (no JavaScript on the stack)';
export const NATIVE_OWNER = 'other native code (no JavaScript on the stack)';

/** The owner of one sample, its frames leaf first. */
export function ownerOf(frames: readonly PerfFrame[]): string {
  const js = frames.findIndex((f) => f.sym.startsWith('JS:') && !f.sym.includes('wasm'));
  const native = js === -1 ? frames : frames.slice(0, js);
  if (native.some((f) => GC_SYMBOL.test(f.sym))) return GC_OWNER;
  if (js === -1 && frames.some((f) => COMPILE_SYMBOL.test(f.sym))) return COMPILE_OWNER;
  if (js === -1) return frames.some((f) => f.sym.startsWith('uv_') || f.sym.startsWith('uv__')) ? LOOP_OWNER : NATIVE_OWNER;
  const sym = frames[js]!.sym;
  const plugin = /\/dist\/plugins\/([^/]+)\//.exec(sym);
  if (plugin) return `plugin: ${plugin[1]}`;
  for (const [pattern, owner] of JS_OWNERS) if (pattern.test(sym)) return owner;
  return 'other JavaScript';
}

/** The samples of one `perf script` output, counted by owner as its lines are read. */
export class PerfTally {
  /** `jit`: node's symbol map as it was when the profiled seconds ended, to name its code (see JitSymbols); perf's names otherwise. */
  constructor(private readonly jit?: JitSymbols) {}

  samples = 0;
  /** Samples whose leaf is in the kernel. */
  kernel = 0;
  /** Samples with `sock_def_readable` on the stack: the kernel waking the process that reads a socket written to. */
  wakeups = 0;
  readonly owners = new Map<string, number>();
  private frames: PerfFrame[] = [];

  /** One line of `perf script -F ip,sym,dso`: a frame, or the blank line that ends a sample. */
  line(text: string): void {
    if (!text.trim()) {
      this.end();
      return;
    }
    const frame = parseFrame(text);
    if (!frame) return;
    if (this.jit && JIT_MAP.test(frame.dso)) frame.sym = this.jit.lookup(frame.ip) ?? frame.sym;
    this.frames.push(frame);
  }

  /** The sample being read is complete. */
  end(): void {
    const frames = this.frames;
    if (frames.length === 0) return;
    this.frames = [];
    this.samples++;
    if (frames[0]!.dso.includes('kernel')) this.kernel++;
    if (frames.some((f) => f.sym === 'sock_def_readable')) this.wakeups++;
    const owner = ownerOf(frames);
    this.owners.set(owner, (this.owners.get(owner) ?? 0) + 1);
  }
}

/** What one target's profile amounts to, in µs of CPU a call. */
export interface PerfProfile {
  rps: number;
  calls: number;
  cpuUsPerCall: number;
  samples: number;
  owners: Record<string, number>;
  kernelUsPerCall: number;
  wakeupUsPerCall: number;
  dataFile: string;
}

export interface PerfWorkload {
  id: string;
  title: string;
  gateway: PerfProfile;
  bare: PerfProfile;
}

export interface PerfResults {
  kind: 'perf';
  date: string;
  commit: string;
  machine: Machine;
  options: { durationS: number; warmupS: number; connections: number; hz: number };
  workloads: PerfWorkload[];
}

/** A tally as µs a call: each owner's share of the samples times the CPU a call. */
export function profileOf(tally: PerfTally, cpuSeconds: number, result: CannonResult, dataFile: string): PerfProfile {
  const cpuUsPerCall = (cpuSeconds * 1e6) / Math.max(1, result.totalRequests);
  const us = (n: number) => round((n / Math.max(1, tally.samples)) * cpuUsPerCall, 1);
  const owners: Record<string, number> = {};
  for (const [owner, n] of [...tally.owners].sort((a, b) => b[1] - a[1])) owners[owner] = us(n);
  return {
    rps: result.rps,
    calls: result.totalRequests,
    cpuUsPerCall: round(cpuUsPerCall, 1),
    samples: tally.samples,
    owners,
    kernelUsPerCall: us(tally.kernel),
    wakeupUsPerCall: us(tally.wakeups),
    dataFile,
  };
}

/** The last 2,000 characters `child` wrote to its stderr, as they are when called. */
function stderrTail(child: ChildProcess): () => string {
  let text = '';
  child.stderr!.on('data', (chunk: Buffer) => (text = `${text}${chunk.toString('utf8')}`.slice(-2000)));
  return () => text.trim();
}

/**
 * Read a perf.data file's call chains through `perf script`, line by line (a 10 s profile is tens
 * of MB of text), naming node's compiled code from its symbol map `jitMap` as it is now (see JitSymbols).
 */
function tallyFile(dataFile: string, jitMap: string): Promise<PerfTally> {
  return new Promise((resolve, reject) => {
    const tally = new PerfTally(existsSync(jitMap) ? new JitSymbols(readFileSync(jitMap, 'utf8')) : undefined);
    const script = spawn('perf', ['script', '-i', dataFile, '-F', 'ip,sym,dso'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const stderr = stderrTail(script);
    eachLine(script.stdout!, (line) => tally.line(line));
    script.once('error', reject);
    script.once('close', (code) => {
      tally.end();
      if (code === 0) resolve(tally);
      else reject(new Error(`perf script -i ${dataFile} failed (${code}): ${stderr()}`));
    });
  });
}

/** Load one target as `spec` says and profile it with perf over the measured part. */
async function profiled(options: Options, pid: number, pinning: Pinning | null, spec: CannonSpec, dataFile: string): Promise<PerfProfile> {
  let recorder: ChildProcess | undefined;
  let recorded: Promise<string> | undefined;
  let stderr = () => '';
  const around = {
    start() {
      recorder = spawn('perf', ['record', '-q', '-F', String(PERF_HZ), '-g', '-p', String(pid), '-o', dataFile], { stdio: ['ignore', 'ignore', 'pipe'] });
      stderr = stderrTail(recorder);
      // perf stops on SIGINT and writes its file; it may then end by that signal rather than exit 0.
      recorded = new Promise((resolve) => {
        recorder!.once('error', (error) => resolve(error.message));
        recorder!.once('close', (code, signal) => resolve(code === 0 || signal === 'SIGINT' ? '' : `exit ${code ?? signal}`));
      });
    },
    end() {
      recorder?.kill('SIGINT');
    },
  };
  const timeoutMs = (options.durationS + options.warmupS) * 1000 * 3 + 30_000;
  const { result, cpuSeconds } = await runLoadProcess<CannonResult>(spec, pinning, [pid], timeoutMs, around);
  const failure = await recorded;
  if (failure === undefined || failure || !existsSync(dataFile)) {
    throw new Error(`perf record failed (${failure || 'no data'}): ${stderr()} (perf needs root, or kernel.perf_event_paranoid at 1 or lower)`);
  }
  const used = cpuSeconds.get(pid);
  if (used === null || used === undefined) throw new Error('the target\'s CPU time could not be read from /proc');
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} answers were not 2xx and ${result.errors} calls failed: the profile would not be of the workload`);
  return profileOf(await tallyFile(dataFile, jitMapOf(pid)), used, result, dataFile);
}

/** Why `--perf` cannot run here (no `perf` on the PATH), or undefined when it can. */
export function perfMissing(command = 'perf'): string | undefined {
  const version = spawnSync(command, ['--version'], { encoding: 'utf8' });
  return version.status === 0 ? undefined : `--perf needs Linux perf on the PATH (Debian: apt-get install linux-perf)`;
}

/** The measurement itself; `main` has checked that perf is there (perfMissing). */
export async function runPerf(options: Options, dir: string): Promise<{ file: string; text: string }> {
  mkdirSync(dir, { recursive: true });
  const date = new Date();
  const loadavgBefore = os.loadavg();
  const targets = await startTargets(options, true, ['--perf-basic-prof']);
  const stopOnSignal = () => void stopTargets(targets, options).then(() => process.exit(130));
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  const workloads: PerfWorkload[] = [];
  try {
    for (const id of options.workloads) {
      const w = WORKLOADS.find((k) => k.id === id)!;
      const base = { mode: 'cannon' as const, connections: options.connections, durationS: options.durationS, warmupS: options.warmupS };
      const gatewaySpec: CannonSpec = { ...base, url: targets.gatewayUrl, requests: [w.gateway(targets.key)], settle: [targets.gateway.pid] };
      const gateway = await profiled(options, targets.gateway.pid, targets.pinning, gatewaySpec, path.join(dir, `${id}-gateway.perf.data`));
      process.stderr.write(`${id}: gateway ${gateway.rps} req/s, ${gateway.cpuUsPerCall} µs of CPU a call\n`);
      const bareSpec: CannonSpec = { ...base, url: targets.bareUrl!, requests: [w.bare()], overallRate: Math.max(1, Math.round(gateway.rps)), settle: [targets.bare!.pid] };
      const bare = await profiled(options, targets.bare!.pid, targets.pinning, bareSpec, path.join(dir, `${id}-bare.perf.data`));
      process.stderr.write(`${id}: bare proxy ${bare.rps} req/s, ${bare.cpuUsPerCall} µs of CPU a call\n`);
      workloads.push({ id, title: w.title, gateway, bare });
    }
  } finally {
    process.off('SIGINT', stopOnSignal);
    process.off('SIGTERM', stopOnSignal);
    await stopTargets(targets, options);
    // The symbol maps node wrote for perf go beside the perf.data files: `perf script` reads
    // /tmp/perf-PID.map, so a map copied back there lets the data be read again.
    for (const child of [targets.gateway, targets.bare]) {
      if (!child?.pid) continue;
      const map = jitMapOf(child.pid);
      if (!existsSync(map)) continue;
      copyFileSync(map, path.join(dir, path.basename(map)));
      rmSync(map, { force: true });
    }
  }
  const results: PerfResults = {
    kind: 'perf',
    date: date.toISOString(),
    commit: commit(),
    machine: machine(targets.pinning, loadavgBefore),
    options: { durationS: options.durationS, warmupS: options.warmupS, connections: options.connections, hz: PERF_HZ },
    workloads,
  };
  const file = writeResults({ ...options, out: dir }, date, '-perf', results);
  return { file, text: renderPerf(results) };
}

const fmt = (value: number) => n(value, 1);
const signed = (n: number) => `${n > 0 ? '+' : n < 0 ? '−' : ''}${fmt(Math.abs(n))}`;

export function renderPerf(results: PerfResults): string {
  const m = results.machine;
  const out = [
    '### Where each target\'s CPU goes, at the same rate (perf)',
    '',
    `${results.date}, commit ${results.commit}; ${m.nproc} CPUs (${m.cpuModel}), Node ${m.node}, Linux ${m.kernel}; ` +
      `${results.options.durationS} s profiled per target at ${results.options.hz} samples a second after ${results.options.warmupS} s of warm-up, ` +
      `${results.options.connections} connections; ` +
      (m.pinning ? `targets on CPU ${m.pinning.target}, load and upstream on CPU ${m.pinning.load}. ` : 'no CPU pinning. ') +
      'The gateway runs at its own limit; the bare proxy is held to the gateway\'s rate. µs of CPU a call, each sample charged to the first JavaScript function on its stack (see bench/perf.ts).',
  ];
  for (const w of results.workloads) {
    const owners = [...new Set([...Object.keys(w.gateway.owners), ...Object.keys(w.bare.owners)])].sort(
      (a, b) => (w.gateway.owners[b] ?? 0) - (w.gateway.owners[a] ?? 0) || (w.bare.owners[b] ?? 0) - (w.bare.owners[a] ?? 0),
    );
    out.push(
      '',
      `#### ${w.title}: gateway ${n(w.gateway.rps)} req/s, bare proxy ${n(w.bare.rps)} req/s`,
      '',
      '| owner | gateway | bare proxy | more in the gateway |',
      '|---|---:|---:|---:|',
    );
    for (const owner of owners) {
      const g = w.gateway.owners[owner] ?? 0;
      const b = w.bare.owners[owner] ?? 0;
      if (g === 0 && b === 0) continue;
      out.push(`| ${owner} | ${g ? fmt(g) : ''} | ${b ? fmt(b) : ''} | ${signed(g - b)} |`);
    }
    out.push(`| **all** | **${fmt(w.gateway.cpuUsPerCall)}** | **${fmt(w.bare.cpuUsPerCall)}** | **${signed(w.gateway.cpuUsPerCall - w.bare.cpuUsPerCall)}** |`);
    out.push(
      '',
      `In the kernel: ${fmt(w.gateway.kernelUsPerCall)} µs a call in the gateway against ${fmt(w.bare.kernelUsPerCall)} in the bare proxy; ` +
        `waking the process that reads a socket written to (\`sock_def_readable\` on the stack): ${fmt(w.gateway.wakeupUsPerCall)} against ${fmt(w.bare.wakeupUsPerCall)}. ` +
        `Samples: ${n(w.gateway.samples)} and ${n(w.bare.samples)}.`,
    );
    const compiling = w.gateway.owners[COMPILE_OWNER] ?? 0;
    if (compiling > 0.05 * w.gateway.cpuUsPerCall) {
      out.push('', `The gateway's V8 was still compiling (${fmt(compiling)} µs a call): the profile began before it had warmed up; a longer \`--warmup\` gives a truer one.`);
    }
  }
  return out.join('\n');
}
