import {
  defineBridge,
  GatewayError,
  isGatewayError,
  promptReportedBy,
  reportsPrompt,
  reportsPromptSent,
  reportsSettled,
  sumUsage,
  usageFromChat,
  withinAttempt,
  type ChatChunk,
  type ChatMessage,
  type ChatRequest,
  type ChatResponse,
  type ChatUsage,
  type FinishReason,
  type OperationHandler,
  type ProviderCallContext,
  type UpstreamRequest,
  type UpstreamResponse,
  type Usage,
} from '../../../core/index.js';
import { Losses } from '../anthropic-messages/request.js';
import type { CompletionChoice, CompletionLogprobs, CompletionRequest, CompletionResponse } from './completions.js';

/**
 * Text completions served by a chat back end, for providers without a `completion` handler.
 *
 * - Each prompt becomes one conversation of a single user message holding the prompt text, with
 *   no system message: the chat model answers the prompt rather than continuing it letter by
 *   letter, which is the closest a chat API comes. An array of prompts is one chat call per
 *   prompt (up to BRIDGE_CONCURRENCY at a time; one after the other when streamed), and choice
 *   `i` of prompt `p` is choice `p * n + i` of the answer, as OpenAI numbers them. The first
 *   call that fails fails the request: no call starts after it, those in flight are aborted.
 *   At most MAX_BRIDGED_PROMPTS prompts: more is a 400 on `prompt` before any call.
 * - Token-id prompts cannot be sent to a chat API (it takes text): 400 on `prompt`.
 * - `max_tokens` defaults to 16, the completion API's own default (chat has none); 0 (prompt
 *   scoring) cannot be asked of a chat back end: 400 on `max_tokens`.
 * - `echo` is honoured: the prompt is prepended to each choice's text (streamed: sent first).
 * - `logprobs: k` asks chat for `logprobs` with `top_logprobs: k` and maps the answer back
 *   (tokens, token_logprobs, top_logprobs, text_offset). The echoed prompt's own logprobs do not
 *   exist in chat: named loss `logprobs.prompt`.
 * - `suffix` (insertion) has no chat equivalent: named loss `suffix`. `best_of` above `n`
 *   (server-side best-of) neither: loss `best_of`. Any other field chat does not take: a loss
 *   under its own name.
 * - temperature, top_p, n, stop, penalties, seed, user and logit_bias (token ids in both APIs)
 *   are carried as they are. Finish reasons `stop`, `length` and `content_filter` are carried;
 *   a chat-only reason (tool calls) becomes `stop`. Usage is the sum over the prompts.
 * - Streamed, a prompt before the last sends its choices' finish chunks once its stream has
 *   ended (its usage comes just after the finish): a stream that fails or is left in a later
 *   prompt is then charged the finished prompts' usage as their back ends reported it.
 */

/** The completion API's default answer length. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/** Fields carried to chat under the same name and meaning. */
const CARRIED = ['temperature', 'top_p', 'n', 'stop', 'presence_penalty', 'frequency_penalty', 'seed', 'user', 'logit_bias'] as const;
/** Fields the bridge reads itself. */
const HANDLED = new Set<string>(['model', 'prompt', 'suffix', 'echo', 'max_tokens', 'best_of', 'stream', 'stream_options', 'logprobs', ...CARRIED]);

/**
 * What the chat back end cannot take, refused as the back end's refusal (400, the param named):
 * a client's request, not a failure of the back end, so routing's health of it is unchanged.
 */
/**
 * What a chat back end cannot be asked (token ids, prompt scoring): refused before anything goes
 * up, as this target's limit, not the request's fault: another target of the model that serves
 * completions natively is tried (retryable; routing does not count upstream_bad_request against
 * a back end's health), and alone it is the call's 400.
 */
function refusal(param: string, detail: string): GatewayError {
  return new GatewayError('upstream_bad_request', { param, params: { detail }, retryable: true });
}

