/**
 * Control, bidirectional-override and invisible characters: in text a client or a key's creator
 * chose (a model name, a key name), they would drive a terminal (colours, its title, a carriage
 * return that overwrites the line), forge a line of a log (the line and paragraph separators), or
 * make two names that look the same differ (the zero-width space and word joiner, direction marks,
 * the BOM; not the zero-width joiner and non-joiner, which emoji and Persian text need). Shown
 * escaped, never raw. The ranges, for the regular expressions of JSON Schemas (`pattern`).
 */
export const UNSAFE_RANGES = '\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u2069\\ufeff';
export const UNSAFE_CHARACTERS = new RegExp(`[${UNSAFE_RANGES}]`);
const UNSAFE_ALL = new RegExp(UNSAFE_CHARACTERS.source, 'g');

/** `text` with each control or bidi character written as its `\uXXXX` escape. */
export function printable(text: string): string {
  return UNSAFE_CHARACTERS.test(text) ? text.replace(UNSAFE_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : text;
}
