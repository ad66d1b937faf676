import { expect } from 'chai';
import { openSqliteStores } from '../../../../core/store/sqlite.js';
import type { StoredResponse } from '../../../../core/store/types.js';
import { historyOf } from './history.js';

function turn(id: string, previous: string | null): StoredResponse {
  return {
    id,
    keyId: 'key_a',
    provider: 'p',
    previousResponseId: previous,
    model: 'm',
    createdAt: 1,
    input: [{ role: 'user', content: `in ${id}` }],
    output: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: `out ${id}` }] }],
  };
}

describe('conversation history', () => {
  it('historyOf: every turn of the chain, oldest first, each input before its output', async () => {
    const stores = openSqliteStores({ file: ':memory:' });
    try {
      stores.responses.save(turn('r1', null));
      stores.responses.save(turn('r2', 'r1'));
      stores.flush();
      stores.responses.save(turn('r3', 'r2'));
      const read = (id: string) => stores.responses.get(id, 'key_a');
      const items = (await historyOf((await read('r3'))!, read)) as Array<{ content: unknown }>;
      expect(items.map((i) => (typeof i.content === 'string' ? i.content : (i.content as Array<{ text: string }>)[0]!.text))).to.deep.equal([
        'in r1',
        'out r1',
        'in r2',
        'out r2',
        'in r3',
        'out r3',
      ]);
      // A cycle (a hostile or broken store) ends the walk.
      stores.responses.save({ ...turn('r1', 'r3') });
      expect(await historyOf((await read('r3'))!, read)).to.have.length(6);
    } finally {
      stores.close();
    }
  });
});
