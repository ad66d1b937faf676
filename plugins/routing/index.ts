import {
  definePlugin,
  GatewayError,
  OPERATIONS,
  type CandidateTarget,
  type ModelCatalogView,
  type OperationId,
  type Target,
} from '../../core/index.js';
import { HealthTracker, RetryBudget, type TargetHealthView } from './health.js';

const PLUGIN_NAME = 'routing';

export interface RoutingOptions {
  failureThreshold: number;
  cooldownMs: number;
  maxCooldownMs: number;
  retryRatio: number;
  retryBurst: number;
  healthWindow: number;
}

/** Order candidates: lower `priority` tiers first; inside a tier, a weighted random order. */
export function orderTargets(candidates: readonly CandidateTarget[], random: () => number = Math.random): Target[] {
  const ordered: Target[] = [];
  for (const tier of tiersOf(candidates)) {
    const pool = [...tier.targets];
    while (pool.length > 0) {
      const total = pool.reduce((sum, c) => sum + c.weight, 0);
      let pick = random() * total;
      let index = 0;
      for (; index < pool.length - 1; index++) {
        pick -= pool[index]!.weight;
        if (pick < 0) break;
      }
      const [chosen] = pool.splice(index, 1);
      ordered.push({ provider: chosen!.provider, model: chosen!.model, weight: chosen!.weight, priority: chosen!.priority });
    }
  }
  return ordered;
}

function tiersOf(candidates: readonly CandidateTarget[]): Array<{ priority: number; targets: CandidateTarget[] }> {
  const tiers = new Map<number, CandidateTarget[]>();
  for (const c of candidates) tiers.set(c.priority, [...(tiers.get(c.priority) ?? []), c]);
  return [...tiers.entries()].sort(([a], [b]) => a - b).map(([priority, targets]) => ({ priority, targets }));
}

/** A model and its fallbacks, breadth first, each name once. */
function modelChain(models: ModelCatalogView, model: string): string[] {
  const chain = [model];
  for (let i = 0; i < chain.length; i++) {
    for (const fallback of models.fallbacks(chain[i]!)) if (!chain.includes(fallback)) chain.push(fallback);
  }
  return chain;
}

export interface RouteExplanation {
  model: string;
  operation: OperationId;
  known: boolean;
  /** The order a call would try now (one draw of the weighted choice). */
  order: Array<{ provider: string; model: string; via: string }>;
  chain: Array<{
    model: string;
    role: 'requested' | 'fallback';
    tiers: Array<{
      priority: number;
      targets: Array<TargetHealthView & { weight: number; share: number; available: boolean; reason: string }>;
    }>;
  }>;
}

/** Which targets a call would try, in which order, and why. */
export function explainRoute(models: ModelCatalogView, health: HealthTracker, model: string, operation: OperationId): RouteExplanation {
  const chain = modelChain(models, model);
  const order: RouteExplanation['order'] = [];
  const described = chain.map((name, i) => {
    const candidates = models.candidates(name, operation);
    const tiers = tiersOf(candidates).map((tier) => {
      const availableWeight = tier.targets.filter((t) => health.available(t.provider.id, t.model)).reduce((s, t) => s + t.weight, 0);
      return {
        priority: tier.priority,
        targets: tier.targets.map((t) => {
          const available = health.available(t.provider.id, t.model);
          const view = health.view(t.provider.id, t.model);
          const share = available && availableWeight > 0 ? Math.round((t.weight / availableWeight) * 1000) / 1000 : 0;
          const reason =
            view.state === 'healthy'
              ? `healthy; weight ${t.weight} of ${availableWeight} in tier ${tier.priority}`
              : view.state === 'half_open'
                ? 'cooldown over: the next call probes it'
                : view.state === 'probing'
                  ? 'a probe is in flight; skipped until it answers'
                  : `cooling down until ${view.coolingDownUntil} after ${view.consecutiveFailures} failure(s) (${view.lastError ?? 'error'})`;
          return { ...view, weight: t.weight, share, available, reason };
        }),
      };
    });
    const available = candidates.filter((c) => health.available(c.provider.id, c.model));
    for (const t of orderTargets(available)) order.push({ provider: t.provider.id, model: t.model, via: name });
    return { model: name, role: i === 0 ? ('requested' as const) : ('fallback' as const), tiers };
  });
  return { model, operation, known: models.list().some((m) => m.id === model), order, chain: described };
}

