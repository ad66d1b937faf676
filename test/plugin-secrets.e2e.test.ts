import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Anthropic from '@anthropic-ai/sdk';
import { expect } from 'chai';
import OpenAI from 'openai';
import { loadConfig } from '../config/load.js';
import { ConfigErrors } from '../config/validate.js';
import { startGateway, writeConfig, type RunningGateway } from './support/gateway.js';
import { repoRoot } from './support/paths.js';

/**
 * A third party's provider that puts its credentials in what it throws: the gateway keeps them
 * out of every answer and log line, whether the key came from the provider's entry or from the
 * plugin's own options.
 */
const PROVIDER_KEY = 'ACMEKEY-0123456789abcdef';
const OPTIONS_KEY = 'VENDORKEY-zz9988776655';
const CLIENT_KEY = 'sk-plugin-secrets-client-01';
/** Shaped so that scrub's key pattern alone would take its end and leave its start ("acme-"). */
const CARELESS_KEY = 'acme-key-SUPERSECRET-123456';
/** A key shaped as the gateway makes them (kept only as a hash: redacted by its shape). */
const MADE_KEY = 'sk-sy-Zq81bW0aPpL4mN7xR2tY5uV9';
/** The admin key of the configuration a provider fails in (as if its plugin had read the file). */
const ADMIN_KEY = 'admin-key-in-a-plugin-error-0123';
/** A provider header's value, a back end's credential by another name. */
const HEADER_SECRET = 'hdr-secret-value-0123456789';

const core = pathToFileURL(path.join(repoRoot, 'dist', 'core', 'index.js')).href;
const PLUGIN = `
import { GatewayError, postJson } from ${JSON.stringify(core)};
let options = {};
const MADE = ${JSON.stringify(MADE_KEY)};
const ADMIN = ${JSON.stringify(ADMIN_KEY)};
export default {
  name: 'leaky',
  version: '1.0.0',
  optionsSchema: { type: 'object', properties: { apiKey: { type: 'string' } } },
  apply(api) {
    options = api.options;
    // Calls its back end through core's helper but passes none of its credentials as secrets.
    api.registerProviderType({
      type: 'careless',
      configSchema: { type: 'object', properties: { apiKey: { type: 'string' }, baseUrl: { type: 'string' } } },
      create(config, env) {
        const pool = env.poolFor(new URL(config.baseUrl).origin, config);
        return {
          id: config.id,
          type: config.type,
          models: config.models,
          operations: {
            async chat(request, context) {
              await postJson(pool, { path: '/chat', headers: { 'x-vendor-key': config.apiKey, 'content-type': 'application/json' }, body: request.body, signal: context.signal, secrets: [] });
              throw new Error('unreachable');
            },
          },
        };
      },
    });
    api.registerProviderType({
      type: 'leaky',
      configSchema: { type: 'object', properties: { apiKey: { type: 'string' }, failAtStart: { type: 'boolean' }, headers: { type: 'object' } } },
      create(config) {
        if (config.failAtStart) throw new Error('cannot reach the vendor with key ' + config.apiKey + ' headers ' + Object.values(config.headers ?? {}).join(',') + ' admin ' + ADMIN);
        return {
          id: config.id,
          type: config.type,
          models: config.models,
          operations: {
            async chat(request, context) {
              if (request.model === 'quotes-client') throw new Error('the caller sent ' + context.request.headers.authorization + ', once also ' + MADE);
              if (request.model === 'detail') throw new GatewayError('upstream_error', { params: { detail: 'the vendor refused key ' + config.apiKey } });
              if (request.model === 'refused') throw new GatewayError('upstream_bad_request', { params: { detail: 'bad region for ' + config.apiKey } });
              throw new Error('the vendor said no to ' + options.apiKey);
            },
          },
        };
      },
    });
  },
};
`;

