import { hiddenSlot } from './hidden.js';
import { countedUsage, tokenCount, usageFromChat, type ChatUsage, type OperationId, type Usage } from './operations.js';

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

interface ResponsesUsage {
  input_tokens?: unknown;
  output_tokens?: unknown;
  total_tokens?: unknown;
  input_tokens_details?: { cached_tokens?: unknown; cache_creation_tokens?: unknown; cache_creation_1h_tokens?: unknown } | null;
  output_tokens_details?: { reasoning_tokens?: unknown } | null;
  server_tool_use?: { web_search_requests?: unknown } | null;
}

/**
 * The usage of a Responses API `response` (or compaction): `{input_tokens, output_tokens,
 * total_tokens, input_tokens_details.cached_tokens, output_tokens_details.reasoning_tokens}`.
 * Counts that are not whole non-negative numbers make the whole usage unknown.
 */
function usageFromResponses(usage: ResponsesUsage): Usage | undefined {
  const inputs = usage.input_tokens_details;
  return countedUsage(usage.input_tokens, usage.output_tokens, usage.total_tokens, {
    cached: inputs?.cached_tokens,
    written: inputs?.cache_creation_tokens,
    writtenForAnHour: inputs?.cache_creation_1h_tokens,
    reasoning: usage.output_tokens_details?.reasoning_tokens,
    searches: usage.server_tool_use?.web_search_requests,
  });
}

/** The events of a Responses stream that end it, carrying the whole response (usage included). */
const FINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

/**
 * The usage a canonical body or chunk reports, if any. Canonical chat-like results carry it in
 * `usage` (a stream's last chunk, or the whole body), so the core meters every format alike.
 * A `responses` stream's chunks are its events: the last one carries the response, usage inside.
 */
export function usageOf(operation: OperationId, value: unknown): Usage | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  if (operation === 'responses' || operation === 'compact') {
    const event = value as { type?: unknown; response?: { usage?: unknown } | null };
    const holder = typeof event.type === 'string' && FINAL_RESPONSE_EVENTS.has(event.type) ? event.response : value;
    const usage = (holder as { usage?: unknown } | null | undefined)?.usage;
    return usage && typeof usage === 'object' ? usageFromResponses(usage as ResponsesUsage) : undefined;
  }
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

/** Earlier turns a back end keeps itself and bills as a call's input, by the body going up. */
const KEPT_HISTORY = hiddenSlot<readonly unknown[]>();

/**
 * Record that the back end answering `body` keeps `items` (earlier turns of the conversation,
 * such as a Responses `previous_response_id` chain it made) and counts them as this call's
 * input, though they are not in the body: a budget's worst case counts them too.
 */
export function keptHistory(body: object, items: readonly unknown[]): void {
  KEPT_HISTORY.set(body, items);
}

/** The earlier turns `body`'s back end keeps and bills as its input, if any (see keptHistory). */
export function keptHistoryOf(body: object): readonly unknown[] | undefined {
  return KEPT_HISTORY.get(body);
}

/** How to read the earlier turns of a body whose back end keeps them, until they are read (see keptHistoryLater). */
const KEPT_LATER = hiddenSlot<() => Promise<readonly unknown[]>>();

/**
 * As keptHistory, for a call nobody counts before it goes up: `read` gives the earlier turns
 * when a count needs them after all (its back end reported no usage), and not before, since
 * reading them walks a store.
 */
export function keptHistoryLater(body: object, read: () => Promise<readonly unknown[]>): void {
  KEPT_LATER.set(body, read);
}

/**
 * Read the earlier turns of `body` that keptHistoryLater left for later, so that keptHistoryOf
 * gives them; a read that fails leaves them out (the count is then of the body alone).
 */
export async function readKeptHistory(body: object): Promise<void> {
  const read = KEPT_LATER.get(body);
  if (!read) return;
  KEPT_LATER.clear(body);
  try {
    KEPT_HISTORY.set(body, await read());
  } catch {
    // counted without them
  }
}

/** The prompt's usage a stream's back end reported at its start, by the chunk that carried it. */
const PROMPT_REPORTED = hiddenSlot<Usage>();

