import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { SequentialResults, SequentialSpec } from './load.js';
import { eachLine, startNode, stopChild, waitForLine, type Child } from './proc.js';
import { WORKLOADS } from './workloads.js';

const upstreamJs = path.join(path.dirname(fileURLToPath(import.meta.url)), 'upstream.js');

/** Send one command line and collect what the upstream prints until its RESULT or FAILED line. */
function command(child: Child, line: string): Promise<string[]> {
  return new Promise((resolve) => {
    const lines: string[] = [];
    const stop = eachLine(child.proc.stdout!, (got) => {
      lines.push(got);
      if (got.startsWith('RESULT ') || got.startsWith('FAILED ')) {
        stop();
        resolve(lines);
      }
    });
    child.proc.stdin!.write(`${line}\n`);
  });
}

describe("bench upstream: the concurrency-1 client in the upstream's process", function () {
  this.timeout(30_000);
  let upstream: Child;
  let url: string;

  before(async () => {
    upstream = startNode('upstream', [upstreamJs], { stdin: true });
    url = await waitForLine(upstream, /READY (\S+)/);
  });
  after(async () => {
    await stopChild(upstream);
  });

  it('measures streamed calls one at a time when asked on stdin, and reports their first byte', async () => {
    const stream = WORKLOADS.find((w) => w.id === 'chat-stream')!;
    const spec: SequentialSpec = { mode: 'sequential', targets: [{ url, call: stream.bare() }], warmup: 2, count: 5, turn: 2 };
    const lines = await command(upstream, `SEQUENTIAL ${JSON.stringify(spec)}`);
    expect(lines.slice(0, 2)).to.deep.equal(['MEASURE_START', 'MEASURE_END']);
    const result = JSON.parse(lines[2]!.slice('RESULT '.length)) as SequentialResults;
    const [r] = result.results;
    expect(r!.count).to.equal(5);
    expect(r!.non2xx).to.equal(0);
    // The whole stream was read: 20 chunks, the usage chunk and [DONE], a few KB.
    expect(r!.bodyBytes).to.be.greaterThan(4000);
    expect(r!.ttfbP50Us).to.be.greaterThan(0);
    expect(r!.ttfbP50Us).to.be.at.most(r!.p50Us);
  });

  it('says why when the measurement fails, and keeps serving', async () => {
    const chat = WORKLOADS.find((w) => w.id === 'chat')!;
    const spec: SequentialSpec = { mode: 'sequential', targets: [{ url: 'http://127.0.0.1:9', call: chat.bare() }], warmup: 1, count: 1 };
    const lines = await command(upstream, `SEQUENTIAL ${JSON.stringify(spec)}`);
    expect(lines.at(-1)).to.match(/^FAILED \S/);
    const again = await command(upstream, `SEQUENTIAL ${JSON.stringify({ ...spec, targets: [{ url, call: chat.bare() }] })}`);
    expect(again.at(-1)).to.match(/^RESULT /);
  });
});
