/**
 * The operator's contract for gateway.config.yaml (../shared/design/config-contract.md):
 * every file in test/config-corpus/bad is refused with one line naming the file, the line, the
 * YAML path and the problem, without repeating a secret; the good files load; ${VAR}
 * substitution, SWITCHYARD_CONFIG, sizes and defaults behave as documented.
 *
 * Bad files are loaded the way the server loads them: loadConfig, then createGateway with the
 * built-in plugins, because plugin options and provider fields are checked only at plugin load.
 *
 * Each bad file starts with a header of comments:
 *   # expect: <yaml path> <substring of the problem>     (first line; `(top level)` for the root)
 *   # env: NAME=value                                    (optional, repeatable: the environment)
 *   # secret: VALUE                                      (optional, repeatable: must never be echoed)
 * and marks the line the message must name with a trailing `# <-- error` comment.
 */
import { expect } from 'chai';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { loadConfig, type LoadedConfig, type LoadOptions } from '../config/load.js';
import { ConfigErrors } from '../config/validate.js';
import { createGateway } from '../core/gateway.js';
import { createLogger } from '../core/logger.js';
import { builtins } from '../plugins/builtins.js';
import { writeConfig } from './support/gateway.js';
import { repoRoot } from './support/paths.js';

const corpus = path.join(repoRoot, 'test', 'config-corpus');
const badDir = path.join(corpus, 'bad');
const goodDir = path.join(corpus, 'good');

interface Expectation {
  file: string;
  yamlPath: string;
  problem: string;
  line?: number;
  env: Record<string, string>;
  secrets: string[];
}

/** Keys whose values are secrets wherever they appear. */
const SECRET_KEYS = /^\s*-?\s*(?:apiKey|key|adminKey|secretKey|accessKey|password|token)\s*:\s*['"]?([^\s'"#,}]+)/gm;

function expectationOf(file: string): Expectation {
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  const head = /^# expect: (\(top level\)|\S+) (.+)$/.exec(lines[0] ?? '');
  if (!head) throw new Error(`${file}: the first line must be '# expect: <yaml path> <problem>'`);
  const env: Record<string, string> = {};
  const secrets: string[] = [];
  for (const line of lines) {
    const e = /^# env: ([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (e) {
      env[e[1]!] = e[2]!;
      secrets.push(e[2]!);
    }
    const s = /^# secret: (.+)$/.exec(line);
    if (s) secrets.push(s[1]!.trim());
  }
  for (const match of text.matchAll(SECRET_KEYS)) {
    const value = match[1]!;
    if (!value.includes('${') && value.length >= 6) secrets.push(value);
  }
  const marked = lines.findIndex((line) => line.includes('# <-- error'));
  return {
    file,
    yamlPath: head[1]!,
    problem: head[2]!.trim(),
    line: marked === -1 ? undefined : marked + 1,
    env,
    secrets: [...new Set(secrets)],
  };
}

/** Load a file exactly as `switchyard start` does, up to (not including) listening. */
async function loadLikeServer(options: LoadOptions): Promise<{ loaded: LoadedConfig; logs: string }> {
  const sink = new PassThrough();
  let logs = '';
  sink.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
  const loaded = await loadConfig(options);
  const gateway = await createGateway({ loaded, builtins, logger: createLogger({ level: 'debug', format: 'json' }, sink) });
  await gateway.stop();
  return { loaded, logs };
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the configuration to be refused, but it loaded');
}

function tempDir(): string {
  return mkdtempSync(path.join(tmpdir(), 'switchyard-config-'));
}

