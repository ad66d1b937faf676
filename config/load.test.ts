import { expect } from 'chai';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, parseSize, substituteEnv } from './load.js';
import { ConfigError, ConfigErrors, createConfigAjv, checkAgainst, formatPath, type YamlPath } from './validate.js';

describe('config/load: substituteEnv', () => {
  function sub(value: unknown, env: NodeJS.ProcessEnv = {}) {
    const problems: Array<{ path: YamlPath; problem: string }> = [];
    const out = substituteEnv(value, env, [], problems);
    return { out, problems };
  }

  it('leaves strings without $ and non-strings alone', () => {
    expect(sub({ a: 'plain', b: 3, c: true, d: null, e: ['x'] }).out).to.deep.equal({ a: 'plain', b: 3, c: true, d: null, e: ['x'] });
  });

  it('replaces ${VAR} and ${VAR:-default}', () => {
    expect(sub('${A}/${B:-bee}', { A: 'a' }).out).to.equal('a/bee');
    expect(sub('${B:-bee}', { B: '' }).out).to.equal('bee');
    expect(sub('${B:-bee}', { B: 'b' }).out).to.equal('b');
    expect(sub('${A}', { A: '' }).out).to.equal('');
  });

  it('a default may hold characters other than }', () => {
    expect(sub('${URL:-http://127.0.0.1:6379/0?x=1&y=$}', {}).out).to.equal('http://127.0.0.1:6379/0?x=1&y=$');
  });

  it('a ${ inside a default is refused at its path, set or not (it was read up to the inner }, leaving the outer one in the value)', () => {
    for (const env of [{ A: 'sk-real' }, {}, { B: 'b' }]) {
      const { problems } = sub({ providers: [{ apiKey: '${A:-${B}}' }] }, env);
      expect(problems.map((p) => [formatPath(p.path), p.problem]), JSON.stringify(env)).to.deep.equal([
        ['providers[0].apiKey', 'has a ${ inside a default (${NAME:-${OTHER}} is not supported): give the default as plain text'],
      ]);
    }
  });

  it('a YAML alias within its own anchor is a problem at its path, not a stack overflow', () => {
    const server: Record<string, unknown> = { port: 1 };
    server.x = server;
    const { problems } = sub({ server });
    expect(problems.map((p) => formatPath(p.path))).to.deep.equal(['server.x']);
    // The same mapping twice, side by side (an ordinary alias), is fine.
    const shared = { a: 1 };
    expect(sub({ one: shared, two: shared }).problems).to.deep.equal([]);
  });

  it('a key named __proto__ stays a key (the unknown-key check sees it), not the prototype of its mapping', () => {
    const parsed = JSON.parse('{"server": {"__proto__": {"port": 42404}}}') as Record<string, unknown>;
    const { out } = sub(parsed);
    const server = (out as { server: Record<string, unknown> }).server;
    expect(Object.keys(server)).to.deep.equal(['__proto__']);
    expect((server as { port?: unknown }).port).to.equal(undefined);
    expect(Object.getPrototypeOf(server)).to.equal(Object.prototype);
  });

  it('a value from the environment is not expanded again', () => {
    expect(sub('${A}', { A: '${B}', B: 'b' }).out).to.equal('${B}');
    expect(sub('${A}', { A: 'x$$y' }).out).to.equal('x$$y');
  });

  it('$$ is a literal $', () => {
    expect(sub('$$').out).to.equal('$');
    expect(sub('$${A}', { A: 'x' }).out).to.equal('${A}');
    expect(sub('pa$$word').out).to.equal('pa$word');
  });

  it('a missing variable is a problem at its path, and never carries a value', () => {
    const { problems } = sub({ providers: [{ apiKey: '${NOPE}' }] }, { OTHER: 'sk-other-secret' });
    expect(problems).to.have.length(1);
    expect(problems[0]!.path).to.deep.equal(['providers', 0, 'apiKey']);
    expect(problems[0]!.problem).to.contain('NOPE').and.not.to.contain('sk-other-secret');
  });

  for (const text of ['${VAR-default}', '${VAR:?required}', '${ VAR }', '${1VAR}', 'x ${UNCLOSED', '${}']) {
    it(`'${text}' is reported, not used literally, and not quoted back`, () => {
      const { problems } = sub({ apiKey: text }, { VAR: 'v' });
      expect(problems).to.have.length(1);
      expect(problems[0]!.path).to.deep.equal(['apiKey']);
      expect(problems[0]!.problem).to.contain('not a variable reference').and.not.to.contain(text);
    });
  }
});

describe('config/load: parseSize', () => {
  it('reads sizes and byte counts', () => {
    expect(parseSize('25mb')).to.equal(26214400);
    expect(parseSize('25MB')).to.equal(26214400);
    expect(parseSize(' 2 kb ')).to.equal(2048);
    expect(parseSize('1gb')).to.equal(1024 ** 3);
    expect(parseSize('10')).to.equal(10);
    expect(parseSize(4096)).to.equal(4096);
  });

  it('refuses what is not a size', () => {
    expect(() => parseSize('25 megabytes')).to.throw(/not a size/);
    expect(() => parseSize('-1kb')).to.throw(/not a size/);
  });
});

