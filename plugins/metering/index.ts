import {
  definePlugin,
  GatewayError,
  roundCost,
  usageAsResponses,
  answerUsage,
  usageOf,
  usageFromChat,
  DEFAULT_VIDEO_SECONDS,
  promptReportedBy,
  promptSentBy,
  settledBy,
  sumUsage,
  estimateVideoSeconds,
  isUploadedFile,
  isVideoTaskRead,
  TOKEN_OPERATIONS,
  outputLimitFieldOf,
  dropUpstreamBytes,
  bridgedExchangeOf,
  withTail,
  type Call,
  type ChatChunk,
  type ChatRequest,
  type ChatUsage,
  type OperationId,
  type RequestContext,
  type Target,
  type UpstreamRequest,
  type VideoRequest,
  type UpstreamJsonResponse,
  type UpstreamResponse,
  type Usage,
} from '../../core/index.js';
import type { PriceConfig } from '../../config/types.js';
import { isPromise } from '../../core/store/index.js';
import { readWavInfo } from '../providers/mock/audio.js';
import { answersAsked, attachedBoundOf, clientBodyBytes, hiddenBytes, countPromptTokens, deliveredText, promptSize, replyText, BpeTokenizer, type TokenizerName } from './tokens.js';

const PLUGIN_NAME = 'metering';
/** Admission counts the prompt exactly once the bytes bound of a call exceeds 1/NEAR_BUDGET of what is left. */
const NEAR_BUDGET = 8;

export interface MeteringOptions {
  /** Output tokens assumed for a call that sets no max_tokens, when reserving its worst-case cost. */
  defaultMaxTokens: number;
  /** The tokenizer used to count tokens a back end did not report. */
  tokenizer: TokenizerName;
}

interface CallState {
  call?: Call;
  /** The body of the last attempt as it went up (its prompt is what a count reads). */
  sent?: unknown;
  /** Budget reserved for this call, released when it settles. */
  reserved: number;
  reservedKey?: string;
  admitted: boolean;
  /** What the stream delivered and is not counted yet, kept only in case the back end reports no usage (made with its first text). */
  delivered?: string[];
  deliveredLength: number;
  /** The count of delivered text already handed to the tokenizer (the text itself dropped), a piece after another. */
  counting?: Promise<number>;
  /** Bumped when what was counted so far is billed as reported: counts begun before stop (see onStreamChunk). */
  countingRound?: number;
  /** Usage counted for a reply that carried none: a non-streamed one, or a stream's added last chunk. */
  estimated?: Usage;
  /** The last chunk of the stream so far: the one that ends a stream without usage is made like it. */
  lastChunk?: ChatChunk;
  /** The prompt's usage as the back end reported it when its stream began (see reportsPrompt). */
  prompt?: Usage;
  /** What of the request the stream's back ends had been sent and did not report, when the stream said (see reportsPromptSent). */
  promptSent?: object;
  /** What the stream's finished parts cost as their back ends reported it, when the stream said (see reportsSettled). */
  settled?: Usage;
  /** A transcription's WAV file's seconds, read from its header before the admission. */
  audioSeconds?: number;
}

/**
 * Operations whose answers have a chat-like `usage` (`prompt_tokens`, `completion_tokens`): one
 * the back end left out is filled in with the gateway's count, in the body and as the stream's
 * last chunk, so the client gets the usage it is charged for (a Responses answer and an
 * embedding list get theirs in their own shapes).
 */
const FILLED_OPERATIONS: ReadonlySet<OperationId> = new Set<OperationId>(['chat', 'completion']);

/** Usage (counted, or a provider's) as a chat answer carries it. */
function chatUsageOf(usage: Usage): ChatUsage {
  const out: ChatUsage = { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.totalTokens };
  const { cachedInputTokens: cached, cacheWriteTokens: written, cacheWrite1hTokens: hour } = usage;
  if (cached !== undefined || written || hour) {
    out.prompt_tokens_details = {
      cached_tokens: cached ?? 0,
      ...(written ? { cache_creation_tokens: written } : {}),
      ...(hour ? { cache_creation_1h_tokens: hour } : {}),
    };
  }
  if (usage.reasoningTokens !== undefined) out.completion_tokens_details = { reasoning_tokens: usage.reasoningTokens };
  if (usage.webSearches) out.server_tool_use = { web_search_requests: usage.webSearches };
  return out;
}


/**
 * `usage`, the figures a call is charged, put into its answer's body where the body has none (or
 * none that is one) in the shape its operation reports usage in; the body's bytes as it came are
 * then no longer its text.
 */
function fillUsage(operation: OperationId, response: UpstreamJsonResponse, usage: Usage): void {
  if (FILLED_OPERATIONS.has(operation) && lacksUsage(response.body, 'choices')) {
    response.body.usage = chatUsageOf(usage) as never;
  } else if ((operation === 'responses' || operation === 'compact') && responseLacksUsage(response.body)) {
    response.body.usage = usageAsResponses(usage);
  } else if (operation === 'embeddings' && lacksUsage(response.body, 'data')) {
    response.body.usage = { prompt_tokens: usage.inputTokens, total_tokens: usage.totalTokens };
  } else return;
  dropUpstreamBytes(response.body);
}

