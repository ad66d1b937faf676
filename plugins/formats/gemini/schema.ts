import type { JsonSchema } from '../../../core/index.js';

/**
 * POST /v1beta/models/{model}:generateContent and :streamGenerateContent, as Google's clients
 * send it. The model is in the path, not the body. `contents` is required (the spec also lists
 * generationConfig.responseModalities as required, but text clients such as @google/genai leave
 * generationConfig out, so it is optional here). Unknown fields are let through and become named
 * losses in the translation rather than refusals.
 */

/** Google's ThinkingLevel values, as its clients send them (upper case) and its guides write them (lower case). */
const THINKING_LEVELS = ['THINKING_LEVEL_UNSPECIFIED', 'MINIMAL', 'LOW', 'MEDIUM', 'HIGH'].flatMap((level) => [level, level.toLowerCase()]);

const part = {
  type: 'object',
  // A part holds something (Google refuses `{}`: its data is a required one-of).
  minProperties: 1,
  properties: {
    text: { type: 'string' },
    thought: { type: 'boolean' },
    thoughtSignature: { type: 'string' },
    inlineData: { type: 'object', required: ['mimeType', 'data'], properties: { mimeType: { type: 'string' }, data: { type: 'string' } } },
    fileData: { type: 'object', required: ['fileUri'], properties: { mimeType: { type: 'string' }, fileUri: { type: 'string', minLength: 1 } } },
    functionCall: { type: 'object', required: ['name'], properties: { id: { type: 'string' }, name: { type: 'string', minLength: 1 }, args: { type: 'object' } } },
    functionResponse: {
      type: 'object',
      required: ['name'],
      properties: { id: { type: 'string' }, name: { type: 'string', minLength: 1 }, response: { type: 'object' } },
    },
  },
};

const content = {
  type: 'object',
  required: ['parts'],
  properties: {
    role: { enum: ['user', 'model', 'function', 'tool', 'system'] },
    // As Google: a turn with no parts is refused.
    parts: { type: 'array', minItems: 1, items: part },
  },
};

export const generateContentSchema: JsonSchema = {
  type: 'object',
  required: ['contents'],
  properties: {
    contents: { type: 'array', minItems: 1, items: content },
    systemInstruction: { type: 'object', properties: { role: { type: 'string' }, parts: { type: 'array', items: part } } },
    tools: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          functionDeclarations: {
            type: 'array',
            items: {
              type: 'object',
              required: ['name'],
              properties: { name: { type: 'string', minLength: 1 }, description: { type: 'string' }, parameters: { type: 'object' }, parametersJsonSchema: { type: 'object' } },
              // Google takes one or the other: which one a back end would read is not the client's to guess.
              allOf: [{ not: { required: ['parameters', 'parametersJsonSchema'] }, 'x-message': 'parameters and parametersJsonSchema are not supported together: give one.' }],
            },
          },
        },
      },
    },
    toolConfig: {
      type: 'object',
      properties: {
        functionCallingConfig: {
          type: 'object',
          properties: {
            mode: { enum: ['AUTO', 'ANY', 'NONE', 'VALIDATED', 'MODE_UNSPECIFIED'] },
            allowedFunctionNames: { type: 'array', items: { type: 'string' } },
          },
        },
      },
    },
    generationConfig: {
      type: 'object',
      properties: {
        temperature: { type: 'number', minimum: 0, maximum: 2 },
        topP: { type: 'number', minimum: 0, maximum: 1 },
        topK: { type: 'number', minimum: 0 },
        maxOutputTokens: { type: 'integer', minimum: 1 },
        candidateCount: { type: 'integer', minimum: 1, maximum: 8 },
        stopSequences: { type: 'array', maxItems: 5, items: { type: 'string' } },
        // Google's range (2 itself excluded): a back end refuses more, in its own words.
        presencePenalty: { type: 'number', minimum: -2, exclusiveMaximum: 2 },
        frequencyPenalty: { type: 'number', minimum: -2, exclusiveMaximum: 2 },
        seed: { type: 'integer' },
        responseMimeType: { type: 'string' },
        responseSchema: { type: 'object' },
        responseJsonSchema: { type: 'object' },
        responseModalities: { type: 'array', items: { type: 'string' } },
        imageConfig: { type: 'object', properties: { aspectRatio: { type: 'string' }, imageSize: { type: 'string' } } },
        thinkingConfig: {
          type: 'object',
          properties: { thinkingBudget: { type: 'integer', minimum: -1 }, includeThoughts: { type: 'boolean' }, thinkingLevel: { enum: THINKING_LEVELS } },
          // Google refuses the two together, whatever the model.
          allOf: [{ not: { required: ['thinkingBudget', 'thinkingLevel'] }, 'x-message': 'thinking_budget and thinking_level are not supported together.' }],
        },
      },
      // Google takes one or the other.
      allOf: [{ not: { required: ['responseSchema', 'responseJsonSchema'] }, 'x-message': 'responseSchema and responseJsonSchema are not supported together: give one.' }],
    },
    safetySettings: { type: 'array', items: { type: 'object' } },
  },
};

