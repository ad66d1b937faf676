import type { ChatMessage, ContentPart } from './operations.js';

/**
 * A tool message of the canonical form may hold what the tool returned besides text: an image
 * (a screenshot), a file, audio. Some back ends take them inside the tool result, and so see
 * which call returned them; others' tool results take text only. For such a back end (a
 * provider's choice), toolMediaAfter moves them into a user message right after the
 * run of tool messages (joining the user message that follows the run, if one does, in front of
 * its content): the model still sees them, next to the results.
 */
export function toolMediaAfter(messages: ChatMessage[]): ChatMessage[] {
  if (!Array.isArray(messages) || !messages.some(holdsMedia)) return messages;
  const out: ChatMessage[] = [];
  let media: ContentPart[] = [];
  const flush = (next: ChatMessage | undefined): boolean => {
    if (media.length === 0) return false;
    const moved = media;
    media = [];
    if (next?.role === 'user') {
      out.push({ ...next, content: [...moved, ...partsOf(next.content)] });
      return true;
    }
    out.push({ role: 'user', content: moved });
    return false;
  };
  for (const message of messages) {
    if (message.role === 'tool' && holdsMedia(message)) {
      const parts = message.content as ContentPart[];
      const text = parts.filter((p) => p.type === 'text');
      media.push(...parts.filter((p) => p.type !== 'text'));
      // Text only is left; none at all is an empty text (chat back ends refuse an empty list).
      out.push({ ...message, content: text.length === 0 ? '' : text });
      continue;
    }
    if (message.role !== 'tool' && flush(message)) continue;
    out.push(message);
  }
  flush(undefined);
  return out;
}

function holdsMedia(message: ChatMessage): boolean {
  return message.role === 'tool' && Array.isArray(message.content) && message.content.some((p) => p?.type !== 'text');
}

function partsOf(content: ChatMessage['content']): ContentPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  return Array.isArray(content) ? content : [];
}
