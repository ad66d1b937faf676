/**
 * `switchyard route --model NAME [--operation chat] [--config PATH] [--json]`: which back ends a
 * call for NAME would try, in which order, and why (tiers, weights, fallbacks), worked out from
 * the configuration the way `check` builds the gateway: plugins loaded, providers created,
 * nothing listening.
 *
 * Health lives in the running gateway's memory: in this fresh process every target is healthy.
 * GET /admin/route on a running gateway answers the same question with live health; --json
 * prints that route's answer shape.
 */
import type { LoadedConfig } from '../config/load.js';
import { CommandError, printable, rejectOptions, table, UsageError, type OptionValues } from './cli-admin.js';
import { OPERATIONS, type OperationId } from './operations.js';

/** Options of `route`, merged into the CLI's one parseArgs call (`--model` and `--json` come with the admin commands). */
export const ROUTE_OPTIONS = {
  operation: { type: 'string' },
} as const;

export interface RouteArgs {
  model: string;
  operation: OperationId;
  json: boolean;
}

/** Check the command line of `route`; UsageError (exit 2) for anything wrong with it. */
export function prepareRoute(positionals: string[], values: OptionValues): RouteArgs {
  rejectOptions('route', values, ['config', 'json', 'model', 'operation']);
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${printable(positionals[1]!)}' for 'route' (give the model with --model)`);
  const model = values.model;
  if (typeof model !== 'string' || model.trim() === '') throw new UsageError("'route' needs --model NAME");
  const operation = values.operation === undefined ? 'chat' : String(values.operation);
  if (!(OPERATIONS as readonly string[]).includes(operation)) {
    throw new UsageError(`--operation must be one of ${OPERATIONS.join(', ')} (got '${printable(operation)}')`);
  }
  return { model, operation: operation as OperationId, json: values.json === true };
}

const percent = (share: number) => `${Math.round(share * 1000) / 10}%`;

/** Build the gateway without listening, explain the route, print it; the exit status. */
export async function runRoute(args: RouteArgs, loaded: LoadedConfig): Promise<number> {
  const [{ createGateway }, { createLogger }, { builtins }, { explainRoute }, { HealthTracker }] = await Promise.all([
    import('./gateway.js'),
    import('./logger.js'),
    import('../plugins/builtins.js'),
    import('../plugins/routing/index.js'),
    import('../plugins/routing/health.js'),
  ]);
  const gateway = await createGateway({ loaded, builtins, logger: createLogger({ level: 'error' }, process.stderr) });
  try {
    const { model, operation } = args;
    const names = gateway.catalog.list().map((m) => m.id);
    if (!names.includes(model)) {
      const known = names.length ? names.map(printable).join(', ') : 'none';
      throw new CommandError(`unknown model '${printable(model)}': ${loaded.filepath} has no model or alias of that name (known: ${known})`);
    }
    // A fresh tracker: no call has failed in this process, so every target is healthy.
    const health = new HealthTracker({ failureThreshold: 3, cooldownMs: 30_000, maxCooldownMs: 300_000, window: 100, earlyProbeMs: 1000 });
    const routing = gateway.plugins.some((p) => p.name === 'routing');
    const explanation = explainRoute(gateway.catalog, health, model, operation);
    if (!routing) {
      // Without the routing plugin the pipeline tries the requested model's targets as listed:
      // no tiers, weights, fallbacks or health.
      explanation.order = gateway.catalog.candidates(model, operation).map((c) => ({ provider: c.provider.id, model: c.model, via: model }));
      explanation.chain = explanation.chain.slice(0, 1);
    }

    if (explanation.order.length === 0) {
      process.stderr.write(
        `no target of '${printable(model)}'${routing ? ' (or of its fallbacks)' : ''} serves the operation '${operation}': ` +
          `a call would be refused with 400 operation_not_supported\n`,
      );
      if (args.json) process.stdout.write(`${JSON.stringify(explanation, null, 2)}\n`);
      return 1;
    }
    if (args.json) {
      process.stdout.write(`${JSON.stringify(routing ? explanation : { ...explanation, routing_plugin: false }, null, 2)}\n`);
      return 0;
    }

    let out = `Route of '${printable(model)}' for ${operation} calls (${loaded.filepath})\n\n`;
    if (!routing) {
      out +=
        "The routing plugin is not in plugins:, so a call tries the model's targets in the order they\n" +
        'are listed: no tiers, weights, fallbacks, health or retry budget.\n\n';
    }
    for (const link of explanation.chain) {
      out += `${printable(link.model)} (${link.role === 'requested' ? 'requested model' : 'fallback model, tried after every tier above'})\n`;
      if (link.tiers.length === 0) {
        out += `  no target serves ${operation}\n\n`;
        continue;
      }
      for (const tier of link.tiers) {
        const when = tier === link.tiers[0] ? '' : ' (after the tiers above)';
        out += `  tier ${tier.priority}${when}\n`;
        const rows = tier.targets.map((t) => [t.provider, t.model, String(t.weight), routing ? percent(t.share) : '-', t.available ? 'yes' : 'no', t.state]);
        out += table(['PROVIDER', 'UPSTREAM MODEL', 'WEIGHT', 'SHARE', 'AVAILABLE', 'STATE'], rows, [2, 3])
          .split('\n')
          .map((line) => (line ? `    ${line}` : line))
          .join('\n');
      }
      out += '\n';
    }
    out += routing
      ? 'One drawn order (weighted random inside each tier; lower priority numbers first; fallbacks last):\n'
      : 'Order:\n';
    explanation.order.forEach((o, i) => {
      out += `  ${i + 1}. ${printable(o.provider)} / ${printable(o.model)}${o.via === model ? '' : `  (fallback ${printable(o.via)})`}\n`;
    });
    out +=
      '\nA call moves down this order only when an attempt fails before anything reached the client with\n' +
      'a retryable error (connection failure, timeout, 408, 429, 5xx), each target at most once' +
      (routing ? ', while the\nretry budget allows.\n' : '.\n');
    out += routing
      ? '\nHealth: this is a fresh process, so every target counts as healthy here. For live health\n' +
        '(cooldowns, probes, error rates) ask the running gateway:\n' +
        `  GET /admin/route?model=${encodeURIComponent(model)}&operation=${operation}   (with the admin key)\n`
      : '';
    process.stdout.write(out);
    return 0;
  } finally {
    await gateway.stop();
  }
}
