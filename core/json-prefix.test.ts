import { expect } from 'chai';
import { JsonObjectPrefix } from './json-prefix.js';

/** What a stream lets through of `text` cut into `pieces`, and what it adds at the end. */
function stream(pieces: string[]): { sent: string; added: string; tracker: JsonObjectPrefix } {
  const tracker = new JsonObjectPrefix();
  let sent = '';
  for (const piece of pieces) sent += tracker.feed(piece);
  const added = tracker.complete ? '' : tracker.completion();
  return { sent, added, tracker };
}

/** `text` cut at every `size` characters. */
function cut(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

const VALID = [
  '{}',
  ' { "city" : "Paris" } ',
  '{"a":1,"b":[1,2,{"c":null}],"d":{"e":true,"f":false},"g":-0.5e+10,"h":"q\\"uote\\\\ \\u00e9"}',
  '{"list":[],"obj":{},"n":0,"x":[[],[{}]]}',
];

const BROKEN = [
  '{"a":1,}',
  'not json at all',
  '[1,2]',
  '"str"',
  '{"a":tru}',
  '{"a":01}',
  '{"a":1.}',
  '{"a" 1}',
  '{"a":"line\nbreak"}',
  '{"a":1}}',
  '{"a":"\\x"}',
  '{"a":[1,2',
  '{"path":"src/a.ts","content":"const x = 1;\\n',
  '{"a":"\\u00',
  '{"a":-',
  '{"a":1e',
  '{"k',
  '{"a":1,"b"',
  '{"a":[1,',
];

describe('JsonObjectPrefix: a streamed object let through while valid, completed when it is not', () => {
  it('lets a valid object through whole, however it is cut, and adds nothing', () => {
    for (const text of VALID) {
      for (const size of [1, 2, 3, 7, 1000]) {
        const { sent, added, tracker } = stream(cut(text, size));
        expect(sent, text).to.equal(text);
        expect(added, text).to.equal('');
        expect(tracker.complete).to.equal(true);
      }
    }
  });

  it('turns anything else into what was valid of it plus a completion: always one JSON object', () => {
    for (const text of BROKEN) {
      for (const size of [1, 2, 5, 1000]) {
        const { sent, added } = stream(cut(text, size));
        expect(text.startsWith(sent), `${text} sent ${sent}`).to.equal(true);
        const whole = sent + added;
        let parsed: unknown;
        expect(() => (parsed = JSON.parse(whole)), `${text} -> ${whole}`).to.not.throw();
        expect(parsed, whole).to.be.an('object').and.not.be.an('array');
      }
    }
  });

  it('keeps what it can: an unfinished file write keeps its path and the content so far', () => {
    const { sent, added } = stream(cut('{"path":"src/a.ts","content":"const x = 1;\\n', 4));
    expect(JSON.parse(sent + added)).to.deep.equal({ path: 'src/a.ts', content: 'const x = 1;\n' });
    expect(stream(['not json']).added).to.equal('{}');
    expect(JSON.parse(stream(['{"a":1,}']).sent + stream(['{"a":1,}']).added)).to.deep.equal({ a: 1 });
  });

  it('never makes up a member: a comma waits for what follows it, and a text that ends or breaks after it is completed without it', () => {
    // A back end's arguments broke after a comma: before, `"":null` was made up to close them.
    const broken = stream(['{"city": "Ro', 'me", oops']);
    expect(broken.sent).to.equal('{"city": "Rome"');
    expect(JSON.parse(broken.sent + broken.added)).to.deep.equal({ city: 'Rome' });
    const ended = stream(['{"a":[1,', ' ']);
    expect(ended.sent).to.equal('{"a":[1');
    expect(JSON.parse(ended.sent + ended.added)).to.deep.equal({ a: [1] });
    // A comma that does separate two members goes with the next one, however the pieces are cut.
    const whole = stream(['{"a":1,', ' ', '"b":2}']);
    expect(whole.sent).to.equal('{"a":1, "b":2}');
    expect(whole.added).to.equal('');
  });

  it('never makes up a character: an escape the text broke in is left out, not completed', () => {
    // An invalid escape (\\q) in the second piece: before, `": "a\\` went through and the completion
    // made the backslash a newline the model never wrote.
    const broken = stream(['{"pattern', '": "a\\qb"', ', "x": tr', 'u']);
    expect(broken.sent).to.equal('{"pattern": "a');
    expect(JSON.parse(broken.sent + broken.added)).to.deep.equal({ pattern: 'a' });
    // A backslash at a piece's end waits for the next piece: let through with it when the escape is whole.
    const split = stream(['{"p": "a\\', 'nb"}']);
    expect(split.sent).to.equal('{"p": "a\\nb"}');
    expect(split.added).to.equal('');
    const unfinished = stream(['{"p": "a\\u00', 'zz"}']);
    expect(unfinished.sent).to.equal('{"p": "a');
    expect(JSON.parse(unfinished.sent + unfinished.added)).to.deep.equal({ p: 'a' });
  });
});
