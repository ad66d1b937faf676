import { expect } from 'chai';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bareCpuUsPerChatCall, readHistory, renderHistory } from './history.js';
import type { BenchResults, RoundResult, SoakResults, TargetMeasurement } from './report.js';
import { main, parseOptions } from './run.js';

function target(rps: number, targetCpuPct: number): TargetMeasurement {
  return {
    cannon: { mode: 'cannon', rps, totalRequests: rps * 10, durationS: 10, p50Ms: 2, p90Ms: 4, p99Ms: 8, meanMs: 2.5, non2xx: 0, errors: 0, timeouts: 0, bytesPerSec: 0, loadCpuPct: 40 },
    sequential: null as unknown as TargetMeasurement['sequential'],
    rssAfterMB: 120,
    targetCpuPct,
    upstreamCpuPct: 50,
  };
}

const machine = { nproc: 2, cpuModel: 'Intel(R) Xeon(R) Processor @ 2.80GHz', node: 'v20.20.2', kernel: '6.18', memTotalMB: 24000, loadavgBefore: [0, 0, 0], loadavgAfter: [0, 0, 0], pinning: { target: 0, load: 1 } };

/** A full run whose chat rounds cost the bare proxy 50, 80 and 60 µs a call, and no stored per-call figure (as runs before it was recorded). */
function run(date: string, commit: string, chatRatio: number, chatMet: boolean): BenchResults {
  const rounds: RoundResult[] = [
    { round: 1, bare: target(20_000, 100), gateway: target(9_000, 100), ratio: 0.45, addedUs: 90, ttfbAddedUs: null },
    { round: 2, bare: target(10_000, 80), gateway: target(5_000, 100), ratio: 0.5, addedUs: 100, ttfbAddedUs: null },
    { round: 3, bare: target(16_000, 96), gateway: target(8_000, 100), ratio: 0.5, addedUs: 110, ttfbAddedUs: null },
  ];
  const summary = (ratio: number, addedUs: number, ttfbAddedUs: number | null) =>
    ({ ratio, addedUs, ttfbAddedUs }) as unknown as NonNullable<BenchResults['workloads'][number]['summary']>;
  return {
    kind: 'bench', version: 1, date, mode: 'full', commit,
    options: {} as BenchResults['options'],
    machine,
    gateway: { logLevel: 'warn', plugins: 'default', key: 'k', rssAtStartMB: 104.3, rssAfterAllMB: 133.6, rssPeakMB: 141 },
    workloads: [
      { id: 'chat', title: 'chat, non-streaming', stream: false, served: true, rounds, summary: summary(chatRatio, 104.6, null) },
      { id: 'chat-stream', title: 'chat, streaming (20 chunks)', stream: true, served: true, rounds: [], summary: summary(0.86, -12.4, 171) },
      { id: 'messages', title: 'messages → OpenAI upstream', stream: false, served: false, note: 'not served yet', rounds: [] },
      { id: 'embeddings', title: 'embeddings', stream: false, served: true, rounds: [], summary: summary(0.72, 143, null) },
    ],
    budget: [
      { what: 'chat, non-streaming: throughput vs bare proxy', budget: '≥ 0.6x', measured: `${chatRatio}x`, met: chatMet },
      { what: 'chat, streaming (20 chunks): throughput vs bare proxy', budget: '≥ 0.8x', measured: '0.86x', met: true },
    ],
  };
}

function soak(date: string, flat: boolean): SoakResults {
  return {
    kind: 'soak', version: 1, date, commit: 'abc1234',
    options: { durationS: 600, connections: 50, sampleEveryS: 5 },
    machine,
    workloads: ['chat'],
    load: { mode: 'cannon', rps: 5409.1, totalRequests: 1, durationS: 600, p50Ms: 7, p90Ms: 15, p99Ms: 28, meanMs: 8, non2xx: 2, errors: 1, timeouts: 0, bytesPerSec: 0, loadCpuPct: 30 },
    samples: [],
    rssStartMB: 114.4, rssEndMB: 131.4, rssMaxMB: 134.9,
    verdict: { secondQuarterMB: 130.7, lastQuarterMB: flat ? 131.2 : 190, growthMB: 0.5, toleranceMB: 10, lastHalfSlopeMBPerMin: 0.21, flat, rule: 'r' },
  } as SoakResults;
}

/** Run the benchmark's main with `argv`, keeping what it writes to `stream` (stdout or stderr). */
async function mainWriting(stream: NodeJS.WriteStream, argv: string[]): Promise<{ code: number; text: string }> {
  let text = '';
  const write = stream.write;
  stream.write = ((chunk: string) => {
    text += chunk;
    return true;
  }) as typeof stream.write;
  try {
    return { code: await main(argv), text };
  } finally {
    stream.write = write;
  }
}

