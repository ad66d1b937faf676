import { createHash } from 'node:crypto';
import { mapStream, SIGNATURE_TAG, sseData, tagSignature, toolDeltasAsFunctionCall, upstreamBytesOf, type ChatChunk, type RequestContext } from '../../../core/index.js';
import { LossList } from './responses/request.js';

export const FORMAT = 'openai-chat';

/** A chunk of a chat or completion stream, as far as relaying it goes. */
interface StreamChunk {
  choices?: unknown;
  usage?: unknown;
}

/** A chunk that only carries usage: the answer to include_usage. */
function isUsageOnly(chunk: StreamChunk): boolean {
  return Array.isArray(chunk.choices) && chunk.choices.length === 0 && Boolean(chunk.usage);
}

/** The event's text as the back end sent it, when it can go out as it is (one line, unchanged). */
export function sameLine(chunk: object): string | undefined {
  return oneLine(upstreamBytesOf(chunk, FORMAT));
}

function oneLine(raw: unknown): string | undefined {
  return typeof raw === 'string' && raw.indexOf('\n') === -1 && raw.indexOf('\r') === -1 ? raw : undefined;
}

/**
 * A chat or completion stream as OpenAI's server-sent events, ending with `[DONE]`. Usage goes
 * out only to a client that asked for it (the gateway always asks the back end). Same format in
 * and out: the back end's event text is relayed, not parsed and re-written. The events of one
 * read leave together, with no promise per event (mapStream).
 */
export function openAIEvents(chunks: AsyncIterable<StreamChunk>, wantsUsage: boolean, legacyFunctions?: RequestContext, maker?: string, fingerprint?: string): AsyncIterableIterator<string> {
  return mapStream(
    chunks,
    (chunk) => {
      // The event's text when a back end of this format sent it (relayed as it came, unless reshaped).
      const raw = upstreamBytesOf(chunk, FORMAT);
      if (raw === undefined) {
        // Another format's back end's reasoning signature, tagged with its type (see signaturesTagged).
        if (maker !== undefined) signaturesTagged((chunk as ChatChunk).choices, 'delta', maker);
        if (fingerprint !== undefined) openAIShaped(chunk, 'delta', fingerprint);
      }
      // A client that asked with `functions` (`legacyFunctions`: its call): a tool call as
      // `function_call` (see toolDeltasAsFunctionCall), and the chunk written anew, not relayed.
      let reshaped = false;
      if (legacyFunctions) {
        const done = toolDeltasAsFunctionCall(chunk as ChatChunk);
        if (done === 'dropped') LossList.of(legacyFunctions).add(FUNCTION_CALLS_AFTER_THE_FIRST);
        reshaped = done !== 'unchanged';
      }
      if (!wantsUsage) {
        if (isUsageOnly(chunk)) return undefined;
        if ('usage' in chunk) {
          delete chunk.usage;
          return sseData(JSON.stringify(chunk));
        }
      }
      const same = reshaped ? undefined : oneLine(raw);
      if (same !== undefined) return sseData(same);
      // OpenAI gives every chunk of a stream that asked for usage a `usage` field, null until the last.
      if (wantsUsage && !('usage' in chunk)) chunk.usage = null;
      return sseData(JSON.stringify(chunk));
    },
    { end: () => sseData('[DONE]') },
  );
}

/**
 * Tag the reasoning signatures of an answer's choices (`message` or a stream's `delta`) with
 * `maker`, the provider type of the back end that made them (see tagSignature): a chat
 * completions client hands them back as it got them, and the gateway then gives each only to a
 * back end of that type (a fallback to another type would be refused for it). Whether any was.
 */
export function signaturesTagged(choices: unknown, field: 'message' | 'delta', maker: string): boolean {
  if (!Array.isArray(choices)) return false;
  let tagged = false;
  for (const choice of choices as Array<Record<string, { reasoning_signature?: unknown } | undefined>>) {
    const part = choice?.[field];
    const signature = part?.reasoning_signature;
    if (typeof signature !== 'string' || signature === '' || signature.startsWith(SIGNATURE_TAG)) continue;
    part!.reasoning_signature = tagSignature(signature, maker);
    tagged = true;
  }
  return tagged;
}

/**
 * An answer (or a stream chunk) another format's back end gave, given the fields OpenAI gives
 * every one: `system_fingerprint` (the spec's chat completion has one; here `fingerprintOf` the
 * back end and model that answered), each choice's `logprobs: null`, an answer's `refusal: null`.
 * Fields the answer has are kept.
 */
export function openAIShaped(answer: { system_fingerprint?: unknown; choices?: unknown }, field: 'message' | 'delta', fingerprint: string): void {
  if (answer.system_fingerprint === undefined) answer.system_fingerprint = fingerprint;
  if (!Array.isArray(answer.choices)) return;
  for (const choice of answer.choices as Array<Record<string, unknown> | undefined>) {
    if (!choice || typeof choice !== 'object') continue;
    if (!('logprobs' in choice)) choice.logprobs = null;
    const message = field === 'message' ? (choice.message as Record<string, unknown> | undefined) : undefined;
    if (message && typeof message === 'object' && !('refusal' in message)) message.refusal = null;
  }
}

const fingerprints = new Map<string, string>();

/** The `system_fingerprint` of answers from one type of back end and model: `fp_` and 10 hex digits of a hash of the two, the same for every call. */
export function fingerprintOf(type: string, model: string): string {
  const key = `${type}/${model}`;
  let fingerprint = fingerprints.get(key);
  if (fingerprint === undefined) {
    fingerprint = `fp_${createHash('sha256').update(key).digest('hex').slice(0, 10)}`;
    // Bounded: a model name comes from the configuration's targets.
    if (fingerprints.size < 10_000) fingerprints.set(key, fingerprint);
  }
  return fingerprint;
}

/** The loss named when a client that asked with `functions` was answered with more than one call: the older shape holds one. */
export const FUNCTION_CALLS_AFTER_THE_FIRST = 'function_call.after_the_first';