/**
 * An embedding list whose usage gives a total alone (Voyage's shape): its `prompt_tokens` put in,
 * the count it is charged, as OpenAI's clients read it.
 */
function withPromptTokens(response: UpstreamJsonResponse, usage: Usage): void {
  const given = (response.body as { usage?: unknown } | null)?.usage;
  if (given === null || typeof given !== 'object' || typeof (given as { prompt_tokens?: unknown }).prompt_tokens === 'number') return;
  (response.body as { usage: unknown }).usage = { ...given, prompt_tokens: usage.inputTokens, total_tokens: usage.totalTokens };
  dropUpstreamBytes(response.body as object);
}

/** A Responses answer (`object: "response"`) or a compaction (`"response.compaction"`) without usage. */
function responseLacksUsage(body: unknown): body is { usage?: unknown } {
  if (body === null || typeof body !== 'object') return false;
  const { object, usage } = body as { object?: unknown; usage?: unknown };
  return (object === 'response' || object === 'response.compaction') && (usage === undefined || usage === null || !usageOf('responses', body));
}

/** A Responses stream's final event whose response has no usage: held back until it can carry the count. */
function finalWithoutUsage(event: unknown): boolean {
  const type = (event as { type?: unknown } | null)?.type;
  return (type === 'response.completed' || type === 'response.incomplete') && responseLacksUsage((event as { response?: unknown }).response);
}

/**
 * A chat or completion answer (its list is `choices`) or an embedding list (`data`) the back end
 * sent without its `usage` (OpenAI's SDK types it as always there).
 */
function lacksUsage(body: unknown, list: 'choices' | 'data'): body is { usage?: unknown } {
  if (body === null || typeof body !== 'object') return false;
  const answer = body as Record<string, unknown>;
  if (!Array.isArray(answer[list])) return false;
  // Usage whose counts are not whole non-negative numbers is none: the client gets the count it is charged.
  return answer.usage === undefined || answer.usage === null || !usageOf(list === 'choices' ? 'chat' : 'embeddings', answer);
}

const ignore = () => undefined;

/**
 * What a client can change to make a call of `operation` cost less, as the budget refusal
 * advises it: the length of what it asks to be made (a chat's `limitField`, as the client's
 * format spells it: CallRoute.outputLimitField; a video's seconds), how many, or how much it sends. Undefined when nothing in the call sets its cost (a
 * transcription is priced by the audio it turns out to hold, or by its request fee).
 */
export function cheaperBy(operation: OperationId, limitField = 'max_tokens'): string | undefined {
  switch (operation) {
    case 'video':
      return 'ask for a shorter video (fewer seconds) or fewer videos';
    case 'image':
    case 'image-edit':
      return 'ask for fewer images';
    case 'speech':
      return 'send a shorter text';
    case 'embeddings':
    case 'rerank':
    case 'moderation':
    case 'compact':
      return 'send a shorter input';
    case 'transcription':
    case 'translation':
      return undefined;
    default:
      return `lower ${limitField}`;
  }
}

/** A call its key's budget does not cover: used up, or what is left short of what the call may cost. */
function overBudget(budget: number, spent: number, held: number, worst: number, operation: OperationId, limitField: string | undefined): GatewayError {
  const amount = (value: number) => String(Number(value.toPrecision(6)));
  // Trying the same call again cannot help unless calls in flight end: SDKs are told not to.
  const final = { 'x-should-retry': 'false' };
  if (spent >= budget) return new GatewayError('insufficient_quota', { params: { detail: `it is used up (${amount(spent)} spent of ${amount(budget)}).` }, headers: final });
  const left = budget - spent;
  const advice = cheaperBy(operation, limitField);
  if (held > 0) {
    const detail = `${amount(left)} is left, of which calls in flight hold ${amount(Math.min(held, left))} until they end; this call may cost up to ${amount(worst)} (${advice ? `${advice}, or ` : ''}try again once calls in flight end).`;
    return new GatewayError('insufficient_quota', { params: { detail } });
  }
  return new GatewayError('insufficient_quota', { params: { detail: `${amount(left)} is left; this call may cost up to ${amount(worst)}${advice ? ` (${advice})` : ''}.` }, headers: final });
}

/**
 * A `tap` on an async waterfall hook that answers at once in the common case and with a promise
 * otherwise: the gateway awaits a promise a tap returns (docs/hooks.md), tapable's types only
 * know the synchronous answer.
 */
function answersLater<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>): (...args: A) => R {
  return fn as (...args: A) => R;
}

/** Runs tasks with the same key one after another (tasks with different keys do not wait). */
export class KeyedQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Whether a task of this key is running or waiting. */
  busy(key: string): boolean {
    return this.tails.has(key);
  }

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key);
    // Nothing of this key waiting: the task starts now (its turn is already set below, before
    // it can reach its first await, so a task of the same key queued meanwhile waits for it).
    const result = before ? before.then(task, task) : task();
    const tail = result.then(ignore, ignore);
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }
}

