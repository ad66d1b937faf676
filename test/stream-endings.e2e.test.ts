import { expect } from 'chai';
import http from 'node:http';
import { eventsOf as anthropicEvents, FakeAnthropic, message, type FakeEvent } from './fakes/anthropic-upstream.js';
import { answer, eventsOf as geminiEvents, FakeGemini } from './fakes/gemini-upstream.js';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { installNativeResponses, type NativeResponses } from './fakes/openai-responses.js';
import { chatStreamEvents } from './support/calls.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { logRow } from './support/rows.js';
import type { RequestLogEntry, UsageRecord } from '../core/store/types.js';

const KEY = 'sk-client-stream-endings-0001';
/** idleMs of the back ends whose answers end while their connection stays open: any wait into it is an error event. */
const LINGER_IDLE_MS = 4000;
/** idleMs of the back end that falls silent after its opening event, while the gateway primes its stream. */
const STALL_IDLE_MS = 1200;

type Json = Record<string, any>;

/** A promise settled by hand, to let a fake's held connection go at the end of a test. */
function latch(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** A streamed call over fetch, read to its end: status, request id and the whole text. */
async function streamText(url: string, path: string, body: Json, headers: Record<string, string>): Promise<{ status: number; id: string; text: string }> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, id: res.headers.get('x-request-id') ?? '', text: await res.text() };
}

/**
 * How streams end, and what their silences and early leavers cost: a back end that sent its whole
 * answer but keeps the connection open (Anthropic's message_stop, Gemini's last event), a silence
 * right after the opening event while the gateway still primes the stream, and a client that leaves
 * while it does.
 */
