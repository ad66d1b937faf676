import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI, sse } from './fakes/openai-upstream.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { usageRow } from './support/rows.js';

const KEY = 'sk-relay-key-00000001';

/** The events a back end sends for one answer, as the texts of their data lines. */
function eventTexts(words: string[]): string[] {
  const chunk = (delta: unknown, finish: string | null = null) =>
    JSON.stringify({ id: 'chatcmpl-u', object: 'chat.completion.chunk', created: 1, model: 'up-model', system_fingerprint: 'fp_u', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], usage: null });
  return [
    chunk({ role: 'assistant', content: '' }),
    ...words.map((w) => chunk({ content: w })),
    chunk({}, 'stop'),
    JSON.stringify({ id: 'chatcmpl-u', object: 'chat.completion.chunk', created: 1, model: 'up-model', choices: [], usage: { prompt_tokens: 7, completion_tokens: words.length, total_tokens: 7 + words.length } }),
  ];
}

/** The data lines of an SSE body, in order. */
function dataLines(body: string): string[] {
  return body
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice(6));
}

const streamed = (extra: Record<string, unknown> = { stream_options: { include_usage: true } }) => ({
  model: 'up-model',
  stream: true,
  ...extra,
  messages: [{ role: 'user', content: 'hi' }],
});

/** POST a chat completion and read the whole answer as text. */
function post(url: string, body: unknown): Promise<{ status: number; text: string; requestId: string }> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'content-length': Buffer.byteLength(text) },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let out = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (out += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: out, requestId: String(res.headers['x-request-id']) }));
    });
    req.end(text);
  });
}

