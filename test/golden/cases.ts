/**
 * The inputs of the golden fixtures: each case as a client request in every inbound format and
 * as an upstream answer in every outbound format. `test/golden.e2e.test.ts` with
 * GOLDEN_RECORD=1 combines them into `test/golden/<in>-to-<out>/<case>[-stream].json` (adding
 * what the upstream received and what the client got); without it, it replays those files.
 * The recorded halves are reviewed by hand before they are committed: they are the contract.
 */

type Json = Record<string, any>;

export const INBOUND = ['openai-chat', 'anthropic-messages', 'gemini'] as const;
export const OUTBOUND = ['openai', 'anthropic', 'gemini'] as const;
export type Inbound = (typeof INBOUND)[number];
export type Outbound = (typeof OUTBOUND)[number];

/** The model each outbound provider serves (clients name it directly). */
export const MODEL: Record<Outbound, string> = { openai: 'gpt-golden', anthropic: 'claude-golden', gemini: 'gemini-golden' };

/** A 1x1 PNG. */
export const PNG_B64 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

const LONG_SYSTEM = 'You are a careful summariser. '.repeat(40).trim();

const weatherSchema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };
const TOOLS = [
  { name: 'get_weather', description: 'Weather for a city', schema: weatherSchema },
  { name: 'get_time', description: 'Local time in a city', schema: weatherSchema },
];

export const CASES = ['text', 'image', 'tools', 'thinking', 'stop', 'length', 'cached', 'image-output'] as const;
export type Case = (typeof CASES)[number];

// ---------------------------------------------------------------------------------------------
// Client requests (without model / stream: the runner adds them as each format does)
// ---------------------------------------------------------------------------------------------

