import { expect } from 'chai';
import { COMPILE_OWNER, GC_OWNER, JitSymbols, LOOP_OWNER, NATIVE_OWNER, PerfTally, ownerOf, parseFrame, perfMissing, profileOf, renderPerf, type PerfFrame, type PerfResults } from './perf.js';
import { parseOptions } from './run.js';
import type { CannonResult } from './load.js';

const MAP = '(/tmp/perf-4242.map)';
const NODE = '(/usr/bin/node)';
const KERNEL = '([kernel.kallsyms])';

/** One sample of `perf script -F ip,sym,dso`, leaf first, as perf prints it (a tab, the address, the symbol, the object). */
function sample(...frames: string[]): string {
  return `${frames.map((f, i) => `\t    ${(0x1000 + i).toString(16)} ${f}`).join('\n')}\n\n`;
}

const frames = (...lines: string[]): PerfFrame[] => lines.map((l) => parseFrame(`7f00 ${l}`)!);

describe('bench --perf: samples by owner', () => {
  it('reads a frame: the address, the symbol (which may hold parentheses) and the object it is in', () => {
    expect(parseFrame('\t    7f93002d192b JS:*clearBuffer node:internal/streams/writable:744:21 (/tmp/perf-6572.map)')).to.deep.equal({
      ip: 0x7f93002d192b,
      sym: 'JS:*clearBuffer node:internal/streams/writable:744:21',
      dso: '/tmp/perf-6572.map',
    });
    expect(parseFrame('\t          c494db v8::internal::(anonymous namespace)::Invoke (/usr/bin/node)')).to.deep.equal({
      ip: 0xc494db,
      sym: 'v8::internal::(anonymous namespace)::Invoke',
      dso: '/usr/bin/node',
    });
    expect(parseFrame('')).to.equal(undefined);
  });

  it('charges a sample to the first JavaScript function on its stack, by where its code lives', () => {
    // JSON.parse (native) under the gateway's readJson: the core's JSON reading.
    expect(ownerOf(frames(`v8::internal::JsonParser<unsigned char>::ParseJsonValue<false> ${NODE}`, `JS:*readJson file:///srv/gw/dist/core/http/json.js:40:31 ${MAP}`))).to.equal(
      'core: bodies, the upstream client, JSON',
    );
    // A kernel write under node's writable stream.
    expect(ownerOf(frames(`sock_def_readable ${KERNEL}`, `do_writev ${KERNEL}`, `JS:*clearBuffer node:internal/streams/writable:744:21 ${MAP}`))).to.equal(
      "node's HTTP server, sockets and streams",
    );
    expect(ownerOf(frames(`JS:*settle file:///srv/gw/dist/plugins/metering/index.js:272:24 ${MAP}`))).to.equal('plugin: metering');
    expect(ownerOf(frames(`JS:* file:///srv/gw/dist/plugins/providers/openai/chat.js:11:12 ${MAP}`))).to.equal('plugin: providers');
    expect(ownerOf(frames(`JS:*_resume /srv/gw/node_modules/undici/lib/dispatcher/client.js:589:18 ${MAP}`))).to.equal('undici');
    expect(ownerOf(frames(`sqlite3VdbeExec ${NODE}`, `JS:*run file:///srv/gw/dist/core/store/sqlite.js:595:8 ${MAP}`))).to.equal('core: the store (SQLite rows, counters)');
    expect(ownerOf(frames(`JS:*processTicksAndRejections node:internal/process/task_queues:67:35 ${MAP}`))).to.equal("node's events, ticks and timers");
    expect(ownerOf(frames(`JS:* file:///srv/gw/dist/bench/bare-proxy.js:30:3 ${MAP}`))).to.equal("the bare proxy's own code");
    // undici's WebAssembly parser is not the JavaScript that called it.
    expect(ownerOf(frames(`JS:wasm-function[20]-20-turbofan ${MAP}`, `JS:*execute /srv/gw/node_modules/undici/lib/dispatcher/client-h1.js:320:11 ${MAP}`))).to.equal('undici');
  });

  it('tells garbage collection, compiling, the event loop and other native code apart', () => {
    // A scavenge on the main thread, under the JavaScript that allocated.
    expect(ownerOf(frames(`v8::internal::Scavenger::ScavengeObject ${NODE}`, `JS:*runCall file:///srv/gw/dist/core/pipeline.js:229:30 ${MAP}`))).to.equal(GC_OWNER);
    expect(ownerOf(frames(`v8::internal::OptimizingCompileDispatcher::CompileTask::RunInternal ${NODE}`, `start_thread (/usr/lib/libc.so.6)`))).to.equal(COMPILE_OWNER);
    expect(ownerOf(frames(`epoll_pwait (/usr/lib/libc.so.6)`, `uv__io_poll ${NODE}`, `uv_run ${NODE}`))).to.equal(LOOP_OWNER);
    expect(ownerOf(frames(`_int_malloc (/usr/lib/libc.so.6)`, `[unknown] ([unknown])`))).to.equal(NATIVE_OWNER);
  });

  it('counts samples, kernel leaves and wake-ups from perf script text, and turns shares into µs a call', () => {
    const tally = new PerfTally();
    const text =
      '\n' +
      sample(`_raw_spin_unlock_irqrestore ${KERNEL}`, `sock_def_readable ${KERNEL}`, `JS:*clearBuffer node:internal/streams/writable:744:21 ${MAP}`) +
      sample(`JS:*_resume /srv/gw/node_modules/undici/lib/dispatcher/client.js:589:18 ${MAP}`) +
      sample(`JS:*_resume /srv/gw/node_modules/undici/lib/dispatcher/client.js:589:18 ${MAP}`) +
      sample(`epoll_pwait (/usr/lib/libc.so.6)`, `uv_run ${NODE}`);
    for (const line of text.split('\n')) tally.line(line);
    tally.end();
    expect(tally.samples).to.equal(4);
    expect(tally.kernel).to.equal(1);
    expect(tally.wakeups).to.equal(1);
    expect(Object.fromEntries(tally.owners)).to.deep.equal({ "node's HTTP server, sockets and streams": 1, undici: 2, [LOOP_OWNER]: 1 });

    // 2 s of CPU over 10,000 calls: 200 µs a call, split as the samples are.
    const result = { mode: 'cannon', rps: 1000, totalRequests: 10_000 } as CannonResult;
    const profile = profileOf(tally, 2, result, '/tmp/x.perf.data');
    expect(profile.cpuUsPerCall).to.equal(200);
    expect(profile.owners).to.deep.equal({ undici: 100, "node's HTTP server, sockets and streams": 50, [LOOP_OWNER]: 50 });
    expect(profile.kernelUsPerCall).to.equal(50);
    expect(profile.wakeupUsPerCall).to.equal(50);
  });

  it("names node's code by the newest line of its symbol map where V8 put new code at an address it had freed", () => {
    // As node wrote it: the tokenizer's parseRankFile compiled at start-up, then freed, and
    // node:net's _unrefTimer (and later a small stub) compiled where it had been.
    const map = new JitSymbols(
      [
        '7f9714343040 1ccc JS:^parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30',
        '7f97143452c0 101c JS:*parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30',
        '7f9714345600 494 JS:*_unrefTimer node:net:511:52',
        '7f9714345700 10 JS:*stub node:net:1:1',
        'not a line of the map',
        '7f9714346400 0 JS:*empty node:net:2:1',
        '',
      ].join('\n'),
    );
    // Where only the old code ever was, it keeps its name; where new code came, the newest wins.
    expect(map.lookup(0x7f97143452c0)).to.equal('JS:*parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30');
    expect(map.lookup(0x7f97143455ff)).to.equal('JS:*parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30');
    expect(map.lookup(0x7f9714345699)).to.equal('JS:*_unrefTimer node:net:511:52');
    expect(map.lookup(0x7f9714345705)).to.equal('JS:*stub node:net:1:1');
    expect(map.lookup(0x7f9714345710)).to.equal('JS:*_unrefTimer node:net:511:52');
    // The old line's end, past the new code: still the old code's.
    expect(map.lookup(0x7f97143462db)).to.equal('JS:*parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30');
    expect(map.lookup(0x7f9714343040)).to.equal('JS:^parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30');
    // Outside every line (a gap, before the first, past the last): no name.
    expect(map.lookup(0x7f97143462dc)).to.equal(undefined);
    expect(map.lookup(0x7f9714343000)).to.equal(undefined);
    expect(map.lookup(0x7f9714400000)).to.equal(undefined);
    expect(new JitSymbols('').lookup(0x1000)).to.equal(undefined);

    // A tally names the map's frames by it, and leaves perf's names for every other object.
    const tally = new PerfTally(map);
    const text =
      `\t    7f9714345699 JS:*parseRankFile file:///srv/gw/dist/plugins/metering/bpe.js:279:30 ${MAP}\n` +
      `\t    7f971426bdb5 JS:*clearBuffer node:internal/streams/writable:744:21 ${MAP}\n\n` +
      `\t    c494db v8::internal::(anonymous namespace)::Invoke ${NODE}\n\n`;
    for (const line of text.split('\n')) tally.line(line);
    tally.end();
    expect(Object.fromEntries(tally.owners)).to.deep.equal({ "node's HTTP server, sockets and streams": 1, [NATIVE_OWNER]: 1 });
    // Without the map, perf's name stands: the sample goes to the plugin whose code was there first.
    const unmapped = new PerfTally();
    for (const line of text.split('\n')) unmapped.line(line);
    unmapped.end();
    expect(Object.fromEntries(unmapped.owners)).to.deep.equal({ 'plugin: metering': 1, [NATIVE_OWNER]: 1 });
  });

  it('prints one table a workload, each owner with both targets and the difference', () => {
    const profile = (owners: Record<string, number>, cpuUsPerCall: number) => ({
      rps: 2500,
      calls: 25_000,
      cpuUsPerCall,
      samples: 9000,
      owners,
      kernelUsPerCall: 50,
      wakeupUsPerCall: 10,
      dataFile: 'x',
    });
    const results: PerfResults = {
      kind: 'perf',
      date: '2026-11-26T23:00:00.000Z',
      commit: 'abc1234',
      machine: { nproc: 2, cpuModel: 'AMD EPYC', node: 'v20', kernel: '6.1', memTotalMB: 1, loadavgBefore: [], loadavgAfter: [], pinning: { target: 0, load: 1 } },
      options: { durationS: 10, warmupS: 10, connections: 50, hz: 999 },
      workloads: [
        {
          id: 'chat',
          title: 'chat, non-streaming',
          gateway: profile({ undici: 50, 'plugin: metering': 9.1, [COMPILE_OWNER]: 30, 'other packages': 0 }, 300),
          bare: profile({ undici: 45, "the bare proxy's own code": 5 }, 200),
        },
      ],
    };
    const text = renderPerf(results);
    expect(text).to.include('| undici | 50.0 | 45.0 | +5.0 |');
    expect(text).to.include('| plugin: metering | 9.1 |  | +9.1 |');
    expect(text).to.include("| the bare proxy's own code |  | 5.0 | −5.0 |");
    expect(text).to.include('| **all** | **300.0** | **200.0** | **+100.0** |');
    expect(text).to.include('still compiling (30.0 µs a call)');
    expect(text, 'an owner that rounds to nothing in both has no row').to.not.include('other packages');
  });

  it('says plainly when perf is not there to run', () => {
    expect(perfMissing('switchyard-no-such-perf')).to.match(/--perf needs Linux perf on the PATH/);
    expect(perfMissing(process.execPath), 'a command that answers --version').to.equal(undefined);
  });

  it('--perf is a measurement of its own, warmed up for 10 s unless told otherwise', () => {
    const options = parseOptions(['--perf', '/tmp/p', '--workloads', 'chat']);
    expect(options.perf).to.equal('/tmp/p');
    expect(options.warmupS).to.equal(10);
    expect(parseOptions(['--perf', '/tmp/p', '--warmup', '2']).warmupS).to.equal(2);
    expect(() => parseOptions(['--perf', '/tmp/p', '--compare', 'a=.'])).to.throw('--perf is a measurement of its own');
    expect(() => parseOptions(['--perf', '/tmp/p', '--soak', '60'])).to.throw('--perf is a measurement of its own');
    expect(() => parseOptions(['--history', '--perf', '/tmp/p'])).to.throw('--history measures nothing');
  });
});