/**
 * The most prompts one completion may hold when served through chat: each is a back-end call of
 * its own, which the key's requests per minute and concurrency (counted once, for the request)
 * do not see. Sixteen is two rounds of BRIDGE_CONCURRENCY calls: a batch of a size the
 * completion API's clients send (evaluation harnesses, a few prompts at a time) still works,
 * and one request cannot make more than sixteen calls of the back end.
 */
export const MAX_BRIDGED_PROMPTS = 16;

/** The prompts of a request as text; token-id prompts, and more than MAX_BRIDGED_PROMPTS, are refused. */
export function promptsOf(prompt: unknown): string[] {
  if (typeof prompt === 'string') return [prompt];
  if (Array.isArray(prompt) && prompt.length > 0 && prompt.every((p) => typeof p === 'string')) {
    if (prompt.length > MAX_BRIDGED_PROMPTS) {
      throw refusal(
        'prompt',
        `this model is served through a chat API, one call per prompt: send at most ${MAX_BRIDGED_PROMPTS} prompts in one request (this one has ${prompt.length}), or split them over several requests.`,
      );
    }
    return prompt as string[];
  }
  throw refusal('prompt', 'this model is served through a chat API, which takes text: send the prompt as a string or an array of strings, not token ids.');
}

/** The chat request one prompt becomes, and the names of what it could not carry. */
export function chatRequestFor(body: CompletionRequest, prompt: string, model: string, stream: boolean): { chat: ChatRequest; losses: string[] } {
  const losses: string[] = [];
  const chat: ChatRequest = { model, messages: [{ role: 'user', content: prompt }] };
  for (const name of CARRIED) {
    const value = body[name];
    if (value !== undefined && value !== null) chat[name] = value as never;
  }
  if (body.max_tokens === 0) {
    throw refusal('max_tokens', 'this model is served through a chat API, which cannot answer with 0 tokens (prompt scoring); ask for at least 1.');
  }
  chat.max_tokens = body.max_tokens ?? DEFAULT_COMPLETION_MAX_TOKENS;
  if (typeof body.logprobs === 'number') {
    chat.logprobs = true;
    chat.top_logprobs = body.logprobs;
    if (body.echo) losses.push('logprobs.prompt');
  }
  if (stream) {
    chat.stream = true;
    // The bridge sums usage over the prompts and meters it; the format hides it from a client that did not ask.
    chat.stream_options = { include_usage: true };
  }
  if (typeof body.suffix === 'string' && body.suffix !== '') losses.push('suffix');
  if (typeof body.best_of === 'number' && body.best_of > (body.n ?? 1)) losses.push('best_of');
  for (const name of Object.keys(body)) if (!HANDLED.has(name) && body[name] !== undefined) losses.push(name);
  return { chat, losses };
}

function contentText(message: Pick<ChatMessage, 'content'> | undefined): string {
  const content = message?.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let out = '';
  for (const part of content) if (part.type === 'text' && typeof part.text === 'string') out += part.text;
  return out;
}

function finishOf(reason: unknown): FinishReason | null {
  if (reason === null || reason === undefined) return null;
  return reason === 'length' || reason === 'content_filter' ? reason : 'stop';
}

interface ChatTokenLogprob {
  token?: unknown;
  logprob?: unknown;
  top_logprobs?: Array<{ token?: unknown; logprob?: unknown }>;
}

/**
 * Chat's logprobs (`{content: [{token, logprob, top_logprobs}]}`) in the completion API's shape,
 * from `offset` on; null when the answer has none (a back end that gives none: an empty list of
 * tokens would say the text had no tokens, and their log-probabilities summed to 0).
 */