describe('configuration corpus', () => {
  const badFiles = readdirSync(badDir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort();

  it('has at least 12 bad files, each with an expectation', () => {
    expect(badFiles.length).to.be.at.least(12);
    for (const f of badFiles) expectationOf(path.join(badDir, f));
  });

  describe('bad files are refused with file, line, YAML path and problem', () => {
    for (const name of badFiles) {
      const file = path.join(badDir, name);
      const want = expectationOf(file);

      it(`${name}: ${want.yamlPath} ${want.problem}`, async () => {
        const sink = new PassThrough();
        let logs = '';
        sink.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
        const error = await rejection(
          (async () => {
            const loaded = await loadConfig({ file, env: want.env });
            const gateway = await createGateway({ loaded, builtins, logger: createLogger({ level: 'debug', format: 'json' }, sink) });
            await gateway.stop();
          })(),
        );
        expect(error, String(error?.stack)).to.be.instanceOf(ConfigErrors);
        const message = error.message;
        expect(message.split('\n'), 'one line per problem, one problem here').to.have.length(1);
        expect(message).to.contain(name);
        const located = want.line === undefined ? `${file}: ${want.yamlPath}: ` : `${file}:${want.line}: ${want.yamlPath}: `;
        expect(message.startsWith(located), `message should start with '${located}'\n      got: ${message}`).to.equal(true);
        expect(message).to.contain(want.problem);
        for (const secret of want.secrets) {
          expect(message, 'a secret is echoed in the message').not.to.contain(secret);
          expect(logs, 'a secret is in the logs').not.to.contain(secret);
        }
        const [only] = (error as ConfigErrors).errors;
        expect(only!.file).to.equal(file);
        expect(only!.line).to.equal(want.line);
      });
    }
  });

  describe('good files load', () => {
    it("the repository's gateway.config.yaml", async () => {
      const { loaded } = await loadLikeServer({ file: path.join(repoRoot, 'gateway.config.yaml'), env: {} });
      expect(loaded.filepath).to.equal(path.join(repoRoot, 'gateway.config.yaml'));
      // the contract: the default file serves the mock provider on 127.0.0.1:8080
      expect(loaded.config.server).to.include({ host: '127.0.0.1', port: 8080 });
      expect(loaded.config.server.bodyLimit).to.be.a('number');
      expect(loaded.config.providers.map((p) => p.type)).to.include('mock');
    });

    for (const name of readdirSync(goodDir).sort()) {
      it(`good/${name}`, async () => {
        const file = path.join(goodDir, name);
        const env: Record<string, string> = {};
        for (const m of readFileSync(file, 'utf8').matchAll(/^# env: ([A-Za-z_][A-Za-z0-9_]*)=(.*)$/gm)) env[m[1]!] = m[2]!;
        const { loaded, logs } = await loadLikeServer({ file, env });
        expect(loaded.filepath).to.equal(file);
        for (const value of Object.values(env)) expect(logs).not.to.contain(value);
      });
    }

    it('good/full.yaml has every value substituted and typed', async () => {
      const env = { OPENAI_API_KEY: 'sk-from-env-1', TESTER_KEY: 'sk-tester-from-env', PORT: '9191' };
      const { config } = await loadConfig({ file: path.join(goodDir, 'full.yaml'), env });
      expect(config.server.port).to.equal(9191); // a string from the environment, read as a number
      expect(config.server.host).to.equal('127.0.0.1');
      expect(config.server.bodyLimit).to.equal(1024 * 1024);
      expect(config.auth.adminKey).to.equal('admin-key-for-tests-only');
      expect(config.auth.keys[0]!.key).to.equal('sk-tester-from-env');
      expect(config.providers[1]!.apiKey).to.equal('sk-from-env-1');
      expect(config.models.map((m) => m.name)).to.deep.equal(['smart', 'cheap']);
    });

    it('a good file with every default (comments only)', async () => {
      const { loaded } = await loadLikeServer({ file: path.join(goodDir, 'comments-only.yaml'), env: {} });
      const config = loaded.config;
      expect(config.server).to.deep.equal({ host: '127.0.0.1', port: 8080, bodyLimit: 26214400, answerMemoryLimit: 512 * 1024 * 1024, shutdownTimeoutMs: 10000, maxJsonDepth: 64, bodyTimeoutMs: 30000, writeTimeoutMs: 60000, streamKeepAliveMs: 15000 });
      expect(config.logging).to.deep.equal({ level: 'info', format: 'auto' });
      expect(config.storage).to.deep.equal({ driver: 'sqlite', url: './data/switchyard.db' });
      expect(config.cache).to.deep.equal({ driver: 'memory' });
      expect(config.auth).to.deep.equal({ keys: [] });
      expect(config.providers).to.deep.equal([]);
      expect(config.models).to.deep.equal([]);
      expect(config.pricing).to.deep.equal({});
      expect(config.plugins).to.equal(undefined);
    });
  });
});

describe('configuration loading', () => {
  describe('defaults', () => {
    it('fills server, logging, storage, cache, auth and provider defaults', async () => {
      const file = writeConfig('providers:\n  - id: m\n    type: mock\n');
      const { loaded } = await loadLikeServer({ file, env: {} });
      const { config } = loaded;
      expect(config.server.bodyLimit).to.equal(26214400);
      expect(config.server.port).to.equal(8080);
      expect(config.providers[0]!.models).to.deep.equal([]);
      // the provider type's own defaults are filled when the plugin checks the entry
      expect(config.providers[0]).to.include({ latencyMs: 0, chunkDelayMs: 0 });
    });

    it('an empty file is every default', async () => {
      const file = writeConfig('');
      const loaded = await loadConfig({ file, env: {} });
      expect(loaded.config.server.port).to.equal(8080);
      expect(loaded.config.providers).to.deep.equal([]);
    });
  });

  describe('bodyLimit', () => {
    const cases: Array<[string, number]> = [
      ['25mb', 26214400],
      ['1kb', 1024],
      ['1.5kb', 1536],
      ['2gb', 2 * 1024 ** 3],
      ['512b', 512],
      ['100', 100],
      ['1048576', 1048576],
    ];
    for (const [written, bytes] of cases) {
      it(`${written} -> ${bytes} bytes`, async () => {
        const loaded = await loadConfig({ file: writeConfig(`server:\n  bodyLimit: ${written}\n`), env: {} });
        expect(loaded.config.server.bodyLimit).to.equal(bytes);
      });
    }
  });

  describe('${VAR} substitution', () => {
    const VAR = 'SWITCHYARD_TEST_ONLY_VAR';
    let saved: string | undefined;
    beforeEach(() => {
      saved = process.env[VAR];
      process.env[VAR] = 'from-process-env';
    });
    afterEach(() => {
      if (saved === undefined) delete process.env[VAR];
      else process.env[VAR] = saved;
    });

    async function hostWith(value: string, env: Record<string, string>): Promise<string> {
      const loaded = await loadConfig({ file: writeConfig(`server:\n  host: "${value}"\n`), env });
      return loaded.config.server.host;
    }

    it('${VAR} takes the value from the env passed in, not process.env', async () => {
      expect(await hostWith(`\${${VAR}}`, { [VAR]: 'from-option' })).to.equal('from-option');
    });

    it('${VAR} unset in the env passed in is an error even when process.env has it', async () => {
      const error = await rejection(hostWith(`\${${VAR}}`, {}));
      expect(error.message).to.contain('server.host').and.to.contain(VAR).and.not.to.contain('from-process-env');
    });

    it('${VAR:-default} uses the default when unset or empty, the value when set', async () => {
      expect(await hostWith('${SY_HOST:-127.0.0.2}', {})).to.equal('127.0.0.2');
      expect(await hostWith('${SY_HOST:-127.0.0.2}', { SY_HOST: '' })).to.equal('127.0.0.2');
      expect(await hostWith('${SY_HOST:-127.0.0.2}', { SY_HOST: '10.0.0.1' })).to.equal('10.0.0.1');
    });

    it('${VAR:-} is an empty default', async () => {
      const loaded = await loadConfig({ file: writeConfig('auth:\n  keys:\n    - name: a\n      key: "sk-${SUFFIX:-}12345678"\n'), env: {} });
      expect(loaded.config.auth.keys[0]!.key).to.equal('sk-12345678');
    });

    it('substitutes several references inside one string and in nested lists', async () => {
      const file = writeConfig(
        'server:\n  host: "${A}.${B:-0}.${C}.1"\nproviders:\n  - id: m\n    type: mock\n    models: ["${MODEL}", plain]\n',
      );
      const loaded = await loadConfig({ file, env: { A: '10', C: '7', MODEL: 'mock-chat' } });
      expect(loaded.config.server.host).to.equal('10.0.7.1');
      expect(loaded.config.providers[0]!.models).to.deep.equal(['mock-chat', 'plain']);
    });

    it('$$ is a literal $, and $${VAR} is the literal text ${VAR}', async () => {
      expect(await hostWith('cost-$$5', {})).to.equal('cost-$5');
      expect(await hostWith('$${NOT_A_VAR}', {})).to.equal('${NOT_A_VAR}');
      expect(await hostWith('$$$${X}', { X: 'y' })).to.equal('$${X}');
      expect(await hostWith('$$${X}', { X: 'y' })).to.equal('$y');
      expect(await hostWith('a $ alone', {})).to.equal('a $ alone');
    });

    it('a value from the environment is a string, never parsed as YAML', async () => {
      expect(await hostWith('${H}', { H: 'a: b # c' })).to.equal('a: b # c');
    });

    it('a value from the environment is read as a number where one is expected', async () => {
      const loaded = await loadConfig({ file: writeConfig('server:\n  port: ${P:-8081}\n'), env: { P: '9090' } });
      expect(loaded.config.server.port).to.equal(9090);
      const fallback = await loadConfig({ file: writeConfig('server:\n  port: ${P:-8081}\n'), env: {} });
      expect(fallback.config.server.port).to.equal(8081);
    });

    it("a credential that ends with a secret file's newline, or has spaces around it, and a header HTTP cannot carry, are refused at their paths, without their values", async () => {
      const file = writeConfig(
        'providers:\n' +
          '  - { id: a, type: openai, baseUrl: "https://api.example.com/v1", apiKey: "${NL_KEY}", models: [m1] }\n' +
          '  - { id: b, type: openai, baseUrl: "https://api.example.com/v1", apiKey: "${SPACED}", models: [m2], headers: { "bad header": x, ok-name: "${NL_KEY}" } }\n' +
          '  - { id: c, type: openai, baseUrl: "https://api.example.com/v1", apiKey: "${PEM}", models: [m3] }\n',
      );
      const env = { NL_KEY: 'sk-from-a-file-0123456789\n', SPACED: ' sk-spaced-0123456789', PEM: '-----BEGIN KEY-----\nabc\n-----END KEY-----\n' };
      const error = await rejection(loadConfig({ file, env }));
      expect(error).to.be.instanceOf(ConfigErrors);
      const lines = error.message.split('\n');
      expect(lines.some((l) => l.includes('providers[0].apiKey: ends with a line break'))).to.equal(true);
      expect(lines.some((l) => l.includes('providers[1].apiKey: starts or ends with a space'))).to.equal(true);
      expect(lines.some((l) => l.includes('providers[1].headers["bad header"]: is not a header name'))).to.equal(true);
      expect(lines.some((l) => l.includes('providers[1].headers.ok-name: holds a line break'))).to.equal(true);
      // A key of several lines (one a provider signs with) is not a header's: left alone.
      expect(error.message).to.not.include('providers[2]');
      expect(error.message).to.not.include('sk-from-a-file').and.not.include('sk-spaced');
    });

    it('every missing variable is reported, each at its own path and line', async () => {
      const file = writeConfig('server:\n  host: ${NO_HOST}\nauth:\n  adminKey: ${NO_ADMIN}\n');
      const error = await rejection(loadConfig({ file, env: {} }));
      const lines = error.message.split('\n');
      expect(lines).to.have.length(2);
      expect(lines[0]).to.match(/:2: server\.host: .*NO_HOST/);
      expect(lines[1]).to.match(/:4: auth\.adminKey: .*NO_ADMIN/);
    });
  });

  describe('finding the file', () => {
    it('honours SWITCHYARD_CONFIG when no file is passed', async () => {
      const file = writeConfig('server:\n  port: 9123\n', 'elsewhere.yaml');
      const loaded = await loadConfig({ env: { SWITCHYARD_CONFIG: file }, cwd: tempDir() });
      expect(loaded.filepath).to.equal(file);
      expect(loaded.config.server.port).to.equal(9123);
    });

    it('resolves a relative SWITCHYARD_CONFIG against the working directory', async () => {
      const cwd = tempDir();
      mkdirSync(path.join(cwd, 'conf'));
      writeFileSync(path.join(cwd, 'conf', 'gw.yaml'), 'server:\n  port: 9124\n');
      const loaded = await loadConfig({ env: { SWITCHYARD_CONFIG: 'conf/gw.yaml' }, cwd });
      expect(loaded.filepath).to.equal(path.join(cwd, 'conf', 'gw.yaml'));
      expect(loaded.config.server.port).to.equal(9124);
    });

    it('an explicit file wins over SWITCHYARD_CONFIG', async () => {
      const explicit = writeConfig('server:\n  port: 9125\n');
      const other = writeConfig('server:\n  port: 9126\n');
      const loaded = await loadConfig({ file: explicit, env: { SWITCHYARD_CONFIG: other } });
      expect(loaded.config.server.port).to.equal(9125);
    });

    it('finds gateway.config.yaml in the working directory', async () => {
      const cwd = tempDir();
      writeFileSync(path.join(cwd, 'gateway.config.yaml'), 'server:\n  port: 9127\n');
      const loaded = await loadConfig({ cwd, env: {} });
      expect(loaded.filepath).to.equal(path.join(cwd, 'gateway.config.yaml'));
      expect(loaded.config.server.port).to.equal(9127);
    });

    it('finds an empty gateway.config.yaml in the working directory: every default applies', async () => {
      for (const text of ['', '\n\n', '   \n']) {
        const cwd = tempDir();
        writeFileSync(path.join(cwd, 'gateway.config.yaml'), text);
        const loaded = await loadConfig({ cwd, env: {} });
        expect(loaded.filepath).to.equal(path.join(cwd, 'gateway.config.yaml'));
        expect(loaded.config.server.port).to.equal(8080);
      }
    });

    it('no file anywhere: names the folder searched and the files looked for, and says how to name one', async () => {
      const cwd = tempDir();
      const error = await rejection(loadConfig({ cwd, env: {} }));
      expect(error).to.be.instanceOf(ConfigErrors);
      expect(error.message.startsWith(`${cwd}: (top level): no configuration file found`), error.message).to.equal(true);
      expect(error.message).to.contain('gateway.config.yaml, gateway.config.yml, gateway.config.json').and.to.contain('SWITCHYARD_CONFIG');
    });

    it('an explicit file is read as YAML whatever its extension', async () => {
      const file = writeConfig('server:\n  port: 9128\n', 'gateway.conf');
      const loaded = await loadConfig({ file, env: {} });
      expect(loaded.config.server.port).to.equal(9128);
      expect(loaded.lineOf(['server', 'port'])).to.equal(2);
    });

    it('a directory given as the file says so', async () => {
      const dir = tempDir();
      const error = await rejection(loadConfig({ file: dir, env: {} }));
      expect(error).to.be.instanceOf(ConfigErrors);
      expect(error.message).to.contain(dir).and.to.contain('is a directory');
    });

    it('a missing explicit file names the file', async () => {
      const file = path.join(tempDir(), 'nope.yaml');
      const error = await rejection(loadConfig({ file, env: {} }));
      expect(error).to.be.instanceOf(ConfigErrors);
      expect(error.message).to.contain(file).and.to.contain('file not found');
    });
  });

  describe('JSON files', () => {
    it('load like YAML files', async () => {
      const loaded = await loadConfig({ file: path.join(goodDir, 'plain.json'), env: {} });
      expect(loaded.config.server.port).to.equal(9099);
      expect(loaded.lineOf(['server', 'port'])).to.be.a('number');
    });

    it('a JSON syntax error gives a line and never quotes the text around it', async () => {
      const secret = 'sk-live-json-secret-abcdef123456';
      const file = writeConfig(`{\n  "providers": [\n    { "id": "o", "type": "openai", "apiKey": "${secret}" "models": [] }\n  ]\n}\n`, 'gateway.config.json');
      const error = await rejection(loadConfig({ file, env: {} }));
      expect(error).to.be.instanceOf(ConfigErrors);
      expect(error.message).to.match(/gateway\.config\.json:3: \(top level\): JSON syntax error/);
      for (let n = 6; n <= secret.length; n++) expect(error.message).not.to.contain(secret.slice(0, n));
    });
  });

  describe('located errors for later checks', () => {
    it('lineOf and error() point at the YAML line of a path', async () => {
      const file = writeConfig('server:\n  port: 8080\nproviders:\n  - id: a\n    type: mock\n');
      const loaded = await loadConfig({ file, env: {} });
      expect(loaded.lineOf(['providers', 0, 'type'])).to.equal(5);
      expect(loaded.lineOf(['server', 'port'])).to.equal(2);
      expect(loaded.error(['providers', 0, 'type'], 'is wrong').message).to.equal(`${file}:5: providers[0].type: is wrong`);
      // a path not in the file: the deepest ancestor that is
      expect(loaded.lineOf(['providers', 0, 'colour'])).to.equal(4);
    });
  });
});
