import { GatewayError } from './errors.js';
import { hiddenSlot } from './hidden.js';
import type { OperationId, Usage, UpstreamJsonResponse } from './operations.js';
import { usageOf } from './usage.js';
/**
 * The exact bytes a back end answered with, kept beside the body parsed from them.
 *
 * A provider whose answer is already in a client's wire format (an embedding list from an
 * OpenAI-compatible back end, say) attaches the bytes it read; the format that renders that
 * same shape sends them as they are instead of serialising the parsed body again. Large float
 * arrays then reach the client exactly as the back end wrote them, at no serialisation cost.
 *
 * The bytes are held in a private field added to the body itself (see hiddenSlot): spreads, keys,
 * `JSON.stringify` and `structuredClone` never see it, so an `afterUpstream` tap that returns a
 * changed copy gets its copy rendered. A tap that changes a body in place must call
 * `dropUpstreamBytes(body)`.
 */

/** What a body was parsed from: the bytes as read, or the text (one stream event's data, say). */
export type UpstreamBytes = Uint8Array | string;

interface Kept {
  bytes: UpstreamBytes;
  format: string;
}

/** The kept bytes, as a private field of the body (see hiddenSlot). */
const KEPT = hiddenSlot<Kept>();

/**
 * Attach `bytes` (the text `body` was parsed from) to `body`, and return `body`. `format` names
 * the wire format the bytes are in (a format's id, e.g. `openai-chat`): only that format relays
 * them; any other renders from the parsed body.
 */
export function keepUpstreamBytes<T extends object>(body: T, bytes: UpstreamBytes, format: string): T {
  KEPT.set(body, { bytes, format });
  return body;
}

/** The bytes `body` was parsed from, when its provider kept them in `format` and nobody changed it since. */
export function upstreamBytesOf(body: unknown, format: string): UpstreamBytes | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const kept = KEPT.get(body);
  return kept !== undefined && kept.format === format ? kept.bytes : undefined;
}

/** Forget the bytes of a body that was changed in place: it is rendered from the object again. */
export function dropUpstreamBytes(body: object): void {
  KEPT.clear(body);
}

/** Calls whose answering back end got the client's body as it is, by the wire format it was in. */
const SENT_AS_IS = hiddenSlot<string>();

/**
 * Record that the back end answering `call` (its request context) got the client's body as the
 * client sent it (`UpstreamRequest.source`, in `format`), apart from the model name. Nothing was
 * translated: the format relays the answer and drops the losses its own translation noted.
 * A provider calls it once that back end answered (a failed attempt is not the call's).
 */
export function markSentAsIs(call: object, format: string): void {
  SENT_AS_IS.set(call, format);
}

/** The attempt that recorded markSentAsIs failed: the call's answer, if any, comes from another. */
export function forgetSentAsIs(call: object): void {
  SENT_AS_IS.clear(call);
}

/** Whether `call`'s answering back end got the client's body as it is, in `format`. */
export function wasSentAsIs(call: object, format: string): boolean {
  return SENT_AS_IS.get(call) === format;
}

/**
 * What a bridge exchanged with its back end for a call (the request it sent there and the answer
 * it got, in the back end's operation's canonical form), kept on the result it made from them.
 * A result that is not the model's output itself (a compaction: the user's messages and an
 * opaque summary) is counted from these when the back end reported no usage: the prompt the
 * bridge wrote and the answer the model gave.
 */
export interface BridgedExchange {
  request: unknown;
  answer: unknown;
}

const EXCHANGED = hiddenSlot<BridgedExchange>();

/** Keep on `result` what the bridge that made it exchanged with its back end, and return `result`. */
export function keepBridgedExchange<T extends object>(result: T, exchange: BridgedExchange): T {
  EXCHANGED.set(result, exchange);
  return result;
}

/** What the bridge that made `result` exchanged with its back end, if a bridge kept it. */
export function bridgedExchangeOf(result: unknown): BridgedExchange | undefined {
  return result !== null && typeof result === 'object' ? EXCHANGED.get(result) : undefined;
}

/** `NaN`, `Infinity` or `-Infinity` as a value, where JSON has none (what Python's json.dumps writes), in text outside strings. */
const NON_FINITE = /([:,[]\s*)-?(?:Infinity|NaN)(?=\s*[,\]}])/g;

