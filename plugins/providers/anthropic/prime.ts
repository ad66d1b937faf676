import type { ChatChunk } from '../../../core/index.js';

/** Whether a chunk carries part of the answer (not just the role of message_start). */
function hasContent(chunk: ChatChunk): boolean {
  return chunk.choices.some((c) => c.finish_reason || Object.entries(c.delta ?? {}).some(([key, value]) => key !== 'role' && value !== '' && value != null));
}

/**
 * The stream, read up to its first piece of answer before the handler returns. A back end may
 * answer 200 and then send an error event (Anthropic's `overloaded_error`, Google's
 * `UNAVAILABLE`) before any content: read here, that error fails the attempt while another
 * target can still be tried (when it is retryable), instead of reaching the client as a broken
 * stream. Stopping early releases the upstream.
 */
export async function primed(source: AsyncIterableIterator<ChatChunk>): Promise<AsyncGenerator<ChatChunk>> {
  const buffered: ChatChunk[] = [];
  let ended = false;
  for (;;) {
    const next = await source.next();
    if (next.done) {
      ended = true;
      break;
    }
    buffered.push(next.value);
    if (hasContent(next.value)) break;
  }
  return (async function* () {
    try {
      yield* buffered;
      if (!ended) yield* source;
    } finally {
      await source.return?.(undefined);
    }
  })();
}
