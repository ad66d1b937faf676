import { upstreamHeaders, type JsonSchema, type ProviderConfig } from '../../../core/index.js';
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
