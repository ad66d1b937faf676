import { expect } from 'chai';
import { COUNT_TOKENS, GENERATE_CONTENT, useJsonNames } from './fields.js';

describe('gemini proto field names -> JSON names', () => {
  it('renames the request structure, never what the client named', () => {
    const body = {
      system_instruction: { parts: [{ text: 's' }] },
      contents: [
        { role: 'model', parts: [{ function_call: { name: 'f', args: { city_name: 'Oslo', nested_arg: { a_b: 1 } } }, thought_signature: 'sig' }] },
        { role: 'user', parts: [{ function_response: { name: 'f', response: { temp_c: 3 } } }, { file_data: { mime_type: 'image/png', file_uri: 'https://x/y.png' } }] },
      ],
      tools: [{ function_declarations: [{ name: 'f', parameters: { type: 'OBJECT', properties: { city_name: { type: 'ARRAY', items: { type: 'STRING', min_length: 1 } } }, any_of: [{ max_items: 2 }] }, parameters_json_schema: { snake_key: 1 } }] }],
      generation_config: { response_schema: { properties: { my_field: { type: 'STRING' } }, property_ordering: ['my_field'] }, response_json_schema: { keep_me: 1 } },
      labels: { team_name: 'a' },
      unknown_field: 1,
    };
    useJsonNames(body, GENERATE_CONTENT);
    expect(body).to.deep.equal({
      systemInstruction: { parts: [{ text: 's' }] },
      contents: [
        { role: 'model', parts: [{ functionCall: { name: 'f', args: { city_name: 'Oslo', nested_arg: { a_b: 1 } } }, thoughtSignature: 'sig' }] },
        { role: 'user', parts: [{ functionResponse: { name: 'f', response: { temp_c: 3 } } }, { fileData: { mimeType: 'image/png', fileUri: 'https://x/y.png' } }] },
      ],
      tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'OBJECT', properties: { city_name: { type: 'ARRAY', items: { type: 'STRING', minLength: 1 } } }, anyOf: [{ maxItems: 2 }] }, parametersJsonSchema: { snake_key: 1 } }] }],
      generationConfig: { responseSchema: { properties: { my_field: { type: 'STRING' } }, propertyOrdering: ['my_field'] }, responseJsonSchema: { keep_me: 1 } },
      labels: { team_name: 'a' },
      unknown_field: 1,
    });
  });

  it("keys named like an object's own properties (constructor, __proto__) are no fields: left as they are", () => {
    const body = JSON.parse('{"contents":[{"parts":[{"text":"hi","constructor":{"from_entries":1}}]}],"__proto__":{"to_string":1}}');
    useJsonNames(body, GENERATE_CONTENT);
    expect(JSON.stringify(body)).to.equal('{"contents":[{"parts":[{"text":"hi","constructor":{"from_entries":1}}]}],"__proto__":{"to_string":1}}');
  });

  it('a JSON name beside its proto name wins; the proto name is left for the losses', () => {
    const body = { generationConfig: { maxOutputTokens: 5 }, generation_config: { max_output_tokens: 9 } };
    useJsonNames(body, GENERATE_CONTENT);
    expect(body).to.deep.equal({ generationConfig: { maxOutputTokens: 5 }, generation_config: { max_output_tokens: 9 } });
  });

  it('countTokens: inside generate_content_request too; other values as they are', () => {
    const body = { generate_content_request: { contents: [{ parts: [{ inline_data: { mime_type: 'image/png', data: 'AA' } }] }] } };
    useJsonNames(body, COUNT_TOKENS);
    expect(body).to.deep.equal({ generateContentRequest: { contents: [{ parts: [{ inlineData: { mimeType: 'image/png', data: 'AA' } }] }] } });
    for (const odd of [null, 'text', 3, [1, 'a', null]]) expect(() => useJsonNames(odd, GENERATE_CONTENT)).to.not.throw();
  });
});
