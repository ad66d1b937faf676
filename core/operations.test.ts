import { expect } from 'chai';
import { signatureFor, tagSignature, untagSignature } from './operations.js';

describe('thinking signatures tagged with the type of back end that made them', () => {
  it('a client format carries its own back end type untagged; another is tagged and read back with its maker', () => {
    expect(tagSignature('SIG', 'anthropic', 'anthropic')).to.equal('SIG');
    expect(untagSignature('SIG', 'anthropic')).to.deep.equal({ signature: 'SIG', maker: 'anthropic' });
    const tagged = tagSignature('R1NJ.Rw==', 'gemini', 'anthropic');
    expect(tagged).to.equal('sy1.sig.gemini.R1NJ.Rw==');
    expect(untagSignature(tagged, 'anthropic')).to.deep.equal({ signature: 'R1NJ.Rw==', maker: 'gemini' });
    // A format with no own type (Responses items): untagged content has no known maker.
    expect(untagSignature('opaque')).to.deep.equal({ signature: 'opaque' });
  });

  it("a third party's type with a dot in its name is tagged too, and read back whole (it was taken for the client's own)", () => {
    const tagged = tagSignature('SIG', 'acme.claude', 'anthropic');
    expect(untagSignature(tagged, 'anthropic')).to.deep.equal({ signature: 'SIG', maker: 'acme.claude' });
    expect(untagSignature(tagSignature('S', 'odd%2Ename', 'x'), 'x')).to.deep.equal({ signature: 'S', maker: 'odd%2Ename' });
    // Handed back, it goes only to a back end of that type.
    expect(signatureFor({ reasoning_signature: 'SIG', reasoning_signature_by: 'acme.claude' }, 'anthropic')).to.equal(undefined);
    expect(signatureFor({ reasoning_signature: 'SIG', reasoning_signature_by: 'acme.claude' }, 'acme.claude')).to.equal('SIG');
  });
});
