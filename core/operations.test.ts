import { expect } from 'chai';
import { signatureFor, tagSignature, untagSignature } from './operations.js';

describe('thinking signatures tagged with the type of back end that made them', () => {
  it('a client format carries its own back end type untagged; another is tagged and read back with its maker', () => {
    expect(tagSignature('SIG', 'vendor-a', 'vendor-a')).to.equal('SIG');
    expect(untagSignature('SIG', 'vendor-a')).to.deep.equal({ signature: 'SIG', maker: 'vendor-a' });
    const tagged = tagSignature('R1NJ.Rw==', 'vendor-b', 'vendor-a');
    expect(tagged).to.equal('sy1.sig.vendor-b.R1NJ.Rw==');
    expect(untagSignature(tagged, 'vendor-a')).to.deep.equal({ signature: 'R1NJ.Rw==', maker: 'vendor-b' });
    // A format with no own type (Responses items): untagged content has no known maker.
    expect(untagSignature('opaque')).to.deep.equal({ signature: 'opaque' });
  });

  it("a third party's type with a dot in its name is tagged too, and read back whole (it was taken for the client's own)", () => {
    const tagged = tagSignature('SIG', 'acme.vendor', 'vendor-a');
    expect(untagSignature(tagged, 'vendor-a')).to.deep.equal({ signature: 'SIG', maker: 'acme.vendor' });
    expect(untagSignature(tagSignature('S', 'odd%2Ename', 'x'), 'x')).to.deep.equal({ signature: 'S', maker: 'odd%2Ename' });
    // Handed back, it goes only to a back end of that type.
    expect(signatureFor({ reasoning_signature: 'SIG', reasoning_signature_by: 'acme.vendor' }, 'vendor-a')).to.equal(undefined);
    expect(signatureFor({ reasoning_signature: 'SIG', reasoning_signature_by: 'acme.vendor' }, 'acme.vendor')).to.equal('SIG');
  });
});
