/**
 * A byte-pair-encoding token counter with compact tables, run on the gateway's own thread.
 *
 * The ranks are read from gpt-tokenizer's data (the same tables OpenAI's tiktoken publishes) and
 * kept as three typed arrays: every token's bytes end to end, where each token starts, and an
 * open-addressing hash table from bytes to rank. About 2 MB for cl100k_base, 4 MB for o200k_base,
 * none of it on the JavaScript heap, where a `Map` of a hundred thousand strings (what a
 * JavaScript tokenizer usually keeps) costs tens of MB and every major collection walks it.
 *
 * Counting follows tiktoken: the text is split by the encoding's pattern, a piece that is a token
 * counts one, any other piece is merged pair by pair, lowest rank first (leftmost on a tie). A long
 * text is counted in slices of a few milliseconds, so the event loop keeps serving calls.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { TokenizerName } from './tokens.js';

/** The split patterns of the two encodings (tiktoken's, as gpt-tokenizer writes them). */
const CONTRACTION = String.raw`'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])`;
const SPLIT: Record<TokenizerName, string> = {
  cl100k_base: String.raw`${CONTRACTION}|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]|\s+(?!\S)|\s`,
  o200k_base:
    String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:${CONTRACTION})?` +
    String.raw`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:${CONTRACTION})?` +
    String.raw`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
};

/**
 * The longest run of one piece of the split (a run of letters with no space, say) merged as one:
 * a longer one is counted in parts of this many characters. Merging costs n log n, so a 64 KB run
 * took 31 ms with no pause; cut, it may count a token more at each cut, a few in a pathological
 * text, none in a natural one (no natural word is this long).
 */
const LONG_PIECE = 1024;

/** The longest piece whose count is remembered, in UTF-16 units, and how many such are kept at most (under 1 MB). */
const SHORT_PIECE = 64;
const SHORT_PIECES = 4096;

/**
 * A copy of `text` that holds nothing else: a piece of the split is a slice of the whole text,
 * and V8 keeps the whole text alive for as long as the slice lives (a cache key would pin it).
 */
