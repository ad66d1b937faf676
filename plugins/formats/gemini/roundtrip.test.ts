import { expect } from 'chai';
import type { ChatResponse } from '../../../core/index.js';
import { budgetForEffort, effortForThinking, fromCanonicalRequest, toCanonicalRequest } from './request.js';
import { fromGenerateContentResponse, toGenerateContentResponse } from './response.js';
import { GenerateContentStreamTranslator } from '../../providers/gemini/stream.js';
import { Losses } from '../anthropic-messages/request.js';
import { generateContentEvents } from './stream.js';

type Json = Record<string, any>;

/** A generateContent body using everything the canonical form carries without loss. */
const request: Json = {
  systemInstruction: { parts: [{ text: 'You are terse.' }] },
  contents: [
    { role: 'user', parts: [{ text: 'weather?' }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] },
    {
      role: 'model',
      parts: [
        { text: 'they want weather', thought: true },
        { text: 'Checking.' },
        { functionCall: { id: 'c1', name: 'get_weather', args: { city: 'Paris' } } },
        { functionCall: { id: 'c2', name: 'get_weather', args: { city: 'Rome' } } },
      ],
    },
    {
      role: 'user',
      parts: [
        { functionResponse: { id: 'c1', name: 'get_weather', response: { forecast: 'rain' } } },
        { functionResponse: { id: 'c2', name: 'get_weather', response: { forecast: 'sun' } } },
        { text: 'and tomorrow?' },
      ],
    },
  ],
  tools: [
    {
      functionDeclarations: [
        { name: 'get_weather', description: 'Weather', parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
        { name: 'get_time' },
      ],
    },
  ],
  toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } },
  generationConfig: {
    temperature: 0.4,
    topP: 0.9,
    maxOutputTokens: 9000, // above the thinking budget, which it counts
    stopSequences: ['END'],
    candidateCount: 2,
    presencePenalty: 0.1,
    frequencyPenalty: 0.2,
    seed: 3,
    responseMimeType: 'application/json',
    responseJsonSchema: { type: 'object', properties: { a: { type: 'string' } } },
    thinkingConfig: { thinkingBudget: 8192, includeThoughts: true },
  },
};

describe('gemini round trips (X -> canonical -> X)', () => {
  it('a generateContent request comes back as it was, without losses', () => {
    const canonical = toCanonicalRequest(request, 'gemini-2.5-flash', false);
    expect(canonical.losses).to.deep.equal([]);
    const back = fromCanonicalRequest(canonical.value);
    expect(back.losses).to.deep.equal([]);
    // ANY with one allowed name narrows the tools offered: the other declaration is not sent on.
    const expected = structuredClone(request);
    expected.tools[0].functionDeclarations = [expected.tools[0].functionDeclarations[0]];
    expect(back.value).to.deep.equal(expected);
  });

  it('a function response without an id gets the id of its call, by name and order, both ways', () => {
    const body = {
      contents: [
        { role: 'user', parts: [{ text: 'go' }] },
        { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }] },
        { role: 'user', parts: [{ functionResponse: { name: 'f', response: { ok: 1 } } }] },
      ],
    };
    const back = fromCanonicalRequest(toCanonicalRequest(body, 'm', false).value).value as Json;
    const id = back.contents[1].parts[0].functionCall.id;
    expect(id).to.be.a('string').and.not.equal('');
    expect(back.contents[2].parts[0].functionResponse).to.deep.equal({ id, name: 'f', response: { ok: 1 } });
  });

  it('reasoning effort -> thinking budget -> reasoning effort is the identity', () => {
    for (const effort of ['none', 'minimal', 'low', 'medium', 'high']) {
      expect(effortForThinking({ thinkingBudget: budgetForEffort(effort) })).to.equal(effort);
    }
  });

  it('a canonical answer -> GenerateContentResponse -> canonical answer is the identity', () => {
    const answer: ChatResponse = {
      id: 'resp-1',
      object: 'chat.completion',
      created: 1,
      model: 'gemini-2.5-flash',
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: 'Here.',
            reasoning_content: 'hmm',
            tool_calls: [{ id: 'c9', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
          },
          finish_reason: 'tool_calls',
        },
        { index: 1, message: { role: 'assistant', content: 'cut' }, finish_reason: 'length' },
      ],
      usage: { prompt_tokens: 20, completion_tokens: 15, total_tokens: 35, prompt_tokens_details: { cached_tokens: 4 }, completion_tokens_details: { reasoning_tokens: 5 } },
    };
    const gemini = toGenerateContentResponse(answer, { includeThoughts: true });
    expect(gemini.losses).to.deep.equal([]);
    const back = fromGenerateContentResponse(gemini.value);
    expect(back.losses).to.deep.equal([]);
    expect({ ...back.value, created: 1 }).to.deep.equal(answer);
  });

  it('a GenerateContentResponse -> canonical -> GenerateContentResponse is the identity', () => {
    const response = {
      candidates: [
        {
          content: { role: 'model', parts: [{ text: 'thinking', thought: true }, { text: 'Hi' }, { functionCall: { id: 'x1', name: 'g', args: { q: [1, 2] } } }] },
          finishReason: 'STOP',
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 4, totalTokenCount: 16, cachedContentTokenCount: 2, thoughtsTokenCount: 3 },
      modelVersion: 'gemini-2.5-pro',
      responseId: 'abc',
    };
    const canonical = fromGenerateContentResponse(response);
    expect(canonical.value.choices[0]!.finish_reason).to.equal('tool_calls');
    expect(toGenerateContentResponse(canonical.value, { includeThoughts: true }).value).to.deep.equal(response);
  });

  it('what a canonical request cannot give Gemini is named', () => {
    const back = fromCanonicalRequest({
      model: 'm',
      messages: [{ role: 'user', content: 'x' }],
      logit_bias: { '1': 2 },
      user: 'u',
      reasoning_effort: 'turbo',
      response_format: { type: 'grammar' },
    });
    expect(back.losses).to.deep.equal(['response_format.grammar', 'reasoning_effort.turbo', 'logit_bias', 'user']);
  });

  it('an audio answer or an unknown finish reason from Gemini is a named loss', () => {
    const canonical = fromGenerateContentResponse({
      candidates: [{ content: { role: 'model', parts: [{ inlineData: { mimeType: 'audio/wav', data: 'AA' } }] }, finishReason: 'MALFORMED_FUNCTION_CALL' }],
    });
    expect(canonical.losses).to.deep.equal(['parts.inlineData', 'finishReason.MALFORMED_FUNCTION_CALL']);
    expect(canonical.value.choices[0]!.finish_reason).to.equal('stop');
  });

  it('an image answer with a thought signature comes back unchanged (images, reasoning_signature)', () => {
    const answer = {
      candidates: [
        {
          content: {
            role: 'model',
            parts: [
              { text: 'planning', thought: true },
              { text: 'Here it is.', thoughtSignature: 'c2lnLTE=' },
              { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
            ],
          },
          finishReason: 'STOP',
          index: 0,
        },
      ],
      usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 1290, totalTokenCount: 1295 },
      modelVersion: 'gemini-2.5-flash-image',
      responseId: 'abc',
    };
    const canonical = fromGenerateContentResponse(answer);
    expect(canonical.losses).to.deep.equal([]);
    expect(canonical.value.choices[0]!.message).to.deep.include({
      reasoning_signature: 'c2lnLTE=',
      images: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }],
    });
    const back = toGenerateContentResponse(canonical.value, { includeThoughts: true });
    expect(back.losses).to.deep.equal([]);
    expect(back.value).to.deep.equal(answer);
  });

  it('a request turn with an image and a signature on its first call comes back unchanged', () => {
    const body = {
      contents: [
        { role: 'user', parts: [{ text: 'draw and call' }] },
        {
          role: 'model',
          parts: [
            { text: 'ok' },
            { inlineData: { mimeType: 'image/png', data: 'AAAA' } },
            { functionCall: { id: 'c1', name: 'f', args: { a: 1 } }, thoughtSignature: 'sig' },
            { functionCall: { id: 'c2', name: 'f', args: { a: 2 } } },
          ],
        },
        { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'f', response: { ok: true } } }, { functionResponse: { id: 'c2', name: 'f', response: { ok: false } } }] },
      ],
      tools: [{ functionDeclarations: [{ name: 'f', parametersJsonSchema: { type: 'object' } }] }],
      generationConfig: { responseModalities: ['TEXT', 'IMAGE'] },
    };
    const canonical = toCanonicalRequest(structuredClone(body), 'm', false);
    expect(canonical.losses).to.deep.equal([]);
    const back = fromCanonicalRequest(canonical.value);
    expect(back.losses).to.deep.equal([]);
    expect(back.value).to.deep.equal(body);
  });
});

