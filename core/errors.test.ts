import { expect } from 'chai';
import { GatewayError, type ErrorCode } from './errors.js';

describe('GatewayError', () => {
  it('takes the status, type and message of its code in the table', () => {
    const error = new GatewayError('forbidden', { params: { detail: 'Not on weekends.' } });
    expect([error.status, error.type, error.message, error.code]).to.deep.equal([403, 'permission_error', 'Not on weekends.', 'forbidden']);
  });

  it('refuses a code the table lacks with an error that names it (a plugin in plain JavaScript can give any string)', () => {
    expect(() => new GatewayError('permission_denied' as ErrorCode)).to.throw(TypeError, "unknown error code 'permission_denied'");
    expect(() => new GatewayError('constructor' as ErrorCode)).to.throw(TypeError, "unknown error code 'constructor'");
  });
});
