import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OperationHandler } from '../../../core/index.js';
import { tokenize } from './chat.js';

/** The words of a text, lower-cased (letters and digits). */
function wordsOf(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** The text the mock ranks a document by: the string, an object's `text`, or its string values. */
export function documentText(document: unknown): string {
  if (typeof document === 'string') return document;
  if (document !== null && typeof document === 'object') {
    const text = (document as { text?: unknown }).text;
    if (typeof text === 'string') return text;
    return Object.values(document as Record<string, unknown>)
      .filter((v): v is string => typeof v === 'string')
      .join(' ');
  }
  return '';
}

/**
 * The mock's relevance: the share of the query's distinct words the document contains, with a
 * little weight for how dense they are in it, so that it stays in [0, 1) and ties are rare.
 */
export function overlapScore(query: string, document: string): number {
  const asked = new Set(wordsOf(query));
  const words = wordsOf(document);
  if (asked.size === 0 || words.length === 0) return 0;
  const present = new Set(words.filter((w) => asked.has(w)));
  const hits = words.filter((w) => asked.has(w)).length;
  return Number(((present.size / asked.size) * 0.9 + (hits / words.length) * 0.0999).toFixed(6));
}

/**
 * Deterministic rerank with no network: every document scored by word overlap with the query,
 * highest first (ties by position), cut to top_n, documents returned when asked. Usage: the
 * mock's word tokens of the query once per document plus the documents', as input tokens.
 */
export function mockRerank(options: { latencyMs: number }): OperationHandler<'rerank'> {
  return async (request, { signal }) => {
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const query = typeof request.body.query === 'string' ? request.body.query : '';
    const documents = Array.isArray(request.body.documents) ? (request.body.documents as unknown[]) : [];
    const queryTokens = tokenize(query).length;
    let tokens = 0;
    const scored = documents.map((document, index) => {
      const text = documentText(document);
      tokens += queryTokens + tokenize(text).length;
      return { index, relevance_score: overlapScore(query, text), document: typeof document === 'string' ? { text: document } : (document as Record<string, unknown>) };
    });
    scored.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
    const topN = typeof request.body.top_n === 'number' ? request.body.top_n : scored.length;
    const withDocuments = request.body.return_documents === true;
    const results = scored.slice(0, topN).map(({ document, ...rest }) => (withDocuments ? { ...rest, document } : rest));
    return {
      kind: 'json',
      status: 200,
      body: {
        id: `rerank-mock${randomBytes(10).toString('hex')}`,
        results,
        meta: { billed_units: { search_units: 1 }, tokens: { input_tokens: tokens, output_tokens: 0 } },
      },
      usage: { inputTokens: tokens, outputTokens: 0, totalTokens: tokens },
    };
  };
}
