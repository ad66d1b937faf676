import { printable } from '../printable.js';
import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A new client key: `sk-sy-` and 40 random base62 characters (about 238 bits). */
export function generateSecret(): string {
  const bytes = randomBytes(60);
  let out = '';
  for (const byte of bytes) {
    if (byte >= 248) continue; // 248 = 62 * 4: keep the draw uniform
    out += ALPHABET[byte % 62];
    if (out.length === 40) break;
  }
  return out.length === 40 ? `sk-sy-${out}` : generateSecret();
}

/** How a secret is stored and looked up: SHA-256, hex. Keys are long and random, so a fast hash is enough. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/**
 * The part of a secret that may be shown and logged: `sk-sy-AbCd…` for generated keys; for
 * other keys at most 8 characters and never more than a third of the key.
 */
export function secretPrefix(secret: string): string {
  const visible = secret.startsWith('sk-sy-') && secret.length >= 30 ? 10 : Math.min(8, Math.floor(secret.length / 3));
  return `${secret.slice(0, visible)}…`;
}

/**
 * What looks like a key in a path (`sk-` and at least 12 more characters), at a segment's start or
 * after any character that is not part of a word or an id (`x.sk-…`, `Bearer sk-…`; not `task-…`
 * nor `video_sk-…`); a key made by the gateway (`sk-sy-` and 20 more) wherever it is.
 */
const KEY_SEGMENT = /(^|[^\w-]|(?=sk-sy-[A-Za-z0-9]{20}))(sk-[^/\s]{12,})/gi;

/** The shortest credential of the configuration looked for in a path (shorter ones would match words). */
const PATH_SECRET_LENGTH = 8;

/**
 * The credentials of a configuration as loggablePath looks for them, made once: those of 8
 * characters or more, each also as a URL carries it (`+`, `/`, `=` escaped), the longest first,
 * so that a key holding another is redacted whole.
 */
export function pathSecrets(secrets: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (secret.length < PATH_SECRET_LENGTH) continue;
    forms.add(secret);
    forms.add(encodeURIComponent(secret));
  }
  return [...forms].sort((a, b) => b.length - a.length);
}

/**
 * A request path as it may be logged: a credential of the configuration (`secrets`, made by
 * pathSecrets: a client key declared in the file, whatever its shape, the admin key, a
 * provider's key), sent as a model name or an id, is `[redacted]`; and a segment that looks like
 * a key (an operator who pasted a key made by the gateway into `/admin/keys/<id>` to revoke it)
 * shows only its prefix.
 */
export function loggablePath(path: string, secrets: readonly string[] = []): string {
  const redacted = redactedPath(path, secrets);
  if (!redacted.includes('%')) return redacted;
  // A secret spelled with escapes (`%61dm-…`, `Bearer%20sk-…`) is one all the same: looked for in
  // the path as it reads once what the escaped path showed is redacted (so a key whose escaped
  // `/` the raw path hid whole is not shown in part), and logged as it reads only when it held one.
  const decoded = decodedPath(redacted);
  const found = redactedPath(decoded, secrets);
  return found === decoded ? redacted : printable(found);
}

function redactedPath(path: string, secrets: readonly string[]): string {
  let out = path;
  for (const secret of secrets) {
    if (out.length >= secret.length && out.includes(secret)) out = out.split(secret).join('[redacted]');
  }
  return /sk-/i.test(out) ? out.replace(KEY_SEGMENT, (_match, before: string, secret: string) => before + secretPrefix(secret)) : out;
}

/** `path` with its escapes read: each run of them as UTF-8 where it is valid, else each escape of an ASCII character alone. */
function decodedPath(path: string): string {
  return path.replace(/(?:%[0-9a-f]{2})+/gi, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run.replace(/%([0-7][0-9a-f])/gi, (_escape, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    }
  });
}
