import { randomBytes } from 'node:crypto';
import { tokenCount, usageFromChat, type ChatChoice, type ChatResponse, type ChatUsage, type FinishReason, type ToolCall } from '../../../core/index.js';
import { Losses, type Translated } from '../anthropic-messages/request.js';
import { geminiSignature, type GeminiRequestView } from './request.js';

/**
 * Canonical chat answer -> GenerateContentResponse: candidates (one per choice), parts, finish
 * reasons and usageMetadata.
 */

type Json = Record<string, unknown>;

/** A response id as Gemini's look: 22 URL-safe characters. */
export function newResponseId(): string {
  return randomBytes(16).toString('base64url').slice(0, 22);
}

/**
 * An id for a function call Gemini gave none: unique (as OpenAI's `call_…` are), so a client that
 * keys tool state by id, or a later turn sent to a back end that checks ids, never sees one twice.
 */
export function newCallId(): string {
  return `call_${randomBytes(12).toString('base64url')}`;
}

/** A canonical finish_reason as Gemini's finishReason (a function call ends with STOP there). */
export function finishReasonOf(finish: FinishReason | null | undefined): string {
  switch (finish) {
    case 'length':
      return 'MAX_TOKENS';
    case 'content_filter':
      return 'SAFETY';
    default:
      return 'STOP';
  }
}

/**
 * Canonical usage -> usageMetadata. Gemini counts thoughts apart: candidatesTokenCount excludes
 * them (thoughtsTokenCount) and totalTokenCount is prompt + candidates + thoughts; cached prompt
 * tokens are part of promptTokenCount and also given as cachedContentTokenCount.
 */
export function usageMetadata(usage: ChatUsage | null | undefined): Json {
  // Counts that are not whole non-negative numbers (a broken back end's) are read as none.
  const counted = usageFromChat(usage);
  const prompt = counted?.inputTokens ?? 0;
  const completion = counted?.outputTokens ?? 0;
  const thoughts = counted?.reasoningTokens;
  const cached = counted?.cachedInputTokens;
  const candidates = Math.max(0, completion - (thoughts ?? 0));
  const out: Json = {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: counted?.totalTokens ?? prompt + completion,
  };
  if (cached) out.cachedContentTokenCount = cached;
  if (thoughts) out.thoughtsTokenCount = thoughts;
  return out;
}

/** Tool-call arguments (JSON text) as functionCall args; not an object -> {} and a loss. */
export function functionArgs(text: string, losses: Losses): Json {
  try {
    const parsed = JSON.parse(text || '{}') as unknown;
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Json;
  } catch {
    // fall through
  }
  losses.add('functionCall.args_not_json_object');
  return {};
}

/** Reasoning text of a delta or message: `reasoning_content`, or `reasoning` as some back ends name it. */
export function reasoningOf(value: Json | undefined): string | undefined {
  const text = value?.reasoning_content ?? value?.reasoning;
  return typeof text === 'string' ? text : undefined;
}

export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((p: Json) => (typeof p?.text === 'string' ? p.text : typeof p?.refusal === 'string' ? p.refusal : '')).join('');
}

// ---------------------------------------------------------------------------------------------
// Images in answers, and thought signatures
// ---------------------------------------------------------------------------------------------

/**
 * An image in an answer, as the canonical form carries it: `message.images` / `delta.images`, a
 * list of `{type: 'image_url', image_url: {url}}` with data: URLs (the convention OpenAI-compatible
 * back ends such as OpenRouter use for image output).
 */
export interface AnswerImage {
  type: 'image_url';
  image_url: { url: string };
}

/** The images of a canonical message or delta (`images`), if any. */
export function imagesOf(value: Json | undefined): AnswerImage[] {
  const list = value?.images;
  return Array.isArray(list) ? (list as unknown[]).filter((i): i is AnswerImage => isImage(i)) : [];
}

function isImage(value: unknown): value is AnswerImage {
  const url = (value as { image_url?: { url?: unknown } } | null)?.image_url?.url;
  return typeof url === 'string';
}

/** An inlineData part of an answer as a canonical image, if it is an image. */
export function imageOfPart(part: Json): AnswerImage | undefined {
  const data = part.inlineData as Json | undefined;
  if (!data || typeof data !== 'object') return undefined;
  const mime = String(data.mimeType ?? '');
  if (!mime.startsWith('image/') || typeof data.data !== 'string') return undefined;
  return { type: 'image_url', image_url: { url: `data:${mime};base64,${data.data}` } };
}

