import { roundCost } from '../../core/index.js';
import type { KeyRecord, RequestLogEntry, UsageTotal } from '../../core/store/index.js';

/** Epoch milliseconds as an ISO 8601 string (UTC), null stays null. */
export function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/** What the admin API shows of a key. Built field by field: the hash (and so the secret) can never leak into it. */
export interface KeyView {
  id: string;
  object: 'api_key';
  name: string;
  /** The first characters of the secret (`sk-sy-AbCd…`), safe to show. */
  prefix: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  models: string[] | null;
  rpm: number | null;
  tpm: number | null;
  max_concurrent: number | null;
  budget: number | null;
  spent: number;
  source: KeyRecord['source'];
}

export function keyView(key: KeyRecord): KeyView {
  return {
    id: key.id,
    object: 'api_key',
    name: key.name,
    prefix: key.prefix,
    created_at: iso(key.createdAt)!,
    expires_at: iso(key.expiresAt),
    revoked_at: iso(key.revokedAt),
    models: key.models ? [...key.models] : null,
    rpm: key.rpm,
    tpm: key.tpm,
    max_concurrent: key.maxConcurrent,
    budget: key.budget,
    spent: roundCost(key.spent),
    source: key.source,
  };
}

export interface LogEntryView {
  object: 'request_log.entry';
  time: string;
  request_id: string;
  method: string;
  path: string;
  key_id: string | null;
  key_name: string | null;
  key_prefix: string | null;
  model: string | null;
  operation: string | null;
  provider: string | null;
  status: number;
  error_code: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost: number | null;
  duration_ms: number;
  client_ip: string | null;
  user_agent: string | null;
  attempts: Array<{ provider: string; model: string; status: number | 'error'; duration_ms: number; upstream_request_id: string | null; error: string | null; message?: string }>;
  /** What a translation between wire formats could not carry. */
  losses: string[];
}

/** One request-log row as the admin API shows it (snake_case, ISO time). */
export function logEntryView(entry: RequestLogEntry): LogEntryView {
  return {
    object: 'request_log.entry',
    time: iso(entry.time)!,
    request_id: entry.requestId,
    method: entry.method,
    path: entry.path,
    key_id: entry.keyId,
    key_name: entry.keyName,
    key_prefix: entry.keyPrefix,
    model: entry.model,
    operation: entry.operation,
    provider: entry.provider,
    status: entry.status,
    error_code: entry.errorCode,
    prompt_tokens: entry.promptTokens,
    completion_tokens: entry.completionTokens,
    cost: entry.cost === null ? null : roundCost(entry.cost),
    duration_ms: entry.durationMs,
    client_ip: entry.clientIp,
    user_agent: entry.userAgent,
    attempts: (entry.attempts ?? []).map((a) => ({
      provider: a.provider,
      model: a.model,
      status: a.status,
      duration_ms: a.durationMs,
      upstream_request_id: a.upstreamRequestId ?? null,
      error: a.error ?? null,
      ...(typeof a.message === 'string' ? { message: a.message } : {}),
      ...(a.unsent ? { unsent: true } : {}),
    })),
    losses: entry.losses ?? [],
  };
}

export type GroupBy = 'key' | 'model' | 'day';

export interface UsageTotalView {
  object: 'usage.total';
  key_id?: string | null;
  key_name?: string | null;
  model?: string;
  day?: string;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  images: number;
  seconds: number;
  characters: number;
  cost: number;
}

/** One usage total; the grouping fields appear only when grouped by them. */
export function usageTotalView(total: UsageTotal, groupBy: readonly GroupBy[]): UsageTotalView {
  const figures = {
    requests: total.requests,
    prompt_tokens: total.promptTokens,
    completion_tokens: total.completionTokens,
    cached_tokens: total.cachedTokens,
    cache_write_tokens: total.cacheWriteTokens ?? 0,
    reasoning_tokens: total.reasoningTokens,
    images: total.images ?? 0,
    seconds: total.seconds ?? 0,
    characters: total.characters ?? 0,
    cost: roundCost(total.cost),
  };
  const grouped: Pick<UsageTotalView, 'key_id' | 'key_name' | 'model' | 'day'> = {};
  if (groupBy.includes('key')) {
    grouped.key_id = total.key ?? null;
    grouped.key_name = total.keyName ?? null;
  }
  if (groupBy.includes('model')) grouped.model = total.model;
  if (groupBy.includes('day')) grouped.day = total.day;
  return { object: 'usage.total', ...grouped, ...figures };
}
