import { usageFromChat, type ChatUsage, type OperationId, type Usage } from './operations.js';

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
    case 'embeddings':
      return usageFromChat(usage);
    default:
      return undefined;
  }
}
