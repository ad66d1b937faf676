import { expect } from 'chai';
import { createHooks, tapOnly } from './hooks.js';

describe('hooks', () => {
  it('declares every lifecycle hook once, frozen', () => {
    const hooks = createHooks();
    expect(Object.keys(hooks)).to.have.members([
      'setup', 'ready', 'close', 'onRequest', 'validate', 'resolveTargets', 'beforeUpstream',
      'afterUpstream', 'onAttempt', 'shouldRetry', 'onStreamChunk', 'onUsage', 'onResponse', 'onError',
    ]);
    expect(Object.isFrozen(hooks)).to.equal(true);
  });

  it('hands plugins tap-only hooks: taps reach the real hook, calling is impossible', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const seen: string[] = [];
    view.onUsage.tapPromise('metering', async (usage) => void seen.push(`usage:${usage.inputTokens}`));
    view.onStreamChunk.tap('guard', (chunk) => ({ wrapped: chunk }));
    expect(view.onUsage).to.not.have.property('promise');
    expect(view.onUsage).to.not.have.property('call');
    expect(view.onStreamChunk).to.not.have.property('call');
    expect(Object.isFrozen(view.onUsage)).to.equal(true);
    await hooks.onUsage.promise({ inputTokens: 3, outputTokens: 1, totalTokens: 4 }, {} as never);
    expect(seen).to.deep.equal(['usage:3']);
    expect(hooks.onStreamChunk.call('x', {} as never)).to.deep.equal({ wrapped: 'x' });
    expect(hooks.onUsage.taps[0]!.name).to.equal('metering');
  });

  it('awaits an async function given to tap on an async hook, so its failure is caught', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const order: string[] = [];
    view.onRequest.tap('slow', async () => {
      await new Promise((resolve) => setImmediate(resolve));
      order.push('slow');
    });
    view.onRequest.tap('next', () => void order.push('next'));
    await hooks.onRequest.promise({} as never);
    expect(order).to.deep.equal(['slow', 'next']);

    view.validate.tap('failing', async () => {
      throw new Error('refused');
    });
    const error = await hooks.validate.promise({} as never, {} as never).catch((e: unknown) => e);
    expect((error as Error).message).to.equal('refused');
  });
});
