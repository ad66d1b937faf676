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
/** The same but for tab, line feed and carriage return, which a message of several lines keeps. */
const UNSAFE_IN_LINES = new RegExp(`[${UNSAFE_RANGES.replace('\\u0000-\\u001f', '\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f')}]`);
const UNSAFE_IN_LINES_ALL = new RegExp(UNSAFE_IN_LINES.source, 'g');

const escaped = (c: string): string => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** `text` with each control or bidi character written as its `\uXXXX` escape. */
export function printable(text: string): string {
  return UNSAFE_CHARACTERS.test(text) ? text.replace(UNSAFE_ALL, escaped) : text;
}

/** The same, its tabs and line breaks kept as they are (an error message, which a JSON body escapes anyway). */
export function printableLines(text: string): string {
  return UNSAFE_IN_LINES.test(text) ? text.replace(UNSAFE_IN_LINES_ALL, escaped) : text;
}
