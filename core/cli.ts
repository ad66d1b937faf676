#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import { parseArgs } from 'node:util';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { ConfigErrors } from '../config/validate.js';
import { ADMIN_OPTIONS, isAdminCommand, prepareAdmin, printable, rejectOptions, runAdmin, UsageError, type OptionValues } from './cli-admin.js';
import { prepareRoute, ROUTE_OPTIONS, runRoute } from './cli-route.js';
import type { Gateway } from './gateway.js';
import type { Logger } from './logger.js';

/**
 * The server's modules (koa, the plugins...), loaded by start and check only: keys, logs and
 * usage start in a fraction of the time without them.
 */
async function serverModules() {
  const [{ createGateway }, { createLogger }, { builtins }] = await Promise.all([
    import('./gateway.js'),
    import('./logger.js'),
    import('../plugins/builtins.js'),
  ]);
  return { createGateway, createLogger, builtins };
}

const USAGE = `Usage: switchyard <command> [options]

Commands:
  start                  serve (the default command)
  check                  validate the configuration and its plugins, exit 0 (valid) or 1
  version                print the version
  keys create --name NAME [key options]
                         create an API key and print it (shown only this once)
  keys list [--all]      list keys, never their secrets (--all: revoked ones too)
  keys show ID|NAME      one key's details
  keys update ID|NAME [key options]
                         change a key's name, models, limits, budget or expiry; a running
                         gateway applies it from its next call (none clears a limit or the
                         budget, --models '*' the model list, --expires never the expiry)
  keys revoke ID|NAME    revoke a key; a running gateway refuses it at once
  logs [filters]         the request log, newest first
  usage [filters] [--by key,model,day]
                         totals: requests, prompt/completion/cached tokens, cost
  route --model NAME [--operation OP]
                         which back ends a call for NAME would try, in which order, and why
                         (tiers, weights, fallbacks); exit 1 for an unknown model

Options:
  -c, --config PATH      configuration file (default: ./gateway.config.yaml; env SWITCHYARD_CONFIG)
  -p, --port N           start: listen on this port (env PORT; overrides server.port)
  --host HOST            start: listen on this address (overrides server.host)
  --json                 keys, logs, usage, route: print JSON instead of text
  --operation OP         route: the kind of call (default chat)
  -h, --help             this text

Key options (keys create, keys update):
  --name NAME            required; unique among the keys not revoked
  --models LIST          allowed models, comma-separated globs ('gpt-4o*,echo'); default: any
  --rpm N, --tpm N       requests, tokens per minute
  --max-concurrent N     requests in flight at once
  --budget X             spending limit, in the currency of the pricing table
  --expires TIME         when the key stops working (ISO date-time), or
  --expires-in-days N

Filters (logs, usage):
  --key ID|NAME  --model M  --since T  --until T
  --status N             logs: only this HTTP status
  --limit N              logs: rows per page, 1-1000 (default 50)
  --cursor C             logs: the next page, as printed by the previous one
  T is an ISO date-time (UTC unless it has an offset), epoch milliseconds,
  or a time ago: 30m, 24h, 7d.

Exit status: 0 done, 1 failed (configuration, store, unknown key...), 2 bad command line.
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Print a start-up problem the way an operator can act on it: file, YAML path, what is wrong. */
function report(error: unknown): void {
  if (error instanceof ConfigErrors) {
    process.stderr.write(`${error.message}\n`);
    return;
  }
  const e = error as NodeJS.ErrnoException;
  if (e?.code === 'EADDRINUSE') {
    process.stderr.write(`cannot listen: the address is already in use (${e.message.replace(/^listen EADDRINUSE: address already in use /, '')})\n`);
    return;
  }
  // Only the server's own listen is about the port (a store folder it may not make says EACCES too).
  if (e?.code === 'EACCES' && (e.syscall === 'listen' || e.syscall === 'bind')) {
    process.stderr.write('cannot listen: permission denied for that port\n');
    return;
  }
  // A host this machine has no address of, or a name that does not resolve: the host is what is wrong.
  if (e?.code === 'EADDRNOTAVAIL' && (e.syscall === 'listen' || e.syscall === 'bind')) {
    process.stderr.write(`cannot listen: this machine has no such address (server.host or --host: ${printable(String((e as { address?: unknown }).address ?? ''))})\n`);
    return;
  }
  if ((e?.code === 'ENOTFOUND' || e?.code === 'EAI_AGAIN') && e.syscall === 'getaddrinfo') {
    process.stderr.write(`cannot listen: the host name does not resolve (server.host or --host: ${printable(String((e as { hostname?: unknown }).hostname ?? ''))})\n`);
    return;
  }
  process.stderr.write(`switchyard: ${e?.message ?? String(error)}\n`);
}

function portFrom(flag: string | undefined, env: string | undefined): number | undefined {
  const raw = flag ?? env;
  if (raw === undefined || raw === '') return undefined;
  // Digits only: Number() reads ' ' as 0 (a random port), 0x10 as 16 and 1e3 as 1000.
  const port = /^\d{1,5}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`invalid port '${raw}'${flag === undefined ? ' in the environment variable PORT' : ''} (expected 0-65535)`);
  }
  return port;
}

/** How long a failed `start` or `check` waits for its output to be written before it exits whatever holds the loop. */
const FAILED_EXIT_MS = 1_000;

async function check(loaded: LoadedConfig): Promise<void> {
  // Loading plugins and creating providers checks plugin options and provider fields too.
  const { createGateway, createLogger, builtins } = await serverModules();
  const gateway = await createGateway({ loaded, builtins, logger: createLogger({ level: 'error' }, process.stderr) });
  await gateway.stop();
}

/**
 * The `listening` line is the readiness signal operators and supervisors wait for, so it is
 * written even when logging.level (or LOG_LEVEL) is warn or error.
 */
function announcer(logger: Logger, loaded: LoadedConfig, createLogger: typeof import('./logger.js').createLogger): Logger {
  if (logger.isInfoEnabled()) return logger;
  const announce = createLogger(loaded.config.logging);
  announce.level = 'info';
  return announce;
}

/**
 * How much V8 lets the old generation grow past what the last full collection kept, in percent.
 * Node's default lets it reach several times the live data under load (a gateway's live heap is
 * small: tens of MB, while each call's garbage is promoted in bulk at 50 connections), so
 * resident memory after a burst sat at twice or three times what is needed. 30 keeps it within
 * about a third of the live heap for the same throughput (docs/performance.md). A
 * `--heap-growing-percent` the operator gives in NODE_OPTIONS or on node's command line wins.
 */
const HEAP_GROWING_PERCENT = 30;

function tuneHeap(): void {
  const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`;
  if (given.includes('heap-growing-percent')) return;
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

