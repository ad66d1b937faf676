#!/usr/bin/env node
// `npm run bench`: build dist/ when a TypeScript source is newer than it, then run the benchmark
// (dist/bench/run.js). Arguments pass through: `npm run bench -- --quick`.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const entry = path.join(root, 'dist', 'bench', 'run.js');

function newest(dir) {
  let latest = 0;
  if (!existsSync(dir)) return latest;
  for (const item of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, item.name);
    if (item.isDirectory()) latest = Math.max(latest, newest(full));
    else if (item.name.endsWith('.ts')) latest = Math.max(latest, statSync(full).mtimeMs);
  }
  return latest;
}

const built = existsSync(entry) && existsSync(path.join(root, 'dist', 'core', 'cli.js')) ? statSync(entry).mtimeMs : 0;
const sources = Math.max(
  ...['core', 'plugins', 'config', 'bench'].map((d) => newest(path.join(root, d))),
  statSync(path.join(root, 'tsconfig.json')).mtimeMs,
);
if (sources > built) {
  process.stderr.write('bench: sources changed since the last build: npm run build\n');
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}

const { main } = await import(pathToFileURL(entry).href);
try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`bench failed: ${error?.stack ?? String(error)}\n`);
  process.exitCode = 1;
}
