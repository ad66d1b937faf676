import { expect } from 'chai';
import type { CandidateTarget, ProviderInstance } from '../../core/index.js';
import { orderTargets } from './index.js';

const provider = (id: string): ProviderInstance => ({ id, type: 't', models: [], operations: {} });
const candidate = (id: string, weight = 1, priority = 0): CandidateTarget => ({ provider: provider(id), model: `${id}-model`, weight, priority });

describe('routing', () => {
  it('tries lower priority tiers first', () => {
    const order = orderTargets([candidate('c', 1, 2), candidate('a', 1, 0), candidate('b', 1, 1)]);
    expect(order.map((t) => t.provider.id)).to.deep.equal(['a', 'b', 'c']);
  });

  it('picks inside a tier in proportion to weight', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const firsts: Record<string, number> = { heavy: 0, light: 0 };
    for (let i = 0; i < 4000; i++) firsts[orderTargets([candidate('heavy', 3), candidate('light', 1)], random)[0]!.provider.id]!++;
    expect(firsts.heavy! / 4000).to.be.within(0.7, 0.8);
  });

  it('keeps every candidate exactly once', () => {
    const order = orderTargets([candidate('a', 5), candidate('b', 1), candidate('c', 2, 1)]);
    expect(order.map((t) => t.provider.id).sort()).to.deep.equal(['a', 'b', 'c']);
    expect(order[2]!.provider.id).to.equal('c');
  });
});
