import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { loadConfig } from '../../config/load.js';
import { createGateway, type Gateway } from '../../core/gateway.js';
import { createLogger } from '../../core/logger.js';
import { builtins } from '../../plugins/builtins.js';

export interface RunningGateway {
  url: string;
  gateway: Gateway;
  /** Every log line written so far, parsed from JSON. */
  logs: Array<Record<string, unknown>>;
  /** The raw log text, for "never appears in a log" checks. */
  logText(): string;
  stop(): Promise<void>;
}

/** Write YAML into a fresh temp folder and return the file's path. */
export function writeConfig(yaml: string, name = 'gateway.config.yaml'): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-test-'));
  const file = path.join(dir, name);
  writeFileSync(file, yaml);
  return file;
}

/**
 * Start a gateway in this process from a YAML text (or file), on a real socket on 127.0.0.1
 * and a free port, with logs captured.
 */
export async function startGateway(yamlOrFile: string, env: NodeJS.ProcessEnv = process.env): Promise<RunningGateway> {
  const file = yamlOrFile.includes('\n') ? writeConfig(yamlOrFile) : yamlOrFile;
  const loaded = await loadConfig({ file, env });
  const sink = new PassThrough();
  let text = '';
  const logs: Array<Record<string, unknown>> = [];
  sink.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        logs.push({ message: line });
      }
    }
  });
  const logger = createLogger({ level: 'debug', format: 'json' }, sink);
  const gateway = await createGateway({ loaded, builtins, logger });
  const url = await gateway.listen(0, '127.0.0.1');
  return { url, gateway, logs, logText: () => text, stop: () => gateway.stop() };
}

/** Wait until `predicate` holds, polling the event loop (no fixed sleeps); fail after `ms`. */
export async function eventually(predicate: () => boolean, ms = 3000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
