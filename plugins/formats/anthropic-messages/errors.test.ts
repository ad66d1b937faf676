import { expect } from 'chai';
import { promptTooLong } from './errors.js';

describe("anthropic-messages errors: a prompt too long in Anthropic's words", () => {
  it("gives the figures a back end's message holds, as Anthropic's API words them", () => {
    expect(promptTooLong("The upstream service rejected the request: This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")).to.equal(
      'prompt is too long: 9000 tokens > 8192 maximum',
    );
    expect(promptTooLong("This model's maximum context length is 128000 tokens. However, you requested 130000 tokens (120000 in the messages, 10000 in the completion).")).to.equal(
      'input length and `max_tokens` exceed context limit: 120000 + 10000 > 128000',
    );
    expect(
      promptTooLong("Requested token count exceeds the model's maximum context length of 262144 tokens. You requested a total of 262462 tokens: 230462 tokens from the input messages and 32000 tokens for the completion."),
    ).to.equal('input length and `max_tokens` exceed context limit: 230462 + 32000 > 262144');
    expect(promptTooLong('The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).')).to.equal('prompt is too long: 1200000 tokens > 1048576 maximum');
    expect(promptTooLong('Input tokens exceed the configured limit of 272000 tokens. Your messages resulted in 300000 tokens. Please reduce the length of the messages.')).to.equal(
      'prompt is too long: 300000 tokens > 272000 maximum',
    );
  });

  it("keeps Anthropic's own words as they are, reads figures with thousands separators, and vLLM's prompt-and-output wording", () => {
    expect(promptTooLong('The upstream service rejected the request: input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000')).to.equal(
      'input length and `max_tokens` exceed context limit: 190000 + 32000 > 200000',
    );
    expect(promptTooLong('The upstream service rejected the request: prompt is too long: 210000 tokens > 200000 maximum')).to.equal('prompt is too long: 210000 tokens > 200000 maximum');
    expect(promptTooLong("This model's maximum context length is 128,000 tokens. However, your messages resulted in 129,500 tokens.")).to.equal('prompt is too long: 129500 tokens > 128000 maximum');
    expect(promptTooLong("This model's maximum context length is 32768 tokens. However, you requested 1000 output tokens and your prompt contains at least 32769 input tokens, for a total of at least 33769 tokens.")).to.equal(
      'input length and `max_tokens` exceed context limit: 32769 + 1000 > 32768',
    );
  });

  it('keeps the words and the message when it has no figures', () => {
    expect(promptTooLong('The upstream service rejected the request: Your input exceeds the context window of this model.')).to.equal(
      'prompt is too long: The upstream service rejected the request: Your input exceeds the context window of this model.',
    );
  });
});
