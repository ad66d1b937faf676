import { pathToFileURL } from 'node:url';
import { TapAnsweredNull } from './tap-answered-null.js';

/**
 * Which plugin a failure came from, for the log line that reports it: the first frame of its
 * stack in the file (or the package folder) a plugin was loaded from. Built-ins are not listed:
 * the places are the third parties' (their bugs are the ones an operator must take back to
 * their authors). Looked up only when something failed: nothing is added to a call.
 */
const places: Array<{ place: string; url: string; plugin: string }> = [];

/** A plugin was loaded from `place` (its file, or its package's folder): stacks name it as a path or a file URL. */
export function notePluginPlace(place: string, plugin: string): void {
  if (!places.some((p) => p.place === place)) places.push({ place, url: pathToFileURL(place).href, plugin });
}

/** The plugin whose code the stack of `error` passes through first, if any. */
export function pluginBlamed(error: unknown): string | undefined {
  // A failure the gateway found in what a plugin's tap answered names it itself.
  if (error instanceof TapAnsweredNull) return error.plugin;
  if (places.length === 0) return undefined;
  const stack = (error as { stack?: unknown } | null)?.stack;
  if (typeof stack !== 'string') return undefined;
  for (const line of stack.split('\n')) {
    for (const p of places) if (line.includes(p.url) || line.includes(p.place)) return p.plugin;
  }
  return undefined;
}
