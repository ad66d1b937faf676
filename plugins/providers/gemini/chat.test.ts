import { expect } from 'chai';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { forGemini, GEMINI_3 } from './chat.js';

type Json = Record<string, any>;

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('gemini provider: a Gemini-style body passed through (forGemini)', () => {
  const body = (): Json => ({
    contents: [
      { role: 'user', parts: [{ text: 'weather?' }] },
      // A turn another back end answered: its signature tagged by the gateway.
      { role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, thoughtSignature: b64('sy1.sig.anthropic.SIG') }] },
      { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'rain' } } }] },
      // A turn with no signature at all (a client that kept none).
      { role: 'model', parts: [{ functionCall: { name: 'g', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'g', response: { output: 'sun' } } }] },
    ],
  });

  it("leaves another back end's signature out (Gemini 3: Google's sentinel on the calls) without changing the client's body, which another target may be sent", () => {
    const sent = body();
    const before = structuredClone(sent);
    const losses = new Losses();
    const out = forGemini(sent, 'gemini-3-pro', losses) as Json;
    expect(sent).to.deep.equal(before);
    expect(out.contents[1].parts[0].thoughtSignature).to.equal('skip_thought_signature_validator');
    expect(out.contents[3].parts[0].thoughtSignature).to.equal('skip_thought_signature_validator');
    expect(losses.names).to.deep.equal(['thoughtSignature.other_back_end']);
    // Another model: no sentinel, the foreign signature still left out.
    const other = forGemini(body(), 'gemini-2.5-flash', new Losses()) as Json;
    expect(other.contents[1].parts[0]).to.not.have.property('thoughtSignature');
    expect(other.contents[3].parts[0]).to.not.have.property('thoughtSignature');
  });

  it("sends Google's own signature, tagged by an earlier turn, untagged; a body with nothing tagged is sent as it is", () => {
    const own = body();
    own.contents[1].parts[0].thoughtSignature = b64('sy1.sig.gemini.R1NJ');
    expect((forGemini(own, 'gemini-2.5-flash', new Losses()) as Json).contents[1].parts[0].thoughtSignature).to.equal('R1NJ');
    const plain: Json = { contents: [{ role: 'model', parts: [{ text: 'hi', thoughtSignature: 'R1NJ' }] }] };
    expect(forGemini(plain, 'gemini-3-pro', new Losses())).to.equal(plain);
  });
});

describe('gemini provider: which models get the sentinel for a call handed back unsigned', () => {
  it('Gemini 3 by name after any path, and the -latest aliases; not Gemini 2.5 nor a name that only holds the text', () => {
    for (const model of ['gemini-3-pro-preview', 'models/gemini-3-flash', 'publishers/google/models/gemini-3-pro', 'gemini-pro-latest', 'gemini-flash-latest', 'models/gemini-flash-lite-latest']) {
      expect(GEMINI_3.test(model), model).to.equal(true);
    }
    for (const model of ['gemini-2.5-pro', 'gemini-2.0-flash', 'my-gemini-3-proxy', 'gemini-pro-latest-2']) {
      expect(GEMINI_3.test(model), model).to.equal(false);
    }
  });
});
