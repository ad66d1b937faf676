import { FILE_TOKENS, IMAGE_TOKENS, textBytes } from '../../metering/tokens.js';
import { Losses, userPart } from './request.js';

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * What a Messages body holds that the canonical form has no place for, in tokens, for
 * count_tokens: a back end of the client's own format (Anthropic) reads it all the same. A block
 * of another type (a search result, a server tool's use and result) at about four bytes a token
 * of its texts; a document given as content blocks likewise; a document or image given by URL or
 * file id where the translation drops it, at the bound metering takes for one (FILE_TOKENS,
 * IMAGE_TOKENS); a server tool (web search, bash, text editor) at its definition's texts. Labels,
 * ids and signatures are no text (textBytes).
 */
export function uncarriedTokens(body: Json): number {
  let bytes = 0;
  let fixed = 0;
  const visit = (block: unknown): void => {
    if (!isObject(block)) return;
    const source = isObject(block.source) ? block.source : {};
    // What the translation's own reading of a user block (userPart) carries is counted with the prompt.
    const dropped = (): boolean => userPart(block, new Losses(), 0, 0) === undefined;
    switch (block.type) {
      case 'text':
      case 'tool_use':
      case 'thinking':
      case 'redacted_thinking':
        return;
      case 'tool_result':
        if (Array.isArray(block.content)) for (const inner of block.content) visit(inner);
        return;
      case 'image':
        if (dropped()) fixed += IMAGE_TOKENS;
        return;
      case 'document':
        if (!dropped()) return;
        if (source.type === 'content') bytes += textBytes(source.content);
        else fixed += FILE_TOKENS;
        return;
      default:
        bytes += textBytes(block);
    }
  };
  for (const message of Array.isArray(body.messages) ? body.messages : []) {
    if (isObject(message) && Array.isArray(message.content)) for (const block of message.content) visit(block);
  }
  for (const tool of Array.isArray(body.tools) ? body.tools : []) {
    if (isObject(tool) && typeof tool.type === 'string' && tool.type !== 'custom') bytes += textBytes(tool);
  }
  return fixed + Math.ceil(bytes / 4);
}
