const cache = new Map<string, RegExp>();

/** `gpt-4o*` matches `gpt-4o-mini`; `*` matches everything; `?` one character. */
export function globMatch(pattern: string, name: string): boolean {
  if (pattern === '*') return true;
  let re = cache.get(pattern);
  if (!re) {
    const body = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
    re = new RegExp(`^${body}$`);
    if (cache.size < 10_000) cache.set(pattern, re);
  }
  return re.test(name);
}

/** Whether a key limited to `patterns` (undefined = no limit) may use `model`. */
export function modelAllowed(patterns: readonly string[] | undefined, model: string): boolean {
  if (!patterns) return true;
  return patterns.some((p) => globMatch(p, model));
}
