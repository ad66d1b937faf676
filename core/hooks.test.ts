import { expect } from 'chai';
import { callBail, callEachWithin, callObservers, callParallelObservers, callSeries, callWaterfall, createHooks, tapOnly, TapTimeout } from './hooks.js';

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

  it('a parallel observer hook starts every tap at once and settles when all have; a failing tap is reported by name, the others run', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const started: string[] = [];
    const failures: string[] = [];
    const failed = (name: string, error: unknown) => void failures.push(`${name}: ${(error as Error).message}`);
    let release!: () => void;
    view.onUsage.tap('sync', () => void started.push('sync'));
    expect(callParallelObservers(hooks.onUsage, failed, {} as never, {} as never)).to.equal(undefined);
    view.onUsage.tapPromise('slow', () => {
      started.push('slow');
      return new Promise<void>((resolve) => (release = resolve));
    });
    view.onUsage.tap('throws', () => {
      throw new Error('at once');
    });
    view.onUsage.tapPromise('rejects', async () => {
      throw new Error('later');
    });
    view.onUsage.tap('after', () => void started.push('after'));
    started.length = 0;
    let settled = false;
    const all = callParallelObservers(hooks.onUsage, failed, {} as never, {} as never)!.then(() => (settled = true));
    expect(started).to.deep.equal(['sync', 'slow', 'after']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).to.equal(false);
    release();
    await all;
    expect(settled).to.equal(true);
    expect(failures).to.deep.equal(['throws: at once', 'rejects: later']);
  });

  it('an observer hook runs its taps in order, each on its own: one that throws or rejects is reported by name and the next still runs', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const ran: string[] = [];
    const failures: string[] = [];
    const failed = (name: string, error: unknown) => void failures.push(`${name}: ${(error as Error).message}`);
    view.onResponse.tap('first', () => {
      ran.push('first');
      throw new Error('sync bug');
    });
    view.onResponse.tap('second', async () => {
      ran.push('second');
      throw new Error('async bug');
    });
    view.onResponse.tap('metering', () => void ran.push('metering'));
    await callObservers(hooks.onResponse, failed, {} as never);
    expect(ran).to.deep.equal(['first', 'second', 'metering']);
    expect(failures).to.deep.equal(['first: sync bug', 'second: async bug']);
    // All synchronous and none failing: no promise.
    const quiet = createHooks();
    tapOnly(quiet).onResponse.tap('fine', () => undefined);
    expect(callObservers(quiet.onResponse, failed, {} as never)).to.equal(undefined);
  });

  it('close taps run one after another, each for a time at most: one that hangs or fails is reported by name and the next runs', async () => {
    const hooks = createHooks();
    const view = tapOnly(hooks);
    const ran: string[] = [];
    const failures: Array<[string, unknown]> = [];
    view.close.tap('hangs', () => new Promise<void>(() => ran.push('hangs')));
    view.close.tapAsync('callback', (callback) => {
      ran.push('callback');
      callback(new Error('could not flush'));
    });
    view.close.tap('throws', () => {
      ran.push('throws');
      throw new Error('bug');
    });
    view.close.tap('stores', () => void ran.push('stores'));
    await callEachWithin(hooks.close, 50, (name, error) => void failures.push([name, error]));
    expect(ran).to.deep.equal(['hangs', 'callback', 'throws', 'stores']);
    expect(failures.map(([name]) => name)).to.deep.equal(['hangs', 'callback', 'throws']);
    expect(failures[0]![1]).to.be.instanceOf(TapTimeout);
    expect((failures[1]![1] as Error).message).to.equal('could not flush');
  });
});