function detached(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

/** How long one slice of counting may hold the event loop, in milliseconds. */
const SLICE_MS = 2;

function fnv1a(bytes: Uint8Array, from: number, to: number): number {
  let hash = 0x811c9dc5;
  for (let i = from; i < to; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  return hash >>> 0;
}

/** The ranks of one encoding: token bytes end to end, their offsets, and a hash table of ranks. */
class RankTable {
  private readonly mask: number;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly offsets: Uint32Array,
    private readonly slots: Int32Array,
  ) {
    this.mask = slots.length - 1;
  }

  /** The table of `count` tokens, token `r` being `bytes[offsets[r], offsets[r + 1])` (empty: no token). */
  static build(bytes: Uint8Array, offsets: Uint32Array, count: number): RankTable {
    let size = 1;
    while (size < count * 2) size <<= 1;
    const table = new RankTable(bytes, offsets, new Int32Array(size));
    for (let rank = 0; rank < count; rank++) if (offsets[rank + 1]! > offsets[rank]!) table.insert(rank);
    return table;
  }

  private insert(rank: number): void {
    const from = this.offsets[rank]!;
    const to = this.offsets[rank + 1]!;
    let slot = fnv1a(this.bytes, from, to) & this.mask;
    while (this.slots[slot] !== 0) {
      // The first rank of a byte string wins (tables hold each string once).
      if (this.equals(this.slots[slot]! - 1, this.bytes, from, to)) return;
      slot = (slot + 1) & this.mask;
    }
    this.slots[slot] = rank + 1;
  }

  private equals(rank: number, bytes: Uint8Array, from: number, to: number): boolean {
    const start = this.offsets[rank]!;
    if (this.offsets[rank + 1]! - start !== to - from) return false;
    for (let i = 0; i < to - from; i++) if (this.bytes[start + i] !== bytes[from + i]) return false;
    return true;
  }

  /** The rank of `bytes[from, to)`, or -1 when it is no token. */
  rank(bytes: Uint8Array, from: number, to: number): number {
    let slot = fnv1a(bytes, from, to) & this.mask;
    for (;;) {
      const entry = this.slots[slot]!;
      if (entry === 0) return -1;
      if (this.equals(entry - 1, bytes, from, to)) return entry - 1;
      slot = (slot + 1) & this.mask;
    }
  }
}

/**
 * How many tokens the bytes `piece[0, length)` make: tiktoken's merge, lowest rank first. Parts are
 * a linked list over the byte positions; a binary heap of (rank, position) finds the next merge,
 * so a long piece costs n log n rather than n².
 */
function mergeCount(table: RankTable, piece: Uint8Array, length: number): number {
  if (length <= 1) return length;
  const next = new Int32Array(length + 1); // the start of the part after the part starting at i
  const prev = new Int32Array(length + 1);
  const pairRank = new Int32Array(length); // the rank of the part at i joined with the next, or -1
  for (let i = 0; i <= length; i++) {
    next[i] = i + 1;
    prev[i] = i - 1;
  }
  // The heap holds (rank, position) pairs; stale entries are skipped when popped.
  const heapRank: number[] = [];
  const heapAt: number[] = [];
  const less = (a: number, b: number) => heapRank[a]! < heapRank[b]! || (heapRank[a] === heapRank[b] && heapAt[a]! < heapAt[b]!);
  const swap = (a: number, b: number) => {
    const r = heapRank[a]!;
    heapRank[a] = heapRank[b]!;
    heapRank[b] = r;
    const p = heapAt[a]!;
    heapAt[a] = heapAt[b]!;
    heapAt[b] = p;
  };
  const push = (rank: number, at: number) => {
    let i = heapRank.length;
    heapRank.push(rank);
    heapAt.push(at);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(i, parent)) break;
      swap(i, parent);
      i = parent;
    }
  };
  const pop = () => {
    const last = heapRank.length - 1;
    swap(0, last);
    heapRank.pop();
    heapAt.pop();
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < heapRank.length && less(left, least)) least = left;
      if (right < heapRank.length && less(right, least)) least = right;
      if (least === i) break;
      swap(i, least);
      i = least;
    }
  };
  const rankAt = (at: number): number => {
    const second = next[at]!;
    if (second >= length) return -1;
    return table.rank(piece, at, next[second]!);
  };
  for (let i = 0; i < length - 1; i++) {
    pairRank[i] = table.rank(piece, i, i + 2);
    if (pairRank[i]! >= 0) push(pairRank[i]!, i);
  }
  pairRank[length - 1] = -1;
  let parts = length;
  while (heapRank.length > 0) {
    const rank = heapRank[0]!;
    const at = heapAt[0]!;
    pop();
    if (pairRank[at] !== rank || next[at]! >= length + 1) continue; // merged away or re-ranked
    // Join the part at `at` with the one after it.
    const gone = next[at]!;
    next[at] = next[gone]!;
    if (next[at]! <= length) prev[next[at]!] = at;
    next[gone] = length + 1; // marks `gone` as no part start any more
    pairRank[gone] = -1;
    parts--;
    pairRank[at] = rankAt(at);
    if (pairRank[at]! >= 0) push(pairRank[at]!, at);
    const before = prev[at]!;
    if (before >= 0) {
      pairRank[before] = rankAt(before);
      if (pairRank[before]! >= 0) push(pairRank[before]!, before);
    }
  }
  return parts;
}

/** A loaded encoding: counts tokens, a slice at a time. */
export class CompactBpe {
  private scratch = Buffer.allocUnsafe(1024);
  /** Short pieces of more than one token, and their counts (see countPiece). */
  private readonly known = new Map<string, number>();
  private lastLong = '';
  private lastLongCount = 0;

  constructor(
    private readonly table: RankTable,
    private readonly split: RegExp,
  ) {}

  /**
   * Tokens in `text`, counted without holding the event loop more than a few milliseconds; given
   * up between two slices once `stop` says the count is moot (what is counted so far is returned).
   */
  async count(text: string, stop?: () => boolean): Promise<number> {
    if (!text) return 0;
    const split = new RegExp(this.split.source, 'gu');
    let tokens = 0;
    let sliceStart = performance.now();
    let work = 0;
    for (let match = split.exec(text); match; match = split.exec(text)) {
      const piece = match[0];
      for (let at = 0; at < piece.length; at += LONG_PIECE) {
        const part = piece.length > LONG_PIECE ? piece.slice(at, at + LONG_PIECE) : piece;
        tokens += this.countPiece(part);
        // The clock is read every 256 short pieces, or after any long one (a long run costs more).
        work += part.length > 64 ? 256 : 1;
        if (work >= 256) {
          work = 0;
          if (performance.now() - sliceStart > SLICE_MS) {
            await nextTurn();
            if (stop?.()) return tokens;
            sliceStart = performance.now();
          }
        }
      }
    }
    return tokens;
  }

