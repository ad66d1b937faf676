/**
 * The shape of gateway.config.yaml after ${VAR} substitution, validation and defaults.
 * config/gateway.schema.json is the same contract for the validator; keep the two in step.
 */
export interface GatewayConfig {
  server: ServerConfig;
  logging: LoggingConfig;
  storage: StorageConfig;
  cache: CacheConfig;
  auth: AuthConfig;
  /** Absent: every built-in plugin in the default order. */
  plugins?: PluginEntry[];
  providers: ProviderConfig[];
  models: ModelAliasConfig[];
  pricing: Record<string, PriceConfig>;
}

export interface ServerConfig {
  host: string;
  port: number;
  /** Bytes, after parsing `25mb`-style values. */
  bodyLimit: number;
  /** Bytes of non-streamed upstream answers held in memory at once, all calls together (`512mb`-style values parsed). */
  answerMemoryLimit: number;
  shutdownTimeoutMs: number;
  /** The longest silence while a request body arrives (408 past it); 0 waits for ever. */
  bodyTimeoutMs: number;
  /** The longest a client may read nothing while the gateway waits to write to it; past it its connection is closed. 0: never. */
  writeTimeoutMs: number;
  /** A streamed answer that has sent its client nothing for this long gets an SSE comment (`: keep-alive`); 0: never. */
  streamKeepAliveMs: number;
  /** How deeply a JSON body may nest before it is refused with 400. */
  maxJsonDepth: number;
}

export interface LoggingConfig {
  level: 'error' | 'warn' | 'info' | 'http' | 'debug';
  /** auto: readable lines on a TTY, JSON lines otherwise. */
  format: 'auto' | 'json' | 'pretty';
}

export interface StorageConfig {
  driver: 'sqlite' | 'postgres';
  url: string;
}

export interface CacheConfig {
  driver: 'memory' | 'redis';
  url?: string;
}

export interface FileKeyConfig {
  name: string;
  key: string;
  rpm?: number;
  tpm?: number;
  maxConcurrent?: number;
  budget?: number;
  models?: string[];
  expires?: string;
}

export interface AuthConfig {
  adminKey?: string;
  keys: FileKeyConfig[];
}

export type PluginEntry = string | { name: string; options?: Record<string, unknown> };

export interface ProviderConfig {
  id: string;
  type: string;
  models: string[];
  /** The fields of the provider's type (its configSchema): baseUrl, apiKey, timeouts, ... */
  [field: string]: unknown;
}

export interface ModelTargetConfig {
  provider: string;
  model?: string;
  weight?: number;
  priority?: number;
}

export interface ModelAliasConfig {
  name: string;
  targets: ModelTargetConfig[];
  fallbacks?: string[];
}

export interface PriceConfig {
  input?: number;
  output?: number;
  cachedInput?: number;
  /** Per 1M prompt tokens written to a provider's prompt cache (default: the input price). */
  cacheWrite?: number;
  /** Per 1M prompt tokens written to the cache for an hour rather than minutes (Anthropic's `ttl: 1h`; default: `cacheWrite`). */
  cacheWrite1h?: number;
  /** Per web search a back end ran for the call (Anthropic's server tool, billed per search). */
  perWebSearch?: number;
  /** Per image produced. */
  perImage?: number;
  /** Per second of audio or video. */
  perSecond?: number;
  /** Per character of text turned into speech. */
  perCharacter?: number;
  perRequest?: number;
}
