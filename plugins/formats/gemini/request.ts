import type { ChatMessage, ChatRequest, ContentPart, FunctionTool, ToolCall, ToolChoice } from '../../../core/index.js';
import { allowedToolsOf, base64DataUrl, functionsAsTools, GatewayError, NOTHING_TO_ANSWER, SIGNATURE_TAG, signatureFor, strictReady, tagSignature, toolMediaAfter, untagSignature } from '../../../core/index.js';
import { changesNothing, Losses, type Translated } from '../anthropic-messages/request.js';
import { imageOfPart, imagesOf, inlinePartOf, placeSignature, type AnswerImage } from './response.js';

/**
 * generateContent request -> canonical chat request. Whatever the canonical form cannot carry
 * is returned as a named loss (see docs/formats/gemini.md), never dropped silently.
 */

type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Top-level fields the translation carries; every other one present is a loss. */
const CARRIED = new Set(['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'model']);

/** generationConfig fields carried (or deliberately mapped); every other one present is a loss. */
const CARRIED_CONFIG = new Set([
  'temperature',
  'topP',
  'topK',
  'maxOutputTokens',
  'stopSequences',
  'candidateCount',
  'presencePenalty',
  'frequencyPenalty',
  'seed',
  'responseMimeType',
  'responseSchema',
  'responseJsonSchema',
  'thinkingConfig',
  'responseModalities',
]);

// ---------------------------------------------------------------------------------------------
// Thinking budget -> reasoning effort
// ---------------------------------------------------------------------------------------------

/**
 * thinkingConfig -> reasoning_effort:
 * - thinkingLevel (`minimal`, `low`, `medium`, `high`) is taken as it is (lower case);
 * - thinkingBudget 0 (thinking off) -> `none`; -1 (dynamic) -> nothing (the back end's default);
 * - a positive budget: below 1,024 tokens `minimal`, below 4,000 `low`, below 16,000 `medium`,
 *   from 16,000 `high` (the bands the anthropic-messages format uses, plus `minimal`).
 */
export function effortForThinking(config: Json): string | undefined {
  if (typeof config.thinkingLevel === 'string' && config.thinkingLevel) {
    const level = config.thinkingLevel.toLowerCase();
    return level === 'thinking_level_unspecified' ? undefined : level;
  }
  const budget = config.thinkingBudget;
  if (typeof budget !== 'number' || budget < 0) return undefined;
  if (budget === 0) return 'none';
  if (budget < 1024) return 'minimal';
  if (budget < 4000) return 'low';
  if (budget < 16000) return 'medium';
  return 'high';
}

// ---------------------------------------------------------------------------------------------
// Schemas: Gemini's OpenAPI subset -> JSON Schema
// ---------------------------------------------------------------------------------------------

const SCHEMA_CHILDREN = ['items', 'additionalProperties', 'not'] as const;

/**
 * Keywords whose value is a count. Google's `Schema` encodes them as int64, which its JSON gives
 * as a string (`maxItems: "3"`, the type @google/genai declares); JSON Schema wants the number.
 */
const COUNT_KEYWORDS = new Set(['minItems', 'maxItems', 'minLength', 'maxLength', 'minProperties', 'maxProperties']);

/**
 * A Gemini `Schema` (OpenAPI 3.0 subset, types sometimes in upper case: `OBJECT`, `STRING`) as
 * JSON Schema: types in lower case; counts given as text (`"3"`) as numbers; `nullable: true` as
 * a `null` type (and `null` among an `enum`'s values, or a `null` branch of an `anyOf`);
 * `propertyOrdering` (an ordering hint no other back end reads) left out; everything else as it is.
 */
export function normaliseSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(normaliseSchema);
  if (!isObject(schema)) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'propertyOrdering' || key === 'nullable') continue;
    if (COUNT_KEYWORDS.has(key) && typeof value === 'string' && /^\d+$/.test(value)) {
      out[key] = Number(value);
    } else if (key === 'type') {
      out.type = typeof value === 'string' ? value.toLowerCase() : Array.isArray(value) ? value.map((t) => (typeof t === 'string' ? t.toLowerCase() : t)) : value;
    } else if ((key === 'properties' || key === '$defs' || key === 'definitions') && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, normaliseSchema(sub)]));
    } else if (key === 'anyOf' || key === 'oneOf' || key === 'allOf' || key === 'prefixItems') {
      out[key] = normaliseSchema(value);
    } else if ((SCHEMA_CHILDREN as readonly string[]).includes(key)) {
      out[key] = normaliseSchema(value);
    } else out[key] = value;
  }
  if (out.type === 'type_unspecified') delete out.type;
  if (schema.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (Array.isArray(out.type) && !out.type.includes('null')) out.type = [...out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    if (Array.isArray(out.anyOf) && out.type === undefined) out.anyOf = [...out.anyOf, { type: 'null' }];
  }
  return out;
}

/** The signature Google documents for a function call whose real one is not at hand: it stands for none. */
export const NO_SIGNATURE = 'skip_thought_signature_validator';
/** Every placeholder Google's thought-signature FAQ accepts (clients send either). */
const PLACEHOLDER_SIGNATURES: ReadonlySet<string> = new Set([NO_SIGNATURE, 'context_engineering_is_the_way_to_go']);

/** Google's type names, as its own clients write them in a JSON schema too (Gemini CLI does). */
const GOOGLE_TYPES = new Set(['STRING', 'NUMBER', 'INTEGER', 'BOOLEAN', 'ARRAY', 'OBJECT', 'NULL']);

