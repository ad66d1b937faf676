import { expect } from 'chai';
import type { ChatChunk } from '../../../core/index.js';
import { primed } from './prime.js';

const chunk = (delta: Record<string, unknown>): ChatChunk => ({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: null }] });

/** A source that yields `first`, then waits for `release()` before `rest`; it records whether it was closed. */
function source(first: ChatChunk[], rest: ChatChunk[]) {
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

describe('primed: a stream read up to its first piece of answer, for at most a window', () => {
  it('waits for the first content when it comes in time', async () => {
    const s = source([chunk({ role: 'assistant' }), chunk({ content: 'hi' })], []);
    const stream = await primed(s.iterator, 5_000);
    const got: ChatChunk[] = [];
    for await (const c of stream) got.push(c);
    expect(got.map((c) => c.choices[0]!.delta.content ?? null)).to.deep.equal([null, 'hi']);
  });

  it('hands the stream on once the window closes, the read under way included (a model thinking before its first word)', async () => {
    const s = source([chunk({ role: 'assistant' })], [chunk({ content: 'late' })]);
    const stream = await primed(s.iterator, 20);
    const first = await stream.next();
    expect(first.value?.choices[0]!.delta).to.deep.equal({ role: 'assistant' });
    s.release();
    const second = await stream.next();
    expect(second.value?.choices[0]!.delta).to.deep.equal({ content: 'late' });
    expect((await stream.next()).done).to.equal(true);
  });

  it('releases the upstream when the stream is dropped before anyone read it', async () => {
    const s = source([chunk({ role: 'assistant' })], [chunk({ content: 'never read' })]);
    const stream = await primed(s.iterator, 20);
    await stream.return(undefined);
    expect(s.state.closed).to.equal(true);
  });
});