/**
 * Maps a public model name to the back ends to try: the healthy targets of the best tier by
 * weight, then lower tiers, then the fallback models. Keeps each target's health (a circuit
 * breaker with a half-open probe, honouring Retry-After) and a retry budget, and explains
 * itself at GET /admin/route and GET /admin/providers.
 */
export default definePlugin<RoutingOptions>({
  name: PLUGIN_NAME,
  version: '0.2.0',
  description: 'Public model names to back ends: tiers, weights, fallbacks, health, retry budget.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      failureThreshold: { type: 'integer', minimum: 1, default: 3 },
      cooldownMs: { type: 'integer', minimum: 1, default: 30_000 },
      maxCooldownMs: { type: 'integer', minimum: 1, default: 300_000 },
      retryRatio: { type: 'number', minimum: 0, maximum: 1, default: 0.2 },
      retryBurst: { type: 'number', minimum: 0, default: 10 },
      healthWindow: { type: 'integer', minimum: 1, maximum: 10_000, default: 100 },
    },
  },
  apply(api) {
    const options = api.options;
    const health = new HealthTracker({
      failureThreshold: options.failureThreshold,
      cooldownMs: options.cooldownMs,
      maxCooldownMs: Math.max(options.maxCooldownMs, options.cooldownMs),
      window: options.healthWindow,
    });
    const budget = new RetryBudget(options.retryRatio, options.retryBurst);

    api.hooks.resolveTargets.tap(PLUGIN_NAME, (_ctx, call) => {
      const chain = modelChain(api.models, call.model);
      const candidates = chain.flatMap((name) => api.models.candidates(name, call.operation).map((c) => ({ name, c })));
      if (candidates.length === 0) return undefined;
      budget.deposit();
      const targets: Target[] = [];
      for (const name of chain) {
        const available = api.models.candidates(name, call.operation).filter((c) => health.available(c.provider.id, c.model));
        targets.push(...orderTargets(available));
      }
      if (targets.length === 0) {
        const soonest = Math.min(...candidates.map(({ c }) => health.availableAt(c.provider.id, c.model)));
        const seconds = Math.max(1, Math.ceil((soonest - Date.now()) / 1000));
        throw new GatewayError('no_upstream_available', { params: { model: call.model }, headers: { 'retry-after': String(seconds) } });
      }
      return targets;
    });

    api.hooks.beforeUpstream.tap(PLUGIN_NAME, (request, ctx) => {
      if (ctx.target) health.claim(ctx.target.provider.id, ctx.target.model);
      return request;
    });

    api.hooks.onAttempt.tap(PLUGIN_NAME, (attempt) => {
      const { provider, model } = attempt.target;
      if (!attempt.error) return health.success(provider.id, model, attempt.durationMs);
      const code = attempt.error.code;
      if (code === 'client_closed_request' || code === 'upstream_bad_request') return health.neutral(provider.id, model);
      health.failure(provider.id, model, attempt.durationMs, code, attempt.retryAfterMs);
    });

    api.hooks.shouldRetry.tap(PLUGIN_NAME, () => (budget.withdraw() ? undefined : false));

    const providersView = () =>
      api.providers.list().map((provider) => {
        const models = new Set<string>(provider.models);
        for (const alias of api.config.models) for (const t of alias.targets) if (t.provider === provider.id) models.add(t.model ?? alias.name);
        return {
          id: provider.id,
          type: provider.type,
          operations: Object.keys(provider.operations),
          targets: [...models].map((model) => health.view(provider.id, model)),
        };
      });

    api.registerFormat({
      id: 'routing-admin',
      routes: [
        {
          kind: 'handler',
          method: 'GET',
          path: '/admin/providers',
          access: 'admin',
          handle: () => ({ body: { object: 'list', retry_budget: budget.available, data: providersView() } }),
        },
        {
          kind: 'handler',
          method: 'GET',
          path: '/admin/route',
          access: 'admin',
          handle: (_ctx, { query }) => {
            const model = typeof query.model === 'string' ? query.model : '';
            const operation = (typeof query.operation === 'string' ? query.operation : 'chat') as OperationId;
            if (!model) throw new GatewayError('missing_required_parameter', { param: 'model' });
            if (!OPERATIONS.includes(operation)) {
              throw new GatewayError('invalid_value', { param: 'operation', params: { detail: `expected one of ${OPERATIONS.join(', ')}.` } });
            }
            return { body: explainRoute(api.models, health, model, operation) };
          },
        },
      ],
    });
  },
});
