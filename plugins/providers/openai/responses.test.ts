import { expect } from 'chai';
import { namedWaitSeconds } from './responses.js';

describe('openai provider: the wait a rate-limit message names', () => {
  it('reads seconds, milliseconds, minutes and hours as OpenAI writes them, as whole seconds (1 at least, a day at most)', () => {
    expect(namedWaitSeconds('Please try again in 1.5s.')).to.equal(2);
    expect(namedWaitSeconds('Please try again in 20ms.')).to.equal(1);
    expect(namedWaitSeconds('Please try again in 1m26.4s.')).to.equal(87);
    expect(namedWaitSeconds('Please try again in 6m0s.')).to.equal(360);
    expect(namedWaitSeconds('Please try again in 8h38m24s.')).to.equal(31_104);
    expect(namedWaitSeconds('Please try again in 30h0m0s.')).to.equal(86_400);
    expect(namedWaitSeconds('Rate limit reached.')).to.equal(undefined);
  });
});
