import { expect } from 'chai';
import type { ChatResponse } from '../../../core/index.js';
import { errorBody, googleStatus, streamError } from './errors.js';
import { Losses } from '../anthropic-messages/request.js';
import { canonicalFinish, chatUsage, finishReasonOf, toGenerateContentResponse, usageMetadata } from './response.js';

function answer(message: Record<string, unknown>, finish: ChatResponse['choices'][0]['finish_reason'] = 'stop', usage?: ChatResponse['usage']): ChatResponse {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'gpt-x',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    ...(usage ? { usage } : {}),
  };
}

describe('canonical chat answer -> gemini GenerateContentResponse', () => {
  it('text, STOP, usage, modelVersion and responseId', () => {
    const { value, losses } = toGenerateContentResponse(answer({ content: 'hi' }, 'stop', { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 }), { includeThoughts: false });
    expect(value).to.deep.equal({
      candidates: [{ content: { role: 'model', parts: [{ text: 'hi' }] }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, totalTokenCount: 7 },
      modelVersion: 'gpt-x',
      responseId: 'chatcmpl-1',
    });
    expect(losses).to.deep.equal([]);
  });

  it('tool calls become functionCall parts with parsed args (a call ends with STOP, as Gemini does)', () => {
    const { value, losses } = toGenerateContentResponse(
      answer({ content: null, tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } },
        { id: 'call_2', type: 'function', function: { name: 'g', arguments: 'not json' } },
      ] }, 'tool_calls'),
      { includeThoughts: false },
    );
    const candidate = (value.candidates as any[])[0];
    expect(candidate.content.parts).to.deep.equal([
      { functionCall: { id: 'call_1', name: 'f', args: { a: 1 } } },
      { functionCall: { id: 'call_2', name: 'g', args: {} } },
    ]);
    expect(candidate.finishReason).to.equal('STOP');
    expect(losses).to.deep.equal(['functionCall.args_not_json_object']);
  });

  it('reasoning is a thought part only when includeThoughts asked for it', () => {
    const response = answer({ content: 'x', reasoning_content: 'because' });
    expect((toGenerateContentResponse(response, { includeThoughts: true }).value.candidates as any[])[0].content.parts).to.deep.equal([
      { text: 'because', thought: true },
      { text: 'x' },
    ]);
    expect((toGenerateContentResponse(response, { includeThoughts: false }).value.candidates as any[])[0].content.parts).to.deep.equal([{ text: 'x' }]);
  });

  it('several choices are several candidates; a refusal is SAFETY', () => {
    const response = answer({ content: 'a' });
    response.choices.push({ index: 1, message: { role: 'assistant', content: null, refusal: 'no' }, finish_reason: 'stop' });
    const candidates = toGenerateContentResponse(response, { includeThoughts: false }).value.candidates as any[];
    expect(candidates.map((c) => [c.index, c.content.parts[0].text, c.finishReason])).to.deep.equal([
      [0, 'a', 'STOP'],
      [1, 'no', 'SAFETY'],
    ]);
  });

  it('finish reasons', () => {
    expect(finishReasonOf('stop')).to.equal('STOP');
    expect(finishReasonOf('length')).to.equal('MAX_TOKENS');
    expect(finishReasonOf('content_filter')).to.equal('SAFETY');
    expect(finishReasonOf('tool_calls')).to.equal('STOP');
    expect(finishReasonOf(null)).to.equal('STOP');
  });

  it("Gemini's finish reasons read: every safety or recitation stop (images' too) is content_filter, a token limit length; another is stop, named", () => {
    const read = (reason: string) => {
      const losses = new Losses();
      return [canonicalFinish(reason, false, losses), ...losses.names];
    };
    for (const reason of ['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION']) expect(read(reason), reason).to.deep.equal(['content_filter']);
    expect(read('MAX_TOKENS')).to.deep.equal(['length']);
    expect(read('CONTINUATION')).to.deep.equal(['length', 'finishReason.CONTINUATION']);
    expect(read('STOP')).to.deep.equal(['stop']);
    expect(read('MALFORMED_FUNCTION_CALL')).to.deep.equal(['stop', 'finishReason.MALFORMED_FUNCTION_CALL']);
  });

  it('usage: thoughts counted apart from candidates, cached tokens named', () => {
    expect(
      usageMetadata({ prompt_tokens: 100, completion_tokens: 50, total_tokens: 150, prompt_tokens_details: { cached_tokens: 40 }, completion_tokens_details: { reasoning_tokens: 30 } }),
    ).to.deep.equal({ promptTokenCount: 100, candidatesTokenCount: 20, totalTokenCount: 150, cachedContentTokenCount: 40, thoughtsTokenCount: 30 });
    expect(usageMetadata(undefined)).to.deep.equal({ promptTokenCount: 0, candidatesTokenCount: 0, totalTokenCount: 0 });
  });
});

describe('gemini errors', () => {
  const view = (status: number, code = 'invalid_request', type = 'invalid_request_error') => ({ status, code, type, message: 'm', param: null }) as any;

  it('statuses map to google.rpc names', () => {
    const cases: Array<[number, string]> = [
      [400, 'INVALID_ARGUMENT'],
      [401, 'UNAUTHENTICATED'],
      [403, 'PERMISSION_DENIED'],
      [404, 'NOT_FOUND'],
      [413, 'INVALID_ARGUMENT'],
      [429, 'RESOURCE_EXHAUSTED'],
      [500, 'INTERNAL'],
      [502, 'UNAVAILABLE'],
      [503, 'UNAVAILABLE'],
      [504, 'DEADLINE_EXCEEDED'],
      [508, 'INTERNAL'],
    ];
    for (const [status, name] of cases) expect(googleStatus(view(status)), String(status)).to.equal(name);
  });

  it('body and stream event', () => {
    expect(errorBody(view(404, 'model_not_found'))).to.deep.equal({ error: { code: 404, message: 'm', status: 'NOT_FOUND' } });
    expect(streamError(view(502, 'upstream_error', 'api_error'))).to.equal('data: {"error":{"code":502,"message":"m","status":"UNAVAILABLE"}}\r\n\r\n');
    expect((errorBody(view(401, 'missing_api_key', 'authentication_error')) as any).error.message).to.contain('x-goog-api-key');
  });
});

describe('gemini usageMetadata -> canonical usage', () => {
  it('an empty usageMetadata says nothing (metering counts the call); a zero Gemini leaves out is 0', () => {
    expect(chatUsage({})).to.equal(undefined);
    expect(chatUsage({ totalTokenCount: 50 })).to.equal(undefined);
    expect(chatUsage({ promptTokenCount: 5 })).to.deep.equal({ prompt_tokens: 5, completion_tokens: 0, total_tokens: 5 });
    expect(chatUsage({ promptTokenCount: 5, candidatesTokenCount: 3, totalTokenCount: 8 })).to.deep.include({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
  });
});