/**
 * `text` with every non-finite number written as a value read as null, and the same words inside
 * a string left as they are: the text between strings is searched, each string skipped whole (in
 * one pass: an unterminated one ends the search).
 */
function nullForNonFinite(text: string): string {
  let out = '';
  let from = 0;
  for (;;) {
    const quote = text.indexOf('"', from);
    const outside = quote === -1 ? text.slice(from) : text.slice(from, quote);
    out += outside.replace(NON_FINITE, '$1null');
    if (quote === -1) return out;
    const end = stringEnd(text, quote);
    out += text.slice(quote, end);
    if (end >= text.length) return out;
    from = end;
  }
}

/**
 * A back end's answer parsed from its bytes; not JSON, an upstream_error the next target may
 * answer instead. An answer that is JSON but for a non-finite number written as Python writes it
 * (a log-probability of `-Infinity`) is read with `null` there; its bytes stay as they came.
 */
export function parseAnswer(bytes: Buffer): unknown {
  try {
    return parseBackEndJson(bytes.toString('utf8'));
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable: true });
  }
}

/**
 * JSON text a back end wrote, parsed: a non-finite number written as Python writes it (`NaN`,
 * `-Infinity`) is read as `null` there (an answer's or a stream event's; their text, relayed,
 * keeps it). Anything else that is not JSON throws.
 */
export function parseBackEndJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    if (text.includes('Infinity') || text.includes('NaN')) return JSON.parse(nullForNonFinite(text)) as unknown;
    throw error;
  }
}

/** The usage a JSON answer reports: its own `usage`, else its body's. */
export function answerUsage(operation: OperationId, response: UpstreamJsonResponse): Usage | undefined {
  return response.usage ?? usageOf(operation, response.body);
}

/** The bytes a format relays for a JSON answer in `format`: those it came in, if nobody changed its body since. */
export function replyBytesOf(response: UpstreamJsonResponse, format: string): UpstreamBytes | undefined {
  return upstreamBytesOf(response.body, format);
}

/** The response header that names what a call's translation could not carry (also in its request-log row). */
export const LOSSES_HEADER = 'x-switchyard-losses';

/** A loss's name as written out: at most this many characters (then `...`). */
const LOSS_NAME_MAX = 80;
/** All of a call's loss names as written out: at most this many characters (then `+N`, the names left out). */
const LOSSES_MAX = 2000;
/** A name that needs no change: visible ASCII without the list's comma or the escapes' percent. */
const PLAIN_LOSS = /^[\x21-\x24\x26-\x2b\x2d-\x7e]{1,80}$/;

/** `name` in visible ASCII: any other character percent-encoded (as UTF-8; a lone surrogate as U+FFFD), cut at LOSS_NAME_MAX. */
function printableLoss(name: string): string {
  if (PLAIN_LOSS.test(name)) return name;
  let out = '';
  for (const ch of name) {
    const code = ch.codePointAt(0)!;
    const piece = code > 0x20 && code < 0x7f && ch !== ',' && ch !== '%' ? ch : Buffer.from(ch).toString('hex').replace(/../g, '%$&').toUpperCase();
    if (out.length + piece.length > LOSS_NAME_MAX) return `${out}...`;
    out += piece;
  }
  return out || '""';
}

/**
 * A call's loss names as the response header, the request log and log lines carry them. Many come
 * from what the client wrote (an unknown field's name is one): a control character or a line
 * break would make the header unwritable (after the back end answered and was paid), a comma
 * would split a name in two, and a name of 20,000 characters would pass what a client's HTTP
 * parser takes. So each is visible ASCII (see printableLoss), and the list stops at LOSSES_MAX
 * characters with `+N`, how many more there were.
 */
export function printableLosses(losses: string[]): string[] {
  let length = 0;
  let plain = true;
  for (const name of losses) {
    length += name.length + 1;
    if (!PLAIN_LOSS.test(name)) plain = false;
  }
  if (plain && length <= LOSSES_MAX) return losses;
  const out: string[] = [];
  const seen = new Set<string>();
  length = 0;
  for (let i = 0; i < losses.length; i++) {
    const name = printableLoss(losses[i]!);
    // Names cut to the same first characters are one name written out.
    if (seen.has(name)) continue;
    if (length + name.length + 1 > LOSSES_MAX - 8) {
      out.push(`+${losses.length - i}`);
      break;
    }
    seen.add(name);
    out.push(name);
    length += name.length + 1;
  }
  return out;
}

