import { countsPrompt, definePlugin, GatewayError, outputLimitFieldOf, TOKEN_OPERATIONS, type CallerKey, type ChatRequest, type OperationId, type RequestContext, type UpstreamRequest } from '../../core/index.js';
import { answersAsked, attachedTokensOf, clientBodyBytes, hiddenBytes, promptSize } from '../metering/tokens.js';
import { isPromise, type WindowResult } from '../../core/store/index.js';

const PLUGIN_NAME = 'rate-limit';
const MINUTE = 60_000;

export interface RateLimitOptions {
  /** Defaults for keys that set no limit of their own (absent: unlimited). */
  rpm?: number;
  tpm?: number;
  maxConcurrent?: number;
  /** Output tokens assumed for a call without max_tokens when estimating its tokens. */
  defaultMaxTokens: number;
}

interface CallState {
  slot?: string;
  tpmKey?: string;
  tpmHandle?: unknown;
  estimate?: number;
}

/** A reset time the way OpenAI writes it: `20ms`, `1s`, `6m0s`, `1.5s`. */
export function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  // Rounded to hundredths of a second first, so that 59,996 ms reads 1m0s, not 60s.
  const hundredths = Math.round(ms / 10);
  const minutes = Math.floor(hundredths / 6000);
  const seconds = (hundredths - minutes * 6000) / 100;
  return minutes > 0 ? `${minutes}m${seconds}s` : `${seconds}s`;
}

/**
 * Tokens a call may use: about four characters a token for what the model reads (chat messages,
 * a completion's prompt, a Responses input, an embeddings input; token ids as they are), plus
 * its output allowance (embeddings have none), and a rerank's query and documents. The other
 * calls, which are not counted in tokens, have none.
 */
export function estimateTokens(body: Partial<ChatRequest> | undefined, defaultMaxTokens: number, operation: OperationId = 'chat', clientBytes = 0): number {
  if (operation === 'rerank') return rerankTokens(body as Record<string, unknown> | undefined);
  if (!TOKEN_OPERATIONS.has(operation)) return 0;
  const size = promptSize(body, operation);
  // What the client's body holds that the walk does not read (a schema, a vendor's own block), at four bytes a token too.
  const hidden = Math.ceil(hiddenBytes(size, clientBytes) / 4);
  const input = Math.ceil(size.chars / 4) + hidden + size.ids + 4 * size.messages + attachedTokensOf(size);
  if (operation === 'embeddings') return input;
  return input + reservedOutput(body, defaultMaxTokens);
}

/**
 * A rerank's tokens, about four characters a token: its query and every document (a document
 * object as its JSON), which the back end reads once each and reports as input tokens (Jina's
 * `usage`, Cohere's `meta.tokens`).
 */
function rerankTokens(body: Record<string, unknown> | undefined): number {
  let chars = typeof body?.query === 'string' ? body.query.length : 0;
  for (const document of Array.isArray(body?.documents) ? body.documents : []) {
    chars += typeof document === 'string' ? document.length : JSON.stringify(document ?? '').length;
  }
  return Math.ceil(chars / 4);
}

/**
 * The output tokens a call's estimate reserves: the limit it asked for (`max_completion_tokens`,
 * `max_tokens`, `max_output_tokens`), else `defaultMaxTokens`, for each answer it may produce (a
 * completion of several prompts, or n choices).
 */
function reservedOutput(body: Partial<ChatRequest> | undefined, defaultMaxTokens: number): number {
  const raw = (body ?? {}) as Record<string, unknown>;
  const asked = body?.max_completion_tokens ?? body?.max_tokens ?? (raw.max_output_tokens as number | undefined);
  return (typeof asked === 'number' ? asked : defaultMaxTokens) * answersAsked(body);
}


/** The last value written and its text: a key's limit and reset time are mostly the same call after call. */
class LastText {
  private value = NaN;
  private text = '';

  constructor(private readonly format: (value: number) => string) {}

  of(value: number): string {
    if (value !== this.value) {
      this.text = this.format(value);
      this.value = value;
    }
    return this.text;
  }
}

/**
 * What makes a call alone past the tokens a minute fit: a shorter answer asked (in the field the
 * client's format has) and prompt, or a shorter input. A compaction's summary is reserved the
 * default answer length (`reserved`), which its client does not set: when that alone fills the
 * limit, no input is short enough.
 */
function shorterBy(ctx: RequestContext, body: unknown, tpm: number, reserved: number): string {
  const operation = ctx.operation ?? 'chat';
  if (operation === 'chat' || operation === 'completion' || operation === 'responses') return `lower ${outputLimitFieldOf(ctx, body)} or shorten the prompt`;
  if (operation === 'compact' && reserved >= tpm) return `a compaction reserves ${reserved} tokens for its summary, at least the key's limit: the key needs a higher tokens-per-minute limit`;
  if (operation === 'rerank') return 'send fewer or shorter documents';
  return 'send a shorter input';
}

