import { expect } from 'chai';
import { usageOf } from './usage.js';

describe('usageOf', () => {
  it('reads chat usage, cached and reasoning tokens included', () => {
    const usage = usageOf('chat', {
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 2 } },
    });
    expect(usage).to.deep.equal({ inputTokens: 10, outputTokens: 5, totalTokens: 15, cachedInputTokens: 4, reasoningTokens: 2 });
  });

  it('treats negative, fractional or non-numeric counts as no usage (metering then counts for itself)', () => {
    expect(usageOf('chat', { usage: { prompt_tokens: -5, completion_tokens: 3, total_tokens: -2 } })).to.equal(undefined);
    expect(usageOf('chat', { usage: { prompt_tokens: 1.5, completion_tokens: 3 } })).to.equal(undefined);
    expect(usageOf('chat', { usage: { prompt_tokens: '7', completion_tokens: 3 } })).to.equal(undefined);
    expect(usageOf('embeddings', { usage: { prompt_tokens: -5, total_tokens: -5 } })).to.equal(undefined);
    expect(usageOf('embeddings', { usage: { prompt_tokens: 8, total_tokens: 8 } })).to.deep.equal({ inputTokens: 8, outputTokens: 0, totalTokens: 8 });
    // An absurd count (it would price the call at Infinity) is no count either.
    expect(usageOf('chat', { usage: { prompt_tokens: 1e308, completion_tokens: 1e308, total_tokens: 1e308 } })).to.equal(undefined);
    expect(usageOf('chat', { usage: { prompt_tokens: 2e9, completion_tokens: 1, total_tokens: 2e9 + 1 } })).to.equal(undefined);
  });

  it('reads the prompt tokens written to a cache (part of the input)', () => {
    const usage = usageOf('chat', { usage: { prompt_tokens: 18, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 5, cache_creation_tokens: 2 } } });
    expect(usage).to.include({ inputTokens: 18, cachedInputTokens: 5, cacheWriteTokens: 2 });
  });

  it('never reports more cached tokens than input tokens', () => {
    expect(usageOf('chat', { usage: { prompt_tokens: 3, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 9 } } })?.cachedInputTokens).to.equal(3);
  });
});
