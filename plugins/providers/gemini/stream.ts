import { GatewayError, reportsPrompt, scrub, usageFromChat, type ChatChunk, type ChatChunkChoice, type ChatUsage, type Usage } from '../../../core/index.js';
import type { Losses } from '../../formats/anthropic-messages/request.js';
import { canonicalFinish, chatUsage, imageOfPart, newCallId, newResponseId, type AnswerImage } from '../../formats/gemini/response.js';
import { retryDelayIn } from './api.js';

/**
 * Gemini's `streamGenerateContent?alt=sse` events (each `data: <GenerateContentResponse>`) ->
 * canonical chat chunks, one event at a time:
 *
 *   the first event of a candidate          -> its delta starts with role: assistant
 *   a text part                             -> content
 *   a text part with thought: true          -> reasoning_content
 *   a thoughtSignature (the first)          -> reasoning_signature (later, different ones: a loss)
 *   an inlineData image part                -> images: [{type: image_url, image_url: {url: data:…}}]
 *   a functionCall part (always whole)      -> one whole tool-call delta: index, id (the part's, or
 *                                              a made unique `call_…`), name, arguments (JSON)
 *   finishReason                            -> that candidate's finish chunk (STOP after a call:
 *                                              tool_calls)
 *   usageMetadata (cumulative, the last wins) -> one usage chunk (choices: []) after the stream
 *   promptFeedback.blockReason, no candidates -> finish content_filter
 *   {"error": {…}}                          -> upstream_error (RESOURCE_EXHAUSTED: upstream_rate_limited,
 *                                              UNAVAILABLE: upstream_overloaded), its message scrubbed
 *
 * A stream that ends before every candidate it began has a finishReason was cut short
 * (upstream_error), as is an event that is not a JSON object. Once every candidate finished and
 * the usage came (`settled`), a back end silent for a short while ends the stream, complete.
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

interface Candidate {
  started: boolean;
  finished: boolean;
  calls: number;
  /** The thought signature passed on (the canonical form keeps one per answer). */
  signature?: string;
}

export class GenerateContentStreamTranslator {
  private id = '';
  private model: string;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly candidates = new Map<number, Candidate>();
  private usage: ChatUsage | undefined;
  private blocked = false;
  /** The latest usage counted the answer, not only the prompt (see settled). */
  private outputCounted = false;
  /** The latest usage counted the answer's text (`candidatesTokenCount`): see billed. */
  private answerCounted = false;
  /**
   * The prompt's usage as the first usageMetadata gave it, until a chunk carries it (see
   * reportsPrompt): a stream that ends early is charged it, cache tokens included. Null once given.
   */
  private prompt: Usage | null | undefined;

  constructor(
    private readonly losses: Losses,
    private readonly secrets: readonly (string | undefined)[] = [],
    /** The model the chunks name until the back end says which it is (`modelVersion`). */
    model = '',
  ) {
    this.model = model;
  }

  /** Whether every candidate that began has finished (and at least one did). */
  get complete(): boolean {
    if (this.blocked) return true;
    if (this.candidates.size === 0) return false;
    for (const candidate of this.candidates.values()) if (!candidate.finished) return false;
    return true;
  }

  /**
   * Complete, and the usage came (it rides on the last event, with the finish): Gemini has no
   * event that ends a stream, so what still comes is read, but a back end that then keeps its
   * connection open without a word ends the stream as complete (after a short quiet window, see
   * EventTranslator.settled), not as a stall.
   */
  get settled(): boolean {
    // A usage without the answer's count (the prompt's alone, as Gemini puts on every event) is
    // not the last one: a back end may send the whole usage a while after the finish.
    return this.usage !== undefined && (this.outputCounted || this.blocked) && this.complete;
  }

  private chunk(choices: ChatChunkChoice[], usage?: ChatUsage): ChatChunk {
    const out: ChatChunk = { id: this.id, object: 'chat.completion.chunk', created: this.created, model: this.model, choices };
    if (usage) out.usage = usage;
    return out;
  }

  /** One event's data (parsed JSON) as the chunks it means. */
  push(data: unknown): ChatChunk[] {
    if (!isObject(data)) throw new GatewayError('upstream_error', { params: { detail: 'the back end sent a malformed stream event (not an object)' } });
    if (isObject(data.error)) {
      const message = typeof data.error.message === 'string' ? data.error.message : 'an error';
      // Overload and server errors may go better elsewhere (before any content, the attempt is retried).
      const status = String(data.error.status ?? '');
      const code = typeof data.error.code === 'number' ? data.error.code : undefined;
      const detail = `the back end's stream failed: ${scrub(message, this.secrets)}`;
      // Rate limited or overloaded stay so, as the same error in a JSON answer does: the client
      // hears the kind its SDK waits out and tries again (before any content, the next target is tried).
      if (status === 'RESOURCE_EXHAUSTED' || code === 429) {
        // When to come back, as a JSON answer's RetryInfo says it (see googleFailure).
        const delay = retryDelayIn(data.error.details);
        throw new GatewayError('upstream_rate_limited', { params: { detail }, retryable: true, ...(delay === undefined ? {} : { headers: { 'retry-after': String(delay) } }) });
      }
      if (status === 'UNAVAILABLE' || code === 503) throw new GatewayError('upstream_overloaded', { params: { detail }, retryable: true });
      const retryable = ['INTERNAL', 'DEADLINE_EXCEEDED'].includes(status) || (code !== undefined && code >= 500);
      throw new GatewayError('upstream_error', { params: { detail }, retryable });
    }
    if (!this.id) this.id = typeof data.responseId === 'string' && data.responseId ? data.responseId : newResponseId();
    if (typeof data.modelVersion === 'string' && data.modelVersion) this.model = data.modelVersion;
    if (isObject(data.usageMetadata)) {
      this.usage = chatUsage(data.usageMetadata);
      // Google leaves zero counts out: an answer's count is there when any of it is (its thoughts
      // alone, when thinking used every token), or when the total says more than the prompt.
      const meta = data.usageMetadata;
      this.answerCounted = typeof meta.candidatesTokenCount === 'number';
      this.outputCounted =
        typeof meta.candidatesTokenCount === 'number' ||
        typeof meta.thoughtsTokenCount === 'number' ||
        (typeof meta.totalTokenCount === 'number' &&
          typeof meta.promptTokenCount === 'number' &&
          meta.totalTokenCount > meta.promptTokenCount + (typeof meta.toolUsePromptTokenCount === 'number' ? meta.toolUsePromptTokenCount : 0));
      if (this.prompt === undefined && typeof data.usageMetadata.promptTokenCount === 'number') {
        const prompt = usageFromChat(this.usage);
        if (prompt) this.prompt = { ...prompt, outputTokens: 0, totalTokens: prompt.inputTokens };
      }
    }
    return this.reporting(this.chunks(data));
  }