export const REQUESTS: Record<Inbound, Record<Case, Json>> = {
  'openai-chat': {
    text: {
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'world' }] },
      ],
      max_tokens: 64,
      temperature: 0.5,
    },
    image: {
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_B64}` } }] }],
      max_tokens: 64,
    },
    tools: {
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
            { id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Rome"}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'call_a', content: '{"temp":18}' },
        { role: 'tool', tool_call_id: 'call_b', content: '{"temp":24}' },
        { role: 'user', content: 'Now the time, please.' },
      ],
      tools: TOOLS.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.schema } })),
      tool_choice: 'required',
      max_tokens: 64,
    },
    thinking: {
      messages: [
        { role: 'user', content: 'What is 17*23?' },
        { role: 'assistant', content: '391', reasoning_content: '17*23 = 391', reasoning_signature: 'sig-prev' },
        { role: 'user', content: 'And 17*24?' },
      ],
      reasoning_effort: 'medium',
      max_tokens: 16000,
    },
    stop: { messages: [{ role: 'user', content: 'Count to five.' }], stop: ['4'], max_tokens: 64 },
    length: { messages: [{ role: 'user', content: 'Write a poem.' }], max_tokens: 5 },
    cached: {
      messages: [
        { role: 'system', content: LONG_SYSTEM },
        { role: 'user', content: 'Summarise.' },
      ],
      max_tokens: 64,
    },
    'image-output': { messages: [{ role: 'user', content: 'Draw a red dot.' }], max_tokens: 64 },
  },
  'anthropic-messages': {
    text: {
      system: [{ type: 'text', text: 'You are terse.' }],
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'world' }] }],
      max_tokens: 64,
      temperature: 0.5,
    },
    image: {
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_B64 } }] }],
      max_tokens: 64,
    },
    tools: {
      messages: [
        { role: 'user', content: 'Weather in Paris and Rome?' },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'toolu_a', name: 'get_weather', input: { city: 'Paris' } },
            { type: 'tool_use', id: 'toolu_b', name: 'get_weather', input: { city: 'Rome' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_a', content: '{"temp":18}' },
            { type: 'tool_result', tool_use_id: 'toolu_b', content: '{"temp":24}' },
            { type: 'text', text: 'Now the time, please.' },
          ],
        },
      ],
      tools: TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema })),
      tool_choice: { type: 'any' },
      max_tokens: 64,
    },
    thinking: {
      messages: [
        { role: 'user', content: 'What is 17*23?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: '17*23 = 391', signature: 'sig-prev' },
            { type: 'text', text: '391' },
          ],
        },
        { role: 'user', content: 'And 17*24?' },
      ],
      thinking: { type: 'enabled', budget_tokens: 8192 },
      max_tokens: 16000,
    },
    stop: { messages: [{ role: 'user', content: 'Count to five.' }], stop_sequences: ['4'], max_tokens: 64 },
    length: { messages: [{ role: 'user', content: 'Write a poem.' }], max_tokens: 5 },
    cached: {
      system: [{ type: 'text', text: LONG_SYSTEM, cache_control: { type: 'ephemeral' } }],
      messages: [{ role: 'user', content: 'Summarise.' }],
      max_tokens: 64,
    },
    'image-output': { messages: [{ role: 'user', content: 'Draw a red dot.' }], max_tokens: 64 },
  },
  gemini: {
    text: {
      systemInstruction: { parts: [{ text: 'You are terse.' }] },
      contents: [{ role: 'user', parts: [{ text: 'Hello' }, { text: 'world' }] }],
      generationConfig: { maxOutputTokens: 64, temperature: 0.5 },
    },
    image: {
      contents: [{ role: 'user', parts: [{ text: 'What is this?' }, { inlineData: { mimeType: 'image/png', data: PNG_B64 } }] }],
      generationConfig: { maxOutputTokens: 64 },
    },
    tools: {
      contents: [
        { role: 'user', parts: [{ text: 'Weather in Paris and Rome?' }] },
        {
          role: 'model',
          parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } } }, { functionCall: { name: 'get_weather', args: { city: 'Rome' } } }],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'get_weather', response: { temp: 18 } } },
            { functionResponse: { name: 'get_weather', response: { temp: 24 } } },
            { text: 'Now the time, please.' },
          ],
        },
      ],
      tools: [{ functionDeclarations: TOOLS.map((t) => ({ name: t.name, description: t.description, parameters: { type: 'OBJECT', properties: { city: { type: 'STRING' } }, required: ['city'] } })) }],
      toolConfig: { functionCallingConfig: { mode: 'ANY' } },
      generationConfig: { maxOutputTokens: 64 },
    },
    thinking: {
      contents: [
        { role: 'user', parts: [{ text: 'What is 17*23?' }] },
        { role: 'model', parts: [{ text: '17*23 = 391', thought: true }, { text: '391', thoughtSignature: 'sig-prev' }] },
        { role: 'user', parts: [{ text: 'And 17*24?' }] },
      ],
      generationConfig: { maxOutputTokens: 16000, thinkingConfig: { thinkingBudget: 8192, includeThoughts: true } },
    },
    stop: { contents: [{ role: 'user', parts: [{ text: 'Count to five.' }] }], generationConfig: { maxOutputTokens: 64, stopSequences: ['4'] } },
    length: { contents: [{ role: 'user', parts: [{ text: 'Write a poem.' }] }], generationConfig: { maxOutputTokens: 5 } },
    cached: {
      systemInstruction: { parts: [{ text: LONG_SYSTEM }] },
      contents: [{ role: 'user', parts: [{ text: 'Summarise.' }] }],
      generationConfig: { maxOutputTokens: 64 },
    },
    'image-output': { contents: [{ role: 'user', parts: [{ text: 'Draw a red dot.' }] }], generationConfig: { maxOutputTokens: 64, responseModalities: ['TEXT', 'IMAGE'] } },
  },
};

// ---------------------------------------------------------------------------------------------
// Upstream answers (whole); their streams are derived below, the same way for every case
// ---------------------------------------------------------------------------------------------

function openaiAnswer(message: Json, finish: string, usage: Json): Json {
  return {
    id: 'chatcmpl-golden',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: MODEL.openai,
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish, logprobs: null }],
    usage,
    system_fingerprint: 'fp_golden',
  };
}

function anthropicAnswer(content: Json[], stop: string, usage: Json, stopSequence: string | null = null): Json {
  return { id: 'msg_golden', type: 'message', role: 'assistant', model: MODEL.anthropic, content, stop_reason: stop, stop_sequence: stopSequence, usage };
}

function geminiAnswer(parts: Json[], finish: string, usage: Json): Json {
  return { candidates: [{ content: { role: 'model', parts }, finishReason: finish, index: 0 }], usageMetadata: usage, modelVersion: MODEL.gemini, responseId: 'goldenResponseId000001' };
}

const U = { prompt: 12, out: 3 };

export const ANSWERS: Record<Outbound, Record<Case, Json>> = {
  openai: {
    text: openaiAnswer({ content: 'Hi there.' }, 'stop', { prompt_tokens: U.prompt, completion_tokens: U.out, total_tokens: U.prompt + U.out }),
    image: openaiAnswer({ content: 'A red dot.' }, 'stop', { prompt_tokens: 90, completion_tokens: 4, total_tokens: 94 }),
    tools: openaiAnswer(
      {
        content: null,
        tool_calls: [
          { id: 'call_t1', type: 'function', function: { name: 'get_time', arguments: '{"city":"Paris"}' } },
          { id: 'call_t2', type: 'function', function: { name: 'get_time', arguments: '{"city":"Rome"}' } },
        ],
      },
      'tool_calls',
      { prompt_tokens: 80, completion_tokens: 20, total_tokens: 100 },
    ),
    thinking: openaiAnswer({ content: '408', reasoning_content: '17*24 = 391 + 17 = 408' }, 'stop', {
      prompt_tokens: 30,
      completion_tokens: 14,
      total_tokens: 44,
      completion_tokens_details: { reasoning_tokens: 12 },
    }),
    stop: openaiAnswer({ content: '1, 2, 3, ' }, 'stop', { prompt_tokens: 10, completion_tokens: 6, total_tokens: 16 }),
    length: openaiAnswer({ content: 'Roses are red,' }, 'length', { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }),
    cached: openaiAnswer({ content: 'Summary.' }, 'stop', { prompt_tokens: 1200, completion_tokens: 2, total_tokens: 1202, prompt_tokens_details: { cached_tokens: 1024 } }),
    // An OpenAI-compatible image back end (OpenRouter's convention: message.images).
    'image-output': openaiAnswer({ content: 'Here it is.', images: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${PNG_B64}` } }] }, 'stop', {
      prompt_tokens: 6,
      completion_tokens: 1294,
      total_tokens: 1300,
    }),
  },
  anthropic: {
    text: anthropicAnswer([{ type: 'text', text: 'Hi there.' }], 'end_turn', { input_tokens: U.prompt, output_tokens: U.out }),
    image: anthropicAnswer([{ type: 'text', text: 'A red dot.' }], 'end_turn', { input_tokens: 90, output_tokens: 4 }),
    tools: anthropicAnswer(
      [
        { type: 'tool_use', id: 'toolu_t1', name: 'get_time', input: { city: 'Paris' } },
        { type: 'tool_use', id: 'toolu_t2', name: 'get_time', input: { city: 'Rome' } },
      ],
      'tool_use',
      { input_tokens: 80, output_tokens: 20 },
    ),
    thinking: anthropicAnswer(
      [
        { type: 'thinking', thinking: '17*24 = 391 + 17 = 408', signature: 'sig-new' },
        { type: 'text', text: '408' },
      ],
      'end_turn',
      { input_tokens: 30, output_tokens: 14 },
    ),
    stop: anthropicAnswer([{ type: 'text', text: '1, 2, 3, ' }], 'stop_sequence', { input_tokens: 10, output_tokens: 6 }, '4'),
    length: anthropicAnswer([{ type: 'text', text: 'Roses are red,' }], 'max_tokens', { input_tokens: 10, output_tokens: 5 }),
    cached: anthropicAnswer([{ type: 'text', text: 'Summary.' }], 'end_turn', { input_tokens: 176, output_tokens: 2, cache_read_input_tokens: 1024, cache_creation_input_tokens: 0 }),
    // Claude answers in text only.
    'image-output': anthropicAnswer([{ type: 'text', text: 'I can only describe one.' }], 'end_turn', { input_tokens: 6, output_tokens: 7 }),
  },
  gemini: {
    text: geminiAnswer([{ text: 'Hi there.' }], 'STOP', { promptTokenCount: U.prompt, candidatesTokenCount: U.out, totalTokenCount: U.prompt + U.out }),
    image: geminiAnswer([{ text: 'A red dot.' }], 'STOP', { promptTokenCount: 90, candidatesTokenCount: 4, totalTokenCount: 94 }),
    tools: geminiAnswer(
      [{ functionCall: { name: 'get_time', args: { city: 'Paris' } } }, { functionCall: { name: 'get_time', args: { city: 'Rome' } } }],
      'STOP',
      { promptTokenCount: 80, candidatesTokenCount: 20, totalTokenCount: 100 },
    ),
    thinking: geminiAnswer([{ text: '17*24 = 391 + 17 = 408', thought: true }, { text: '408', thoughtSignature: 'sig-new' }], 'STOP', {
      promptTokenCount: 30,
      candidatesTokenCount: 2,
      thoughtsTokenCount: 12,
      totalTokenCount: 44,
    }),
    stop: geminiAnswer([{ text: '1, 2, 3, ' }], 'STOP', { promptTokenCount: 10, candidatesTokenCount: 6, totalTokenCount: 16 }),
    length: geminiAnswer([{ text: 'Roses are red,' }], 'MAX_TOKENS', { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 }),
    cached: geminiAnswer([{ text: 'Summary.' }], 'STOP', { promptTokenCount: 1200, candidatesTokenCount: 2, totalTokenCount: 1202, cachedContentTokenCount: 1024 }),
    'image-output': geminiAnswer([{ text: 'Here it is.' }, { inlineData: { mimeType: 'image/png', data: PNG_B64 } }], 'STOP', {
      promptTokenCount: 6,
      candidatesTokenCount: 1294,
      totalTokenCount: 1300,
    }),
  },
};

