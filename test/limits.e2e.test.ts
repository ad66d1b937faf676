import { expect } from 'chai';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { ApiError, GoogleGenAI } from '@google/genai';
import { FakeOpenAI, json } from './fakes/openai-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';

const PLUGINS = '[request-log, auth, rate-limit, validation, routing, metering, openai-chat, anthropic-messages, gemini]';

function config(keys: string, extra = '', latencyMs = 40): string {
  return `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: ${PLUGINS}
auth:
  keys:
${keys}
providers:
  - id: mock
    type: mock
    models: [mock-chat]
    latencyMs: ${latencyMs}
${extra}
`;
}

describe('limits (rate limits and budgets) through the official openai client', function () {
  this.timeout(60_000);
  let gw: RunningGateway | undefined;
  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  it('a limit of 0 (requests, tokens or calls at a time) refuses every call, images and speech included, and says waiting will not help', async () => {
    gw = await startGateway(
      config(
        ['    - { name: no-rpm, key: sk-zero-rpm-0001, rpm: 0 }', '    - { name: no-tpm, key: sk-zero-tpm-0001, tpm: 0 }', '    - { name: no-slot, key: sk-zero-conc-0001, maxConcurrent: 0 }'].join('\n'),
        '  - { id: media, type: mock, models: [mock-image, mock-tts] }',
      ),
    );
    const calls: Array<[string, unknown]> = [
      ['/v1/chat/completions', { model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }],
      ['/v1/images/generations', { model: 'mock-image', prompt: 'a cat' }],
      ['/v1/audio/speech', { model: 'mock-tts', voice: 'alloy', input: 'hello' }],
    ];
    for (const key of ['sk-zero-rpm-0001', 'sk-zero-tpm-0001', 'sk-zero-conc-0001']) {
      for (const [route, body] of calls) {
        const res = await fetch(`${gw.url}${route}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const text = await res.text();
        expect(res.status, `${key} ${route}: ${text}`).to.equal(429);
        expect(JSON.parse(text).error.code).to.equal('rate_limit_exceeded');
        expect(res.headers.get('x-should-retry'), `${key} ${route}`).to.equal('false');
        expect(res.headers.get('retry-after'), `${key} ${route}`).to.equal(null);
      }
    }
  });

  it('admits at most what the budget covers out of 100 concurrent calls, and never spends past it', async () => {
    // Each call costs exactly 0.5 (a per-request price), so a budget of 5 covers 10 calls.
    gw = await startGateway(
      config('    - { name: wallet, key: sk-wallet-key-0001, budget: 5 }', 'pricing:\n  mock-chat: { perRequest: 0.5 }'),
    );
    const client = new OpenAI({ apiKey: 'sk-wallet-key-0001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: `call ${i}` }] }).then(
          () => 'ok' as const,
          (error: unknown) => error,
        ),
      ),
    );
    const admitted = results.filter((r) => r === 'ok').length;
    const refused = results.filter((r) => r instanceof OpenAI.RateLimitError);
    expect(admitted).to.equal(10);
    expect(refused).to.have.length(90);
    expect((refused[0] as InstanceType<typeof OpenAI.RateLimitError>).code).to.equal('insufficient_quota');
    // Refused while calls in flight held the rest, or once it was spent: the message says which.
    for (const error of refused as Array<InstanceType<typeof OpenAI.RateLimitError>>) {
      expect(error.message).to.match(/budget does not cover this call: (it is used up \(\d+(\.\d+)? spent of 5\)|\d+(\.\d+)? is left, of which calls in flight hold)/);
    }
    await gw.gateway.stores.flush();
    const key = await gw.gateway.stores.keys.get('wallet');
    expect(key!.spent).to.be.at.most(5);
    expect(key!.spent).to.equal(5);
    const totals = await gw.gateway.stores.usage.totals({ keyId: key!.id });
    expect(totals[0]!.requests).to.equal(10);
    expect(totals[0]!.cost).to.equal(5);
    // Out of budget now, for good: the SDK is told not to try again (with its default retries it
    // sends one request, not three).
    const after = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'one more' }] }).catch((e: unknown) => e);
    expect(after).to.be.instanceOf(OpenAI.RateLimitError);
    expect((after as InstanceType<typeof OpenAI.RateLimitError>).headers.get('x-should-retry')).to.equal('false');
    let sent = 0;
    const retrying = new OpenAI({
      apiKey: 'sk-wallet-key-0001',
      baseURL: `${gw.url}/v1`,
      fetch: (url, init) => {
        sent++;
        return fetch(url, init);
      },
    });
    expect(await retrying.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'again' }] }).catch((e: unknown) => e)).to.be.instanceOf(OpenAI.RateLimitError);
    expect(sent).to.equal(1);
  });

  it('reserves the worst case from max_tokens and token prices, then settles to the actual cost', async () => {
    // output 1.0 per 1M tokens: a call with max_tokens 1000000 could cost 1.0, more than the budget.
    gw = await startGateway(
      config('    - { name: tokens, key: sk-tokens-key-0001, budget: 0.5 }', 'pricing:\n  mock-chat: { input: 0, output: 1.0 }'),
    );
    const client = new OpenAI({ apiKey: 'sk-tokens-key-0001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const tooBig = await client.chat.completions
      .create({ model: 'mock-chat', max_tokens: 1_000_000, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(tooBig).to.be.instanceOf(OpenAI.RateLimitError);
    const { data, response } = await client.chat.completions
      .create({ model: 'mock-chat', max_tokens: 100, messages: [{ role: 'user', content: 'three small words' }] })
      .withResponse();
    expect(data.usage!.completion_tokens).to.equal(3);
    expect(response.headers.get('x-switchyard-cost')).to.equal('0.000003');
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.keys.get('tokens'))!.spent).to.be.closeTo(0.000003, 1e-12);
    // n choices may each be max_tokens long: 4 × 200,000 could cost 0.8, past what is left.
    const many = await client.chat.completions
      .create({ model: 'mock-chat', max_tokens: 200_000, n: 4, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(many).to.be.instanceOf(OpenAI.RateLimitError);
    expect((many as InstanceType<typeof OpenAI.RateLimitError>).code).to.equal('insufficient_quota');
    expect((many as Error).message).to.include('(lower max_tokens)');
    // A chat client that asked with max_completion_tokens is told about that field.
    const newer = await client.chat.completions
      .create({ model: 'mock-chat', max_completion_tokens: 1_000_000, messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect((newer as Error).message).to.include('(lower max_completion_tokens)');
    // A Gemini client is told about its own field.
    const ai = new GoogleGenAI({ apiKey: 'sk-tokens-key-0001', httpOptions: { baseUrl: gw.url } });
    const geminiTooBig = (await ai.models.generateContent({ model: 'mock-chat', contents: 'hi', config: { maxOutputTokens: 1_000_000 } }).catch((e: unknown) => e)) as ApiError;
    expect(geminiTooBig).to.be.instanceOf(ApiError);
    expect(geminiTooBig.status).to.equal(429);
    expect(geminiTooBig.message).to.include('(lower generationConfig.maxOutputTokens)');
    const one = await client.chat.completions.create({ model: 'mock-chat', max_tokens: 200_000, messages: [{ role: 'user', content: 'hi' }] });
    expect(one.choices).to.have.length(1);
  });

  it('answers the 61st call of a minute with 429, Retry-After and the x-ratelimit headers', async () => {
    gw = await startGateway(config('    - { name: paced, key: sk-paced-key-0001, rpm: 60 }'));
    const client = new OpenAI({ apiKey: 'sk-paced-key-0001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    for (let i = 1; i <= 60; i++) {
      const { response } = await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }).withResponse();
      expect(response.headers.get('x-ratelimit-limit-requests')).to.equal('60');
      expect(response.headers.get('x-ratelimit-remaining-requests')).to.equal(String(60 - i));
    }
    const error = (await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<
      typeof OpenAI.RateLimitError
    >;
    expect(error).to.be.instanceOf(OpenAI.RateLimitError);
    expect(error.status).to.equal(429);
    expect(error.code).to.equal('rate_limit_exceeded');
    const headers = error.headers!;
    expect(Number(headers.get('retry-after'))).to.be.within(1, 60);
    expect(headers.get('x-ratelimit-limit-requests')).to.equal('60');
    expect(headers.get('x-ratelimit-remaining-requests')).to.equal('0');
    expect(headers.get('x-ratelimit-reset-requests')).to.match(/^(\d+ms|[\d.]+s|\d+m[\d.]+s)$/);
    // Refused before its body was read: logged with its route's operation, no model.
    await gw.gateway.stores.flush();
    const { entries } = await gw.gateway.stores.logs.query({ limit: 1000 });
    const refused = entries.find((e) => e.requestId === headers.get('x-request-id'));
    expect(refused).to.deep.include({ status: 429, errorCode: 'rate_limit_exceeded', operation: 'chat', model: null });
  });

  it('limits tokens per minute: estimate reserved, then settled to the real count', async () => {
    gw = await startGateway(config('    - { name: tpm, key: sk-tpm-key-00001, tpm: 500 }'));
    const client = new OpenAI({ apiKey: 'sk-tpm-key-00001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const ask = (maxTokens: number) =>
      client.chat.completions.create({ model: 'mock-chat', max_tokens: maxTokens, messages: [{ role: 'user', content: 'a b c' }] }).withResponse();
    // Each call is estimated at about 6 + 250 = 256 tokens and really uses 9.
    const first = await ask(250);
    expect(first.response.headers.get('x-ratelimit-limit-tokens')).to.equal('500');
    // Two unsettled estimates (512) would not fit in 500: this one fits only because the first settled.
    await ask(250);
    const third = (await ask(490).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.RateLimitError>;
    expect(third).to.be.instanceOf(OpenAI.RateLimitError);
    expect(third.headers!.get('x-ratelimit-limit-tokens')).to.equal('500');
    expect(Number(third.headers!.get('x-ratelimit-remaining-tokens'))).to.be.within(470, 490);
    expect(third.message).to.include('tokens');
    expect(third.headers!.get('retry-after')).to.match(/^\d+$/);
    // A call that alone may use more than the limit can never fit: no Retry-After, and the SDK is told not to retry.
    const never = (await ask(1000).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.RateLimitError>;
    expect(never).to.be.instanceOf(OpenAI.RateLimitError);
    expect(never.headers!.get('retry-after')).to.equal(null);
    expect(never.headers!.get('x-should-retry')).to.equal('false');
    expect(never.message).to.include('on its own');
    // Refused before it went anywhere: its log row names no back end (one that answered is named).
    await gw.gateway.stores.flush();
    const entries = (await gw.gateway.stores.logs.query({ limit: 50 })).entries;
    const refused = entries.find((e) => e.requestId === never.headers!.get('x-request-id'))!;
    expect(refused).to.include({ status: 429, provider: null });
    expect(refused.attempts).to.deep.equal([]);
    expect(entries.find((e) => e.requestId === first.response.headers.get('x-request-id'))!.provider).to.equal('mock');
  });

  it("estimates tokens per minute from what goes up, whatever the client's format: a Gemini prompt, a Claude system prompt and tool results, a Responses history", async () => {
    gw = await startGateway(config('    - { name: tpm, key: sk-tpm-key-00002, tpm: 2000 }\n    - { name: tpm2, key: sk-tpm-key-00003, tpm: 100000 }'));
    // About 3,000 tokens by the estimate's four characters a token: alone past 2,000.
    const long = 'hello world '.repeat(1000);
    const never = (error: unknown): string => {
      const e = error as { status?: number; message?: string };
      expect(e.status, String(error)).to.equal(429);
      expect(e.message).to.include('on its own');
      return e.message!;
    };
    const ai = new GoogleGenAI({ apiKey: 'sk-tpm-key-00002', httpOptions: { baseUrl: gw.url } });
    const gemini = await ai.models.generateContent({ model: 'mock-chat', contents: long, config: { maxOutputTokens: 10 } }).catch((e: unknown) => e);
    expect(gemini).to.be.instanceOf(ApiError);
    // Each client is told to lower the field its own format has.
    expect(never(gemini)).to.include('lower generationConfig.maxOutputTokens or shorten the prompt');
    const claude = new Anthropic({ apiKey: 'sk-tpm-key-00002', baseURL: gw.url, maxRetries: 0 });
    expect(never(await claude.messages.create({ model: 'mock-chat', max_tokens: 10, system: long, messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e))).to.include(
      'lower max_tokens or shorten the prompt',
    );
    const responsesClient = new OpenAI({ apiKey: 'sk-tpm-key-00002', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    expect(never(await responsesClient.responses.create({ model: 'mock-chat', input: long, max_output_tokens: 16 }).catch((e: unknown) => e))).to.include(
      'lower max_output_tokens or shorten the prompt',
    );
    never(
      await claude.messages
        .create({
          model: 'mock-chat',
          max_tokens: 10,
          messages: [
            { role: 'user', content: 'read the file' },
            { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'read', input: { path: 'a.txt' } }] },
            { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: long }] },
          ],
        })
        .catch((e: unknown) => e),
    );
    // A Gemini call that fits: its maxOutputTokens is what is reserved for the answer, not the default 1,024.
    const fits = await ai.models.generateContent({ model: 'mock-chat', contents: 'a b c', config: { maxOutputTokens: 10 } });
    expect(fits.text).to.be.a('string');
    // The earlier turns a previous_response_id stands for count as prompt: the second turn's
    // estimate holds both turns' text (about 1,200 tokens each), not only its own.
    const openai = new OpenAI({ apiKey: 'sk-tpm-key-00003', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const turn = 'hello world '.repeat(400);
    const one = await openai.responses.create({ model: 'mock-chat', input: turn, max_output_tokens: 16 });
    const two = await openai.responses.create({ model: 'mock-chat', input: turn, max_output_tokens: 16, previous_response_id: one.id }).withResponse();
    const reserved = 100_000 - Number(two.response.headers.get('x-ratelimit-remaining-tokens')) - one.usage!.total_tokens;
    expect(reserved).to.be.within(2 * 1200, 2 * 1200 + 100);
  });

  it('tells a compaction past tokens per minute what would fit: a shorter input, or a higher limit when its summary alone is past it', async () => {
    // A compaction reserves the default answer length (1,024) for its summary, which its client cannot set.
    gw = await startGateway(config('    - { name: tpm, key: sk-tpm-key-00002, tpm: 2000 }\n    - { name: small, key: sk-tpm-key-00004, tpm: 1000 }'));
    const conversation = (text: string) => [
      { role: 'user' as const, content: text },
      { role: 'assistant' as const, content: 'noted' },
    ];
    const refusal = (error: unknown): string => {
      expect(error).to.be.instanceOf(OpenAI.RateLimitError);
      const e = error as InstanceType<typeof OpenAI.RateLimitError>;
      expect(e.headers!.get('x-should-retry')).to.equal('false');
      expect(e.message).to.include('on its own');
      return e.message;
    };
    const roomy = new OpenAI({ apiKey: 'sk-tpm-key-00002', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    // About 3,000 tokens of input: a shorter one would fit under 2,000.
    const long = await roomy.responses.compact({ model: 'mock-chat', input: conversation('hello world '.repeat(1000)) }).catch((e: unknown) => e);
    expect(refusal(long)).to.include('send a shorter input');
    const compacted = await roomy.responses.compact({ model: 'mock-chat', input: conversation('a b c') });
    expect(compacted.output.length).to.be.greaterThan(0);
    // Under 1,024 tokens a minute no input is short enough: the key needs a higher limit.
    const small = new OpenAI({ apiKey: 'sk-tpm-key-00004', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const message = refusal(await small.responses.compact({ model: 'mock-chat', input: conversation('a b c') }).catch((e: unknown) => e));
    expect(message).to.include('reserves 1024 tokens for its summary');
    expect(message).to.include('higher tokens-per-minute limit');
    expect(message).to.not.include('shorter input');
  });

  it('limits concurrent requests per key', async () => {
    // Calls that take a second: all six are in the gateway before the first two end, however slow the machine.
    gw = await startGateway(config('    - { name: narrow, key: sk-narrow-key-001, maxConcurrent: 2 }', '', 1000));
    const client = new OpenAI({ apiKey: 'sk-narrow-key-001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const results = await Promise.all(
      Array.from({ length: 6 }, () =>
        client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] }).then(
          () => 'ok',
          (e: unknown) => (e instanceof OpenAI.RateLimitError ? 'limited' : e),
        ),
      ),
    );
    expect(results.filter((r) => r === 'ok')).to.have.length(2);
    expect(results.filter((r) => r === 'limited')).to.have.length(4);
    // Slots come back when calls end.
    await client.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] });
  });

  it('a limit set on a key that had none (the admin API) judges the next call by what the key has in flight and did this minute, not from zero', async () => {
    const ADMIN = 'admin-limits-later-0123456789abcdef';
    const upstream = new FakeOpenAI();
    await upstream.start();
    try {
      // Calls to `held` wait at the back end until the test lets them go.
      upstream.handle('POST /v1/chat/completions', async (_req, res, body) => {
        if ((body as { model?: string }).model === 'held') await upstream.gate();
        json(res, 200, { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
      });
      gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, admin, openai-chat]
auth:
  adminKey: ${ADMIN}
providers: [{ id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [quick, held] }]
`);
      const admin = (method: string, path: string, body?: unknown) =>
        fetch(`${gw!.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }).then(
          async (r) => (await r.json()) as Record<string, any>,
        );
      const made = await admin('POST', '/admin/keys', { name: 'unlimited' });
      const client = new OpenAI({ apiKey: made.key as string, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const ask = (model = 'quick') => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'count me' }] });
      // Concurrency: three calls in flight, then a limit of one at a time.
      const running = [ask('held'), ask('held'), ask('held')];
      await eventually(() => upstream.received.length === 3, 5000, 'the three calls to reach the back end');
      await admin('PATCH', `/admin/keys/${made.id}`, { max_concurrent: 1 });
      const refused = await ask().catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(OpenAI.RateLimitError);
      expect((refused as InstanceType<typeof OpenAI.RateLimitError>).message).to.include('concurrent requests');
      upstream.release();
      await Promise.all(running);
      await admin('PATCH', `/admin/keys/${made.id}`, { max_concurrent: null });
      // Requests per minute: the three this minute (one refused for concurrency is none), 4 more, then a limit of 7.
      for (let i = 0; i < 4; i++) await ask();
      await admin('PATCH', `/admin/keys/${made.id}`, { rpm: 7 });
      expect(await ask().catch((e: unknown) => e)).to.be.instanceOf(OpenAI.RateLimitError);
      await admin('PATCH', `/admin/keys/${made.id}`, { rpm: null });
      // Tokens per minute: 7 calls of 18 tokens ended this minute; a limit of 100 refuses the next.
      await admin('PATCH', `/admin/keys/${made.id}`, { tpm: 100 });
      const overTokens = await ask().catch((e: unknown) => e);
      expect(overTokens).to.be.instanceOf(OpenAI.RateLimitError);
      expect((overTokens as InstanceType<typeof OpenAI.RateLimitError>).message).to.include('tokens');
    } finally {
      await gw?.stop();
      gw = undefined;
      await upstream.stop();
    }
  });

  it('applies the plugin defaults to keys that set no limits of their own', async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, { name: rate-limit, options: { rpm: 2 } }, validation, routing, metering, openai-chat]
auth:
  keys:
    - { name: plain, key: sk-plain-key-0001 }
    - { name: roomy, key: sk-roomy-key-0001, rpm: 100 }
providers: [{ id: mock, type: mock, models: [mock-chat] }]
`);
    const plain = new OpenAI({ apiKey: 'sk-plain-key-0001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const roomy = new OpenAI({ apiKey: 'sk-roomy-key-0001', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const ask = (c: OpenAI) => c.chat.completions.create({ model: 'mock-chat', messages: [{ role: 'user', content: 'x' }] });
    await ask(plain);
    await ask(plain);
    expect(await ask(plain).catch((e: unknown) => e)).to.be.instanceOf(OpenAI.RateLimitError);
    for (let i = 0; i < 3; i++) await ask(roomy);
  });
});

describe('limits no plugin of the pipeline enforces', () => {
  it("are told at start: keys with rpm/tpm/maxConcurrent without 'rate-limit', keys with a budget without 'metering'", async () => {
    const yaml = (plugins: string) => `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: ${plugins}
auth:
  keys:
    - { name: limited, key: sk-limited-000000000001, rpm: 1, maxConcurrent: 1 }
    - { name: budgeted, key: sk-budgeted-00000000001, budget: 0 }
    - { name: free, key: sk-free-000000000000001 }
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`;
    const bare = await startGateway(yaml('[auth, validation, routing, openai-chat]'));
    const full = await startGateway(yaml('[request-log, auth, rate-limit, validation, routing, metering, openai-chat]'));
    try {
      const warned = (gw: RunningGateway) => gw.logs.filter((l) => l.level === 'warn' && String(l.message).includes('are not limited'));
      const told = warned(bare);
      expect(told.map((l) => [l.message, l.keys])).to.deep.equal([
        ["keys with rpm, tpm or maxConcurrent set are not limited: 'rate-limit' is not in plugins:", ['limited']],
        ["keys with a budget set are not limited: 'metering' is not in plugins:", ['budgeted']],
      ]);
      expect(warned(full)).to.have.length(0);
    } finally {
      await bare.stop();
      await full.stop();
    }
  });
});
