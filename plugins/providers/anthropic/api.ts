import { upstreamHeaders, type JsonSchema, type ProviderConfig } from '../../../core/index.js';

/** One `providers:` entry of type `anthropic`: Anthropic's Messages API (or one that speaks it). */
export interface AnthropicProviderConfig extends ProviderConfig {
  baseUrl: string;
  apiKey?: string;
  /** Sent as `anthropic-version` (on every call, a Claude-style client's pass-through included, when set). */
  version?: string;
  /**
   * A Claude-style client's own `anthropic-version` goes up with its pass-through call (when
   * `version` is not set). Default: only for Anthropic's own API, whose versions are known to
   * track its SDKs; a server that speaks the API may take only the versions it knows.
   */
  clientVersion?: boolean;
  /** `max_tokens` when the request names none (the Messages API requires one). */
  defaultMaxTokens: number;
  /** Extra headers sent upstream with every call (`anthropic-beta`, say). */
  headers?: Record<string, string>;
  /** Most concurrent sockets to this back end. */
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
}

export const DEFAULT_BASE_URL = 'https://api.anthropic.com';
export const DEFAULT_VERSION = '2023-06-01';
export const DEFAULT_MAX_TOKENS = 4096;

export const configSchema: JsonSchema = {
  type: 'object',
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    apiKey: { type: 'string' },
    version: { type: 'string', minLength: 1 },
    clientVersion: { type: 'boolean' },
    defaultMaxTokens: { type: 'integer', minimum: 1, default: DEFAULT_MAX_TOKENS },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
  },
};

/** Where and how to call one back end. */
export interface Endpoint {
  origin: string;
  /** The path of POST messages: the base URL's path (without a trailing `/v1`) + `/v1/messages`. */
  messagesPath: string;
  headers: Record<string, string>;
  /** A Claude-style client's own `anthropic-version` goes up with its pass-through calls (see AnthropicProviderConfig.clientVersion). */
  clientVersion: boolean;
}

/**
 * Headers the configuration may not set: the transport's own, and the credentials (the key goes
 * only in `x-api-key`; Anthropic never gets an Authorization header from the gateway).
 */
export function endpointOf(config: AnthropicProviderConfig): Endpoint {
  const url = new URL(config.baseUrl);
  const headers = upstreamHeaders(config.headers, {
    'content-type': 'application/json',
    'anthropic-version': config.version || DEFAULT_VERSION,
    'x-api-key': config.apiKey || undefined,
  });
  // `https://api.anthropic.com` and `https://api.anthropic.com/v1` both mean the same API.
  const base = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  const clientVersion = !config.version && (config.clientVersion ?? url.hostname === new URL(DEFAULT_BASE_URL).hostname);
  return { origin: url.origin, messagesPath: `${base}/v1/messages`, headers, clientVersion };
}
