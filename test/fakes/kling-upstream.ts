import { gzipSync } from 'node:zlib';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { repoRoot } from '../support/paths.js';
import { LocalServer, readBody } from './server.js';

/** The tiny MP4 the fake serves as every finished video. */
export const KLING_FAKE_VIDEO = readFileSync(path.join(repoRoot, 'test', 'fixtures', 'tiny-16x16-1s.mp4'));

export interface KlingReceived {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
  authorization: string | undefined;
}

interface FakeTask {
  id: string;
  kind: string;
  /** The states this task reports, one per poll; the last one repeats. */
  script: string[];
  polls: number;
  duration: string;
}

/**
 * A fake Kling API (`POST /v1/videos/{text2video|image2video}`, `GET /v1/videos/{kind}/{id}`)
 * that checks every request's token the way Kling does: a JWT whose HS256 signature is made
 * with the secret key, `iss` the access key, `nbf` not in the future and `exp` not past; else
 * HTTP 401 with Kling's `{code, message, request_id}`. Tasks move one state per poll:
 * submitted -> processing -> succeed, "[fail]" in the prompt -> failed, "[forgotten]" -> a 404
 * (code 1203) once the task is processing, "[weird]" -> a state
 * Kling never documented for three polls, then succeed, "[proxy404]" -> a 404 page that is not
 * Kling's, then a 404 with code 1202, then processing and succeed.
 */
export class FakeKling extends LocalServer {
  readonly received: KlingReceived[] = [];
  readonly tasks = new Map<string, FakeTask>();
  private seq = 0;
  /** The CDN token of result URLs: a client must never see it. */
  cdnToken = 'cdn-sig-7f3a9c';
  /** When set, each result link works once: a download changes the token (old links answer 403; a poll gives a fresh one). */
  singleUseLinks = false;
  /** When set, the CDN refuses every download (403). */
  cdnDown = false;
  /** Successful CDN downloads. */
  cdnServed = 0;
  /** The accept-encoding of the last CDN download. */
  cdnAcceptEncoding: string | undefined;
  /** When set, the CDN gzips the video whatever the request accepts (a server that ignores `identity`). */
  cdnAlwaysGzip = false;
  /**
   * How the CDN misbehaves: `hang` never answers; `stall` sends the headers and half the video,
   * then nothing more; `cut` sends the headers and half the video, then drops the connection.
   */
  cdnFault: 'hang' | 'stall' | 'cut' | 'page' | undefined;
  /** The Range header of the last CDN download. */
  cdnRange: string | undefined;
  /** When set, result links are made on this base instead of this server's own (another host's name for it, say). */
  cdnBase: string | undefined;
  /** When set, the CDN answers every download with a 302 to this address. */
  cdnRedirectTo: string | undefined;
  /** When set, every API call (token checked or not) gets this answer instead (a vendor's error page). */
  failWith: { status: number; contentType: string; body: string } | undefined;
  /** When set, a submit is answered only once this settles (a slow vendor); the task is made when the request comes. */
  holdSubmits: Promise<void> | undefined;

  constructor(
    readonly accessKey: string,
    readonly secretKey: string,
  ) {
    super();
  }

