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
  return {
    status: res.status,
    ok: res.ok,
    headers: res.headers,
    body,
    relay: body ? relay(body, limits.idleMs, cut, clientSignal) : (async function* () {})(),
  };
}

async function* relay(body: ReadableStream<Uint8Array>, idleMs: number, cut: AbortController, clientSignal: AbortSignal): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let ended = false;
  try {
    for (;;) {
      // Timed only while waiting for the back end: the time a slow client takes is not its silence.
      const idle = setTimeout(() => cut.abort(stalled()), idleMs);
      let step: Awaited<ReturnType<typeof reader.read>>;
      try {
        step = await reader.read();
      } catch (error) {
        if (cut.signal.aborted) throw cut.signal.reason;
        if (clientSignal.aborted) throw error;
        throw new GatewayError('upstream_error', { params: { detail: 'the video broke off before its end' }, cause: error });
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
    if (!ended) void reader.cancel().catch(() => undefined);
  }
}

/**
 * A back end's own download (its `content()`), each read under its idle deadline as fetchVideo's
 * are: a silence of `idleMs` releases it (`release`) and ends the body with `upstream_timeout`.
 */
export async function* idleBounded(body: AsyncIterable<Uint8Array>, idleMs: number, release: () => void): AsyncGenerator<Uint8Array> {
  const iterator = body[Symbol.asyncIterator]();
  let ended = false;
  try {
    for (;;) {
      let idle: NodeJS.Timeout | undefined;
      const silent = new Promise<never>((_resolve, reject) => (idle = setTimeout(() => reject(stalled()), idleMs)));
      let step: IteratorResult<Uint8Array>;
      try {
        step = await Promise.race([iterator.next(), silent]);
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
