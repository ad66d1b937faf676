import { expect } from 'chai';
import { callBail, callParallel, callSeries, callWaterfall, createHooks, tapOnly } from './hooks.js';

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

describe('calling the request hooks (callSeries, callWaterfall, callBail)', () => {
  it('runs series taps in order, awaiting an async one before the next, and returns no promise while all are synchronous', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const seen: string[] = [];
    view.onRequest.tap('a', () => void seen.push('a'));
    view.onRequest.tap('b', () => void seen.push('b'));
    expect(callSeries(hooks.onRequest, {} as never)).to.equal(undefined);
    expect(seen).to.deep.equal(['a', 'b']);
    view.onRequest.tap('c', async () => {
      await new Promise((resolve) => setImmediate(resolve));
      seen.push('c');
    });
    view.onRequest.tapPromise('d', async () => void seen.push('d'));
    seen.length = 0;
    const pending = callSeries(hooks.onRequest, {} as never);
    expect(pending).to.be.an.instanceOf(Promise);
    expect(seen).to.deep.equal(['a', 'b']);
    await pending;
    expect(seen).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('a tap that throws or rejects stops the series with its error', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    let after = false;
    view.validate.tap('bad', () => {
      throw new Error('sync refusal');
    });
    view.validate.tap('after', () => void (after = true));
    expect(() => callSeries(hooks.validate, {} as never, {} as never)).to.throw('sync refusal');
    const hooks2 = createHooks();
    tapOnly(hooks2).validate.tap('bad', async () => {
      throw new Error('async refusal');
    });
    tapOnly(hooks2).validate.tap('after', () => void (after = true));
    const error = await Promise.resolve(callSeries(hooks2.validate, {} as never, {} as never)).catch((e: Error) => e);
    expect((error as Error).message).to.equal('async refusal');
    expect(after).to.equal(false);
  });

  it('a waterfall passes each answer on (undefined keeps the value), sync or async', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    view.beforeUpstream.tap('one', (request) => ({ ...request, model: `${request.model}-1` }));
    // Typed as hooks.md writes it: a tap that returns undefined keeps the request (this compiles).
    view.beforeUpstream.tap('keep', (request) => (request.model === 'elsewhere' ? { ...request, model: 'other' } : undefined));
    view.afterUpstream.tap('keep', (response) => (response.status === 599 ? response : undefined));
    expect((callWaterfall(hooks.beforeUpstream, { model: 'm' } as never, {} as never) as { model: string }).model).to.equal('m-1');
    view.beforeUpstream.tapPromise('two', async (request) => ({ ...request, model: `${request.model}-2` }));
    view.beforeUpstream.tap('three', (request) => ({ ...request, model: `${request.model}-3` }));
    const out = callWaterfall(hooks.beforeUpstream, { model: 'm' } as never, {} as never);
    expect(out).to.be.an.instanceOf(Promise);
    expect(((await out) as { model: string }).model).to.equal('m-1-2-3');
  });

  it('a bail hook answers with the first tap that does, and runs no tap after it', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    let later = false;
    view.resolveTargets.tap('none', () => undefined);
    view.resolveTargets.tapPromise('first', async () => [{ model: 'x' }] as never);
    view.resolveTargets.tap('later', () => {
      later = true;
      return [];
    });
    expect(await callBail(hooks.resolveTargets, {} as never, {} as never)).to.deep.equal([{ model: 'x' }]);
    expect(later).to.equal(false);
    expect(callBail(createHooks().resolveTargets, {} as never, {} as never)).to.equal(undefined);
  });

  it('leaves the call to tapable when a hook has an interceptor or a callback-style tap', async () => {
    const hooks = createHooks();
    const calls: string[] = [];
    hooks.onRequest.intercept({ call: () => void calls.push('intercepted') });
    tapOnly(hooks).onRequest.tap('a', () => void calls.push('a'));
    await callSeries(hooks.onRequest, {} as never);
    expect(calls).to.deep.equal(['intercepted', 'a']);
    const other = createHooks();
    tapOnly(other).onRequest.tapAsync('cb', (_ctx, callback) => {
      calls.push('callback');
      callback();
    });
    await callSeries(other.onRequest, {} as never);
    expect(calls).to.include('callback');
  });

  it('a parallel hook starts every tap at once and settles when all have, with the first failure', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const started: string[] = [];
    let release!: () => void;
    view.onUsage.tap('sync', () => void started.push('sync'));
    expect(callParallel(hooks.onUsage, {} as never, {} as never)).to.equal(undefined);
    view.onUsage.tapPromise('slow', () => {
      started.push('slow');
      return new Promise<void>((resolve) => (release = resolve));
    });
    view.onUsage.tap('after', () => void started.push('after'));
    started.length = 0;
    let settled = false;
    const all = callParallel(hooks.onUsage, {} as never, {} as never)!.then(() => (settled = true));
    expect(started).to.deep.equal(['sync', 'slow', 'after']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).to.equal(false);
    release();
    await all;
    expect(settled).to.equal(true);
    view.onUsage.tapPromise('bad', async () => {
      throw new Error('observer failed');
    });
    const failure = await callParallel(hooks.onUsage, {} as never, {} as never)!.catch((e: Error) => e);
    release();
    expect((failure as Error).message).to.equal('observer failed');
  });
});
