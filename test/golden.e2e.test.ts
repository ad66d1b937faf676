import { expect } from 'chai';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { FakeAnthropic } from './fakes/anthropic-upstream.js';
import { FakeGemini } from './fakes/gemini-upstream.js';
import { FakeOpenAI } from './fakes/openai-upstream.js';
import { ANSWERS, anthropicStream, CASES, geminiStream, INBOUND, MODEL, openaiStream, OUTBOUND, REQUESTS, type Inbound, type Outbound } from './golden/cases.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { repoRoot } from './support/paths.js';

/**
 * Golden fixtures: every inbound format x every outbound provider, each case JSON and streamed.
 * A fixture (test/golden/<in>-to-<out>/<case>[-stream].json) holds the client's request, the
 * upstream's answer, what the fake upstream must receive and what the client must get
 * (normalised: response ids and timestamps). The runner starts one gateway with the three fake
 * upstreams and checks both halves of every fixture.
 *
 * GOLDEN_RECORD=1 writes the fixtures from test/golden/cases.ts instead of checking them; the
 * recorded halves must then be reviewed (git diff) before they are committed.
 */

type Json = Record<string, any>;

const CLIENT_KEY = 'sk-client-golden-0123456789';
const GOLDEN_DIR = path.join(repoRoot, 'test', 'golden');
const RECORD = process.env.GOLDEN_RECORD === '1';

interface Fixture {
  in: Inbound;
  out: Outbound;
  case: string;
  stream: boolean;
  request: { path: string; body: Json };
  upstream: {
    /** The upstream's answer: a JSON body, or its stream (openai: chunk objects; anthropic: [event, data]; gemini: response objects). */
    reply: { json: Json } | { events: unknown[] };
    /** What the fake upstream must receive. */
    received: { path: string; body: Json };
  };
  /** What the client must get: status, the named losses, and the body or the stream's events. */
  response: { status: number; losses: string[]; body?: unknown; events?: Array<{ event?: string; data: unknown }> };
}

function fixturePath(inbound: Inbound, outbound: Outbound, name: string, stream: boolean): string {
  return path.join(GOLDEN_DIR, `${inbound}-to-${outbound}`, `${name}${stream ? '-stream' : ''}.json`);
}

