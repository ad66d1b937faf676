import { expect } from 'chai';
import type { CannonResult, SequentialResult } from './load.js';
import { cpuUsPerCall, loadBoundNote, ratioText, renderSoak, type RoundResult, type SoakResults, type TargetMeasurement } from './report.js';
import { soakVerdict } from './stats.js';
import { summarize } from './run.js';
import { WORKLOADS } from './workloads.js';

function target(rps: number, targetCpuPct: number | null, loadCpuPct = 40, upstreamCpuPct = 50): TargetMeasurement {
  const cannon: CannonResult = {
    mode: 'cannon', rps, totalRequests: rps * 10, durationS: 10, p50Ms: 2, p90Ms: 4, p99Ms: 8, meanMs: 2.5,
    non2xx: 0, errors: 0, timeouts: 0, bytesPerSec: 0, loadCpuPct,
  };
  const sequential: SequentialResult = {
    mode: 'sequential', count: 100, p50Us: 400, p90Us: 500, p99Us: 900, meanUs: 420, headersP50Us: 390, ttfbP50Us: 395,
    ttfbP99Us: 880, selfReportedOverheadP50Us: null, bodyBytes: 1068, non2xx: 0, loadCpuPct: 50,
  };
  return { cannon, sequential, rssAfterMB: 120, targetCpuPct, upstreamCpuPct };
}

function roundOf(n: number, gateway: TargetMeasurement, bare: TargetMeasurement): RoundResult {
  return { round: n, gateway, bare, ratio: gateway.cannon.rps / bare.cannon.rps, addedUs: 80, ttfbAddedUs: null };
}

describe('bench report: CPU a call', () => {
  it("is the target's share of a core over the calls a second it answered", () => {
    // 98% of a core for 8,000 calls a second: 122.5 µs a call.
    expect(cpuUsPerCall(target(8_000, 98))).to.be.closeTo(122.5, 1e-9);
    expect(cpuUsPerCall(target(20_000, 100))).to.be.closeTo(50, 1e-9);
    // Unknown CPU (no /proc) or nothing answered: no figure rather than 0 or Infinity.
    expect(cpuUsPerCall(target(8_000, null))).to.equal(null);
    expect(cpuUsPerCall(target(0, 90))).to.equal(null);
  });

  it("a workload's summary takes the median over the rounds, for each target", () => {
    const chat = WORKLOADS.find((w) => w.id === 'chat')!;
    const summary = summarize(chat, [
      roundOf(1, target(8_000, 100), target(20_000, 100)), // 125 and 50 µs
      roundOf(2, target(5_000, 100), target(10_000, 80)), // 200 and 80 µs
      roundOf(3, target(10_000, 100), target(16_000, 96)), // 100 and 60 µs
    ]);
    expect(summary.gatewayCpuUsPerCall).to.equal(125);
    expect(summary.bareCpuUsPerCall).to.equal(60);
  });
});

describe('bench report: a throughput ratio as printed', () => {
  it('reads the same in every table: two decimals from the shortest decimal form', () => {
    expect(ratioText(0.615)).to.equal('0.62x');
    expect(ratioText(0.5)).to.equal('0.50x');
    expect(ratioText(1.0449)).to.equal('1.04x');
  });

  it("never reads as meeting a budget the check missed, nor the other way", () => {
    // 0.5951 would read 0.60x beside "missed": three decimals say why.
    expect(ratioText(0.5951, 0.6)).to.equal('0.595x');
    expect(ratioText(0.7996, 0.8)).to.equal('0.7996x');
    // Where two decimals already agree with the verdict, two it is.
    expect(ratioText(0.6049, 0.6)).to.equal('0.60x');
    expect(ratioText(0.6, 0.6)).to.equal('0.60x');
    expect(ratioText(0.49, 0.6)).to.equal('0.49x');
  });
});

