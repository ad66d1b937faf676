import { expect } from 'chai';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../config/load.js';
import { createGateway } from '../core/gateway.js';
import { createLogger } from '../core/logger.js';
import { builtins } from '../plugins/builtins.js';
import { PassThrough } from 'node:stream';

/** A folder with a config file and whatever other files the test needs. */
function project(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'switchyard-loader-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return path.join(dir, 'gateway.config.yaml');
}

const quiet = () => createLogger({ level: 'error', format: 'json' }, new PassThrough());

async function build(file: string) {
  const loaded = await loadConfig({ file, env: {} });
  return createGateway({ loaded, builtins, logger: quiet() });
}

async function failure(file: string): Promise<string> {
  try {
    const gateway = await build(file);
    await gateway.stop();
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected start-up to fail');
}

const recorder = (name: string, extra = '') => `
export default {
  name: '${name}',
  version: '1.0.0',
  ${extra}
  apply(api) {
    globalThis.__applied = [...(globalThis.__applied ?? []), { name: '${name}', options: api.options }];
  },
};
`;

describe('plugin loader', () => {
  beforeEach(() => {
    (globalThis as Record<string, unknown>).__applied = [];
  });

  it('loads built-ins, an npm package and ./relative paths, in YAML order, with checked options', async () => {
    const file = project({
      'gateway.config.yaml': `
plugins:
  - routing
  - name: from-npm
    options: { level: 3 }
  - ./local/plugin.mjs
  - ./folder-plugin
  - openai-chat
providers: [{ id: m, type: mock, models: [x] }]
`,
      'node_modules/from-npm/package.json': JSON.stringify({ name: 'from-npm', version: '1.0.0', type: 'module', main: 'main.js' }),
      'node_modules/from-npm/main.js': recorder(
        'from-npm',
        "optionsSchema: { type: 'object', additionalProperties: false, properties: { level: { type: 'integer' }, mode: { type: 'string', default: 'auto' } } },",
      ),
      'local/plugin.mjs': recorder('local-file', "dependencies: ['from-npm'],"),
      'folder-plugin/package.json': JSON.stringify({ name: 'folder-plugin', type: 'module', main: 'entry.js' }),
      'folder-plugin/entry.js': recorder('local-folder'),
    });
    const gateway = await build(file);
    try {
      expect(gateway.plugins.map((p) => p.name)).to.deep.equal(['routing', 'from-npm', 'local-file', 'local-folder', 'openai-chat', 'mock']);
      const applied = (globalThis as Record<string, unknown>).__applied as Array<{ name: string; options: unknown }>;
      expect(applied.map((a) => a.name)).to.deep.equal(['from-npm', 'local-file', 'local-folder']);
      expect(applied[0]!.options).to.deep.equal({ level: 3, mode: 'auto' });
    } finally {
      await gateway.stop();
    }
  });

  it('names the failing entry and the reason', async () => {
    const base = (entry: string, files: Record<string, string> = {}) =>
      project({ 'gateway.config.yaml': `plugins:\n  - auth\n  - validation\n  - routing\n  ${entry}\nproviders: []\n`, ...files });

    expect(await failure(base('- ./missing.mjs'))).to.match(/gateway\.config\.yaml:5: plugins\[3\]: cannot load plugin '\.\/missing\.mjs'/);
    expect(await failure(base('- ./empty', { 'empty/README.md': 'nothing to load' }))).to.match(/plugins\[3\]: cannot load plugin '\.\/empty': .*empty is a folder with no plugin in it \(no package\.json "main"/);
    expect(await failure(base('- no-such-package-xyz'))).to.match(/plugins\[3\]: cannot load plugin 'no-such-package-xyz': .*not a built-in/);
    // An installed package that imports one that is not: that one is named, not the plugin.
    const broken = {
      'node_modules/broken-plugin/package.json': JSON.stringify({ name: 'broken-plugin', version: '1.0.0', type: 'module', main: 'index.js' }),
      'node_modules/broken-plugin/index.js': "import pad from 'left-padz-not-installed';\nexport default { name: 'broken', version: '1', apply() {} };\n",
    };
    expect(await failure(base('- broken-plugin', broken))).to.match(/plugins\[3\]: cannot load plugin 'broken-plugin': the package 'broken-plugin' is installed but could not be loaded: Cannot find package 'left-padz-not-installed'/);
    expect(await failure(base('- ./thing.mjs', { 'thing.mjs': 'export default { hello: 1 };' }))).to.match(/plugins\[3\]: '\.\/thing\.mjs' does not export a plugin/);
    expect(await failure(base('- ./boom.mjs', { 'boom.mjs': "export default { name: 'boom', version: '1', apply() { throw new Error('kaput'); } };" }))).to.match(
      /plugins\[3\]: plugin 'boom' failed to start: kaput/,
    );
    expect(await failure(base('- ./needy.mjs', { 'needy.mjs': recorder('needy', "dependencies: ['metering-of-the-future'],") }))).to.match(
      /plugins\[3\]: plugin 'needy' needs plugin 'metering-of-the-future' listed before it/,
    );
    expect(await failure(base('- routing'))).to.match(/plugins\[3\]: plugin 'routing' is loaded twice/);
    expect(await failure(base('- { name: admin, options: { colour: red } }'))).to.match(/plugins\[3\]: plugin 'admin' takes no options/);
    expect(await failure(base('- { name: openai-chat, options: { colour: red } }'))).to.match(/plugins\[3\]\.options\.colour: unknown key/);
    expect(await failure(base('- ./plugin.ts', { 'plugin.ts': 'export default {}' }))).to.match(/plugins\[3\]: .*TypeScript/);
    // A file node cannot parse: where (node's own import error does not say).
    const unparsable = { 'cut.mjs': "export default {\n  name: 'cut',\n  apply() {\n", 'wrap.mjs': "import './cut.mjs';\nexport default {};\n" };
    expect(await failure(base('- ./cut.mjs', unparsable))).to.match(/plugins\[3\]: cannot load plugin '\.\/cut\.mjs': Unexpected end of input \(\/.*cut\.mjs:4\)/);
    // Not the file itself: no place of its is named (the error is in the module it imports).
    expect(await failure(base('- ./wrap.mjs', unparsable))).to.match(/plugins\[3\]: cannot load plugin '\.\/wrap\.mjs': Unexpected end of input$/m);
  });

  it('loads a provider type a provider needs even when plugins: does not list it', async () => {
    const gateway = await build(project({ 'gateway.config.yaml': 'plugins: [openai-chat]\nproviders: [{ id: up, type: openai, baseUrl: "http://127.0.0.1:9/v1", models: [a] }]\n' }));
    try {
      expect(gateway.plugins.map((p) => p.name)).to.deep.equal(['openai-chat', 'openai']);
      expect(gateway.providers.get('up')?.operations.chat).to.be.a('function');
    } finally {
      await gateway.stop();
    }
  });

  it("a provider type's own schema alone says what baseUrl and apiKey are (the core puts no rule on them)", async () => {
    const plugin = `
export default {
  name: 'odd-vendor',
  version: '1.0.0',
  apply(api) {
    api.registerProviderType({
      type: 'odd',
      configSchema: { type: 'object', properties: { baseUrl: { type: 'string' }, apiKey: { type: 'object', properties: { user: { type: 'string' } } } } },
      create(config) {
        globalThis.__oddConfig = config;
        return { id: config.id, type: config.type, models: config.models, operations: {} };
      },
    });
  },
};
`;
    const file = project({
      'gateway.config.yaml': "plugins: [./odd.mjs]\nproviders: [{ id: o, type: odd, baseUrl: '127.0.0.1:9000', apiKey: { user: u }, models: [m] }]\n",
      'odd.mjs': plugin,
    });
    const gateway = await build(file);
    try {
      expect((globalThis as Record<string, unknown>).__oddConfig).to.deep.include({ baseUrl: '127.0.0.1:9000', apiKey: { user: 'u' } });
    } finally {
      await gateway.stop();
    }
    // A built-in type keeps its own rule for its own field.
    expect(await failure(project({ 'gateway.config.yaml': "providers: [{ id: up, type: openai, baseUrl: 'not a url', models: [a] }]\n" }))).to.match(/providers\[0\]\.baseUrl/);
  });

  it("refuses at start what a provider type's create() returned wrongly, naming the provider (was: a 500 on the first call, or models z, e, p, h)", async () => {
    const vendor = (made: string) => `
export default {
  name: 'made-wrong',
  version: '1.0.0',
  apply(api) {
    api.registerProviderType({ type: 'wrong', create(config) { return ${made}; } });
  },
};
`;
    const start = (made: string) =>
      failure(project({ 'gateway.config.yaml': 'plugins: [./wrong.mjs]\nproviders: [{ id: z1, type: wrong, models: [zeph] }]\n', 'wrong.mjs': vendor(made) }));
    const ok = "{ id: config.id, type: config.type, models: config.models, operations: { chat: async () => ({}) } }";
    const cases: Array<[string, RegExp]> = [
      [ok.replace('models: config.models', "models: 'zeph'"), /models is not a list of model names/],
      [ok.replace('chat: async', 'chatt: async'), /operations\.chatt is not an operation \(known: chat,/],
      [ok.replace('chat: async () => ({})', "chat: 'notfn'"), /operations\.chat is not a function/],
      [ok.replace('id: config.id', "id: 'other'"), /its id is "other", not the entry's 'z1'/],
      [ok.replace(', operations: { chat: async () => ({}) }', ''), /it has no operations object/],
      ['undefined', /create\(\) returned undefined, not a provider object/],
    ];
    for (const [made, problem] of cases) {
      const message = await start(made);
      expect(message, made).to.match(/gateway\.config\.yaml:2: providers\[0\]: provider type 'wrong' made provider 'z1' wrongly: /);
      expect(message, made).to.match(problem);
    }
  });

  it('uses every built-in in the default order when plugins: is absent', async () => {
    const gateway = await build(project({ 'gateway.config.yaml': 'providers: [{ id: m, type: mock, models: [x] }]\n' }));
    try {
      expect(gateway.plugins.map((p) => p.name)).to.deep.equal([...builtins.defaultOrder, 'mock']);
    } finally {
      await gateway.stop();
    }
  });
});
