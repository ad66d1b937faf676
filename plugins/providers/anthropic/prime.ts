import type { ChatChunk } from '../../../core/index.js';

/** Whether a chunk carries part of the answer (not just the role of message_start). */
function hasContent(chunk: ChatChunk): boolean {
  return chunk.choices.some((c) => c.finish_reason || Object.entries(c.delta ?? {}).some(([key, value]) => key !== 'role' && value !== '' && value != null));
}

/**
 * How long a stream is held back waiting for its first piece of answer. Errors that follow a 200
 * come at once; a model that thinks for a while before its first word must not keep the client
 * (and every proxy on the way) from hearing anything, not even the response's headers.
 */
export const PRIME_WINDOW_MS = 1000;

const WAITED = Symbol('waited');

/** `next`, or WAITED once `ms` have passed first (the timer cleared either way). */
function within<T>(next: Promise<T>, ms: number): Promise<T | typeof WAITED> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<typeof WAITED>((resolve) => {
    timer = setTimeout(resolve, ms, WAITED);
  });
  return Promise.race([next, waited]).finally(() => clearTimeout(timer));
}

/**
 * The stream, read up to its first piece of answer before the handler returns, for at most
 * `windowMs`. A back end may answer 200 and then send an error event (Anthropic's
 * `overloaded_error`, Google's `UNAVAILABLE`) before any content: read here, that error fails the
 * attempt while another target can still be tried (when it is retryable), instead of reaching the
 * client as a broken stream. Past the window the stream goes on to the client as it is (a failure
 * after that is an error event in the stream). Stopping early releases the upstream.
 */
export async function primed(source: AsyncIterableIterator<ChatChunk>, windowMs = PRIME_WINDOW_MS): Promise<AsyncGenerator<ChatChunk>> {
  const buffered: ChatChunk[] = [];
  const deadline = performance.now() + windowMs;
  let ended = false;
  /** A read still under way when the window closed: the client's stream begins with its answer. */
  let pending: Promise<IteratorResult<ChatChunk>> | undefined;
  for (;;) {
    const next = source.next();
    const result = await within(next, Math.max(0, deadline - performance.now()));
    if (result === WAITED) {
      pending = next;
      // Read by the stream below; until then a failure of it is not an unhandled rejection.
      next.catch(() => undefined);
      break;
    }
    if (result.done) {
      ended = true;
      break;
    }
    buffered.push(result.value);
    if (hasContent(result.value)) break;
  }
  const stream = (async function* () {
    try {
      yield* buffered;
      if (pending) {
        const result = await pending;
        if (result.done) return;
        yield result.value;
      }
      if (!ended) yield* source;
    } finally {
      await source.return?.(undefined);
    }
  })();
  // Dropped before its first read (a later tap failed, the client left), a generator's own
  // return() does not run its finally: the upstream is released here in any case.
  const close = stream.return.bind(stream);
  stream.return = async (value) => {
    try {
      return await close(value);
    } finally {
      await source.return?.(undefined);
    }
  };
  return stream;
}
