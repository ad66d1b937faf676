import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ERRORS } from '../core/errors.js';
import { repoRoot } from './support/paths.js';

describe('docs/errors.md', () => {
  it('lists every error code with its status and type', () => {
    const doc = readFileSync(path.join(repoRoot, 'docs', 'errors.md'), 'utf8');
    for (const [code, spec] of Object.entries(ERRORS)) {
      expect(doc, code).to.include(`| \`${code}\` | ${spec.status} | \`${spec.type}\` |`);
    }
  });
});