/**
 * A JSON schema (`parametersJsonSchema`, `responseJsonSchema`) with Google's upper-case type names
 * in lower case, as JSON Schema spells them and other back ends read them; nothing else changed,
 * and the same object when it has none.
 */
export function lowerCaseTypes(schema: unknown): unknown {
  if (Array.isArray(schema)) {
    const out = schema.map(lowerCaseTypes);
    return out.some((each, i) => each !== schema[i]) ? out : schema;
  }
  if (!isObject(schema)) return schema;
  let out: Json | undefined;
  const set = (key: string, value: unknown) => {
    if (value !== schema[key]) (out ??= { ...schema })[key] = value;
  };
  const type = schema.type;
  if (typeof type === 'string' && GOOGLE_TYPES.has(type)) set('type', type.toLowerCase());
  else if (Array.isArray(type) && type.some((t) => typeof t === 'string' && GOOGLE_TYPES.has(t))) set('type', type.map((t) => (typeof t === 'string' && GOOGLE_TYPES.has(t) ? t.toLowerCase() : t)));
  for (const key of ['properties', '$defs', 'definitions'] as const) {
    const map = schema[key];
    if (!isObject(map)) continue;
    let copy: Json | undefined;
    for (const [name, sub] of Object.entries(map)) {
      const lowered = lowerCaseTypes(sub);
      if (lowered !== sub) (copy ??= { ...map })[name] = lowered;
    }
    if (copy) set(key, copy);
  }
  for (const key of ['anyOf', 'oneOf', 'allOf', 'prefixItems', ...SCHEMA_CHILDREN] as const) if (schema[key] !== undefined) set(key, lowerCaseTypes(schema[key]));
  return out ?? schema;
}

// ---------------------------------------------------------------------------------------------
// contents -> messages
// ---------------------------------------------------------------------------------------------

/** The audio types chat completions takes inline (`input_audio.format`), by MIME type. */
const AUDIO_FORMATS: Readonly<Record<string, 'wav' | 'mp3'>> = { 'audio/wav': 'wav', 'audio/x-wav': 'wav', 'audio/wave': 'wav', 'audio/mpeg': 'mp3', 'audio/mp3': 'mp3' };

