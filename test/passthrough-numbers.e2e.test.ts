import { expect } from 'chai';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-passthrough-numbers-0001';

/** An id past 2^53 (a tweet's, a Discord snowflake), as a number: JSON.parse reads it as 1790123456789012200. */
const BIG = '1790123456789012345';

/**
 * A body that goes up in the client's own format goes up as the client wrote it, only the model
 * name put in (and, for an OpenAI stream, the request for usage): never parsed and written out
 * again, which changed every integer past 2^53 (a tool call's id argument in the conversation, an
 * int64 seed) into another number.
 */
describe('same format in and out: the client\'s text goes up as written (integers past 2^53 included)', function () {
  this.timeout(30_000);
  const openai = new FakeOpenAI();
  const claude = new FakeAnthropic();
  const gemini = new FakeGemini();
  let gw: RunningGateway;

  before(async () => {
    await Promise.all([openai.start(), claude.start(), gemini.start()]);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: c, key: ${KEY} }]
providers:
  - { id: oai, type: openai, baseUrl: ${openai.url}/v1, apiKey: ${openai.apiKey}, models: [gpt-4o-mini, gpt-3.5-turbo-instruct] }
  - { id: ant, type: anthropic, baseUrl: ${claude.url}, apiKey: ${claude.apiKey}, models: [claude-fake-1] }
  - { id: goo, type: gemini, baseUrl: ${gemini.url}, apiKey: ${gemini.apiKey}, models: [gemini-fake-1] }
models:
  - { name: my-gpt, targets: [{ provider: oai, model: gpt-4o-mini }] }
  - { name: my-instruct, targets: [{ provider: oai, model: gpt-3.5-turbo-instruct }] }
  - { name: my-claude, targets: [{ provider: ant, model: claude-fake-1 }] }
`);
  });
  afterEach(() => {
    openai.reset();
    claude.reset();
    gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([openai.stop(), claude.stop(), gemini.stop()]);
  });

  const post = async (path: string, text: string, headers: Record<string, string> = {}) => {
    const response = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...headers }, body: text });
    const answer = await response.text();
    expect(response.status, answer).to.equal(200);
    return answer;
  };

  it('an OpenAI chat client through an alias, whole and streamed without asking for usage: its seed and tool arguments as written, the model and the usage request put in', async () => {
    const text = `{"model":"my-gpt","seed":9223372036854775807,"messages":[{"role":"user","content":"look up ${BIG}"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":"{\\"id\\":${BIG}}"}}]},{"role":"tool","tool_call_id":"call_1","content":"ok"}],"x_vendor_options":{"n":${BIG}}}`;
    await post('/v1/chat/completions', text);
    const sent = openai.last().raw.toString('utf8');
    expect(sent).to.equal(text.replace('"my-gpt"', '"gpt-4o-mini"'));
    await post('/v1/chat/completions', text.replace('{"model"', '{"stream":true,"model"'));
    const streamed = openai.last().raw.toString('utf8');
    expect(streamed).to.include('"seed":9223372036854775807').and.include(`"x_vendor_options":{"n":${BIG}}`).and.include('"model":"gpt-4o-mini"');
    expect(JSON.parse(streamed)).to.deep.include({ stream: true, stream_options: { include_usage: true } });
  });

  it('an OpenAI completions client: its seed as written', async () => {
    openai.handle('POST /v1/completions', (_req, res) =>
      json(res, 200, { id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-3.5-turbo-instruct', choices: [{ text: ' hi', index: 0, logprobs: null, finish_reason: 'stop' }], usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 } }),
    );
    await post('/v1/completions', '{"model":"my-instruct","prompt":"say hi","seed":9007199254740993,"max_tokens":7}');
    expect(openai.last().raw.toString('utf8')).to.equal('{"model":"gpt-3.5-turbo-instruct","prompt":"say hi","seed":9007199254740993,"max_tokens":7}');
    // Without max_tokens, the API's default of 16 goes up in so many words, the rest as written.
    await post('/v1/completions', '{"model":"my-instruct","prompt":"say hi","seed":9007199254740993}');
    const sent = openai.last().raw.toString('utf8');
    expect(sent).to.include('"seed":9007199254740993').and.include('"max_tokens":16').and.include('"model":"gpt-3.5-turbo-instruct"');
  });

  it('a Claude client through an alias: a tool_use input in the conversation as written', async () => {
    // With its tools, as Anthropic asks of a conversation holding tool_use blocks.
    const text = `{"model":"my-claude","max_tokens":64,"tools":[{"name":"get_tweet","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"get ${BIG}"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_tweet","input":{"tweet_id":${BIG}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"found"}]}]}`;
    await post('/v1/messages', text, { 'anthropic-version': '2023-06-01' });
    expect(claude.last().text).to.equal(text.replace('"my-claude"', '"claude-fake-1"'));
  });

  it('a Gemini client: functionCall args and functionResponse as written', async () => {
    const text = `{"contents":[{"role":"user","parts":[{"text":"get ${BIG}"}]},{"role":"model","parts":[{"functionCall":{"name":"get_tweet","args":{"tweet_id":${BIG}}}}]},{"role":"user","parts":[{"functionResponse":{"name":"get_tweet","response":{"id":${BIG}}}}]}]}`;
    await post('/v1beta/models/gemini-fake-1:generateContent', text, { 'x-goog-api-key': KEY });
    expect(gemini.last().text).to.equal(text);
    // A field in its proto spelling is read as its JSON name, and goes up so (a Gemini-compatible
    // server may know only that one): the body, not the text.
    await post('/v1beta/models/gemini-fake-1:generateContent', `{"system_instruction":{"parts":[{"text":"be brief"}]},${text.slice(1)}`, { 'x-goog-api-key': KEY });
    expect(gemini.last().body).to.have.property('systemInstruction');
    expect(gemini.last().text).to.not.include('system_instruction');
  });
});