/**
 * Price of `usage` under `price`: per 1M tokens, cached and cache-written input at their own
 * rates; per image, second and character; plus a per-request fee.
 */
export function costOf(
  usage: Pick<Usage, 'inputTokens' | 'outputTokens' | 'cachedInputTokens' | 'cacheWriteTokens' | 'cacheWrite1hTokens' | 'webSearches' | 'images' | 'seconds' | 'characters'>,
  price: PriceConfig | undefined,
): number {
  if (!price) return 0;
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
  const written = Math.min(usage.cacheWriteTokens ?? 0, usage.inputTokens - cached);
  const hour = Math.min(usage.cacheWrite1hTokens ?? 0, written);
  const fresh = usage.inputTokens - cached - written;
  const writePrice = price.cacheWrite ?? price.input ?? 0;
  const perToken =
    fresh * (price.input ?? 0) +
    cached * (price.cachedInput ?? price.input ?? 0) +
    (written - hour) * writePrice +
    hour * (price.cacheWrite1h ?? writePrice) +
    usage.outputTokens * (price.output ?? 0);
  const perUnit =
    (usage.images ?? 0) * (price.perImage ?? 0) +
    (usage.seconds ?? 0) * (price.perSecond ?? 0) +
    (usage.characters ?? 0) * (price.perCharacter ?? 0) +
    (usage.webSearches ?? 0) * (price.perWebSearch ?? 0);
  return roundCost(perToken / 1_000_000 + perUnit + (price.perRequest ?? 0));
}

/**
 * The most `usage` can cost under `price` before the back end says how it read its prompt: every
 * input token at the dearest input rate (a back end that writes the whole prompt to its cache
 * charges the cache-write price for it, above the plain input price at Anthropic).
 */
export function worstCostOf(usage: Usage, price: PriceConfig | undefined): number {
  if (!price) return 0;
  const input = price.input ?? 0;
  const minutes = price.cacheWrite ?? input;
  const write = Math.max(minutes, price.cacheWrite1h ?? minutes);
  const read = price.cachedInput ?? input;
  if (write > input && write >= read) {
    return costOf({ ...usage, cachedInputTokens: 0, cacheWriteTokens: usage.inputTokens, cacheWrite1hTokens: write > minutes ? usage.inputTokens : 0 }, price);
  }
  if (read > input) return costOf({ ...usage, cachedInputTokens: usage.inputTokens, cacheWriteTokens: 0 }, price);
  return costOf(usage, price);
}

/**
 * The most a call can use before it runs, for budget admission: `input` prompt tokens (an upper
 * bound) and its max output for token operations; the images it asks for; the characters it
 * asks to be spoken; the seconds of video its target will make (its back end's estimate). Seconds of audio to transcribe are not
 * known before the call and are not reserved.
 */
/**
 * The most tokens an image model bills for one image, made or given to edit (gpt-image-1 at high
 * quality and 1536 × 1024: 6,208 output tokens; Gemini's image models 1,290 an image made).
 */
export const IMAGE_TOKENS_AT_MOST = 6240;

/**
 * An image call's prompt as its worst case reads it: the UTF-8 bytes of its text (`prompt`, or the
 * text parts of the spec's `input.messages`) and the number of images it gives (to edit).
 */
function imagePromptOf(raw: Record<string, unknown>): { textBytes: number; given: number } {
  let textBytes = typeof raw.prompt === 'string' ? Buffer.byteLength(raw.prompt) : 0;
  let given = 0;
  for (const field of ['image', 'image[]', 'images']) {
    const value = raw[field];
    if (Array.isArray(value)) given += value.length;
    else if (value !== undefined && value !== null) given++;
  }
  const messages = (raw.input as { messages?: unknown } | undefined)?.messages;
  if (Array.isArray(messages)) {
    for (const message of messages as Array<{ content?: unknown }>) {
      const content = message?.content;
      if (typeof content === 'string') textBytes += Buffer.byteLength(content);
      else if (Array.isArray(content)) {
        for (const part of content as Array<Record<string, unknown>>) {
          if (typeof part?.text === 'string') textBytes += Buffer.byteLength(part.text);
          if (part?.image !== undefined) given++;
        }
      }
    }
  }
  return { textBytes, given };
}

/** The fewest bytes a second of audio is reckoned to take, for a transcription's worst case (16 kbit/s). */
export const AUDIO_BYTES_A_SECOND_AT_LEAST = 2000;