describe('a stream relayed to a client of the back end\'s own format (chat completions with include_usage)', function () {
  this.timeout(30_000);
  const upstream = new FakeOpenAI();
  /** What the next streamed call's back end sends: data texts, each written on its own turn. */
  let script: string[] = [];
  let gw: RunningGateway | undefined;
  let tapped: RunningGateway | undefined;

  before(async () => {
    upstream.handle('POST /v1/chat/completions', async (_req, res) => {
      sse(res);
      for (const text of script) {
        if (res.destroyed) return;
        res.write(`data: ${text}\n\n`);
        await new Promise((resolve) => setImmediate(resolve));
      }
      res.end('data: [DONE]\n\n');
    });
    await upstream.start();
    const config = (plugins: string) => `
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  # the malformed streams below must not take the back end out of rotation for the other tests
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat${plugins}
auth:
  keys: [{ name: relay, key: ${KEY} }]
providers:
  - { id: up, type: openai, baseUrl: ${upstream.url}/v1, apiKey: ${upstream.apiKey}, models: [up-model] }
pricing:
  up-model: { input: 1, output: 2 }
`;
    gw = await startGateway(config(''));
    // A third-party plugin whose onStreamChunk tap reads (and changes) every chunk.
    const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-tap-'));
    const plugin = path.join(dir, 'shouting-tap.mjs');
    writeFileSync(
      plugin,
      `export default {
  name: 'shouting-tap',
  version: '1.0.0',
  apply(api) {
    api.hooks.onStreamChunk.tap('shouting-tap', (chunk) => {
      (globalThis.__tapSaw ??= []).push(Array.isArray(chunk && chunk.choices) ? 'chunk' : String(chunk && chunk.constructor && chunk.constructor.name));
      const delta = chunk && chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && typeof delta.content === 'string') return { ...chunk, choices: [{ ...chunk.choices[0], delta: { ...delta, content: delta.content.toUpperCase() } }] };
      return chunk;
    });
  },
};
`,
    );
    tapped = await startGateway(config(`\n  - ${JSON.stringify(plugin)}`));
  });
  after(async () => {
    await gw?.stop();
    await tapped?.stop();
    await upstream.stop();
  });

  it('an OpenAI SDK client that asks for usage gets each event exactly as the back end sent it, and the call is metered from the usage chunk', async () => {
    script = eventTexts(['Hello', ',', ' world', ' "quoted"', ' \\u00e9t\u00e9']);
    const client = new OpenAI({ apiKey: KEY, baseURL: `${gw!.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({ model: 'up-model', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish ??= chunk.choices[0]?.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).to.equal('Hello, world "quoted" \\u00e9t\u00e9');
    expect(finish).to.equal('stop');
    expect(usage).to.deep.equal({ prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 });

    const raw = await post(gw!.url, streamed());
    expect(raw.status).to.equal(200);
    expect(dataLines(raw.text)).to.deep.equal([...script, '[DONE]']);
    await gw!.gateway.stores.flush();
    const rows = await gw!.gateway.stores.usage.list({ limit: 10 });
    const row = rows.find((r) => r.requestId === raw.requestId);
    expect(row?.source).to.equal('provider');
    expect(row?.completionTokens).to.equal(5);
  });

  it('a client that leaves before the usage chunk is charged for the pieces it was sent', async () => {
    const words = Array.from({ length: 40 }, (_, i) => ` w${i}`);
    script = eventTexts(words);
    const cut = await new Promise<string>((resolve, reject) => {
      const body = JSON.stringify(streamed());
      const req = http.request(`${gw!.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}`, 'content-length': Buffer.byteLength(body) },
      });
      req.on('error', () => undefined);
      req.on('response', (res) => {
        let seen = '';
        res.on('data', (d: Buffer) => {
          seen += d.toString('utf8');
          // Leave once the tenth piece arrived.
          if (seen.includes('" w9"')) {
            res.destroy();
            resolve(String(res.headers['x-request-id']));
          }
        });
        res.on('end', () => reject(new Error('the stream ended before the client left')));
      });
      req.end(body);
    });
    // Metered once the tokenizer thread has counted what was sent: a longer wait than usual.
    const row = await usageRow(gw!, cut, 5000);
    expect(row!.source).to.equal('estimated');
    expect(row!.endReason).to.equal('client_gone');
    // Each piece " wN" is two tokens or more; at least the ten the client read were counted, and
    // no more than the back end sent.
    expect(row!.completionTokens).to.be.at.least(20);
    expect(row!.completionTokens).to.be.below(3 * words.length);
  });

  it('a third-party onStreamChunk tap sees every event parsed, and its changes reach the client', async () => {
    (globalThis as { __tapSaw?: string[] }).__tapSaw = [];
    script = eventTexts(['quiet', ' words']);
    const raw = await post(tapped!.url, streamed());
    expect(raw.status).to.equal(200);
    expect((globalThis as { __tapSaw?: string[] }).__tapSaw).to.deep.equal(['chunk', 'chunk', 'chunk', 'chunk', 'chunk']);
    const contents = dataLines(raw.text)
      .filter((line) => line !== '[DONE]')
      .map((line) => (JSON.parse(line) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? '')
      .join('');
    expect(contents).to.equal('QUIET WORDS');
  });

  it('an event that is not a chunk still ends the stream with an upstream_error event, whatever it looks like', async () => {
    // Each of these is relayed by nobody: the event before it reaches the client, the events after it do not.
    for (const bad of ['not json at all', '{"choices":[null]}', '{"choices":null}', '{"choices":[{"delta":{}}}', '[1,2]']) {
      const pieces = eventTexts(['ok', 'never']);
      script = [pieces[0]!, pieces[1]!, bad, pieces[2]!];
      const raw = await post(gw!.url, streamed());
      const lines = dataLines(raw.text);
      expect(lines.slice(0, 2), bad).to.deep.equal([pieces[0], pieces[1]]);
      expect(lines[lines.length - 1], bad).to.contain('upstream_error');
      expect(raw.text, bad).not.to.contain(bad);
      expect(raw.text, bad).not.to.contain('never');
    }
  });

  it('the events that arrive in the same read as a bad one reach the client, in order, before the error event', async () => {
    // One write from the back end: three good events and a bad one, read by the gateway at once.
    const pieces = eventTexts(['first', 'second']);
    script = [`${pieces[0]}\n\ndata: ${pieces[1]}\n\ndata: ${pieces[2]}\n\ndata: {"choices":[null]}`, pieces[3]!];
    const raw = await post(gw!.url, streamed());
    const lines = dataLines(raw.text);
    expect(lines.slice(0, 3)).to.deep.equal([pieces[0], pieces[1], pieces[2]]);
    expect(lines).to.have.length(4);
    expect(lines[3]).to.contain('upstream_error');
    expect(raw.text).not.to.contain('"choices":[null]');
  });

  it('a client that did not ask for usage gets no usage field on any event', async () => {
    script = eventTexts(['plain']);
    const raw = await post(gw!.url, streamed({}));
    const lines = dataLines(raw.text).filter((line) => line !== '[DONE]');
    expect(lines.length).to.equal(3);
    for (const line of lines) expect(line).not.to.contain('usage');
  });
});
