import { expect } from 'chai';
import OpenAI from 'openai';
import { startGateway, type RunningGateway } from './support/gateway.js';

const CONFIG = `
server: { host: 127.0.0.1, port: 0, bodyLimit: 64kb }
logging: { level: info, format: json }
plugins: [auth, validation, routing, openai-chat]
providers:
  - id: mock
    type: mock
    models: [mock-chat]
models:
  - name: echo
    targets: [{ provider: mock, model: mock-chat }]
  - name: meta-llama/Llama-3.1-8B
    targets: [{ provider: mock, model: mock-chat }]
`;

const weather = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

describe('openai-chat in front of the mock provider (official openai client)', () => {
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(CONFIG);
    client = new OpenAI({ apiKey: 'sk-anything', baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => gw?.stop());

  it('answers a non-streamed chat completion with the echoed text and usage', async () => {
    const completion = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'hello there gateway' }] });
    expect(completion.object).to.equal('chat.completion');
    expect(completion.choices[0]!.message.content).to.equal('hello there gateway');
    expect(completion.choices[0]!.finish_reason).to.equal('stop');
    expect(completion.usage!.completion_tokens).to.equal(3);
    expect(completion.usage!.total_tokens).to.equal(completion.usage!.prompt_tokens + 3);
  });

  it('tells the client the time spent in the gateway (x-switchyard-overhead-ms), errors included', async () => {
    const { response } = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }] }).withResponse();
    const overhead = Number(response.headers.get('x-switchyard-overhead-ms'));
    expect(overhead).to.be.a('number').and.to.be.at.least(0);
    expect(overhead).to.be.below(5000);
    const stream = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(stream.headers.get('x-switchyard-overhead-ms')).to.match(/^\d+\.\d{3}$/);
    await stream.text();
    const missing = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(missing.headers.get('x-switchyard-overhead-ms')).to.match(/^\d+\.\d{3}$/);
  });

  it('streams chunks and a final usage chunk when include_usage is asked for', async () => {
    const stream = await client.chat.completions.create({
      model: 'mock-chat',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'one two three four' }],
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined | null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).to.equal('chat.completion.chunk');
      if (chunk.choices[0]) {
        text += chunk.choices[0].delta.content ?? '';
        finish = chunk.choices[0].finish_reason ?? finish;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).to.equal('one two three four');
    expect(finish).to.equal('stop');
    expect(chunks).to.be.greaterThan(4);
    expect(usage?.completion_tokens).to.equal(4);
  });

  it('hides the usage chunk from a stream that did not ask for it', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'a b' }] }),
    });
    expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
    const text = await res.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events[events.length - 1]).to.equal('data: [DONE]');
    for (const event of events.slice(0, -1)) {
      const chunk = JSON.parse(event.replace(/^data: /, '')) as Record<string, unknown>;
      expect(chunk).to.not.have.property('usage');
      expect((chunk.choices as unknown[]).length).to.equal(1);
    }
    // ...while the gateway still metered it
    const line = gw.logs.find((l) => l.message === 'request' && l.stream === true && (l.usage as { outputTokens?: number })?.outputTokens === 2);
    expect(line, 'access line with usage').to.exist;
  });

  it('honours max_tokens with finish_reason length', async () => {
    const completion = await client.chat.completions.create({
      model: 'echo',
      max_tokens: 2,
      messages: [{ role: 'user', content: 'one two three four' }],
    });
    expect(completion.choices[0]!.message.content).to.equal('one two');
    expect(completion.choices[0]!.finish_reason).to.equal('length');
    expect(completion.usage!.completion_tokens).to.equal(2);
  });

  it('completes a tool round trip', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'weather in Paris?' }];
    const first = await client.chat.completions.create({ model: 'echo', messages, tools: [weather] });
    expect(first.choices[0]!.finish_reason).to.equal('tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).to.equal('get_weather');
    expect(JSON.parse(call.function.arguments)).to.deep.equal({ city: 'weather in Paris?' });
    messages.push(first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' });
    const second = await client.chat.completions.create({ model: 'echo', messages, tools: [weather] });
    expect(second.choices[0]!.finish_reason).to.equal('stop');
    expect(second.choices[0]!.message.content).to.equal('sunny, 21 C');
    // The same question again later in the conversation: a call with an id of its own (a
    // conversation holding two calls of one id is refused by Anthropic, for one), and the same
    // id for the same request (the mock is deterministic).
    messages.push(second.choices[0]!.message, { role: 'user', content: 'weather in Paris?' });
    const third = await client.chat.completions.create({ model: 'echo', messages, tools: [weather] });
    const again = third.choices[0]!.message.tool_calls![0]!;
    expect(again.id).to.not.equal(call.id);
    const repeat = await client.chat.completions.create({ model: 'echo', messages, tools: [weather] });
    expect(repeat.choices[0]!.message.tool_calls![0]!.id).to.equal(again.id);
  });

  it('streams tool call arguments in pieces the client can assemble', async () => {
    const stream = client.chat.completions.stream({
      model: 'echo',
      messages: [{ role: 'user', content: 'Oslo' }],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(final.choices[0]!.finish_reason).to.equal('tool_calls');
    expect(JSON.parse(call.function.arguments)).to.deep.equal({ city: 'Oslo' });
  });

  it('lists the routable models in the OpenAI list shape', async () => {
    const ids: string[] = [];
    for await (const model of client.models.list()) {
      expect(model.object).to.equal('model');
      ids.push(model.id);
    }
    expect(ids).to.have.members(['echo', 'meta-llama/Llama-3.1-8B', 'mock-chat']);
    const one = await client.models.retrieve('echo');
    expect(one.id).to.equal('echo');
  });

  it('fetches a model whose id has a slash, encoded (as the client sends it) or not', async () => {
    expect((await client.models.retrieve('meta-llama/Llama-3.1-8B')).id).to.equal('meta-llama/Llama-3.1-8B');
    const plain = await fetch(`${gw.url}/v1/models/meta-llama/Llama-3.1-8B`, { headers: { authorization: 'Bearer sk-anything' } });
    expect(plain.status).to.equal(200);
    expect(((await plain.json()) as { id: string }).id).to.equal('meta-llama/Llama-3.1-8B');
    const missing = await fetch(`${gw.url}/v1/models/meta-llama/nothing`, { headers: { authorization: 'Bearer sk-anything' } });
    expect(missing.status).to.equal(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).to.equal('model_not_found');
  });

  describe('errors reach the client in its own shape', () => {
    it('a constraint violation is a 400 whose param names the field', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ temperature: 2.5 }, 'temperature'],
        [{ top_p: 1.5 }, 'top_p'],
        [{ n: 0 }, 'n'],
        [{ presence_penalty: -2.1 }, 'presence_penalty'],
        [{ frequency_penalty: 3 }, 'frequency_penalty'],
        [{ tool_choice: 'sometimes' }, 'tool_choice'],
        [{ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function' } }, 'tool_choice.function'],
        [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
        [{ modalities: ['text', 'video'] }, 'modalities[1]'],
        [{ stop: 5 }, 'stop'],
        [{ messages: [{ role: 'user' }] }, 'messages[0].content'],
        [{ messages: [] }, 'messages'],
        [{ stream: 'yes' }, 'stream'],
        [{ logit_bias: { '50256': 101 } }, 'logit_bias.50256'],
        // A tool must be used, with none to choose from: the back end could not honour it (OpenAI refuses it too).
        [{ tool_choice: 'required' }, 'tool_choice'],
        [{ tools: [], tool_choice: { type: 'function', function: { name: 'get_weather' } } }, 'tool_choice'],
      ];
      for (const [patch, param] of cases) {
        const body = { model: 'echo', messages: [{ role: 'user', content: 'x' }], ...patch };
        const error = await client.chat.completions.create(body as never).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, JSON.stringify(patch)).to.be.instanceOf(OpenAI.BadRequestError);
        const e = error as InstanceType<typeof OpenAI.BadRequestError>;
        expect(e.status).to.equal(400);
        expect(e.param, JSON.stringify(patch)).to.equal(param);
        expect(e.type).to.equal('invalid_request_error');
      }
    });

    it("tool_choice 'auto' or 'none' without tools asks nothing of the back end: answered", async () => {
      for (const choice of ['auto', 'none'] as const) {
        const answer = await client.chat.completions.create({ model: 'echo', messages: [{ role: 'user', content: 'x' }], tool_choice: choice });
        expect(answer.choices[0]!.message.content, choice).to.equal('x');
      }
    });

    it('an unknown model is a 404 the SDK recognises', async () => {
      const error = await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(OpenAI.NotFoundError);
      expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).to.equal('model_not_found');
    });

    it('malformed JSON is a 400, a wrong content type 415, an unknown path 404 JSON, each with x-request-id', async () => {
      const post = (body: string, type = 'application/json') =>
        fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': type }, body });
      const bad = await post('{"model": "echo", ');
      expect(bad.status).to.equal(400);
      expect(((await bad.json()) as { error: { code: string } }).error.code).to.equal('invalid_json');
      expect(bad.headers.get('x-request-id')).to.match(/^req_/);

      const form = await post('model=echo', 'application/x-www-form-urlencoded');
      expect(form.status).to.equal(415);
      expect(((await form.json()) as { error: { type: string } }).error.type).to.equal('invalid_request_error');

      for (const [method, path] of [['GET', '/nowhere'], ['PUT', '/v1/chat/completions'], ['GET', '/v1/chat/completions']]) {
        const missing = await fetch(`${gw.url}${path}`, { method });
        expect(missing.status).to.equal(404);
        expect(missing.headers.get('content-type')).to.match(/application\/json/);
        expect(missing.headers.get('x-request-id')).to.be.a('string');
        const body = (await missing.json()) as { error: { message: string; type: string; param: null; code: string } };
        expect(body.error).to.include({ type: 'invalid_request_error', code: 'not_found' });
        expect(body.error).to.have.property('param', null);
      }
    });

    it('hostile JSON is refused without prototype pollution', async () => {
      const deep = `{"model":"echo","messages":[{"role":"user","content":"x"}],"x":${'['.repeat(5000)}${']'.repeat(5000)}}`;
      const res = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep });
      expect(res.status).to.equal(400);
      expect(((await res.json()) as { error: { code: string } }).error.code).to.equal('json_too_deep');
      for (const hostile of ['"__proto__":{"polluted":true}', '"constructor":{"prototype":{"polluted":true}}']) {
        const body = `{"model":"echo","messages":[{"role":"user","content":"x",${hostile}}]}`;
        const r = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        expect(r.status, hostile).to.equal(400);
        expect(((await r.json()) as { error: { code: string } }).error.code).to.equal('forbidden_key');
      }
      expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
      // Alone, either name is an ordinary key: a tool's parameter called constructor, metadata.prototype.
      const tool = { type: 'function', function: { name: 'build', parameters: { type: 'object', properties: { constructor: { type: 'string' }, prototype: { type: 'string' } } } } };
      const ordinary = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'x' }], tools: [tool], metadata: { prototype: 'v2' } }),
      });
      expect(ordinary.status, await ordinary.clone().text()).to.equal(200);
    });

    it('a body over server.bodyLimit is a 413, with or without Content-Length', async () => {
      const big = JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'x'.repeat(70 * 1024) }] });
      const withLength = await fetch(`${gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: big });
      expect(withLength.status).to.equal(413);
      expect(((await withLength.json()) as { error: { code: string } }).error.code).to.equal('body_too_large');

      const encoder = new TextEncoder();
      const chunked = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let i = 0; i < 80; i++) controller.enqueue(encoder.encode('x'.repeat(1024)));
          controller.close();
        },
      });
      const res = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chunked,
        duplex: 'half',
      } as RequestInit);
      expect(res.status).to.equal(413);
    });
  });
});
