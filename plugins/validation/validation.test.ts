import { expect } from 'chai';
import { chatCompletionsSchema } from '../formats/openai-chat/schema.js';
import { createRequestAjv, warmUp } from './index.js';

describe('validation', () => {
  it('the quick (non-verbose) validator says yes and no exactly where the verbose one does', () => {
    const quick = createRequestAjv({ verbose: false }).compile(chatCompletionsSchema);
    const verbose = createRequestAjv().compile(chatCompletionsSchema);
    const user = { role: 'user', content: 'hi' };
    const bodies: unknown[] = [
      { model: 'm', messages: [user] },
      { model: 'm', messages: [user], temperature: 3 },
      { model: 'm', messages: [] },
      { model: 'm' },
      { messages: [user] },
      { model: 'm', messages: [user], unknown_field: 1 },
      { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'ftp://x' } }] }] },
      { model: 'm', messages: [{ role: 'tool', content: 'x' }] },
      { model: 'm', messages: [user], stop: ['a', 'b', 'c', 'd', 'e'] },
      { model: 'm', messages: [user], n: 1.5 },
      null,
      [],
      'text',
    ];
    for (const body of bodies) expect(quick(body), JSON.stringify(body)).to.equal(verbose(body));
  });

  it("warming a validator up at set-up leaves no unhandled rejection, even for an $async schema that refuses {}", async () => {
    const rejections: unknown[] = [];
    const record = (reason: unknown) => rejections.push(reason);
    process.on('unhandledRejection', record);
    try {
      const ajv = createRequestAjv();
      const asyncCheck = ajv.compile({ $async: true, type: 'object', required: ['model'] });
      // The promise it answers with does refuse {}: the warm-up must be what handles it.
      await asyncCheck({}).then(
        () => expect.fail('{} has no model'),
        (error: Error) => expect(error.message).to.match(/validation failed/),
      );
      warmUp(asyncCheck);
      warmUp(ajv.compile(chatCompletionsSchema));
      // Unhandled rejections are reported once the microtasks have run and the loop turns.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(rejections).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', record);
    }
  });
});
