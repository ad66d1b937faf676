import { expect } from 'chai';
import { GatewayError, upstreamBytesOf, type ChatChunk, type UpstreamBody } from '../../../core/index.js';
import { Losses } from '../../formats/anthropic-messages/request.js';
import { GenerateContentStreamTranslator } from '../gemini/stream.js';
import { anthropicFrame, googleFrame, relayEvents } from './relay.js';
import { MessageStreamTranslator } from './stream.js';

type Json = Record<string, unknown>;

/** A body that yields `text` in pieces of `size` bytes (events split anywhere). */
function bodyOf(text: string, size: number): UpstreamBody & { destroyed: boolean } {
  const bytes = Buffer.from(text, 'utf8');
  const body = {
    destroyed: false,
    destroy() {
      body.destroyed = true;
    },
    async *[Symbol.asyncIterator]() {
      for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
    },
  };
  return body as unknown as UpstreamBody & { destroyed: boolean };
}

async function collect(source: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const out: ChatChunk[] = [];
  for await (const chunk of source) out.push(chunk);
  return out;
}

const anthropicEvent = (name: string, data: Json) => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;

const ANTHROPIC = [
  anthropicEvent('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [], usage: { input_tokens: 5, output_tokens: 1 } } }),
  anthropicEvent('ping', {}),
  anthropicEvent('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  anthropicEvent('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'héllo ✓' } }),
  anthropicEvent('content_block_stop', { index: 0 }),
  anthropicEvent('something_new', { x: 1 }),
  anthropicEvent('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 3 } }),
  anthropicEvent('message_stop', {}),
].join('');

describe('relayEvents: canonical chunks that carry each upstream event text once', () => {
  for (const size of [1, 7, 4096]) {
    it(`anthropic events split every ${size} bytes: the texts are the stream, in order, each once`, async () => {
      const chunks = await collect(relayEvents(bodyOf(ANTHROPIC, size), new MessageStreamTranslator(new Losses()), new AbortController().signal, 'anthropic-messages', anthropicFrame));
      const texts = chunks.map((c) => upstreamBytesOf(c, 'anthropic-messages'));
      expect(texts.every((t) => typeof t === 'string')).to.equal(true);
      expect(texts.join('')).to.equal(ANTHROPIC);
      expect(texts.filter((t) => t !== '')).to.have.length(8);
      // The canonical reading is still there: content, the finish, and the usage chunk.
      expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).to.equal('héllo ✓');
      expect(chunks.some((c) => c.choices[0]?.finish_reason === 'stop')).to.equal(true);
      const usage = chunks.find((c) => c.usage)!;
      expect(usage.usage).to.deep.include({ prompt_tokens: 5, completion_tokens: 3 });
      // message_stop makes two chunks: its text rides on the first, the usage chunk carries ''.
      expect(upstreamBytesOf(usage, 'anthropic-messages')).to.equal('');
      // Relay-only chunks carry no choices and no usage.
      const ping = chunks.find((c) => upstreamBytesOf(c, 'anthropic-messages') === anthropicEvent('ping', {}))!;
      expect(ping.choices).to.deep.equal([]);
      expect(ping.usage).to.equal(undefined);
      // Kept for this format only.
      expect(upstreamBytesOf(chunks[0], 'openai-chat')).to.equal(undefined);
    });
  }

  it('a stream cut before message_stop is an upstream_error after the events that came', async () => {
    const cut = ANTHROPIC.slice(0, ANTHROPIC.indexOf('event: message_delta'));
    const seen: string[] = [];
    let failure: unknown;
    try {
      for await (const chunk of relayEvents(bodyOf(cut, 64), new MessageStreamTranslator(new Losses()), new AbortController().signal, 'anthropic-messages', anthropicFrame)) {
        seen.push(String(upstreamBytesOf(chunk, 'anthropic-messages')));
      }
    } catch (error) {
      failure = error;
    }
    expect(failure).to.be.instanceOf(GatewayError);
    expect((failure as GatewayError).code).to.equal('upstream_error');
    expect(seen.join('')).to.equal(cut);
  });

  it('gemini events (framed \\r\\n\\r\\n): each text once, the usage chunk the translator adds at the end carries none', async () => {
    const events = [
      { candidates: [{ content: { role: 'model', parts: [{ text: 'Hi' }] }, index: 0 }], modelVersion: 'g', responseId: 'r1' },
      { candidates: [{ content: { role: 'model', parts: [{ text: ' there' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 2, totalTokenCount: 6 }, modelVersion: 'g', responseId: 'r1' },
    ];
    const text = events.map((e) => `data: ${JSON.stringify(e)}\r\n\r\n`).join('');
    const chunks = await collect(relayEvents(bodyOf(text, 5), new GenerateContentStreamTranslator(new Losses()), new AbortController().signal, 'gemini', googleFrame));
    expect(chunks.map((c) => upstreamBytesOf(c, 'gemini')).join('')).to.equal(text);
    const last = chunks[chunks.length - 1]!;
    expect(last.usage).to.deep.include({ prompt_tokens: 4, completion_tokens: 2 });
    expect(upstreamBytesOf(last, 'gemini')).to.equal('');
  });
});
