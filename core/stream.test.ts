import { EventEmitter } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import { expect } from 'chai';
import type { Dispatcher } from 'undici';
import { GatewayError } from './errors.js';
import { UpstreamBody } from './http/client.js';
import { LINGER_MS, translateEvents, type EventTranslator } from './http/json.js';
import { abortBinding, abortsWith } from './attempt.js';
import { chatChunkAnswers, mapStream, pollOf, primeStream, PRIME_HELD_LIMIT, withTail } from './stream.js';
import type { ChatChunk } from './operations.js';
import type { RequestContext } from './context.js';
import { writeReply } from './pipeline.js';

/** An UpstreamBody fed by hand (no socket): what undici would push. */
function bodyOf(...parts: string[]): { body: UpstreamBody; push(part: string): void; end(): void; aborted: () => boolean } {
  let aborted = false;
  const controller = { pause() {}, resume() {}, abort: () => void (aborted = true) } as unknown as Dispatcher.DispatchController;
  const body = new UpstreamBody(controller);
  for (const part of parts) body.push(Buffer.from(part));
  return { body, push: (part) => body.push(Buffer.from(part)), end: () => body.end(), aborted: () => aborted };
}

/** Data events as `{n}` objects; `{"end":true}` finishes the answer; `{"boom":1}` is an error event. */
function translator(): EventTranslator<{ n: number }> {
  const t = {
    doneText: '[DONE]',
    complete: false,
    push(data: unknown): Array<{ n: number }> {
      const value = data as { n?: number; end?: boolean; boom?: number };
      if (value.boom) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent an error event' } });
      if (value.end) {
        t.complete = true;
        return [];
      }
      return [{ n: value.n! }];
    },
  };
  return t;
}

const never = { aborted: false, reason: undefined, onAbort() {}, offAbort() {} };

describe('streams that hand over what is ready (poll)', () => {
  it('gives the events of one read synchronously, then waits for the next read with next()', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\n');
    const chunks = translateEvents(feed.body, translator(), never);
    expect(chunks.poll()).to.deep.equal({ value: { n: 1 }, done: false });
    expect(chunks.poll()).to.deep.equal({ value: { n: 2 }, done: false });
    expect(chunks.poll()).to.equal(undefined); // nothing more has arrived
    const pending = chunks.next();
    feed.push('data: {"n":3}\n\ndata: {"end":true}\n\n');
    feed.end();
    expect(await pending).to.deep.equal({ value: { n: 3 }, done: false });
    expect(chunks.poll()).to.deep.equal({ value: undefined, done: true });
  });

  it('maps through layers: dropped items, one closing item, close(true) once', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: {"end":true}\n\n');
    feed.end();
    const closes: boolean[] = [];
    const odd = mapStream(translateEvents(feed.body, translator(), never), (c) => (c.n % 2 ? c.n * 10 : undefined), {
      close: (completed) => closes.push(completed),
    });
    const text = mapStream(odd, (n) => `<${n}>`, { end: () => '<end>' });
    const seen: string[] = [];
    for (let r = text.poll(); r && !r.done; r = text.poll()) seen.push(r.value);
    expect(seen).to.deep.equal(['<10>', '<30>', '<end>']);
    expect(text.poll()).to.deep.equal({ value: undefined, done: true });
    expect(await text.next()).to.deep.equal({ value: undefined, done: true });
    expect(closes).to.deep.equal([true]);
  });

  it('reads as a plain async iterable too (for await), the same items', async () => {
    const feed = bodyOf();
    const text = mapStream(translateEvents(feed.body, translator(), never), (c) => c.n, { end: () => -1 });
    setImmediate(() => {
      feed.push('data: {"n":7}\n\n');
      setImmediate(() => {
        feed.push('data: {"n":8}\n\ndata: {"end":true}\n\n');
        feed.end();
      });
    });
    const seen: number[] = [];
    for await (const n of text) seen.push(n);
    expect(seen).to.deep.equal([7, 8, -1]);
  });

  it('fails with what `fail` makes of the error, read before close runs, and closes the source', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"boom":1}\n\n');
    let state = 'open';
    const stream = mapStream(translateEvents(feed.body, translator(), never), (c) => c, {
      fail: (error) => new Error(`seen while ${state}: ${(error as Error).message}`),
      close: (completed) => (state = completed ? 'complete' : 'failed'),
    });
    expect(stream.poll()).to.deep.equal({ value: { n: 1 }, done: false });
    expect(() => stream.poll()).to.throw(/^seen while open: .*error event/);
    expect(state).to.equal('failed');
    expect(feed.aborted(), 'the back end is let go').to.equal(true);
    expect(stream.poll()).to.deep.equal({ value: undefined, done: true });
  });

  it('a reader that leaves early ends the source (the connection is released) and closes once', async () => {
    const feed = bodyOf('data: {"n":1}\n\n');
    const closes: boolean[] = [];
    const stream = mapStream(translateEvents(feed.body, translator(), never), (c) => c, { close: (c) => closes.push(c) });
    expect(stream.poll()).to.deep.equal({ value: { n: 1 }, done: false });
    await stream.return!();
    await stream.return!();
    expect(closes).to.deep.equal([false]);
    expect(feed.aborted()).to.equal(true);
    expect(await stream.next()).to.deep.equal({ value: undefined, done: true });
  });

  it('falls back to next() for a source without poll (an async generator)', async () => {
    async function* numbers() {
      yield 1;
      yield 2;
    }
    const doubled = mapStream(numbers(), (n) => n * 2);
    expect(pollOf(numbers())).to.equal(undefined);
    expect(doubled.poll()).to.equal(undefined);
    const seen: number[] = [];
    for await (const n of doubled) seen.push(n);
    expect(seen).to.deep.equal([2, 4]);
  });
});

