import { tokenCount, usageFromChat, type ChatUsage, type OperationId, type Usage } from './operations.js';

/**
 * The usage of an embedding list: `{prompt_tokens, total_tokens}`. Everything is input; a back
 * end that reports only `total_tokens` is read as that many input tokens.
 */
function usageFromEmbeddings(usage: { prompt_tokens?: unknown; total_tokens?: unknown }): Usage | undefined {
  const prompt = tokenCount(usage.prompt_tokens);
  const total = tokenCount(usage.total_tokens);
  const input = prompt ?? total;
  if (input === undefined) return undefined;
  return { inputTokens: input, outputTokens: 0, totalTokens: total ?? input };
}

/**
 * The usage a canonical body or chunk reports, if any. Canonical chat-like results carry it in
 * `usage` (a stream's last chunk, or the whole body), so the core meters every format alike.
 */
export function usageOf(operation: OperationId, value: unknown): Usage | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const usage = (value as { usage?: ChatUsage | null }).usage;
  if (!usage || typeof usage !== 'object') return undefined;
  switch (operation) {
    case 'chat':
    case 'completion':
      return usageFromChat(usage);
    case 'embeddings':
      return usageFromEmbeddings(usage);
    default:
      return undefined;
  }
}