describe('config/validate', () => {
  it('formats YAML paths', () => {
    expect(formatPath(['providers', 1, 'type'])).to.equal('providers[1].type');
    expect(formatPath(['models', 0, 'targets', 0, 'provider'])).to.equal('models[0].targets[0].provider');
    expect(formatPath(['pricing', 'gpt-4o-mini', 'input'])).to.equal('pricing.gpt-4o-mini.input');
    expect(formatPath(['pricing', 'my model', 'input'])).to.equal('pricing["my model"].input');
    expect(formatPath([])).to.equal('');
  });

  it('ConfigError reads file:line: path: problem', () => {
    expect(new ConfigError('/x/gateway.config.yaml', ['server', 'port'], 3, 'must be integer').message).to.equal(
      '/x/gateway.config.yaml:3: server.port: must be integer',
    );
    expect(new ConfigError('/x/g.yaml', [], undefined, 'bad').message).to.equal('/x/g.yaml: (top level): bad');
    expect(new ConfigErrors([new ConfigError('f', ['a'], 1, 'p'), new ConfigError('f', ['b'], 2, 'q')]).message).to.equal('f:1: a: p\nf:2: b: q');
  });

  it('never quotes a value from the data in a problem', () => {
    const secret = 'sk-live-never-quoted-0123456789';
    const schema = {
      type: 'object',
      additionalProperties: false,
      properties: {
        n: { type: 'integer' },
        e: { enum: ['a', 'b'] },
        p: { type: 'string', pattern: '^x' },
        f: { type: 'string', format: 'uri' },
        l: { type: 'string', maxLength: 3 },
        c: { const: 'z' },
        arr: { type: 'array', items: { type: 'number' } },
        u: { anyOf: [{ type: 'integer' }, { type: 'boolean' }] },
      },
    };
    const data = { n: secret, e: secret, p: secret, f: secret, l: secret, c: secret, arr: [secret], u: secret };
    const problems = checkAgainst(createConfigAjv(), schema, data, ['base']);
    expect(problems.length).to.be.at.least(8);
    for (const { problem } of problems) expect(problem).not.to.contain(secret);
  });
});

describe('config/load: sizes in the file', () => {
  it('accepts a size in any case, as parseSize does', async () => {
    const { loadConfig } = await import('./load.js');
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'switchyard-size-')), 'gateway.config.yaml');
    writeFileSync(file, 'server:\n  bodyLimit: 2MB\n');
    const loaded = await loadConfig({ file, env: {} });
    expect(loaded.config.server.bodyLimit).to.equal(2 * 1024 * 1024);
  });
});

describe('config/load: true and false where a number is asked for', () => {
  async function load(yaml: string) {
    const { loadConfig } = await import('./load.js');
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const path = await import('node:path');
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'switchyard-bool-')), 'gateway.config.yaml');
    writeFileSync(file, yaml);
    return loadConfig({ file, env: { PORT_FROM_ENV: '8181' } });
  }

  it('are refused, each at its path (coerced, `rpm: false` refused every call and `bodyLimit: true` every body)', async () => {
    const error = (await load(
      'server:\n  port: true\n  bodyLimit: true\nauth:\n  keys:\n    - { name: k, key: sk-abcdefgh1, rpm: false, budget: false, maxConcurrent: false }\n',
    ).catch((e: unknown) => e)) as ConfigErrors;
    expect(error).to.be.instanceOf(ConfigErrors);
    const problems = error.errors.map((e) => `${formatPath(e.path)}: ${e.problem}`);
    expect(problems).to.include.members([
      'server.port: must be an integer (true and false are not numbers)',
      'server.bodyLimit: must be an integer (true and false are not numbers)',
      'auth.keys[0].rpm: must be an integer (true and false are not numbers)',
    ]);
    expect(problems.filter((p) => p.includes('true and false are not numbers'))).to.have.length(5);
  });

  it('a number written as text (from an environment variable) is still read as a number', async () => {
    const loaded = await load('server:\n  port: ${PORT_FROM_ENV}\n');
    expect(loaded.config.server.port).to.equal(8181);
  });
});

describe('config/load: an unknown YAML tag', () => {
  it('on an empty value is reported at its own key, not the next one', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sy-tag-'));
    const file = path.join(dir, 'gateway.config.yaml');
    writeFileSync(file, 'providers:\n  - id: main\n    type: openai\n    baseUrl: https://api.example.com/v1\n    apiKey: !vault-entry\n    models: [gpt-4o]\n');
    const error = await loadConfig({ file, env: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(ConfigErrors);
    expect((error as Error).message).to.equal(`${file}:5: providers[0].apiKey: unknown YAML tag (a value starting with !); quote the value if the ! is part of it`);
  });
});

describe('config/load: a key declared with an empty list of models', () => {
  it('is refused at its path (the key could call nothing; the admin API and the CLI refuse it too)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sy-models-'));
    const file = path.join(dir, 'gateway.config.yaml');
    writeFileSync(file, 'auth:\n  keys:\n    - { name: k, key: sk-abcdefgh1, models: [] }\n');
    const error = (await loadConfig({ file, env: {} }).catch((e: unknown) => e)) as ConfigErrors;
    expect(error).to.be.instanceOf(ConfigErrors);
    expect(error.errors.map((e) => formatPath(e.path))).to.deep.equal(['auth.keys[0].models']);
  });
});
