import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-keepalive-client-0001';

const chunk = (content: string, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'thinker', choices: [{ index: 0, delta: { content }, finish_reason: finish }] })}\n\n`;

/**
 * A model that thinks a long while between two pieces of its answer: the client's stream gets
 * a keep-alive comment after server.streamKeepAliveMs without a byte, so that a proxy between the
 * gateway and its client does not cut it as idle; every client's parser skips the comment.
 */
describe('keep-alive comments in a silent stream', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0, streamKeepAliveMs: 150 }
storage: { url: ':memory:' }
plugins: [auth, validation, routing, openai-chat, anthropic-messages, gemini]
auth:
  keys: [{ name: k, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [thinker] }
`);
    // One piece, then nothing until released, then the rest.
    upstream.handle('POST /v1/chat/completions', async (_req, res, _body, fake) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk('Let me think. '));
      await fake.gate();
      res.write(chunk('Done.', 'stop'));
      res.end('data: [DONE]\n\n');
    });
  });
  after(async () => {
    upstream.release();
    await gw?.stop();
    await upstream.stop();
  });

  it('the raw stream carries ": keep-alive" comments while the back end is silent, then the rest of the answer', async () => {
    const response = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'thinker', stream: true, messages: [{ role: 'user', content: 'think' }] }),
    });
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Two comments at least arrive while the back end says nothing ...
    while ((text.match(/^: keep-alive$/gm) ?? []).length < 2) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended early: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    expect(text.indexOf('Let me think.')).to.be.lessThan(text.indexOf(': keep-alive'));
    upstream.release();
    // ... then the answer goes on to its end.
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    expect(text).to.include('Done.').and.include('data: [DONE]');
  });

  it("a Gemini client's stream gets no comment (Google sends none, and its older SDK fails on one), while a chat stream equally silent gets them", async () => {
    const read = async (response: Response, until: (text: string) => boolean): Promise<{ text: string; reader: ReadableStreamDefaultReader<Uint8Array> }> => {
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!until(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      return { text, reader };
    };
    const gemini = await fetch(`${gw.url}/v1beta/models/thinker:streamGenerateContent?alt=sse`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': KEY },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'think' }] }] }),
    });
    const geminiStart = await read(gemini, (t) => t.includes('Let me think.'));
    const chat = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify({ model: 'thinker', stream: true, messages: [{ role: 'user', content: 'think' }] }),
    });
    // Both silent: the chat stream's two comments say at least two periods have passed.
    const chatStart = await read(chat, (t) => (t.match(/^: keep-alive$/gm) ?? []).length >= 2);
    upstream.release();
    let rest = '';
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await geminiStart.reader.read();
      if (done) break;
      rest += decoder.decode(value, { stream: true });
    }
    await chatStart.reader.cancel();
    const text = geminiStart.text + rest;
    expect(text).to.include('Done.');
    expect(text).to.not.include(': keep-alive');
  });

  it('the openai and Anthropic SDKs read such a stream as if the comments were not there', async () => {
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const stream = await openai.chat.completions.create({ model: 'thinker', stream: true, messages: [{ role: 'user', content: 'think' }] });
    let answer = '';
    for await (const part of stream) {
      answer += part.choices[0]?.delta.content ?? '';
      if (answer === 'Let me think. ') setTimeout(() => upstream.release(), 500).unref(); // several keep-alive periods of silence
    }
    expect(answer).to.equal('Let me think. Done.');

    const claude = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const messages = claude.messages.stream({ model: 'thinker', max_tokens: 50, messages: [{ role: 'user', content: 'think' }] });
    messages.on('text', (delta, snapshot) => {
      if (snapshot === 'Let me think. ') setTimeout(() => upstream.release(), 500).unref();
    });
    const final = await messages.finalMessage();
    expect(final.content.map((block) => (block.type === 'text' ? block.text : block.type))).to.deep.equal(['Let me think. Done.']);
  });
});
