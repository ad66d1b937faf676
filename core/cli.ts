#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import { ConfigErrors } from '../config/validate.js';
import { builtins } from '../plugins/builtins.js';
import { createGateway, type Gateway } from './gateway.js';
import { createLogger, type Logger } from './logger.js';

const USAGE = `Usage: switchyard <command> [options]

Commands:
  start            serve (the default command)
  check            validate the configuration and its plugins, exit 0 (valid) or 1
  version          print the version

Options:
  --config PATH    configuration file (default: ./gateway.config.yaml; env SWITCHYARD_CONFIG)
  --port N         listen on this port (env PORT; overrides server.port)
  --host HOST      listen on this address (overrides server.host)
  -h, --help       this text
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
  if (e?.code === 'EACCES') {
    process.stderr.write('cannot listen: permission denied for that port\n');
    return;
  }
  process.stderr.write(`switchyard: ${e?.message ?? String(error)}\n`);
}

function portFrom(flag: string | undefined, env: string | undefined): number | undefined {
  const raw = flag ?? env;
  if (raw === undefined || raw === '') return undefined;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port '${raw}' (expected 0-65535)`);
  return port;
}

async function check(loaded: LoadedConfig): Promise<void> {
  // Loading plugins and creating providers checks plugin options and provider fields too.
  const gateway = await createGateway({ loaded, builtins, logger: createLogger({ level: 'error' }, process.stderr) });
  await gateway.stop();
}

/**
 * The `listening` line is the readiness signal operators and supervisors wait for, so it is
 * written even when logging.level (or LOG_LEVEL) is warn or error.
 */
function announcer(logger: Logger, loaded: LoadedConfig): Logger {
  if (logger.isInfoEnabled()) return logger;
  const announce = createLogger(loaded.config.logging);
  announce.level = 'info';
  return announce;
}

async function start(loaded: LoadedConfig, port: number | undefined, host: string | undefined): Promise<void> {
  const logger = createLogger(loaded.config.logging);
  let stopping = false;

  // Signals are handled from the start: a supervisor may send SIGTERM the moment it reads the
  // `listening` line (or before), and that must still be a graceful stop with exit 0.
  const startup = (async (): Promise<Gateway> => {
    const gateway = await createGateway({ loaded, builtins, logger });
    const url = await gateway.listen(port ?? loaded.config.server.port, host ?? loaded.config.server.host);
    if (!stopping) {
      announcer(logger, loaded).info(`listening on ${url}`, { url, config: loaded.filepath, plugins: gateway.plugins.map((p) => p.name) });
    }
    return gateway;
  })();

  const exit = (code: number) => {
    logger.on('finish', () => process.exit(code));
    logger.end();
    setTimeout(() => process.exit(code), 500).unref();
  };
  const shutdown = (signal: string) => {
    if (stopping) {
      logger.warn(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    logger.info('shutting down', { signal });
    startup
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
  await startup;
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
      },
    });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const command = positionals[0] ?? 'start';
  if (values.help || command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === 'version') {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (command !== 'start' && command !== 'check') {
    process.stderr.write(`unknown command '${command}'\n\n${USAGE}`);
    return 2;
  }
  try {
    const loaded = await loadConfig({ file: values.config });
    if (command === 'check') {
      await check(loaded);
      process.stdout.write(`${loaded.filepath}: ok\n`);
      return 0;
    }
    await start(loaded, portFrom(values.port, process.env.PORT), values.host);
    return undefined; // keep serving
  } catch (error) {
    report(error);
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== undefined) process.exitCode = code;
  },
  (error) => {
    report(error);
    process.exitCode = 1;
  },
);
