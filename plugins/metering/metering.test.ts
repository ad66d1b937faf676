import { expect } from 'chai';
import { costOf, formatCost } from './index.js';

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

  it('formats costs without exponents or trailing zeros', () => {
    expect(formatCost(0.00000123)).to.equal('0.00000123');
    expect(formatCost(0)).to.equal('0');
  });
});