export function worstUsage(operation: OperationId, body: Partial<ChatRequest> | undefined, input: number, defaultMaxTokens: number, target?: Target, audioSeconds?: number): Usage {
  const raw = (body ?? {}) as Record<string, unknown>;
  switch (operation) {
    case 'embeddings':
    case 'rerank':
    case 'moderation':
      return { inputTokens: input, outputTokens: 0, totalTokens: input };
    case 'image':
    case 'image-edit': {
      const n = typeof raw.n === 'number' ? raw.n : ((raw.parameters as { n?: unknown } | undefined)?.n as number | undefined);
      const images = Number.isInteger(n) && n! > 0 ? n! : 1;
      // Tokens too, for a model billed by them (gpt-image, Gemini's image models): the prompt at a
      // token a byte, and every image given to edit and every image made at the most any such
      // model bills for one.
      const { textBytes, given } = imagePromptOf(raw);
      const inputTokens = textBytes + given * IMAGE_TOKENS_AT_MOST;
      const outputTokens = images * IMAGE_TOKENS_AT_MOST;
      return { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens, images };
    }
    case 'speech':
      return { inputTokens: 0, outputTokens: 0, totalTokens: 0, characters: typeof raw.input === 'string' ? [...raw.input].length : 0 };
    case 'video': {
      const video = raw as Partial<VideoRequest>;
      // A read of a task (answered from the task store) makes no video.
      if (isVideoTaskRead(raw)) return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: 0 };
      // What the back end will charge for: its own estimate (a back end that rounds the length up,
      // or makes a fixed length, says so), else the seconds asked for (each of n videos), else
      // the length a back end makes by default.
      if (target?.provider.video) {
        return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: estimateVideoSeconds(target.provider.video, { ...video, model: target.model } as VideoRequest) };
      }
      const seconds = typeof video.duration === 'number' && video.duration > 0 ? video.duration : DEFAULT_VIDEO_SECONDS;
      const n = typeof video.n === 'number' && Number.isInteger(video.n) && video.n > 0 ? video.n : 1;
      return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds: seconds * n };
    }
    case 'transcription':
    case 'translation': {
      // A WAV's own length when its header was read (see the validate tap); else the file's size
      // bounds it (at 2,000 bytes a second, 16 kbit/s, below what speech is usually coded at), so
      // calls of one key in flight together cannot each pass on a budget that covers one.
      const file = raw.file;
      const seconds = audioSeconds ?? (isUploadedFile(file) ? Math.ceil(file.size / AUDIO_BYTES_A_SECOND_AT_LEAST) : 0);
      return { inputTokens: 0, outputTokens: 0, totalTokens: 0, seconds };
    }
    default: {
      const output = outputLimitOf(body, defaultMaxTokens)!;
      return { inputTokens: input, outputTokens: output, totalTokens: input + output };
    }
  }
}

/**
 * The most output tokens a call lets its back end write: its own limit (else `fallback`, a limit
 * its back end applies by default), for every choice of every prompt; undefined when neither
 * says. A count of what a back end that reported no usage wrote is never more than that: the
 * back end could not have written more, and a tokenizer that splits its text finer than the
 * model did must not charge the key past what was reserved.
 */
export function outputLimitOf(body: Partial<ChatRequest> | undefined, fallback?: number): number | undefined {
  const each = body?.max_completion_tokens ?? body?.max_tokens ?? ((body as { max_output_tokens?: unknown } | undefined)?.max_output_tokens as number | undefined) ?? fallback;
  return typeof each === 'number' && Number.isFinite(each) && each >= 0 ? each * answersAsked(body) : undefined;
}

/** `counted` output tokens, at most `limit` (see outputLimitOf). */
function atMost(counted: number, limit: number | undefined): number {
  return limit !== undefined && counted > limit ? limit : counted;
}

let lastCost = NaN;
let lastCostText = '';

/** `0.000123` style, no exponent, no trailing zeros. */
export function formatCost(cost: number): string {
  // Calls of one model and size cost the same: the previous answer is often this one.
  if (cost === lastCost) return lastCostText;
  const fixed = cost.toFixed(10);
  let end = fixed.length;
  while (end > 0 && fixed.charCodeAt(end - 1) === 48 /* 0 */) end--;
  if (end > 0 && fixed.charCodeAt(end - 1) === 46 /* . */) end--;
  const text = end === 0 ? '0' : fixed.slice(0, end);
  lastCost = cost;
  lastCostText = text;
  return text;
}

/**
 * Prices every call from the `pricing:` table, reserves its worst case against the key's
 * budget before it goes upstream (429 insufficient_quota past it), and writes exactly one usage
 * record per call once it ends, with the back end's figures or, when it gave none (a client
 * that left mid-stream), tokens counted with a real tokenizer and marked estimated.
 */