describe('stream endings: the last event ends a stream, idleMs while priming, usage read while priming', function () {
  this.timeout(20_000);
  const anthropic = new FakeAnthropic();
  const gemini = new FakeGemini();
  const openai = new FakeOpenAI();
  let native: NativeResponses;
  let gw: RunningGateway;

  before(async () => {
    await anthropic.start();
    await gemini.start();
    await openai.start();
    native = installNativeResponses(openai);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: endings, key: ${KEY} }]
plugins:
  - request-log
  - auth
  - rate-limit
  - validation
  - { name: routing, options: { failureThreshold: 1000 } }
  - metering
  - openai-chat
  - anthropic-messages
  - gemini
providers:
  - id: claude
    type: anthropic
    baseUrl: ${anthropic.url}
    apiKey: ${anthropic.apiKey}
    timeouts: { idleMs: ${LINGER_IDLE_MS} }
    models: [claude-linger, claude-leave]
  - id: claude-stall
    type: anthropic
    baseUrl: ${anthropic.url}
    apiKey: ${anthropic.apiKey}
    timeouts: { idleMs: ${STALL_IDLE_MS} }
    models: [claude-silent]
  - id: google
    type: gemini
    baseUrl: ${gemini.url}
    apiKey: ${gemini.apiKey}
    timeouts: { idleMs: ${LINGER_IDLE_MS} }
    models: [gemini-linger]
  - id: responses
    type: openai
    responsesApi: true
    baseUrl: ${openai.url}/v1
    apiKey: ${openai.apiKey}
    timeouts: { idleMs: ${LINGER_IDLE_MS} }
    models: [gpt-linger]
models:
  - name: leave-native
    targets: [{ provider: claude, model: claude-leave }]
  - name: leave-openai
    targets: [{ provider: claude, model: claude-leave }]
pricing:
  leave-native: { input: 1, output: 2, cachedInput: 0.1, cacheWrite: 1.25 }
  leave-openai: { input: 1, output: 2, cachedInput: 0.1, cacheWrite: 1.25 }
`);
  });
  afterEach(() => {
    anthropic.reset();
    gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await anthropic.stop();
    await gemini.stop();
    await openai.stop();
  });

  /** The request-log row of a call that succeeded: a 200 with no error, one attempt (the breaker counted a success). */
  const expectSuccess = async (id: string): Promise<RequestLogEntry> => {
    const row = await logRow(gw, id);
    expect(row.status).to.equal(200);
    expect(row.errorCode).to.equal(null);
    expect(row.attempts).to.have.length(1);
    expect(row.attempts[0]!.error).to.equal(undefined);
    return row;
  };

  describe('an answer complete while the back end keeps the connection open', () => {
    const claudeAnswer = () => anthropicEvents(message([{ type: 'text', text: 'all of it' }]));

    it('a Responses stream ends at response.completed (the API has no [DONE]): no error event, a success, the connection let go', async () => {
      const linger = latch();
      native.linger = linger.promise;
      try {
        const { status, id, text } = await streamText(gw.url, '/v1/responses', { model: 'gpt-linger', input: 'hi', stream: true }, { authorization: `Bearer ${KEY}` });
        expect(status).to.equal(200);
        expect(text).to.include('event: response.completed');
        expect(text).to.not.include('response.failed').and.not.include('event: error');
        await expectSuccess(id);
      } finally {
        native.linger = undefined;
        linger.open();
      }
    });

    it('Anthropic, pass-through: the stream ends at message_stop, as it came, without an error event; the upstream connection is let go', async () => {
      const linger = latch();
      anthropic.script(() => ({ events: claudeAnswer(), linger: linger.promise }));
      try {
        const reply = await streamText(
          gw.url,
          '/v1/messages',
          { model: 'claude-linger', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] },
          { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
        );
        expect(reply.status).to.equal(200);
        expect(reply.text).to.equal(anthropic.last().sent);
        expect(reply.text.trimEnd().endsWith('event: message_stop\ndata: {"type":"message_stop"}')).to.equal(true);
        expect(reply.text).to.not.include('event: error');
        await expectSuccess(reply.id);
        // The back end never ended its body: the gateway closed the connection rather than hold it.
        await eventually(() => anthropic.last().aborted, 5000, 'the upstream connection to be closed');
      } finally {
        linger.open();
      }
    });

    it('Anthropic, translated for an OpenAI client: finish, usage and [DONE], no error event', async () => {
      const linger = latch();
      anthropic.script(() => ({ events: claudeAnswer(), linger: linger.promise }));
      try {
        const events = await chatStreamEvents<Json>(gw.url, { model: 'claude-linger', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }, KEY);
        expect(events.some((e) => e.error)).to.equal(false);
        expect(events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('')).to.equal('all of it');
        expect(events.find((e) => e.choices?.[0]?.finish_reason)?.choices[0].finish_reason).to.equal('stop');
        expect(events[events.length - 1]!.usage).to.include({ completion_tokens: 7 });
        await eventually(() => anthropic.last().aborted, 5000, 'the upstream connection to be closed');
      } finally {
        linger.open();
      }
    });

    it('Gemini, pass-through: the stream ends after its last event (finishReason and usage) once the back end is quiet, without an error event', async () => {
      const linger = latch();
      gemini.script(() => ({ events: geminiEvents(answer([{ text: 'one two' }])), linger: linger.promise }));
      try {
        const reply = await streamText(
          gw.url,
          '/v1beta/models/gemini-linger:streamGenerateContent?alt=sse',
          { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
          { 'x-goog-api-key': KEY },
        );
        expect(reply.status).to.equal(200);
        expect(reply.text).to.equal(gemini.last().sent);
        expect(reply.text).to.not.include('"error"');
        await expectSuccess(reply.id);
        await eventually(() => gemini.last().aborted, 5000, 'the upstream connection to be closed');
      } finally {
        linger.open();
      }
    });

    it('Gemini, translated for an OpenAI client: finish, usage and [DONE], no error event', async () => {
      const linger = latch();
      gemini.script(() => ({ events: geminiEvents(answer([{ text: 'one two' }])), linger: linger.promise }));
      try {
        const events = await chatStreamEvents<Json>(gw.url, { model: 'gemini-linger', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }, KEY);
        expect(events.some((e) => e.error)).to.equal(false);
        expect(events.map((e) => e.choices?.[0]?.delta?.content ?? '').join('')).to.equal('one two');
        expect(events.find((e) => e.choices?.[0]?.finish_reason)?.choices[0].finish_reason).to.equal('stop');
        expect(events[events.length - 1]!.usage).to.include({ prompt_tokens: 11, completion_tokens: 7 });
      } finally {
        linger.open();
      }
    });

    it('Gemini: an event that comes after the finish, before the back end is quiet, is still read', async () => {
      const linger = latch();
      const events = geminiEvents(answer([{ text: 'one two' }]));
      // A later event with the final usage (as some Gemini versions send it apart).
      const late = { candidates: [], usageMetadata: { promptTokenCount: 11, candidatesTokenCount: 9, totalTokenCount: 20 }, modelVersion: 'gemini-fake-1' };
      gemini.script(() => ({ events: [...events, late], linger: linger.promise }));
      try {
        const got = await chatStreamEvents<Json>(gw.url, { model: 'gemini-linger', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] }, KEY);
        expect(got[got.length - 1]!.usage).to.include({ prompt_tokens: 11, completion_tokens: 9 });
      } finally {
        linger.open();
      }
    });
  });

  describe('a back end silent right after its opening event, while the stream is primed', () => {
    /** message_start and a ping, then nothing, the connection open: the client's stream ends with the timeout error within idleMs of the ping. */
    const stallsAfterOpening = async (call: () => Promise<string>): Promise<void> => {
      const hold = latch();
      let wroteAt = 0;
      const opening: FakeEvent[] = anthropicEvents(message([{ type: 'text', text: 'never said' }])).slice(0, 2);
      anthropic.script(() => ({ events: [...opening, ['message_stop', {}]], holdAfter: 2, hold: hold.promise, onHold: () => (wroteAt = Date.now()) }));
      try {
        const text = await call();
        const silence = Date.now() - wroteAt;
        // The client's own error event (an error event, timeout_error, to a Claude client).
        expect(text).to.match(/timeout_error/);
        expect(text).to.include('the stream stalled');
        // The silence is bounded by idleMs from the back end's last event (the prime window, 1 s, ends during it).
        expect(silence).to.be.at.least(STALL_IDLE_MS - 100);
        expect(silence).to.be.below(STALL_IDLE_MS + 700);
      } finally {
        hold.open();
      }
    };

    it('to an Anthropic client (pass-through)', () =>
      stallsAfterOpening(async () => {
        const reply = await streamText(
          gw.url,
          '/v1/messages',
          { model: 'claude-silent', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] },
          { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' },
        );
        expect(reply.status).to.equal(200);
        return reply.text;
      }));

    it('to an OpenAI client (translated)', () =>
      stallsAfterOpening(async () => {
        const reply = await streamText(gw.url, '/v1/chat/completions', { model: 'claude-silent', stream: true, messages: [{ role: 'user', content: 'hi' }] }, { authorization: `Bearer ${KEY}` });
        expect(reply.status).to.equal(200);
        return reply.text;
      }));
  });

  describe('a client that leaves while its Anthropic stream is primed', () => {
    const reported = { input_tokens: 5, cache_creation_input_tokens: 4000, cache_read_input_tokens: 2000, output_tokens: 1 };

    /** The client leaves shortly after message_start reached the gateway, well inside the prime window (1 s): nothing was sent to it yet. */
    const leavesWhilePrimed = async (model: string, path: string, body: Json, headers: Record<string, string>): Promise<{ usage: UsageRecord; row: RequestLogEntry }> => {
      const hold = latch();
      const holding = latch();
      const msg = message([{ type: 'text', text: 'never said' }], { usage: reported });
      const events = anthropicEvents(msg);
      anthropic.script(() => ({ events, holdAfter: 2, hold: hold.promise, onHold: holding.open }));
      const since = Date.now();
      try {
        await new Promise<void>((resolve, reject) => {
          const req = http.request(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, () => reject(new Error('the stream began: the client was meant to leave before')));
          req.on('error', () => undefined);
          req.end(JSON.stringify({ ...body, model }));
          // message_start and a ping are written: the gateway reads them at once (loopback), then
          // holds the stream for up to a second waiting for the answer. The client leaves in it.
          void holding.promise.then(() =>
            setTimeout(() => {
              req.destroy();
              resolve();
            }, 300),
          );
        });
        await eventually(() => anthropic.received.length === 1 && anthropic.last().aborted, 5000, 'the upstream request to be aborted');
        let found: UsageRecord | undefined;
        for (let tries = 0; !found && tries < 300; tries++) {
          await gw.gateway.stores.flush();
          found = (await gw.gateway.stores.usage.list({ limit: 100 })).find((r) => r.model === model && r.time >= since);
          if (!found) await new Promise((resolve) => setTimeout(resolve, 10));
        }
        expect(found, 'a usage row').to.not.equal(undefined);
        const row = await logRow(gw, found!.requestId);
        return { usage: found!, row };
      } finally {
        hold.open();
      }
    };

    const expectCharged = ({ usage, row }: { usage: UsageRecord; row: RequestLogEntry }) => {
      // The client left while the stream was held back (the attempt never began for it).
      expect(row.status).to.equal(499);
      expect(row.attempts).to.have.length(1);
      expect(row.attempts[0]!.error).to.equal('client_closed_request');
      // The prompt as message_start reported it: input, cache writes and cache reads.
      expect(usage.promptTokens).to.equal(6005);
      expect(usage.cachedTokens).to.equal(2000);
      expect(usage.completionTokens).to.equal(0);
      expect(usage.source).to.equal('estimated');
      // 5 input at 1, 4000 written at 1.25, 2000 read at 0.1, per million tokens.
      expect(usage.cost).to.be.closeTo((5 * 1 + 4000 * 1.25 + 2000 * 0.1) / 1e6, 1e-12);
    };

    it('Anthropic client (pass-through): charged the prompt as message_start reported it, cache tokens included', async () => {
      expectCharged(
        await leavesWhilePrimed('leave-native', '/v1/messages', { max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hello there' }] }, { 'x-api-key': KEY, 'anthropic-version': '2023-06-01' }),
      );
    });

    it('OpenAI client (translated): charged the prompt as message_start reported it, cache tokens included', async () => {
      expectCharged(await leavesWhilePrimed('leave-openai', '/v1/chat/completions', { stream: true, messages: [{ role: 'user', content: 'hello there' }] }, { authorization: `Bearer ${KEY}` }));
    });
  });
});
