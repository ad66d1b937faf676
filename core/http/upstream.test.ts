import { expect } from 'chai';
import { errorOf, mergeHeaders, scrub, upstreamError, upstreamHeaders } from './upstream.js';

describe('upstream errors', () => {
  it('scrub removes secrets, key-shaped strings, URLs and addresses', () => {
    const text = scrub('key sk-live-abcdef123456 bad; token SECRETVALUE at https://internal.example/v1 from 10.0.0.7:443', ['SECRETVALUE']);
    expect(text).to.not.match(/sk-live|SECRETVALUE|internal\.example|10\.0\.0\.7/);
  });

  it('scrub removes pieces of a secret a back end quotes cut or masked, and leaves ordinary text alone', () => {
    const secret = 'PROVIDER-SECRET-abcdef123456';
    const text = scrub(`Incorrect API key provided: ${secret.slice(3)} (tail ${secret.slice(-12)}; head ${secret.slice(0, 9)}***)`, [secret]);
    for (let i = 0; i + 8 <= secret.length; i++) expect(text, secret.slice(i, i + 8)).to.not.contain(secret.slice(i, i + 8));
    expect(text).to.match(/^Incorrect API key provided: \[redacted\]/);
    expect(scrub('The model does not exist or you lack access.', [secret])).to.equal('The model does not exist or you lack access.');
    // Quoted in another case, it is the same key.
    const shouted = scrub(`bad key ${'sk-e400echo-abcdef0123'.toUpperCase()} given`, ['sk-e400echo-abcdef0123']);
    expect(shouted).to.equal('bad key [redacted] given');
    // Quoted as a URL or a form carries it: its +, / and = escaped, in either case.
    const aws = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
    for (const quoted of [encodeURIComponent(aws), encodeURIComponent(aws).toLowerCase(), encodeURIComponent('Pr0v+Key/Secret=9xQ7')]) {
      const out = scrub(`bad key param: ${quoted} (check it)`, [aws, 'Pr0v+Key/Secret=9xQ7']);
      expect(out, quoted).to.equal('bad key param: [redacted] (check it)');
    }
  });

  it("errorOf reads a top-level code and message (DashScope's shape), FastAPI's detail list (its first reason, at its field), and a body after a byte order mark", () => {
    expect(errorOf('{"request_id":"r","code":"Arrearage","message":"Access denied."}')).to.deep.equal({ message: 'Access denied.', code: 'Arrearage' });
    expect(errorOf('{"detail":[{"loc":["body","documents"],"msg":"field required","type":"value_error.missing"}]}')).to.deep.equal({ message: 'documents: field required', param: 'documents' });
    const refused = upstreamError(422, '{"detail":[{"loc":["body","documents"],"msg":"field required","type":"value_error.missing"}]}');
    expect(refused.status).to.equal(400);
    expect(refused.message).to.include('documents: field required');
    expect(errorOf('{"detail":"Not Found"}')).to.deep.equal({ message: 'Not Found' });
    // After a byte order mark, as some back ends write their bodies.
    expect(errorOf('\ufeff{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature"}}')).to.deep.include({ message: 'bad temperature', param: 'temperature' });
  });

  it("upstreamHeaders: the operator's headers, lower-cased, never over the transport's, authorization or the provider's own", () => {
    const headers = upstreamHeaders(
      { 'X-Vendor-Project': 'p-1', Authorization: 'Bearer stolen', Host: 'evil', 'X-Key': 'other', 'Content-Type': 'text/plain', 'User-Agent': 'mine', 'X-Version': '9', 'Accept-Encoding': 'gzip' },
      { 'content-type': 'application/json', 'x-key': 'sk-provider', 'x-version': undefined },
    );
    // Answers are read as they come: never asked compressed.
    expect(headers).to.deep.equal({ 'user-agent': 'mine', 'accept-encoding': 'identity', 'x-vendor-project': 'p-1', 'content-type': 'application/json', 'x-key': 'sk-provider' });
    expect(upstreamHeaders(undefined, { authorization: undefined })).to.deep.equal({ 'user-agent': 'switchyard', 'accept-encoding': 'identity' });
  });

  it("mergeHeaders: a new object, later sources winning, the endpoint's own left as they were", () => {
    const endpoint = { 'user-agent': 'switchyard', authorization: 'Bearer sk-provider', accept: 'application/json' };
    const merged = mergeHeaders(endpoint, { 'x-switchyard-via': 'sy-1' }, { accept: 'text/event-stream' });
    expect(merged).to.deep.equal({ 'user-agent': 'switchyard', authorization: 'Bearer sk-provider', accept: 'text/event-stream', 'x-switchyard-via': 'sy-1' });
    expect(merged).to.not.equal(endpoint);
    expect(endpoint.accept).to.equal('application/json');
    expect(mergeHeaders(undefined, undefined, { 'content-type': 'application/json' })).to.deep.equal({ 'content-type': 'application/json' });
  });

  it('scrub removes host names but keeps the field paths of a validation message readable', () => {
    expect(scrub('bad seed on gpu-node-7.corp.internal, api.vendor.example:443 and x.svc.cluster.local')).to.equal('bad seed on [host], [host] and [host]');
    expect(scrub('messages.0.content: Input should be a valid list; tools.3.input_schema.type is required')).to.equal(
      'messages.0.content: Input should be a valid list; tools.3.input_schema.type is required',
    );
  });

  it("scrub removes stack frames, source paths and URLs of any scheme (a database's holds its password), not ordinary prose", () => {
    expect(scrub('internal stack at Object.<anonymous> (/srv/app/server.js:10:5) db=postgres://u:p@db:5432/x raw')).to.equal('internal stack [stack] db=[url] raw');
    expect(scrub('ValueError at File "/srv/app/main.py", line 42; also C:\\app\\worker.py:7 and /opt/lib/x.rb')).to.equal('ValueError at [path]; also [path] and [path]');
    expect(scrub('cache at redis://:s3cr3t@cache:6379/0 failed')).to.equal('cache at [url] failed');
    expect(scrub('messages must have at least (1) item, got /messages/0/content')).to.equal('messages must have at least (1) item, got /messages/0/content');
    // What a client may have written itself stays readable: relative paths, file names, prose.
    for (const text of ['path/to/main.py is not valid', 'present in tools: src/index.ts', 'got my.tool/helper.rs', 'File "report.pdf" could not be parsed', 'Error at messages.2 (see line 1:45)']) {
      expect(scrub(text), text).to.equal(text);
    }
  });

  it('maps statuses to gateway codes and keeps no raw body', () => {
    const overloaded = upstreamError(503, '', { 'retry-after': '3' });
    expect([overloaded.code, overloaded.status, overloaded.retryable, overloaded.headers['retry-after']]).to.deep.equal(['upstream_overloaded', 503, true, '3']);
    expect(upstreamError(500, '<html>stack trace</html>').code).to.equal('upstream_error');
    expect(upstreamError(500, '<html>stack trace</html>').message).to.not.include('stack');
    expect(upstreamError(503, '').retryable).to.equal(true);
    expect(upstreamError(401, '{"error":{"message":"Incorrect API key provided: sk-ab***"}}').status).to.equal(502);
    const limited = upstreamError(429, '', { 'retry-after': '7' });
    expect(limited.code).to.equal('upstream_rate_limited');
    expect(limited.headers['retry-after']).to.equal('7');
    const long = upstreamError(400, '{"error":{"message":"This model\'s maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}');
    expect([long.code, long.status, long.param, long.retryable]).to.deep.equal(['context_length_exceeded', 400, 'messages', false]);
    expect(upstreamError(400, '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}').code).to.equal('context_length_exceeded');
    expect(upstreamError(400, '{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}').code).to.equal('context_length_exceeded');
    // A prompt plus max_tokens past the window: the same case as a prompt too long.
    expect(upstreamError(400, '{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}').code).to.equal('context_length_exceeded');
    // A max_tokens larger than the model writes is not a prompt too long.
    expect(upstreamError(400, '{"error":{"message":"max_tokens exceeds the maximum number of tokens this model can generate (8192)"}}').code).to.equal('upstream_bad_request');
    const named = upstreamError(400, '{"error":{"message":"bad","param":"messages[0].content","code":"invalid_value"}}');
    expect([named.code, named.param]).to.deep.equal(['upstream_bad_request', 'messages[0].content']);
    expect(upstreamError(400, '{"error":{"message":"bad","param":"not a field name; see http://x"}}').param).to.equal(null);
    const bad = upstreamError(400, '{"error":{"message":"max_tokens is too large"}}');
    expect(bad.status).to.equal(400);
    expect(bad.retryable).to.equal(false);
    expect(bad.message).to.include('max_tokens is too large');
  });
});

