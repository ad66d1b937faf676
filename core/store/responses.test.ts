import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { openSqliteStores } from './sqlite.js';
import type { StoredResponse } from './types.js';

function turn(id: string, previous: string | null, keyId: string | null = 'key_a'): StoredResponse {
  return {
    id,
    keyId,
    provider: 'p',
    previousResponseId: previous,
    model: 'm',
    createdAt: 1,
    input: [{ role: 'user', content: `in ${id}` }],
    output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `out ${id}` }] }],
  };
}

describe('responses store (sqlite)', () => {
  it('a saved turn is readable at once (before its batch is written) and after, only by its key', async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      stores.responses.save(turn('resp_1', null));
      expect((await stores.responses.get('resp_1', 'key_a'))?.input).to.deep.equal([{ role: 'user', content: 'in resp_1' }]);
      expect(await stores.responses.get('resp_1', 'key_b')).to.equal(undefined);
      expect(await stores.responses.get('resp_1', null)).to.equal(undefined);
      stores.flush();
      expect(await stores.responses.get('resp_1', 'key_a')).to.deep.equal(turn('resp_1', null));
      expect(await stores.responses.get('resp_1', 'key_b')).to.equal(undefined);
      stores.responses.save(turn('resp_open', null, null));
      stores.flush();
      expect((await stores.responses.get('resp_open', null))?.id).to.equal('resp_open');
      expect(await stores.responses.get('resp_open', 'key_a')).to.equal(undefined);
    } finally {
      stores.close();
    }
  });

  it('survives a restart (migration 4 made the table once)', async () => {
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'switchyard-responses-')), 'db.sqlite');
    const first = openSqliteStores({ file });
    first.responses.save(turn('resp_kept', null));
    first.close();
    const second = openSqliteStores({ file });
    try {
      expect((await second.responses.get('resp_kept', 'key_a'))?.output).to.have.length(1);
    } finally {
      second.close();
    }
  });
});