export function completionLogprobs(chatLogprobs: unknown, offset: number): CompletionLogprobs | null {
  const content = (chatLogprobs as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return null;
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const entry of content as ChatTokenLogprob[]) {
    const token = typeof entry?.token === 'string' ? entry.token : '';
    out.tokens.push(token);
    out.token_logprobs.push(typeof entry?.logprob === 'number' ? entry.logprob : null);
    const top: Record<string, number> = {};
    for (const alt of Array.isArray(entry?.top_logprobs) ? entry.top_logprobs : []) {
      if (typeof alt?.token === 'string' && typeof alt.logprob === 'number') top[alt.token] = alt.logprob;
    }
    out.top_logprobs.push(top);
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}

/** The numbers of two detail objects added up, field by field (undefined when neither has any). */
function addDetails(a: Record<string, unknown> | undefined, b: Record<string, unknown> | undefined): Record<string, number> | undefined {
  if (!a && !b) return undefined;
  const out: Record<string, number> = {};
  for (const part of [a, b]) {
    for (const [name, value] of Object.entries(part ?? {})) if (typeof value === 'number') out[name] = (out[name] ?? 0) + value;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * Chat usages added up: the counts, and every detail any back end reported (cached and
 * cache-written prompt tokens, reasoning tokens, web searches), so the sum prices as its parts do.
 */
export function addUsage(sum: ChatUsage | undefined, usage: ChatUsage | null | undefined): ChatUsage | undefined {
  if (!usage) return sum;
  const prompt = Number(usage.prompt_tokens ?? 0);
  const completion = Number(usage.completion_tokens ?? 0);
  const total = Number(usage.total_tokens ?? prompt + completion);
  const out: ChatUsage = {
    prompt_tokens: (sum?.prompt_tokens ?? 0) + prompt,
    completion_tokens: (sum?.completion_tokens ?? 0) + completion,
    total_tokens: (sum?.total_tokens ?? 0) + total,
  };
  const promptDetails = addDetails(sum?.prompt_tokens_details, usage.prompt_tokens_details);
  if (promptDetails) out.prompt_tokens_details = promptDetails;
  const completionDetails = addDetails(sum?.completion_tokens_details, usage.completion_tokens_details);
  if (completionDetails) out.completion_tokens_details = completionDetails;
  const tools = addDetails(sum?.server_tool_use, usage.server_tool_use);
  if (tools) out.server_tool_use = tools;
  return out;
}

/** `chatcmpl-abc` -> `cmpl-abc`: the completion API's id prefix. */
function completionId(chatId: unknown): string {
  const id = typeof chatId === 'string' && chatId ? chatId : `${Date.now().toString(36)}`;
  return id.startsWith('chatcmpl-') ? `cmpl-${id.slice('chatcmpl-'.length)}` : id.startsWith('cmpl-') ? id : `cmpl-${id}`;
}

/** One chat answer's choices as completion choices for prompt number `p`. */
function choicesOf(answer: ChatResponse, p: number, n: number, prefix: string, wantsLogprobs: boolean, losses: Losses): CompletionChoice[] {
  const choices = Array.isArray(answer.choices) ? answer.choices : [];
  return choices.map((choice, i) => {
    const index = typeof choice.index === 'number' ? choice.index : i;
    const text = contentText(choice.message);
    let finish = finishOf(choice.finish_reason);
    if (!text && typeof choice.message?.refusal === 'string' && choice.message.refusal) {
      losses.add('refusal');
      finish = 'content_filter';
    }
    return {
      text: prefix + text,
      index: p * n + index,
      logprobs: wantsLogprobs ? completionLogprobs(choice.logprobs, prefix.length) : null,
      finish_reason: finish,
    };
  });
}

/**
 * Ask the chat back end for one prompt's completion. A back end that refuses the conversation
 * before anything went up (an empty prompt: Anthropic and Gemini take no message without content)
 * is refused as the completion client's `prompt`, the field it sent, not as chat's `messages`.
 */
function ask(chat: OperationHandler<'chat'>, request: UpstreamRequest<'chat'>, context: ProviderCallContext): Promise<UpstreamResponse<'chat'>> {
  return chat(request, context).catch((error: unknown) => {
    if (!isGatewayError(error) || error.upstreamStatus !== undefined || !/^messages\b/.test(error.param ?? '')) throw error;
    throw new GatewayError('invalid_request', { param: 'prompt', params: { detail: "prompt: this model's back end does not complete an empty prompt" } });
  });
}

function chatRequest(request: UpstreamRequest<'completion'>, chat: ChatRequest, stream: boolean): UpstreamRequest<'chat'> {
  return {
    operation: 'chat',
    model: request.model,
    stream,
    body: chat,
    clientWantsStreamUsage: stream,
    forwardHeaders: request.forwardHeaders,
  };
}

/** Chat calls of one completion in flight at once, at most. */
export const BRIDGE_CONCURRENCY = 8;

/**
 * `call` for every item, at most BRIDGE_CONCURRENCY at a time, the answers in the items' order.
 * The first failure fails the whole: no call starts after it and those in flight are aborted
 * (their own context's signal), so a back end is not kept busy, or billing, for an answer that
 * will not be given.
 */
export async function allOrNone<I, R>(items: readonly I[], call: (item: I, context: ProviderCallContext) => Promise<R>, context: ProviderCallContext): Promise<R[]> {
  if (items.length === 1) return [await call(items[0]!, context)];
  const siblings = new AbortController();
  const stop = () => siblings.abort(context.signal.reason);
  if (context.signal.aborted) stop();
  else context.signal.addEventListener('abort', stop, { once: true });
  // The attempt's own signal too, so that the calls it makes are known to be this attempt's (its
  // clock learns when they leave and when their back ends answer).
  const sub: ProviderCallContext = { requestId: context.requestId, signal: withinAttempt(context.signal, siblings.signal), logger: context.logger, request: context.request };
  const answers = new Array<R>(items.length);
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (!failure && next < items.length) {
      const at = next++;
      try {
        answers[at] = await call(items[at]!, sub);
      } catch (error) {
        failure ??= { error };
        siblings.abort(error);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(BRIDGE_CONCURRENCY, items.length) }, worker));
  } finally {
    context.signal.removeEventListener('abort', stop);
  }
  if (failure) throw failure.error;
  return answers;
}

async function answerJson(
  chat: OperationHandler<'chat'>,
  request: UpstreamRequest<'completion'>,
  context: ProviderCallContext,
  prompts: string[],
  chats: ChatRequest[],
  losses: Losses,
): Promise<UpstreamResponse<'completion'>> {
  const body = request.body as CompletionRequest;
  const n = body.n ?? 1;
  const answers = await allOrNone(chats, (c, sub) => ask(chat, chatRequest(request, c, false), sub), context);
  const choices: CompletionChoice[] = [];
  let usage: ChatUsage | undefined;
  // One answer without a usage that says something: the sum would undercount, so there is none
  // (metering counts the call).
  let counted = true;
  let status = 200;
  answers.forEach((answer, p) => {
    if (answer.kind !== 'json') throw new GatewayError('upstream_error', { params: { detail: 'the back end streamed an answer it was asked for whole' }, retryable: true });
    status = answer.status;
    choices.push(...choicesOf(answer.body, p, n, body.echo ? prompts[p]! : '', typeof body.logprobs === 'number', losses));
    if (usageFromChat(answer.body.usage)) usage = addUsage(usage, answer.body.usage);
    else counted = false;
  });
  if (!counted) usage = undefined;
  const first = (answers[0] as { body: ChatResponse }).body;
  const result: CompletionResponse = {
    id: completionId(first.id),
    object: 'text_completion',
    created: typeof first.created === 'number' ? first.created : Math.floor(Date.now() / 1000),
    model: typeof first.model === 'string' ? first.model : request.model,
    choices,
  };
  if (first.system_fingerprint !== undefined) result.system_fingerprint = first.system_fingerprint;
  if (usage) result.usage = usage;
  return { kind: 'json', status, body: result };
}

/** One chat answer as chunks: a stream as it is, a whole answer as one chunk per choice and its usage. */
async function* chunksOf(answer: UpstreamResponse<'chat'>): AsyncGenerator<ChatChunk> {
  if (answer.kind === 'stream') {
    yield* answer.chunks;
    return;
  }
  const body = answer.body;
  for (const choice of body.choices ?? []) {
    yield {
      id: body.id,
      object: 'chat.completion.chunk',
      created: body.created,
      model: body.model,
      choices: [{ index: choice.index, delta: { content: contentText(choice.message), refusal: choice.message?.refusal ?? null }, finish_reason: choice.finish_reason, logprobs: choice.logprobs }],
    };
  }
  if (body.usage) yield { id: body.id, object: 'chat.completion.chunk', created: body.created, model: body.model, choices: [], usage: body.usage };
}

async function* streamCompletion(
  chat: OperationHandler<'chat'>,
  request: UpstreamRequest<'completion'>,
  context: ProviderCallContext,
  prompts: string[],
  chats: ChatRequest[],
  firstAnswer: UpstreamResponse<'chat'>,
  losses: Losses,
): AsyncGenerator<CompletionResponse> {
  const body = request.body as CompletionRequest;
  const n = body.n ?? 1;
  const wantsLogprobs = typeof body.logprobs === 'number';
  const withUsageField = request.clientWantsStreamUsage;
  let id: string | undefined;
  let created = Math.floor(Date.now() / 1000);
  let model = request.model;
  let fingerprint: string | null | undefined;
  // Every prompt's stream must report a usage that says something, or the sum undercounts: then
  // there is none (metering counts the call).
  let counted = true;
  let usage: ChatUsage | undefined;
  // What a stream that ends early is charged for its prompts: while every prompt finished so far
  // reported its usage, their sum, given with the last finish chunk of the latest (see
  // reportsSettled); for the prompts after that, given with the next chunk, their usage as their
  // back ends reported it when their streams began, added up (see reportsPrompt), and the prompts
  // sent whose back ends reported none, to be counted (see reportsPromptSent). The prompts not
  // sent yet are no part of any.
  let reported: Usage | undefined;
  /** The prompts sent, done with and not settled, whose back ends reported no prompt usage. */
  const unreported: string[] = [];
  /** The prompt being answered, and whether its back end reported its usage. */
  let current: string | undefined;
  let currentReported = false;
  let toReport = false;
  const build = (choices: CompletionChoice[]): CompletionResponse => {
    const chunk: CompletionResponse = { id: id!, object: 'text_completion', created, model, choices };
    if (fingerprint !== undefined) chunk.system_fingerprint = fingerprint;
    if (withUsageField) chunk.usage = null;
    return chunk;
  };
  const mark = (chunk: CompletionResponse): CompletionResponse => {
    if (toReport) {
      if (reported) reportsPrompt(chunk, reported);
      reportsPromptSent(chunk, { prompt: current === undefined || currentReported ? [...unreported] : [...unreported, current] });
      toReport = false;
    }
    return chunk;
  };
  const make = (choices: CompletionChoice[]) => mark(build(choices));
  for (let p = 0; p < chats.length; p++) {
    const answer = p === 0 ? firstAnswer : await ask(chat, chatRequest(request, chats[p]!, true), context);
    // Sent: its back end has it (and bills it) from now on.
    current = prompts[p]!;
    currentReported = false;
    toReport = true;
    const prefix = body.echo ? prompts[p]! : '';
    /** Per choice of this prompt: the text offset so far (for logprobs), once it has started. */
    const offsets = new Map<number, number>();
    let usageSeen = false;
    // A prompt before the last holds its choices' finish chunks until its stream ends: the last
    // of them then says what the prompts so far cost as their back ends reported it (see
    // reportsSettled), so a stream that ends in a later prompt charges these in full.
    const held: CompletionResponse[] | undefined = p < chats.length - 1 ? [] : undefined;
    for await (const chunk of chunksOf(answer)) {
      if (id === undefined) {
        id = completionId(chunk.id);
        if (typeof chunk.created === 'number') created = chunk.created;
        if (typeof chunk.model === 'string' && chunk.model) model = chunk.model;
        if (chunk.system_fingerprint !== undefined) fingerprint = chunk.system_fingerprint;
      }
      if (chunk.usage) {
        if (usageFromChat(chunk.usage)) {
          usage = addUsage(usage, chunk.usage);
          usageSeen = true;
        } else counted = false;
      }
      const prompt = promptReportedBy(chunk);
      if (prompt) {
        reported = reported ? sumUsage(reported, prompt) : prompt;
        currentReported = true;
        toReport = true;
      }
      for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
        const index = p * n + (typeof choice.index === 'number' ? choice.index : 0);
        const out: CompletionChoice[] = [];
        const text = typeof choice.delta?.content === 'string' ? choice.delta.content : '';
        const finish = finishOf(choice.finish_reason);
        // The echoed prompt goes just before the choice's first text or finish, in a chunk of its
        // own (a chunk has one entry per choice index, and clients read choices[0]): a chunk with
        // only the role is no answer yet, and the stream is read up to one before it is the client's.
        if (!offsets.has(index) && (text || finish)) {
          offsets.set(index, prefix.length);
          if (prefix) yield make([{ text: prefix, index, logprobs: null, finish_reason: null }]);
        }
        if (text || finish) {
          const offset = offsets.get(index)!;
          offsets.set(index, offset + text.length);
          out.push({ text, index, logprobs: wantsLogprobs && text ? completionLogprobs(choice.logprobs, offset) : null, finish_reason: finish });
        }
        if (typeof choice.delta?.refusal === 'string' && choice.delta.refusal) losses.add('refusal');
        if (out.length === 0) continue;
        if (held && finish) held.push(build(out));
        else yield make(out);
      }
    }
    if (!usageSeen) counted = false;
    const settles = held !== undefined && held.length > 0 && counted && usage !== undefined;
    for (const chunk of held ?? []) mark(chunk);
    if (settles) {
      reportsSettled(held[held.length - 1]!, usageFromChat(usage)!);
      reported = undefined;
      unreported.length = 0;
    } else if (!currentReported) unreported.push(current);
    current = undefined;
    for (const chunk of held ?? []) yield chunk;
  }
  if (usage && counted) {
    id ??= completionId(undefined);
    const last: CompletionResponse = { id, object: 'text_completion', created, model, choices: [], usage };
    if (fingerprint !== undefined) last.system_fingerprint = fingerprint;
    yield last;
  }
}