describe('gemini stream round trip (streamGenerateContent events -> canonical chunks -> events)', () => {
  it('thoughts, text with its signature, an image, parallel calls, finish and usage come back as they went', async () => {
    const base = { modelVersion: 'gemini-x', responseId: 'r1' };
    const event = (parts: Json[], extra: Json = {}) => ({ candidates: [{ content: { role: 'model', parts }, index: 0, ...extra }], ...base });
    const usage = { promptTokenCount: 9, candidatesTokenCount: 30, thoughtsTokenCount: 4, totalTokenCount: 43, cachedContentTokenCount: 5 };
    const sent = [
      event([{ text: 'think', thought: true }]),
      event([{ text: 'ing', thought: true }]),
      event([{ text: 'Here', thoughtSignature: 'c2ln' }]),
      event([{ text: ' you go.' }]),
      event([{ inlineData: { mimeType: 'image/png', data: 'AAAA' } }]),
      event([{ functionCall: { id: 'a', name: 'f', args: { x: 1 } } }, { functionCall: { id: 'b', name: 'f', args: { x: 2 } } }]),
      { ...event([{ text: '' }], { finishReason: 'STOP' }), usageMetadata: usage },
    ];
    const losses = new Losses();
    const translator = new GenerateContentStreamTranslator(losses);
    const chunks = sent.flatMap((e) => translator.push(structuredClone(e)));
    expect(translator.complete).to.equal(true);
    chunks.push(...translator.end());
    async function* source() {
      yield* chunks;
    }
    let text = '';
    for await (const piece of generateContentEvents(source(), { view: { includeThoughts: true }, losses })) text += piece;
    const back = text.split('\r\n\r\n').filter(Boolean).map((frame) => JSON.parse(frame.replace(/^data: /, '')) as Json);
    expect(losses.names).to.deep.equal([]);
    const partsOf = (events: Json[]) => events.flatMap((e) => e.candidates[0].content.parts as Json[]).filter((p) => p.text !== '' || p.thoughtSignature);
    expect(partsOf(back)).to.deep.equal(partsOf(sent));
    const last = back[back.length - 1]!;
    expect(last.candidates[0].finishReason).to.equal('STOP');
    expect(last.usageMetadata).to.deep.equal(usage);
    expect(back.every((e) => e.modelVersion === 'gemini-x')).to.equal(true);
  });
});
