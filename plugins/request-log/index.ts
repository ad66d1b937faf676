import { definePlugin, printableLosses, secretsOfConfig, type RequestContext } from '../../core/index.js';
import { loggablePath, pathSecrets, type RequestLogEntry } from '../../core/store/index.js';

const PLUGIN_NAME = 'request-log';
/** The losses of a request that had none: one array for all of them (the store only reads it). */
const NO_LOSSES: string[] = [];

export function logEntry(ctx: RequestContext, inPaths: readonly string[] = []): RequestLogEntry {
  return {
    time: Date.now(),
    requestId: ctx.id,
    method: ctx.method,
    // The path only: a key sent as ?key= never reaches the log; one pasted into the path, only its
    // prefix, and a credential of the configuration in it (a key sent as a model name) not at all.
    path: loggablePath(ctx.path, inPaths),
    keyId: ctx.key?.id ?? null,
    keyName: ctx.key?.name ?? null,
    keyPrefix: ctx.key?.prefix ?? null,
    model: ctx.model || null,
    operation: ctx.operation ?? null,
    provider: ctx.target?.provider.id ?? null,
    status: ctx.status ?? 0,
    errorCode: ctx.errorCode ?? null,
    promptTokens: ctx.usage?.inputTokens ?? null,
    completionTokens: ctx.usage?.outputTokens ?? null,
    cost: ctx.cost ?? null,
    durationMs: Math.round((performance.now() - ctx.startedAt) * 100) / 100,
    clientIp: ctx.clientIp || null,
    userAgent: ctx.userAgent?.slice(0, 512) ?? null,
    attempts: ctx.attempts,
    losses: ctx.losses ? printableLosses(ctx.losses) : NO_LOSSES,
  };
}

/**
 * One request-log row for every request, rejected ones included, written in batches off the
 * request path. Read it with GET /admin/logs or `switchyard logs`.
 */
export default definePlugin({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Records every request in the request log (the console log of the spec).',
  apply(api) {
    const inPaths = pathSecrets(secretsOfConfig(api.config));
    // stage 100: after metering and every other observer has put its figures on the context.
    api.hooks.onResponse.tap({ name: PLUGIN_NAME, stage: 100 }, (ctx) => {
      api.stores.logs.record(logEntry(ctx, inPaths));
    });
  },
});
