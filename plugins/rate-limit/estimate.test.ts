import { expect } from 'chai';
import { estimateTokens, resetText } from './index.js';

describe('rate-limit token estimates', () => {
  it('counts what the model reads at four characters a token, plus the output allowance', () => {
    const chat = { model: 'm', max_tokens: 100, messages: [{ role: 'user' as const, content: 'x'.repeat(400) }] };
    const estimate = estimateTokens(chat, 4096, 'chat');
    expect(estimate).to.be.within(100 + 100, 100 + 100 + 10);
  });

  it('reads a completion prompt and a Responses input, and their output allowances', () => {
    expect(estimateTokens({ model: 'm', prompt: 'y'.repeat(800), max_tokens: 50 } as never, 4096, 'completion')).to.equal(200 + 50);
    expect(estimateTokens({ model: 'm', prompt: ['a'.repeat(40), 'b'.repeat(40)], max_tokens: 10 } as never, 4096, 'completion')).to.be.at.least(20 + 2 * 10);
    expect(estimateTokens({ model: 'm', input: 'z'.repeat(400), max_output_tokens: 7 } as never, 4096, 'responses')).to.be.within(107, 107 + 10);
  });

  it('gives embeddings no output, and calls that produce no tokens nothing', () => {
    expect(estimateTokens({ model: 'e', input: ['w'.repeat(40), [1, 2, 3]] } as never, 4096, 'embeddings')).to.be.within(10 + 3, 11 + 3);
    expect(estimateTokens({ model: 'i', prompt: 'a cat' } as never, 4096, 'image')).to.equal(0);
    expect(estimateTokens({ model: 's', input: 'say this' } as never, 4096, 'speech')).to.equal(0);
  });
});

describe('rate-limit resetText: the x-ratelimit-reset-* values, as OpenAI writes them', () => {
  it('milliseconds under a second, seconds to the hundredth, minutes and seconds past a minute; never "60s"', () => {
    expect(resetText(250.2)).to.equal('251ms');
    expect(resetText(1_500)).to.equal('1.5s');
    expect(resetText(59_996)).to.equal('1m0s');
    expect(resetText(60_000)).to.equal('1m0s');
    expect(resetText(61_234)).to.equal('1m1.23s');
  });
});
