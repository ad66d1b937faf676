import type { ChatMessage, ChatRequest, ContentPart, FunctionTool, ToolCall, ToolChoice } from '../../../core/index.js';
import { Losses, type Translated } from '../anthropic-messages/request.js';

/**
 * generateContent request -> canonical chat request. Whatever the canonical form cannot carry
 * is returned as a named loss (see docs/formats/gemini.md), never dropped silently.
 */

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Top-level fields the translation carries; every other one present is a loss. */
const CARRIED = new Set(['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'model']);

/** generationConfig fields carried (or deliberately mapped); every other one present is a loss. */
const CARRIED_CONFIG = new Set([
  'temperature',
  'topP',
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
 * A Gemini `Schema` (OpenAPI 3.0 subset, types sometimes in upper case: `OBJECT`, `STRING`) as
 * JSON Schema: types in lower case, `nullable: true` as a `null` type, `propertyOrdering` (an
 * ordering hint no other back end reads) left out; everything else as it is.
 */
export function normaliseSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(normaliseSchema);
  if (!isObject(schema)) return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'propertyOrdering' || key === 'nullable') continue;
    if (key === 'type') {
      out.type = typeof value === 'string' ? value.toLowerCase() : Array.isArray(value) ? value.map((t) => (typeof t === 'string' ? t.toLowerCase() : t)) : value;
    } else if ((key === 'properties' || key === '$defs' || key === 'definitions') && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, normaliseSchema(sub)]));
    } else if (key === 'anyOf' || key === 'oneOf' || key === 'allOf' || key === 'prefixItems') {
      out[key] = normaliseSchema(value);
    } else if ((SCHEMA_CHILDREN as readonly string[]).includes(key)) {
      out[key] = normaliseSchema(value);
    } else out[key] = value;
  }
  if (schema.nullable === true && typeof out.type === 'string') out.type = [out.type, 'null'];
  if (out.type === 'type_unspecified') delete out.type;
  return out;
}

// ---------------------------------------------------------------------------------------------
// contents -> messages
// ---------------------------------------------------------------------------------------------

/** An inlineData / fileData part as a canonical part: images as image_url, others as files. */
function mediaPart(part: Json, losses: Losses): ContentPart | undefined {
  if (isObject(part.inlineData)) {
    const mime = String(part.inlineData.mimeType);
    const url = `data:${mime};base64,${String(part.inlineData.data)}`;
    if (mime.startsWith('image/')) return { type: 'image_url', image_url: { url } };
    if (mime === 'application/pdf') return { type: 'file', file: { file_data: url } };
    losses.add(`inlineData.${mime.split('/')[0]}`);
    return undefined;
  }
  if (isObject(part.fileData)) {
    const mime = typeof part.fileData.mimeType === 'string' ? part.fileData.mimeType : '';
    const uri = String(part.fileData.fileUri);
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
      if (at >= 0) queue.splice(at, 1);
      return id;
    }
    const first = queue.shift();
    if (first !== undefined) return first;
    losses.add('functionResponse.unmatched');
    return `call_${this.next++}_${name}`;
  }
}

function userTurn(parts: Json[], ids: CallIds, losses: Losses): ChatMessage[] {
  const out: ChatMessage[] = [];
  let pending: ContentPart[] = [];
  const flush = () => {
    if (pending.length > 0) {
      out.push({ role: 'user', content: pending.length === 1 && pending[0]!.type === 'text' ? String(pending[0]!.text) : pending });
    }
    pending = [];
  };
  for (const part of parts) {
    notePartExtras(part, losses);
    if (isObject(part.functionResponse)) {
      flush();
      const fr = part.functionResponse;
      const name = String(fr.name);
      out.push({ role: 'tool', tool_call_id: ids.forResponse(name, fr.id, losses), content: JSON.stringify(fr.response ?? {}) });
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
  flush();
  return out;
}

function modelTurn(parts: Json[], ids: CallIds, losses: Losses): ChatMessage {
  const message: ChatMessage = { role: 'assistant', content: null };
  let text: string | undefined;
  const calls: ToolCall[] = [];
  for (const part of parts) {
    notePartExtras(part, losses);
    // Gemini's thought signatures are opaque to every other back end.
    if (typeof part.thoughtSignature === 'string' && part.thoughtSignature) losses.add('parts.thoughtSignature');
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
    if (part.inlineData || part.fileData) losses.add('model.media');
  }
  if (text !== undefined) message.content = text;
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
      const schema = isObject(decl.parametersJsonSchema) ? decl.parametersJsonSchema : isObject(decl.parameters) ? normaliseSchema(decl.parameters) : undefined;
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
        request.tools = request.tools.filter((t) => allowed.includes(t.function.name));
        choice = allowed.length === 1 ? { type: 'function', function: { name: allowed[0]! } } : 'required';
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
  if (typeof config.maxOutputTokens === 'number') request.max_tokens = config.maxOutputTokens;
  if (Array.isArray(config.stopSequences) && config.stopSequences.length > 0) request.stop = config.stopSequences as string[];
  if (typeof config.candidateCount === 'number' && config.candidateCount > 1) request.n = config.candidateCount;
  if (typeof config.presencePenalty === 'number') request.presence_penalty = config.presencePenalty;
  if (typeof config.frequencyPenalty === 'number') request.frequency_penalty = config.frequencyPenalty;
  if (typeof config.seed === 'number') request.seed = config.seed;
  const mime = config.responseMimeType;
  if (mime === 'application/json') {
    const schema = isObject(config.responseJsonSchema) ? config.responseJsonSchema : isObject(config.responseSchema) ? normaliseSchema(config.responseSchema) : undefined;
    request.response_format = schema ? { type: 'json_schema', json_schema: { name: 'response', schema } } : { type: 'json_object' };
  } else if (typeof mime === 'string' && mime !== 'text/plain') {
    losses.add(`generationConfig.responseMimeType.${mime}`);
  } else if (config.responseSchema !== undefined || config.responseJsonSchema !== undefined) {
    losses.add('generationConfig.responseSchema');
  }
  if (isObject(config.thinkingConfig)) {
    const effort = effortForThinking(config.thinkingConfig);
    if (effort !== undefined) request.reasoning_effort = effort;
  }
  if (Array.isArray(config.responseModalities)) {
    for (const modality of config.responseModalities as string[]) {
      const name = String(modality).toUpperCase();
      // Chat back ends answer in text only: an image (or audio) answer cannot be produced.
      if (name !== 'TEXT') losses.add(`generationConfig.responseModalities.${name}`);
    }
  }
  for (const key of Object.keys(config)) {
    if (!CARRIED_CONFIG.has(key) && config[key] !== undefined && config[key] !== null) losses.add(`generationConfig.${key}`);
  }
}

/** The part of a request that the response translation needs to know. */
export interface GeminiRequestView {
  /** thinkingConfig.includeThoughts: reasoning goes back as `thought` parts only when asked. */
  includeThoughts: boolean;
}

export function requestView(body: Json): GeminiRequestView {
  const config = isObject(body.generationConfig) ? body.generationConfig : {};
  const thinking = isObject(config.thinkingConfig) ? config.thinkingConfig : {};
  return { includeThoughts: thinking.includeThoughts === true };
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
  for (const turn of (body.contents as Json[]) ?? []) {
    const parts = Array.isArray(turn.parts) ? (turn.parts as Json[]) : [];
    if (turn.role === 'model') messages.push(modelTurn(parts, ids, losses));
    else if (turn.role === 'system') {
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