/**
 * Record that `chunk` carries the usage of the prompt as the back end reported it when its
 * stream began (its opening event's input and cache tokens; no output yet). A stream
 * that then ends early (the client left, a cut) is charged these figures for its prompt, and a
 * count only of what it delivered.
 */
export function reportsPrompt(chunk: object, usage: Usage): void {
  const checked = reportedUsage(usage);
  if (checked) PROMPT_REPORTED.set(chunk, checked);
}

/** The prompt usage `chunk` carries, if a provider said so (see reportsPrompt). */
export function promptReportedBy(chunk: object): Usage | undefined {
  return PROMPT_REPORTED.get(chunk);
}

/** What of a call's request a stream's back ends had been sent, and did not report, by the chunk that says so. */
const PROMPT_SENT = hiddenSlot<object>();

/**
 * Record that, by the time `chunk` is relayed, the part of the call's request its back ends had
 * been sent and did not report usage for (see reportsPrompt) is `body`, a body of the call's
 * operation: a completion that streams an array of prompts one after another (the completion ->
 * chat bridge) sends the later prompts only once the earlier ones are answered. A stream that
 * ends early is then charged its prompt as the reported figures plus the count of `body`, not
 * the count of the whole request (whose later prompts no back end was sent). Each chunk that
 * says so replaces what an earlier one said.
 */
export function reportsPromptSent(chunk: object, body: object): void {
  PROMPT_SENT.set(chunk, body);
}

/** What of the request `chunk` says its back ends had been sent and did not report (see reportsPromptSent). */
export function promptSentBy(chunk: object): object | undefined {
  return PROMPT_SENT.get(chunk);
}

/** What the finished parts of a stream cost, as their back ends reported it, by the chunk that finished the last of them. */
const SETTLED = hiddenSlot<Usage>();

/**
 * Record that everything a stream has delivered up to and including `chunk` is billed `usage`,
 * as its back ends reported it in full (output and reasoning tokens too): a completion that
 * streams an array of prompts one after another (the completion -> chat bridge) knows each
 * finished prompt's usage before the next prompt is sent. A stream that then ends early is
 * charged these figures, plus its prompt reports (see reportsPrompt, reportsPromptSent) and a
 * count of what it delivered after this chunk only. Each chunk that says so replaces what an
 * earlier one said, and the prompt reports before it.
 */
export function reportsSettled(chunk: object, usage: Usage): void {
  const checked = reportedUsage(usage);
  if (checked) SETTLED.set(chunk, checked);
}

/** What `chunk` says the stream's finished parts cost (see reportsSettled). */
export function settledBy(chunk: object): Usage | undefined {
  return SETTLED.get(chunk);
}

/** The usage a back end's failure says it billed, by the error the failure is thrown as. */
const FAILURE_BILLED = hiddenSlot<Usage>();

/**
 * Record that the failure thrown as `error` comes with usage its back end reported, and bills
 * (a Responses stream's `response.failed` carries its response, usage included): a call that
 * ends with this failure is charged that usage, not a count of what it delivered (or nothing).
 */
export function failureBilled(error: object, usage: Usage): void {
  const checked = reportedUsage(usage);
  if (checked) FAILURE_BILLED.set(error, checked);
}

/** Streams that can say what their back end has billed so far (see billsSoFar). */
const BILLS_SO_FAR = hiddenSlot<() => Usage | undefined>();

/**
 * Record that `stream` can tell what its back end has said it bills so far, output included (a
 * vendor whose events carry the usage as it grows): a call whose client leaves before the end is
 * charged that when it says, not a count of what was delivered.
 */
export function billsSoFar(stream: object, billed: () => Usage | undefined): void {
  BILLS_SO_FAR.set(stream, billed);
}

/** How `stream` tells what its back end billed so far, if it can (see billsSoFar). */
export function billedSoFarBy(stream: object): (() => Usage | undefined) | undefined {
  return BILLS_SO_FAR.get(stream);
}

/** The usage `error`'s back end billed for its failure, if it said (see failureBilled). */
export function billedBy(error: unknown): Usage | undefined {
  return error !== null && typeof error === 'object' ? FAILURE_BILLED.get(error) : undefined;
}

