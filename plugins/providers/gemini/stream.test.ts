import { expect } from 'chai';
import { GatewayError } from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { endpointOf, methodPath } from './api.js';
import { GenerateContentStreamTranslator } from './stream.js';

type Json = Record<string, any>;

describe('gemini provider: stream translation', () => {
  it('names the routed model until the back end names its own (modelVersion)', () => {
    const t = new GenerateContentStreamTranslator(new Losses(), [], 'gemini-routed');
    const first = t.push({ responseId: 'r1', candidates: [{ index: 0, content: { parts: [{ text: 'a' }] } }] });
    expect(first[0]!.model).to.equal('gemini-routed');
    const second = t.push({ responseId: 'r1', modelVersion: 'gemini-2.5-flash-001', candidates: [{ index: 0, content: { parts: [{ text: 'b' }] }, finishReason: 'STOP' }] });
    expect(second[0]!.model).to.equal('gemini-2.5-flash-001');
  });

  it('two candidates, thoughts, a call with its own id and one without, finish per candidate, usage last', () => {
    const losses = new Losses();
    const t = new GenerateContentStreamTranslator(losses);
    const base = { responseId: 'r1', modelVersion: 'gemini-x' };
    const out: Json[] = [
      ...t.push({ ...base, candidates: [{ index: 0, content: { parts: [{ text: 'hm', thought: true, thoughtSignature: 'sig' }] } }, { index: 1, content: { parts: [{ text: 'B' }] } }] }),
      ...t.push({ ...base, candidates: [{ index: 0, content: { parts: [{ functionCall: { id: 'own', name: 'f', args: { a: 1 } } }, { functionCall: { name: 'g' } }] }, finishReason: 'STOP' }] }),
    ];
    expect(t.complete).to.equal(false);
    out.push(...t.push({ ...base, candidates: [{ index: 1, finishReason: 'MAX_TOKENS' }], usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, thoughtsTokenCount: 1, totalTokenCount: 6 } }));
    expect(t.complete).to.equal(true);
    out.push(...t.end());
    // A call without an id gets a made-up one, unique (as OpenAI's are), not numbered per answer.
    const made = out[2]!.choices[0].delta.tool_calls[1].id as string;
    expect(made).to.match(/^call_[A-Za-z0-9_-]{16}$/);
    expect(out.map((c) => c.choices)).to.deep.equal([
      [{ index: 0, delta: { role: 'assistant', reasoning_content: 'hm', reasoning_signature: 'sig' }, finish_reason: null }],
      [{ index: 1, delta: { role: 'assistant', content: 'B' }, finish_reason: null }],
      [
        {
          index: 0,
          delta: {
            tool_calls: [
              { index: 0, id: 'own', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
              { index: 1, id: made, type: 'function', function: { name: 'g', arguments: '{}' } },
            ],
          },
          finish_reason: null,
        },
      ],
      // The finish in a chunk of its own, after the calls' deltas, as OpenAI sends it.
      [{ index: 0, delta: {}, finish_reason: 'tool_calls' }],
      [{ index: 1, delta: {}, finish_reason: 'length' }],
      [],
    ]);
    const again = new GenerateContentStreamTranslator(new Losses()).push({ ...base, candidates: [{ index: 0, content: { parts: [{ functionCall: { name: 'g' } }] } }] });
    expect(again[0]!.choices[0]!.delta.tool_calls![0]!.id).to.not.equal(made);
    expect(out.every((c) => c.id === 'r1' && c.model === 'gemini-x' && c.object === 'chat.completion.chunk')).to.equal(true);
    expect(out[out.length - 1]!.usage).to.deep.equal({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6, completion_tokens_details: { reasoning_tokens: 1 } });
    expect(losses.names).to.deep.equal([]);
  });

  it('image parts become images (data: URLs); a thought signature is passed on once, a different one is a loss', () => {
    const losses = new Losses();
    const t = new GenerateContentStreamTranslator(losses);
    const out = [
      ...t.push({ candidates: [{ index: 0, content: { parts: [{ text: 'Here', thoughtSignature: 's1' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] } }] }),
      ...t.push({ candidates: [{ index: 0, content: { parts: [{ text: '!', thoughtSignature: 's1' }, { inlineData: { mimeType: 'audio/wav', data: 'AA' }, thoughtSignature: 's2' }] }, finishReason: 'STOP' }] }),
    ];
    expect(out.map((c) => c.choices[0]!.delta)).to.deep.equal([
      { role: 'assistant', reasoning_signature: 's1', content: 'Here', images: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
      { content: '!' },
      {}, // the finish's own chunk
    ]);
    expect(losses.names).to.deep.equal(['parts.inlineData', 'parts.thoughtSignature.extra']);
  });

  it('a blocked prompt (promptFeedback, no candidates) finishes with content_filter and names the loss', () => {
    const losses = new Losses();
    const t = new GenerateContentStreamTranslator(losses);
    const out = t.push({ promptFeedback: { blockReason: 'SAFETY' } });
    expect(out[0]!.choices[0]!.finish_reason).to.equal('content_filter');
    expect(t.complete).to.equal(true);
    expect(losses.names).to.deep.equal(['promptFeedback.blockReason.SAFETY']);
  });

  it('an error event keeps its kind (rate limited, overloaded, failed) with its message scrubbed of secrets; not an object is malformed', () => {
    const failureOf = (error: Record<string, unknown>) => {
      const t = new GenerateContentStreamTranslator(new Losses(), ['AIza-secret']);
      try {
        t.push({ error });
      } catch (e) {
        return e as GatewayError;
      }
      throw new Error('no failure');
    };
    const overloaded = failureOf({ code: 503, message: 'overloaded AIza-secret', status: 'UNAVAILABLE' });
    expect(overloaded).to.be.instanceOf(GatewayError);
    expect([overloaded.code, overloaded.status, overloaded.retryable]).to.deep.equal(['upstream_overloaded', 503, true]);
    expect(overloaded.message).to.include("stream failed: overloaded").and.not.include('AIza-secret');
    const limited = failureOf({ code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' });
    expect([limited.code, limited.status, limited.retryable]).to.deep.equal(['upstream_rate_limited', 429, true]);
    const internal = failureOf({ code: 500, message: 'oops', status: 'INTERNAL' });
    expect([internal.code, internal.retryable]).to.deep.equal(['upstream_error', true]);
    const invalid = failureOf({ code: 400, message: 'bad', status: 'INVALID_ARGUMENT' });
    expect([invalid.code, invalid.retryable]).to.deep.equal(['upstream_error', false]);
    expect(() => new GenerateContentStreamTranslator(new Losses(), []).push([1])).to.throw(GatewayError);
  });

  it('paths: the base path kept, a trailing /v1beta dropped, the model encoded, the key never in the URL', () => {
    const e = endpointOf({ id: 'g', type: 'gemini', models: [], baseUrl: 'https://proxy.example/google/v1beta/', apiKey: 'AIza-k', headers: { Authorization: 'x', 'X-Extra': 'y' } });
    expect(e.origin).to.equal('https://proxy.example');
    expect(methodPath(e, 'gemini-2.5-flash', false)).to.equal('/google/v1beta/models/gemini-2.5-flash:generateContent');
    expect(methodPath(e, 'models/a b', true)).to.equal('/google/v1beta/models/a%20b:streamGenerateContent?alt=sse');
    expect(e.headers).to.deep.include({ 'x-goog-api-key': 'AIza-k', 'x-extra': 'y' });
    expect(e.headers.authorization).to.equal(undefined);
  });
});
