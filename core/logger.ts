import winston from 'winston';
import type { LoggingConfig } from '../config/types.js';
import { printable } from './printable.js';

export type { Logger } from 'winston';

const { combine, timestamp, json, colorize, printf, errors } = winston.format;

/**
 * A field's value as the pretty line shows it: escaped, and quoted (logfmt's way, `\` and `"`
 * escaped inside) when it is empty or holds a space, `=`, `"` or `\`, so that a model name like
 * `a b=c` (or `a\" b=c`) cannot pass for two fields.
 */
function fieldValue(text: string): string {
  if (text !== '' && !/[\s="\\]/.test(text)) return printable(text);
  // Escaped before printable() writes its own `\uXXXX` escapes, which stay single.
  return `"${printable(text.replace(/\\/g, '\\\\').replace(/"/g, '\\"'))}"`;
}

/** Readable one-line form for a terminal: `12:00:01 info  request  id=.. status=200`. */
const pretty = printf((info) => {
  const { level, message, timestamp: ts, plugin, ...rest } = info as Record<string, unknown>;
  const time = typeof ts === 'string' ? ts.slice(11, 23) : '';
  const fields = Object.entries(rest)
    .filter(([k, v]) => v !== undefined && typeof k === 'string')
    .map(([k, v]) => `${k}=${fieldValue(typeof v === 'string' ? v : String(JSON.stringify(v)))}`)
    .join(' ');
  // What a client chose (a model name) is in these fields: escaped, it cannot drive the terminal or forge a line.
  return `${time} ${level} ${plugin ? `[${printable(String(plugin))}] ` : ''}${printable(String(message))}${fields ? `  ${fields}` : ''}`;
});

/**
 * The process logger. JSON lines when stdout is not a terminal (for collectors), readable lines
 * on a terminal. `LOG_LEVEL` and `LOG_FORMAT` override the file.
 */
export function createLogger(options: Partial<LoggingConfig> = {}, stream: NodeJS.WritableStream = process.stdout): winston.Logger {
  // The environment's values are read as the file's are checked: any case, and one that is none
  // of them is said, not taken (winston would write nothing, warnings included, for `WARNING`).
  const envLevel = fromEnv('LOG_LEVEL', LEVELS);
  const envFormat = fromEnv('LOG_FORMAT', FORMATS);
  const level = envLevel.value ?? options.level ?? 'info';
  const wanted = envFormat.value ?? options.format ?? 'auto';
  const isTty = Boolean((stream as NodeJS.WriteStream).isTTY);
  const usePretty = wanted === 'pretty' || (wanted === 'auto' && isTty);
  // A log reader that goes away (`| head`, a closed pipe) must not take the gateway down.
  if (!(stream as NodeJS.WriteStream & { __switchyardGuard?: boolean }).__switchyardGuard) {
    stream.on('error', () => undefined);
    (stream as NodeJS.WriteStream & { __switchyardGuard?: boolean }).__switchyardGuard = true;
  }
  const logger = winston.createLogger({
    level,
    format: usePretty
      ? combine(errors({ stack: false }), timestamp(), colorize(), pretty)
      : combine(errors({ stack: false }), timestamp(), json()),
    transports: [new winston.transports.Stream({ stream })],
  });
  logger.on('error', () => undefined);
  for (const refused of [envLevel.refused, envFormat.refused]) if (refused) logger.warn(refused);
  return logger;
}

const LEVELS: ReadonlyArray<LoggingConfig['level']> = ['error', 'warn', 'info', 'http', 'debug'];
const FORMATS: ReadonlyArray<LoggingConfig['format']> = ['auto', 'json', 'pretty'];

/** An environment variable's value among `allowed` (any case), or what to say of one that is none of them. */
function fromEnv<T extends string>(name: string, allowed: readonly T[]): { value?: T; refused?: string } {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return {};
  const value = raw.trim().toLowerCase() as T;
  if (allowed.includes(value)) return { value };
  // What applies instead is the file's own setting of what this variable names (the other variable may still apply).
  const setting = name === 'LOG_LEVEL' ? 'logging.level' : 'logging.format';
  return { refused: `${name}=${JSON.stringify(raw.slice(0, 40))} is not one of ${allowed.join(', ')}: ignored (${setting} of the file applies)` };
}

/**
 * Whether `logger` writes lines of `level`: the same answer as winston's `isLevelEnabled` for
 * this process's loggers (their one transport has no level of its own), without the array and
 * closure winston's check makes on every call.
 */
export function writesLevel(logger: winston.Logger, level: string): boolean {
  const levels = logger.levels;
  return (levels[logger.level] ?? -1) >= (levels[level] ?? Infinity);
}