/** A signal this soon after the one that began the stop is the same stop (see shutdown in start). */
const REPEATED_SIGNAL_MS = 1000;

async function start(loaded: LoadedConfig, port: number | undefined, host: string | undefined): Promise<void> {
  tuneHeap();
  const { createGateway, createLogger, builtins } = await serverModules();
  const logger = createLogger(loaded.config.logging);
  let stopping = false;

  // Signals are handled from the start: a supervisor may send SIGTERM the moment it reads the
  // `listening` line (or before), and that must still be a graceful stop with exit 0.
  /** The gateway once made: a stop that comes while it starts (its plugins setting up) stops it then. */
  let made: Gateway | undefined;
  const startup = (async (): Promise<Gateway> => {
    const gateway = await createGateway({ loaded, builtins, logger });
    made = gateway;
    // A setup or ready tap that fails, or a port in use: what the plugins opened is let go.
    const url = await gateway.listen(port ?? loaded.config.server.port, host ?? loaded.config.server.host).catch(async (error: unknown) => {
      await gateway.stop().catch(() => undefined);
      throw error;
    });
    if (!stopping) {
      announcer(logger, loaded, createLogger).info(`listening on ${url}`, { url, config: loaded.filepath, plugins: gateway.plugins.map((p) => p.name) });
    }
    return gateway;
  })();

  const exit = (code: number) => {
    logger.on('finish', () => process.exit(code));
    logger.end();
    // Everything is flushed and closed by now; do not linger on whatever else holds the loop.
    setTimeout(() => process.exit(code), 100);
  };
  let stoppingSince = 0;
  const shutdown = (signal: string) => {
    if (stopping) {
      // Ctrl-C in the terminal that ran `npm start` reaches the gateway twice at once (from the
      // terminal and forwarded by npm), as does a supervisor's signal to the whole process group:
      // one stop, not a demand to exit now.
      if (performance.now() - stoppingSince < REPEATED_SIGNAL_MS) return;
      logger.warn(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    stoppingSince = performance.now();
    logger.info('shutting down', { signal });
    // Made and still starting: stopped now (the requests waiting for its setup are answered), not
    // once a setup that may hang is done.
    (made ? Promise.resolve(made) : startup)
      .then(
        (gateway) => gateway.stop().then(() => 0),
        () => 1, // start-up failed: main() reports it
      )
      .then(
        (code) => {
          if (code === 0) logger.info('stopped');
          exit(code);
        },
        (error) => {
          logger.error('shutdown failed', { error: String(error) });
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // The terminal that ran `npm start` closed (an SSH session ended), or a supervisor's "reload":
  // the gateway does not reload its configuration, and must not die with its rows unwritten.
  process.on('SIGHUP', () => shutdown('SIGHUP'));
  await startup;
}

/** A bad command line: say what, then the usage; exit status 2. */
function usageError(error: unknown): number {
  process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
  return 2;
}

export async function main(argv: string[]): Promise<number | undefined> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        config: { type: 'string', short: 'c' },
        port: { type: 'string', short: 'p' },
        host: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        ...ADMIN_OPTIONS,
        ...ROUTE_OPTIONS,
      },
    });
  } catch (error) {
    return usageError(error);
  }
  const { values, positionals } = parsed;
  const command = positionals[0] ?? 'start';
  if (values.help || command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'version') {
    // As every other command: what it does not take is a mistake, not ignored.
    if (positionals.length > 1) return usageError(new UsageError(`unexpected argument '${printable(positionals[1]!)}' for 'version'`));
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (isAdminCommand(command)) {
    try {
      // The command line is checked before the configuration is read: a typo exits 2 either way.
      const run = prepareAdmin(positionals, values as OptionValues);
      // These commands use the stores, never a back end: a provider's unset credential is no error.
      return await runAdmin(run, await loadConfig({ file: values.config, credentialVariablesOptional: true }));
    } catch (error) {
      if (error instanceof UsageError) return usageError(error);
      report(error);
      return 1;
    }
  }
  if (command === 'route') {
    try {
      const args = prepareRoute(positionals, values as OptionValues);
      return await runRoute(args, await loadConfig({ file: values.config }));
    } catch (error) {
      if (error instanceof UsageError) return usageError(error);
      report(error);
      return 1;
    }
  }
  if (command !== 'start' && command !== 'check') {
    process.stderr.write(`unknown command '${command}'\n\n${USAGE}`);
    return 2;
  }
  let port: number | undefined;
  try {
    rejectOptions(command, values as OptionValues, command === 'start' ? ['config', 'port', 'host'] : ['config']);
    // `start prod.yaml` must not quietly serve ./gateway.config.yaml instead.
    const extra = positionals[1];
    if (extra !== undefined) {
      const hint = /\.(ya?ml|json)$/i.test(extra) ? ` (give the file with --config ${printable(extra)})` : '';
      throw new UsageError(`unexpected argument '${printable(extra)}' for '${command}'${hint}`);
    }
    // The command line is checked before the configuration is read.
    if (command === 'start') port = portFrom(values.port, process.env.PORT);
    // An empty --host (a script's unset "$HOST") would listen on every interface.
    if (command === 'start' && values.host !== undefined && values.host.trim() === '') {
      throw new UsageError("--host needs an address or a host name (empty, it would listen on every interface; give 0.0.0.0 or :: for that)");
    }
  } catch (error) {
    return usageError(error);
  }
  try {
    const loaded = await loadConfig({ file: values.config });
    if (command === 'check') {
      await check(loaded);
      process.stdout.write(`${loaded.filepath}: ok\n`);
      return 0;
    }
    await start(loaded, port, values.host);
    return undefined; // keep serving
  } catch (error) {
    report(error);
    // Failed: exit, even if a plugin still holds the event loop (a timer it never let go).
    setTimeout(() => process.exit(1), FAILED_EXIT_MS).unref();
    return 1;
  }
}

let settled = false;
// Node exits when nothing is left to wait for. Before the command settled, that means something
// it awaited can never finish (a plugin's apply() or a provider's create() whose promise is never
// resolved): a failure, said as one, not a silent exit 0 with nothing listening.
process.once('beforeExit', () => {
  if (settled) return;
  process.stderr.write('switchyard: start-up never finished: a promise it waited for (a plugin\'s apply() or a provider\'s create()) can never settle\n');
  process.exitCode = 1;
});
main(process.argv.slice(2)).then(
  (code) => {
    settled = true;
    if (code !== undefined) process.exitCode = code;
  },
  (error) => {
    settled = true;
    report(error);
    process.exitCode = 1;
  },
);
