import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { eventsOf, FakeAnthropic, message } from './fakes/anthropic-upstream.js';
import { eventually, startGateway, type RunningGateway } from './support/gateway.js';
import { usageRows } from './support/rows.js';

/**
 * Prompt-cache prices over a back end that reports cache writes (Anthropic's), through every
 * way a client reaches it: the budget's worst case, the Responses API, and a Responses stream
 * that ends early.
 */
const KEY = 'sk-cache-prices-key-0001';
const TIGHT = 'sk-cache-prices-tight-0001';
const ROOMY = 'sk-cache-prices-roomy-0001';
// Per 1M tokens: 0.001, 0.01, 0.0001 and 0.00125 a token.
const PRICE = { input: 1000, output: 10000, cachedInput: 100, cacheWrite: 1250 };

describe('metering: prompt-cache prices over the anthropic provider', function () {
  this.timeout(30_000);
  const upstream = new FakeAnthropic();
  let gw: RunningGateway;

  before(async () => {
    await upstream.start();
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
plugins: [request-log, auth, rate-limit, validation, routing, metering, openai-chat, anthropic-messages]
auth:
  keys:
    - { name: plain, key: ${KEY} }
    - { name: tight, key: ${TIGHT}, budget: 2.1 }
    - { name: roomy, key: ${ROOMY}, budget: 2.3 }
providers:
  - { id: claude, type: anthropic, baseUrl: ${upstream.url}, apiKey: ${upstream.apiKey}, models: [claude-cw, claude-1h, claude-search] }
pricing:
  claude-cw: { input: ${PRICE.input}, output: ${PRICE.output}, cachedInput: ${PRICE.cachedInput}, cacheWrite: ${PRICE.cacheWrite} }
  claude-1h: { input: ${PRICE.input}, output: ${PRICE.output}, cachedInput: ${PRICE.cachedInput}, cacheWrite: ${PRICE.cacheWrite}, cacheWrite1h: 2000 }
  claude-search: { input: ${PRICE.input}, output: ${PRICE.output}, perWebSearch: 0.01 }
`);
  });
  afterEach(() => upstream.reset());
  after(async () => {
    await gw?.stop();
    await upstream.stop();
  });

  const spentOf = async (name: string): Promise<number> => {
    await gw.gateway.stores.flush();
    const keys = await gw.gateway.stores.keys.list();
    return keys.find((k) => k.name === name)!.spent;
  };

  it("a budget's worst case prices the prompt at the cache-write price when that is the dearer: a call the back end could charge past the budget is refused before it goes up", async () => {
    // The whole prompt written to the cache and every allowed token written: 1000 x 0.00125 + 100 x 0.01 = 2.25.
    upstream.script(() => ({ json: message([{ type: 'text', text: 'ok' }], { usage: { input_tokens: 0, cache_creation_input_tokens: 1000, cache_read_input_tokens: 0, output_tokens: 100 } }) }));
    const prompt = 'word '.repeat(1000);
    const tight = new Anthropic({ apiKey: TIGHT, baseURL: gw.url, maxRetries: 0 });
    const refused = await tight.messages.create({ model: 'claude-cw', max_tokens: 100, messages: [{ role: 'user', content: prompt }] }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(Anthropic.APIError);
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).to.equal(429);
    expect(upstream.received).to.have.length(0);
    expect(await spentOf('tight')).to.equal(0);

    // With room for that worst case the call goes up and is charged what the back end reported, within the budget.
    const roomy = new Anthropic({ apiKey: ROOMY, baseURL: gw.url, maxRetries: 0 });
    const answer = await roomy.messages.create({ model: 'claude-cw', max_tokens: 100, messages: [{ role: 'user', content: prompt }] }).withResponse();
    expect(Number(answer.response.headers.get('x-switchyard-cost'))).to.be.closeTo(2.25, 1e-9);
    const spent = await spentOf('roomy');
    expect(spent).to.be.closeTo(2.25, 1e-9);
    expect(spent).to.be.at.most(2.3);
  });

  const usage = { input_tokens: 100, cache_creation_input_tokens: 200, cache_read_input_tokens: 1000, output_tokens: 50 };

  /**
   * A stream of `usage`'s answer, held by the back end after its first words, that the client
   * leaves once it has read `marker`: the usage row it was charged, once the back end saw it go.
   */
  const leftMidStream = async (path: string, body: Record<string, unknown>, marker: string) => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    upstream.script(() => ({ events: eventsOf(message([{ type: 'text', text: 'one two three four five six' }], { usage })), holdAfter: 5, hold }));
    const controller = new AbortController();
    const response = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      signal: controller.signal,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
      body: JSON.stringify(body),
    });
    expect(response.status).to.equal(200);
    const reader = response.body!.getReader();
    let seen = '';
    while (!seen.includes(marker)) seen += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    try {
      await eventually(() => upstream.last().aborted, 3000, 'the upstream to see the disconnect');
    } finally {
      release();
    }
    return (await usageRows(gw, response.headers.get('x-request-id')!))[0]!;
  };

  // 100 x 0.001 + 1000 x 0.0001 + 200 x 0.00125 + 50 x 0.01
  const COST = 0.95;

  it('the Responses API charges cache writes at their price, as chat and messages do, and names them in input_tokens_details', async () => {
    upstream.script(() => ({ json: message([{ type: 'text', text: 'cached' }], { usage }) }));
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({ model: 'claude-cw', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(Number(chat.response.headers.get('x-switchyard-cost'))).to.be.closeTo(COST, 1e-9);

    const answer = await openai.responses.create({ model: 'claude-cw', input: 'hi', max_output_tokens: 100 }).withResponse();
    expect(answer.data.usage).to.deep.include({ input_tokens: 1300, output_tokens: 50, total_tokens: 1350 });
    expect(answer.data.usage?.input_tokens_details).to.deep.equal({ cached_tokens: 1000, cache_creation_tokens: 200 });
    expect(Number(answer.response.headers.get('x-switchyard-cost'))).to.be.closeTo(COST, 1e-9);
    const [row] = await usageRows(gw, answer.response.headers.get('x-request-id')!);
    expect(row!.cost).to.be.closeTo(COST, 1e-9);
    // The row's figures explain its cost: 1,300 prompt tokens, of which 1,000 read from the cache and 200 written to it.
    expect(row).to.deep.include({ promptTokens: 1300, cachedTokens: 1000, cacheWriteTokens: 200, completionTokens: 50 });

    upstream.script(() => ({ events: eventsOf(message([{ type: 'text', text: 'cached and streamed' }], { usage })) }));
    const stream = await openai.responses.create({ model: 'claude-cw', input: 'hi', max_output_tokens: 100, stream: true }).withResponse();
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream.data) if (event.type === 'response.completed') completed = event.response;
    expect(completed?.usage?.input_tokens_details).to.deep.equal({ cached_tokens: 1000, cache_creation_tokens: 200 });
    const [streamed] = await usageRows(gw, stream.response.headers.get('x-request-id')!);
    expect(streamed!.cost).to.be.closeTo(COST, 1e-9);
    expect(streamed).to.deep.include({ cachedTokens: 1000, cacheWriteTokens: 200 });
  });

  it('cache writes for an hour (ttl 1h) are priced at cacheWrite1h, JSON and streamed, through every client format', async () => {
    // 400 written for 5 minutes, 600 for an hour: 21 x 0.001 + 3000 x 0.0001 + 400 x 0.00125 + 600 x 0.002 + 17 x 0.01
    const hourUsage = { input_tokens: 21, cache_creation_input_tokens: 1000, cache_read_input_tokens: 3000, output_tokens: 17, cache_creation: { ephemeral_5m_input_tokens: 400, ephemeral_1h_input_tokens: 600 } };
    const HOUR_COST = 2.191;
    const answer = message([{ type: 'text', text: 'cached for an hour' }], { usage: hourUsage });
    upstream.script((body) => (body.stream ? { events: eventsOf(answer) } : { json: answer }));
    const claude = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const native = await claude.messages
      .create({ model: 'claude-1h', max_tokens: 100, system: [{ type: 'text', text: 'long context', cache_control: { type: 'ephemeral', ttl: '1h' } }], messages: [{ role: 'user', content: 'hi' }] })
      .withResponse();
    expect(Number(native.response.headers.get('x-switchyard-cost'))).to.be.closeTo(HOUR_COST, 1e-9);
    const stream = claude.messages.stream({ model: 'claude-1h', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    await stream.finalMessage();
    const [streamed] = await usageRows(gw, (await stream.withResponse()).response.headers.get('x-request-id')!);
    expect(streamed!.cost).to.be.closeTo(HOUR_COST, 1e-9);
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({ model: 'claude-1h', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(Number(chat.response.headers.get('x-switchyard-cost'))).to.be.closeTo(HOUR_COST, 1e-9);
    expect(chat.data.usage?.prompt_tokens_details).to.deep.include({ cached_tokens: 3000, cache_creation_tokens: 1000, cache_creation_1h_tokens: 600 });
    const responses = await openai.responses.create({ model: 'claude-1h', input: 'hi' }).withResponse();
    expect(Number(responses.response.headers.get('x-switchyard-cost'))).to.be.closeTo(HOUR_COST, 1e-9);
    // Without a cacheWrite1h price, an hour's write is priced as cacheWrite.
    const minutes = await openai.chat.completions.create({ model: 'claude-cw', messages: [{ role: 'user', content: 'hi' }] }).withResponse();
    expect(Number(minutes.response.headers.get('x-switchyard-cost'))).to.be.closeTo(HOUR_COST - 600 * 0.00075, 1e-9);
  });

  it("web searches Anthropic ran (usage.server_tool_use.web_search_requests) are priced at perWebSearch, JSON and streamed, for every client format", async () => {
    // 100 x 0.001 + 50 x 0.01 + 3 searches x 0.01
    const searchUsage = { input_tokens: 100, output_tokens: 50, server_tool_use: { web_search_requests: 3 } };
    const SEARCH_COST = 0.63;
    const answer = message([{ type: 'text', text: 'searched' }], { usage: searchUsage });
    upstream.script((body) => (body.stream ? { events: eventsOf(answer).map(([name, data]) => (name === 'message_delta' ? [name, { ...data, usage: { output_tokens: 50, server_tool_use: { web_search_requests: 3 } } }] : [name, data]) as [string, Record<string, unknown>]) } : { json: answer }));
    const claude = new Anthropic({ apiKey: KEY, baseURL: gw.url, maxRetries: 0 });
    const tools = [{ type: 'web_search_20250305', name: 'web_search' }] as never;
    const native = await claude.messages.create({ model: 'claude-search', max_tokens: 100, tools, messages: [{ role: 'user', content: 'news?' }] }).withResponse();
    expect(Number(native.response.headers.get('x-switchyard-cost'))).to.be.closeTo(SEARCH_COST, 1e-9);
    const stream = claude.messages.stream({ model: 'claude-search', max_tokens: 100, tools, messages: [{ role: 'user', content: 'news?' }] });
    await stream.finalMessage();
    const [streamed] = await usageRows(gw, (await stream.withResponse()).response.headers.get('x-request-id')!);
    expect(streamed!.cost).to.be.closeTo(SEARCH_COST, 1e-9);
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({ model: 'claude-search', messages: [{ role: 'user', content: 'news?' }] }).withResponse();
    expect(Number(chat.response.headers.get('x-switchyard-cost'))).to.be.closeTo(SEARCH_COST, 1e-9);
    const responses = await openai.responses.create({ model: 'claude-search', input: 'news?' }).withResponse();
    expect(Number(responses.response.headers.get('x-switchyard-cost'))).to.be.closeTo(SEARCH_COST, 1e-9);
  });

  it('a completion over a chat back end keeps the cache-write tokens in its usage and is charged as chat is; one the client leaves is charged the prompt the back end reported', async () => {
    upstream.script(() => ({ json: message([{ type: 'text', text: 'completed' }], { usage }) }));
    const openai = new OpenAI({ apiKey: KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const completion = await openai.completions.create({ model: 'claude-cw', prompt: 'Say hi' }).withResponse();
    expect(completion.data.usage).to.deep.include({ prompt_tokens: 1300, completion_tokens: 50 });
    expect(Number(completion.response.headers.get('x-switchyard-cost'))).to.be.closeTo(COST, 1e-9);

    const row = await leftMidStream('/v1/completions', { model: 'claude-cw', prompt: 'x', stream: true, max_tokens: 50 }, '"text"');
    expect(row).to.deep.include({ source: 'estimated', promptTokens: 1300, cachedTokens: 1000, endReason: 'client_gone' });
  });

  it('a Responses stream the client leaves is charged the prompt as message_start reported it, cache tokens at their prices', async () => {
    const row = await leftMidStream('/v1/responses', { model: 'claude-cw', input: 'x', stream: true }, 'response.output_text.delta');
    // The prompt as reported (100 + 1000 read + 200 written), not the gateway's count of "x".
    expect(row).to.deep.include({ source: 'estimated', promptTokens: 1300, cachedTokens: 1000, endReason: 'client_gone' });
    expect(row!.cost).to.be.greaterThan(0.45);
  });
});
