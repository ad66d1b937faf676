import { expect } from 'chai';
import OpenAI from 'openai';
import { chunk, FakeOpenAI, json, sse } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const CLIENT_KEY = 'sk-client-key-abcdef123456';

describe('openai-chat in front of an OpenAI-compatible upstream (official openai client)', () => {
  const upstream = new FakeOpenAI();
  const second = new FakeOpenAI('sk-second-upstream-987654321');
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    await second.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
auth:
  keys:
    - { name: tester, key: ${CLIENT_KEY} }
# The default plugins; several tests below make 'up' fail on purpose, so its circuit breaker
# must not open between them (test/resilience.e2e.test.ts covers the breaker).
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - admin
  - openai-chat
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [gpt-4o-mini]
  - id: up2
    type: openai
    baseUrl: ${second.url}/v1
    apiKey: ${second.apiKey}
    models: [gpt-4o-mini-b]
  - id: deepseek
    type: openai
    baseUrl: ${second.url}/v1
    apiKey: ${second.apiKey}
    models: [deepseek-v4-flash]
    reasoningContent: true
  - id: wrongkey
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: sk-this-is-the-wrong-provider-key
    models: [bad-creds]
models:
  - name: smart
    targets: [{ provider: up, model: gpt-4o-mini }]
  - name: failover
    targets:
      - { provider: up, model: gpt-4o-mini, priority: 0 }
      - { provider: up2, model: gpt-4o-mini-b, priority: 1 }
`);
    client = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  afterEach(() => {
    upstream.reset();
    second.reset();
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
    await second.stop();
  });

  describe('the older function calling (functions, function_call) with an OpenAI-compatible back end', () => {
    const weather = { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
    const completion = (message: Record<string, unknown>, finish: string) => ({
      id: 'chatcmpl-legacy',
      object: 'chat.completion',
      created: 1,
      model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: finish }],
      usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
    });

    it('goes up as the client sent it; the back end\'s function_call answer comes back as it came', async () => {
      const answer = completion({ function_call: { name: 'get_weather', arguments: '{"city":"Paris"}' } }, 'function_call');
      upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 200, answer));
      const sent = { model: 'smart', functions: [weather], function_call: 'auto' as const, messages: [{ role: 'user' as const, content: 'weather in Paris?' }] };
      const response = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
        body: JSON.stringify(sent),
      });
      expect(response.status).to.equal(200);
      expect(await response.text()).to.equal(JSON.stringify({ ...answer, model: 'gpt-4o-mini' }));
      expect(upstream.last().body).to.deep.include({ functions: [weather], function_call: 'auto' });
      expect(upstream.last().body).to.not.have.property('tools');
    });

    it('a compatible server that answers with tool_calls: the client that asked with functions gets function_call, streamed and not', async () => {
      const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
      upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
        if (body?.stream !== true) return json(res, 200, completion({ tool_calls: [call] }, 'tool_calls'));
        sse(res);
        const base = { id: 'chatcmpl-legacy', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini' };
        const event = (delta: Record<string, unknown>, finish: string | null = null) => `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
        res.write(event({ role: 'assistant', content: null, tool_calls: [{ index: 0, ...call, function: { name: 'get_weather', arguments: '' } }] }));
        res.write(event({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }));
        res.write(event({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }));
        res.write(event({}, 'tool_calls'));
        res.end(`data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 } })}\n\ndata: [DONE]\n\n`);
      });
      const plain = await client.chat.completions.create({ model: 'smart', functions: [weather], messages: [{ role: 'user', content: 'weather in Paris?' }] });
      expect(plain.choices[0]!.finish_reason).to.equal('function_call');
      expect(plain.choices[0]!.message.function_call).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });
      expect(plain.choices[0]!.message).to.not.have.property('tool_calls');

      const stream = await client.chat.completions.create({ model: 'smart', stream: true, functions: [weather], messages: [{ role: 'user', content: 'weather in Paris?' }] });
      let name = '';
      let args = '';
      let finish: string | null = null;
      for await (const piece of stream) {
        const delta = piece.choices[0]?.delta;
        expect(delta ?? {}).to.not.have.property('tool_calls');
        name += delta?.function_call?.name ?? '';
        args += delta?.function_call?.arguments ?? '';
        finish = piece.choices[0]?.finish_reason ?? finish;
      }
      expect({ name, args, finish }).to.deep.equal({ name: 'get_weather', args: '{"city":"Paris"}', finish: 'function_call' });
    });
  });

  it("sends the client's own JSON text up when nothing in it changes, and a re-written body when the model name or a repeated key does", async () => {
    const post = (text: string) =>
      fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' }, body: text });
    // Unusual spacing and key order: the bytes that reach the back end are the client's own.
    const asIs = '{ "messages" : [ {"role":"user","content":"hi"} ],\n  "temperature": 0.5, "model":"gpt-4o-mini" }';
    expect((await post(asIs)).status).to.equal(200);
    expect(upstream.last().raw.toString('utf8')).to.equal(asIs);
    // A model alias: the back end's name goes up, so the body is written again.
    expect((await post('{"model":"smart","messages":[{"role":"user","content":"hi"}]}')).status).to.equal(200);
    expect(upstream.last().raw.toString('utf8')).to.equal('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}');
    // "model" twice: the gateway read the last; the back end must see that one only, whatever its parser.
    const twice = '{"model":"bad-creds","messages":[{"role":"user","content":"hi"}],"model":"gpt-4o-mini"}';
    expect((await post(twice)).status).to.equal(200);
    expect(upstream.last().raw.toString('utf8')).to.equal('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}');
    // A key spelt with an escape is the same key to JSON.parse: written again too.
    const escaped = '{"model":"bad-creds","messages":[{"role":"user","content":"hi"}],"mod\\u0065l":"gpt-4o-mini"}';
    expect((await post(escaped)).status).to.equal(200);
    expect(upstream.last().raw.toString('utf8')).to.equal('{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}');
    // Any other key given twice, at any depth: a first-wins parser would read another value
    // (a cap of 100,000 tokens where the gateway reserved for 5; no usage where it asked for it).
    for (const [text, field, value] of [
      ['{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":100000,"max_tokens":5}', 'max_tokens', 5],
      ['{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"n":50,"n":1}', 'n', 1],
    ] as const) {
      expect((await post(text)).status).to.equal(200);
      const sent = upstream.last().raw.toString('utf8');
      expect(sent).to.not.equal(text);
      expect(sent.split(`"${field}"`).length - 1, sent).to.equal(1);
      expect(upstream.last().body).to.deep.include({ [field]: value });
    }
    const nested =
      '{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false,"include_usage":true},"messages":[{"role":"user","content":"hi"}]}';
    await (await post(nested)).text();
    expect(upstream.last().raw.toString('utf8')).to.not.equal(nested);
    expect(upstream.last().body).to.deep.include({ stream_options: { include_usage: true } });
    // A stream that did not ask for usage: the gateway asks for it, so the body changes.
    const streamed = await post('{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}');
    await streamed.text();
    expect(upstream.last().body).to.deep.include({ stream: true, stream_options: { include_usage: true } });
  });

  it("relays a completion's bytes exactly as the upstream wrote them, small or large, whatever they hold", async () => {
    // Multi-byte UTF-8, an escaped quote and backslash, odd spacing, and a byte that is not UTF-8
    // at all inside a string (JSON.parse reads it as U+FFFD; the client must still get the byte).
    const answerBytes = (content: string): Buffer =>
      Buffer.concat([
        Buffer.from(`{ "id":"chatcmpl-x","object":"chat.completion","created":1,"model":"gpt-4o-mini",\n  "choices":[{"index":0,"message":{"role":"assistant","content":"${content} é 日本 🚀 \\"q\\" \\\\ `),
        Buffer.from([0xff]),
        Buffer.from(`"},"finish_reason":"stop","logprobs":null}],\n  "usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8} }\n`),
      ]);
    // A small answer and one of several TCP segments.
    for (const body of [answerBytes('short'), answerBytes('long '.repeat(2000))]) {
      upstream.handle('POST /v1/chat/completions', (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
        res.end(body);
      });
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-length')).to.equal(String(body.length));
      const got = Buffer.from(await res.arrayBuffer());
      expect(got.equals(body), `${got.length} bytes against ${body.length}`).to.equal(true);
    }
  });

  it('a tool turn\'s reasoning_content goes back to a back end set with reasoningContent (DeepSeek\'s thinking mode refuses a history without it); another gets it left out, named', async () => {
    const history = [
      { role: 'user', content: 'weather in Paris?' },
      { role: 'assistant', content: null, reasoning_content: 'I need the weather tool.', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ] as unknown as OpenAI.Chat.ChatCompletionMessageParam[];
    const kept = await client.chat.completions.create({ model: 'deepseek-v4-flash', messages: history }).withResponse();
    expect((second.last().body!.messages as Array<Record<string, unknown>>)[1]).to.include({ reasoning_content: 'I need the weather tool.' });
    expect(kept.response.headers.get('x-switchyard-losses')).to.equal(null);
    const dropped = await client.chat.completions.create({ model: 'gpt-4o-mini', messages: history }).withResponse();
    expect((upstream.last().body!.messages as Array<Record<string, unknown>>)[1]).to.not.have.property('reasoning_content');
    expect(dropped.response.headers.get('x-switchyard-losses')).to.equal('messages.reasoning_content');
  });

  it('passes a completion through with the provider key, never the client key', async () => {
    const completion = await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'hi' }], temperature: 0.3 });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: hi');
    expect(completion.usage).to.deep.include({ prompt_tokens: 11, completion_tokens: 7 });
    const got = upstream.last();
    expect(got.url).to.equal('/v1/chat/completions');
    expect(got.headers.authorization).to.equal(`Bearer ${upstream.apiKey}`);
    expect(JSON.stringify(got.headers)).to.not.include(CLIENT_KEY);
    expect(got.body).to.deep.include({ model: 'gpt-4o-mini', temperature: 0.3 });
    expect(got.body).to.not.have.property('stream_options');
  });

  it('streams with include_usage: the client gets the usage chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'stream me please' }],
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).to.equal('upstream says: stream me please');
    expect(usage?.total_tokens).to.equal(18);
    expect(upstream.last().body?.stream_options).to.deep.equal({ include_usage: true });
  });

  it('asks the upstream for usage on every stream but hides it from a client that did not ask', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ model: 'smart', stream: true, messages: [{ role: 'user', content: 'quiet' }] }),
    });
    const events = (await res.text()).split('\n\n').filter(Boolean);
    expect(events.pop()).to.equal('data: [DONE]');
    for (const event of events) {
      const parsed = JSON.parse(event.slice('data: '.length)) as Record<string, unknown>;
      expect(parsed).to.not.have.property('usage');
      expect(parsed.choices).to.have.length(1);
    }
    expect(upstream.last().body?.stream_options).to.deep.equal({ include_usage: true });
    await eventually(() => gw.logs.some((l) => l.message === 'request' && l.model === 'smart' && (l.usage as { inputTokens?: number })?.inputTokens === 11));
  });

  it('relays streamed tool calls that the SDK assembles', async () => {
    const stream = client.chat.completions.stream({
      model: 'smart',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).to.deep.equal({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    expect(final.choices[0]!.finish_reason).to.equal('tool_calls');
    expect((upstream.last().body?.tools as unknown[]).length).to.equal(1);
  });

  it('relays each chunk as it arrives, without waiting for the end of the stream', async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res, _body, fake) => {
      sse(res);
      res.write(chunk('first'));
      await fake.gate();
      res.write(chunk(' second'));
      res.end('data: [DONE]\n\n');
    });
    const stream = await client.chat.completions.create({ model: 'smart', stream: true, messages: [{ role: 'user', content: 'x' }] });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value.choices[0].delta.content).to.equal('first');
    upstream.release();
    const second = await iterator.next();
    expect(second.value.choices[0].delta.content).to.equal(' second');
    expect((await iterator.next()).done).to.equal(true);
  });

  it('aborts the upstream request when the client goes away mid-stream', async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res, _body, fake) => {
      sse(res);
      res.write(chunk('hello'));
      await fake.gate();
    });
    const controller = new AbortController();
    const stream = await client.chat.completions.create(
      { model: 'smart', stream: true, messages: [{ role: 'user', content: 'x' }] },
      { signal: controller.signal },
    );
    for await (const c of stream) {
      expect(c.choices[0]!.delta.content).to.equal('hello');
      controller.abort();
    }
    await eventually(() => upstream.last().aborted, 2000, 'the upstream to see the disconnect');
    upstream.release();
  });

  it('turns an upstream 5xx into a 502 without the upstream body or address', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 500, { error: { message: `db at 10.1.2.3 exploded; see ${upstream.url}/debug`, type: 'server_error' } }),
    );
    const error = (await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.InternalServerError);
    expect(error.status).to.equal(502);
    expect(error.code).to.equal('upstream_error');
    expect(error.message).to.not.include('exploded');
    expect(error.message).to.not.include('127.0.0.1');
  });

  it('keeps an upstream 400 message, scrubbed, as a 400', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) =>
      json(res, 400, { error: { message: `Invalid value for 'seed' (key ${upstream.apiKey})`, type: 'invalid_request_error', param: 'seed' } }),
    );
    const error = (await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.BadRequestError);
    expect(error.message).to.include("Invalid value for 'seed'");
    expect(error.message).to.not.include(upstream.apiKey);
  });

  it('never shows a client the provider key when the upstream refuses it', async () => {
    const error = (await client.chat.completions.create({ model: 'bad-creds', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error.status).to.equal(502);
    expect(JSON.stringify(error.error)).to.not.include('sk-this');
    expect(error.message).to.not.include('sk-this');
    expect(gw.logText()).to.not.include('sk-this-is-the-wrong-provider-key');
  });

  it('reports an upstream error event in the middle of a stream as an error the SDK raises', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => {
      sse(res);
      res.write(chunk('partial'));
      res.end(`data: ${JSON.stringify({ error: { message: 'model overloaded', type: 'server_error' } })}\n\n`);
    });
    const stream = await client.chat.completions.create({ model: 'smart', stream: true, messages: [{ role: 'user', content: 'x' }] });
    let text = '';
    const error = await (async () => {
      for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
    })().catch((e: unknown) => e);
    expect(text).to.equal('partial');
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect(String((error as Error).message)).to.include('model overloaded');
  });

  it("an error event before any content says its kind as a JSON answer's status would: a rate limit is a 429 the SDK waits out, an overload a 503, a prompt too long context_length_exceeded", async () => {
    for (const [error, status, code] of [
      [{ message: 'Rate limit hit', type: 'rate_limit_error', code: 'rate_limit_exceeded' }, 429, 'upstream_rate_limited'],
      [{ message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' }, 429, 'upstream_quota_exhausted'],
      [{ message: 'Overloaded', type: 'overloaded_error' }, 503, 'upstream_overloaded'],
      // LiteLLM writes the status as text, its type as the string None.
      [{ message: 'litellm.RateLimitError: too many', type: 'None', code: '429' }, 429, 'upstream_rate_limited'],
      [{ message: 'Your credit balance is too low to access the API.', type: 'invalid_request_error' }, 429, 'upstream_quota_exhausted'],
      [{ message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", type: 'invalid_request_error', code: 'context_length_exceeded' }, 400, 'context_length_exceeded'],
      [{ message: 'something broke', type: 'server_error' }, 502, 'upstream_error'],
    ] as const) {
      upstream.reset();
      upstream.handle('POST /v1/chat/completions', (_req, res) => {
        sse(res);
        res.end(`data: ${JSON.stringify({ error })}\n\n`);
      });
      const raw = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'smart', stream: true, messages: [{ role: 'user', content: 'x' }] }),
      });
      const body = (await raw.json()) as { error: { code: string } };
      expect([raw.status, body.error.code], error.message).to.deep.equal([status, code]);
    }
  });

  it('an OpenAI-compatible back end (a proxy in front of Claude) answering 529, overloaded, is 503 upstream_overloaded the client may retry, and the next tier is tried', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 529, { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }));
    const raw = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CLIENT_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'smart', messages: [{ role: 'user', content: 'x' }] }),
    });
    // Before: 502 upstream_error with x-should-retry: false.
    expect(raw.status).to.equal(503);
    expect(((await raw.json()) as { error: { code: string } }).error.code).to.equal('upstream_overloaded');
    expect(raw.headers.get('x-should-retry')).to.equal(null);
    upstream.reset();
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 529, { error: { message: 'Overloaded' } }));
    const completion = await client.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: hello');
    expect(upstream.received).to.have.length(1);
  });

  it('tries the next tier when the first back end fails before answering', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res) => json(res, 503, { error: { message: 'busy' } }));
    const completion = await client.chat.completions.create({ model: 'failover', messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]!.message.content).to.equal('upstream says: hello');
    expect(upstream.received).to.have.length(1);
    expect(second.last().body?.model).to.equal('gpt-4o-mini-b');
    expect(second.last().headers.authorization).to.equal(`Bearer ${second.apiKey}`);
  });

  describe('keys', () => {
    it('refuses a missing or unknown key with 401 and logs only a key prefix', async () => {
      const anonymous = new OpenAI({ apiKey: 'sk-not-a-real-key-999999', baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const error = await anonymous.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.AuthenticationError);
      const none = await fetch(`${gw.url}/v1/models`);
      expect(none.status).to.equal(401);
      expect(((await none.json()) as { error: { code: string } }).error.code).to.equal('missing_api_key');
      await client.chat.completions.create({ model: 'smart', messages: [{ role: 'user', content: 'x' }] });
      await eventually(() => gw.logs.some((l) => l.message === 'request' && typeof l.key === 'string'));
      const text = gw.logText();
      expect(text).to.not.include(CLIENT_KEY);
      expect(text).to.not.include('sk-not-a-real-key-999999');
      expect(text).to.include(CLIENT_KEY.slice(0, 8));
    });
  });
});
