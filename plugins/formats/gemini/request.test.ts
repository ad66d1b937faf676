import { expect } from 'chai';
import { effortForThinking, fromCanonicalRequest, normaliseSchema, requestView, toCanonicalRequest, lowerCaseTypes } from './request.js';
import { chatUsage } from './response.js';

type Json = Record<string, any>;

const user = (text: string) => ({ role: 'user', parts: [{ text }] });

describe('gemini request -> canonical chat', () => {
  it('contents, roles and systemInstruction', () => {
    const { value, losses } = toCanonicalRequest(
      { systemInstruction: { parts: [{ text: 'Be brief.' }, { text: 'Be kind.' }] }, contents: [user('hi'), { role: 'model', parts: [{ text: 'hello' }] }, user('bye')] },
      'gemini-2.5-flash',
      false,
    );
    expect(value).to.deep.equal({
      model: 'gemini-2.5-flash',
      messages: [
        { role: 'system', content: 'Be brief.\nBe kind.' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
        { role: 'user', content: 'bye' },
      ],
    });
    expect(losses).to.deep.equal([]);
  });

  it("consecutive model contents (a streamed answer, one per chunk) are one assistant turn", () => {
    const { value } = toCanonicalRequest(
      {
        contents: [
          user('hi'),
          { role: 'model', parts: [{ text: 'Hel' }] },
          { role: 'model', parts: [{ text: 'lo' }] },
          { role: 'model', parts: [{ text: '' }] },
          user('weather?'),
          { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'get_weather', args: { city: 'Oslo' } } }] },
          { role: 'model', parts: [{ text: '' }] },
          { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'get_weather', response: { t: 3 } } }] },
        ],
      },
      'm',
      false,
    );
    expect(value.messages).to.deep.equal([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'Hello' },
      { role: 'user', content: 'weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: '{"t":3}' },
    ]);
  });

  it('a stream asks the back end for usage', () => {
    const { value } = toCanonicalRequest({ contents: [user('x')] }, 'm', true);
    expect(value).to.deep.include({ stream: true, stream_options: { include_usage: true } });
  });

  it('inlineData images become data: URLs, http fileData a URL, PDFs files, WAV and MP3 input_audio, text text; other media are losses', () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [
          {
            role: 'user',
            parts: [
              { text: 'look' },
              { inlineData: { mimeType: 'image/jpeg', data: 'AAAA' } },
              { fileData: { mimeType: 'image/png', fileUri: 'https://example.com/a.png' } },
              { inlineData: { mimeType: 'application/pdf', data: 'JVBE' } },
              { inlineData: { mimeType: 'audio/wav', data: 'UklG' } },
              { inlineData: { mimeType: 'audio/mpeg', data: 'SUQz' } },
              { inlineData: { mimeType: 'text/plain', data: Buffer.from('notes: héllo').toString('base64') } },
              { inlineData: { mimeType: 'audio/ogg', data: 'T2dn' } },
              { inlineData: { mimeType: 'video/mp4', data: 'AAAA' } },
              { fileData: { mimeType: 'image/png', fileUri: 'gs://bucket/a.png' } },
            ],
          },
        ],
      },
      'm',
      false,
    );
    expect(value.messages).to.deep.equal([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'look' },
          { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,AAAA' } },
          { type: 'image_url', image_url: { url: 'https://example.com/a.png' } },
          { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBE' } },
          { type: 'input_audio', input_audio: { data: 'UklG', format: 'wav' } },
          { type: 'input_audio', input_audio: { data: 'SUQz', format: 'mp3' } },
          { type: 'text', text: 'notes: héllo' },
        ],
      },
    ]);
    expect(losses).to.deep.equal(['inlineData.audio', 'inlineData.video', 'fileData.uri']);
  });

  it('a YouTube video named by fileData without a MIME type is the loss fileData.video, not an image URL for another back end', () => {
    const { value, losses } = toCanonicalRequest(
      { contents: [{ role: 'user', parts: [{ fileData: { fileUri: 'https://www.youtube.com/watch?v=9hE5-98ZeCg' } }, { text: 'Summarise the video' }] }] },
      'm',
      false,
    );
    expect(value.messages).to.deep.equal([{ role: 'user', content: 'Summarise the video' }]);
    expect(losses).to.deep.equal(['fileData.video']);
    // A Files API upload (what ai.files.upload() returns), an image or not: Google's alone.
    for (const mimeType of ['image/png', 'application/pdf', undefined]) {
      const file = toCanonicalRequest(
        { contents: [{ role: 'user', parts: [{ text: 'x' }, { fileData: { fileUri: 'https://generativelanguage.googleapis.com/v1beta/files/abc123', ...(mimeType ? { mimeType } : {}) } }] }] },
        'm',
        false,
      );
      expect(file.value.messages, String(mimeType)).to.deep.equal([{ role: 'user', content: 'x' }]);
      expect(file.losses, String(mimeType)).to.deep.equal(['fileData.uri']);
    }
    // Another page without a MIME type is still taken for an image.
    const image = toCanonicalRequest({ contents: [{ role: 'user', parts: [{ fileData: { fileUri: 'https://example.com/cat' } }] }] }, 'm', false);
    expect((image.value.messages[0]!.content as Array<{ type: string }>)[0]!.type).to.equal('image_url');
  });

  it('canonical -> Gemini: a data URL with parameters before ;base64 goes inline, its type lower-cased (image/jpg as image/jpeg)', () => {
    const { value } = fromCanonicalRequest({
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;name=s.png;base64,AAAA' } }, { type: 'image_url', image_url: { url: 'data:IMAGE/JPG;base64,BBBB' } }] }],
    });
    expect((value.contents as Array<{ parts: unknown[] }>)[0]!.parts).to.deep.equal([{ inlineData: { mimeType: 'image/png', data: 'AAAA' } }, { inlineData: { mimeType: 'image/jpeg', data: 'BBBB' } }]);
  });

  it('canonical -> Gemini: a chat client\'s input_audio goes inline with its MIME type', () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'transcribe' }, { type: 'input_audio', input_audio: { data: 'UklG', format: 'wav' } }, { type: 'input_audio', input_audio: { data: 'SUQz', format: 'mp3' } }] }],
    });
    expect((value.contents as Array<{ parts: unknown[] }>)[0]!.parts).to.deep.equal([
      { text: 'transcribe' },
      { inlineData: { mimeType: 'audio/wav', data: 'UklG' } },
      { inlineData: { mimeType: 'audio/mpeg', data: 'SUQz' } },
    ]);
    expect(losses).to.deep.equal([]);
  });

  it("a failed call's functionResponse (an `error`, no `output`) is a tool message marked tool_error; a tool_error goes to Gemini under `error`", () => {
    const { value } = toCanonicalRequest(
      {
        contents: [
          user('go'),
          { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'a', args: {} } }, { functionCall: { id: 'c2', name: 'b', args: {} } }] },
          { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'a', response: { error: 'tz db missing' } } }, { functionResponse: { id: 'c2', name: 'b', response: { output: 'ok' } } }] },
        ],
      },
      'm',
      false,
    );
    expect(value.messages.slice(2)).to.deep.equal([
      { role: 'tool', tool_call_id: 'c1', content: '{"error":"tz db missing"}', tool_error: true },
      { role: 'tool', tool_call_id: 'c2', content: '{"output":"ok"}' },
    ]);
    const back = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'a', arguments: '{}' } }, { id: 'c2', type: 'function', function: { name: 'b', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'tz db missing', tool_error: true },
        { role: 'tool', tool_call_id: 'c2', content: '{"error":{"code":5}}', tool_error: true },
      ],
    }).value;
    expect((back.contents as Array<{ parts: Array<{ functionResponse: { response: unknown } }> }>)[2]!.parts.map((p) => p.functionResponse.response)).to.deep.equal([
      { error: 'tz db missing' },
      { error: { code: 5 } },
    ]);
  });

  it('functionCall / functionResponse: ids made and matched by name and order; given ids kept', () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [
          user('go'),
          {
            role: 'model',
            parts: [
              { functionCall: { name: 'a', args: { n: 1 } } },
              { functionCall: { name: 'b', args: {} } },
              { functionCall: { name: 'a', args: { n: 2 } } },
              { functionCall: { id: 'given', name: 'c' } },
            ],
          },
          {
            role: 'user',
            parts: [
              { functionResponse: { name: 'b', response: { ok: true } } },
              { functionResponse: { name: 'a', response: { r: 1 } } },
              { functionResponse: { name: 'a', response: { r: 2 } } },
              { functionResponse: { id: 'given', name: 'c', response: {} } },
              { text: 'and now?' },
            ],
          },
        ],
      },
      'm',
      false,
    );
    const calls = value.messages[1]!.tool_calls!;
    expect(calls.map((c) => [c.function.name, c.function.arguments])).to.deep.equal([
      ['a', '{"n":1}'],
      ['b', '{}'],
      ['a', '{"n":2}'],
      ['c', '{}'],
    ]);
    expect(new Set(calls.map((c) => c.id)).size).to.equal(4);
    expect(calls[3]!.id).to.equal('given');
    expect(value.messages.slice(2)).to.deep.equal([
      { role: 'tool', tool_call_id: calls[1]!.id, content: '{"ok":true}' },
      { role: 'tool', tool_call_id: calls[0]!.id, content: '{"r":1}' },
      { role: 'tool', tool_call_id: calls[2]!.id, content: '{"r":2}' },
      { role: 'tool', tool_call_id: 'given', content: '{}' },
      { role: 'user', content: 'and now?' },
    ]);
    expect(losses).to.deep.equal([]);
  });

  it('a functionResponse with no call to answer is a loss', () => {
    const { value, losses } = toCanonicalRequest({ contents: [{ role: 'user', parts: [{ functionResponse: { name: 'x', response: {} } }] }] }, 'm', false);
    expect(value.messages[0]).to.deep.include({ role: 'tool', content: '{}' });
    expect(losses).to.deep.equal(['functionResponse.unmatched']);
  });

  it('thought parts of a model turn become reasoning_content, its thought signature reasoning_signature', () => {
    const { value, losses } = toCanonicalRequest(
      { contents: [user('q'), { role: 'model', parts: [{ text: 'hmm', thought: true }, { text: 'answer', thoughtSignature: 'sig' }] }, user('more')] },
      'm',
      false,
    );
    expect(value.messages[1]).to.deep.equal({ role: 'assistant', content: 'answer', reasoning_content: 'hmm', reasoning_signature: 'sig', reasoning_signature_by: 'gemini' });
    expect(losses).to.deep.equal([]);
  });

  it('a second, different signature in one turn is a loss; the first is kept', () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [
          user('q'),
          { role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, thoughtSignature: 's1' }, { functionCall: { name: 'g', args: {} }, thoughtSignature: 's2' }] },
        ],
      },
      'm',
      false,
    );
    expect(value.messages[1]!.reasoning_signature).to.equal('s1');
    expect(losses).to.deep.equal(['parts.thoughtSignature.extra']);
  });

  it("Google's sentinel signature (skip_thought_signature_validator, as Gemini CLI sends it) is no signature: nothing carried, nothing lost", () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [
          user('q'),
          { role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, thoughtSignature: 'skip_thought_signature_validator' }] },
          { role: 'user', parts: [{ functionResponse: { name: 'f', response: { ok: true } } }] },
        ],
      },
      'm',
      false,
    );
    expect(value.messages[1]).to.not.have.property('reasoning_signature');
    expect(losses).to.deep.equal([]);
    // The other placeholder Google's FAQ accepts.
    const other = toCanonicalRequest({ contents: [user('q'), { role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, thoughtSignature: 'context_engineering_is_the_way_to_go' }] }] }, 'm', false);
    expect(other.value.messages[1]).to.not.have.property('reasoning_signature');
  });

  it("a signature this gateway tagged goes back with its maker; two of another back end's in one turn vouch for neither", () => {
    const turn = (parts: Array<Record<string, unknown>>) => toCanonicalRequest({ contents: [user('q'), { role: 'model', parts }] }, 'm', false);
    const one = turn([{ text: 'first', thought: true }, { functionCall: { name: 'f', args: {} }, thoughtSignature: 'sy1.sig.anthropic.SIG_A' }]);
    expect(one.value.messages[1]).to.deep.include({ reasoning_content: 'first', reasoning_signature: 'SIG_A', reasoning_signature_by: 'anthropic' });
    expect(one.losses).to.deep.equal([]);
    // Interleaved thinking from a Claude back end: two blocks, each signed, one text here.
    const two = turn([
      { text: 'first', thought: true },
      { functionCall: { name: 'f', args: {} }, thoughtSignature: 'sy1.sig.anthropic.SIG_A' },
      { text: 'second', thought: true },
      { functionCall: { name: 'g', args: {} }, thoughtSignature: 'sy1.sig.anthropic.SIG_B' },
    ]);
    expect(two.value.messages[1]).to.not.have.any.keys('reasoning_signature', 'reasoning_signature_by');
    expect(two.losses).to.deep.equal(['parts.thoughtSignature.extra']);
  });

  it('an image the model made (inlineData in a model turn) goes back as the message images', () => {
    const { value, losses } = toCanonicalRequest(
      { contents: [user('draw'), { role: 'model', parts: [{ text: 'here' }, { inlineData: { mimeType: 'image/png', data: 'AAAA' } }] }, user('again')] },
      'm',
      false,
    );
    expect(value.messages[1]).to.deep.equal({ role: 'assistant', content: 'here', images: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] });
    expect(losses).to.deep.equal([]);
  });

  it('tools: declarations with upper-case OpenAPI types normalised; parametersJsonSchema as it is; server-side tools lost', () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [user('x')],
        tools: [
          {
            functionDeclarations: [
              {
                name: 'f',
                description: 'F',
                parameters: {
                  type: 'OBJECT',
                  properties: { a: { type: 'STRING', nullable: true }, b: { type: 'ARRAY', items: { type: 'INTEGER' } } },
                  required: ['a'],
                  propertyOrdering: ['a', 'b'],
                },
              },
              { name: 'g', parametersJsonSchema: { type: 'object', properties: { z: { type: 'number' } } } },
              { name: 'h' },
            ],
          },
          { googleSearch: {} },
        ],
      },
      'm',
      false,
    );
    expect(value.tools).to.deep.equal([
      {
        type: 'function',
        function: {
          name: 'f',
          description: 'F',
          parameters: { type: 'object', properties: { a: { type: ['string', 'null'] }, b: { type: 'array', items: { type: 'integer' } } }, required: ['a'] },
        },
      },
      { type: 'function', function: { name: 'g', parameters: { type: 'object', properties: { z: { type: 'number' } } } } },
      { type: 'function', function: { name: 'h', parameters: { type: 'object', properties: {} } } },
    ]);
    expect(losses).to.deep.equal(['tools.googleSearch']);
  });

  it("a JSON schema with Google's upper-case type names (Gemini CLI writes them so) goes up in JSON Schema's lower case; one without them as it is", () => {
    const upper = { type: 'OBJECT', properties: { complexity_score: { type: 'INTEGER' }, tags: { type: 'ARRAY', items: { type: 'STRING' } }, note: { type: ['STRING', 'NULL'] } }, required: ['complexity_score'] };
    const { value } = toCanonicalRequest(
      {
        contents: [user('x')],
        tools: [{ functionDeclarations: [{ name: 'f', parametersJsonSchema: upper }] }],
        generationConfig: { responseMimeType: 'application/json', responseJsonSchema: upper },
      },
      'm',
      false,
    );
    const lower = { type: 'object', properties: { complexity_score: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } }, note: { type: ['string', 'null'] } }, required: ['complexity_score'] };
    expect(value.tools![0]!.function.parameters).to.deep.equal(lower);
    expect((value.response_format as unknown as { json_schema: { schema: unknown } }).json_schema.schema).to.deep.equal(lower);
    // The client's object is not changed, and a schema already in lower case is sent as it is.
    expect(upper.type).to.equal('OBJECT');
    const plain = { type: 'object', properties: { z: { type: 'number' } } };
    expect(lowerCaseTypes(plain)).to.equal(plain);
  });

  const withTools = (toolConfig: Json) =>
    toCanonicalRequest(
      { contents: [user('x')], tools: [{ functionDeclarations: [{ name: 'a' }, { name: 'b' }, { name: 'c' }] }], toolConfig },
      'm',
      false,
    );

  it('functionCallingConfig modes -> tool_choice; ANY with allowed names narrows the tools', () => {
    expect(withTools({ functionCallingConfig: { mode: 'AUTO' } }).value.tool_choice).to.equal('auto');
    expect(withTools({ functionCallingConfig: { mode: 'NONE' } }).value.tool_choice).to.equal('none');
    expect(withTools({ functionCallingConfig: { mode: 'ANY' } }).value.tool_choice).to.equal('required');
    const one = withTools({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['b'] } }).value;
    expect(one.tool_choice).to.deep.equal({ type: 'function', function: { name: 'b' } });
    expect(one.tools!.map((t) => t.function.name)).to.deep.equal(['b']);
    const two = withTools({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['a', 'c'] } }).value;
    expect(two.tool_choice).to.equal('required');
    expect(two.tools!.map((t) => t.function.name)).to.deep.equal(['a', 'c']);
    const validated = withTools({ functionCallingConfig: { mode: 'VALIDATED' } });
    expect(validated.value.tool_choice).to.equal('auto');
    expect(validated.losses).to.deep.equal(['toolConfig.functionCallingConfig.mode.VALIDATED']);
  });

  it('no tool_choice without tools', () => {
    const { value } = toCanonicalRequest({ contents: [user('x')], toolConfig: { functionCallingConfig: { mode: 'ANY' } } }, 'm', false);
    expect(value).to.not.have.property('tool_choice');
  });

  it('generationConfig -> sampling fields (topK as top_k), stop, n, response_format, reasoning_effort; responseLogprobs and the like are losses', () => {
    const { value, losses } = toCanonicalRequest(
      {
        contents: [user('x')],
        generationConfig: {
          temperature: 0.5,
          topP: 0.8,
          topK: 40,
          maxOutputTokens: 100,
          stopSequences: ['END'],
          candidateCount: 2,
          presencePenalty: 0.1,
          frequencyPenalty: 0.2,
          seed: 7,
          responseMimeType: 'application/json',
          responseSchema: { type: 'OBJECT', properties: { a: { type: 'STRING' } } },
          thinkingConfig: { thinkingBudget: 20000, includeThoughts: true },
          responseLogprobs: true,
        },
        safetySettings: [{ category: 'HARM_CATEGORY_HATE_SPEECH', threshold: 'BLOCK_NONE' }],
        cachedContent: 'cachedContents/abc',
      },
      'm',
      false,
    );
    expect(value).to.deep.include({
      temperature: 0.5,
      top_p: 0.8,
      max_tokens: 100,
      stop: ['END'],
      n: 2,
      presence_penalty: 0.1,
      frequency_penalty: 0.2,
      seed: 7,
      reasoning_effort: 'high',
      // An optional property: OpenAI's strict mode would refuse the schema, so it is not asked for.
      response_format: { type: 'json_schema', json_schema: { name: 'response', schema: { type: 'object', properties: { a: { type: 'string' } } }, strict: false } },
    });
    expect(losses).to.have.members(['generationConfig.responseLogprobs', 'safetySettings', 'cachedContent', 'generationConfig.thinkingConfig.thinkingBudget']);
    expect(value.top_k).to.equal(40);
  });

  it('JSON without a schema is json_object; other MIME types are losses', () => {
    expect(toCanonicalRequest({ contents: [user('x')], generationConfig: { responseMimeType: 'application/json' } }, 'm', false).value.response_format).to.deep.equal({
      type: 'json_object',
    });
    const enumType = toCanonicalRequest({ contents: [user('x')], generationConfig: { responseMimeType: 'text/x.enum' } }, 'm', false);
    expect(enumType.value).to.not.have.property('response_format');
    expect(enumType.losses).to.deep.equal(['generationConfig.responseMimeType.text/x.enum']);
  });

  it("canonical -> Gemini: chat's allowed_tools: a required call is ANY with the allowed names, all tools declared; auto declares only the allowed ones", () => {
    const tools = ['a', 'b', 'c'].map((name) => ({ type: 'function' as const, function: { name, parameters: { type: 'object' } } }));
    const allowed = (mode: string) => ({ type: 'allowed_tools', allowed_tools: { mode, tools: [{ type: 'function', function: { name: 'a' } }, { type: 'function', function: { name: 'c' } }] } });
    const required = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools, tool_choice: allowed('required') });
    expect(required.value.toolConfig).to.deep.equal({ functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['a', 'c'] } });
    expect((required.value.tools as Array<{ functionDeclarations: Array<{ name: string }> }>)[0]!.functionDeclarations.map((d) => d.name)).to.deep.equal(['a', 'b', 'c']);
    expect(required.losses).to.deep.equal([]);
    const auto = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools, tool_choice: allowed('auto') });
    expect(auto.value.toolConfig).to.deep.equal({ functionCallingConfig: { mode: 'AUTO' } });
    expect((auto.value.tools as Array<{ functionDeclarations: Array<{ name: string }> }>)[0]!.functionDeclarations.map((d) => d.name)).to.deep.equal(['a', 'c']);
    expect(auto.losses).to.deep.equal([]);
    // Naming none of the request's tools: every tool still declared, the choice named lost.
    const none = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], tools, tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'zz' } }] } } });
    expect((none.value.tools as Array<{ functionDeclarations: Array<{ name: string }> }>)[0]!.functionDeclarations.map((d) => d.name)).to.deep.equal(['a', 'b', 'c']);
    expect(none.losses).to.deep.equal(['tool_choice']);
  });

  it('top_k from a Claude-style client goes to Google as topK', () => {
    const { value, losses } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], top_k: 7 });
    expect((value.generationConfig as Record<string, unknown>).topK).to.equal(7);
    expect(losses).to.deep.equal([]);
  });

  it("more stop sequences than Google takes (five): the first five go, the loss is named; a generationConfig flag set to false asks for nothing", () => {
    const { value, losses } = fromCanonicalRequest({ model: 'm', messages: [{ role: 'user', content: 'x' }], stop: ['a', 'b', 'c', 'd', 'e', 'f'] });
    expect((value.generationConfig as Record<string, unknown>).stopSequences).to.deep.equal(['a', 'b', 'c', 'd', 'e']);
    expect(losses).to.include('stop.too_many');
    expect(toCanonicalRequest({ contents: [user('x')], generationConfig: { responseLogprobs: false } }, 'm', false).losses).to.deep.equal([]);
  });

  it("a schema Google holds the answer to goes to an OpenAI back end in strict mode when strict mode takes it", () => {
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false };
    const { value } = toCanonicalRequest({ contents: [user('x')], generationConfig: { responseMimeType: 'application/json', responseJsonSchema: schema } }, 'm', false);
    expect(value.response_format).to.deep.equal({ type: 'json_schema', json_schema: { name: 'response', schema, strict: true } });
  });

  it('responseModalities are carried as modalities (lower case); imageConfig is a loss', () => {
    const { value, losses } = toCanonicalRequest({ contents: [user('x')], generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '1:1' } } }, 'm', false);
    expect(value.modalities).to.deep.equal(['text', 'image']);
    expect(losses).to.deep.equal(['generationConfig.imageConfig']);
    // Text only is what every back end does anyway: nothing is asked.
    expect(toCanonicalRequest({ contents: [user('x')], generationConfig: { responseModalities: ['TEXT'] } }, 'm', false).value.modalities).to.equal(undefined);
  });

  it('thinking budget / level -> reasoning_effort', () => {
    expect(effortForThinking({ thinkingBudget: 0 })).to.equal('none');
    expect(effortForThinking({ thinkingBudget: -1 })).to.equal(undefined);
    expect(effortForThinking({ thinkingBudget: 512 })).to.equal('minimal');
    expect(effortForThinking({ thinkingBudget: 1024 })).to.equal('low');
    expect(effortForThinking({ thinkingBudget: 8192 })).to.equal('medium');
    expect(effortForThinking({ thinkingBudget: 16000 })).to.equal('high');
    expect(effortForThinking({ thinkingLevel: 'HIGH' })).to.equal('high');
    expect(effortForThinking({ includeThoughts: true })).to.equal(undefined);
  });

  it('requestView reads includeThoughts and whether images were asked for', () => {
    expect(requestView({ generationConfig: { thinkingConfig: { includeThoughts: true } } })).to.deep.equal({ includeThoughts: true, wantsImages: false });
    expect(requestView({})).to.deep.equal({ includeThoughts: false, wantsImages: false });
    expect(requestView({ generationConfig: { responseModalities: ['TEXT', 'image'] } })).to.deep.equal({ includeThoughts: false, wantsImages: true });
  });

  it('normaliseSchema leaves JSON Schema as it is', () => {
    const schema = { type: 'object', properties: { a: { anyOf: [{ type: 'string' }, { type: 'null' }] } }, additionalProperties: false };
    expect(normaliseSchema(schema)).to.deep.equal(schema);
    expect(normaliseSchema({ anyOf: [{ type: 'STRING' }, { type: 'NUMBER' }] })).to.deep.equal({ anyOf: [{ type: 'string' }, { type: 'number' }] });
  });
});

