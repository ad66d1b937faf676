/**
 * A JSON object read a piece at a time, as a streamed tool call's arguments arrive: how much of
 * each piece keeps the text a valid beginning of a JSON object, and, when the text ends broken or
 * unfinished, the shortest text that completes what was let through into a valid object. A
 * client may parse a streamed call's argument pieces as one JSON object (the SDKs throw
 * otherwise), or wait for them to be whole; a back end of another API may stream arguments that
 * are not one. Each piece is read once: knowing whether the text is whole costs nothing more.
 */
export class JsonObjectPrefix {
  /** Open containers, outermost first. */
  private readonly stack: Array<'{' | '['> = [];
  /** What may come next outside a string or a number. */
  private expect: 'start' | 'key' | 'colon' | 'value' | 'after' | 'end' = 'start';
  /** Right after `{` or `[`: the container may close at once. */
  private fresh = false;
  private inString = false;
  private stringIsKey = false;
  /** In a string: after a backslash (-1), or the hex digits a \u escape still needs (1-4). */
  private escape = 0;
  /** A number or a literal (true, false, null) being read, and its state. */
  private token: { kind: 'number'; state: NumberState } | { kind: 'literal'; word: string; at: number } | undefined;
  /** The text stopped being a valid beginning of an object; nothing more is let through. */
  broken = false;
  /** The unfinished escape at the end of the text so far, not yet let through. */
  private held = '';
  /**
   * A comma (and the blanks after it) read, and nothing after it yet: held back until what
   * follows shows it separates two members, so that a text that ends or breaks there is
   * completed without making up a member (`"":null`) the back end never sent.
   */
  private pendingComma = false;

  /** Whether the text so far is one whole object. */
  get complete(): boolean {
    return !this.broken && this.expect === 'end' && this.token === undefined && !this.inString;
  }

  /**
   * What to let through of `piece`: all of it while the text stays valid, up to where it broke
   * when it breaks. An escape in a string not yet whole (`\`, `\u00`) waits for the next piece: a
   * text that breaks inside it is completed without it, so the completion never makes up a
   * character the back end did not send.
   */
  feed(piece: string): string {
    if (this.broken) return '';
    const text = this.held + piece;
    let safe = 0;
    for (let i = 0; i < piece.length; i++) {
      const c = piece[i]!;
      if (!this.step(c)) {
        this.broken = true;
        this.held = '';
        return text.slice(0, safe);
      }
      // Something after a held comma: the comma separated two members after all.
      if (this.pendingComma && c !== ',' && c !== ' ' && c !== '\n' && c !== '\r' && c !== '\t') this.pendingComma = false;
      if (this.escape === 0 && !this.pendingComma) safe = text.length - piece.length + i + 1;
    }
    this.held = text.slice(safe);
    return text.slice(0, safe);
  }

  /** What completes the valid text so far into one object ('{}' when nothing of it was valid). */
  completion(): string {
    if (this.expect === 'start') return '{}';
    // A comma held back (see pendingComma) was never let through: the text ends after a value.
    if (this.pendingComma) {
      this.pendingComma = false;
      this.expect = 'after';
    }
    let out = '';
    if (this.inString) {
      // An unfinished escape was held back (see feed): the string ends before it.
      out += '"';
      this.inString = false;
      if (this.stringIsKey) out += ':null';
      this.expect = 'after';
    } else if (this.token) {
      if (this.token.kind === 'literal') out += this.token.word.slice(this.token.at);
      else if (this.token.state === 'minus' || this.token.state === 'dot' || this.token.state === 'e' || this.token.state === 'sign') out += '0';
      this.token = undefined;
      this.expect = 'after';
    }
    const top = this.stack[this.stack.length - 1];
    if (this.expect === 'colon') out += ':null';
    else if (this.expect === 'value' && !(this.fresh && top === '[')) out += 'null';
    else if (this.expect === 'key' && !this.fresh) out += '"":null';
    for (let i = this.stack.length - 1; i >= 0; i--) out += this.stack[i] === '{' ? '}' : ']';
    return out;
  }