  /** Tokens in `text`, all at once (for short texts and tests). */
  countNow(text: string): number {
    const split = new RegExp(this.split.source, 'gu');
    let tokens = 0;
    for (let match = split.exec(text); match; match = split.exec(text)) {
      const piece = match[0];
      for (let at = 0; at < piece.length; at += LONG_PIECE) tokens += this.countPiece(piece.length > LONG_PIECE ? piece.slice(at, at + LONG_PIECE) : piece);
    }
    return tokens;
  }

  private countPiece(piece: string): number {
    // Pieces repeat (words, a run of one character cut into LONG_PIECE parts): a merge's count is
    // remembered for short pieces (SHORT_PIECES of them at most) and for the last long one.
    if (piece.length > SHORT_PIECE) {
      if (piece === this.lastLong) return this.lastLongCount;
      const count = this.countNew(piece);
      this.lastLong = detached(piece);
      this.lastLongCount = count;
      return count;
    }
    const known = this.known.get(piece);
    if (known !== undefined) return known;
    const count = this.countNew(piece);
    if (count > 1) {
      if (this.known.size >= SHORT_PIECES) this.known.clear();
      this.known.set(detached(piece), count);
    }
    return count;
  }

  private countNew(piece: string): number {
    // Three bytes per UTF-16 unit at most: the piece always fits.
    if (piece.length * 3 > this.scratch.length) this.scratch = Buffer.allocUnsafe(piece.length * 3);
    const length = this.scratch.write(piece, 0, 'utf8');
    if (this.table.rank(this.scratch, 0, length) >= 0) return 1;
    return mergeCount(this.table, this.scratch, length);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const ESCAPED: Record<number, number> = { 0x6e: 0x0a, 0x74: 0x09, 0x72: 0x0d, 0x62: 0x08, 0x66: 0x0c, 0x76: 0x0b, 0x30: 0x00 };

function hexAt(source: Uint8Array, at: number, digits: number): number {
  let value = 0;
  for (let i = at; i < at + digits; i++) {
    const c = source[i]!;
    const digit = c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57;
    if (!(digit >= 0 && digit < 16)) throw new Error(`bad hex digit at ${i} of the tokenizer rank file`);
    value = value * 16 + digit;
  }
  return value;
}

/** Write code point `cp` as UTF-8 (a lone surrogate as U+FFFD, as a TextEncoder does). */
function writeUtf8(out: Uint8Array, at: number, cp: number): number {
  if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
  if (cp < 0x80) {
    out[at] = cp;
    return 1;
  }
  if (cp < 0x800) {
    out[at] = 0xc0 | (cp >> 6);
    out[at + 1] = 0x80 | (cp & 0x3f);
    return 2;
  }
  if (cp < 0x10000) {
    out[at] = 0xe0 | (cp >> 12);
    out[at + 1] = 0x80 | ((cp >> 6) & 0x3f);
    out[at + 2] = 0x80 | (cp & 0x3f);
    return 3;
  }
  out[at] = 0xf0 | (cp >> 18);
  out[at + 1] = 0x80 | ((cp >> 12) & 0x3f);
  out[at + 2] = 0x80 | ((cp >> 6) & 0x3f);
  out[at + 3] = 0x80 | (cp & 0x3f);
  return 4;
}

/**
 * gpt-tokenizer's rank file is a JavaScript module of array literals (`const c0 = [ ... ];`), one
 * element per rank: a string (the token's text) or an array of byte values. It is read here byte
 * by byte, straight into the table's buffer, rather than imported or parsed into JavaScript
 * values: a hundred thousand strings would cost tens of MB of heap for a moment (and an imported
 * module's arrays for good), where this costs the file's own bytes while it is read.
 */
export function parseRankFile(source: Uint8Array): { bytes: Uint8Array; offsets: Uint32Array; count: number } {
  // Every element's bytes are no more than its spelling: the file's size bounds them all.
  const out = new Uint8Array(source.length);
  let offsets: Uint32Array = new Uint32Array(1 << 17);
  let count = 0;
  let written = 0;
  const file = Buffer.from(source.buffer, source.byteOffset, source.length);
  /** Rank `count` starts at the bytes written so far (an empty rank is a hole). */
  const startRank = () => {
    if (count + 1 >= offsets.length) offsets = grow(offsets);
    offsets[count] = written;
  };
  for (let found = file.indexOf('\nconst c'); found >= 0; found = file.indexOf('\nconst c', found + 1)) {
    let at = file.indexOf(' = [', found);
    if (at < 0) break;
    at += 4;
    let expecting = true; // an element may start here (a comma before it was seen)
    for (;;) {
      if (at >= source.length) throw new Error('the tokenizer rank file ends inside an array');
      const c = source[at]!;
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) {
        at++;
        continue;
      }
      if (c === 0x5d) break; // ']': the chunk's end
      if (c === 0x2c) {
        if (expecting) {
          startRank(); // a hole: no token at this rank
          count++;
        }
        expecting = true;
        at++;
        continue;
      }
      if (!expecting) throw new Error(`a comma is missing at ${at} of the tokenizer rank file`);
      expecting = false;
      startRank();
      if (c === QUOTE) {
        at++;
        for (;;) {
          if (at >= source.length) throw new Error('the tokenizer rank file ends inside a string');
          const d = source[at]!;
          if (d === QUOTE) break;
          if (d !== BACKSLASH) {
            out[written++] = d;
            at++;
            continue;
          }
          const e = source[at + 1]!;
          if (e === 0x78) {
            written += writeUtf8(out, written, hexAt(source, at + 2, 2));
            at += 4;
          } else if (e === 0x75) {
            let cp = hexAt(source, at + 2, 4);
            at += 6;
            if (cp >= 0xd800 && cp <= 0xdbff && source[at] === BACKSLASH && source[at + 1] === 0x75) {
              const low = hexAt(source, at + 2, 4);
              if (low >= 0xdc00 && low <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
                at += 6;
              }
            }
            written += writeUtf8(out, written, cp);
          } else {
            out[written++] = ESCAPED[e] ?? e;
            at += 2;
          }
        }
        at++;
      } else if (c === 0x5b) {
        // '[': byte values
        at++;
        for (;;) {
          if (at >= source.length) throw new Error('the tokenizer rank file ends inside a byte array');
          const d = source[at]!;
          if (d === 0x5d) break;
          if (d >= 0x30 && d <= 0x39) {
            let value = 0;
            while (source[at]! >= 0x30 && source[at]! <= 0x39) value = value * 10 + source[at++]! - 0x30;
            out[written++] = value;
          } else at++;
        }
        at++;
      } else throw new Error(`unexpected byte ${c} at ${at} of the tokenizer rank file`);
      count++;
    }
    found = at;
  }
  if (count === 0) throw new Error('the tokenizer rank file holds no ranks');
  offsets[count] = written;
  return { bytes: out.slice(0, written), offsets: offsets.slice(0, count + 1), count };
}

function grow(offsets: Uint32Array): Uint32Array {
  const bigger = new Uint32Array(offsets.length * 2);
  bigger.set(offsets);
  return bigger;
}

const require = createRequire(import.meta.url);
const loaded = new Map<TokenizerName, Promise<CompactBpe>>();

/** The encoding `name`, loaded once per process (a few tens of milliseconds) and shared. */
export function loadCompactBpe(name: TokenizerName): Promise<CompactBpe> {
  let pending = loaded.get(name);
  if (!pending) {
    pending = (async () => {
      const packageDir = path.dirname(require.resolve('gpt-tokenizer/package.json'));
      const source = await readFile(path.join(packageDir, 'esm', 'bpeRanks', `${name}.js`));
      const { bytes, offsets, count } = parseRankFile(source);
      return new CompactBpe(RankTable.build(bytes, offsets, count), new RegExp(SPLIT[name], 'gu'));
    })();
    // A failed load is not cached: the next count tries again.
    pending.catch(() => loaded.delete(name));
    loaded.set(name, pending);
  }
  return pending;
}