export default definePlugin<MeteringOptions>({
  name: PLUGIN_NAME,
  version: '0.1.0',
  description: 'Usage records, costs from the pricing table, budgets.',
  optionsSchema: {
    type: 'object',
    additionalProperties: false,
    properties: {
      defaultMaxTokens: { type: 'integer', minimum: 1, default: 4096 },
      tokenizer: { enum: ['cl100k_base', 'o200k_base'], default: 'cl100k_base' },
    },
  },
  apply(api) {
    const pricing = api.config.pricing;
    // The BPE tables are built the first time a count is needed (a reply without usage, an
    // admission close to a budget), not at start.
    const tokenizer = new BpeTokenizer(api.options.tokenizer);
    const admissions = new KeyedQueue();
    const stateOf = (ctx: RequestContext): CallState => {
      let state = ctx.state.get(PLUGIN_NAME) as CallState | undefined;
      if (!state) {
        state = { reserved: 0, admitted: false, deliveredLength: 0 };
        ctx.state.set(PLUGIN_NAME, state);
      }
      return state;
    };
    /** `budget:` and a key's id, made once per key rather than per call. */
    const budgetKeys = new Map<string, string>();
    const budgetKeyOf = (keyId: string): string => {
      let name = budgetKeys.get(keyId);
      if (name === undefined) {
        if (budgetKeys.size >= 10_000) budgetKeys.clear();
        name = `budget:${keyId}`;
        budgetKeys.set(keyId, name);
      }
      return name;
    };
    /** The price of a target: the requested public name's, else that of the fallback it was reached through, else its back-end model's. */
    const priceOf = (model: string | undefined, target: Target | undefined): PriceConfig | undefined =>
      (model ? pricing[model] : undefined) ?? (target?.via !== undefined ? pricing[target.via] : undefined) ?? (target ? pricing[target.model] : undefined);
    const priceFor = (ctx: RequestContext): PriceConfig | undefined => priceOf(ctx.model, ctx.target);

    // A key whose budget is spent (or 0) is refused before its body is read: a client uploading a
    // file (or waiting for its 100 Continue) is not made to send it first. Reads of a key's own
    // video tasks are never refused, and are known only from the body: video calls wait for it.
    api.hooks.onRequest.tap(PLUGIN_NAME, (ctx: RequestContext) => {
      const budget = ctx.key?.budget;
      if (budget === undefined || budget === null || ctx.operation === undefined || ctx.operation === 'video') return;
      const spent = api.stores.keys.spent(ctx.key!.id);
      if (!isPromise(spent) && spent >= budget) throw overBudget(budget, spent, 0, 0, ctx.operation, ctx.outputLimitField);
    });

    api.hooks.validate.tap(
      PLUGIN_NAME,
      answersLater((ctx: RequestContext, call: Call): void | Promise<void> => {
        const state = stateOf(ctx);
        state.call = call;
        // A transcription of a WAV file on a key with a budget: its length is in its header (read
        // off the request path's thread), so the reservation is the call's own, not a bound.
        if ((call.operation === 'transcription' || call.operation === 'translation') && ctx.key?.budget !== undefined) {
          const file = (call.body as Record<string, unknown> | undefined)?.file;
          if (isUploadedFile(file)) {
            return readWavInfo(file.path).then(
              (info) => {
                // Believed only when it comes from the samples: a compressed WAV's length comes
                // from a byte rate its header claims, which the client could set to anything.
                if (info?.fromSamples) state.audioSeconds = Math.ceil(info.duration);
              },
              () => undefined,
            );
          }
        }
        return undefined;
      }),
    );

    // Admission: once per call, before its first attempt, reserve the worst case. Synchronous
    // in the common case (see below): a promise only when something must be waited for.
    api.hooks.beforeUpstream.tap(
      PLUGIN_NAME,
      answersLater((request: UpstreamRequest, ctx: RequestContext): UpstreamRequest | Promise<UpstreamRequest> => {
      const state = stateOf(ctx);
      // What goes up (earlier turns put in front by a tap before this one): what a count reads.
      state.sent = request.body;
      if (state.admitted) return request;
      state.admitted = true;
      const key = ctx.key;
      if (!key || key.budget === undefined) return request;
      const body = (state.sent ?? state.call?.canonical) as Partial<ChatRequest> | undefined;
      const operation = ctx.operation ?? 'chat';
      const worstFor = (input: number): number => {
        const targets = ctx.targets;
        if (!targets || targets.length === 0) return 0;
        // Only a video's usage depends on the target (its back end's estimate of the seconds).
        const defaultMaxTokens = ctx.defaultOutputTokens ?? api.options.defaultMaxTokens;
        const shared = operation === 'video' ? undefined : worstUsage(operation, body, input, defaultMaxTokens, undefined, state.audioSeconds);
        let worst = 0;
        for (const target of targets) {
          const usage = shared ?? worstUsage(operation, body, input, defaultMaxTokens, target, state.audioSeconds);
          worst = Math.max(worst, worstCostOf(usage, priceOf(ctx.model, target)));
        }
        return worst;
      };
      // A token is at least one byte, so the prompt's UTF-8 size bounds its tokens from above.
      // Far from the budget that bound is reserved as it is (no tokenizer on the hot path); near
      // it, the prompt is counted exactly, so that no call is refused for the bound's slack.
      const tokens = TOKEN_OPERATIONS.has(operation);
      const size = tokens ? promptSize(body, operation) : undefined;
      const ids = size ? size.ids : 0;
      // What the client's body holds that the walk does not read (a template, a schema, a vendor's
      // own block) goes up all the same: a token a byte, in the bound and in the count near the budget.
      const hidden = size ? hiddenBytes(size, clientBodyBytes(request.source)) : 0;
      // A read of a task (a video call that asks for no video) uses nothing: never refused, a
      // spent key included, so a key can always read what it paid for.
      if (operation === 'video' && isVideoTaskRead(body)) return request;
      const upper = worstFor(size ? size.bytes + hidden + ids + 4 * size.messages + 3 + attachedBoundOf(size) : 0);
      const budgetKey = budgetKeyOf(key.id);
      const budget = key.budget;
      const admitted = (worst: number): UpstreamRequest => {
        state.reserved = worst;
        state.reservedKey = budgetKey;
        return request;
      };
      // Admissions of one key take turns. Inside, read what is reserved before what is spent: a
      // call that settles in between (spent up, its reservation down, in one step) can then only
      // make this check stricter, never let it overdraw.
      if (!admissions.busy(budgetKey)) {
        // Nobody of this key waiting, the counters and key store answering from memory, and far
        // from the budget (no tokenizer): the whole turn runs now, so nothing can come between
        // its reads and its reservation.
        const held = api.stores.counters.reserved(budgetKey);
        const spent = isPromise(held) ? undefined : api.stores.keys.spent(key.id);
        if (!isPromise(held) && spent !== undefined && !isPromise(spent) && !(tokens && spent + held + upper * NEAR_BUDGET > budget)) {
          if (spent + held >= budget) throw overBudget(budget, spent, held, upper, operation, outputLimitFieldOf(ctx, body));
          const reserved = api.stores.counters.reserve(budgetKey, upper, budget, spent);
          if (!isPromise(reserved)) {
            if (!reserved) throw overBudget(budget, spent, held, upper, operation, outputLimitFieldOf(ctx, body));
            return admitted(upper);
          }
          // A counter that answers later: the key's next admission waits for this answer.
          return admissions.run(budgetKey, async () => {
            if (!(await reserved)) throw overBudget(budget, spent, held, upper, operation, outputLimitFieldOf(ctx, body));
          }).then(() => admitted(upper));
        }
      }
      let worst = upper;
      return admissions
        .run(budgetKey, async () => {
          const held = await api.stores.counters.reserved(budgetKey);
          const spent = await api.stores.keys.spent(key.id);
          if (tokens && spent + held + upper * NEAR_BUDGET > budget) worst = worstFor((await countPromptTokens(tokenizer, body, operation, true)) + hidden);
          if (spent + held >= budget || !(await api.stores.counters.reserve(budgetKey, worst, budget, spent))) {
            throw overBudget(budget, spent, held, worst, operation, outputLimitFieldOf(ctx, body));
          }
        })
        .then(() => admitted(worst));
    }),
    );

    // The cost of a non-streamed reply, in its headers; counted here when the back end gave no usage.
    // Stage 100: after every other plugin's tap, so the cost is that of the answer the client gets
    // (and the ledger records), whatever a tap changed in it.
    api.hooks.afterUpstream.tap(
      { name: PLUGIN_NAME, stage: 100 },
      answersLater((response: UpstreamResponse, ctx: RequestContext): UpstreamResponse | Promise<UpstreamResponse> => {
      const operation = ctx.operation ?? 'chat';
      if (response.kind !== 'json') {
        // Usage known before the stream is read (speech: the characters spoken) is its cost too.
        if (response.kind === 'stream' && response.usage) ctx.responseHeaders['x-switchyard-cost'] = formatCost(costOf(response.usage, priceFor(ctx)));
        // A stream that ends without usage gets one more chunk with the gateway's count; a
        // Responses stream, its final event with that count (held back until the end).
        if (operation === 'responses') return { ...response, chunks: withTail(response.chunks, (kept) => (kept ? finalWithUsage(ctx, kept) : undefined), finalWithoutUsage) };
        // A client that takes no usage in its stream (an OpenAI one that did not ask) would only
        // wait for the count before its last event: it is counted after the answer, as before.
        if (!FILLED_OPERATIONS.has(operation) || !stateOf(ctx).call?.wantsStreamUsage) return response;
        return { ...response, chunks: withTail(response.chunks, () => (ctx.usage ? undefined : usageChunk(ctx))) };
      }
      const usage = answerUsage(operation, response);
      if (!usage && TOKEN_OPERATIONS.has(operation)) {
        const state = stateOf(ctx);
        // A bridge's result that is not the model's output (a compaction) is counted from what
        // the bridge asked its back end and what that answered.
        const exchange = bridgedExchangeOf(response.body);
        const asked = (exchange?.request ?? state.sent ?? state.call?.canonical) as Partial<ChatRequest> | undefined;
        return Promise.all([
          countPromptTokens(tokenizer, asked, exchange ? undefined : operation),
          tokenizer.count(replyText(exchange ? exchange.answer : response.body)),
        ]).then(([input, written]) => {
          const output = atMost(written, outputLimitOf(asked, exchange ? undefined : ctx.defaultOutputTokens));
          const counted: Usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
          state.estimated = counted;
          fillUsage(operation, response, counted);
          ctx.responseHeaders['x-switchyard-cost'] = formatCost(costOf(counted, priceFor(ctx)));
          return response;
        });
      }
      // A provider that gave the usage beside its answer (its `usage`, in the gateway's shape): the
      // client sees it in the answer, as it would a back end's own.
      if (usage && response.usage === usage) fillUsage(operation, response, usage);
      else if (usage && operation === 'embeddings') withPromptTokens(response, usage);
      ctx.responseHeaders['x-switchyard-cost'] = formatCost(usage ? costOf(usage, priceFor(ctx)) : (priceFor(ctx)?.perRequest ?? 0));
      return response;
    }),
    );

    api.hooks.onStreamChunk.tap(PLUGIN_NAME, (chunk, ctx) => {
      const state = stateOf(ctx);
      // Usage whose counts are not whole non-negative numbers is none (as in a JSON answer): the
      // client does not get it, and the stream's last usage chunk carries the gateway's count.
      const usage = (chunk as ChatChunk).usage;
      if (usage && typeof usage === 'object' && !(chunk as { type?: unknown }).type && !usageFromChat(usage)) {
        delete (chunk as ChatChunk).usage;
        dropUpstreamBytes(chunk as object);
      }
      state.lastChunk = chunk as ChatChunk;
      // The latest report: a bridge that streams several prompts in turn reports their sum so far.
      state.prompt = promptReportedBy(chunk as object) ?? state.prompt;
      state.promptSent = promptSentBy(chunk as object) ?? state.promptSent;
      const text = deliveredText(chunk as ChatChunk);
      if (text) {
        (state.delivered ??= []).push(text);
        state.deliveredLength += text.length;
        // Memory per stream stays bounded: what was delivered is handed to the tokenizer every 64 KiB of text.
        if (state.deliveredLength >= 65_536) {
          // One piece at a time, after the one before (never several slices of a stream's text
          // in one turn of the event loop), and given up once the back end's usage made it moot.
          const text = state.delivered.join('');
          const round = state.countingRound ?? 0;
          // Moot once the back end's usage came (the call is charged that) or the text was billed as reported.
          const moot = () => ctx.usage !== undefined || (state.countingRound ?? 0) !== round;
          state.counting = (state.counting ?? Promise.resolve(0)).then((sum) => (moot() ? sum : tokenizer.count(text, moot).then((tokens) => sum + tokens)));
          state.delivered = undefined;
          state.deliveredLength = 0;
        }
      }
      // Everything up to here (this chunk's text too) is billed as reported: none of it is counted.
      const settled = settledBy(chunk as object);
      if (settled) {
        state.settled = settled;
        state.prompt = state.promptSent = state.delivered = undefined;
        state.deliveredLength = 0;
        state.counting?.catch(() => undefined);
        state.counting = undefined;
        state.countingRound = (state.countingRound ?? 0) + 1;
      }
      return chunk;
    });

    /** The prompt's tokens and those of what the stream delivered, counted. */
    const countDelivered = async (ctx: RequestContext, state: CallState): Promise<Usage> => {
      // The prompt as the back end reported it at the stream's start, if it did (its cache tokens
      // too); else counted. A stream that sends its request in parts (a bridge's prompts, one
      // after another) says what it had sent and not had reported: that is counted, not the
      // whole request, whose later parts no back end was sent.
      const reported = state.prompt;
      const unreported = state.promptSent ?? (reported || state.settled ? undefined : (state.sent ?? state.call?.canonical));
      const [counted, ...outputs] = await Promise.all([
        unreported ? countPromptTokens(tokenizer, unreported as Partial<ChatRequest>, ctx.operation) : 0,
        tokenizer.count(state.delivered ? state.delivered.join('') : ''),
        state.counting ?? 0,
      ]);
      const input = (reported?.inputTokens ?? 0) + counted;
      // At most what the call allowed, less what the parts already billed (a bridge's finished prompts) wrote.
      const limit = outputLimitOf((state.sent ?? state.call?.canonical) as Partial<ChatRequest> | undefined, ctx.defaultOutputTokens);
      const output = atMost(
        outputs.reduce((sum, tokens) => sum + tokens, 0),
        limit === undefined ? undefined : Math.max(0, limit - (state.settled?.outputTokens ?? 0)),
      );
      const usage: Usage = { inputTokens: input, outputTokens: output, totalTokens: input + output };
      if (reported?.cachedInputTokens !== undefined) usage.cachedInputTokens = reported.cachedInputTokens;
      if (reported?.cacheWriteTokens !== undefined) usage.cacheWriteTokens = reported.cacheWriteTokens;
      if (reported?.cacheWrite1hTokens !== undefined) usage.cacheWrite1hTokens = reported.cacheWrite1hTokens;
      // The finished parts, as their back ends reported them (see reportsSettled).
      return state.settled ? sumUsage(state.settled, usage) : usage;
    };

    /**
     * The last chunk of a stream that ended in full without usage: the gateway's count, made like
     * the chunks before it. Nothing when it cannot be counted (the call is then settled as before).
     */
    /**
     * The count of a stream that ended without usage, kept as the call's estimate for its
     * settling; undefined when it cannot be counted (the call is then settled as before).
     */
    const countStream = async (ctx: RequestContext): Promise<Usage | undefined> => {
      const state = stateOf(ctx);
      try {
        state.estimated = await countDelivered(ctx, state);
      } catch (error) {
        api.logger.warn('could not count a stream without usage', { requestId: ctx.id, error: String(error) });
      }
      return state.estimated;
    };

    const usageChunk = async (ctx: RequestContext): Promise<ChatChunk | undefined> => {
      const counted = await countStream(ctx);
      if (!counted) return undefined;
      const last = stateOf(ctx).lastChunk;
      return {
        id: last?.id ?? ctx.id,
        object: last?.object ?? 'chat.completion.chunk',
        created: last?.created ?? Math.floor(Date.now() / 1000),
        model: last?.model ?? ctx.target?.model ?? ctx.model ?? '',
        choices: [],
        usage: chatUsageOf(counted),
      };
    };

    /** A Responses stream's final event held back for want of usage, with the gateway's count. */
    const finalWithUsage = async (ctx: RequestContext, event: unknown): Promise<unknown> => {
      const counted = await countStream(ctx);
      if (!counted) return event; // as it came
      const response = (event as { response: Record<string, unknown> }).response;
      return { ...(event as object), response: { ...response, usage: usageAsResponses(counted) } };
    };

    const release = (state: CallState): void => {
      if (state.reservedKey && state.reserved > 0) void api.stores.counters.unreserve(state.reservedKey, state.reserved);
      state.reserved = 0;
    };

    /** The usage row of a call that used something, its cost on the context, its reservation released. */
    const settle = (ctx: RequestContext, state: CallState, usage: Usage | undefined, source: 'provider' | 'estimated' | null): void => {
      // A read of a video task (answered from the task store, no back end asked) costs nothing and
      // is no call of a back end: no usage row (the request log has its row), no per-request fee.
      if (ctx.operation === 'video' && isVideoTaskRead(state.call?.canonical)) {
        ctx.cost = 0;
        release(state);
        return;
      }
      // A call without usage (a back end that reported none for an image or audio call) still costs its per-request fee.
      const cost = usage ? costOf(usage, priceFor(ctx)) : ctx.status !== undefined && ctx.status < 400 ? (priceFor(ctx)?.perRequest ?? 0) : 0;
      ctx.cost = cost;
      if (source) ctx.usageSource = source;
      const now = Date.now();
      // Already in the ledger, written with what it paid for (a video task): not a second row.
      if (!ctx.usageRecorded) api.stores.usage.record({
        requestId: ctx.id,
        time: now,
        keyId: ctx.key?.id ?? null,
        keyName: ctx.key?.name ?? null,
        model: ctx.model ?? '',
        upstreamModel: ctx.target?.model ?? null,
        provider: ctx.target?.provider.id ?? null,
        operation: ctx.operation ?? 'chat',
        promptTokens: usage?.inputTokens ?? null,
        completionTokens: usage?.outputTokens ?? null,
        cachedTokens: usage?.cachedInputTokens ?? null,
        cacheWriteTokens: usage?.cacheWriteTokens ?? null,
        reasoningTokens: usage?.reasoningTokens ?? null,
        images: usage?.images ?? null,
        seconds: usage?.seconds ?? null,
        characters: usage?.characters ?? null,
        source,
        cost,
        status: ctx.status ?? 0,
        endReason: ctx.endReason ?? 'done',
        latencyMs: performance.now() - ctx.startedAt,
        ttfbMs: ctx.firstByteAt !== undefined ? ctx.firstByteAt - ctx.startedAt : null,
      });
      if (state.reserved > 0 && cost > state.reserved + 1e-12) {
        // The back end used more than the call was allowed (or no max_tokens and more than
        // defaultMaxTokens): charged as reported, so the key may end up past its budget.
        api.logger.warn('call cost more than its reservation', { requestId: ctx.id, key: ctx.key?.name, reserved: state.reserved, cost });
      }
      // Recorded (spent went up) and released in the same tick: admission never sees neither.
      release(state);
    };

    // Settle: exactly once per request (onResponse runs once), whatever the retries.
    // Synchronous unless tokens must be counted (a back end that reported no usage).
    api.hooks.onResponse.tap(PLUGIN_NAME, (ctx) => {
      const state = ctx.state.get(PLUGIN_NAME) as CallState | undefined;
      if (!state) return undefined;
      // No back end was asked, or the last one never saw the request (it waited in the pool for a
      // connection and the client left first; an earlier one that failed charges nothing either):
      // nothing to charge, no usage row.
      if (ctx.attempts.length === 0 || ctx.attempts[ctx.attempts.length - 1]!.unsent === true) {
        release(state);
        return undefined;
      }
      // The gateway's count, also given to the client (in the body, or as the stream's last chunk).
      if (state.estimated) {
        ctx.usage = state.estimated;
        settle(ctx, state, state.estimated, 'estimated');
        return undefined;
      }
      const usage = ctx.usage;
      if (usage) {
        settle(ctx, state, usage, 'provider');
        return undefined;
      }
      // A stream that reached its client and ended early is charged what it cost however it ended:
      // a cut or a stall after the back end began (it reported the prompt, or began to answer) as
      // much as a client that left, even before any text.
      if (TOKEN_OPERATIONS.has(ctx.operation ?? 'chat') && (state.delivered || state.counting || state.lastChunk !== undefined || ctx.endReason === 'done' || ctx.endReason === 'client_gone' || ctx.endReason === 'shutdown')) {
        return countDelivered(ctx, state).then((counted) => {
          ctx.usage = counted;
          settle(ctx, state, counted, 'estimated');
        });
      }
      settle(ctx, state, undefined, null);
      return undefined;
    });
  },
});