/**
 * The generator, made so that stopping it before it ever ran (nobody will read the stream)
 * still releases the first chat answer's stream, which a generator that never started cannot.
 */
function releasing<T>(generator: AsyncGenerator<T>, first: UpstreamResponse<'chat'>): AsyncIterable<T> {
  let started = false;
  const iterator: AsyncIterator<T> = {
    next: () => {
      started = true;
      return generator.next();
    },
    return: async (value?: unknown) => {
      if (!started && first.kind === 'stream') await first.chunks[Symbol.asyncIterator]().return?.(undefined);
      return generator.return(value as T);
    },
  };
  return { [Symbol.asyncIterator]: () => iterator };
}

/** completion -> chat: registered by the openai-chat format for every back end that has chat but not completion. */
export const completionBridge = defineBridge({
  from: 'completion',
  to: 'chat',
  wrap: (chat) => async (request, context) => {
    const body = request.body as CompletionRequest;
    const prompts = promptsOf(body.prompt);
    const losses = Losses.of(context.request);
    const chats = prompts.map((prompt) => {
      const translated = chatRequestFor(body, prompt, request.model, request.stream);
      for (const name of translated.losses) losses.add(name);
      return translated.chat;
    });
    if (!request.stream) return answerJson(chat, request, context, prompts, chats, losses);
    // The first call is made now, so that its failure is an ordinary failed attempt (retried, or an error status).
    const first = await ask(chat, chatRequest(request, chats[0]!, true), context);
    return { kind: 'stream', status: first.status, chunks: releasing(streamCompletion(chat, request, context, prompts, chats, first, losses), first) };
  },
});
