import winston from 'winston';
import type { LoggingConfig } from '../config/types.js';

export type { Logger } from 'winston';

const { combine, timestamp, json, colorize, printf, errors } = winston.format;

/** Readable one-line form for a terminal: `12:00:01 info  request  id=.. status=200`. */
const pretty = printf((info) => {
  const { level, message, timestamp: ts, plugin, ...rest } = info as Record<string, unknown>;
  const time = typeof ts === 'string' ? ts.slice(11, 23) : '';
  const fields = Object.entries(rest)
    .filter(([k, v]) => v !== undefined && typeof k === 'string')
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${time} ${level} ${plugin ? `[${String(plugin)}] ` : ''}${String(message)}${fields ? `  ${fields}` : ''}`;
});

/**
 * The process logger. JSON lines when stdout is not a terminal (for collectors), readable lines
 * on a terminal. `LOG_LEVEL` and `LOG_FORMAT` override the file.
 */
export function createLogger(options: Partial<LoggingConfig> = {}, stream: NodeJS.WritableStream = process.stdout): winston.Logger {
  const level = process.env.LOG_LEVEL ?? options.level ?? 'info';
  const wanted = process.env.LOG_FORMAT ?? options.format ?? 'auto';
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
  return logger;
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