/** The client's call for a case: the path and the body with the model and stream as its format says them. */
function clientRequest(inbound: Inbound, outbound: Outbound, name: string, stream: boolean): Fixture['request'] {
  const model = MODEL[outbound];
  const body = structuredClone(REQUESTS[inbound][name as keyof (typeof REQUESTS)[Inbound]]);
  if (inbound === 'gemini') {
    return { path: `/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, body };
  }
  const out: Json = { model, ...body };
  if (stream) out.stream = true;
  if (stream && inbound === 'openai-chat') out.stream_options = { include_usage: true };
  return { path: inbound === 'openai-chat' ? '/v1/chat/completions' : '/v1/messages', body: out };
}

function upstreamReply(outbound: Outbound, name: string, stream: boolean): Fixture['upstream']['reply'] {
  const answer = structuredClone(ANSWERS[outbound][name as keyof (typeof ANSWERS)[Outbound]]);
  if (!stream) return { json: answer };
  if (outbound === 'openai') return { events: openaiStream(answer) };
  if (outbound === 'anthropic') return { events: anthropicStream(answer) };
  return { events: geminiStream(answer) };
}

function headersFor(inbound: Inbound): Record<string, string> {
  const base = { 'content-type': 'application/json' };
  if (inbound === 'anthropic-messages') return { ...base, 'x-api-key': CLIENT_KEY, 'anthropic-version': '2023-06-01' };
  if (inbound === 'gemini') return { ...base, 'x-goog-api-key': CLIENT_KEY };
  return { ...base, authorization: `Bearer ${CLIENT_KEY}` };
}

/** A tool-call id the gateway makes up for a back end that gives none (Gemini): random, unique. */
const MADE_CALL_ID = /^call_[A-Za-z0-9_-]{16}$/;

/** Made-up tool-call ids, at any depth, as one placeholder. */
function callIds(value: unknown): unknown {
  if (typeof value === 'string') return MADE_CALL_ID.test(value) ? '<call-id>' : value;
  if (Array.isArray(value)) return value.map(callIds);
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, item] of Object.entries(value as Json)) out[key] = callIds(item);
  return out;
}

/** Ids and timestamps the gateway makes up are not part of the contract. */
function normalise(value: unknown): unknown {
  value = callIds(value);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const out: Json = { ...(value as Json) };
  if (typeof out.id === 'string') out.id = '<id>';
  if (typeof out.created === 'number') out.created = 0;
  if (typeof out.responseId === 'string') out.responseId = '<id>';
  if (out.type === 'message_start' && out.message && typeof out.message === 'object') out.message = { ...out.message, id: '<id>' };
  return out;
}

function parseEvents(text: string): Array<{ event?: string; data: unknown }> {
  const events: Array<{ event?: string; data: unknown }> = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    let name: string | undefined;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith('event:')) name = line.slice(6).trim();
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
    }
    if (data.length === 0) continue;
    const joined = data.join('\n');
    let parsed: unknown = joined;
    try {
      parsed = JSON.parse(joined);
    } catch {
      // `[DONE]`
    }
    events.push(name === undefined ? { data: normalise(parsed) } : { event: name, data: normalise(parsed) });
  }
  return events;
}

function fixtureNames(): string[] {
  const out: string[] = [];
  for (const inbound of INBOUND) for (const outbound of OUTBOUND) for (const name of CASES) for (const stream of [false, true]) out.push(fixturePath(inbound, outbound, name, stream));
  return out;
}

describe('golden fixtures: every inbound format x every outbound provider, JSON and streamed', function () {
  this.timeout(60_000);
  const fakes = { openai: new FakeOpenAI(), anthropic: new FakeAnthropic(), gemini: new FakeGemini() };
  let gw: RunningGateway;

  before(async () => {
    await Promise.all([fakes.openai.start(), fakes.anthropic.start(), fakes.gemini.start()]);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
auth:
  keys:
    - { name: golden, key: ${CLIENT_KEY} }
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
  - { id: oai, type: openai, baseUrl: ${fakes.openai.url}/v1, apiKey: ${fakes.openai.apiKey}, models: [${MODEL.openai}] }
  - { id: claude, type: anthropic, baseUrl: ${fakes.anthropic.url}, apiKey: ${fakes.anthropic.apiKey}, models: [${MODEL.anthropic}] }
  - { id: google, type: gemini, baseUrl: ${fakes.gemini.url}, apiKey: ${fakes.gemini.apiKey}, models: [${MODEL.gemini}] }
`);
  });
  /** The named losses of each request (as the request log gets them), by request id. */
  const lossesById = new Map<string, string[]>();
  before(() => {
    gw.gateway.hooks.onResponse.tap('golden', (ctx) => {
      lossesById.set(ctx.id, [...(ctx.losses ?? [])]);
    });
  });
  afterEach(() => {
    lossesById.clear();
    fakes.openai.reset();
    fakes.anthropic.reset();
    fakes.gemini.reset();
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([fakes.openai.stop(), fakes.anthropic.stop(), fakes.gemini.stop()]);
  });

  /** Make the fake of `outbound` answer with `reply`; return what it received, once it has. */
  function script(outbound: Outbound, reply: Fixture['upstream']['reply']): () => { url: string; body: Json | undefined } {
    if (outbound === 'openai') {
      const fake = fakes.openai;
      fake.handle('POST /v1/chat/completions', (_req: http.IncomingMessage, res: http.ServerResponse) => {
        if ('json' in reply) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(reply.json));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const event of reply.events) res.write(`data: ${JSON.stringify(event)}\n\n`);
        res.end('data: [DONE]\n\n');
      });
      return () => fake.last() as { url: string; body: Json };
    }
    if (outbound === 'anthropic') {
      fakes.anthropic.script(() => ('json' in reply ? { json: reply.json } : { events: reply.events as Array<[string, Json]> }));
      return () => fakes.anthropic.last();
    }
    fakes.gemini.script(() => ('json' in reply ? { json: reply.json } : { events: reply.events as Json[] }));
    return () => fakes.gemini.last();
  }

  async function run(fixture: Fixture): Promise<{ received: Fixture['upstream']['received']; response: Fixture['response'] }> {
    const received = script(fixture.out, fixture.upstream.reply);
    const answer = await fetch(`${gw.url}${fixture.request.path}`, { method: 'POST', headers: headersFor(fixture.in), body: JSON.stringify(fixture.request.body) });
    const text = await answer.text();
    // The request log's losses (openai-chat has no losses header; a stream's come as it runs).
    const id = answer.headers.get('x-request-id') ?? '';
    await eventually(() => lossesById.has(id), 3000, `the request ${id} to end`);
    const response: Fixture['response'] = { status: answer.status, losses: lossesById.get(id)! };
    if ((answer.headers.get('content-type') ?? '').includes('text/event-stream')) response.events = parseEvents(text);
    else response.body = normalise(JSON.parse(text));
    const got = received();
    return { received: { path: got.url, body: got.body ?? {} }, response };
  }

  for (const file of fixtureNames()) {
    const name = path.relative(GOLDEN_DIR, file);
    it(name, async () => {
      if (RECORD) {
        const [pair, caseFile] = name.split(path.sep) as [string, string];
        const [inbound, outbound] = pair.split('-to-') as [Inbound, Outbound];
        const stream = caseFile.endsWith('-stream.json');
        const caseName = caseFile.replace(/(-stream)?\.json$/, '');
        const partial = { in: inbound, out: outbound, case: caseName, stream, request: clientRequest(inbound, outbound, caseName, stream), upstream: { reply: upstreamReply(outbound, caseName, stream) } };
        const got = await run({ ...partial, upstream: { ...partial.upstream, received: { path: '', body: {} } }, response: { status: 0, losses: [] } });
        const fixture: Fixture = { ...partial, upstream: { reply: partial.upstream.reply, received: got.received }, response: got.response };
        mkdirSync(path.dirname(file), { recursive: true });
        writeFileSync(file, `${JSON.stringify(fixture, null, 2)}\n`);
        expect(got.response.status, `recorded ${name} with status ${got.response.status}`).to.equal(200);
        return;
      }
      const fixture = JSON.parse(readFileSync(file, 'utf8')) as Fixture;
      const got = await run(fixture);
      expect(got.received, 'what the upstream received').to.deep.equal(fixture.upstream.received);
      expect(got.response, 'what the client got').to.deep.equal(fixture.response);
    });
  }

  it('every fixture on disk is one the runner knows (no stale files)', () => {
    if (RECORD) return;
    const known = new Set(fixtureNames().map((f) => path.relative(GOLDEN_DIR, f)));
    const onDisk = readdirSync(GOLDEN_DIR, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .flatMap((d) => readdirSync(path.join(GOLDEN_DIR, d.name)).filter((f) => f.endsWith('.json')).map((f) => path.join(d.name, f)));
    expect(onDisk.filter((f) => !known.has(f))).to.deep.equal([]);
    expect(onDisk.length).to.equal(known.size);
  });
});
