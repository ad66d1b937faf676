import { definePlugin, type CandidateTarget, type Target } from '../../core/index.js';

const PLUGIN_NAME = 'routing';

/** Order candidates: lower `priority` tiers first; inside a tier, a weighted random order. */
export function orderTargets(candidates: readonly CandidateTarget[], random: () => number = Math.random): Target[] {
  const tiers = new Map<number, CandidateTarget[]>();
  for (const c of candidates) {
    const tier = tiers.get(c.priority) ?? [];
    tier.push(c);
    tiers.set(c.priority, tier);
  }
  const ordered: Target[] = [];
  for (const priority of [...tiers.keys()].sort((a, b) => a - b)) {
    const pool = [...tiers.get(priority)!];
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

/**
 * Maps a public model name to the back ends to try: the name's targets by tier and weight,
 * then its fallback models' targets.
 */
export default definePlugin({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Public model names to back ends: tiers, weights, fallbacks.',
  apply(api) {
    api.hooks.resolveTargets.tap(PLUGIN_NAME, (_ctx, call) => {
      const own = api.models.candidates(call.model, call.operation);
      if (own.length === 0 && api.models.fallbacks(call.model).length === 0) return undefined;
      const targets = orderTargets(own);
      const seen = new Set<string>([call.model]);
      const queue = [...api.models.fallbacks(call.model)];
      while (queue.length > 0) {
        const name = queue.shift()!;
        if (seen.has(name)) continue;
        seen.add(name);
        targets.push(...orderTargets(api.models.candidates(name, call.operation)));
        queue.push(...api.models.fallbacks(name));
      }
      return targets.length > 0 ? targets : undefined;
    });
  },
});
