import { pipeline, Transform } from 'node:stream';
import zlib from 'node:zlib';
import { codingsOf, GatewayError, openGuardedUrl, type GuardedResponse, type Timeouts } from '../../core/index.js';

/** Where the finished video may come from besides public addresses (see fetchVideo). */
export interface VideoSources {
  /** Origins that may be private: the back end's own `baseUrl`'s. */
  origins: readonly string[];
  /** Hosts the operator opened (`video-tasks` option `downloadPrivateHosts`), any port. */
  hosts: readonly string[];
}

/**
 * Decompressors for a `content-encoding` a CDN may send anyway, the last applied first; null for
 * a coding the gateway cannot undo (the download is refused rather than relayed encoded).
 * `deflate` is zlib's wrapped form or, as some servers send it, raw: told apart by its first byte.
 */
function decodersFor(header: string): Array<() => Transform> | null {
  const out: Array<() => Transform> = [];
  for (const coding of codingsOf(header)) {
    if (coding === 'gzip' || coding === 'x-gzip') out.push(() => zlib.createGunzip());
    else if (coding === 'br') out.push(() => zlib.createBrotliDecompress());
    else if (coding === 'deflate') out.push(inflateEither);
    else return null;
  }
  return out;
}

/** Inflate zlib-wrapped or raw deflate data, by what its first byte says. */
function inflateEither(): Transform {
  let inner: Transform | undefined;
  const outer = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (!inner) {
        // A zlib header's first byte is 0x?8 with a window of at most 32 KiB (CMF 0x08-0x78).
        inner = (chunk[0]! & 0x0f) === 8 && chunk[0]! >> 4 <= 7 ? zlib.createInflate() : zlib.createInflateRaw();
        inner.on('data', (data: Buffer) => outer.push(data));
        inner.on('error', (error) => outer.destroy(error));
      }
      if (inner.write(chunk)) done();
      else inner.once('drain', () => done());
    },
    flush(done) {
      if (!inner) return done();
      inner.once('end', () => done());
      inner.end();
    },
  });
  return outer;
}

/** A finished video fetched from the address its back end gave (a CDN link). */
export interface VideoDownload {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: Headers;
  /**
   * The body, each read under the back end's idle deadline: a silence ends it with
   * `upstream_timeout`, a broken connection with `upstream_error` (not the client's leaving).
   */
  readonly relay: AsyncGenerator<Uint8Array>;
  /** Let the body go unread (an expired address, a page, an error answer). */
  discard(): void;
}

const stalled = () => new GatewayError('upstream_timeout', { params: { detail: 'the video stopped arriving from the back end' } });

/** A refusal of the address a back end gave: the back end's fault, not the client's. */
const badAddress = (detail: string) => new GatewayError('upstream_error', { params: { detail } });

/**
 * GET a video's address under the back end's deadlines: its answer must begin within
 * `firstByteMs`, and its bytes may pause no longer than `idleMs` (while the gateway waits for
 * them, not while a slow client reads). The bytes are asked for as stored (`accept-encoding:
 * identity`); `range` is sent as it is. The address is opened through the gateway's SSRF guard
 * (core/http/guarded-fetch.ts), every redirect checked again: only public addresses, and
 * `sources` on a private network (the back end's own origin, the hosts the operator opened);
 * never a metadata address.
 */
export async function fetchVideo(
  url: string,
  clientSignal: AbortSignal,
  limits: Pick<Timeouts, 'firstByteMs' | 'idleMs'>,
  range?: string,
  sources: VideoSources = { origins: [], hosts: [] },
): Promise<VideoDownload> {
  const cut = new AbortController();
  const signal = AbortSignal.any([clientSignal, cut.signal]);
  const headers: Record<string, string> = { 'accept-encoding': 'identity', accept: '*/*', 'user-agent': 'switchyard-video-fetch' };
  if (range) headers.range = range;
  const due = setTimeout(() => cut.abort(new GatewayError('upstream_timeout', { params: { detail: 'no response headers in time' } })), limits.firstByteMs);
  let res: GuardedResponse;
  try {
    res = await openGuardedUrl(
      url,
      { headers, allowPrivate: sources.hosts, allowOrigins: sources.origins, backstopMs: Math.max(limits.firstByteMs, limits.idleMs) + 1000, noun: "the finished video's address", refuse: badAddress },
      signal,
    );
  } catch (error) {
    if (cut.signal.aborted) throw cut.signal.reason;
    if (clientSignal.aborted) throw error;
    if (error instanceof GatewayError) throw error;
    throw new GatewayError('upstream_error', { params: { detail: 'the finished video could not be fetched from the back end' }, cause: error });
  } finally {
    clearTimeout(due);
  }
  const { body: raw, close } = res;
  raw.on('error', () => undefined);
  // A CDN that compresses although asked not to: its bytes decoded (as a browser would), its
  // headers kept (the length they give is not the video's: see the engine).
  const decoders = decodersFor(String(res.headers['content-encoding'] ?? ''));
  if (decoders === null) {
    raw.destroy();
    res.close();
    throw badAddress(`the finished video came in a content coding the gateway cannot undo (${String(res.headers['content-encoding']).slice(0, 60)})`);
  }
  const stages = decoders.map((make) => make());
  const body: AsyncIterable<Uint8Array> & { destroy(): unknown } =
    stages.length > 0 ? (pipeline([raw as unknown as NodeJS.ReadableStream, ...stages], () => undefined) as unknown as AsyncIterable<Uint8Array> & { destroy(): unknown }) : raw;
  const release = () => {
    cut.abort();
    raw.destroy();
    for (const stage of stages) stage.destroy();
    close();
  };
  // A body that fails (not by the client's leaving) broke off at the back end.
  const broke = (error: unknown) =>
    clientSignal.aborted ? error : new GatewayError('upstream_error', { params: { detail: 'the video broke off before its end' }, cause: error });
  const answer = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (Array.isArray(value)) for (const each of value) answer.append(name, each);
    else if (value !== undefined) answer.set(name, value);
  }
  const relay = idleBounded(body, limits.idleMs, release, broke);
  return {
    status: res.statusCode,
    ok: res.statusCode >= 200 && res.statusCode < 300,
    headers: answer,
    relay: (async function* () {
      try {
        yield* relay;
      } finally {
        close();
      }
    })(),
    discard: release,
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
