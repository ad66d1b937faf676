import { upstreamHeaders, type JsonSchema, type ProviderConfig } from '../../../core/index.js';

/** One `providers:` entry of type `dashscope`: Alibaba Cloud Model Studio's DashScope API. */
export interface DashScopeProviderConfig extends ProviderConfig {
  /** `https://dashscope.aliyuncs.com` (Beijing) or `https://dashscope-intl.aliyuncs.com` (Singapore); `…/api/v1` is accepted too. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Extra headers sent upstream with every call (`X-DashScope-WorkSpace`, say). */
  headers?: Record<string, string>;
  /** Most concurrent sockets to this back end. */
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
}

export const DEFAULT_BASE_URL = 'https://dashscope.aliyuncs.com';

export const configSchema: JsonSchema = {
  type: 'object',
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    apiKey: { type: 'string' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
  },
};

/** Where and how to call one back end. */
export interface Endpoint {
  origin: string;
  /** The base URL's path without a trailing `/api/v1`: calls go to `{basePath}/api/v1/…`. */
  basePath: string;
  headers: Record<string, string>;
}

export function endpointOf(config: DashScopeProviderConfig): Endpoint {
  const url = new URL(config.baseUrl);
  const headers = upstreamHeaders(config.headers, {
    'content-type': 'application/json',
    authorization: config.apiKey ? `Bearer ${config.apiKey}` : undefined,
  });
  const basePath = url.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '');
  return { origin: url.origin, basePath, headers };
}

/** The synchronous multimodal generation endpoint (qwen-image, qwen-image-edit, and the VL models). */
export function multimodalPath(endpoint: Endpoint): string {
  return `${endpoint.basePath}/api/v1/services/aigc/multimodal-generation/generation`;
}
