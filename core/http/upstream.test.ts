import { expect } from 'chai';
import { scrub, upstreamError } from './upstream.js';

describe('upstream errors', () => {
  it('scrub removes secrets, key-shaped strings, URLs and addresses', () => {
    const text = scrub('key sk-live-abcdef123456 bad; token SECRETVALUE at https://internal.example/v1 from 10.0.0.7:443', ['SECRETVALUE']);
    expect(text).to.not.match(/sk-live|SECRETVALUE|internal\.example|10\.0\.0\.7/);
  });

  it('maps statuses to gateway codes and keeps no raw body', () => {
    expect(upstreamError(500, '<html>stack trace</html>').code).to.equal('upstream_error');
    expect(upstreamError(500, '<html>stack trace</html>').message).to.not.include('stack');
    expect(upstreamError(503, '').retryable).to.equal(true);
    expect(upstreamError(401, '{"error":{"message":"Incorrect API key provided: sk-ab***"}}').status).to.equal(502);
    const limited = upstreamError(429, '', { 'retry-after': '7' });
    expect(limited.code).to.equal('upstream_rate_limited');
    expect(limited.headers['retry-after']).to.equal('7');
    const bad = upstreamError(400, '{"error":{"message":"max_tokens is too large"}}');
    expect(bad.status).to.equal(400);
    expect(bad.retryable).to.equal(false);
    expect(bad.message).to.include('max_tokens is too large');
  });
});
