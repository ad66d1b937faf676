import { expect } from 'chai';
import { hiddenSlot } from './hidden.js';

describe('hiddenSlot: a value kept on an object out of sight', () => {
  it('keeps one value per object and slot; two slots never see each other', () => {
    const a = hiddenSlot<string>();
    const b = hiddenSlot<number>();
    const target = { x: 1 };
    expect(a.get(target)).to.equal(undefined);
    expect(a.has(target)).to.equal(false);
    a.set(target, 'one');
    b.set(target, 2);
    a.set(target, 'two');
    expect(a.get(target)).to.equal('two');
    expect(b.get(target)).to.equal(2);
    expect(a.has(target)).to.equal(true);
    expect(a.get({ x: 1 })).to.equal(undefined);
    a.clear(target);
    expect(a.has(target)).to.equal(false);
    expect(a.get(target)).to.equal(undefined);
    expect(b.get(target)).to.equal(2);
    a.clear({});
  });

  it('is invisible to keys, symbols, spreads, JSON and structuredClone, and works on frozen objects and arrays', () => {
    const slot = hiddenSlot<object>();
    const target = { id: 'x', list: [1, 2] };
    slot.set(target, { secret: true });
    expect(Object.keys(target)).to.deep.equal(['id', 'list']);
    expect(Reflect.ownKeys(target)).to.deep.equal(['id', 'list']);
    expect(JSON.stringify(target)).to.equal('{"id":"x","list":[1,2]}');
    expect(slot.get({ ...target })).to.equal(undefined);
    expect(slot.get(structuredClone(target))).to.equal(undefined);
    const frozen = Object.freeze({ y: 1 });
    slot.set(frozen, { ok: 1 });
    expect(slot.get(frozen)).to.deep.equal({ ok: 1 });
    const array: number[] = [];
    slot.set(array, { on: 'array' });
    expect(slot.get(array)).to.deep.equal({ on: 'array' });
    expect(array.length).to.equal(0);
  });
});