describe('a stream with a last item added once it ends (withTail)', () => {
  it('polls through to its source, then gives the tail once from next(), then ends', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"end":true}\n\n');
    feed.end();
    let tails = 0;
    const tailed = withTail(translateEvents(feed.body, translator(), never), async () => ({ n: 100 + ++tails }));
    expect(tailed.poll()).to.deep.equal({ value: { n: 1 }, done: false });
    expect(tailed.poll()).to.deep.equal({ value: { n: 2 }, done: false });
    expect(tailed.poll()).to.equal(undefined); // the source ended: the tail needs a wait
    expect(await tailed.next()).to.deep.equal({ value: { n: 101 }, done: false });
    expect(await tailed.next()).to.deep.equal({ value: undefined, done: true });
    expect(tailed.poll()).to.deep.equal({ value: undefined, done: true });
    expect(tails).to.equal(1);
  });

  it('holds back the items keep picks and hands the last of them to the tail, which may give it again changed', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":-2}\n\ndata: {"n":3}\n\ndata: {"end":true}\n\n');
    feed.end();
    const seen: number[] = [];
    const tailed = withTail(translateEvents(feed.body, translator(), never), (kept) => (kept ? { n: -kept.n * 10 } : undefined), (c) => c.n < 0);
    for (let r = tailed.poll(); r && !r.done; r = tailed.poll()) seen.push(r.value.n);
    for await (const c of tailed) seen.push(c.n);
    expect(seen).to.deep.equal([1, 3, 20]);
  });

  it('adds nothing when the tail gives undefined, and reads as a plain async iterable', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"end":true}\n\n');
    feed.end();
    const seen: number[] = [];
    for await (const c of withTail(translateEvents(feed.body, translator(), never), () => undefined)) seen.push(c.n);
    expect(seen).to.deep.equal([1]);
  });

  it('gives no tail when the source fails or the reader leaves, and a reader that leaves ends the source', async () => {
    const failing = bodyOf('data: {"n":1}\n\ndata: {"boom":1}\n\n');
    let tails = 0;
    const broken = withTail(translateEvents(failing.body, translator(), never), () => ({ n: ++tails }));
    expect(await broken.next()).to.deep.equal({ value: { n: 1 }, done: false });
    let error: unknown;
    await broken.next().catch((e: unknown) => (error = e));
    expect((error as GatewayError).code).to.equal('upstream_error');

    const open = bodyOf('data: {"n":1}\n\n');
    const left = withTail(translateEvents(open.body, translator(), never), () => ({ n: ++tails }));
    expect(left.poll()).to.deep.equal({ value: { n: 1 }, done: false });
    await left.return?.();
    expect(open.aborted()).to.equal(true);
    expect(await left.next()).to.deep.equal({ value: undefined, done: true });
    expect(tails).to.equal(0);
  });

  it('keeps what its source fails with by itself when an attempt aborts (abortsWith)', () => {
    const source = abortsWith(mapStream(bodyOf().body, (x) => x), never);
    expect(abortBinding(withTail(source, () => undefined))).to.equal(never);
    expect(abortBinding(withTail(mapStream(bodyOf().body, (x) => x), () => undefined))).to.equal(undefined);
  });
});

