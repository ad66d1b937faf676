import {
  definePlugin,
  GatewayError,
  OPERATIONS,
  slowedByClient,
  type CandidateTarget,
  type ModelCatalogView,
  type OperationId,
  type RequestContext,
  type Target,
} from '../../core/index.js';
import { HealthTracker, type CallOfTarget, RetryBudget, type TargetHealthView } from './health.js';

const PLUGIN_NAME = 'routing';
const NO_STORE = { 'cache-control': 'no-store' };

type Query = Readonly<Record<string, string | string[] | undefined>>;

/** Admin conventions: a query parameter the route does not know is refused, not ignored. */
function onlyKnown(query: Query, known: readonly string[]): void {
  for (const name of Object.keys(query)) {
    if (!known.includes(name)) throw new GatewayError('unknown_parameter', { param: name });
  }
}

/** One query value; empty counts as absent; given twice is refused. */
function single(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw new GatewayError('invalid_value', { param: name, params: { detail: 'give this parameter once.' } });
  return value === undefined || value === '' ? undefined : value;
}

export interface RoutingOptions {
  failureThreshold: number;
  cooldownMs: number;
  maxCooldownMs: number;
  retryRatio: number;
  retryBurst: number;
  healthWindow: number;
  earlyProbeMs: number;
}

/** Order candidates: lower `priority` tiers first; inside a tier, a weighted random order. */
export function orderTargets(candidates: readonly CandidateTarget[], random: () => number = Math.random): Target[] {
  // One candidate (the usual case): its order needs no draw.
  if (candidates.length === 1) return [targetOf(candidates[0]!)];
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
      ordered.push(targetOf(chosen!));
    }
  }
  return ordered;
}

function targetOf(c: CandidateTarget): Target {
  return { provider: c.provider, model: c.model, weight: c.weight, priority: c.priority };
}