  private step(c: string): boolean {
    if (this.inString) return this.stringChar(c);
    if (this.token) {
      const went = this.tokenChar(c);
      if (went === 'on') return true;
      if (went === 'wrong') return false;
      this.token = undefined;
      this.expect = 'after';
    }
    if (c === ' ' || c === '\n' || c === '\r' || c === '\t') return true;
    switch (this.expect) {
      case 'start':
        if (c !== '{') return false;
        this.open('{');
        return true;
      case 'key':
        if (c === '}' && this.fresh) return this.close('{');
        if (c !== '"') return false;
        this.inString = true;
        this.stringIsKey = true;
        this.fresh = false;
        return true;
      case 'colon':
        if (c !== ':') return false;
        this.expect = 'value';
        return true;
      case 'value':
        if (c === ']' && this.fresh && this.stack[this.stack.length - 1] === '[') return this.close('[');
        this.fresh = false;
        return this.valueStart(c);
      case 'after': {
        const top = this.stack[this.stack.length - 1];
        if (c === ',') {
          this.expect = top === '{' ? 'key' : 'value';
          this.pendingComma = true;
          return true;
        }
        if ((c === '}' && top === '{') || (c === ']' && top === '[')) return this.close(top);
        return false;
      }
      case 'end':
        return false;
    }
  }

  private valueStart(c: string): boolean {
    if (c === '{' || c === '[') {
      this.open(c);
      return true;
    }
    if (c === '"') {
      this.inString = true;
      this.stringIsKey = false;
      return true;
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      this.token = { kind: 'number', state: c === '-' ? 'minus' : c === '0' ? 'zero' : 'int' };
      return true;
    }
    for (const word of ['true', 'false', 'null']) {
      if (c === word[0]) {
        this.token = { kind: 'literal', word, at: 1 };
        return true;
      }
    }
    return false;
  }

  private stringChar(c: string): boolean {
    if (this.escape === -1) {
      if (c === 'u') this.escape = 4;
      else if ('"\\/bfnrt'.includes(c)) this.escape = 0;
      else return false;
      return true;
    }
    if (this.escape > 0) {
      if (!/[0-9a-fA-F]/.test(c)) return false;
      this.escape--;
      return true;
    }
    if (c === '\\') {
      this.escape = -1;
      return true;
    }
    if (c === '"') {
      this.inString = false;
      this.expect = this.stringIsKey ? 'colon' : 'after';
      return true;
    }
    return c >= ' ';
  }

  /** Whether `c` goes on the number or literal being read, ends it (a whole one), or is wrong. */
  private tokenChar(c: string): 'on' | 'ended' | 'wrong' {
    const token = this.token!;
    if (token.kind === 'literal') {
      if (token.at === token.word.length) return 'ended';
      if (c !== token.word[token.at]) return 'wrong';
      token.at++;
      return 'on';
    }
    const next = NUMBER[token.state][classOf(c)];
    if (next !== undefined) {
      token.state = next;
      return 'on';
    }
    return token.state === 'zero' || token.state === 'int' || token.state === 'frac' || token.state === 'exp' ? 'ended' : 'wrong';
  }

  private open(c: '{' | '['): void {
    this.stack.push(c);
    this.expect = c === '{' ? 'key' : 'value';
    this.fresh = true;
  }

  private close(c: '{' | '['): boolean {
    if (this.stack.pop() !== c) return false;
    this.fresh = false;
    this.expect = this.stack.length === 0 ? 'end' : 'after';
    return true;
  }
}

type NumberState = 'minus' | 'zero' | 'int' | 'dot' | 'frac' | 'e' | 'sign' | 'exp';
type CharClass = 'digit0' | 'digit' | 'dot' | 'e' | 'sign' | 'other';

function classOf(c: string): CharClass {
  if (c === '0') return 'digit0';
  if (c >= '1' && c <= '9') return 'digit';
  if (c === '.') return 'dot';
  if (c === 'e' || c === 'E') return 'e';
  if (c === '+' || c === '-') return 'sign';
  return 'other';
}

/** A JSON number's states, and where each character takes it (none: the number cannot go on). */
const NUMBER: Record<NumberState, Partial<Record<CharClass, NumberState>>> = {
  minus: { digit0: 'zero', digit: 'int' },
  zero: { dot: 'dot', e: 'e' },
  int: { digit0: 'int', digit: 'int', dot: 'dot', e: 'e' },
  dot: { digit0: 'frac', digit: 'frac' },
  frac: { digit0: 'frac', digit: 'frac', e: 'e' },
  e: { digit0: 'exp', digit: 'exp', sign: 'sign' },
  sign: { digit0: 'exp', digit: 'exp' },
  exp: { digit0: 'exp', digit: 'exp' },
};
