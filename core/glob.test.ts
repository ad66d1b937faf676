import { expect } from 'chai';
import { globMatch, modelAllowed } from './glob.js';

describe('globMatch', () => {
  it('matches * as any run of characters and ? as one, everything else literally', () => {
    const cases: Array<[string, string, boolean]> = [
      ['*', 'anything', true],
      ['*', '', true],
      ['gpt-4o*', 'gpt-4o', true],
      ['gpt-4o*', 'gpt-4o-mini', true],
      ['gpt-4o*', 'gpt-4', false],
      ['*-mini', 'gpt-4o-mini', true],
      ['*-mini', 'gpt-4o-mini-x', false],
      ['*gpt*mini', 'my-gpt-4o-mini', true],
      ['*gpt*mini', 'gptmini', true],
      ['*gpt*mini', 'gpt-mini-2', false],
      ['gpt-?o', 'gpt-4o', true],
      ['gpt-?o', 'gpt-40o', false],
      ['a*b*c', 'abbbbc', true],
      ['a*b*c', 'acb', false],
      ['claude-3.5*', 'claude-3x5', false],
      ['claude-3.5*', 'claude-3.5-sonnet', true],
      ['(x)+[y]', '(x)+[y]', true],
      ['**', '', true],
      ['a**', 'a', true],
      ['', '', true],
      ['', 'a', false],
    ];
    for (const [pattern, name, expected] of cases) expect(globMatch(pattern, name), `${pattern} ~ ${name}`).to.equal(expected);
  });

  it('a megabyte-long name against patterns of several stars is answered in one pass (a backtracking regular expression took minutes)', () => {
    const long = 'gpt'.repeat(350_000) + 'x';
    expect(globMatch('*gpt*mini', long)).to.equal(false);
    expect(globMatch('*gpt-4o*', 'gpt-4o'.repeat(170_000) + '\n')).to.equal(true);
    expect(globMatch('*a*a*a*b', 'a'.repeat(1_000_000))).to.equal(false);
    expect(modelAllowed(['*gpt*mini', 'x*'], long)).to.equal(false);
  });
});
