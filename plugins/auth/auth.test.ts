import { expect } from 'chai';
import type { RequestContext } from '../../core/index.js';
import { hashSecret } from '../../core/store/index.js';
import { presentedKey, SecretHashes } from './index.js';

const ctx = (headers: Record<string, string>, query: Record<string, string | string[]> = {}, keyHeaders?: string[], keyQuery?: string[]) =>
  ({ headers, query, keyHeaders, keyQuery }) as unknown as RequestContext;

describe('auth', () => {
  it('reads the Bearer token first, then the format-declared headers and query names', () => {
    expect(presentedKey(ctx({ authorization: 'Bearer sk-one' }))).to.equal('sk-one');
    expect(presentedKey(ctx({ authorization: 'bearer   sk-two  ' }))).to.equal('sk-two');
    expect(presentedKey(ctx({ 'x-api-key': 'sk-three' }))).to.equal(undefined);
    expect(presentedKey(ctx({ 'x-api-key': 'sk-three' }, {}, ['x-api-key']))).to.equal('sk-three');
    expect(presentedKey(ctx({}, { key: 'sk-four' }, [], ['key']))).to.equal('sk-four');
    expect(presentedKey(ctx({ authorization: 'Basic abc' }))).to.equal(undefined);
    // A query key given twice: the same one is that key, two different ones none.
    expect(presentedKey(ctx({}, { key: ['sk-five', 'sk-five'] }, [], ['key']))).to.equal('sk-five');
    expect(presentedKey(ctx({}, { key: ['sk-five', 'sk-six'] }, [], ['key']))).to.equal(undefined);
  });

  it('stores keys as SHA-256 hashes', () => {
    expect(hashSecret('sk-test')).to.match(/^[0-9a-f]{64}$/);
    expect(hashSecret('sk-test')).to.not.include('sk-test');
  });
});

describe('SecretHashes', () => {
  it('gives the stored hash of a secret, remembering a bounded number of short secrets only', () => {
    const hashes = new SecretHashes(3);
    for (const secret of ['sk-a', 'sk-b', 'sk-a', 'sk-c']) expect(hashes.of(secret)).to.equal(hashSecret(secret));
    expect(hashes.memoized).to.equal(3);
    expect(hashes.of('sk-d')).to.equal(hashSecret('sk-d'));
    expect(hashes.memoized).to.equal(1);
    const long = `sk-${'x'.repeat(300)}`;
    expect(hashes.of(long)).to.equal(hashSecret(long));
    expect(hashes.memoized).to.equal(1);
  });
});
