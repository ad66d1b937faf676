/**
 * `gpt-4o*` matches `gpt-4o-mini`; `*` matches any run of characters (none included); `?` one
 * character. Matched without regular expressions: a backtracking `.*` per `*` took time
 * quadratic in the name (a 200 KB model name against `*gpt*` held the event loop for seconds),
 * where this walk keeps one place to go back to, the last `*`, and so takes time linear in the
 * name for a given pattern.
 */
export function globMatch(pattern: string, name: string): boolean {
  if (pattern === '*') return true;
  let p = 0;
  let n = 0;
  // The last `*` seen, and where in the name its run of characters ends so far.
  let star = -1;
  let resume = 0;
  while (n < name.length) {
    const c = pattern.charCodeAt(p);
    if (p < pattern.length && c !== STAR && (c === QUESTION || c === name.charCodeAt(n))) {
      p++;
      n++;
    } else if (p < pattern.length && c === STAR) {
      star = p++;
      resume = n;
    } else if (star >= 0) {
      // The last `*` takes one character more; what follows it is tried from there.
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.length && pattern.charCodeAt(p) === STAR) p++;
  return p === pattern.length;
}

const STAR = 42; // '*'
const QUESTION = 63; // '?'

/** Whether a key limited to `patterns` (undefined = no limit) may use `model`. */
export function modelAllowed(patterns: readonly string[] | undefined, model: string): boolean {
  if (!patterns) return true;
  return patterns.some((p) => globMatch(p, model));
}
