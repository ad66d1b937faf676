/**
 * `npm run bench -- --history`: every full run and every soak kept in a results folder, one line
 * each, as the markdown tables docs/performance.md quotes. A run's own file keeps everything
 * else (rounds, CPU, p50/p99, the machine).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { cpuUsPerCall, n as num, ratioText, signed, throughputCheck, throughputTarget, type BenchResults, type SoakResults, type WorkloadResult } from './report.js';
import { median } from './stats.js';
import { WORKLOADS } from './workloads.js';

/** The workloads in the order the benchmark runs them. */
const ORDER = WORKLOADS.map((w) => w.id);

export interface History {
  /** Full runs (`npm run bench` with the default options), oldest first. */
  runs: Array<{ file: string; results: BenchResults }>;
  /** Soaks of any length, oldest first. */
  soaks: Array<{ file: string; results: SoakResults }>;
  /** Files that could not be read as results, with why. */
  skipped: Array<{ file: string; reason: string }>;
}

/** The results files of `dir`: full runs and soaks; quick, custom and compare runs are left out. */
export function readHistory(dir: string): History {
  const history: History = { runs: [], soaks: [], skipped: [] };
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    } catch (error) {
      history.skipped.push({ file, reason: (error as Error).message });
      continue;
    }
    const kind = (parsed as { kind?: unknown })?.kind;
    if (kind === 'bench') {
      const results = parsed as BenchResults;
      if (results.mode === 'full' && Array.isArray(results.workloads)) history.runs.push({ file, results });
    } else if (kind === 'soak') {
      const results = parsed as SoakResults;
      if (results.load && results.verdict) history.soaks.push({ file, results });
      else history.skipped.push({ file, reason: 'a soak without its load or verdict' });
    }
  }
  return history;
}

/** "2026-11-26 12:46" from an ISO date. */
function minute(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)}`;
}

/** The bare proxy's CPU a chat call: the run's own figure, or the median of its rounds' for runs from before it was recorded. */
export function bareCpuUsPerChatCall(results: BenchResults): number | null {
  const chat = results.workloads.find((w) => w.id === 'chat');
  if (!chat?.served) return null;
  if (typeof chat.summary?.bareCpuUsPerCall === 'number') return chat.summary.bareCpuUsPerCall;
  const perRound = chat.rounds.map((r) => cpuUsPerCall(r.bare)).filter((v): v is number => v !== null);
  return perRound.length > 0 ? median(perRound) : null;
}

/** A workload's throughput ratio, in bold when the run found it missed its budget. */
function ratioCell(results: BenchResults, w: WorkloadResult | undefined): string {
  if (!w?.served || !w.summary) return '–';
  const text = ratioText(w.summary.ratio, throughputTarget(w.stream));
  const check = results.budget.find((b) => b.what === throughputCheck(w.title));
  return check?.met === false ? `**${text}**` : text;
}

/** One line per full run: the machine's speed, the four ratios, the latency added, memory. */
export function runsTable(history: History, linkPrefix: string): string {
  const head =
    '| run (UTC) | commit | CPU | bare proxy CPU µs a chat call | chat | streaming | messages | embeddings | c=1 added µs (chat / stream / messages / embeddings) | first byte added µs | RSS MB: listening → after (peak) |\n' +
    '|---|---|---|---:|---:|---:|---:|---:|---|---:|---|';
  const rows = history.runs.map(({ file, results }) => {
    const by = new Map(results.workloads.map((w) => [w.id, w]));
    const added = ORDER.map((id) => {
      const w = by.get(id);
      return w?.served && w.summary ? signed(w.summary.addedUs) : '–';
    }).join(' / ');
    const stream = by.get('chat-stream');
    const ttfb = stream?.served && stream.summary ? signed(stream.summary.ttfbAddedUs) : '–';
    const g = results.gateway;
    return (
      `| [${minute(results.date)}](${linkPrefix}${file}) | \`${results.commit}\` | ${results.machine.cpuModel.replace(/\(R\)/g, '').replace(/ Processor.*$/, '')} | ` +
      `${num(bareCpuUsPerChatCall(results))} | ${ORDER.map((id) => ratioCell(results, by.get(id))).join(' | ')} | ${added} | ${ttfb} | ` +
      `${num(g.rssAtStartMB)} → ${num(g.rssAfterAllMB)} (${num(g.rssPeakMB)}) |`
    );
  });
  return [head, ...rows].join('\n');
}

/** One line per soak: its length and rate, RSS by quarter, the verdict. */
export function soaksTable(history: History, linkPrefix: string): string {
  const head =
    '| soak (UTC) | commit | minutes | req/s | failed | RSS MB at start | second quarter (median) | last quarter (median) | most | MB a minute, second half | memory |\n' +
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|';
  const rows = history.soaks.map(({ file, results }) => {
    const v = results.verdict;
    const failed = results.load.non2xx + results.load.errors + results.load.timeouts;
    return (
      `| [${minute(results.date)}](${linkPrefix}${file}) | \`${results.commit}\` | ${num(results.options.durationS / 60, results.options.durationS % 60 ? 1 : 0)} | ` +
      `${num(results.load.rps)} | ${num(failed)} | ${num(results.rssStartMB)} | ${num(v.secondQuarterMB)} | ${num(v.lastQuarterMB)} | ${num(results.rssMaxMB)} | ` +
      `${num(v.lastHalfSlopeMBPerMin, 2).replace(/^-/, '−')} | ${v.flat ? 'flat' : '**grew**'} |`
    );
  });
  return [head, ...rows].join('\n');
}

/** Both tables, and what was left out. `linkPrefix` leads each results file's link (`../bench/results/` from docs/). */
export function renderHistory(history: History, linkPrefix: string): string {
  const parts = [
    `### Full runs (${history.runs.length})`,
    '',
    runsTable(history, linkPrefix),
    '',
    `### Soaks (${history.soaks.length})`,
    '',
    soaksTable(history, linkPrefix),
  ];
  if (history.skipped.length > 0) {
    parts.push('', 'Not read: ' + history.skipped.map((s) => `${s.file} (${s.reason})`).join('; '));
  }
  return parts.join('\n');
}
