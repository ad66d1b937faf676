import { upstreamHeaders, type JsonSchema, type ProviderConfig } from '../../../core/index.js';

/** One `providers:` entry of type `sora`: OpenAI's video API (`/v1/videos`) or a compatible one. */
export interface SoraProviderConfig extends ProviderConfig {
  /** `https://api.openai.com/v1` by default (calls go to `{baseUrl}/videos`). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Extra headers sent with every call (OpenAI-Organization, OpenAI-Project). */
  headers?: Record<string, string>;
  /**
   * Hosts an input image URL may resolve to privately (tests, intranets); image URLs are otherwise
   * fetched only from public addresses.
   */
  allowPrivateImageHosts?: string[];
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
}

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export const configSchema: JsonSchema = {
  type: 'object',
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    apiKey: { type: 'string' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    allowPrivateImageHosts: { type: 'array', items: { type: 'string', minLength: 1 } },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
  },
};

export interface Endpoint {
  origin: string;
  /** The base URL's path without a trailing slash (`/v1`). */
  basePath: string;
  /** Credentials and configured headers (no content type: each call sets its own). */
  headers: Record<string, string>;
}

export function endpointOf(config: SoraProviderConfig): Endpoint {
  const url = new URL(config.baseUrl || DEFAULT_BASE_URL);
  // No content type here: each call sets its own (JSON, or a form with its boundary).
  const headers = upstreamHeaders(config.headers, {
    'content-type': undefined,
    authorization: config.apiKey ? `Bearer ${config.apiKey}` : undefined,
  });
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), headers };
}
