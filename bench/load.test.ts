import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { cannonOptions, sequential, settle, type CannonSpec } from './load.js';
import type { HttpCall } from './workloads.js';

/** A server that answers every request at once and records, in one shared list, who was called. */
async function recorder(name: string, arrivals: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(name);
      res.writeHead(name === 'b' ? 503 : 200, { 'content-type': 'application/json', 'x-switchyard-overhead-ms': '0.125' });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const call: HttpCall = { method: 'POST', path: '/v1/x', headers: { 'content-type': 'application/json' }, body: '{}' };

describe('bench load: concurrency 1 on several targets', () => {
  it('takes turns between the targets, warm-up apart from the measured part, and reports each one', async () => {
    const arrivals: string[] = [];
    const a = await recorder('a', arrivals);
    const b = await recorder('b', arrivals);
    const marks: Array<[string, number]> = [];
    try {
      const out = await sequential(
        { mode: 'sequential', targets: [{ url: a.url, call }, { url: b.url, call }], warmup: 3, count: 5, turn: 2 },
        (line) => marks.push([line, arrivals.length]),
      );
      // Warm-up: 3 each in turns of 2; then 5 each, again in turns of 2.
      expect(arrivals.join('')).to.equal('aabbab' + 'aabbaabbab');
      expect(marks).to.deep.equal([
        ['MEASURE_START', 6],
        ['MEASURE_END', 16],
      ]);
      expect(out.turn).to.equal(2);
      const [ra, rb] = out.results;
      expect(ra!.count).to.equal(5);
      expect(rb!.count).to.equal(5);
      expect(ra!.non2xx).to.equal(0);
      expect(rb!.non2xx).to.equal(5);
      expect(ra!.selfReportedOverheadP50Us).to.equal(125);
      expect(ra!.bodyBytes).to.equal(11);
      expect(ra!.p50Us).to.be.greaterThan(0);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('bench load: autocannon options', () => {
  const spec: CannonSpec = { mode: 'cannon', url: 'http://127.0.0.1:1', requests: [call], connections: 50, durationS: 10, warmupS: 1 };

  it('holds the load to a rate when the spec names one (--perf loads the bare proxy at the gateway\'s rate)', () => {
    expect(cannonOptions({ ...spec, overallRate: 2500 }, 10).overallRate).to.equal(2500);
  });

  it('sets no rate otherwise: as fast as the target answers', () => {
    expect(cannonOptions(spec, 10)).to.not.have.property('overallRate');
  });
});

describe('bench load: letting the target settle after the warm-up', () => {
  /** A reader that gives each pid's CPU seconds from its list, one reading a call, the last one forever. */
  const readings = (lists: Record<number, Array<number | undefined>>) => {
    const calls: Record<number, number> = {};
    const read = (pid: number) => {
      const at = (calls[pid] = (calls[pid] ?? 0) + 1) - 1;
      const list = lists[pid]!;
      return list[Math.min(at, list.length - 1)];
    };
    return { read, calls };
  };

  it('waits until every process used at most one clock tick over a window', async () => {
    // A tick of 10 ms: pid 1 busy for two windows, pid 2 for three.
    const { read, calls } = readings({ 1: [0, 0.05, 0.1, 0.105], 2: [1, 1.02, 1.04, 1.06, 1.07] });
    await settle([1, 2], read, 1, 5_000, 0.01);
    // The first reading, then one a window until both were idle in the same window.
    expect(calls[2]).to.equal(5);
    expect(calls[1]).to.equal(5);
  });

  it('stops waiting for a process that stays busy once the longest wait has passed', async () => {
    let cpu = 0;
    const waited = await settle([1], () => (cpu += 1), 2, 20, 0.01);
    expect(waited).to.be.at.least(20);
    expect(cpu).to.be.greaterThan(2);
  });

  it('does not wait for a process whose CPU time cannot be read (gone, or no /proc)', async () => {
    const { read, calls } = readings({ 1: [undefined] });
    await settle([1], read, 1, 5_000, 0.01);
    expect(calls[1]).to.equal(2);
  });
});