const requestTexts = { limit: new LastText(String), reset: new LastText(resetText) };
const tokenTexts = { limit: new LastText(String), reset: new LastText(resetText) };

// Each header by its own name, not `headers[name] = ...` with the name in a variable: a store
// whose key varies is megamorphic in V8 and adds each property through the runtime.
function requestHeaders(ctx: RequestContext, result: WindowResult): void {
  const headers = ctx.responseHeaders;
  headers['x-ratelimit-limit-requests'] = requestTexts.limit.of(result.limit);
  headers['x-ratelimit-remaining-requests'] = String(result.remaining);
  // As OpenAI means it: until the window is back to its initial state (Retry-After says when one more fits).
  headers['x-ratelimit-reset-requests'] = requestTexts.reset.of(result.fullMs ?? result.resetMs);
}

function tokenHeaders(ctx: RequestContext, result: WindowResult): void {
  const headers = ctx.responseHeaders;
  headers['x-ratelimit-limit-tokens'] = tokenTexts.limit.of(result.limit);
  headers['x-ratelimit-remaining-tokens'] = String(result.remaining);
  headers['x-ratelimit-reset-tokens'] = tokenTexts.reset.of(result.fullMs ?? result.resetMs);
}

/** The counter names of one key (`conc:`, `rpm:`, `tpm:` and its id), made once per key, not per call. */
interface CounterNames {
  slot: string;
  rpm: string;
  tpm: string;
}

function refuse(ctx: RequestContext, limit: string, detail: string, resetMs: number): GatewayError {
  const retryAfter = String(Math.max(1, Math.ceil(resetMs / 1000)));
  return new GatewayError('rate_limit_exceeded', { params: { limit, detail }, headers: { 'retry-after': retryAfter } });
}

/** A limit of 0: no call of the key can ever pass it, so waiting never helps (no Retry-After, no retry by the SDK). */
function refuseAlways(limit: string, what: string): GatewayError {
  return new GatewayError('rate_limit_exceeded', { params: { limit, detail: `this key's limit is 0 ${what}: it may make no call` }, headers: { 'x-should-retry': 'false' } });
}

/**
 * Per-key limits: requests per minute and concurrent requests when a request arrives, tokens
 * per minute once its body is known (an estimate reserved, settled to the real figure after).
 * Past a limit: 429 with Retry-After and OpenAI's x-ratelimit-* headers, which every response
 * of a limited key carries.
 */
