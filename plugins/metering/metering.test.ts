import { expect } from 'chai';
import { costOf, formatCost, KeyedQueue, worstUsage } from './index.js';

describe('metering costOf', () => {
  const price = { input: 3, output: 15, cachedInput: 0.3, cacheWrite: 3.75 };

  it('prices fresh, cached and cache-written input each at its own rate, per million tokens', () => {
    // 1,000 prompt tokens: 600 read from the cache, 300 written to it, 100 fresh; 200 output.
    const cost = costOf({ inputTokens: 1000, outputTokens: 200, cachedInputTokens: 600, cacheWriteTokens: 300 }, price);
    expect(cost).to.be.closeTo((100 * 3 + 600 * 0.3 + 300 * 3.75 + 200 * 15) / 1e6, 1e-15);
  });

  it('charges cache writes at the input price when no cacheWrite price is set, and never counts a token twice', () => {
    const plain = { input: 2, output: 4 };
    expect(costOf({ inputTokens: 100, outputTokens: 0, cacheWriteTokens: 40 }, plain)).to.be.closeTo((100 * 2) / 1e6, 1e-15);
    // More cache tokens than input tokens (a broken report) are capped at the input.
    expect(costOf({ inputTokens: 100, outputTokens: 0, cachedInputTokens: 80, cacheWriteTokens: 80 }, price)).to.be.closeTo(
      (80 * 0.3 + 20 * 3.75) / 1e6,
      1e-15,
    );
  });

  it('gives the decimal a cost is, not a binary fraction next to it (rows, spent and totals add these)', () => {
    const mini = { input: 0.15, output: 0.6 };
    // (1 × 0.15 + 14 × 0.6) / 1e6 is 0.000008550000000000001 in binary floating point.
    expect(String(costOf({ inputTokens: 1, outputTokens: 14 }, mini))).to.equal('0.00000855');
    expect(String(costOf({ inputTokens: 1, outputTokens: 27 }, mini))).to.equal('0.00001635');
    expect(String(costOf({ inputTokens: 1, outputTokens: 235 }, mini))).to.equal('0.00014115');
  });

  it('formats costs without exponents or trailing zeros', () => {
    expect(formatCost(0.00000123)).to.equal('0.00000123');
    expect(formatCost(0)).to.equal('0');
    const regexWay = (cost: number) => cost.toFixed(10).replace(/0+$/, '').replace(/\.$/, '') || '0';
    for (const cost of [1, 10, 100, 0.5, 0.1 + 0.2, 123.456, 1e-11, 5e-10, 0.0000375, 2.5e-7, 2.5e-7, -0.25, 1e21, 0, 0])
      expect(formatCost(cost), String(cost)).to.equal(regexWay(cost));
  });
});

describe('metering KeyedQueue', () => {
  it('runs tasks of one key one after another, in order, whatever their outcome; other keys do not wait', async () => {
    const queue = new KeyedQueue();
    const log: string[] = [];
    const step = (name: string, fail = false) => async () => {
      log.push(`${name} start`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push(`${name} end`);
      if (fail) throw new Error(name);
      return name;
    };
    const a1 = queue.run('a', step('a1'));
    const a2 = queue.run('a', step('a2', true));
    const b1 = queue.run('b', step('b1'));
    const a3 = queue.run('a', step('a3'));
    expect(await a1).to.equal('a1');
    let failed: unknown;
    await a2.catch((error: unknown) => (failed = error));
    expect(String(failed)).to.equal('Error: a2');
    expect(await a3).to.equal('a3');
    expect(await b1).to.equal('b1');
    const a = log.filter((line) => line.startsWith('a'));
    expect(a).to.deep.equal(['a1 start', 'a1 end', 'a2 start', 'a2 end', 'a3 start', 'a3 end']);
    expect(log.indexOf('b1 start')).to.be.below(log.indexOf('a1 end'));
  });
});

describe('metering worstUsage: the most a call may be charged for', () => {
  it('reserves max_tokens for each of n choices, each prompt of a completion, and best_of when larger', () => {
    const chat = { model: 'm', max_tokens: 100, messages: [{ role: 'user' as const, content: 'x' }] };
    expect(worstUsage('chat', chat, 10, 4096).outputTokens).to.equal(100);
    expect(worstUsage('chat', { ...chat, n: 10 }, 10, 4096)).to.deep.equal({ inputTokens: 10, outputTokens: 1000, totalTokens: 1010 });
    expect(worstUsage('chat', { model: 'm', messages: [], n: 3 }, 0, 50).outputTokens).to.equal(150);
    const completion = { model: 'm', prompt: ['a', 'b', 'c'], max_tokens: 16, n: 2 } as never;
    expect(worstUsage('completion', completion, 3, 4096).outputTokens).to.equal(16 * 3 * 2);
    expect(worstUsage('completion', { model: 'm', prompt: 'a', max_tokens: 16, n: 2, best_of: 5 } as never, 1, 4096).outputTokens).to.equal(80);
    // Token ids are one prompt; a nonsense n counts as one.
    expect(worstUsage('completion', { model: 'm', prompt: [1, 2, 3], max_tokens: 16, n: 0.5 } as never, 3, 4096).outputTokens).to.equal(16);
  });
});