const chatChunk = (delta: Record<string, unknown>): ChatChunk => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] });

/** A source that yields `first`, then waits for `release()` before `rest`; it records whether it was closed. */
function gatedSource(first: ChatChunk[], rest: ChatChunk[], failWith?: Error) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const state = { closed: false };
  const queue = [...first];
  const iterator: AsyncIterableIterator<ChatChunk> = {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (queue.length > 0) return { done: false, value: queue.shift()! };
      if (failWith) throw failWith;
      if (rest.length > 0) {
        await gate;
        return { done: false, value: rest.shift()! };
      }
      return { done: true, value: undefined };
    },
    async return() {
      state.closed = true;
      return { done: true, value: undefined };
    },
  };
  return { iterator, release, state };
}

describe('primeStream: a stream read up to its first piece of answer, for at most a window', () => {
  it('waits for the first content when it comes in time, and gives what it read first', async () => {
    const s = gatedSource([chatChunk({ role: 'assistant', content: '' }), chatChunk({ content: 'hi' })], [chatChunk({ content: ' there' })]);
    const stream = await primeStream(s.iterator, chatChunkAnswers, 5_000);
    expect(stream.poll()?.value?.choices[0]!.delta).to.deep.equal({ role: 'assistant', content: '' });
    expect(stream.poll()?.value?.choices[0]!.delta).to.deep.equal({ content: 'hi' });
    expect(stream.poll()).to.equal(undefined); // the source has no poll: next() reads on
    s.release();
    expect((await stream.next()).value?.choices[0]!.delta).to.deep.equal({ content: ' there' });
    expect((await stream.next()).done).to.equal(true);
  });

  it('hands the stream on once the window closes, the read under way included (a model thinking before its first word)', async () => {
    const s = gatedSource([chatChunk({ role: 'assistant' })], [chatChunk({ content: 'late' })]);
    const stream = await primeStream(s.iterator, chatChunkAnswers, 20);
    expect((await stream.next()).value?.choices[0]!.delta).to.deep.equal({ role: 'assistant' });
    s.release();
    expect((await stream.next()).value?.choices[0]!.delta).to.deep.equal({ content: 'late' });
    expect((await stream.next()).done).to.equal(true);
  });

  it('holds at most PRIME_HELD_LIMIT chunks: a back end that streams fast without an answer is handed on at once, not held for the window', async () => {
    const empty = Array.from({ length: 1000 }, () => chatChunk({ role: 'assistant', content: '' }));
    const s = gatedSource(empty, [chatChunk({ content: 'late' })]);
    // A window far longer than the test's timeout: only the limit can end the priming.
    const stream = await primeStream(s.iterator, chatChunkAnswers, 600_000);
    let read = 0;
    while (stream.poll()) read++;
    expect(read).to.equal(PRIME_HELD_LIMIT);
    // The rest comes on as the stream is read.
    let more = 0;
    s.release();
    for (let next = await stream.next(); !next.done; next = await stream.next()) more++;
    expect(read + more).to.equal(1001);
  });

  it('throws a failure that comes before the first content, the source released', async () => {
    const s = gatedSource([chatChunk({ role: 'assistant' })], [], new GatewayError('upstream_error', { params: { detail: 'x' } }));
    let error: unknown;
    await primeStream(s.iterator, chatChunkAnswers, 5_000).catch((e: unknown) => (error = e));
    expect((error as GatewayError).code).to.equal('upstream_error');
    expect(s.state.closed).to.equal(true);
  });

  it('releases the upstream when the stream is dropped before anyone read it', async () => {
    const s = gatedSource([chatChunk({ role: 'assistant' })], [chatChunk({ content: 'never read' })]);
    const stream = await primeStream(s.iterator, chatChunkAnswers, 20);
    await stream.return?.();
    expect(s.state.closed).to.equal(true);
    expect((await stream.next()).done).to.equal(true);
  });

  it('gives what it held as a pass of its own, then polls through to a pollable source, and keeps its abort binding', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: {"n":4}\n\n');
    const source = abortsWith(translateEvents(feed.body, translator(), never), never);
    const stream = await primeStream(source, (c) => c.n === 2, 5_000);
    expect(abortBinding(stream)).to.equal(never);
    // The held items, then one "nothing ready" (a writer sends them before reading on)...
    expect([stream.poll()?.value, stream.poll()?.value, stream.poll()]).to.deep.equal([{ n: 1 }, { n: 2 }, undefined]);
    // ...then what the source had ready, by poll and by next() alike.
    expect(stream.poll()?.value).to.deep.equal({ n: 3 });
    expect((await stream.next()).value).to.deep.equal({ n: 4 });
    expect(stream.poll()).to.equal(undefined);
  });

  it('a chunk answers once it has text, a tool call or a finish; a role or empty text does not', () => {
    expect(chatChunkAnswers(chatChunk({ role: 'assistant', content: '' }))).to.equal(false);
    expect(chatChunkAnswers(chatChunk({ content: null, refusal: null }))).to.equal(false);
    expect(chatChunkAnswers(chatChunk({ tool_calls: [{ index: 0 }] }))).to.equal(true);
    expect(chatChunkAnswers({ ...chatChunk({}), choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })).to.equal(true);
    expect(chatChunkAnswers({ ...chatChunk({}), choices: [] })).to.equal(false);
  });
});

