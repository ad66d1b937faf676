import { expect } from 'chai';
import { ToolCallPieces } from './tool-call-pieces.js';

/** Feed pieces; each piece's call is an existing one or a new one named by the order it opened. */
function resolve(pieces: Array<{ index?: number; id?: string }>): number[] {
  const calls = new ToolCallPieces<number>();
  let opened = 0;
  return pieces.map((piece) => {
    const found = calls.find(piece);
    if (found !== undefined) return found;
    calls.opened(piece, opened);
    return opened++;
  });
}

describe('ToolCallPieces: which call a streamed tool-call piece belongs to', () => {
  it('by index, as OpenAI streams them; a piece without an index continues the last call', () => {
    expect(resolve([{ index: 0, id: 'a' }, { index: 0 }, { index: 1, id: 'b' }, { index: 0 }, { index: 1 }])).to.deep.equal([0, 0, 1, 0, 1]);
    expect(resolve([{ id: 'a' }, {}, { id: 'b' }, {}])).to.deep.equal([0, 0, 1, 1]);
  });

  it('a piece with another id than its index\'s call starts a new call (every call at index 0); one naming a known id goes to that call', () => {
    expect(resolve([{ index: 0, id: 'a' }, { index: 0, id: 'b' }, { index: 0, id: 'a' }, { index: 0, id: 'b' }])).to.deep.equal([0, 1, 0, 1]);
    // The same id repeated on every piece continues its call.
    expect(resolve([{ index: 0, id: 'a' }, { index: 0, id: 'a' }, { index: 1, id: 'b' }, { index: 1, id: 'b' }])).to.deep.equal([0, 0, 1, 1]);
    // A call opened without an id is continued by a piece that names one.
    expect(resolve([{ index: 0 }, { index: 0, id: 'x' }])).to.deep.equal([0, 0]);
  });
});