/** A canonical image as an inlineData part (only data: URLs can be; anything else is a loss). */
export function inlinePartOf(image: AnswerImage, losses: Losses): Json | undefined {
  const match = /^data:([^;,]+);base64,(.*)$/s.exec(image.image_url.url);
  if (match) return { inlineData: { mimeType: match[1], data: match[2] } };
  losses.add('images.url');
  return undefined;
}

/**
 * Put a thought signature where Gemini puts it: on the first functionCall part when there is
 * one, otherwise on the first part that is not a thought, otherwise on the first part; a part
 * that has a signature of its own (a call streamed after its own thinking) keeps it, and this one
 * goes on an empty text part of its own.
 */
export function placeSignature(parts: Json[], signature: string): void {
  const target = parts.find((p) => p.functionCall) ?? parts.find((p) => p.thought !== true) ?? parts[0];
  if (target && target.thoughtSignature === undefined) target.thoughtSignature = signature;
  else parts.push({ text: '', thoughtSignature: signature });
}

function candidateOf(choice: ChatChoice, view: GeminiRequestView, losses: Losses): Json {
  const message = choice.message ?? { role: 'assistant' };
  const parts: Json[] = [];
  const reasoning = reasoningOf(message);
  if (reasoning && view.includeThoughts) parts.push({ text: reasoning, thought: true });
  const text = textOf(message.content) + (typeof message.refusal === 'string' ? message.refusal : '');
  if (text) parts.push({ text });
  for (const image of imagesOf(message)) {
    const part = inlinePartOf(image, losses);
    if (part) parts.push(part);
  }
  for (const call of message.tool_calls ?? []) {
    parts.push({ functionCall: { id: call.id, name: call.function.name, args: functionArgs(call.function.arguments, losses) } });
  }
  if (parts.length === 0) parts.push({ text: '' });
  if (typeof message.reasoning_signature === 'string' && message.reasoning_signature) placeSignature(parts, geminiSignature(message.reasoning_signature, view.maker));
  const refused = typeof message.refusal === 'string' && message.refusal !== '';
  return {
    content: { role: 'model', parts },
    finishReason: refused ? 'SAFETY' : finishReasonOf(choice.finish_reason),
    index: choice.index ?? 0,
  };
}

/** A canonical chat answer as a GenerateContentResponse. */
export function toGenerateContentResponse(response: ChatResponse, view: GeminiRequestView): Translated<Json> {
  const losses = new Losses();
  const candidates = (response.choices ?? []).map((choice) => candidateOf(choice, view, losses));
  if (view.wantsImages && !(response.choices ?? []).some((choice) => imagesOf(choice.message).length > 0)) losses.add('generationConfig.responseModalities.IMAGE');
  return {
    value: {
      candidates,
      usageMetadata: usageMetadata(response.usage),
      modelVersion: response.model,
      responseId: typeof response.id === 'string' && response.id ? response.id : newResponseId(),
    },
    losses: losses.names,
  };
}

// ---------------------------------------------------------------------------------------------
// GenerateContentResponse -> canonical (for a back end that speaks Gemini, and round trips)
// ---------------------------------------------------------------------------------------------

/** Gemini's finishReason as a canonical finish_reason (tool calls: `tool_calls`). */
export function canonicalFinish(reason: unknown, sawCalls: boolean, losses: Losses): FinishReason | null {
  switch (reason) {
    case 'STOP':
      return sawCalls ? 'tool_calls' : 'stop';
    case 'MAX_TOKENS':
      return 'length';
    case 'CONTINUATION':
      // The token limit, with a token to go on from that only Gemini's API takes.
      losses.add('finishReason.CONTINUATION');
      return 'length';
    case 'SAFETY':
    case 'RECITATION':
    case 'BLOCKLIST':
    case 'PROHIBITED_CONTENT':
    case 'SPII':
    case 'IMAGE_SAFETY':
    case 'IMAGE_PROHIBITED_CONTENT':
    case 'IMAGE_RECITATION':
      return 'content_filter';
    case undefined:
    case null:
      return null;
    default:
      losses.add(`finishReason.${String(reason)}`);
      return 'stop';
  }
}