describe('upstream errors: an account out of credit', () => {
  it('is upstream_quota_exhausted (429, x-should-retry false, retryable elsewhere) however the back end says it; a rate limit that says "quota" is not', () => {
    const said = (status: number, error: Record<string, unknown>) => upstreamError(status, JSON.stringify({ error }));
    for (const error of [
      said(402, { message: 'Insufficient Balance', type: 'unknown_error' }),
      said(402, { type: 'billing_error', message: 'Your account has an outstanding balance.' }),
      said(400, { type: 'billing_error', message: 'Billing issue.' }),
      said(400, { type: 'invalid_request_error', message: 'Your credit balance is too low to access the API.' }),
      said(429, { code: 'insufficient_quota', message: 'You exceeded your current quota, please check your plan and billing details.' }),
    ]) {
      expect(error.code, error.message).to.equal('upstream_quota_exhausted');
      expect(error.status).to.equal(429);
      expect(error.retryable).to.equal(true);
      expect(error.headers['x-should-retry']).to.equal('false');
      expect(error.message).to.not.include('balance');
    }
    expect(said(429, { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'You exceeded your current quota.' }).code).to.equal('upstream_rate_limited');
    expect(said(400, { type: 'invalid_request_error', message: 'max_tokens: must be positive' }).code).to.equal('upstream_bad_request');
  });
});
