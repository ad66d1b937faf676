import http from 'node:http';
import { expect } from 'chai';
import OpenAI from 'openai';
import { LocalServer, readBody } from './fakes/server.js';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-upstream-bytes-client-01';
const PROVIDER_KEY = 'sk-upstream-bytes-provider-secret-01';

type Mode = 'upper-content-type' | 'bom';

/**
 * One back end of each type (OpenAI chat completions, Anthropic messages, Google generateContent),
 * each checking its vendor's credential, answering valid answers in bytes a vendor's own client
 * reads although they are unusual: a Content-Type in capitals (media types are case-insensitive),
 * a JSON body after a UTF-8 byte order mark.
 */
class OddBytes extends LocalServer {
  mode: Mode = 'bom';

  protected async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const body = JSON.parse((await readBody(req)).toString('utf8')) as Record<string, unknown>;
    const path = (req.url ?? '').split('?')[0]!;
    const stream = body.stream === true || path.includes(':streamGenerateContent');
    let answer: unknown;
    let events: string[];
    if (path === '/v1/chat/completions') {
      if (req.headers.authorization !== `Bearer ${PROVIDER_KEY}`) return void res.writeHead(401).end();
      const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
      answer = { id: 'chatcmpl-1', object: 'chat.completion', created: 1, model: 'gpt', choices: [{ index: 0, message: { role: 'assistant', content: 'héllo 👋' }, finish_reason: 'stop' }], usage };
      const chunk = (delta: object, finish: string | null) => ({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt', choices: [{ index: 0, delta, finish_reason: finish }] });
      events = [chunk({ role: 'assistant', content: 'héllo' }, null), chunk({ content: ' 👋' }, null), chunk({}, 'stop'), { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'gpt', choices: [], usage }]
        .map((e) => `data: ${JSON.stringify(e)}\n\n`)
        .concat('data: [DONE]\n\n');
    } else if (path === '/v1/messages') {
      if (req.headers['x-api-key'] !== PROVIDER_KEY) return void res.writeHead(401).end();
      const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude', content: [{ type: 'text', text: 'héllo 👋' }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 3, output_tokens: 2 } };
      answer = message;
      events = [
        ['message_start', { message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 1 } } }],
        ['content_block_start', { index: 0, content_block: { type: 'text', text: '' } }],
        ['content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'héllo 👋' } }],
        ['content_block_stop', { index: 0 }],
        ['message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 2 } }],
        ['message_stop', {}],
      ].map(([name, data]) => `event: ${name as string}\ndata: ${JSON.stringify({ type: name, ...(data as object) })}\n\n`);
    } else {
      if (req.headers['x-goog-api-key'] !== PROVIDER_KEY) return void res.writeHead(400).end();
      const usageMetadata = { promptTokenCount: 3, candidatesTokenCount: 2, totalTokenCount: 5 };
      answer = { candidates: [{ content: { role: 'model', parts: [{ text: 'héllo 👋' }] }, finishReason: 'STOP', index: 0 }], usageMetadata, modelVersion: 'gemini' };
      events = [`data: ${JSON.stringify(answer)}\r\n\r\n`];
    }
    if (!stream) {
      const text = JSON.stringify(answer);
      res.writeHead(200, { 'content-type': this.mode === 'upper-content-type' ? 'Application/JSON' : 'application/json' });
      return void res.end(this.mode === 'bom' ? `\ufeff${text}` : text);
    }
    res.writeHead(200, { 'content-type': this.mode === 'upper-content-type' ? 'Text/Event-Stream; charset=UTF-8' : 'text/event-stream' });
    res.end(events.join(''));
  }
}

describe('back ends answering in unusual but valid bytes', function () {
  this.timeout(30_000);
  const upstream = new OddBytes();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
auth:
  keys: [{ name: odd, key: ${KEY} }]
providers:
  - { id: oa, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${PROVIDER_KEY}, models: [gpt] }
  - { id: an, type: anthropic, baseUrl: ${upstream.url}, apiKey: ${PROVIDER_KEY}, models: [claude] }
  - { id: go, type: gemini, baseUrl: ${upstream.url}/v1beta, apiKey: ${PROVIDER_KEY}, models: [gemini] }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  for (const mode of ['upper-content-type', 'bom'] as const) {
    for (const model of ['gpt', 'claude', 'gemini']) {
      it(`${mode}, ${model}: the answer, whole and streamed, as if the bytes were the usual ones`, async () => {
        upstream.mode = mode;
        const whole = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });
        expect(whole.choices[0]!.message.content).to.equal('héllo 👋');
        expect(whole.usage).to.include({ prompt_tokens: 3, completion_tokens: 2 });
        const stream = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } });
        let text = '';
        let usage: OpenAI.CompletionUsage | null | undefined;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.delta.content ?? '';
          usage = chunk.usage ?? usage;
        }
        expect(text).to.equal('héllo 👋');
        expect(usage).to.include({ prompt_tokens: 3, completion_tokens: 2 });
      });
    }
  }
});