describe('bench history: every run and soak, one line each', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bench-history-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lists full runs and soaks oldest first, leaves quick, custom and compare runs out, and names files it cannot read', () => {
    writeFileSync(path.join(dir, '2026-11-26T12-46-45Z.json'), JSON.stringify(run('2026-11-26T12:46:45.552Z', 'bbbbbbb', 0.66, true)));
    writeFileSync(path.join(dir, '2026-11-22T16-55-20Z.json'), JSON.stringify(run('2026-11-22T16:55:20.000Z', 'aaaaaaa', 0.09, false)));
    writeFileSync(path.join(dir, '2026-11-26T12-50-00Z-quick.json'), JSON.stringify({ ...run('2026-11-26T12:50:00.000Z', 'qqqqqqq', 1, true), mode: 'quick' }));
    writeFileSync(path.join(dir, '2026-11-26T12-51-00Z-compare.json'), JSON.stringify({ kind: 'compare', builds: [] }));
    writeFileSync(path.join(dir, '2026-11-26T11-49-24Z-soak.json'), JSON.stringify(soak('2026-11-26T11:49:24.096Z', true)));
    writeFileSync(path.join(dir, '2026-11-22T17-00-03Z-soak.json'), JSON.stringify(soak('2026-11-22T17:00:03.000Z', false)));
    writeFileSync(path.join(dir, 'broken.json'), '{"kind": "bench", ');

    const history = readHistory(dir);
    expect(history.runs.map((r) => r.results.commit)).to.deep.equal(['aaaaaaa', 'bbbbbbb']);
    expect(history.soaks).to.have.length(2);
    expect(history.skipped.map((s) => s.file)).to.deep.equal(['broken.json']);

    const text = renderHistory(history, '../bench/results/');
    const lines = text.split('\n');
    const latest = lines.find((l) => l.includes('bbbbbbb'))!;
    // Date, link, commit, machine, the bare proxy's CPU a chat call (the median of 50, 80, 60), ratios, added latency, RSS.
    expect(latest).to.equal(
      '| [2026-11-26 12:46](../bench/results/2026-11-26T12-46-45Z.json) | `bbbbbbb` | Intel Xeon | 60 | 0.66x | 0.86x | – | 0.72x | +105 / −12 / – / +143 | +171 | 104 → 134 (141) |',
    );
    // A ratio the run found missed is in bold.
    expect(lines.find((l) => l.includes('aaaaaaa'))).to.include('| **0.09x** |');
    expect(text).to.include('### Full runs (2)').and.include('### Soaks (2)');
    const grew = lines.find((l) => l.includes('2026-11-22 17:00'))!;
    expect(grew).to.include('| 190 |').and.include('**grew**');
    // Failed requests: non-2xx, errors and timeouts together.
    expect(lines.find((l) => l.includes('2026-11-26 11:49'))).to.equal(
      '| [2026-11-26 11:49](../bench/results/2026-11-26T11-49-24Z-soak.json) | `abc1234` | 10 | 5,409 | 3 | 114 | 131 | 131 | 135 | 0.21 | flat |',
    );
    expect(text).to.include('Not read: broken.json');
  });

  it("takes a run's own figure of the bare proxy's CPU a chat call when it has one", () => {
    const results = run('2026-11-26T12:46:45.552Z', 'bbbbbbb', 0.66, true);
    expect(bareCpuUsPerChatCall(results)).to.equal(60);
    results.workloads[0]!.summary!.bareCpuUsPerCall = 194.4;
    expect(bareCpuUsPerChatCall(results)).to.equal(194.4);
  });

  it('reads every full run committed in bench/results, and prints the tables from `npm run bench -- --history`', async () => {
    const committed = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'results');
    const fullRuns = readdirSync(committed).filter((f) => /^\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ\.json$/.test(f));
    const history = readHistory(committed);
    expect(history.skipped).to.deep.equal([]);
    expect(history.runs.map((r) => r.file)).to.deep.equal(fullRuns.sort());
    for (const { results } of history.runs) expect(bareCpuUsPerChatCall(results), results.date).to.be.greaterThan(0);

    const { code, text: printed } = await mainWriting(process.stdout, ['--history', '--out', committed]);
    expect(code).to.equal(0);
    expect(printed).to.include(`### Full runs (${fullRuns.length})`);
    expect(printed).to.include('(../bench/results/' + fullRuns[fullRuns.length - 1]);
  });

  it('--history names a results folder it cannot read and exits 2, without a stack trace', async () => {
    const { code, text: said } = await mainWriting(process.stderr, ['--history', '--out', path.join(dir, 'missing')]);
    expect(code).to.equal(2);
    expect(said).to.equal(`--history: cannot read the results folder ${path.join(dir, 'missing')} (ENOENT)\n`);
  });

  it('refuses --history with a measurement', () => {
    expect(() => parseOptions(['--history', '--soak', '60'])).to.throw('--history measures nothing');
    expect(() => parseOptions(['--history', '--compare', 'a=.'])).to.throw('--history measures nothing');
    expect(parseOptions(['--history']).history).to.equal(true);
  });

  it('a full run has an even number of rounds by default, so each order of the targets is measured as often', () => {
    const full = parseOptions([]);
    expect(full.rounds).to.equal(4);
    expect(full.mode).to.equal('full');
    expect(parseOptions(['--quick']).rounds).to.equal(1);
  });
});
