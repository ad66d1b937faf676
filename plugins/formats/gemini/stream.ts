import { ToolCallPieces, type ChatChunk, type ChatChunkChoice, type ChatUsage, type FinishReason } from '../../../core/index.js';
import type { Losses } from '../anthropic-messages/request.js';
import { geminiSignature, type GeminiRequestView } from './request.js';
import { finishReasonOf, functionArgs, imagesOf, inlinePartOf, newResponseId, placeSignature, reasoningOf, usageMetadata } from './response.js';

/**
 * Canonical chat chunks -> streamGenerateContent?alt=sse: one `data: <GenerateContentResponse>`
 * event (framed `\r\n\r\n`, as Google frames them) per chunk that carries text or reasoning,
 * as it comes (images as inlineData parts; a reasoning signature as the thoughtSignature of the
 * next part that is not a thought). Gemini sends whole function calls, so streamed tool-call argument pieces are
 * buffered per call and sent as one functionCall part with parsed args when the choice
 * finishes. The last event carries each candidate's finishReason and the usageMetadata.
 */

type Json = Record<string, unknown>;

export interface StreamOptions {
  view: GeminiRequestView;
  losses: Losses;
}

/** One SSE event as Google frames it. */
export function dataEvent(value: unknown): string {
  return `data: ${JSON.stringify(value)}\r\n\r\n`;
}

interface PendingCall {
  id?: string;
  name: string;
  args: string;
  /** The signature of the thinking just before this call (a back end that signs each block of thinking). */
  signature?: string;
}

interface CandidateState {
  /** Calls in arrival order, and which one each streamed piece belongs to (see ToolCallPieces). */
  calls: PendingCall[];
  pieces: ToolCallPieces<PendingCall>;
  finish?: FinishReason | null;
  refused: boolean;
  /** A reasoning signature not yet sent: it goes on the next part that is not a thought. */
  signature?: string;
}

export async function* generateContentEvents(chunks: AsyncIterable<ChatChunk>, options: StreamOptions): AsyncGenerator<string> {
  // The back end's answer id (the first chunk's), as a non-streamed answer has it; one made up without.
  let responseId: string | undefined;
  let model = '';
  let usage: ChatUsage | null | undefined;
  let sawImage = false;
  const states = new Map<number, CandidateState>();
  const stateOf = (index: number): CandidateState => {
    let state = states.get(index);
    if (!state) {
      state = { calls: [], pieces: new ToolCallPieces(), refused: false };
      states.set(index, state);
    }
    return state;
  };
  const callParts = (state: CandidateState): Json[] => {
    const parts = state.calls.map((call) => {
      const part: Json = { functionCall: { ...(call.id ? { id: call.id } : {}), name: call.name, args: functionArgs(call.args, options.losses) } };
      if (call.signature !== undefined) part.thoughtSignature = call.signature;
      return part;
    });
    state.calls = [];
    state.pieces = new ToolCallPieces();
    return parts;
  };
  const envelope = (candidates: Json[], withUsage: boolean): Json => {
    const out: Json = { candidates };
    if (withUsage) out.usageMetadata = usageMetadata(usage);
    out.modelVersion = model;
    out.responseId = (responseId ??= newResponseId());
    return out;
  };

  for await (const chunk of chunks) {
    if (!model && typeof chunk.model === 'string') model = chunk.model;
    if (responseId === undefined && typeof chunk.id === 'string' && chunk.id) responseId = chunk.id;
    if (chunk.usage) usage = chunk.usage;
    const candidates: Json[] = [];
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      const index = choice.index ?? 0;
      const state = stateOf(index);
      const d = (choice.delta ?? {}) as ChatChunkChoice['delta'];
      const parts: Json[] = [];
      const reasoning = reasoningOf(d);
      if (reasoning && options.view.includeThoughts) parts.push({ text: reasoning, thought: true });
      const text = (typeof d.content === 'string' ? d.content : '') + (typeof d.refusal === 'string' ? d.refusal : '');
      if (typeof d.refusal === 'string' && d.refusal) state.refused = true;
      if (text) parts.push({ text });
      for (const image of imagesOf(d as Json)) {
        sawImage = true;
        const part = inlinePartOf(image, options.losses);
        if (part) parts.push(part);
      }
      if (typeof d.reasoning_signature === 'string' && d.reasoning_signature) state.signature = geminiSignature(d.reasoning_signature, options.view.maker);
      for (const piece of d.tool_calls ?? []) {
        // The call a piece belongs to (see ToolCallPieces), or a new one.
        let call = state.pieces.find(piece);
        if (!call) {
          call = { id: typeof piece.id === 'string' && piece.id ? piece.id : undefined, name: piece.function?.name ?? '', args: '' };
          // A signature not yet sent goes on this call, where Google puts it; the next thinking
          // may bring another one for the next call.
          if (state.signature !== undefined) {
            call.signature = state.signature;
            state.signature = undefined;
          }
          state.calls.push(call);
          state.pieces.opened(piece, call);
        } else if (!call.name && piece.function?.name) call.name = piece.function.name;
        if (piece.function?.arguments) call.args += piece.function.arguments;
      }
      if (choice.finish_reason) {
        state.finish = choice.finish_reason;
        // Calls are complete once their choice finishes: send them now, whole.
        parts.push(...callParts(state));
      }
      if (state.signature !== undefined && parts.some((p) => p.thought !== true)) {
        placeSignature(parts, state.signature);
        state.signature = undefined;
      }
      if (parts.length > 0) candidates.push({ content: { role: 'model', parts }, index });
    }
    if (candidates.length > 0) yield dataEvent(envelope(candidates, false));
  }

  // The last event: calls not yet sent (a back end that never said finish), finish reasons, usage.
  const finals: Json[] = [];
  if (states.size === 0) stateOf(0);
  for (const [index, state] of [...states.entries()].sort((a, b) => a[0] - b[0])) {
    const parts = callParts(state);
    if (parts.length === 0) parts.push({ text: '' });
    if (state.signature !== undefined) placeSignature(parts, state.signature);
    finals.push({
      content: { role: 'model', parts },
      finishReason: state.refused ? 'SAFETY' : finishReasonOf(state.finish),
      index,
    });
  }
  if (options.view.wantsImages && !sawImage) options.losses.add('generationConfig.responseModalities.IMAGE');
  yield dataEvent(envelope(finals, true));
}