/** `x-switchyard-losses` for a call whose translation lost something, else nothing. */
export function lossHeaders(ctx: { losses?: string[] }): Record<string, string> | undefined {
  return ctx.losses?.length ? { [LOSSES_HEADER]: printableLosses(ctx.losses).join(',') } : undefined;
}

/**
 * `raw`, the text of a JSON object that parsed, with the top-level members named in `members` set
 * to the values given: a member it has gets the new value's JSON in place of its own, one it
 * lacks is added at its end. The rest of the text is left as it is, so that what a parse and a
 * new serialisation would change (an integer past 2^53 in a tool call's input, a number's
 * spelling, an escape) reaches the back end as the client wrote it. Undefined when `raw` is not
 * an object's text.
 */
export function withMembers(raw: string, members: Readonly<Record<string, unknown>>): string | undefined {
  let at = skipSpace(raw, 0);
  if (raw.charCodeAt(at) !== 0x7b /* { */) return undefined;
  const wanted = Object.keys(members);
  if (wanted.length === 0) return raw;
  /** Where each member found has its value: [start, end). */
  const found: Array<[number, number, string]> = [];
  let count = 0;
  at++;
  for (;;) {
    at = skipSpace(raw, at);
    const c = raw.charCodeAt(at);
    if (c === 0x7d /* } */ || Number.isNaN(c)) break;
    if (c === 0x2c /* , */) {
      at++;
      continue;
    }
    const keyEnd = stringEnd(raw, at);
    const spelt = raw.slice(at + 1, keyEnd - 1);
    const name = spelt.includes('\\') ? (JSON.parse(raw.slice(at, keyEnd)) as string) : spelt;
    // Past the colon to the value.
    const start = skipSpace(raw, skipSpace(raw, keyEnd) + 1);
    const end = valueEnd(raw, start);
    count++;
    if (Object.hasOwn(members, name)) {
      found.push([start, end, name]);
      // Every member found: nothing after it changes.
      if (found.length === wanted.length) break;
    }
    at = end;
  }
  let out = '';
  let from = 0;
  for (const [start, end, name] of found) {
    out += raw.slice(from, start) + JSON.stringify(members[name]);
    from = end;
  }
  if (found.length === wanted.length) return out + raw.slice(from);
  // The members it lacks go before the closing brace (`at`).
  out += raw.slice(from, at);
  for (const name of wanted) {
    if (found.some((f) => f[2] === name)) continue;
    out += `${count++ > 0 ? ',' : ''}${JSON.stringify(name)}:${JSON.stringify(members[name])}`;
  }
  return out + raw.slice(at);
}

/** The index of the first character at or after `at` that is not JSON white space. */
function skipSpace(text: string, at: number): number {
  for (;;) {
    const c = text.charCodeAt(at);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return at;
    at++;
  }
}

/** The index just past the string that opens at `at` (its quote). */
function stringEnd(text: string, at: number): number {
  let i = at + 1;
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote === -1) return text.length;
    // Escaped when an odd number of backslashes stand before it.
    let slashes = 0;
    while (text.charCodeAt(quote - 1 - slashes) === 0x5c /* \ */) slashes++;
    if (slashes % 2 === 0) return quote + 1;
    i = quote + 1;
  }
}

/** The index just past the value that begins at `at`. */
function valueEnd(text: string, at: number): number {
  const c = text.charCodeAt(at);
  if (c === 0x22 /* " */) return stringEnd(text, at);
  if (c !== 0x7b /* { */ && c !== 0x5b /* [ */) {
    // A number, true, false or null: up to the next comma, brace, bracket or space.
    let i = at;
    for (;;) {
      const d = text.charCodeAt(i);
      if (Number.isNaN(d) || d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) return i;
      i++;
    }
  }
  let depth = 0;
  for (let i = at; i < text.length; i++) {
    const d = text.charCodeAt(i);
    if (d === 0x22 /* " */) i = stringEnd(text, i) - 1;
    else if (d === 0x7b /* { */ || d === 0x5b /* [ */) depth++;
    else if ((d === 0x7d /* } */ || d === 0x5d /* ] */) && --depth === 0) return i + 1;
  }
  return text.length;
}
