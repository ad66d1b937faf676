import { upstreamHeaders, withMembers, type JsonSchema, type ProviderConfig, type UpstreamRequest } from '../../../core/index.js';

/** One `providers:` entry of type `openai`: any OpenAI-compatible back end. */
export interface OpenAIProviderConfig extends ProviderConfig {
  baseUrl: string;
  apiKey?: string;
  /** Extra headers sent upstream with every call (organisation, project, vendor flags). */
  headers?: Record<string, string>;
  /** Most concurrent sockets to this back end. */
  connections?: number;
  timeouts?: { connectMs?: number; firstByteMs?: number; idleMs?: number; totalMs?: number };
  /** Where POST /v1/rerank goes: relative to baseUrl (default `rerank`), or from the origin when it starts with `/`. */
  rerankPath?: string;
  /** The back end has the Responses API: /v1/responses and /v1/responses/compact go to it as they are (default false: through chat). */
  responsesApi?: boolean;
  /** Whether the back end serves the legacy completions API (`false`: /v1/completions goes to it through chat). */
  completionsApi?: boolean;
  /**
   * The field a translated chat call's output limit goes up in. Default: `max_completion_tokens`
   * for api.openai.com (its reasoning models refuse `max_tokens`), `max_tokens` elsewhere.
   */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
  /**
   * The back end takes an assistant turn's earlier reasoning back as `reasoning_content`
   * (DeepSeek's thinking mode requires it on the turns that called tools). Default false: OpenAI
   * refuses the field, and it is left out, named as a loss.
   */
  reasoningContent?: boolean;
}

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** The wire format an OpenAI-compatible back end answers in: the bytes it sends are kept for it. */
export const OPENAI_FORMAT = 'openai-chat';

export const configSchema: JsonSchema = {
  type: 'object',
  properties: {
    baseUrl: { type: 'string', format: 'uri', pattern: '^https?://', default: DEFAULT_BASE_URL },
    apiKey: { type: 'string' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    connections: { type: 'integer', minimum: 1, maximum: 4096 },
    rerankPath: { type: 'string', pattern: '^[^?#\\s]+$' },
    responsesApi: { type: 'boolean', default: false },
    completionsApi: { type: 'boolean', default: true },
    maxTokensField: { enum: ['max_tokens', 'max_completion_tokens'] },
    reasoningContent: { type: 'boolean', default: false },
  },
};

/** Where and how to call one back end. */
export interface Endpoint {
  origin: string;
  /** The base URL's path without a trailing slash (`/v1`). */
  basePath: string;
  headers: Record<string, string>;
  /** Where a translated chat call's output limit goes (see OpenAIProviderConfig.maxTokensField). */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
  /** Assistant turns keep their `reasoning_content` (see OpenAIProviderConfig.reasoningContent). */
  reasoningContent: boolean;
}

export function endpointOf(config: OpenAIProviderConfig): Endpoint {
  const url = new URL(config.baseUrl);
  const headers = upstreamHeaders(config.headers, {
    'content-type': 'application/json',
    authorization: config.apiKey ? `Bearer ${config.apiKey}` : undefined,
  });
  const maxTokensField = config.maxTokensField ?? (url.hostname === 'api.openai.com' ? 'max_completion_tokens' : 'max_tokens');
  return { origin: url.origin, basePath: url.pathname.replace(/\/+$/, ''), headers, maxTokensField, reasoningContent: config.reasoningContent === true };
}

/**
 * The client's own text, when the body going up is the one it sent (a client of this wire format,
 * a body no tap replaced), with the back end's model name and, for a stream, a request for its
 * usage put in (see withMembers): it goes up as the client wrote it, not parsed and serialised
 * again, which would change what JSON cannot hold exactly (an integer past 2^53: a seed, an id).
 */
export function clientText(request: UpstreamRequest, extra?: Readonly<Record<string, unknown>>): string | undefined {
  const source = request.source;
  if (!source?.raw || source.format !== OPENAI_FORMAT || source.body !== request.body) return undefined;
  const body = request.body as { model?: unknown; stream?: unknown; stream_options?: unknown };
  let members: Record<string, unknown> | undefined = extra ? { ...extra } : undefined;
  if (body.model !== request.model) (members ??= {}).model = request.model;
  if (request.stream) {
    const options = body.stream_options as { include_usage?: unknown } | null | undefined;
    if (body.stream !== true) (members ??= {}).stream = true;
    if (options?.include_usage !== true) (members ??= {}).stream_options = { ...(options ?? {}), include_usage: true };
  }
  return members ? withMembers(source.raw, members) : source.raw;
}