function tiersOf(candidates: readonly CandidateTarget[]): Array<{ priority: number; targets: CandidateTarget[] }> {
  const tiers = new Map<number, CandidateTarget[]>();
  for (const c of candidates) {
    const tier = tiers.get(c.priority);
    if (tier) tier.push(c);
    else tiers.set(c.priority, [c]);
  }
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

/** A target's health as the admin API shows it: snake_case, like every admin answer. */
export interface TargetHealthAdminView {
  target: string;
  provider: string;
  model: string;
  state: TargetHealthView['state'];
  /** ISO time, or null when the target is not cooling down. */
  cooling_down_until: string | null;
  consecutive_failures: number;
  /** Outcomes kept for the error rate and latency (the last `healthWindow` attempts). */
  recent_requests: number;
  recent_error_rate: number;
  latency_ms: { avg: number | null; p50: number | null; p95: number | null };
  last_error: string | null;
}

export function healthView(view: TargetHealthView): TargetHealthAdminView {
  return {
    target: view.target,
    provider: view.provider,
    model: view.model,
    state: view.state,
    cooling_down_until: view.coolingDownUntil,
    consecutive_failures: view.consecutiveFailures,
    recent_requests: view.recentRequests,
    recent_error_rate: view.recentErrorRate,
    latency_ms: view.latencyMs,
    last_error: view.lastError,
  };
}

/** GET /admin/route's answer (and `switchyard route --json`). */
export interface RouteExplanation {
  object: 'route';
  model: string;
  operation: OperationId;
  /** Whether the name is a public model name at all. */
  known: boolean;
  /** The order a call would try now (one draw of the weighted choice). */
  order: Array<{ provider: string; model: string; via: string }>;
  chain: Array<{
    model: string;
    role: 'requested' | 'fallback';
    tiers: Array<{
      priority: number;
      targets: Array<TargetHealthAdminView & { weight: number; share: number; available: boolean; reason: string }>;
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
                  ? 'a call holds its one probe; skipped until the probe answers'
                  : `cooling down until ${view.coolingDownUntil} after ${view.consecutiveFailures} failure(s) (${view.lastError ?? 'error'})`;
          return { ...healthView(view), weight: t.weight, share, available, reason };
        }),
      };
    });
    const available = candidates.filter((c) => health.available(c.provider.id, c.model));
    for (const t of orderTargets(available)) {
      // A call tries each target once, even when a fallback model lists it again.
      if (!order.some((o) => o.provider === t.provider.id && o.model === t.model)) order.push({ provider: t.provider.id, model: t.model, via: name });
    }
    return { model: name, role: i === 0 ? ('requested' as const) : ('fallback' as const), tiers };
  });
  return { object: 'route', model, operation, known: models.list().some((m) => m.id === model), order, chain: described };
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
      cooldownMs: { type: 'integer', minimum: 1, maximum: 2147483647, default: 30_000 },
      maxCooldownMs: { type: 'integer', minimum: 1, maximum: 2147483647, default: 300_000 },
      retryRatio: { type: 'number', minimum: 0, maximum: 1, default: 0.2 },
      retryBurst: { type: 'number', minimum: 0, default: 10 },
      healthWindow: { type: 'integer', minimum: 1, maximum: 10_000, default: 100 },
      earlyProbeMs: { type: 'integer', minimum: 0, maximum: 2147483647, default: 1000 },
    },
  },
  apply(api) {
    const options = api.options;
    const health = new HealthTracker({
      failureThreshold: options.failureThreshold,
      cooldownMs: options.cooldownMs,
      maxCooldownMs: Math.max(options.maxCooldownMs, options.cooldownMs),
      window: options.healthWindow,
      earlyProbeMs: options.earlyProbeMs,
    });
    const budget = new RetryBudget(options.retryRatio, options.retryBurst);

    /** The half-open targets whose one probe a call reserved (by target key), until it is done with them. */
    const probesOf = (ctx: RequestContext) => ctx.state.get(PLUGIN_NAME) as Map<string, { target: Target; id: number; early?: boolean }> | undefined;
    // What is left here was never sent (an attempt takes its target's out): an early probe's
    // time is given back too, so a call refused before it went up (its key's limit, say) does
    // not hold the next one back.
    const releaseProbes = (ctx: RequestContext) => {
      const probes = probesOf(ctx);
      if (!probes) return;
      for (const { target: t, id, early } of probes.values()) {
        if (early) health.unclaimEarly(t.provider.id, t.model, id);
        else health.neutral(t.provider.id, t.model, { probe: id, sentAt: 0 });
      }
      probes.clear();
    };

    api.hooks.resolveTargets.tap(PLUGIN_NAME, (ctx, call) => {
      const chain = api.models.fallbacks(call.model).length === 0 ? undefined : modelChain(api.models, call.model);
      const lists = chain ? chain.map((name) => api.models.candidates(name, call.operation)) : [api.models.candidates(call.model, call.operation)];
      if (lists.every((list) => list.length === 0)) return undefined;
      budget.deposit();
      const only = lists.length === 1 && lists[0]!.length === 1 ? lists[0]![0]! : undefined;
      if (only && health.available(only.provider.id, only.model) && !health.halfOpen(only.provider.id, only.model)) {
        // One healthy target (the usual case): nothing to order, no probe to reserve.
        return [{ provider: only.provider, model: only.model, weight: only.weight, priority: only.priority }];
      }
      const targets: Target[] = [];
      // Made only when a call reserves a probe (a target just past its cooldown).
      let probes: Map<string, { target: Target; id: number }> | undefined;
      for (const [i, list] of lists.entries()) {
        const available = list.filter((c) => health.available(c.provider.id, c.model));
        // A fallback model's targets say which public name they stand for (its price, say).
        const via = i > 0 ? chain![i] : undefined;
        for (const ordered of orderTargets(available)) {
          const target: Target = via === undefined ? ordered : { ...ordered, via };
          // A target past its cooldown gets one probe: this call reserves it now, so no other
          // call (nor the retry of one that chose its order earlier) sends a second one.
          if (health.halfOpen(target.provider.id, target.model)) {
            const id = health.claim(target.provider.id, target.model);
            if (!id) continue;
            (probes ??= new Map()).set(HealthTracker.key(target.provider.id, target.model), { target, id });
          }
          targets.push(target);
        }
      }
      if (targets.length === 0) {
        // No target left for this call. A circuit the gateway opened on its own count keeps
        // traffic off a failing back end while others can serve; with none to go to, refusing
        // every call until the cooldown ends would turn a blip into minutes of outage. So one
        // call at a time still probes the target that recovers first, and closes its circuit if
        // the back end is back. A back end that asked to be left alone (Retry-After) or whose
        // account is out of credit is not probed early.
        // The soonest; at the same time, the model asked for before its fallbacks, and the
        // higher tier first.
        let early: { candidate: CandidateTarget; list: number; at: number } | undefined;
        for (const [i, list] of lists.entries()) {
          for (const c of [...list].sort((x, y) => x.priority - y.priority)) {
            const at = health.earlyProbeAt(c.provider.id, c.model);
            if (at !== undefined && (!early || at < early.at)) early = { candidate: c, list: i, at };
          }
        }
        const id = early ? health.claimEarly(early.candidate.provider.id, early.candidate.model) : 0;
        if (early && id) {
          const target: Target = early.list > 0 ? { ...targetOf(early.candidate), via: chain![early.list] } : targetOf(early.candidate);
          ctx.state.set(PLUGIN_NAME, new Map([[HealthTracker.key(target.provider.id, target.model), { target, id, early: true }]]));
          return [target];
        }
        // The refusal's Retry-After: the earliest recovery, or the next early probe if sooner.
        let soonest = early?.at ?? Infinity;
        let rateLimited = true;
        let outOfCredit = true;
        for (const list of lists) {
          for (const c of list) {
            // A probe in flight (an early one while the cooldown runs) may close the circuit any moment.
            soonest = Math.min(soonest, health.probing(c.provider.id, c.model) ? health.clock() : health.availableAt(c.provider.id, c.model));
            const cause = health.openedBy(c.provider.id, c.model);
            rateLimited &&= cause === 'upstream_rate_limited';
            outOfCredit &&= cause === 'upstream_quota_exhausted';
          }
        }
        // Every back end's account is out of credit: waiting does not help, the operator must act.
        if (outOfCredit) throw new GatewayError('upstream_quota_exhausted', { headers: { 'x-should-retry': 'false' } });
        const seconds = Math.max(1, Math.ceil((soonest - Date.now()) / 1000));
        const headers = { 'retry-after': String(seconds) };
        // Every back end said "too many requests" (and when to come back): the client hears the
        // same, a 429 its SDK knows, not that the gateway is broken.
        if (rateLimited) throw new GatewayError('upstream_rate_limited', { headers });
        throw new GatewayError('no_upstream_available', { params: { model: call.model }, headers });
      }
      if (probes) ctx.state.set(PLUGIN_NAME, probes);
      return targets;
    });

    /** A stream that began and has no outcome yet: judged when it ends. */
    const STREAMING = `${PLUGIN_NAME}:streaming`;
    const streamingOf = (ctx: RequestContext) => ctx.state.get(STREAMING) as { target: Target; durationMs: number; call: CallOfTarget } | undefined;

    api.hooks.onAttempt.tap(PLUGIN_NAME, (attempt, ctx) => {
      const { provider, model } = attempt.target;
      const key = HealthTracker.key(provider.id, model);
      // Whether this call held the target's probe, and when it went: only the probe ends the
      // probe, and a call sent before the circuit opened says nothing of the back end since.
      const probes = probesOf(ctx);
      const call: CallOfTarget = { probe: probes?.get(key)?.id ?? 0, sentAt: health.clock() - attempt.durationMs };
      probes?.delete(key);
      if (!attempt.error) {
        if (ctx.stream) {
          // A stream that stalls or breaks later is a failure of this target too.
          health.answered(provider.id, model, call);
          ctx.state.set(STREAMING, { target: attempt.target, durationMs: attempt.durationMs, call });
        } else {
          health.success(provider.id, model, attempt.durationMs, call);
        }
        // Answered: the call tries nothing more, so the probes it reserved further down go back.
        releaseProbes(ctx);
        return;
      }
      const code = attempt.error.code;
      // The client's own fault (a bad value the provider found, such as an image URL the SSRF
      // guard refused, or a request the back end called bad) says nothing about the back end.
      const status = attempt.error.status;
      const clientFault = status >= 400 && status < 500 && status !== 408 && status !== 429;
      if (code === 'client_closed_request' || clientFault) health.neutral(provider.id, model, call);
      else health.failure(provider.id, model, attempt.durationMs, code, attempt.retryAfterMs, call);
    });

    /** What a stream's failure midway says of its back end (besides a timeout of its own). */
    const STREAM_FAILURES = new Set<string>(['upstream_error', 'upstream_overloaded', 'upstream_rate_limited', 'upstream_quota_exhausted']);

    // The call failed (or ended some other way) before using every target it chose; or its
    // stream broke midway (a stall, a reset, an error event from the back end).
    api.hooks.onError.tap(PLUGIN_NAME, (error, ctx) => {
      releaseProbes(ctx);
      const streaming = streamingOf(ctx);
      if (!streaming) return;
      ctx.state.delete(STREAMING);
      const { provider, model } = streaming.target;
      // A total timeout run out while the gateway waited for a slow client says nothing of the back end.
      // The back end's own failures, as an attempt's are counted: a rate limit or an account out
      // of credit said by an error event midway too (an error event of those kinds never came
      // with a 4xx of the client's making).
      if ((error.code === 'upstream_timeout' && !slowedByClient(error)) || STREAM_FAILURES.has(error.code)) health.failure(provider.id, model, streaming.durationMs, error.code, undefined, streaming.call);
      else health.neutral(provider.id, model, streaming.call);
    });
    api.hooks.onResponse.tap(PLUGIN_NAME, (ctx) => {
      releaseProbes(ctx);
      const streaming = streamingOf(ctx);
      if (!streaming) return;
      ctx.state.delete(STREAMING);
      const { provider, model } = streaming.target;
      // Streamed to the end: a success. The client left midway: says nothing of the back end.
      if (ctx.endReason === 'done') health.success(provider.id, model, streaming.durationMs, streaming.call);
      else health.neutral(provider.id, model, streaming.call);
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
          targets: [...models].map((model) => healthView(health.view(provider.id, model))),
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
          handle: (_ctx, { query }) => {
            onlyKnown(query, []);
            return { headers: NO_STORE, body: { object: 'list', retry_budget: budget.available, data: providersView() } };
          },
        },
        {
          kind: 'handler',
          method: 'GET',
          path: '/admin/route',
          access: 'admin',
          handle: (_ctx, { query }) => {
            onlyKnown(query, ['model', 'operation']);
            const model = single(query, 'model');
            const operation = (single(query, 'operation') ?? 'chat') as OperationId;
            if (!model) throw new GatewayError('missing_required_parameter', { param: 'model' });
            if (!OPERATIONS.includes(operation)) {
              throw new GatewayError('invalid_value', { param: 'operation', params: { detail: `expected one of ${OPERATIONS.join(', ')}.` } });
            }
            if (!api.models.list().some((m) => m.id === model)) {
              throw new GatewayError('model_not_found', { params: { model }, param: 'model' });
            }
            return { headers: NO_STORE, body: explainRoute(api.models, health, model, operation) };
          },
        },
      ],
    });
  },
});