/**
 * usageMetadata -> canonical usage (the inverse of usageMetadata). The prompt includes the
 * tool-use prompt (`toolUsePromptTokenCount`: what a grounding search or code execution fed the
 * model), which Gemini counts apart from `promptTokenCount`, in `totalTokenCount`, and bills as input.
 */
export function chatUsage(meta: Json | undefined): ChatUsage | undefined {
  // Gemini leaves out a count of zero; one that is there but is not a count (a string, a
  // negative, an absurd number) makes the usage unknown: metering counts the call itself.
  const num = (v: unknown) => (v == null ? 0 : (tokenCount(v) ?? Number.NaN));
  // No prompt count at all (`usageMetadata: {}`): nothing is said, not a call of no tokens.
  if (meta?.promptTokenCount == null) return undefined;
  const prompt = num(meta?.promptTokenCount) + num(meta?.toolUsePromptTokenCount);
  const thoughts = meta?.thoughtsTokenCount;
  const completion = num(meta?.candidatesTokenCount) + num(thoughts);
  const usage: ChatUsage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: typeof meta?.totalTokenCount === 'number' ? meta.totalTokenCount : prompt + completion };
  if (typeof meta?.cachedContentTokenCount === 'number') usage.prompt_tokens_details = { cached_tokens: meta.cachedContentTokenCount };
  if (typeof thoughts === 'number') usage.completion_tokens_details = { reasoning_tokens: thoughts };
  return usageFromChat(usage) ? usage : undefined;
}

/** A GenerateContentResponse as a canonical chat answer (the inverse of toGenerateContentResponse). */
export function fromGenerateContentResponse(body: Json): Translated<ChatResponse> {
  const losses = new Losses();
  const choices: ChatChoice[] = [];
  for (const [position, candidate] of ((body.candidates as Json[] | undefined) ?? []).entries()) {
    const parts = (((candidate.content as Json | undefined)?.parts as Json[] | undefined) ?? []);
    let text: string | undefined;
    let reasoning: string | undefined;
    let signature: string | undefined;
    const calls: ToolCall[] = [];
    const images: AnswerImage[] = [];
    for (const part of parts) {
      const call = part.functionCall as Json | undefined;
      const image = imageOfPart(part);
      if (call && typeof call === 'object') {
        const name = String(call.name);
        const id = typeof call.id === 'string' && call.id ? call.id : newCallId();
        calls.push({ id, type: 'function', function: { name, arguments: JSON.stringify(call.args ?? {}) } });
      } else if (typeof part.text === 'string') {
        if (part.thought === true) reasoning = (reasoning ?? '') + part.text;
        else text = (text ?? '') + part.text;
      } else if (image) {
        images.push(image);
      } else {
        // inlineData that is not an image (audio), executableCode, ...: the canonical answer cannot carry them.
        for (const key of Object.keys(part)) if (key !== 'thoughtSignature') losses.add(`parts.${key}`);
      }
      if (typeof part.thoughtSignature === 'string' && part.thoughtSignature) {
        // The canonical form keeps one signature per answer (Gemini puts it on the first call).
        if (signature === undefined) signature = part.thoughtSignature;
        else if (signature !== part.thoughtSignature) losses.add('parts.thoughtSignature.extra');
      }
    }
    const message: ChatChoice['message'] = { role: 'assistant', content: text ?? null };
    if (reasoning !== undefined) message.reasoning_content = reasoning;
    if (signature !== undefined) message.reasoning_signature = signature;
    if (images.length > 0) message.images = images;
    if (calls.length > 0) message.tool_calls = calls;
    choices.push({
      index: typeof candidate.index === 'number' ? candidate.index : position,
      message,
      finish_reason: canonicalFinish(candidate.finishReason, calls.length > 0, losses),
    });
  }
  const feedback = body.promptFeedback as Json | undefined;
  if (choices.length === 0 && feedback && typeof feedback === 'object' && feedback.blockReason) {
    // A prompt blocked before any candidate: one empty answer cut by the filter, as a stream says it.
    losses.add(`promptFeedback.blockReason.${String(feedback.blockReason)}`);
    choices.push({ index: 0, message: { role: 'assistant', content: null }, finish_reason: 'content_filter' });
  }
  return {
    value: {
      id: typeof body.responseId === 'string' ? body.responseId : newResponseId(),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: typeof body.modelVersion === 'string' ? body.modelVersion : '',
      choices,
      usage: chatUsage(body.usageMetadata as Json | undefined),
    },
    losses: losses.names,
  };
}
