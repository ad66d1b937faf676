import { expect } from 'chai';
import OpenAI from 'openai';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { fakeAudio, FAKE_SPEECH_TYPES } from './fakes/openai-audio.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { logRow, usageRow } from './support/rows.js';

const KEY = 'sk-speech-cut-key-0000000001';
const INPUT = 'the back end stops speaking';
const PER_CHARACTER = 0.001;

/**
 * Speech audio is a stream of bytes: when its back end breaks off midway (a reset, or silence past
 * idleMs) the gateway can only cut its client's connection, which the request's end reads like a
 * client leaving. The usage row must still say that the back end failed, as it does for a chat
 * stream cut the same way (the reference here), and charge it as that chat stream is charged.
 */
describe('speech cut off by its back end midway (fake OpenAI upstream, official openai client)', () => {
  const upstream = new FakeOpenAI();
  let gw: RunningGateway;
  let client: OpenAI;

  before(async () => {
    await upstream.start();
    // One chunk of audio (or one chat chunk with text), then per model: the connection reset
    // (`-cut`), or silence until the test ends (`-stall`, `-hold`).
    upstream.handle('POST /v1/audio/speech', async (_req, res, body, fake) => {
      const model = String(body?.model);
      res.writeHead(200, { 'content-type': FAKE_SPEECH_TYPES.mp3! });
      res.write(fakeAudio('mp3', 4000));
      if (model.endsWith('-cut')) setImmediate(() => res.socket?.destroy());
      else await fake.gate();
    });
    upstream.handle('POST /v1/chat/completions', async (_req, res, body, fake) => {
      const model = String(body?.model);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: Record<string, unknown>) =>
        `data: ${JSON.stringify({ id: 'chatcmpl-cut', object: 'chat.completion.chunk', created: 1, model, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'The back end' }));
      if (model.endsWith('-cut')) setImmediate(() => res.socket?.destroy());
      else await fake.gate();
    });
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, { name: routing, options: { failureThreshold: 1000 } }, metering, openai-chat]
auth:
  keys: [{ name: speaker, key: ${KEY} }]
providers:
  - id: up
    type: openai
    baseUrl: ${upstream.url}/v1
    apiKey: ${upstream.apiKey}
    models: [tts-cut, tts-stall, chat-cut, chat-stall]
    timeouts: { idleMs: 300 }
  - { id: patient, type: openai, baseUrl: '${upstream.url}/v1', apiKey: ${upstream.apiKey}, models: [tts-hold] }
pricing:
  tts-cut: { perCharacter: ${PER_CHARACTER} }
  tts-stall: { perCharacter: ${PER_CHARACTER} }
  tts-hold: { perCharacter: ${PER_CHARACTER} }
  chat-cut: { input: 1, output: 2 }
  chat-stall: { input: 1, output: 2 }
`);
    client = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  /** Speech whose transfer must end broken: its request id once the client saw the break. */
  async function brokenSpeech(model: string): Promise<string> {
    const response = await client.audio.speech.create({ model, voice: 'alloy', input: INPUT });
    expect(response.status).to.equal(200);
    const id = response.headers.get('x-request-id')!;
    let broken = false;
    await response.arrayBuffer().catch(() => (broken = true));
    expect(broken, 'the transfer must end broken, never look complete').to.equal(true);
    return id;
  }

  /** A chat stream ended by its back end's failure: its request id once the client got the error event. */
  async function brokenChat(model: string): Promise<string> {
    const { data: stream, response } = await client.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'speak' }] }).withResponse();
    let failed: unknown;
    try {
      for await (const _ of stream) void _;
    } catch (error) {
      failed = error;
    }
    expect(failed, 'the chat stream must end with its error event').to.be.instanceOf(OpenAI.APIError);
    return response.headers.get('x-request-id')!;
  }

  for (const [how, suffix, code, reason] of [
    ['reset after its first chunk', 'cut', 'upstream_error', 'upstream_error'],
    ['silent past idleMs after its first chunk', 'stall', 'upstream_timeout', 'timeout'],
  ] as const) {
    it(`${how}: the usage row's end reason is the back end's (${reason}, as a chat stream cut so), not client_gone; charged the whole input`, async () => {
      const chatId = await brokenChat(`chat-${suffix}`);
      const chatRow = await usageRow(gw, chatId);
      expect(chatRow.endReason, 'the chat stream cut by its back end: the reference').to.equal(reason);

      const speechId = await brokenSpeech(`tts-${suffix}`);
      const row = await usageRow(gw, speechId);
      expect(row.endReason).to.equal(chatRow.endReason);
      expect(row).to.deep.include({ operation: 'speech', status: 200, characters: INPUT.length, source: 'provider' });
      // Charged as the chat stream is once it reached its client, and as a client that leaves: what was asked for.
      expect(row.cost).to.be.closeTo(INPUT.length * PER_CHARACTER, 1e-12);
      expect(chatRow.cost).to.be.greaterThan(0);
      // The request log and the usage row agree on whose failure it was.
      expect((await logRow(gw, speechId)).errorCode).to.equal(code);
      expect((await logRow(gw, chatId)).errorCode).to.equal(code);
    });
  }

  it('a client that leaves mid-speech is still client_gone, and charged the whole input', async () => {
    const abort = new AbortController();
    const response = await client.audio.speech.create({ model: 'tts-hold', voice: 'alloy', input: INPUT }, { signal: abort.signal });
    const id = response.headers.get('x-request-id')!;
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(first.done).to.equal(false);
    abort.abort();
    await reader.cancel().catch(() => undefined);
    const row = await usageRow(gw, id);
    expect(row.endReason).to.equal('client_gone');
    expect(row.cost).to.be.closeTo(INPUT.length * PER_CHARACTER, 1e-12);
    expect((await logRow(gw, id)).errorCode).to.equal('client_closed_request');
  });
});