describe('credentials a provider plugin puts in its errors', () => {
  let dir: string;
  let gw: RunningGateway;

  // A back end whose 400 quotes the credential it was sent.
  const vendor = http.createServer((req, res) => {
    res.writeHead(400, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: { message: `bad request made with key=${String(req.headers['x-vendor-key'])} today` } }));
  });

  before(async () => {
    await new Promise<void>((resolve) => vendor.listen(0, '127.0.0.1', resolve));
    dir = mkdtempSync(path.join(tmpdir(), 'sy-leaky-'));
    writeFileSync(path.join(dir, 'leaky.mjs'), PLUGIN);
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
storage: { url: ':memory:' }
auth:
  keys: [{ name: c, key: ${CLIENT_KEY} }]
plugins:
  - request-log
  - auth
  - validation
  - routing
  - metering
  - openai-chat
  - anthropic-messages
  - { name: ${JSON.stringify(path.join(dir, 'leaky.mjs'))}, options: { apiKey: ${OPTIONS_KEY} } }
providers:
  - { id: acme, type: leaky, apiKey: ${PROVIDER_KEY}, models: [detail, refused, thrown, quotes-client] }
  - { id: careless, type: careless, apiKey: ${CARELESS_KEY}, baseUrl: 'http://127.0.0.1:${(vendor.address() as AddressInfo).port}', models: [careless-model] }
  # Settings named like keys or tokens that are no credential: their values are ordinary words.
  - { id: wordy, type: openai, baseUrl: 'http://127.0.0.1:9/v1', apiKey: sk-wordy-0123456789, maxTokensField: max_tokens, models: [wordy-model] }
`);
  });
  after(async () => {
    await gw?.stop();
    await new Promise<void>((resolve) => vendor.close(() => resolve()));
  });

  it("a back end's error quoting the provider's key, through core's helper, reaches the client with none of the key, though the provider passed no secrets", async () => {
    const openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const error = (await openai.chat.completions.create({ model: 'careless-model', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(error).to.be.instanceOf(OpenAI.APIError);
    expect(error.status).to.equal(400);
    expect(error.message).to.include('bad request made with key=[redacted] today');
    for (const piece of ['acme', 'careless', CARELESS_KEY.slice(0, 6)]) expect(error.message).to.not.include(piece);
  });

  it("a GatewayError whose message names the provider's key reaches OpenAI and Anthropic clients, and the log, redacted", async () => {
    const openai = new OpenAI({ apiKey: CLIENT_KEY, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const fromOpenAI = (await openai.chat.completions.create({ model: 'detail', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    expect(fromOpenAI).to.be.instanceOf(OpenAI.APIError);
    expect(fromOpenAI.message).to.include('the vendor refused key [redacted]');
    const fromClaude = (await claude.messages.create({ model: 'refused', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(fromClaude).to.be.instanceOf(Anthropic.APIError);
    expect(fromClaude.status).to.equal(400);
    expect(fromClaude.message).to.include('bad region for [redacted]');
    const streamed = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ model: 'detail', stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(await streamed.text()).to.include('[redacted]').and.not.include(PROVIDER_KEY);
    expect(gw.logText()).to.not.include(PROVIDER_KEY);
  });

  it("settings named like keys that hold no credential (maxTokensField: max_tokens) are not redacted from the gateway's own messages", async () => {
    const claude = new Anthropic({ apiKey: CLIENT_KEY, baseURL: gw.url, maxRetries: 0 });
    const error = (await claude.messages.create({ model: 'wordy-model', messages: [{ role: 'user', content: 'x' }] } as never).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(error).to.be.instanceOf(Anthropic.APIError);
    expect(error.status).to.equal(400);
    expect(error.message).to.include('max_tokens').and.not.include('[redacted]');
  });

  /** A chat call of the client's to `model`, over plain fetch. */
  const chatAs = (model: string) =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_KEY}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }),
    });

  it("an Error naming a key from the plugin's options is a 500 whose log line has the key redacted", async () => {
    const response = await chatAs('thrown');
    expect(response.status).to.equal(500);
    expect(await response.text()).to.not.include(OPTIONS_KEY);
    expect(gw.logText()).to.include('the vendor said no to [redacted]');
    expect(gw.logText()).to.not.include(OPTIONS_KEY);
  });

  it("an Error that quotes the client's key (one from auth.keys, or one shaped as the gateway makes them) is logged with the keys redacted", async () => {
    const response = await chatAs('quotes-client');
    expect(response.status).to.equal(500);
    expect(gw.logText()).to.include('the caller sent Bearer [redacted], once also [redacted]');
    expect(gw.logText()).to.not.include(CLIENT_KEY).and.not.include(MADE_KEY);
  });

  it("a provider that fails to start with its key, a header's value and the admin key in the message: the configuration error shows them redacted", async () => {
    const file = writeConfig(`
auth: { adminKey: ${ADMIN_KEY} }
plugins: [auth, routing, openai-chat, ${JSON.stringify(path.join(dir, 'leaky.mjs'))}]
providers:
  - { id: acme, type: leaky, apiKey: ${PROVIDER_KEY}, failAtStart: true, headers: { X-Custom-Auth: ${HEADER_SECRET}, X-Version: '2024-10-01', anthropic-beta: interleaved-thinking-2025-05-14 }, models: [m] }
`);
    const error = await startGateway(file).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ConfigErrors);
    expect(String((error as Error).message))
      // A header whose name says no credential (a beta flag) is a word of the message, however long.
      .to.include('cannot reach the vendor with key [redacted] headers [redacted],2024-10-01,interleaved-thinking-2025-05-14 admin [redacted]')
      .and.not.include(PROVIDER_KEY)
      .and.not.include(HEADER_SECRET)
      .and.not.include(ADMIN_KEY);
    // The file itself loads (the failure is the provider's, at creation).
    expect(await loadConfig({ file })).to.have.property('config');
  });
});
