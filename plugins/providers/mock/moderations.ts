import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OperationHandler } from '../../../core/index.js';

/** Every category OpenAI's omni moderation models report, with the input types each applies to. */
export const MODERATION_CATEGORIES = [
  'harassment',
  'harassment/threatening',
  'hate',
  'hate/threatening',
  'illicit',
  'illicit/violent',
  'self-harm',
  'self-harm/intent',
  'self-harm/instructions',
  'sexual',
  'sexual/minors',
  'violence',
  'violence/graphic',
] as const;

export type ModerationCategory = (typeof MODERATION_CATEGORIES)[number];

/**
 * The mock's word list: a text containing one of these words (whole word, any case) is flagged
 * in the categories listed. Deliberately tiny: it is for tests and demos, not for moderation.
 */
export const MOCK_FLAGGED_WORDS: Readonly<Record<string, readonly ModerationCategory[]>> = {
  kill: ['violence', 'harassment/threatening'],
  murder: ['violence'],
  gore: ['violence/graphic', 'violence'],
  hate: ['hate'],
  idiot: ['harassment'],
  suicide: ['self-harm', 'self-harm/intent'],
  bomb: ['illicit/violent', 'illicit'],
  steal: ['illicit'],
  explicit: ['sexual'],
};

/** A small deterministic score in [0.00001, 0.01) for a category that is not flagged. */
function lowScore(model: string, text: string, category: string): number {
  const hash = createHash('sha256').update(model).update('\u0000').update(category).update('\u0000').update(text).digest();
  return 0.00001 + (hash.readUInt32LE(0) / 4294967296) * 0.00999;
}

/** One moderation result for one text: flagged by the word list, scores deterministic. */
export function moderate(model: string, text: string) {
  const words = text.toLowerCase().match(/[a-z]+/g) ?? [];
  const hits = new Set<ModerationCategory>();
  for (const word of words) for (const category of MOCK_FLAGGED_WORDS[word] ?? []) hits.add(category);
  const categories: Record<string, boolean> = {};
  const scores: Record<string, number> = {};
  const applied: Record<string, string[]> = {};
  for (const category of MODERATION_CATEGORIES) {
    categories[category] = hits.has(category);
    scores[category] = hits.has(category) ? 0.9 + lowScore(model, text, category) * 9 : lowScore(model, text, category);
    // Every input is text: each score applies to text, as OpenAI reports it for a text input.
    applied[category] = ['text'];
  }
  return { flagged: hits.size > 0, categories, category_scores: scores, category_applied_input_types: applied };
}

/**
 * Deterministic moderation with no network: one result per input string, flagged when the text
 * holds a word of MOCK_FLAGGED_WORDS. No usage (moderation is priced per request).
 */
export function mockModeration(options: { latencyMs: number }): OperationHandler<'moderation'> {
  return async (request, { signal }) => {
    if (options.latencyMs > 0) await sleep(options.latencyMs, undefined, { signal });
    const input = request.body.input;
    const texts = typeof input === 'string' ? [input] : Array.isArray(input) ? input.map((t) => (typeof t === 'string' ? t : '')) : [];
    return {
      kind: 'json',
      status: 200,
      body: { id: `modr-mock${randomBytes(10).toString('hex')}`, model: request.model, results: texts.map((text) => moderate(request.model, text)) },
    };
  };
}
