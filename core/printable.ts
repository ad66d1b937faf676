/**
 * Control and bidirectional-override characters: in text a client or a key's creator chose (a
 * model name, a key name), they would drive a terminal (colours, its title, a carriage return
 * that overwrites the line) or forge a line of a log. Shown escaped, never raw.
 */
export const UNSAFE_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const UNSAFE_ALL = new RegExp(UNSAFE_CHARACTERS.source, 'g');

/** `text` with each control or bidi character written as its `\uXXXX` escape. */
export function printable(text: string): string {
  return UNSAFE_CHARACTERS.test(text) ? text.replace(UNSAFE_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : text;
}
