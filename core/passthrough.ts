/**
 * The exact bytes a back end answered with, kept beside the body parsed from them.
 *
 * A provider whose answer is already in a client's wire format (an embedding list from an
 * OpenAI-compatible back end, say) attaches the bytes it read; the format that renders that
 * same shape sends them as they are instead of serialising the parsed body again. Large float
 * arrays then reach the client exactly as the back end wrote them, at no serialisation cost.
 *
 * The bytes sit under a symbol that is not enumerable: spreads, `JSON.stringify` and
 * `structuredClone` leave it behind, so an `afterUpstream` tap that returns a changed copy gets
 * its copy rendered. A tap that changes a body in place must call `dropUpstreamBytes(body)`.
 */
const BYTES = Symbol.for('switchyard.upstreamBytes');

/** What a body was parsed from: the bytes as read, or the text (one stream event's data, say). */
export type UpstreamBytes = Uint8Array | string;

/** Attach `bytes` (the text `body` was parsed from) to `body`, and return `body`. */
export function keepUpstreamBytes<T extends object>(body: T, bytes: UpstreamBytes): T {
  Object.defineProperty(body, BYTES, { value: bytes, enumerable: false, configurable: true, writable: false });
  return body;
}

/** The bytes `body` was parsed from, when its provider kept them and nobody changed it since. */
export function upstreamBytesOf(body: unknown): UpstreamBytes | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const bytes = (body as { [BYTES]?: unknown })[BYTES];
  return typeof bytes === 'string' || bytes instanceof Uint8Array ? bytes : undefined;
}

/** Forget the bytes of a body that was changed in place: it is rendered from the object again. */
export function dropUpstreamBytes(body: object): void {
  delete (body as { [BYTES]?: unknown })[BYTES];
}
