import { GatewayError, upstreamError, upstreamHeaders, type JsonSchema, type ProviderConfig } from '../../../core/index.js';
import { imageFetchSchema, type ImageFetchConfig } from './fetch-urls.js';

/** One `providers:` entry of type `gemini`: Google's generateContent API (v1beta), or one that speaks it. */
export interface GeminiProviderConfig extends ProviderConfig {
  baseUrl: string;
  /** Sent only as `x-goog-api-key` (never in the URL). */
  apiKey?: string;
  /** Extra headers sent upstream with every call. */
  headers?: Record<string, string>;
  /** Most concurrent sockets to this back end. */
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
  /** How image URLs in a request are fetched (Gemini takes image bytes, not URLs): see fetch-urls.ts. */
  imageFetch?: ImageFetchConfig;
}

export const DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com';

export const configSchema: JsonSchema = {
  type: 'object',
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    apiKey: { type: 'string' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
    imageFetch: imageFetchSchema,
  },
};

/** Where and how to call one back end. */
export interface Endpoint {
  origin: string;
  /** The base URL's path without a trailing `/v1beta`: `{base}/v1beta/models/{model}:…`. */
  basePath: string;
  headers: Record<string, string>;
}

/**
 * Headers the configuration may not set: the transport's own, and the credentials (the key goes
 * only in `x-goog-api-key`; Google never gets an Authorization header from the gateway).
 */
export function endpointOf(config: GeminiProviderConfig): Endpoint {
  const url = new URL(config.baseUrl);
  const headers = upstreamHeaders(config.headers, {
    'content-type': 'application/json',
    'x-goog-api-key': config.apiKey || undefined,
  });
  // `https://generativelanguage.googleapis.com` and `…/v1beta` both mean the same API.
  const basePath = url.pathname.replace(/\/+$/, '').replace(/\/v1beta$/, '');
  return { origin: url.origin, basePath, headers };
}

/** The path of one model's method; the model name is percent-encoded (a `/` or `?` stays in the segment). */
export function methodPath(endpoint: Endpoint, model: string, stream: boolean): string {
  const name = encodeURIComponent(model.replace(/^models\//, ''));
  return stream ? `${endpoint.basePath}/v1beta/models/${name}:streamGenerateContent?alt=sse` : `${endpoint.basePath}/v1beta/models/${name}:generateContent`;
}

/**
 * A Google error answer as the gateway's error. A bad key is 400 API_KEY_INVALID there: the
 * gateway's credentials, not the client's request. A 429 or 503 says when to come back in its
 * body (`google.rpc.RetryInfo`'s `retryDelay`, such as "37s"), not in a Retry-After header: read
 * as one, so the client is told and the target cools down.
 */
export function googleFailure(status: number, body: string, headers: Record<string, string | string[] | undefined>, secrets: readonly (string | undefined)[]): GatewayError {
  if (status === 400 && /API_KEY_INVALID|API key not valid|API key expired|API_KEY_/i.test(body)) {
    return new GatewayError('upstream_error', { params: { detail: "the back end refused the gateway's credentials (400 API key not valid)" }, upstreamStatus: status });
  }
  const delay = headers['retry-after'] === undefined ? retryDelayOf(body) : undefined;
  return upstreamError(status, body, delay === undefined ? headers : { ...headers, 'retry-after': String(delay) }, secrets);
}

/** The seconds of a RetryInfo's retryDelay in a Google error body (rounded up), if it has one. */
function retryDelayOf(body: string): number | undefined {
  if (!body.includes('RetryInfo')) return undefined;
  try {
    return retryDelayIn((JSON.parse(body) as { error?: { details?: unknown } }).error?.details);
  } catch {
    // not JSON: no delay
  }
  return undefined;
}

/** The seconds of the RetryInfo among a Google error's `details` (rounded up, 1 at least), if there is one. */
export function retryDelayIn(details: unknown): number | undefined {
  for (const detail of Array.isArray(details) ? details : []) {
    const d = detail as { '@type'?: unknown; retryDelay?: unknown } | null;
    if (typeof d?.['@type'] !== 'string' || !d['@type'].endsWith('google.rpc.RetryInfo')) continue;
    const match = typeof d.retryDelay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(d.retryDelay.trim()) : null;
    if (match) return Math.max(1, Math.ceil(Number(match[1])));
  }
  return undefined;
}
