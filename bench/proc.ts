/** Child processes of the benchmark: start them pinned, wait for them, read their memory and CPU. */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

/** Whether this module is the script node was started with. */
export function isMain(moduleUrl: string): boolean {
  return process.argv[1] !== undefined && moduleUrl === pathToFileURL(process.argv[1]).href;
}

/** The CPUs this process may run on (Cpus_allowed_list), e.g. [0, 1]. */
export function allowedCpus(): number[] {
  try {
    const line = readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('Cpus_allowed_list:'));
    if (!line) return [];
    const out: number[] = [];
    for (const part of line.split(':')[1]!.trim().split(',')) {
      const [a, b] = part.split('-').map(Number);
      if (a === undefined || Number.isNaN(a)) continue;
      for (let c = a; c <= (b ?? a); c++) out.push(c);
    }
    return out;
  } catch {
    return [];
  }
}

let tasksetPath: string | null | undefined;
export function taskset(): string | null {
  if (tasksetPath === undefined) {
    const found = spawnSync('sh', ['-c', 'command -v taskset'], { encoding: 'utf8' });
    tasksetPath = found.status === 0 && found.stdout.trim() ? found.stdout.trim() : null;
  }
  return tasksetPath;
}

/** Where the targets run and where the load runs; null when they cannot be kept apart. */
export interface Pinning {
  target: number;
  load: number;
}

export function choosePinning(disabled: boolean): Pinning | null {
  if (disabled || !taskset()) return null;
  const cpus = allowedCpus();
  if (cpus.length < 2) return null;
  return { target: cpus[0]!, load: cpus[cpus.length - 1]! };
}

export interface Child {
  proc: ChildProcess;
  pid: number;
  name: string;
  /** The last lines it printed (stdout and stderr), for a failure message. */
  tail(): string;
  exited: Promise<number | null>;
}

/** Start `node args...`, on `cpu` when given (taskset execs node: the pid is node's). */
export function startNode(name: string, args: string[], options: { cpu?: number; env?: NodeJS.ProcessEnv; cwd?: string; stdin?: boolean } = {}): Child {
  const command = options.cpu !== undefined && taskset() ? taskset()! : process.execPath;
  const argv = options.cpu !== undefined && taskset() ? ['-c', String(options.cpu), process.execPath, ...args] : args;
  const proc = spawn(command, argv, { env: options.env ?? process.env, cwd: options.cwd, stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    // Always read: a child blocked on a full pipe would stall the measurement.
    for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(line);
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  proc.stdout!.on('data', keep);
  proc.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  return { proc, pid: proc.pid!, name, tail: () => lines.slice(-20).join('\n'), exited };
}

/** Call `fn` with each whole line `stream` gives (a child's stdout); the function returned stops listening. */
export function eachLine(stream: NodeJS.ReadableStream, fn: (line: string) => void): () => void {
  let buffer = '';
  const onData = (chunk: Buffer | string) => {
    buffer += chunk.toString();
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      fn(line);
    }
  };
  stream.on('data', onData);
  return () => void stream.off('data', onData);
}

/** Wait until the child prints a line matching `pattern`; its first group is returned. */
export function waitForLine(child: Child, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`${child.name} did not start within ${timeoutMs} ms:\n${child.tail()}`)), timeoutMs);
    const stopReading = eachLine(child.proc.stdout!, (line) => {
      const match = pattern.exec(line);
      if (match) {
        cleanup();
        resolve(match[1] ?? match[0]);
      }
    });
    const onExit = (code: number | null) => fail(new Error(`${child.name} exited (${code}) before it was ready:\n${child.tail()}`));
    const cleanup = () => {
      clearTimeout(timer);
      stopReading();
      child.proc.off('exit', onExit);
    };
    const fail = (error: Error) => {
      cleanup();
      reject(error);
    };
    child.proc.once('exit', onExit);
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; only this child, by its pid. */
export async function stopChild(child: Child, graceMs = 5_000): Promise<void> {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill('SIGTERM');
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(timer);
}

/** Resident memory of a process in bytes (VmRSS), and its peak (VmHWM). */
export function memoryOf(pid: number): { rss: number; peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), peak: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

let clockTicks: number | undefined;
/** The kernel's clock ticks a second: the resolution of the CPU times in /proc. */
export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    clockTicks = Number(out.stdout?.trim()) || 100;
  }
  return clockTicks;
}

/** CPU time a process has used so far (user + system, all threads), in seconds. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After the command: state is field 3, utime field 14, stime field 15 (1-based, whole line).
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond();
  } catch {
    return undefined;
  }
}

export function hasProc(): boolean {
  return existsSync('/proc/self/status');
}
