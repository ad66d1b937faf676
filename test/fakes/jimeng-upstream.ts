import { createHash, createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import { json, LocalServer, readBody } from './server.js';

type Json = Record<string, any>;

export interface JimengReceived {
  method: string;
  url: string;
  action: string | undefined;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: Json | undefined;
  /** Whether the signature checked out. */
  signed: boolean;
}

/** What one GetResult of a task answers, in order (the last repeats). */
export type JimengStep =
  | { status: 'in_queue' | 'generating' | 'done' | 'not_found' | 'expired' | string; video?: boolean }
  | { code: number; message: string };

/** A tiny ISO-BMFF (MP4) file: `ftyp` and an `mdat` of known bytes. */
export function fakeMp4(label: string): Buffer {
  const ftyp = Buffer.concat([Buffer.from([0, 0, 0, 24]), Buffer.from('ftypisom'), Buffer.from([0, 0, 2, 0]), Buffer.from('isomiso2')]);
  const payload = Buffer.from(`switchyard fake video ${label} `.repeat(40));
  const header = Buffer.alloc(8);
  header.writeUInt32BE(payload.length + 8, 0);
  header.write('mdat', 4, 'latin1');
  return Buffer.concat([ftyp, header, payload]);
}

export const JIMENG_VIDEO = fakeMp4('jimeng');

/** Volcengine's gateway error body. */
export function volcError(action: string | undefined, code: string, codeN: number, message: string): Json {
  return {
    ResponseMetadata: {
      RequestId: `20261122${randomBytes(8).toString('hex')}`,
      Action: action ?? '',
      Version: '2022-08-31',
      Service: 'cv',
      Region: 'cn-north-1',
      Error: { CodeN: codeN, Code: code, Message: message },
    },
  };
}

const KNOWN_REQ_KEYS = new Set(['jimeng_vgfm_t2v_l20', 'jimeng_vgfm_i2v_l20', 'jimeng_t2v_v30', 'jimeng_i2v_first_v30', 'jimeng_i2v_first_tail_v30', 'jimeng_t2v_v30_1080p', 'jimeng_i2v_first_v30_1080', 'jimeng_i2v_first_tail_v30_1080']);

/**
 * Volcengine's visual API for Jimeng video, for tests. It checks every request the way
 * Volcengine's gateway does, with its own implementation of the scheme (not the gateway's):
 *
 * - `Authorization: HMAC-SHA256 Credential={AK}/{YYYYMMDD}/{region}/{service}/request,
 *   SignedHeaders=…, Signature=…`; an unknown access key, a scope other than cn-north-1/cv, a
 *   date that is not X-Date's, an X-Date more than 15 minutes off, an X-Content-Sha256 that is not
 *   the body's, host or x-date left unsigned, or a signature that does not recompute from the
 *   secret key: 401 in Volcengine's `{ResponseMetadata: {Error: {Code, Message}}}` shape;
 * - `?Action=CVSync2AsyncSubmitTask|CVSync2AsyncGetResult&Version=2022-08-31`, else 400
 *   InvalidActionOrVersion;
 * - the visual service's own answers: `{code: 10000, message: 'Success', data, request_id,
 *   status: 10000, time_elapsed}`; an unknown req_key 200 with code 50400-style `{code, message}`.
 *
 * A task walks `plan` (default in_queue -> generating -> done), one step per GetResult; `done`
 * carries a `video_url` on this server (no credentials, like the vendor's CDN) serving
 * JIMENG_VIDEO. Every request is recorded.
 */
export class FakeJimeng extends LocalServer {
  readonly received: JimengReceived[] = [];
  readonly tasks = new Map<string, { reqKey: string; body: Json; polls: number; plan: JimengStep[] }>();
  /** The plan given to tasks submitted from now on. */
  plan: JimengStep[] = [{ status: 'in_queue' }, { status: 'generating' }, { status: 'done' }];
  /** Answer the next submit with this instead (then forget it). */
  nextSubmit: { status?: number; json: unknown } | undefined;
  videoDownloads = 0;

  constructor(
    readonly accessKey = 'AKLTfakejimengaccesskey0001',
    readonly secretKey = 'WkRZeE1EQmxPVGhsWWpWak5HVmtabUZmYWtlU2VjcmV0',
    readonly region = 'cn-north-1',
    readonly service = 'cv',
  ) {
    super();
  }

  reset(): void {
    this.received.length = 0;
    this.tasks.clear();
    this.plan = [{ status: 'in_queue' }, { status: 'generating' }, { status: 'done' }];
    this.nextSubmit = undefined;
    this.videoDownloads = 0;
  }

  /** The requests of one Action. */
  last(): JimengReceived {
    const entry = this.received[this.received.length - 1];
    if (!entry) throw new Error("the fake upstream received nothing");
    return entry;
  }

  calls(action: string): JimengReceived[] {
    return this.received.filter((r) => r.action === action);
  }

  /** Why a request's signature does not hold, or undefined when it does. */
  verify(method: string, url: URL, headers: http.IncomingHttpHeaders, raw: Buffer, now = Date.now()): { code: string; codeN: number; message: string } | undefined {
    const auth = headers.authorization;
    const match = /^HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/.exec(
      typeof auth === 'string' ? auth : '',
    );
    if (!match) return { code: 'MissingAuthenticationToken', codeN: 100001, message: 'The request is not signed or the Authorization header is malformed.' };
    const [, ak, day, region, service, signedList, signature] = match as unknown as string[];
    if (ak !== this.accessKey) return { code: 'InvalidAccessKey', codeN: 100009, message: `The access key ${ak} does not exist.` };
    const date = headers['x-date'];
    if (typeof date !== 'string' || !/^\d{8}T\d{6}Z$/.test(date)) return { code: 'InvalidTimestamp', codeN: 100006, message: 'X-Date is missing or malformed.' };
    const at = Date.UTC(+date.slice(0, 4), +date.slice(4, 6) - 1, +date.slice(6, 8), +date.slice(9, 11), +date.slice(11, 13), +date.slice(13, 15));
    if (Math.abs(now - at) > 15 * 60 * 1000) return { code: 'InvalidTimestamp', codeN: 100006, message: 'The request has expired (X-Date too far from now).' };
    if (day !== date.slice(0, 8) || region !== this.region || service !== this.service) {
      return { code: 'SignatureDoesNotMatch', codeN: 100010, message: 'The credential scope does not match.' };
    }
    const names = signedList!.split(';');
    if (!names.includes('host') || !names.includes('x-date')) return { code: 'SignatureDoesNotMatch', codeN: 100010, message: 'host and x-date must be signed.' };
    const bodyHash = createHash('sha256').update(raw).digest('hex');
    const declared = headers['x-content-sha256'];
    if (declared !== undefined && declared !== bodyHash) return { code: 'SignatureDoesNotMatch', codeN: 100010, message: 'X-Content-Sha256 is not the hash of the body.' };
    const esc = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    const query = [...url.searchParams.entries()]
      .map(([k, v]) => [esc(k), esc(v)] as const)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1))
      .map(([k, v]) => `${k}=${v}`)
      .join('&');
    let headerBlock = '';
    for (const name of names) {
      const value = headers[name];
      if (typeof value !== 'string') return { code: 'SignatureDoesNotMatch', codeN: 100010, message: `The signed header ${name} is missing.` };
      headerBlock += `${name}:${value.trim().replace(/\s+/g, ' ')}\n`;
    }
    const canonical = [method, url.pathname, query, headerBlock, signedList, bodyHash].join('\n');
    const toSign = ['HMAC-SHA256', date, `${day}/${region}/${service}/request`, createHash('sha256').update(canonical).digest('hex')].join('\n');
    let key: Buffer = createHmac('sha256', this.secretKey).update(day!).digest();
    for (const part of [region!, service!, 'request']) key = createHmac('sha256', key).update(part).digest();
    const expected = createHmac('sha256', key).update(toSign).digest('hex');
    if (expected !== signature) return { code: 'SignatureDoesNotMatch', codeN: 100010, message: 'The request signature we calculated does not match the signature you provided.' };
    return undefined;
  }

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const url = new URL(req.url ?? '/', 'http://fake');

    if (req.method === 'GET' && url.pathname.startsWith('/videos/')) {
      // The vendor's CDN: no credentials.
      this.videoDownloads++;
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': JIMENG_VIDEO.length });
      res.end(JIMENG_VIDEO);
      return;
    }

    let body: Json | undefined;
    try {
      body = JSON.parse(raw.toString('utf8')) as Json;
    } catch {
      body = undefined;
    }
    const action = url.searchParams.get('Action') ?? undefined;
    const problem = this.verify(req.method ?? '', url, req.headers, raw);
    this.received.push({ method: req.method ?? '', url: req.url ?? '', action, headers: req.headers, raw, body, signed: !problem });
    if (problem) return json(res, 401, volcError(action, problem.code, problem.codeN, problem.message));

    const version = url.searchParams.get('Version');
    if ((action !== 'CVSync2AsyncSubmitTask' && action !== 'CVSync2AsyncGetResult') || version !== '2022-08-31') {
      return json(res, 404, volcError(action, 'InvalidActionOrVersion', 100008, `Could not find operation ${action ?? ''} for version ${version ?? ''}`));
    }
    if (req.method !== 'POST' || req.headers['content-type'] !== 'application/json' || !body) {
      return json(res, 400, { code: 50205, message: 'Invalid parameter: the body must be JSON', data: null, request_id: rid(), status: 50205, time_elapsed: '1ms' });
    }
    const reqKey = body.req_key;
    if (typeof reqKey !== 'string' || !KNOWN_REQ_KEYS.has(reqKey)) {
      return json(res, 400, { code: 50400, message: 'Access Denied: req_key not authorized', data: null, request_id: rid(), status: 50400, time_elapsed: '1ms' });
    }

    if (action === 'CVSync2AsyncSubmitTask') {
      if (this.nextSubmit) {
        const scripted = this.nextSubmit;
        this.nextSubmit = undefined;
        return json(res, scripted.status ?? 200, scripted.json);
      }
      const wantsImage = reqKey.includes('i2v');
      const images = (Array.isArray(body.binary_data_base64) ? body.binary_data_base64.length : 0) + (Array.isArray(body.image_urls) ? body.image_urls.length : 0);
      if (wantsImage && images === 0) return ok(res, 50205, 'Invalid parameter: an image is required', null);
      if (!wantsImage && (typeof body.prompt !== 'string' || body.prompt === '')) return ok(res, 50205, 'Invalid parameter: prompt is required', null);
      const taskId = String(7_000_000_000_000_000_000n + BigInt(this.tasks.size + 1));
      this.tasks.set(taskId, { reqKey, body, polls: 0, plan: this.plan });
      return ok(res, 10000, 'Success', { task_id: taskId });
    }

    const task = typeof body.task_id === 'string' ? this.tasks.get(body.task_id) : undefined;
    if (!task || task.reqKey !== reqKey) return ok(res, 10000, 'Success', { status: 'not_found', video_url: '', resp_data: '' });
    const step = task.plan[Math.min(task.polls, task.plan.length - 1)]!;
    task.polls++;
    if ('code' in step) return ok(res, step.code, step.message, null);
    const data: Json = { status: step.status, video_url: '', resp_data: '' };
    if (step.status === 'done' && step.video !== false) data.video_url = `${this.url}/videos/${body.task_id}.mp4?X-Expires=3600&X-Signature=cdn-token`;
    return ok(res, 10000, 'Success', data);
  }
}

function rid(): string {
  return `20261122${randomBytes(10).toString('hex').toUpperCase()}`;
}

function ok(res: http.ServerResponse, code: number, message: string, data: unknown): void {
  json(res, 200, { code, data, message, request_id: rid(), status: code, time_elapsed: '12.3ms' });
}