/** Enough of a ServerResponse for the stream writer, recording each write and whether it was corked. */
class RecordingResponse extends EventEmitter {
  readonly writes: Array<{ text: string; corked: boolean }> = [];
  status = 0;
  writableCorked = 0;
  destroyed = false;
  writableEnded = false;
  writableFinished = false;
  socket = null;
  writeHead(status: number): this {
    this.status = status;
    return this;
  }
  cork(): void {
    this.writableCorked++;
  }
  uncork(): void {
    this.writableCorked--;
  }
  write(piece: string | Uint8Array): boolean {
    this.writes.push({ text: String(piece), corked: this.writableCorked > 0 });
    return true;
  }
  end(): this {
    this.writableEnded = this.writableFinished = true;
    this.emit('finish');
    return this;
  }
  setTimeout(): this {
    return this;
  }
}

describe('writing a primed stream to the client', () => {
  it('what was held goes out at once with the head, before what came since is read; the rest is written a pass at a time', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: {"n":4}\n\n');
    const read: number[] = [];
    const primed = await primeStream(translateEvents(feed.body, translator(), never), (c) => c.n === 2, 5_000);
    const res = new RecordingResponse();
    const rc = { id: 'req_1', responseHeaders: {}, attempts: [], startedAt: performance.now() } as unknown as RequestContext;
    const texts = mapStream(primed, (c) => {
      // When the writer takes the first item read after priming, the held ones were written.
      if (c.n === 3) read.push(res.writes.length);
      return `<${c.n}>`;
    });
    writeReply(res as unknown as ServerResponse, { stream: texts }, rc);
    feed.push('data: {"n":5}\n\ndata: {"end":true}\n\n');
    feed.end();
    await new Promise<void>((resolve) => res.once('finish', resolve));
    expect(res.status).to.equal(200);
    expect(read).to.deep.equal([1]);
    expect(res.writes[0]).to.deep.equal({ text: '<1><2>', corked: false });
    expect(res.writes.slice(1).map((w) => w.text).join('')).to.equal('<3><4><5>');
    // The pieces of one pass leave corked: one system call, not one each.
    expect(res.writes.slice(1).every((w) => w.corked)).to.equal(true);
  });

  it('on a real socket, the held pass has left the process before the rest is read (node corks each write until its next tick)', async () => {
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\n');
    const primed = await primeStream(translateEvents(feed.body, translator(), never), (c) => c.n === 2, 5_000);
    const unsent: number[] = [];
    const server = http.createServer((_req, res) => {
      const rc = { id: 'req_2', responseHeaders: {}, attempts: [], startedAt: performance.now() } as unknown as RequestContext;
      const texts = mapStream(primed, (c) => {
        // Bytes of the head and the held pass still in the process when the next item is read.
        if (c.n === 3) unsent.push(res.socket!.writableLength);
        return `<${c.n}>`;
      });
      writeReply(res, { stream: texts }, rc);
      feed.push('data: {"end":true}\n\n');
      feed.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const body = await new Promise<string>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: '/' }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve(text));
        }).on('error', reject);
      });
      expect(body).to.equal('<1><2><3>');
      expect(unsent).to.deep.equal([0]);
    } finally {
      server.close();
    }
  });
});

