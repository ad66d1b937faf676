import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { startGateway, writeConfig, type RunningGateway } from './support/gateway.js';
import { cliPath } from './support/paths.js';

const ADMIN_KEY = 'admin-losses-key-0123456789abcdef';

describe('named losses on the request log (messages in front of an OpenAI-shaped back end)', () => {
  let gw: RunningGateway | undefined;
  let file: string;

  before(async () => {
    file = writeConfig(`
server: { host: 127.0.0.1, port: 0 }
logging: { level: warn, format: json }
storage: { driver: sqlite, url: ./losses.db }
auth: { adminKey: ${ADMIN_KEY} }
plugins: [request-log, auth, validation, routing, metering, admin, openai-chat, anthropic-messages]
providers:
  - { id: mock, type: mock, models: [mock-chat] }
`);
    gw = await startGateway(file);
  });
  after(async () => {
    await gw?.stop();
  });

  const message = (extra: Record<string, unknown>) =>
    fetch(`${gw!.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'mock-chat', max_tokens: 16, messages: [{ role: 'user', content: 'hello there' }], ...extra }),
    });

  it("names a client's own field names in visible ASCII, cut short: a line break, a comma or 20,000 characters do not break the answer", async () => {
    const long = 'x'.repeat(20_000);
    for (const stream of [false, true]) {
      const response = await message({ 'evil\r\nSet-Cookie: a=b': 1, 'a,b': 2, 'é\u0000': 3, [long]: 4, stream });
      expect(response.status, await response.clone().text()).to.equal(200);
      const header = response.headers.get('x-switchyard-losses')!;
      expect(header.split(',')).to.deep.equal(['evil%0D%0ASet-Cookie:%20a=b', 'a%2Cb', '%C3%A9%00', `${'x'.repeat(80)}...`]);
      expect(response.headers.get('set-cookie')).to.equal(null);
      const text = await response.text();
      expect(text).to.include(stream ? 'message_stop' : '"type":"message"');
      const logs = (await (await fetch(`${gw!.url}/admin/logs?limit=10`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json()) as {
        data: Array<{ request_id: string; losses: string[] }>;
      };
      expect(logs.data.find((e) => e.request_id === response.headers.get('x-request-id'))?.losses).to.deep.equal(header.split(','));
    }
    // Very many names: the list stops at about 2,000 characters and says how many more there were.
    const many = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`field_number_${i}`, i]));
    const response = await message(many);
    expect(response.status).to.equal(200);
    const names = response.headers.get('x-switchyard-losses')!.split(',');
    expect(names.join(',').length).to.be.at.most(2000);
    const more = Number(names.at(-1)!.slice(1));
    expect(names.at(-1)).to.match(/^\+\d+$/);
    expect(names.length - 1 + more).to.equal(300);
  });

  it('keeps what could not be carried on the request row: GET /admin/logs and switchyard logs show it', async () => {
    const lossy = await message({ top_k: 5 });
    expect(lossy.status).to.equal(200);
    const lossyId = lossy.headers.get('x-request-id')!;
    const clean = await message({});
    expect(clean.status).to.equal(200);
    const cleanId = clean.headers.get('x-request-id')!;

    const logs = (await (await fetch(`${gw!.url}/admin/logs?limit=10`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json()) as {
      data: Array<{ request_id: string; losses: string[] }>;
    };
    expect(logs.data.find((e) => e.request_id === lossyId)?.losses).to.deep.equal(['top_k']);
    expect(logs.data.find((e) => e.request_id === cleanId)?.losses).to.deep.equal([]);

    // The CLI reads the same file once the gateway has written it.
    await gw!.stop();
    gw = undefined;
    const out = spawnSync(process.execPath, [cliPath, 'logs', '--config', file], { encoding: 'utf8', cwd: path.dirname(file) });
    expect(out.status, out.stderr).to.equal(0);
    expect(out.stdout).to.include('Not carried across formats:');
    expect(out.stdout).to.include(`${lossyId}: top_k`);
    expect(out.stdout).to.not.include(`${cleanId}:`);
  });
});
