/**
 * Google's JSON API takes every field of a request by its JSON name (`systemInstruction`) or by
 * its proto name (`system_instruction`), and Google's own REST examples use the proto names. The
 * gateway reads the JSON names, so a body's proto names are renamed first, in place, where the
 * request's structure has such a field. What a client names itself (a function's arguments, a
 * function response, a schema's property names, labels) is never renamed.
 */

import { isObject } from './request.js';

/** A field whose value is taken as it is. */
const LEAF = 'leaf';
/** An object whose keys are the client's own names and whose values have one shape. */
class MapOf {
  constructor(readonly values: Shape) {}
}
type Field = typeof LEAF | Shape | MapOf;
/** The fields of one object of a request, by JSON name; arrays take the shape of their items. */
interface Shape {
  readonly [jsonName: string]: Field;
}

const leaves = (...names: string[]): Record<string, Field> => Object.fromEntries(names.map((name) => [name, LEAF]));

/** Gemini's Schema (OpenAPI's subset): nested schemas under items, anyOf and properties. */
const SCHEMA: Record<string, Field> = leaves(
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'required', 'propertyOrdering',
  'minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'example', 'default', 'minProperties', 'maxProperties',
);
SCHEMA.items = SCHEMA;
SCHEMA.anyOf = SCHEMA;
SCHEMA.properties = new MapOf(SCHEMA);

const PART: Shape = {
  ...leaves('text', 'thought', 'thoughtSignature'),
  inlineData: leaves('mimeType', 'data', 'displayName'),
  fileData: leaves('mimeType', 'fileUri', 'displayName'),
  functionCall: leaves('id', 'name', 'args'),
  functionResponse: {
    ...leaves('id', 'name', 'response', 'willContinue', 'scheduling'),
    parts: { inlineData: leaves('mimeType', 'data', 'displayName'), fileData: leaves('mimeType', 'fileUri', 'displayName') },
  },
  executableCode: leaves('language', 'code'),
  codeExecutionResult: leaves('outcome', 'output'),
  videoMetadata: leaves('startOffset', 'endOffset', 'fps'),
};

const CONTENT: Shape = { role: LEAF, parts: PART };

const TOOL: Shape = {
  functionDeclarations: {
    ...leaves('name', 'description', 'behavior', 'parametersJsonSchema', 'responseJsonSchema'),
    parameters: SCHEMA,
    response: SCHEMA,
  },
  ...leaves('googleSearch', 'googleSearchRetrieval', 'codeExecution', 'urlContext', 'computerUse'),
};

const GENERATION_CONFIG: Shape = {
  ...leaves(
    'stopSequences', 'responseMimeType', 'responseJsonSchema', 'responseModalities', 'candidateCount', 'maxOutputTokens',
    'temperature', 'topP', 'topK', 'seed', 'presencePenalty', 'frequencyPenalty', 'responseLogprobs', 'logprobs',
    'enableEnhancedCivicAnswers', 'speechConfig', 'mediaResolution', 'imageConfig',
  ),
  responseSchema: SCHEMA,
  thinkingConfig: leaves('includeThoughts', 'thinkingBudget', 'thinkingLevel'),
};

/** A generateContent request's fields. */
export const GENERATE_CONTENT: Shape = {
  ...leaves('model', 'cachedContent', 'labels'),
  contents: CONTENT,
  systemInstruction: CONTENT,
  tools: TOOL,
  toolConfig: { functionCallingConfig: leaves('mode', 'allowedFunctionNames'), retrievalConfig: LEAF },
  generationConfig: GENERATION_CONFIG,
  safetySettings: leaves('category', 'threshold', 'method'),
};

/** An embedContent request's fields (and each of a batchEmbedContents' requests). */
export const EMBED_CONTENT: Shape = { ...leaves('model', 'taskType', 'title', 'outputDimensionality'), content: CONTENT };

export const BATCH_EMBED_CONTENTS: Shape = { requests: EMBED_CONTENT };

/** A countTokens request's fields: a generateContent request's, or one inside generateContentRequest. */
export const COUNT_TOKENS: Shape = { ...GENERATE_CONTENT, generateContentRequest: GENERATE_CONTENT };

const camel = (name: string): string => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * Rename the proto names of `value` (an object of `shape`, or an array of such objects) to their
 * JSON names, in place; whether any was renamed. A name the shape does not know is left as it is (it stays what it was: a
 * loss or an error); so is a proto name beside its JSON name (the JSON name wins).
 */
export function useJsonNames(value: unknown, shape: Shape): boolean {
  let renamed = false;
  if (Array.isArray(value)) {
    for (const item of value) renamed = useJsonNames(item, shape) || renamed;
    return renamed;
  }
  if (!isObject(value)) return false;
  for (const key of Object.keys(value)) {
    let name = key;
    if (key.includes('_')) {
      const json = camel(key);
      if (Object.hasOwn(shape, json) && !Object.hasOwn(value, json)) {
        value[json] = value[key];
        delete value[key];
        name = json;
        renamed = true;
      }
    }
    // Own fields only: a client's `constructor` or `__proto__` is no field of the shape.
    const field = Object.hasOwn(shape, name) ? shape[name] : undefined;
    if (field === undefined || field === LEAF) continue;
    if (field instanceof MapOf) {
      const map = value[name];
      if (isObject(map)) for (const inner of Object.values(map)) renamed = useJsonNames(inner, field.values) || renamed;
    } else renamed = useJsonNames(value[name], field) || renamed;
  }
  return renamed;
}