describe('how a translator ends a stream whose back end keeps its connection open', () => {
  it('finished: the stream ends with the last event (its end() chunks after it), nothing after it read; the body not ended is let go', async () => {
    const t = {
      complete: false,
      finished: false,
      push(data: unknown): Array<{ n: number }> {
        const value = data as { n: number; last?: boolean };
        if (value.last) t.complete = t.finished = true;
        return [{ n: value.n }];
      },
      end: () => [{ n: 99 }],
    };
    const feed = bodyOf('data: {"n":1}\n\ndata: {"n":2,"last":true}\n\ndata: {"n":3}\n\n');
    const chunks = translateEvents(feed.body, t, never);
    const seen: number[] = [];
    for (;;) {
      const next = await chunks.next();
      if (next.done) break;
      seen.push(next.value.n);
    }
    expect(seen).to.deep.equal([1, 2, 99]);
    expect(feed.aborted()).to.equal(false);
    const since = performance.now();
    while (!feed.aborted() && performance.now() - since < LINGER_MS + 2000) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(feed.aborted()).to.equal(true);
  });

  it('settled: what comes in time is read; a silence then ends the stream, complete, and lets the body go', async () => {
    let settled = false;
    const t = {
      get complete() {
        return settled;
      },
      get settled() {
        return settled;
      },
      push(data: unknown): Array<{ n: number }> {
        const value = data as { n: number; finish?: boolean };
        if (value.finish) settled = true;
        return [{ n: value.n }];
      },
      end: () => [{ n: 99 }],
    };
    const feed = bodyOf('data: {"n":1,"finish":true}\n\n');
    const chunks = translateEvents(feed.body, t, never);
    expect(await chunks.next()).to.deep.equal({ value: { n: 1 }, done: false });
    const later = chunks.next();
    feed.push('data: {"n":2}\n\n');
    expect(await later).to.deep.equal({ value: { n: 2 }, done: false });
    expect(await chunks.next()).to.deep.equal({ value: { n: 99 }, done: false });
    expect(await chunks.next()).to.deep.equal({ value: undefined, done: true });
    expect(feed.aborted()).to.equal(true);
  });
});