/** Every count of a Usage but the three it always has: a field added to Usage and not here fails to compile. */
const EXTRA_COUNTS = {
  cachedInputTokens: true,
  cacheWriteTokens: true,
  cacheWrite1hTokens: true,
  webSearches: true,
  reasoningTokens: true,
  images: true,
  seconds: true,
  characters: true,
} as const satisfies Record<Exclude<keyof Usage, 'inputTokens' | 'outputTokens' | 'totalTokens'>, true>;
const USAGE_EXTRAS = Object.keys(EXTRA_COUNTS) as ReadonlyArray<keyof typeof EXTRA_COUNTS>;

/** More seconds than any one call's audio or video (about 115 days): a figure past it is not believed. */
const MOST_SECONDS = 10_000_000;

/**
 * Usage a provider reports in the gateway's own shape (an answer's `usage`, or what it says a
 * stream or a failure billed), if every figure in it is one: counts whole, not negative and not
 * absurd (see tokenCount), seconds a number from 0 to MOST_SECONDS; an absent total is the sum of
 * input and output. Otherwise none: metering then counts the call itself, as it does when a back
 * end's own usage is not one, rather than record figures that price it at NaN, Infinity or a credit.
 */
export function reportedUsage(usage: unknown): Usage | undefined {
  if (usage === null || typeof usage !== 'object') return undefined;
  const given = usage as Usage;
  const inputTokens = tokenCount(given.inputTokens);
  const outputTokens = tokenCount(given.outputTokens);
  if (inputTokens === undefined || outputTokens === undefined) return undefined;
  const totalTokens = given.totalTokens === undefined ? inputTokens + outputTokens : tokenCount(given.totalTokens);
  if (totalTokens === undefined) return undefined;
  for (const name of USAGE_EXTRAS) {
    const value = given[name];
    if (value === undefined) continue;
    if (name === 'seconds' ? !(typeof value === 'number' && value >= 0 && value <= MOST_SECONDS) : tokenCount(value) === undefined) return undefined;
  }
  return given.totalTokens === totalTokens ? given : { ...given, totalTokens };
}

/** Usage as the Responses API reports it (a response's or a compaction's `usage`). */
export interface ResponseUsage {
  input_tokens: number;
  /** `cache_creation_tokens`: prompt tokens the back end wrote to its cache, when it said; as chat's usage gives them. */
  input_tokens_details: { cached_tokens: number; cache_creation_tokens?: number; cache_creation_1h_tokens?: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
  /** Searches the back end's web-search tool ran, billed apart, when it said (as chat's usage gives them). */
  server_tool_use?: { web_search_requests: number };
}

/** A call's usage as the Responses API reports it (the inverse of usageFromResponses). */
export function usageAsResponses(counted: Usage): ResponseUsage {
  const written = counted.cacheWriteTokens;
  const hour = counted.cacheWrite1hTokens;
  const out: ResponseUsage = {
    input_tokens: counted.inputTokens,
    input_tokens_details: {
      cached_tokens: counted.cachedInputTokens ?? 0,
      ...(written ? { cache_creation_tokens: written } : {}),
      ...(hour ? { cache_creation_1h_tokens: hour } : {}),
    },
    output_tokens: counted.outputTokens,
    output_tokens_details: { reasoning_tokens: counted.reasoningTokens ?? 0 },
    total_tokens: counted.totalTokens,
  };
  if (counted.webSearches) out.server_tool_use = { web_search_requests: counted.webSearches };
  return out;
}

/** Two usages added up, every count either has (an extra neither has stays out). */
export function sumUsage(a: Usage, b: Usage): Usage {
  const out: Usage = { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens, totalTokens: a.totalTokens + b.totalTokens };
  for (const name of USAGE_EXTRAS) {
    if (a[name] !== undefined || b[name] !== undefined) out[name] = (a[name] ?? 0) + (b[name] ?? 0);
  }
  return out;
}

/**
 * A cost in dollars to ten decimal places (a ten-thousandth of a micro-dollar), so that sums and
 * products of binary fractions show as the decimals they are (0.037125, not 0.037125000000000005)
 * in rows, keys' spent and totals.
 */
export function roundCost(cost: number): number {
  return Math.round(cost * 1e10) / 1e10;
}
