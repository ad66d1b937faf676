import { expect } from 'chai';
import { rerankPathOf, rerankResultOf, rerankUsage } from './rerank.js';

const endpoint = { origin: 'https://api.example', basePath: '/v1', headers: {}, maxTokensField: 'max_tokens' as const, reasoningContent: false };

describe('openai provider: rerank mapping', () => {
  it('puts rerankPath under the base URL, or from the origin when it starts with a slash', () => {
    expect(rerankPathOf(endpoint, undefined)).to.equal('/v1/rerank');
    expect(rerankPathOf(endpoint, 'reranking')).to.equal('/v1/reranking');
    expect(rerankPathOf(endpoint, '/v2/rerank')).to.equal('/v2/rerank');
    expect(rerankPathOf({ ...endpoint, basePath: '' }, undefined)).to.equal('/rerank');
  });

  it('reads Cohere v1/v2, Jina and score-only answers', () => {
    const cohere = rerankResultOf({ id: 'c', results: [{ index: 1, relevance_score: 0.5, document: { text: 'b' } }], meta: { billed_units: { search_units: 1 } } }, 2);
    expect(cohere).to.deep.equal({ id: 'c', results: [{ index: 1, relevance_score: 0.5, document: { text: 'b' } }], meta: { billed_units: { search_units: 1 } } });
    const jina = rerankResultOf({ results: [{ index: 0, relevance_score: 0.25, document: 'a' }], usage: { total_tokens: 9 } }, 1);
    expect(jina.results).to.deep.equal([{ index: 0, relevance_score: 0.25, document: { text: 'a' } }]);
    expect(jina.id).to.match(/^rerank-/);
    expect(jina.meta).to.deep.equal({});
    expect(rerankResultOf({ results: [{ index: 0, score: 0.7 }] }, 1).results).to.deep.equal([{ index: 0, relevance_score: 0.7 }]);
  });

  it('refuses what is not a rerank answer', () => {
    for (const bad of [null, [], { results: 'x' }, { results: [{ index: -1, relevance_score: 1 }] }, { results: [{ index: 0.5, relevance_score: 1 }] }, { results: [{ index: 0, relevance_score: Infinity }] }]) {
      expect(() => rerankResultOf(JSON.parse(JSON.stringify(bad)) ?? bad, 3), JSON.stringify(bad)).to.throw().with.property('code', 'upstream_error');
    }
    expect(() => rerankResultOf({ results: [{ index: 3, relevance_score: 1 }] }, 3)).to.throw().with.property('code', 'upstream_error');
  });

  it('meters tokens the back end reports, not search units', () => {
    expect(rerankUsage({ usage: { total_tokens: 12 } })).to.deep.equal({ inputTokens: 12, outputTokens: 0, totalTokens: 12 });
    expect(rerankUsage({ usage: { prompt_tokens: 5, total_tokens: 5 } })).to.deep.equal({ inputTokens: 5, outputTokens: 0, totalTokens: 5 });
    expect(rerankUsage({ meta: { tokens: { input_tokens: 7 } } })).to.deep.equal({ inputTokens: 7, outputTokens: 0, totalTokens: 7 });
    expect(rerankUsage({ meta: { billed_units: { search_units: 1 } } })).to.equal(undefined);
    expect(rerankUsage({ usage: { total_tokens: -3 } })).to.equal(undefined);
  });
});
