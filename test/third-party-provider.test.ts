import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { loadConfig } from '../config/load.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { repoRoot } from './support/paths.js';

/** The example in docs/writing-a-provider.md: plain JavaScript, loaded from a path. */
const exampleDir = path.join(repoRoot, 'docs', 'examples', 'shout-provider');
const examplePlugin = path.join(exampleDir, 'index.js');
const exampleConfig = path.join(exampleDir, 'gateway.config.yaml');

// startGateway writes this YAML into a temporary folder, so the plugin path is absolute.
const CONFIG = `
server: { host: 127.0.0.1, port: 0 }
logging: { level: info, format: json }
plugins:
  - auth
  - validation
  - routing
  - openai-chat
  - ${JSON.stringify(examplePlugin)}
providers:
  - id: shouter
    type: shout
    models: [shout-1]
models:
  - name: loud
    targets: [{ provider: shouter, model: shout-1 }]
`;

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(full) : [full];
  });
}

describe('a third-party provider loaded from a path (docs/examples/shout-provider)', () => {
  let gw: RunningGateway | undefined;
  let client: OpenAI;

  before(async () => {
    gw = await startGateway(CONFIG);
    client = new OpenAI({ apiKey: 'anything', baseURL: `${gw.url}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await gw?.stop();
    gw = undefined;
  });

  it('loads the plugin under its own name and serves its models', async () => {
    expect(gw!.gateway.plugins.map((p) => p.name)).to.include('shout');
    const source = gw!.gateway.plugins.find((p) => p.name === 'shout')!.source;
    expect(source).to.equal(examplePlugin);
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    expect(ids).to.include.members(['loud', 'shout-1']);
  });

  it('answers a non-streamed chat completion in capitals, with finish_reason and usage', async () => {
    const completion = await client.chat.completions.create({
      model: 'loud',
      messages: [
        { role: 'system', content: 'be loud' },
        { role: 'user', content: 'hello there, gateway' },
      ],
    });
    expect(completion.object).to.equal('chat.completion');
    expect(completion.model).to.equal('shout-1');
    expect(completion.choices).to.have.length(1);
    expect(completion.choices[0]!.message.role).to.equal('assistant');
    expect(completion.choices[0]!.message.content).to.equal('HELLO THERE, GATEWAY!');
    expect(completion.choices[0]!.finish_reason).to.equal('stop');
    // prompt: 'be loud' (2 words) + 'hello there, gateway' (3 words); completion: 3 words
    expect(completion.usage).to.include({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 });
  });

  it('reports finish_reason length when max_tokens cuts the answer', async () => {
    const completion = await client.chat.completions.create({
      model: 'shout-1',
      max_tokens: 2,
      messages: [{ role: 'user', content: 'one two three four' }],
    });
    expect(completion.choices[0]!.message.content).to.equal('ONE TWO');
    expect(completion.choices[0]!.finish_reason).to.equal('length');
    expect(completion.usage!.completion_tokens).to.equal(2);
  });

  it('streams word by word and ends with a usage chunk when include_usage is asked for', async () => {
    const stream = await client.chat.completions.create({
      model: 'loud',
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'stream me some words' }],
    });
    const deltas: string[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    let usageChunkChoices: number | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).to.equal('chat.completion.chunk');
      const choice = chunk.choices[0];
      if (choice?.delta.content) deltas.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.usage) {
        usage = chunk.usage;
        usageChunkChoices = chunk.choices.length;
      }
    }
    expect(deltas).to.deep.equal(['STREAM', ' ME', ' SOME', ' WORDS!']);
    expect(deltas.join('')).to.equal('STREAM ME SOME WORDS!');
    expect(finish).to.equal('stop');
    expect(usage).to.include({ prompt_tokens: 4, completion_tokens: 4, total_tokens: 8 });
    expect(usageChunkChoices).to.equal(0);
  });

  it('leaves usage out of the stream when the client did not ask, yet still meters it', async () => {
    const stream = await client.chat.completions.create({
      model: 'shout-1',
      stream: true,
      messages: [{ role: 'user', content: 'quiet please' }],
    });
    let text = '';
    let sawUsage = false;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) sawUsage = true;
    }
    expect(text).to.equal('QUIET PLEASE!');
    expect(sawUsage).to.equal(false);
    const line = gw!.logs.find((l) => l.message === 'request' && l.model === 'shout-1' && l.stream === true);
    expect(line, 'access log line of the stream').to.not.equal(undefined);
    expect(line!.provider).to.equal('shouter');
  });

  it('keeps the core free of vendor names (grep -ri anthropic core/ finds nothing)', () => {
    const files = filesUnder(path.join(repoRoot, 'core'));
    expect(files.length).to.be.greaterThan(0);
    const offenders = files.filter((file) => /anthropic/i.test(readFileSync(file, 'utf8')));
    expect(offenders).to.deep.equal([]);
  });
});

describe('the example configuration docs/examples/shout-provider/gateway.config.yaml', () => {
  let gw: RunningGateway | undefined;

  afterEach(async () => {
    await gw?.stop();
    gw = undefined;
  });

  it('loads with loadConfig', async () => {
    const loaded = await loadConfig({ file: exampleConfig });
    expect(loaded.filepath).to.equal(exampleConfig);
    expect(loaded.dir).to.equal(exampleDir);
    expect(loaded.config.plugins).to.include('./index.js');
    expect(loaded.config.providers.map((p) => p.type)).to.deep.equal(['shout']);
    expect(loaded.config.models.map((m) => m.name)).to.deep.equal(['loud']);
  });

  it('starts, resolving ./index.js against its own folder, and answers through the alias', async () => {
    gw = await startGateway(exampleConfig);
    expect(gw.gateway.plugins.find((p) => p.name === 'shout')?.source).to.equal(examplePlugin);
    const client = new OpenAI({ apiKey: 'anything', baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: 'loud', messages: [{ role: 'user', content: 'it works' }] });
    expect(completion.choices[0]!.message.content).to.equal('IT WORKS!');
    expect(completion.choices[0]!.finish_reason).to.equal('stop');
  });
});
