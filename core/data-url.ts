/**
 * Base64 `data:` URLs as clients write them (RFC 2397): `data:<type>[;param=value...];base64,<data>`,
 * parameters such as `;name=a.png` allowed before `;base64`, which is read in any case. What a
 * translation puts into another vendor's inline-data field.
 */

export interface Base64Data {
  /** The media type, lower-cased, without its parameters (`image/jpg` as `image/jpeg`); '' when none is given. */
  type: string;
  /** The base64 text, as it came. */
  data: string;
}

const BASE64_DATA_URL = /^data:([^;,]*)((?:;[^;,]*)*);base64,(.*)$/is;

/** A base64 data: URL's media type and data; undefined for any other URL (a plain-text data: URL too). */
export function base64DataUrl(url: string): Base64Data | undefined {
  const match = BASE64_DATA_URL.exec(url);
  if (!match) return undefined;
  return { type: mediaType(match[1]!), data: match[3]! };
}

/** A media type as vendors take it: trimmed, lower-cased, `image/jpg` (a common misspelling OpenAI takes) as `image/jpeg`. */
export function mediaType(text: string): string {
  const type = text.trim().toLowerCase();
  return type === 'image/jpg' || type === 'image/pjpeg' ? 'image/jpeg' : type;
}