  /** The prompt's usage handed to the first chunk after it was known. */
  private reporting(out: ChatChunk[]): ChatChunk[] {
    if (this.prompt && out.length > 0) {
      reportsPrompt(out[0]!, this.prompt);
      this.prompt = null;
    }
    return out;
  }

  private chunks(data: Json): ChatChunk[] {
    const out: ChatChunk[] = [];
    const list = Array.isArray(data.candidates) ? data.candidates : [];
    if (list.length === 0 && isObject(data.promptFeedback) && data.promptFeedback.blockReason) {
      this.losses.add(`promptFeedback.blockReason.${String(data.promptFeedback.blockReason)}`);
      this.blocked = true;
      out.push(this.chunk([{ index: 0, delta: { role: 'assistant' }, finish_reason: 'content_filter' } as ChatChunkChoice]));
      return out;
    }
    for (const [position, raw] of list.entries()) {
      if (!isObject(raw)) continue;
      const index = typeof raw.index === 'number' ? raw.index : position;
      let candidate = this.candidates.get(index);
      if (!candidate) {
        candidate = { started: false, finished: false, calls: 0 };
        this.candidates.set(index, candidate);
      }
      const parts = isObject(raw.content) && Array.isArray(raw.content.parts) ? (raw.content.parts as unknown[]) : [];
      let content: string | undefined;
      let reasoning: string | undefined;
      let signature: string | undefined;
      const calls: Json[] = [];
      const images: AnswerImage[] = [];
      for (const part of parts) {
        if (!isObject(part)) continue;
        const call = part.functionCall;
        const image = imageOfPart(part);
        if (isObject(call)) {
          const name = String(call.name ?? '');
          const id = typeof call.id === 'string' && call.id ? call.id : newCallId();
          calls.push({ index: candidate.calls++, id, type: 'function', function: { name, arguments: JSON.stringify(call.args ?? {}) } });
        } else if (typeof part.text === 'string') {
          if (part.thought === true) reasoning = (reasoning ?? '') + part.text;
          else content = (content ?? '') + part.text;
        } else if (image) {
          images.push(image);
        } else {
          for (const key of Object.keys(part)) if (key !== 'thoughtSignature') this.losses.add(`parts.${key}`);
        }
        if (typeof part.thoughtSignature === 'string' && part.thoughtSignature) {
          if (candidate.signature === undefined) candidate.signature = signature = part.thoughtSignature;
          else if (candidate.signature !== part.thoughtSignature) this.losses.add('parts.thoughtSignature.extra');
        }
      }
      const delta: Json = {};
      if (!candidate.started) {
        delta.role = 'assistant';
        candidate.started = true;
      }
      if (reasoning !== undefined) delta.reasoning_content = reasoning;
      // The signature closes the reasoning: it comes before the text of the same event.
      if (signature !== undefined) delta.reasoning_signature = signature;
      // Empty text (Gemini's last event often has it beside the finish) carries nothing, unless it opens the answer.
      if (content !== undefined && (content !== '' || delta.role !== undefined)) delta.content = content;
      if (images.length > 0) delta.images = images;
      if (calls.length > 0) delta.tool_calls = calls;
      const finish = raw.finishReason === undefined || raw.finishReason === null || raw.finishReason === 'FINISH_REASON_UNSPECIFIED' ? null : canonicalFinish(raw.finishReason, candidate.calls > 0, this.losses);
      // The finish goes in a chunk of its own with an empty delta, as OpenAI sends it: the SDKs
      // close the last tool call's arguments only when they read its finish after them.
      if (Object.keys(delta).length > 0) out.push(this.chunk([{ index, delta, finish_reason: null } as ChatChunkChoice]));
      if (finish) out.push(this.chunk([{ index, delta: {}, finish_reason: finish } as ChatChunkChoice]));
      if (finish) candidate.finished = true;
    }
    return out;
  }

  /**
   * What Google has said it bills so far, once a usageMetadata counted the answer's text itself
   * (`candidatesTokenCount`; its counts grow event by event): a stream cut, or left by its client,
   * before its end is charged this. Counts of thoughts alone, or a total alone, say too little of
   * the answer: such a stream is charged its prompt and a count of what it delivered.
   */
  billed(): Usage | undefined {
    return this.answerCounted ? usageFromChat(this.usage) : undefined;
  }

  /** After the last event: the usage chunk (choices: []), if the back end gave usage. */
  end(): ChatChunk[] {
    if (!this.usage) return [];
    return [this.chunk([], this.usage)];
  }
}
