import { expect } from 'chai';
import { GatewayError } from '../errors.js';
import { guardJson } from './body.js';

function codeOf(fn: () => void): string | undefined {
  try {
    fn();
    return undefined;
  } catch (error) {
    return (error as GatewayError).code;
  }
}

describe('guardJson', () => {
  it('accepts ordinary bodies up to the depth limit', () => {
    expect(codeOf(() => guardJson({ a: [{ b: { c: 1 } }] }, 4))).to.equal(undefined);
  });

  it('refuses bodies nested past the limit without recursion', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(codeOf(() => guardJson({ deep }, 64))).to.equal('json_too_deep');
    expect(codeOf(() => guardJson({ a: { b: { c: {} } } }, 3))).to.equal('json_too_deep');
  });

  it('refuses prototype-reaching keys at any depth', () => {
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const body = JSON.parse(`{"messages":[{"content":{"${key}":{"x":1}}}]}`) as unknown;
      expect(codeOf(() => guardJson(body, 64)), key).to.equal('forbidden_key');
    }
  });
});
