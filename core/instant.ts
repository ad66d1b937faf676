/**
 * A point in time as operators write one, read the same way by the CLI (`--since`, `--until`,
 * `--expires`) and the admin API (`since`, `until`): epoch milliseconds, a date (its midnight
 * UTC), or an ISO 8601 date-time (`T`, `t` or a space between; seconds and a fraction optional;
 * UTC unless it carries an offset: `Z`, `+02`, `+0200`, `+02:00`; an offset's `+` that a query
 * string turned into a space is read back as `+`). A date that does not exist (`2026-02-30`,
 * `T24:00`) is none.
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+\- ]\d{2}(?::?\d{2})?)?)?$/;

/** Epoch milliseconds have 12 digits or more since 1973; fewer are epoch seconds (or a date without dashes). */
const FEWEST_MS_DIGITS = 12;

/**
 * The epoch milliseconds `text` names (see DATE_TIME); `epoch-seconds` for a number too short to
 * be milliseconds (it would mean a moment of 1970); undefined for anything else.
 */
export function parseInstant(text: string): number | 'epoch-seconds' | undefined {
  if (/^\d+$/.test(text)) {
    if (text.length > 15) return undefined;
    return text.length < FEWEST_MS_DIGITS ? 'epoch-seconds' : Number(text);
  }
  const match = DATE_TIME.exec(text);
  if (!match) return undefined;
  const [, y, mo, d, h = '0', mi = '0', s = '0', fraction = '', zone] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const at = new Date(0);
  at.setUTCFullYear(year, month - 1, day);
  // Date rolls 2025-02-30 over into March: a date that does not exist is a mistake.
  if (at.getUTCFullYear() !== year || at.getUTCMonth() !== month - 1 || at.getUTCDate() !== day) return undefined;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return undefined;
  let offsetMinutes = 0;
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const hours = Number(digits.slice(0, 2));
    const minutes = digits.length > 2 ? Number(digits.slice(2)) : 0;
    if (hours > 23 || minutes > 59) return undefined;
    offsetMinutes = (zone[0] === '-' ? -1 : 1) * (hours * 60 + minutes);
  }
  at.setUTCHours(Number(h), Number(mi), Number(s), Number(fraction.slice(0, 3).padEnd(3, '0')));
  const ms = at.getTime() - offsetMinutes * 60_000;
  return Number.isFinite(ms) ? ms : undefined;
}