export default definePlugin<RateLimitOptions>({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Requests per minute, tokens per minute and concurrent requests, per key.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      rpm: { type: 'integer', minimum: 1 },
      tpm: { type: 'integer', minimum: 1 },
      maxConcurrent: { type: 'integer', minimum: 1 },
      defaultMaxTokens: { type: 'integer', minimum: 1, default: 1024 },
    },
  },
  apply(api) {
    // The stores open on first use (at request time), never while plugins load.
    const counters = () => api.stores.counters;
    const names = new Map<string, CounterNames>();
    const namesOf = (keyId: string): CounterNames => {
      let found = names.get(keyId);
      if (!found) {
        if (names.size >= 10_000) names.clear();
        found = { slot: `conc:${keyId}`, rpm: `rpm:${keyId}`, tpm: `tpm:${keyId}` };
        names.set(keyId, found);
      }
      return found;
    };
    const stateOf = (ctx: RequestContext): CallState => {
      let state = ctx.state.get(PLUGIN_NAME) as CallState | undefined;
      if (!state) {
        state = {};
        ctx.state.set(PLUGIN_NAME, state);
      }
      return state;
    };

    /** The requests-per-minute hit of a call, its headers, and its refusal past the limit. */
    const countRequest = (ctx: RequestContext, rpm: number, result: WindowResult): void => {
      requestHeaders(ctx, result);
      if (rpm === 0) throw refuseAlways('requests', 'per minute');
      if (!result.allowed) throw refuse(ctx, 'requests', `limit ${rpm} per minute`, result.resetMs);
    };
    const hitRequests = (ctx: RequestContext, key: CallerKey): Promise<void> | undefined => {
      const rpm = key.rpm ?? api.options.rpm;
      if (rpm === undefined) {
        // Counted all the same: a limit set later (the admin API, the CLI) judges the next call
        // by the minute's requests, not from zero.
        const counted = counters().windowHit(namesOf(key.id).rpm, Infinity, MINUTE, 1);
        return isPromise(counted) ? counted.then(() => undefined) : undefined;
      }
      const result = counters().windowHit(namesOf(key.id).rpm, rpm, MINUTE, 1);
      if (isPromise(result)) return result.then((r) => countRequest(ctx, rpm, r));
      countRequest(ctx, rpm, result);
      return undefined;
    };
    const takeSlot = (ctx: RequestContext, slot: string, maxConcurrent: number, got: boolean): void => {
      if (!got) throw maxConcurrent === 0 ? refuseAlways('concurrent requests', 'at a time') : refuse(ctx, 'concurrent requests', `at most ${maxConcurrent} at a time for this key`, 1000);
      stateOf(ctx).slot = slot;
    };

    // These taps are synchronous while the counters answer from memory (no promise per call).
    api.hooks.onRequest.tap(PLUGIN_NAME, (ctx) => {
      const key = ctx.key;
      if (!key || ctx.access !== 'client') return undefined;
      // Its tokens per minute count the whole prompt, the earlier turns a back end keeps itself
      // included: the format that knows them attaches them to a call counted so (see countsPrompt).
      if ((key.tpm ?? api.options.tpm) !== undefined) countsPrompt(ctx);
      // A key without a limit holds a slot too: a limit set while its calls run counts them.
      const maxConcurrent = key.maxConcurrent ?? api.options.maxConcurrent ?? Infinity;
      const slot = namesOf(key.id).slot;
      const got = counters().acquire(slot, maxConcurrent);
      if (isPromise(got)) {
        return got.then((ok) => {
          takeSlot(ctx, slot, maxConcurrent, ok);
          return hitRequests(ctx, key);
        });
      }
      takeSlot(ctx, slot, maxConcurrent, got);
      return hitRequests(ctx, key);
    });

    const countTokens = (ctx: RequestContext, tpm: number, estimate: number, result: WindowResult, body: unknown): void => {
      tokenHeaders(ctx, result);
      // Every call, a call that counts no tokens before it is made (an image, speech) included.
      if (tpm === 0) throw refuseAlways('tokens', 'per minute');
      if (!result.allowed) {
        // Alone past the limit: waiting never helps, so no Retry-After and no retry by the SDK.
        if (estimate > tpm) {
          throw new GatewayError('rate_limit_exceeded', {
            params: { limit: 'tokens', detail: `limit ${tpm} per minute, this call may use ${estimate} on its own; ${shorterBy(ctx, body, tpm, reservedOutput(body as Partial<ChatRequest>, ctx.defaultOutputTokens ?? api.options.defaultMaxTokens))}` },
            headers: { 'x-should-retry': 'false' },
          });
        }
        throw refuse(ctx, 'tokens', `limit ${tpm} per minute, this call may use ${estimate}`, result.resetMs);
      }
      const state = stateOf(ctx);
      state.tpmHandle = result.handle;
      state.estimate = estimate;
    };

    // Once a call, before its first attempt, from the request as it goes up: the canonical form
    // whatever the client's format (a Gemini `contents`, an Anthropic `system` or `tool_result`
    // read like any chat message) with the earlier turns a Responses previous_response_id stands
    // for already in front (stage -100, history.ts).
    const reserveTokens = (request: UpstreamRequest, ctx: RequestContext): UpstreamRequest | Promise<UpstreamRequest> => {
      const key = ctx.key;
      const tpm = key ? (key.tpm ?? api.options.tpm) : undefined;
      if (!key || tpm === undefined) return request;
      const state = stateOf(ctx);
      if (state.tpmKey !== undefined) return request;
      const estimate = estimateTokens(request.body as Partial<ChatRequest>, ctx.defaultOutputTokens ?? api.options.defaultMaxTokens, request.operation, clientBodyBytes(request.source));
      const tpmKey = namesOf(key.id).tpm;
      state.tpmKey = tpmKey;
      const result = counters().windowHit(tpmKey, tpm, MINUTE, estimate);
      if (isPromise(result)) return result.then((r) => (countTokens(ctx, tpm, estimate, r, request.body), request));
      countTokens(ctx, tpm, estimate, result, request.body);
      return request;
    };
    // The gateway awaits a promise a tap returns (docs/hooks.md); tapable's types know only the value.
    api.hooks.beforeUpstream.tap(PLUGIN_NAME, reserveTokens as (request: UpstreamRequest, ctx: RequestContext) => UpstreamRequest);

    // stage 50: after metering (stage 0) has counted a stream the back end gave no usage for.
    api.hooks.onResponse.tap({ name: PLUGIN_NAME, stage: 50 }, (ctx) => {
      const state = ctx.state.get(PLUGIN_NAME) as CallState | undefined;
      if (!state) return;
      if (state.slot) void counters().release(state.slot);
      if (state.tpmKey && state.tpmHandle !== undefined) {
        // Settle the estimate: the real figure when known, nothing when no back end answered.
        const actual = ctx.usage?.totalTokens ?? (ctx.attempts.length === 0 || ctx.firstByteAt === undefined ? 0 : state.estimate ?? 0);
        void counters().windowAdjust(state.tpmKey, state.tpmHandle, actual);
      } else if (state.tpmKey === undefined && ctx.key && ctx.usage && ctx.usage.totalTokens > 0) {
        // A key without a tokens-per-minute limit: its calls' tokens are counted as they end, so
        // that a limit set later judges the next call by the minute's tokens, not from zero.
        void counters().windowHit(namesOf(ctx.key.id).tpm, Infinity, MINUTE, ctx.usage.totalTokens);
      }
    });
  },
});