// ---------------------------------------------------------------------------------------------
// Streams of those answers, as each vendor sends them
// ---------------------------------------------------------------------------------------------

/** Text in word pieces (`a b c` -> `a`, ` b`, ` c`). */
function words(text: string): string[] {
  return text.split(/(?= )/);
}

/** The halves of a string (streamed tool arguments arrive in pieces). */
function halves(text: string): string[] {
  const mid = Math.ceil(text.length / 2);
  return [text.slice(0, mid), text.slice(mid)].filter(Boolean);
}

/** Chat-completion chunks (`data:` payloads), usage last with `choices: []`. */
export function openaiStream(answer: Json): Json[] {
  const base = { id: answer.id, object: 'chat.completion.chunk', created: answer.created, model: answer.model, system_fingerprint: answer.system_fingerprint };
  const chunk = (delta: Json, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] });
  const message = answer.choices[0].message as Json;
  const out: Json[] = [chunk({ role: 'assistant', content: '' })];
  if (message.reasoning_content) for (const piece of words(message.reasoning_content)) out.push(chunk({ reasoning_content: piece }));
  if (message.content) for (const piece of words(message.content)) out.push(chunk({ content: piece }));
  if (message.images) out.push(chunk({ images: message.images }));
  (message.tool_calls as Json[] | undefined)?.forEach((call, index) => {
    out.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] }));
    for (const piece of halves(call.function.arguments)) out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  out.push(chunk({}, answer.choices[0].finish_reason));
  out.push({ ...base, choices: [], usage: answer.usage });
  return out;
}