/** A YouTube video's address, which Google's API reads itself (a `fileData` without a MIME type, as Google's guide writes it). */
export const YOUTUBE = /^https?:\/\/(?:(?:www\.|m\.|music\.)?youtube\.com|youtu\.be)\//i;
/** A file uploaded with Google's Files API (`ai.files.upload()`'s `uri`): only Google reads it, with the uploader's key. */
export const GEMINI_FILE = /^https?:\/\/generativelanguage\.googleapis\.com\/[^?#]*\/files\//i;

/** An inlineData / fileData part as a canonical part: images as image_url, PDFs as files, WAV and MP3 as input_audio, text as text. */
export function mediaPart(part: Json, losses: Losses): ContentPart | undefined {
  if (isObject(part.inlineData)) {
    const mime = String(part.inlineData.mimeType);
    const url = `data:${mime};base64,${String(part.inlineData.data)}`;
    if (mime.startsWith('image/')) return { type: 'image_url', image_url: { url } };
    if (mime === 'application/pdf') {
      const name = part.inlineData.displayName;
      return { type: 'file', file: { file_data: url, ...(typeof name === 'string' && name !== '' ? { filename: name } : {}) } };
    }
    // Chat completions takes WAV and MP3 audio as input_audio (audio models), and text as text.
    const audio = AUDIO_FORMATS[mime.toLowerCase()];
    if (audio) return { type: 'input_audio', input_audio: { data: String(part.inlineData.data), format: audio } };
    if (mime.toLowerCase().startsWith('text/')) return { type: 'text', text: Buffer.from(String(part.inlineData.data), 'base64').toString('utf8') };
    losses.add(`inlineData.${mime.split('/')[0]}`);
    return undefined;
  }
  if (isObject(part.fileData)) {
    const mime = typeof part.fileData.mimeType === 'string' ? part.fileData.mimeType : '';
    const uri = String(part.fileData.fileUri);
    // A YouTube video (given without a MIME type, as Google's guide writes it) is no image: no
    // other back end reads one by its page's address.
    if (mime === '' && YOUTUBE.test(uri)) {
      losses.add('fileData.video');
      return undefined;
    }
    // A Files API URI, whatever it holds: no other back end can read it (nor the gateway fetch it).
    if (GEMINI_FILE.test(uri)) {
      losses.add('fileData.uri');
      return undefined;
    }
    if (mime === '' || mime.startsWith('image/')) {
      if (/^https?:\/\//i.test(uri)) return { type: 'image_url', image_url: { url: uri } };
      // A Files API URI (generativelanguage.googleapis.com/...files/...) or gs://: no other back end can read it.
      losses.add('fileData.uri');
      return undefined;
    }
    losses.add(`fileData.${mime.split('/')[0] || 'unknown'}`);
    return undefined;
  }
  return undefined;
}

/** Which keys of a part the translation reads; the rest are losses. */
const PART_KEYS = new Set(['text', 'thought', 'thoughtSignature', 'inlineData', 'fileData', 'functionCall', 'functionResponse']);

function notePartExtras(part: Json, losses: Losses): void {
  for (const key of Object.keys(part)) if (!PART_KEYS.has(key) && part[key] !== undefined) losses.add(`parts.${key}`);
}

/** Tool-call ids made for a request (functionCall parts without an id), matched by name and order. */
class CallIds {
  private next = 0;
  /** Calls of each name not yet answered, oldest first. */
  private pending = new Map<string, string[]>();

  forCall(name: string, id: unknown): string {
    const made = typeof id === 'string' && id ? id : `call_${this.next++}_${name}`;
    const queue = this.pending.get(name) ?? [];
    queue.push(made);
    this.pending.set(name, queue);
    return made;
  }

  forResponse(name: string, id: unknown, losses: Losses): string {
    const queue = this.pending.get(name) ?? [];
    if (typeof id === 'string' && id) {
      const at = queue.indexOf(id);
      if (at >= 0) {
        queue.splice(at, 1);
        return id;
      }
      // An id no call of that name had: one a client made for a call that came without one
      // (Gemini CLI makes `<name>-<time>-<random>`, as Google's API gives calls no id). It answers
      // the oldest call of that name still unanswered; with none, it stays as it was given.
      return queue.shift() ?? id;
    }
    const first = queue.shift();
    if (first !== undefined) return first;
    losses.add('functionResponse.unmatched');
    return `call_${this.next++}_${name}`;
  }
}

/**
 * A user turn as chat messages. Its function responses become tool messages, all of them first
 * (a chat API wants every result of a turn's calls right after the calls), each with the media
 * it carries in its own `parts` (an image a tool read; a provider whose back end takes text only
 * in a tool result moves them after it: toolMediaAfter); its other parts (text, media) follow in
 * one user message, in their order.
 */
function userTurn(parts: Json[], ids: CallIds, losses: Losses): ChatMessage[] {
  const out: ChatMessage[] = [];
  const pending: ContentPart[] = [];
  for (const part of parts) {
    notePartExtras(part, losses);
    if (isObject(part.functionResponse)) {
      const fr = part.functionResponse;
      const name = String(fr.name);
      const response = JSON.stringify(fr.response ?? {});
      const media: ContentPart[] = [];
      for (const inner of Array.isArray(fr.parts) ? fr.parts : []) {
        const part = isObject(inner) ? mediaPart(inner, losses) : undefined;
        if (part) media.push(part);
        else losses.add('functionResponse.parts');
      }
      const message: ChatMessage = { role: 'tool', tool_call_id: ids.forResponse(name, fr.id, losses), content: media.length === 0 ? response : [{ type: 'text', text: response }, ...media] };
      // Google's shape for a failed call: `error` (with no `output`) in the response.
      if (isObject(fr.response) && 'error' in fr.response && !('output' in fr.response)) message.tool_error = true;
      out.push(message);
      for (const key of ['willContinue', 'scheduling']) if (fr[key] !== undefined) losses.add(`functionResponse.${key}`);
      continue;
    }
    if (isObject(part.functionCall)) {
      losses.add('user.functionCall');
      continue;
    }
    if (part.thought === true) {
      losses.add('user.thought');
      continue;
    }
    if (typeof part.text === 'string') {
      pending.push({ type: 'text', text: part.text });
      continue;
    }
    const media = mediaPart(part, losses);
    if (media) pending.push(media);
  }
  if (pending.length > 0) {
    out.push({ role: 'user', content: pending.length === 1 && pending[0]!.type === 'text' ? String(pending[0]!.text) : pending });
  } else if (out.length === 0) {
    // Nothing in the turn a chat back end can take (audio or video only, named above): the turn
    // stays, empty, for the back end to refuse. Left out, the conversation would end on the model's
    // turn, which Claude reads as a prefill to go on with, or be no conversation at all.
    out.push({ role: 'user', content: [] });
  }
  return out;
}

function modelTurn(parts: Json[], ids: CallIds, losses: Losses): ChatMessage {
  const message: ChatMessage = { role: 'assistant', content: null };
  let signed = false;
  let text: string | undefined;
  const calls: ToolCall[] = [];
  const images: AnswerImage[] = [];
  for (const part of parts) {
    notePartExtras(part, losses);
    // A thought signature goes back as the turn's reasoning_signature (one per turn: Gemini
    // puts it on the first function call; a second, different one is a loss). One this gateway
    // tagged names the type of back end that made it; any other is Gemini's.
    // Google's placeholders (Gemini CLI sends one on calls it has no signature for) sign nothing.
    if (typeof part.thoughtSignature === 'string' && part.thoughtSignature && !PLACEHOLDER_SIGNATURES.has(part.thoughtSignature)) {
      const { signature, maker } = readGeminiSignature(part.thoughtSignature);
      if (!signed) {
        message.reasoning_signature = signature;
        if (maker !== undefined) message.reasoning_signature_by = maker;
      } else if (signature !== message.reasoning_signature || maker !== message.reasoning_signature_by) {
        losses.add('parts.thoughtSignature.extra');
        // Another back end signs each block of thinking: their texts, joined, are vouched for by neither.
        if (maker !== NATIVE_SIGNER) {
          delete message.reasoning_signature;
          delete message.reasoning_signature_by;
        }
      }
      signed = true;
    }
    if (isObject(part.functionCall)) {
      const fc = part.functionCall;
      const name = String(fc.name);
      calls.push({ id: ids.forCall(name, fc.id), type: 'function', function: { name, arguments: JSON.stringify(fc.args ?? {}) } });
      continue;
    }
    if (typeof part.text === 'string') {
      if (part.thought === true) message.reasoning_content = (message.reasoning_content ?? '') + part.text;
      else text = (text ?? '') + part.text;
      continue;
    }
    if (isObject(part.functionResponse)) {
      losses.add('model.functionResponse');
      continue;
    }
    // An image the model made earlier (image output) goes back with its turn.
    const image = imageOfPart(part);
    if (image) images.push(image);
    else if (part.inlineData || part.fileData) losses.add('model.media');
  }
  // The empty text of a streamed answer's last chunk adds nothing beside a tool call.
  if (text !== undefined && (text !== '' || calls.length === 0)) message.content = text;
  if (images.length > 0) message.images = images;
  if (calls.length > 0) message.tool_calls = calls;
  return message;
}

function systemText(system: Json, losses: Losses): string {
  const parts = Array.isArray(system.parts) ? (system.parts as Json[]) : [];
  const texts: string[] = [];
  for (const part of parts) {
    if (typeof part.text === 'string') texts.push(part.text);
    else losses.add('systemInstruction.non_text_part');
  }
  return texts.join('\n');
}

// ---------------------------------------------------------------------------------------------
// tools, tool config, generation config
// ---------------------------------------------------------------------------------------------

function canonicalTools(tools: Json[], losses: Losses): FunctionTool[] {
  const out: FunctionTool[] = [];
  for (const tool of tools) {
    for (const key of Object.keys(tool)) {
      // googleSearch, codeExecution, urlContext, retrieval...: Google's server-side tools.
      if (key !== 'functionDeclarations' && tool[key] !== undefined) losses.add(`tools.${key}`);
    }
    for (const decl of Array.isArray(tool.functionDeclarations) ? (tool.functionDeclarations as Json[]) : []) {
      const fn: FunctionTool['function'] = { name: String(decl.name) };
      if (typeof decl.description === 'string') fn.description = decl.description;
      const schema = isObject(decl.parametersJsonSchema) ? lowerCaseTypes(decl.parametersJsonSchema) : isObject(decl.parameters) ? normaliseSchema(decl.parameters) : undefined;
      fn.parameters = (schema as Json | undefined) ?? { type: 'object', properties: {} };
      for (const key of Object.keys(decl)) {
        if (!['name', 'description', 'parameters', 'parametersJsonSchema'].includes(key)) losses.add(`functionDeclarations.${key}`);
      }
      out.push({ type: 'function', function: fn });
    }
  }
  return out;
}

/** functionCallingConfig -> tool_choice (ANY with allowed names narrows the tools offered). */
function applyToolConfig(config: Json, request: ChatRequest, losses: Losses): void {
  const fcc = isObject(config.functionCallingConfig) ? config.functionCallingConfig : undefined;
  for (const key of Object.keys(config)) if (key !== 'functionCallingConfig') losses.add(`toolConfig.${key}`);
  if (!fcc || !request.tools?.length) return;
  const allowed = Array.isArray(fcc.allowedFunctionNames) ? (fcc.allowedFunctionNames as string[]) : undefined;
  let choice: ToolChoice | undefined;
  switch (fcc.mode) {
    case 'ANY':
      if (allowed && allowed.length > 0) {
        const offered = request.tools.filter((t) => allowed.includes(t.function.name));
        // Nothing to call: a chat back end refuses a choice naming a function it is not given.
        if (offered.length === 0) {
          const detail = `mode ANY allows only ${allowed.map((name) => `\`${name}\``).join(', ')}, which no functionDeclaration declares`;
          throw new GatewayError('invalid_value', { param: 'toolConfig.functionCallingConfig.allowedFunctionNames', params: { detail } });
        }
        request.tools = offered;
        choice = offered.length === 1 ? { type: 'function', function: { name: offered[0]!.function.name } } : 'required';
      } else choice = 'required';
      break;
    case 'NONE':
      choice = 'none';
      break;
    case 'VALIDATED':
      losses.add('toolConfig.functionCallingConfig.mode.VALIDATED');
      choice = 'auto';
      break;
    case 'AUTO':
      choice = 'auto';
      break;
    default:
      break;
  }
  if (allowed?.length && fcc.mode !== 'ANY') losses.add('toolConfig.functionCallingConfig.allowedFunctionNames');
  if (choice !== undefined) request.tool_choice = choice;
}

function applyGenerationConfig(config: Json, request: ChatRequest, losses: Losses): void {
  if (typeof config.temperature === 'number') request.temperature = config.temperature;
  if (typeof config.topP === 'number') request.top_p = config.topP;
  // Chat completions has no top_k: carried for the back ends that take it (a Gemini one, as sent).
  if (typeof config.topK === 'number') request.top_k = config.topK;
  if (typeof config.maxOutputTokens === 'number') request.max_tokens = config.maxOutputTokens;
  if (Array.isArray(config.stopSequences) && config.stopSequences.length > 0) request.stop = config.stopSequences as string[];
  if (typeof config.candidateCount === 'number' && config.candidateCount > 1) request.n = config.candidateCount;
  if (typeof config.presencePenalty === 'number') request.presence_penalty = config.presencePenalty;
  if (typeof config.frequencyPenalty === 'number') request.frequency_penalty = config.frequencyPenalty;
  if (typeof config.seed === 'number') request.seed = config.seed;
  const mime = config.responseMimeType;
  if (mime === 'application/json') {
    const schema = isObject(config.responseJsonSchema) ? lowerCaseTypes(config.responseJsonSchema) : isObject(config.responseSchema) ? normaliseSchema(config.responseSchema) : undefined;
    // Google holds the answer to its schema: so does an OpenAI back end, in strict mode, where the
    // schema allows it (every property required, no others, at every depth).
    request.response_format = schema ? { type: 'json_schema', json_schema: { name: 'response', schema, strict: strictReady(schema) } } : { type: 'json_object' };
  } else if (typeof mime === 'string' && mime !== 'text/plain') {
    losses.add(`generationConfig.responseMimeType.${mime}`);
  } else if (config.responseSchema !== undefined || config.responseJsonSchema !== undefined) {
    losses.add('generationConfig.responseSchema');
  }
  if (isObject(config.thinkingConfig)) {
    const effort = effortForThinking(config.thinkingConfig);
    if (effort !== undefined) request.reasoning_effort = effort;
    // A budget travels as its band: one the band does not stand for exactly is not carried.
    const budget = config.thinkingConfig.thinkingBudget;
    if (effort !== undefined && typeof budget === 'number' && budget > 0 && budgetForEffort(effort) !== budget) {
      losses.add('generationConfig.thinkingConfig.thinkingBudget');
    }
  }
  if (Array.isArray(config.responseModalities) && config.responseModalities.length > 0) {
    // Carried as `modalities` (lower case, as OpenAI-compatible APIs name them): a back end that
    // can answer with images (gemini) asks for them; the others say what they cannot do.
    const modalities = (config.responseModalities as unknown[]).map((m) => String(m).toLowerCase()).filter((m) => m !== 'modality_unspecified');
    if (modalities.some((m) => m !== 'text')) request.modalities = modalities;
  }
  for (const key of Object.keys(config)) {
    if (!CARRIED_CONFIG.has(key) && config[key] !== undefined && config[key] !== null && config[key] !== false) losses.add(`generationConfig.${key}`);
  }
}

/** The part of a request that the response translation needs to know. */
export interface GeminiRequestView {
  /** thinkingConfig.includeThoughts: reasoning goes back as `thought` parts only when asked. */
  includeThoughts: boolean;
  /**
   * responseModalities asked for IMAGE: an answer without an image then names the loss
   * `generationConfig.responseModalities.IMAGE` (a back end that answers in text only).
   */
  wantsImages?: boolean;
  /** The provider type of the back end that answered: another type's signatures are tagged with it (see tagSignature). */
  maker?: string;
}

/** How many stop sequences Google's API takes. */
/** The most candidates Gemini makes for one request (`candidateCount`). */
const MAX_CANDIDATES = 8;
const MAX_STOP_SEQUENCES = 5;

/** The provider type whose thought signatures a Gemini-style client gets and hands back as they are. */
export const NATIVE_SIGNER = 'gemini';

/** How a tagged signature (see tagSignature) begins once written in base64: `sy1.sig.`'s first ten characters. */
const BASE64_TAG = Buffer.from(SIGNATURE_TAG).toString('base64').slice(0, 10);

/**
 * A signature as a Gemini-style client gets it: another type of back end's tagged with its maker,
 * and the tagged text in base64, since `thoughtSignature` is bytes in Google's API (typed SDKs
 * decode it as base64, and refuse the dots of a tag); Gemini's own as it came.
 */
export function geminiSignature(signature: string, maker: string | undefined): string {
  const tagged = tagSignature(signature, maker, NATIVE_SIGNER);
  return tagged === signature ? signature : Buffer.from(tagged).toString('base64');
}

/** A `thoughtSignature` a Gemini-style client handed back, and its maker (Gemini, unless this gateway tagged it). */
export function readGeminiSignature(text: string): { signature: string; maker?: string } {
  if (text.startsWith(BASE64_TAG)) {
    const decoded = Buffer.from(text, 'base64').toString('utf8');
    if (decoded.startsWith(SIGNATURE_TAG)) return untagSignature(decoded, NATIVE_SIGNER);
  }
  return untagSignature(text, NATIVE_SIGNER);
}

export function requestView(body: Json): GeminiRequestView {
  const config = isObject(body.generationConfig) ? body.generationConfig : {};
  const thinking = isObject(config.thinkingConfig) ? config.thinkingConfig : {};
  const modalities = Array.isArray(config.responseModalities) ? (config.responseModalities as unknown[]) : [];
  return { includeThoughts: thinking.includeThoughts === true, wantsImages: modalities.some((m) => String(m).toUpperCase() === 'IMAGE') };
}

/** A validated generateContent body (model from the path) as a canonical chat request. */
export function toCanonicalRequest(body: Json, model: string, stream: boolean): Translated<ChatRequest> {
  const losses = new Losses();
  const ids = new CallIds();
  const messages: ChatMessage[] = [];
  if (isObject(body.systemInstruction)) {
    const text = systemText(body.systemInstruction, losses);
    if (text) messages.push({ role: 'system', content: text });
  }
  const contents = (body.contents as Json[]) ?? [];
  for (let i = 0; i < contents.length; i++) {
    const turn = contents[i]!;
    let parts = Array.isArray(turn.parts) ? (turn.parts as Json[]) : [];
    if (turn.role === 'model') {
      // Consecutive model contents are one turn: Google's SDKs keep a streamed answer in a chat's
      // history as one content per chunk (a function call, then the last chunk's empty text).
      // As separate assistant messages, a tool call would not be followed by its results.
      while (contents[i + 1]?.role === 'model') {
        const next = contents[++i]!;
        if (Array.isArray(next.parts)) parts = parts.concat(next.parts as Json[]);
      }
      messages.push(modelTurn(parts, ids, losses));
    } else if (turn.role === 'system') {
      const text = systemText(turn, losses);
      if (text) messages.push({ role: 'system', content: text });
    } else messages.push(...userTurn(parts, ids, losses));
  }
  const request: ChatRequest = { model, messages };
  if (stream) {
    request.stream = true;
    // Gemini's last chunk always carries usageMetadata: ask the back end for usage.
    request.stream_options = { include_usage: true };
  }
  const tools = Array.isArray(body.tools) ? canonicalTools(body.tools as Json[], losses) : [];
  if (tools.length > 0) request.tools = tools;
  if (isObject(body.toolConfig)) applyToolConfig(body.toolConfig, request, losses);
  if (isObject(body.generationConfig)) applyGenerationConfig(body.generationConfig, request, losses);
  for (const key of Object.keys(body)) {
    if (!CARRIED.has(key) && body[key] !== undefined) losses.add(key);
  }
  return { value: request, losses: losses.names };
}

// ---------------------------------------------------------------------------------------------
// canonical -> generateContent (for a back end that speaks Gemini, and the round-trip tests)
// ---------------------------------------------------------------------------------------------

/**
 * reasoning_effort -> thinkingBudget: the middle of each band of effortForThinking (minimal 512,
 * low 2,048, medium 8,192, high 24,576, xhigh 32,768; none 0), so effort -> budget -> effort is
 * the identity.
 */
export function budgetForEffort(effort: string): number | undefined {
  switch (effort) {
    case 'none':
      return 0;
    case 'minimal':
      return 512;
    case 'low':
      return 2048;
    case 'medium':
      return 8192;
    case 'high':
      return 24576;
    case 'xhigh':
      return 32768;
    default:
      return undefined;
  }
}

/** A canonical part as a Gemini part: data: URLs inline, other URLs as fileData. */
function partOf(part: ContentPart, losses: Losses): Json | undefined {
  if (part.type === 'text') return { text: String(part.text) };
  // What an earlier assistant turn refused is what it said.
  if (part.type === 'refusal') return { text: String(part.refusal ?? '') };
  // Gemini sets one media resolution for the whole call (mediaResolution), not one per image.
  if (part.type === 'image_url') {
    const detail = (part.image_url as { detail?: unknown } | undefined)?.detail;
    if (detail !== undefined && detail !== 'auto') losses.add('image_url.detail');
  }
  // A chat client's audio (input_audio): Gemini takes it inline.
  if (part.type === 'input_audio') {
    const audio = (part.input_audio ?? {}) as { data?: unknown; format?: unknown };
    if (typeof audio.data === 'string' && (audio.format === 'wav' || audio.format === 'mp3')) {
      return { inlineData: { mimeType: audio.format === 'mp3' ? 'audio/mpeg' : 'audio/wav', data: audio.data } };
    }
  }
  const url =
    part.type === 'image_url'
      ? String((part.image_url as { url?: unknown } | undefined)?.url ?? '')
      : part.type === 'file'
        ? String(((part.file ?? {}) as Json).file_data ?? '')
        : undefined;
  if (url === undefined) {
    losses.add(`content_part.${part.type}`);
    return undefined;
  }
  const data = base64DataUrl(url);
  // A file's name (an Anthropic document's title): Gemini's inline data has none.
  if (part.type === 'file' && ((part.file ?? {}) as Json).filename) losses.add('file.filename');
  if (data) return { inlineData: { mimeType: data.type, data: data.data } };
  if (part.type === 'image_url' && /^https?:\/\//i.test(url)) return { fileData: { fileUri: url } };
  losses.add(`content_part.${part.type}`);
  return undefined;
}

/**
 * A message's content as Gemini parts. Empty text carries nothing and Google refuses it ("an
 * empty text parameter"), as OpenAI clients send with tool calls (`content: ""`): left out.
 */
function partsOf(content: ChatMessage['content'], losses: Losses): Json[] {
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }];
  if (!Array.isArray(content)) return [];
  return content.map((p) => partOf(p, losses)).filter((p): p is Json => Boolean(p) && !(p!.text === '' && Object.keys(p!).length === 1));
}

/**
 * A tool message's content as a functionResponse `response` object (several text parts: a line
 * each, as their words do not run together); a failed call's under `error`, as Google asks.
 */
function responseObject(content: ChatMessage['content'], failed: boolean): Json {
  const text = typeof content === 'string' ? content : Array.isArray(content) ? content.filter((p) => p.type === 'text').map((p) => String(p.text)).join('\n') : '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text) as unknown;
  } catch {
    // not JSON: wrapped below
  }
  if (failed) return isObject(parsed) && 'error' in parsed ? parsed : { error: parsed ?? text };
  return isObject(parsed) ? parsed : { result: text };
}

/**
 * The thinking budgets a Gemini model takes, where Google documents them (the 2.5 models: Pro
 * thinks always, 128 to 32,768 tokens; Flash 0, off, to 24,576; Flash-Lite 0, off, or 512 to
 * 24,576). Google refuses a budget outside them with a 400; other models (Gemini 3 reads a
 * thinking level, a budget only as an old form) get the budget as it is.
 */
function thinkingRange(model: string | undefined): { min: number; max: number; off: boolean } | undefined {
  // The model's own name, after any path (`models/`, Vertex's `publishers/google/models/`).
  const name = model?.slice(model.lastIndexOf('/') + 1).toLowerCase() ?? '';
  if (!name.startsWith('gemini-2.5-')) return undefined;
  if (name.startsWith('gemini-2.5-pro')) return { min: 128, max: 32768, off: false };
  if (name.startsWith('gemini-2.5-flash-lite')) return { min: 512, max: 24576, off: true };
  if (name.startsWith('gemini-2.5-flash')) return { min: 1, max: 24576, off: true };
  return undefined;
}

/**
 * An effort's budget within what `model` takes (see thinkingRange): brought to its nearest bound,
 * and turning thinking off on a model that always thinks named as lost (it gets the least budget).
 * Thoughts count in `maxOutputTokens`, so a budget of at least that (an effort's band is wider
 * than a client's exact budget: Anthropic's 1,024 travels as `low`, 2,048) would leave the answer
 * nothing: it is lowered to one token under it, as Anthropic requires of its own budgets.
 */
function budgetFor(budget: number, model: string | undefined, effort: string, losses: Losses, maxOutput: unknown): number {
  const range = thinkingRange(model);
  if (budget === 0) {
    if (!range || range.off) return 0;
    losses.add(`reasoning_effort.${effort}`);
    return range.min;
  }
  const bounded = range ? Math.min(range.max, Math.max(range.min, budget)) : budget;
  if (typeof maxOutput !== 'number' || bounded < maxOutput) return bounded;
  const least = range?.min ?? 1;
  if (maxOutput - 1 >= least) {
    losses.add('reasoning_effort.budget_capped_by_max_tokens');
    return maxOutput - 1;
  }
  // No budget the model takes leaves the answer room: off where the model is known to allow it
  // (a model of unknown range, Gemini 3 say, may not: its budget goes as it was).
  losses.add('reasoning_effort.max_tokens_too_small');
  if (!range) return bounded;
  return range.off ? 0 : range.min;
}

/** A canonical chat request as a generateContent body (the model, `model`, goes in the path). */
export function fromCanonicalRequest(canonical: ChatRequest, model?: string): Translated<Json> {
  const losses = new Losses();
  // The older function calling (functions, function_call) as the tools this format knows; what a
  // tool returned besides text after its result (a functionResponse is read as text here).
  const called = functionsAsTools(canonical, losses);
  const request: ChatRequest = { ...called, messages: toolMediaAfter(called.messages) };
  const body: Json = {};
  const system: Json[] = [];
  const contents: Json[] = [];
  const names = new Map<string, string>(); // tool call id -> function name
  let toolTurn: Json[] | undefined; // the user turn that collects function responses
  for (const message of request.messages) {
    // Who spoke (several users of one conversation): a turn has no name here.
    if (typeof message.name === 'string' && message.name !== '') losses.add('messages.name');
    if (message.role === 'system' || message.role === 'developer') {
      if (contents.length > 0) losses.add('messages.system_after_first_turn');
      system.push(...partsOf(message.content ?? '', losses));
      continue;
    }
    if (message.role === 'tool') {
      const id = String(message.tool_call_id ?? '');
      // A result of no call before it: Gemini would get a functionResponse naming no function
      // (OpenAI and Anthropic refuse such a conversation too).
      const name = names.get(id);
      if (name === undefined) {
        // Where the client has it (the messages here may have had some put in between).
        const at = canonical.messages.findIndex((m) => m.role === 'tool' && m.tool_call_id === message.tool_call_id);
        throw new GatewayError('invalid_request', {
          param: `messages[${at}].tool_call_id`,
          params: { detail: `messages[${at}] is a tool result for '${id}', which no assistant message before it called` },
        });
      }
      if (!toolTurn) {
        toolTurn = [];
        contents.push({ role: 'user', parts: toolTurn });
      }
      toolTurn.push({ functionResponse: { id, name, response: responseObject(message.content ?? '', message.tool_error === true) } });
      continue;
    }
    if (message.role === 'user') {
      const parts = partsOf(message.content ?? '', losses);
      // A user message right after function responses joins their turn.
      if (toolTurn) toolTurn.push(...parts);
      else if (parts.length > 0) contents.push({ role: 'user', parts });
      toolTurn = undefined;
      continue;
    }
    if (message.role === 'assistant') {
      toolTurn = undefined;
      const parts: Json[] = [];
      if (typeof message.reasoning_content === 'string' && message.reasoning_content) parts.push({ text: message.reasoning_content, thought: true });
      parts.push(...partsOf(message.content ?? null, losses));
      if (typeof message.refusal === 'string' && message.refusal) parts.push({ text: message.refusal });
      for (const image of imagesOf(message)) {
        const part = inlinePartOf(image, losses);
        if (part) parts.push(part);
      }
      for (const call of message.tool_calls ?? []) {
        names.set(call.id, call.function.name);
        let args: unknown = {};
        try {
          args = JSON.parse(call.function.arguments || '{}');
        } catch {
          losses.add('tool_calls.arguments_not_an_object');
        }
        if (!isObject(args)) {
          if (args !== undefined) losses.add('tool_calls.arguments_not_an_object');
          args = {};
        }
        parts.push({ functionCall: { id: call.id, name: call.function.name, args } });
      }
      // The signature goes back where Gemini put it (first call, else the answer's first part).
      // A signature another type of back end made (a replayed Responses reasoning item) cannot be verified here.
      const signature = signatureFor(message, NATIVE_SIGNER);
      if (signature !== undefined) placeSignature(parts, signature);
      else if (typeof message.reasoning_signature === 'string' && message.reasoning_signature) losses.add('reasoning_signature.other_back_end');
      // A turn with nothing in it (an empty answer handed back) is refused by Google: it goes.
      if (parts.length > 0) contents.push({ role: 'model', parts });
      continue;
    }
    losses.add(`messages.role.${message.role}`);
  }
  if (system.length > 0) body.systemInstruction = { parts: system };
  // Google refuses a request without contents (a chat back end answers a system prompt alone).
  if (contents.length === 0) throw new GatewayError('invalid_request', { param: 'messages', params: { detail: NOTHING_TO_ANSWER } });
  body.contents = contents;

  // A choice of allowed tools: Gemini names them itself when a call is required (ANY with
  // allowedFunctionNames, which it takes with ANY only); else only those are offered.
  // Naming none of the request's tools, the choice is lost (below) and every tool is still offered.
  const allowed = allowedToolsOf(request.tool_choice, request.tools);
  const offered = allowed && !allowed.required ? allowed.tools : request.tools;
  if (offered?.length) {
    body.tools = [
      {
        functionDeclarations: offered.map((tool) => {
          const out: Json = { name: tool.function.name };
          if (tool.function.description !== undefined) out.description = tool.function.description;
          if (tool.function.parameters !== undefined) out.parametersJsonSchema = tool.function.parameters;
          // Gemini has no strict schema adherence for a declaration's arguments.
          if (tool.function.strict === true) losses.add('tools.strict');
          return out;
        }),
      },
    ];
  }
  const choice = request.tool_choice;
  // A choice that asks for a tool, with none offered: nothing to choose from.
  if (choice !== undefined && choice !== 'auto' && choice !== 'none' && !request.tools?.length) losses.add('tool_choice.without_tools');
  if (choice !== undefined && request.tools?.length) {
    let fcc: Json | undefined;
    if (choice === 'auto') fcc = { mode: 'AUTO' };
    else if (choice === 'required') fcc = { mode: 'ANY' };
    else if (choice === 'none') fcc = { mode: 'NONE' };
    else if (typeof choice === 'object' && choice.type === 'function') {
      fcc = { mode: 'ANY', allowedFunctionNames: [String((choice as { function: { name: string } }).function.name)] };
    } else if (allowed) fcc = allowed.required ? { mode: 'ANY', allowedFunctionNames: allowed.tools.map((tool) => tool.function.name) } : { mode: 'AUTO' };
    else losses.add('tool_choice');
    if (fcc) body.toolConfig = { functionCallingConfig: fcc };
  }

  const config: Json = {};
  if (typeof request.temperature === 'number') config.temperature = request.temperature;
  if (typeof request.top_p === 'number') config.topP = request.top_p;
  if (typeof request.top_k === 'number') config.topK = request.top_k;
  const maxTokens = request.max_completion_tokens ?? request.max_tokens;
  if (typeof maxTokens === 'number') config.maxOutputTokens = maxTokens;
  if (request.stop != null) {
    const stops = Array.isArray(request.stop) ? request.stop : [request.stop];
    // Google takes five at most (a Claude-style client may send more): the first five are kept.
    if (stops.length > MAX_STOP_SEQUENCES) losses.add('stop.too_many');
    config.stopSequences = stops.slice(0, MAX_STOP_SEQUENCES);
  }
  if (typeof request.n === 'number' && request.n > 1) {
    // Gemini makes at most 8 candidates (and refuses more): fewer choices than asked would be
    // paired with the client's as if they were all.
    if (request.n > MAX_CANDIDATES) throw new GatewayError('invalid_value', { param: 'n', params: { param: 'n', detail: `this model's back end makes at most ${MAX_CANDIDATES} choices; ${request.n} were asked for` } });
    config.candidateCount = request.n;
  }
  if (typeof request.presence_penalty === 'number') config.presencePenalty = request.presence_penalty;
  if (typeof request.frequency_penalty === 'number') config.frequencyPenalty = request.frequency_penalty;
  if (typeof request.seed === 'number') config.seed = request.seed;
  const format = request.response_format;
  if (format?.type === 'json_object') config.responseMimeType = 'application/json';
  else if (format?.type === 'json_schema') {
    config.responseMimeType = 'application/json';
    const schema = (format.json_schema as { schema?: unknown } | undefined)?.schema;
    if (isObject(schema)) config.responseJsonSchema = schema;
  } else if (format && format.type !== 'text') losses.add(`response_format.${format.type}`);
  if (typeof request.reasoning_effort === 'string') {
    const asked = budgetForEffort(request.reasoning_effort);
    if (asked === undefined) losses.add(`reasoning_effort.${request.reasoning_effort}`);
    else {
      const budget = budgetFor(asked, model, request.reasoning_effort, losses, config.maxOutputTokens);
      // Thoughts are asked for whenever thinking is on, so the answer can carry them back.
      config.thinkingConfig = budget === 0 ? { thinkingBudget: 0 } : { thinkingBudget: budget, includeThoughts: true };
    }
  }
  if (Array.isArray(request.modalities) && request.modalities.length > 0) {
    // Audio: Google makes it only alone, from its speech models, and refuses it beside text (as a
    // chat client always asks for it): not carried.
    const known = ['text', 'image'];
    const modalities = (request.modalities as unknown[]).map((m) => String(m).toLowerCase());
    for (const m of modalities) if (!known.includes(m)) losses.add(`modalities.${m}`);
    config.responseModalities = modalities.filter((m) => known.includes(m)).map((m) => m.toUpperCase());
  }
  if (Object.keys(config).length > 0) body.generationConfig = config;
  const mapped = new Set([
    'model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'n', 'stream', 'stream_options',
    'presence_penalty', 'frequency_penalty', 'seed', 'tools', 'tool_choice', 'response_format', 'reasoning_effort', 'modalities',
  ]);
  // Parallel calls are Gemini's way too: only asking for one call at a time is lost.
  // (Asked by the client: the older function calling's one call a turn is kept by the answer's translation.)
  if (canonical.parallel_tool_calls === false) losses.add('parallel_tool_calls');
  mapped.add('parallel_tool_calls');
  // `false` turns off what is off anyway (`logprobs: false`), and the like: nothing is lost.
  for (const key of Object.keys(request)) if (!mapped.has(key) && !changesNothing(key, request[key])) losses.add(key);
  return { value: body, losses: losses.names };
}
