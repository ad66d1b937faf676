import { GatewayError, type Timeouts } from '../../core/index.js';

/** A finished video fetched from the address its back end gave (a CDN link). */
export interface VideoDownload {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: Headers;
  readonly body: ReadableStream<Uint8Array> | null;
  /**
   * The body, each read under the back end's idle deadline: a silence ends it with
   * `upstream_timeout`, a broken connection with `upstream_error` (not the client's leaving).
   */
  readonly relay: AsyncGenerator<Uint8Array>;
}

const stalled = () => new GatewayError('upstream_timeout', { params: { detail: 'the video stopped arriving from the back end' } });

/**
 * GET a video's address under the back end's deadlines: its answer must begin within
 * `firstByteMs`, and its bytes may pause no longer than `idleMs` (while the gateway waits for
 * them, not while a slow client reads). The bytes are asked for as stored (`accept-encoding:
 * identity`); `range` is sent as it is.
 */
export async function fetchVideo(url: string, clientSignal: AbortSignal, limits: Pick<Timeouts, 'firstByteMs' | 'idleMs'>, range?: string): Promise<VideoDownload> {
  const cut = new AbortController();
  const signal = AbortSignal.any([clientSignal, cut.signal]);
  const headers: Record<string, string> = { 'accept-encoding': 'identity' };
  if (range) headers.range = range;
  const due = setTimeout(() => cut.abort(new GatewayError('upstream_timeout', { params: { detail: 'no response headers in time' } })), limits.firstByteMs);
  let res: Response;
  try {
    res = await fetch(url, { signal, redirect: 'follow', headers });
  } catch (error) {
    if (cut.signal.aborted) throw cut.signal.reason;
    if (clientSignal.aborted) throw error;
    throw new GatewayError('upstream_error', { params: { detail: 'the finished video could not be fetched from the back end' }, cause: error });
  } finally {
    clearTimeout(due);
  }
  const body = res.body;
  // A body that fails (not by the client's leaving) broke off at the back end.
  const broke = (error: unknown) =>
    clientSignal.aborted ? error : new GatewayError('upstream_error', { params: { detail: 'the video broke off before its end' }, cause: error });
  return {
    status: res.status,
    ok: res.ok,
    headers: res.headers,
    body,
    relay: body ? idleBounded(body, limits.idleMs, () => cut.abort(), broke) : (async function* () {})(),
  };
}

/**
 * A video's bytes, each read under the back end's idle deadline (a fetched address's, or a back
 * end's own `content()`): timed only while waiting for the back end, not while a slow client
 * reads. A silence of `idleMs` ends the body with `upstream_timeout`; a read that fails is
 * thrown as `broke` says. A body not read to its end (a silence, a failure, the client's leaving)
 * is let go: `release`, and its iterator returned.
 */
export async function* idleBounded(
  body: AsyncIterable<Uint8Array>,
  idleMs: number,
  release: () => void,
  broke: (error: unknown) => unknown = (error) => error,
): AsyncGenerator<Uint8Array> {
  const iterator = body[Symbol.asyncIterator]();
  let ended = false;
  try {
    for (;;) {
      let idle: NodeJS.Timeout | undefined;
      const silent = new Promise<never>((_resolve, reject) => (idle = setTimeout(() => reject(stalled()), idleMs)));
      let step: IteratorResult<Uint8Array>;
      try {
        step = await Promise.race([iterator.next().catch((error: unknown) => Promise.reject(broke(error))), silent]);
      } finally {
        clearTimeout(idle);
      }
      if (step.done) {
        ended = true;
        return;
      }
      yield step.value;
    }
  } finally {
    if (!ended) {
      release();
      void Promise.resolve(iterator.return?.()).catch(() => undefined);
    }
  }
}
