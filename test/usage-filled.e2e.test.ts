import { expect } from 'chai';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';
import { FakeOpenAI, chunk, json, sse } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-filled-usage-key-000001';
const WORDS = 'one two three four five six seven eight nine ten';

/**
 * A back end that reports no usage (an OpenAI-compatible server that ignores
 * stream_options.include_usage): the client gets the gateway's count, the one it is charged for,
 * in its own format, as it would get the vendor's.
 */
describe('usage a back end did not report, given to the client as it is charged', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, anthropic-messages, gemini]
auth:
  keys: [{ name: filled, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [silent, talks] }
pricing:
  silent: { input: 1, output: 2 }
  talks: { input: 1, output: 2 }
`);
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  /** Streams WORDS in pieces, then [DONE], with a usage chunk only for `talks` when asked. */
  const streaming = () =>
    upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
      if (body?.stream !== true) {
        json(res, 200, {
          id: 'chatcmpl-silent',
          object: 'chat.completion',
          created: 7,
          model: String(body?.model),
          choices: [{ index: 0, message: { role: 'assistant', content: WORDS }, finish_reason: 'stop' }],
        });
        return;
      }
      sse(res);
      const extra = { id: 'chatcmpl-silent', created: 7, model: String(body?.model) };
      res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`);
      for (const [i, word] of WORDS.split(' ').entries()) res.write(chunk(i === 0 ? word : ` ${word}`, extra));
      res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      if (body?.model === 'talks') {
        res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 21, completion_tokens: 10, total_tokens: 31 } })}\n\n`);
      }
      res.end('data: [DONE]\n\n');
    });

  const rowOf = async (requestId: string | null) => {
    await gw.gateway.stores.flush();
    const row = (await gw.gateway.stores.usage.list({ limit: 1000 })).find((r) => r.requestId === requestId);
    expect(row, `a usage row for ${requestId}`).to.not.equal(undefined);
    return row!;
  };

  it('an OpenAI client that asked include_usage gets a last usage chunk with the count it is charged for', async () => {
    streaming();
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'silent', messages: [{ role: 'user', content: 'count to ten' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const chunks = [];
    for await (const piece of stream) chunks.push(piece);
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).to.deep.equal([]);
    expect(last.id).to.equal('chatcmpl-silent');
    expect(last.model).to.equal('silent');
    expect(last.object).to.equal('chat.completion.chunk');
    expect(last.usage!.completion_tokens).to.equal(10);
    expect(last.usage!.prompt_tokens).to.be.greaterThan(0);
    expect(last.usage!.total_tokens).to.equal(last.usage!.prompt_tokens + 10);
    // Exactly one usage chunk, after the finish.
    expect(chunks.filter((c) => c.usage)).to.have.length(1);
    expect(chunks[chunks.length - 2]!.choices[0]!.finish_reason).to.equal('stop');
    const row = await rowOf(response.headers.get('x-request-id'));
    expect(row.source).to.equal('estimated');
    expect([row.promptTokens, row.completionTokens]).to.deep.equal([last.usage!.prompt_tokens, 10]);
    expect(row.cost).to.be.closeTo((last.usage!.prompt_tokens * 1 + 10 * 2) / 1e6, 1e-12);
  });

  it('a client that did not ask for usage still gets none; a back end that reported usage is relayed, not counted', async () => {
    streaming();
    const plain = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'silent', messages: [{ role: 'user', content: 'count' }], stream: true }),
    });
    const text = await plain.text();
    expect(text).to.not.include('"usage"');
    expect(text.trimEnd().endsWith('data: [DONE]')).to.equal(true);
    expect((await rowOf(plain.headers.get('x-request-id'))).source).to.equal('estimated');

    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'talks', messages: [{ role: 'user', content: 'count' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const usages = [];
    for await (const piece of stream) if (piece.usage) usages.push(piece.usage);
    expect(usages).to.deep.equal([{ prompt_tokens: 21, completion_tokens: 10, total_tokens: 31 }]);
    const row = await rowOf(response.headers.get('x-request-id'));
    expect([row.source, row.promptTokens, row.completionTokens]).to.deep.equal(['provider', 21, 10]);
  });

  it('a non-streamed answer without usage reaches the client with the counted usage in its body', async () => {
    streaming();
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data, response } = await client.chat.completions.create({ model: 'silent', messages: [{ role: 'user', content: 'count' }] }).withResponse();
    expect(data.choices[0]!.message.content).to.equal(WORDS);
    expect(data.id).to.equal('chatcmpl-silent');
    expect(data.usage!.completion_tokens).to.equal(10);
    const row = await rowOf(response.headers.get('x-request-id'));
    expect(row.source).to.equal('estimated');
    expect([row.promptTokens, row.completionTokens]).to.deep.equal([data.usage!.prompt_tokens, data.usage!.completion_tokens]);
    expect(Number(response.headers.get('x-switchyard-cost'))).to.be.closeTo(row.cost, 1e-12);
  });

  it('a Claude client streaming from it sees the counted tokens in message_delta, as the ledger has them', async () => {
    streaming();
    const client = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const stream = client.messages.stream({ model: 'silent', max_tokens: 100, messages: [{ role: 'user', content: 'count to ten' }] });
    const message = await stream.finalMessage();
    expect(message.content[0]).to.deep.include({ type: 'text', text: WORDS });
    expect(message.usage.output_tokens).to.equal(10);
    const row = await rowOf(stream.request_id ?? (await stream.withResponse()).response.headers.get('x-request-id'));
    expect(row.source).to.equal('estimated');
    expect(row.completionTokens).to.equal(10);
  });

  it("a Claude client's images are counted as count_tokens counts them (1,600 tokens each), in the ledger and in the usage it gets", async () => {
    streaming();
    const client = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
    const params = {
      model: 'silent',
      max_tokens: 100,
      messages: [{ role: 'user' as const, content: [{ type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PNG } }, { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: PNG } }, { type: 'text' as const, text: 'describe both' }] }],
    };
    const counted = await client.messages.countTokens(params);
    expect(counted.input_tokens).to.be.greaterThan(3200);
    const { data, response } = await client.messages.create(params).withResponse();
    expect(data.usage.input_tokens).to.equal(counted.input_tokens);
    const row = await rowOf(response.headers.get('x-request-id'));
    expect(row.source).to.equal('estimated');
    expect(row.promptTokens).to.equal(counted.input_tokens);
  });

  it('a Gemini client streaming from it gets usageMetadata on its last event', async () => {
    streaming();
    const ai = new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gw.url } });
    const stream = await ai.models.generateContentStream({ model: 'silent', contents: 'count to ten' });
    let usage;
    let text = '';
    for await (const piece of stream) {
      text += piece.text ?? '';
      if (piece.usageMetadata) usage = piece.usageMetadata;
    }
    expect(text).to.equal(WORDS);
    expect(usage?.candidatesTokenCount).to.equal(10);
    expect(usage?.promptTokenCount).to.be.greaterThan(0);
    expect(usage?.totalTokenCount).to.equal(usage!.promptTokenCount! + 10);
  });

  it('usage whose counts are not whole non-negative numbers (strings, negatives) is none: every client format gets the count it is charged, and is charged alike', async () => {
    for (const usage of [
      { prompt_tokens: '1000', completion_tokens: '300', total_tokens: '1300' },
      { prompt_tokens: -100000, completion_tokens: 10, total_tokens: -99990 },
    ]) {
      upstream.handle('POST /v1/chat/completions', (_req, res, body) =>
        json(res, 200, {
          id: 'chatcmpl-broken',
          object: 'chat.completion',
          created: 7,
          model: String(body?.model),
          choices: [{ index: 0, message: { role: 'assistant', content: WORDS }, finish_reason: 'stop' }],
          usage,
        }),
      );
      const prompt = 'count to ten';
      const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
      const chat = await openai.chat.completions.create({ model: 'silent', messages: [{ role: 'user', content: prompt }] }).withResponse();
      const responses = await openai.responses.create({ model: 'silent', input: [{ role: 'user', content: prompt }] }).withResponse();
      const claude = await new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 }).messages
        .create({ model: 'silent', max_tokens: 100, messages: [{ role: 'user', content: prompt }] })
        .withResponse();
      const gemini = await fetch(`${gw.url}/v1beta/models/silent:generateContent`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-goog-api-key': KEY },
        body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: prompt }] }] }),
      });
      const geminiUsage = ((await gemini.json()) as { usageMetadata: Record<string, unknown> }).usageMetadata;

      const seen = [
        { id: chat.response.headers.get('x-request-id'), cost: chat.response.headers.get('x-switchyard-cost'), output: chat.data.usage!.completion_tokens, total: chat.data.usage!.total_tokens },
        { id: responses.response.headers.get('x-request-id'), cost: responses.response.headers.get('x-switchyard-cost'), output: responses.data.usage!.output_tokens, total: responses.data.usage!.total_tokens },
        { id: claude.response.headers.get('x-request-id'), cost: claude.response.headers.get('x-switchyard-cost'), output: claude.data.usage.output_tokens, total: claude.data.usage.input_tokens + claude.data.usage.output_tokens },
        { id: gemini.headers.get('x-request-id'), cost: gemini.headers.get('x-switchyard-cost'), output: geminiUsage.candidatesTokenCount, total: geminiUsage.totalTokenCount },
      ];
      for (const call of seen) {
        const row = await rowOf(call.id);
        expect(row.source, JSON.stringify(usage)).to.equal('estimated');
        expect(call.output).to.equal(10);
        expect(typeof call.total).to.equal('number');
        expect(call.total).to.equal(row.promptTokens! + row.completionTokens!);
        expect(row.completionTokens).to.equal(10);
        expect(Number(call.cost)).to.be.closeTo(row.cost, 1e-12);
      }
      // One answer, one prompt: each format's call costs the same.
      expect(new Set(seen.map((call) => call.cost)).size, JSON.stringify(seen)).to.equal(1);
    }
  });

  it("a Responses call whose input is a string is counted as the one message it is, as chat counts it (streamed or not)", async () => {
    streaming();
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const prompt = 'Say hello to everyone in the room';
    const chat = await openai.chat.completions.create({ model: 'silent', messages: [{ role: 'user', content: prompt }] }).withResponse();
    const chatRow = await rowOf(chat.response.headers.get('x-request-id'));
    const responses = await openai.responses.create({ model: 'silent', input: prompt }).withResponse();
    expect(responses.data.usage!.input_tokens).to.equal(chatRow.promptTokens);
    expect((await rowOf(responses.response.headers.get('x-request-id'))).promptTokens).to.equal(chatRow.promptTokens);
    const stream = await openai.responses.create({ model: 'silent', input: prompt, stream: true }).withResponse();
    let usage;
    for await (const event of stream.data) if (event.type === 'response.completed') usage = event.response.usage;
    expect(usage?.input_tokens).to.equal(chatRow.promptTokens);
    expect((await rowOf(stream.response.headers.get('x-request-id'))).promptTokens).to.equal(chatRow.promptTokens);
  });

  it('a stream whose usage counts are not whole numbers: the client gets one usage, the count it is charged, in every format', async () => {
    upstream.handle('POST /v1/chat/completions', (_req, res, body) => {
      sse(res);
      const extra = { id: 'chatcmpl-broken', created: 7, model: String(body?.model) };
      res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`);
      for (const [i, word] of WORDS.split(' ').entries()) res.write(chunk(i === 0 ? word : ` ${word}`, extra));
      res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ ...extra, object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: '1000', completion_tokens: '300', total_tokens: '1300' } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const { data: stream, response } = await openai.chat.completions
      .create({ model: 'silent', messages: [{ role: 'user', content: 'count to ten' }], stream: true, stream_options: { include_usage: true } })
      .withResponse();
    const usages = [];
    for await (const piece of stream) if (piece.usage) usages.push(piece.usage);
    expect(usages).to.have.length(1);
    expect(usages[0]!.completion_tokens).to.equal(10);
    const row = await rowOf(response.headers.get('x-request-id'));
    expect(row.source).to.equal('estimated');
    expect([row.promptTokens, row.completionTokens]).to.deep.equal([usages[0]!.prompt_tokens, 10]);

    const claude = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const message = await claude.messages.stream({ model: 'silent', max_tokens: 100, messages: [{ role: 'user', content: 'count to ten' }] }).finalMessage();
    expect(message.usage.output_tokens).to.equal(10);
    expect(typeof message.usage.input_tokens).to.equal('number');
  });
});