describe('bench report: a bare proxy held back by the load side', () => {
  const stream = WORKLOADS.find((w) => w.id === 'chat-stream')!;
  /**
   * Three rounds of streams: the gateway at 96-98% of its CPU (900-1,000 a second, 1,067 µs a
   * stream), the bare proxy at `bareCpuPct` of its own (1,100-1,200 a second) while the load
   * generator and the upstream used `loadCpuPct` and `upstreamCpuPct` of theirs.
   */
  const streamRounds = (bareCpuPct: number, loadCpuPct: number, upstreamCpuPct: number) =>
    summarize(stream, [
      roundOf(1, target(900, 96, 30, 50), target(1_100, bareCpuPct, loadCpuPct, upstreamCpuPct)),
      roundOf(2, target(950, 97, 30, 50), target(1_200, bareCpuPct, loadCpuPct, upstreamCpuPct)),
      roundOf(3, target(1_000, 98, 30, 50), target(1_150, bareCpuPct, loadCpuPct, upstreamCpuPct)),
    ]);

  it('says the ratio is an upper bound, and gives the ratio by CPU a call, when the load side filled its CPU', () => {
    // The bare proxy at 88% of its CPU while the load generator (40%) and the upstream (57%) fill theirs.
    const summary = streamRounds(88, 40, 57);
    const note = loadBoundNote(stream.title, summary);
    expect(note).to.be.a('string');
    expect(note).to.include('97% of their CPU').and.include('the bare proxy 88%').and.include(`the ratio ${ratioText(summary.ratio)} is an upper bound`);
    const byCpu = summary.bareCpuUsPerCall! / summary.gatewayCpuUsPerCall!;
    expect(byCpu).to.be.lessThan(summary.ratio);
    expect(note).to.include(`the gateway is at ${ratioText(byCpu)} of the bare proxy`);
  });

  it('says nothing when the load side had CPU to spare, or its CPU is unknown', () => {
    const summary = streamRounds(95, 33, 45);
    expect(loadBoundNote(stream.title, summary)).to.equal(undefined);
    expect(loadBoundNote(stream.title, { ...summary, upstreamCpuPct: null })).to.equal(undefined);
  });

  it('says nothing when the bare proxy was at its own limit too', () => {
    // Both CPUs all but full (the load side at 90%, the bare proxy at 94%): the bare proxy's rate is its own.
    const summary = streamRounds(94, 37, 53);
    expect(loadBoundNote(stream.title, summary)).to.equal(undefined);
    expect(loadBoundNote(stream.title, { ...summary, bareCpuPct: 88 })).to.be.a('string');
  });
});

describe('bench report: a soak', () => {
  function soak(gateway?: SoakResults['gateway']): SoakResults {
    const samples = Array.from({ length: 21 }, (_, i) => ({ t: i * 30, rssMB: 130 + (i % 3) }));
    return {
      kind: 'soak', version: 1, date: '2026-11-27T02:44:12.763Z', commit: 'abc1234',
      options: { durationS: 600, connections: 50, sampleEveryS: 30 },
      machine: { nproc: 2, cpuModel: 'AMD EPYC', node: 'v20.20.2' } as SoakResults['machine'],
      workloads: ['chat'], load: target(8_000, 98).cannon, samples,
      rssStartMB: 130, rssEndMB: 132, rssMaxMB: 132, verdict: soakVerdict(samples, 600),
      ...(gateway ? { gateway } : {}),
    };
  }

  it("says how the gateway was started: npm start's environment and node flags", () => {
    const text = renderSoak(soak({ env: { MALLOC_MMAP_THRESHOLD_: '131072' }, nodeArgs: ['--max-semi-space-size=16'] }));
    expect(text).to.include(
      'commit abc1234; 2 CPUs (AMD EPYC), Node v20.20.2; gateway started as npm start starts it (MALLOC_MMAP_THRESHOLD_=131072, node --max-semi-space-size=16).',
    );
  });

  it('reads a file written before the start was recorded', () => {
    const text = renderSoak(soak());
    expect(text).to.include('commit abc1234; 2 CPUs (AMD EPYC), Node v20.20.2.');
    expect(text).not.to.include('started as');
  });
});
