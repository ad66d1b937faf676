import { FILE_TOKENS, textBytes } from '../../metering/tokens.js';
import { Losses } from '../anthropic-messages/request.js';
import { mediaPart } from './request.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Whether the translation carries a part's media: what its own reading of the part (mediaPart) makes of it. */
function carried(part: Json): boolean {
  if (!isObject(part.inlineData) && !isObject(part.fileData)) return true;
  return mediaPart(part, new Losses()) !== undefined;
}

/**
 * What a generateContent body holds that the canonical form has no place for, in tokens, for
 * :countTokens (a Gemini back end reads it all the same): code execution parts at about four
 * bytes a token of their texts, media it does not carry (a video, a Files API or YouTube URI) at
 * the bound metering takes for a file (FILE_TOKENS).
 */
export function uncarriedParts(body: Json): number {
  let bytes = 0;
  let fixed = 0;
  for (const content of Array.isArray(body.contents) ? body.contents : []) {
    if (!isObject(content) || !Array.isArray(content.parts)) continue;
    for (const part of content.parts) {
      if (!isObject(part)) continue;
      if (isObject(part.executableCode) || isObject(part.codeExecutionResult)) bytes += textBytes(part.executableCode) + textBytes(part.codeExecutionResult);
      else if (!carried(part)) fixed += FILE_TOKENS;
    }
  }
  return fixed + Math.ceil(bytes / 4);
}
