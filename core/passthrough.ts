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

/** Whether `call`'s answering back end got the client's body as it is, in `format`. */
export function wasSentAsIs(call: object, format: string): boolean {
  return SENT_AS_IS.get(call) === format;
}

/** A relayed answer's text, and its body once something has read it. */
interface Relayed {
  bytes: Buffer;
  format: string;
  /** The answer's `usage` member, read from the end of its text. */
  usage: object;
  /** Whether `body` holds the body: parsed from `bytes` on first read, or put there by a tap. */
  read: boolean;
  body: unknown;
}

const RELAYED = hiddenSlot<Relayed>();

/**
 * A back end's answer parsed from its bytes; not JSON, an upstream_error (`retryable` while the
 * attempt can still move on to the next target).
 */
export function parseAnswer(bytes: Buffer, retryable: boolean): unknown {
  try {
    return JSON.parse(bytes.toString('utf8')) as unknown;
  } catch {
    throw new GatewayError('upstream_error', { params: { detail: 'the back end answered with something that is not JSON' }, retryable });
  }
}

/** A parsed answer with the bytes it came from kept for `format` when it is an object (see keepUpstreamBytes). */
export function keptAnswer(parsed: unknown, bytes: Buffer, format: string): unknown {
  return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? keepUpstreamBytes(parsed, bytes, format) : parsed;
}

function readBody(this: object): unknown {
  const relayed = RELAYED.get(this)!;
  if (!relayed.read) {
    // Its ends and its usage were JSON; if something between them is not, the attempt is over.
    relayed.body = keptAnswer(parseAnswer(relayed.bytes, false), relayed.bytes, relayed.format);
    relayed.read = true;
  }
  return relayed.body;
}

function replaceBody(this: object, value: unknown): void {
  const relayed = RELAYED.get(this)!;
  relayed.body = value;
  relayed.read = true;
}

/** `body` as an own, enumerable property (spreads and `JSON.stringify` read it), parsed when first read. */
const LAZY_BODY: PropertyDescriptor = { get: readBody, set: replaceBody, enumerable: true, configurable: true };

/**
 * A JSON answer that is not parsed unless something reads its body. A call relayed in its own
 * format needs only the answer's usage (which the provider read from the end of its text) and its
 * bytes: `answerUsage` and `replyBytesOf` give those without reading `body`. Any tap or format
 * that reads `body` gets it parsed (bytes kept, as `keepUpstreamBytes` keeps them), once; one
 * that sets it replaces it. An answer that turns out not to be JSON in between fails then, as
 * an upstream_error.
 */
export function relayedAnswer<O extends OperationId>(status: number, bytes: Buffer, format: string, usage: object): UpstreamJsonResponse<O> {
  const response = Object.defineProperty({ kind: 'json', status }, 'body', LAZY_BODY) as UpstreamJsonResponse<O>;
  RELAYED.set(response, { bytes, format, usage, read: false, body: undefined });
  return response;
}

/** The usage a JSON answer reports: its own `usage`, else its body's (read without parsing a relayed answer). */
export function answerUsage(operation: OperationId, response: UpstreamJsonResponse): Usage | undefined {
  if (response.usage) return response.usage;
  const relayed = RELAYED.get(response);
  if (relayed !== undefined && !relayed.read) return usageOf(operation, { usage: relayed.usage });
  return usageOf(operation, response.body);
}

/** The bytes a format relays for a JSON answer in `format`: those it came in, if nobody changed its body since. */
export function replyBytesOf(response: UpstreamJsonResponse, format: string): UpstreamBytes | undefined {
  const relayed = RELAYED.get(response);
  if (relayed !== undefined && !relayed.read) return relayed.format === format ? relayed.bytes : undefined;
  return upstreamBytesOf(response.body, format);
}