  /** Why a token is refused (Kling's code and message), or undefined when it is good. */
  checkToken(authorization: string | undefined, now = Math.floor(Date.now() / 1000)): { code: number; message: string } | undefined {
    if (!authorization) return { code: 1001, message: 'Authorization is empty' };
    const match = /^Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(authorization);
    if (!match) return { code: 1002, message: 'Authorization is invalid' };
    const [, h, p, s] = match;
    let header: { alg?: unknown; typ?: unknown };
    let payload: { iss?: unknown; exp?: unknown; nbf?: unknown };
    try {
      header = JSON.parse(Buffer.from(h!, 'base64url').toString('utf8'));
      payload = JSON.parse(Buffer.from(p!, 'base64url').toString('utf8'));
    } catch {
      return { code: 1002, message: 'Authorization is invalid' };
    }
    if (header.alg !== 'HS256') return { code: 1002, message: 'Authorization is invalid' };
    const expected = createHmac('sha256', this.secretKey).update(`${h}.${p}`).digest();
    const given = Buffer.from(s!, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { code: 1000, message: 'Authentication failed' };
    if (payload.iss !== this.accessKey) return { code: 1000, message: 'Authentication failed' };
    if (typeof payload.nbf !== 'number' || payload.nbf > now) return { code: 1003, message: 'Authorization is not yet valid' };
    if (typeof payload.exp !== 'number' || payload.exp <= now) return { code: 1004, message: 'Authorization has expired' };
    return undefined;
  }

  private reply(res: http.ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const text = (await readBody(req)).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://fake');
    const requestId = `req-${++this.seq}`;
    // The CDN: the finished video, by its signed address.
    const cdn = /^\/cdn\/(.+)\.mp4$/.exec(url.pathname);
    if (req.method === 'GET' && cdn) {
      if (this.cdnRedirectTo) {
        res.writeHead(302, { location: this.cdnRedirectTo });
        return void res.end();
      }
      if (this.cdnDown || url.searchParams.get('sig') !== this.cdnToken) return this.reply(res, 403, { message: 'bad signature' });
      this.cdnServed++;
      if (this.singleUseLinks) this.cdnToken = `cdn-sig-${this.cdnServed}-${this.seq}`;
      // As a CDN does: compressed when the request accepts gzip, with the compressed length.
      const accepts = String(req.headers['accept-encoding'] ?? '');
      this.cdnAcceptEncoding = accepts;
      this.cdnRange = req.headers.range;
      if (this.cdnFault === 'hang') return;
      // A CDN's sign-in or error page, answered 200, where the video should be.
      if (this.cdnFault === 'page') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return void res.end(`<html><body>AccessDenied token=${this.cdnToken}</body></html>`);
      }
      if (this.cdnFault) {
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(KLING_FAKE_VIDEO.length) });
        res.write(KLING_FAKE_VIDEO.subarray(0, KLING_FAKE_VIDEO.length >> 1));
        if (this.cdnFault === 'cut') setTimeout(() => res.socket?.destroy(), 20);
        return;
      }
      // One range of bytes, as a CDN serves it (players seek with these).
      const range = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers.range ?? ''));
      if (range && !this.cdnAlwaysGzip) {
        const size = KLING_FAKE_VIDEO.length;
        const start = range[1] === '' ? Math.max(0, size - Number(range[2])) : Number(range[1]);
        const end = range[1] === '' || range[2] === '' ? size - 1 : Math.min(size - 1, Number(range[2]));
        if (start >= size) {
          res.writeHead(416, { 'content-range': `bytes */${size}` });
          res.end();
          return;
        }
        res.writeHead(206, { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'content-range': `bytes ${start}-${end}/${size}`, 'content-length': String(end - start + 1) });
        res.end(KLING_FAKE_VIDEO.subarray(start, end + 1));
        return;
      }
      if (this.cdnAlwaysGzip || /\bgzip\b/.test(accepts)) {
        const packed = gzipSync(KLING_FAKE_VIDEO);
        res.writeHead(200, { 'content-type': 'video/mp4', 'content-encoding': 'gzip', 'content-length': String(packed.length) });
        res.end(packed);
        return;
      }
      res.writeHead(200, { 'content-type': 'video/mp4', 'accept-ranges': 'bytes', 'content-length': String(KLING_FAKE_VIDEO.length) });
      res.end(KLING_FAKE_VIDEO);
      return;
    }
    let body: Record<string, unknown> | undefined;
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    } catch {
      body = undefined;
    }
    this.received.push({ method: req.method ?? '', path: url.pathname, body, authorization: req.headers.authorization });
    if (this.failWith) {
      res.writeHead(this.failWith.status, { 'content-type': this.failWith.contentType });
      res.end(this.failWith.body);
      return;
    }
    const refused = this.checkToken(req.headers.authorization);
    if (refused) return this.reply(res, 401, { ...refused, request_id: requestId });

    const submit = /^\/v1\/videos\/(text2video|image2video)$/.exec(url.pathname);
    if (req.method === 'POST' && submit) {
      if (!body || typeof body.model_name !== 'string') return this.reply(res, 400, { code: 1201, message: 'model_name is invalid', request_id: requestId });
      if (submit[1] === 'image2video' && typeof body.image !== 'string') return this.reply(res, 400, { code: 1201, message: 'image is required', request_id: requestId });
      const prompt = typeof body.prompt === 'string' ? body.prompt : '';
      const id = `kt${String(this.seq).padStart(6, '0')}`;
      const script = prompt.includes('[fail]')
        ? ['submitted', 'processing', 'failed']
        : prompt.includes('[forgotten]')
          ? ['submitted', 'processing', 'forgotten']
          : prompt.includes('[weird]')
          ? ['submitted', 'rendering_on_mars', 'rendering_on_mars', 'rendering_on_mars', 'succeed']
          : prompt.includes('[proxy404]')
            ? ['submitted', 'proxy404', 'method1202', 'processing', 'succeed']
            : ['submitted', 'processing', 'succeed'];
      this.tasks.set(id, { id, kind: submit[1]!, script, polls: 0, duration: typeof body.duration === 'string' ? body.duration : '5' });
      if (this.holdSubmits) await this.holdSubmits;
      return this.reply(res, 200, {
        code: 0,
        message: 'SUCCEED',
        request_id: requestId,
        data: { task_id: id, task_status: 'submitted', created_at: Date.now(), updated_at: Date.now() },
      });
    }
    const poll = /^\/v1\/videos\/(text2video|image2video)\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'GET' && poll) {
      const task = this.tasks.get(poll[2]!);
      if (!task || task.kind !== poll[1]) return this.reply(res, 404, { code: 1203, message: 'task not found', request_id: requestId });
      task.polls++;
      const state = task.script[Math.min(task.polls, task.script.length - 1)]!;
      // A task Kling stops knowing (past its retention): 404 code 1203 from then on.
      if (state === 'forgotten') {
        this.tasks.delete(task.id);
        return this.reply(res, 404, { code: 1203, message: 'task not found', request_id: requestId });
      }
      // Not Kling: a proxy in front of it that lost its way once (a 404 page of its own), then a
      // code that is no word about the task (1202, a method refused).
      if (state === 'proxy404') {
        res.writeHead(404, { 'content-type': 'text/html' });
        res.end('<html><body><h1>404 Not Found</h1><hr>nginx</body></html>');
        return;
      }
      if (state === 'method1202') return this.reply(res, 404, { code: 1202, message: 'invalid request method', request_id: requestId });
      const data: Record<string, unknown> = { task_id: task.id, task_status: state, task_status_msg: '', created_at: 0, updated_at: Date.now() };
      if (state === 'failed') data.task_status_msg = 'Content moderation rejected the image';
      if (state === 'succeed') {
        // As Kling reports it: the video's own length, a tenth of a second past the 5 or 10 s billed.
        data.task_result = { videos: [{ id: `v-${task.id}`, url: `${this.cdnBase ?? this.url}/cdn/${task.id}.mp4?sig=${this.cdnToken}`, duration: `${task.duration}.1` }] };
      }
      return this.reply(res, 200, { code: 0, message: 'SUCCEED', request_id: requestId, data });
    }
    this.reply(res, 404, { code: 1200, message: 'not found', request_id: requestId });
  }
}