describe('canonical chat -> gemini request: empty text', () => {
  it('leaves out empty text (Google refuses it), and a turn left with nothing', () => {
    const { value } = fromCanonicalRequest({
      model: 'm',
      messages: [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"city":"Oslo"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
        { role: 'assistant', content: [{ type: 'text', text: '' }] },
        { role: 'user', content: [{ type: 'text', text: '' }, { type: 'text', text: 'thanks' }] },
      ],
    });
    expect(value.contents).to.deep.equal([
      { role: 'user', parts: [{ text: 'weather?' }] },
      { role: 'model', parts: [{ functionCall: { id: 'call_1', name: 'f', args: { city: 'Oslo' } } }] },
      { role: 'user', parts: [{ functionResponse: { id: 'call_1', name: 'f', response: { result: 'sunny' } } }] },
      { role: 'user', parts: [{ text: 'thanks' }] },
    ]);
  });
});

describe('canonical chat -> gemini request: what it keeps and names', () => {
  it("keeps what an earlier turn refused as its text; names speakers' names, a per-image detail and a tool choice without tools; logprobs: false is no loss", () => {
    const { value, losses } = fromCanonicalRequest({
      model: 'm',
      logprobs: false,
      tool_choice: 'required',
      messages: [
        { role: 'user', name: 'alice', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA', detail: 'high' } }] },
        { role: 'assistant', content: null, refusal: 'I will not say.' },
        { role: 'user', content: 'why?' },
        { role: 'assistant', content: [{ type: 'text', text: 'Partly: ' }, { type: 'refusal', refusal: 'no.' }] },
        { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AA', detail: 'auto' } }] },
      ],
    });
    expect((value.contents as Array<{ parts: unknown[] }>)[1]).to.deep.equal({ role: 'model', parts: [{ text: 'I will not say.' }] });
    expect((value.contents as Array<{ parts: unknown[] }>)[3]).to.deep.equal({ role: 'model', parts: [{ text: 'Partly: ' }, { text: 'no.' }] });
    expect([...losses].sort()).to.deep.equal(['image_url.detail', 'messages.name', 'tool_choice.without_tools']);
  });
});

describe('gemini usageMetadata -> canonical usage', () => {
  it('a count that is there but is not one is no usage (metering counts the call); a count of zero may be left out, as Gemini does', () => {
    expect(chatUsage({ promptTokenCount: '12', candidatesTokenCount: 3 })).to.equal(undefined);
    expect(chatUsage({ promptTokenCount: 12, candidatesTokenCount: 1e308 })).to.equal(undefined);
    expect(chatUsage({ promptTokenCount: 12, totalTokenCount: 12 })).to.deep.include({ prompt_tokens: 12, completion_tokens: 0, total_tokens: 12 });
  });
});

describe('gemini request: thinking budgets by model', () => {
  it("reads a model's name after any path (Vertex's publishers/google/models/) for its budgets", () => {
    const budget = (model: string, effort: string) =>
      (fromCanonicalRequest({ model: 'm', reasoning_effort: effort as never, messages: [{ role: 'user', content: 'x' }] }, model).value.generationConfig as { thinkingConfig: unknown }).thinkingConfig;
    expect(budget('publishers/google/models/gemini-2.5-pro', 'none')).to.deep.equal({ thinkingBudget: 128, includeThoughts: true });
    expect(budget('models/gemini-2.5-flash', 'xhigh')).to.deep.equal({ thinkingBudget: 24576, includeThoughts: true });
    expect(budget('gemini-2.5-flash-lite', 'minimal')).to.deep.equal({ thinkingBudget: 512, includeThoughts: true });
    expect(budget('gemini-2.5-flash-lite', 'none')).to.deep.equal({ thinkingBudget: 0 });
  });

  it('keeps a budget under max_tokens, which counts the thoughts: lowered to one under it, or off when none fits', () => {
    const sent = (model: string, effort: string, max: number) => {
      const { value, losses } = fromCanonicalRequest({ model: 'm', reasoning_effort: effort as never, max_tokens: max, messages: [{ role: 'user', content: 'x' }] }, model);
      const config = value.generationConfig as { thinkingConfig: unknown; maxOutputTokens: number };
      return { thinking: config.thinkingConfig, max: config.maxOutputTokens, losses };
    };
    // A Claude client's budget_tokens 1024 with max_tokens 1500 arrives as `low` (2,048).
    const capped = sent('gemini-2.5-flash', 'low', 1500);
    expect(capped.thinking).to.deep.equal({ thinkingBudget: 1499, includeThoughts: true });
    expect(capped.max).to.equal(1500);
    expect(capped.losses).to.include('reasoning_effort.budget_capped_by_max_tokens');
    expect(sent('some-other-model', 'high', 30000).thinking).to.deep.equal({ thinkingBudget: 24576, includeThoughts: true });
    expect(sent('some-other-model', 'high', 24576).thinking).to.deep.equal({ thinkingBudget: 24575, includeThoughts: true });
    // Flash-Lite takes 512 at least, or off.
    const off = sent('gemini-2.5-flash-lite', 'medium', 300);
    expect(off.thinking).to.deep.equal({ thinkingBudget: 0 });
    expect(off.losses).to.include('reasoning_effort.max_tokens_too_small');
    // Pro always thinks: its least budget, named.
    const pro = sent('gemini-2.5-pro', 'low', 100);
    expect(pro.thinking).to.deep.equal({ thinkingBudget: 128, includeThoughts: true });
    expect(pro.losses).to.include('reasoning_effort.max_tokens_too_small');
    expect(sent('gemini-2.5-flash', 'none', 10).losses).to.not.include('reasoning_effort.max_tokens_too_small');
  });
});
