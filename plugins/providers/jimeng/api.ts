import type { JsonSchema, ProviderConfig } from '../../../core/index.js';

/** One `providers:` entry of type `jimeng`: Volcengine's visual API (Jimeng / 即梦 video). */
export interface JimengProviderConfig extends ProviderConfig {
  /** `https://visual.volcengineapi.com` by default. */
  baseUrl: string;
  /** Volcengine Access Key ID. */
  accessKey: string;
  /** Volcengine Secret Access Key (used as given, not base64-decoded). */
  secretKey: string;
  /** Signing region (default `cn-north-1`). */
  region: string;
  /** Signing service (default `cv`). */
  service: string;
  /** The API `Version` query parameter (default `2022-08-31`). */
  version: string;
  /**
   * The req_key to use per gateway-side model name, for text-to-video and image-to-video. A model
   * without an entry: its own name when it is a known req_key (switched to the matching
   * text/image variant), else `jimeng_vgfm_t2v_l20` / `jimeng_vgfm_i2v_l20`.
   */
  reqKeys?: Record<string, { text?: string; image?: string }>;
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
}

export const DEFAULT_BASE_URL = 'https://visual.volcengineapi.com';
export const DEFAULT_VERSION = '2022-08-31';
export const SUBMIT_ACTION = 'CVSync2AsyncSubmitTask';
export const RESULT_ACTION = 'CVSync2AsyncGetResult';

export const configSchema: JsonSchema = {
  type: 'object',
  required: ['accessKey', 'secretKey'],
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    accessKey: { type: 'string', minLength: 1 },
    secretKey: { type: 'string', minLength: 1 },
    region: { type: 'string', minLength: 1, default: 'cn-north-1' },
    service: { type: 'string', minLength: 1, default: 'cv' },
    version: { type: 'string', minLength: 1, default: DEFAULT_VERSION },
    reqKeys: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        additionalProperties: false,
        properties: { text: { type: 'string', minLength: 1 }, image: { type: 'string', minLength: 1 } },
      },
    },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
  },
};

/**
 * Text-to-video and image-to-video req_keys that go together: Jimeng video S2.0 Pro
 * (`jimeng_vgfm_*_l20`) and Jimeng video 3.0 720P / 1080P.
 */
export const REQ_KEY_PAIRS: ReadonlyArray<{ text: string; image: string }> = [
  { text: 'jimeng_vgfm_t2v_l20', image: 'jimeng_vgfm_i2v_l20' },
  { text: 'jimeng_t2v_v30', image: 'jimeng_i2v_first_v30' },
  { text: 'jimeng_t2v_v30_1080p', image: 'jimeng_i2v_first_v30_1080' },
];

export const DEFAULT_REQ_KEYS = REQ_KEY_PAIRS[0]!;

/** Jimeng 3.0's first-frame req_keys and their first-and-last-frame ones. */
const WITH_TAIL: Readonly<Record<string, string>> = {
  jimeng_i2v_first_v30: 'jimeng_i2v_first_tail_v30',
  jimeng_i2v_first_v30_1080: 'jimeng_i2v_first_tail_v30_1080',
};

/**
 * The req_key for a model, with or without an input image; with a last frame too, Jimeng 3.0's
 * first-and-last-frame variant of its first-frame req_key (a req_key the operator configured is
 * used as it is).
 */
export function reqKeyFor(config: Pick<JimengProviderConfig, 'reqKeys'>, model: string, hasImage: boolean, hasTail = false): string {
  const configured = config.reqKeys?.[model];
  const pick = (pair: { text?: string; image?: string }) => (hasImage ? pair.image ?? pair.text : pair.text ?? pair.image);
  if (configured) {
    const chosen = pick(configured);
    if (chosen) return chosen;
  }
  const pair = REQ_KEY_PAIRS.find((p) => p.text === model || p.image === model || WITH_TAIL[p.image] === model);
  if (pair) {
    const chosen = pick(pair)!;
    return hasImage && hasTail ? WITH_TAIL[chosen] ?? chosen : chosen;
  }
  // Another req_key the operator named as the model (a newer Jimeng model): as it is.
  if (/^jimeng_[a-z0-9_]+$/.test(model)) return model;
  return pick(DEFAULT_REQ_KEYS)!;
}

/** Whether a req_key takes `frames` (Jimeng 3.0: 121 frames = 5 s, 241 = 10 s). */
export function takesFrames(reqKey: string): boolean {
  return /_v30/.test(reqKey);
}

/** Where and how to call one back end. */
export interface Endpoint {
  origin: string;
  /** The Host header value (what is signed). */
  host: string;
  /** The path calls go to (`/`). */
  path: string;
}

export function endpointOf(config: JimengProviderConfig): Endpoint {
  const url = new URL(config.baseUrl);
  const path = url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`;
  return { origin: url.origin, host: url.host, path };
}

/** Whether a req_key makes a video between a first and a last frame (Jimeng 3.0's `jimeng_i2v_first_tail_v30…`). */
export function takesTail(reqKey: string): boolean {
  return reqKey.includes('first_tail');
}