/** Messages API events as [name, data]. */
export function anthropicStream(msg: Json): Array<[string, Json]> {
  const usage = msg.usage as Json;
  const events: Array<[string, Json]> = [
    ['message_start', { type: 'message_start', message: { ...msg, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } }],
    ['ping', { type: 'ping' }],
  ];
  (msg.content as Json[]).forEach((block, index) => {
    if (block.type === 'text') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'text', text: '' } }]);
      for (const piece of words(block.text)) events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } }]);
    } else if (block.type === 'thinking') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }]);
      for (const piece of words(block.thinking)) events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: piece } }]);
      events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: block.signature } }]);
    } else if (block.type === 'tool_use') {
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } }]);
      for (const piece of halves(JSON.stringify(block.input))) {
        events.push(['content_block_delta', { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } }]);
      }
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push(['message_delta', { type: 'message_delta', delta: { stop_reason: msg.stop_reason, stop_sequence: msg.stop_sequence }, usage: { output_tokens: usage.output_tokens } }]);
  events.push(['message_stop', { type: 'message_stop' }]);
  return events;
}

/**
 * streamGenerateContent events: text and thoughts in word pieces (a part's thoughtSignature on
 * its last piece, as Google sends it once), each functionCall whole, the finishReason and the
 * full usageMetadata on the last event.
 */
export function geminiStream(full: Json): Json[] {
  const candidate = full.candidates[0] as Json;
  const base = { modelVersion: full.modelVersion, responseId: full.responseId };
  const partial = { promptTokenCount: full.usageMetadata.promptTokenCount, totalTokenCount: full.usageMetadata.promptTokenCount };
  const events: Json[] = [];
  const event = (part: Json, extra: Json = {}) => ({ candidates: [{ content: { role: 'model', parts: [part] }, index: 0, ...extra }], usageMetadata: partial, ...base });
  for (const part of candidate.content.parts as Json[]) {
    if (typeof part.text !== 'string') {
      events.push(event(part));
      continue;
    }
    const { thoughtSignature, ...rest } = part;
    const pieces = words(part.text);
    pieces.forEach((text, i) => events.push(event({ ...rest, text, ...(i === pieces.length - 1 && thoughtSignature ? { thoughtSignature } : {}) })));
  }
  const last = event({ text: '' }, { finishReason: candidate.finishReason });
  last.usageMetadata = full.usageMetadata;
  events.push(last);
  return events;
}
