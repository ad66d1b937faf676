import { expect } from 'chai';
import { canonicalQuery, sha256Hex, sign, signParts, uriEscape, xDate } from './sign.js';

/**
 * Volcengine's published worked example ("签名过程 Demo", docs 6369/67270): GET ListUsers on
 * iam.volcengineapi.com at 20240619T071306Z, region cn-beijing, service iam, signing host and
 * x-date over an empty body.
 */
const DEMO_SK = 'WkRZeE1EQmxPVGhsWWpWak5HVmtNbUUxTXpZeU9UVXlOMlE1TmpZeVlqTQ==';
const DEMO_CANONICAL_HASH = '5ed5bca3905e1fcbf789abb56a17c2d819674a3bcfa468ae476bd1ea80d135cb';
const DEMO_SIGNATURE = 'e31c4558bcfe08a286001f59cedbf0791ffd0b2362f10e55ee2627467bcdde93';

describe('jimeng: Volcengine HMAC-SHA256 signature', () => {
  it('matches the published worked example (canonical request hash and signature)', () => {
    const result = signParts({
      method: 'GET',
      path: '/',
      query: { Action: 'ListUsers', Version: '2018-01-01', Limit: '10', Offset: '0' },
      signedHeaders: { host: 'iam.volcengineapi.com', 'x-date': '20240619T071306Z' },
      payloadHash: sha256Hex(''),
      xDate: '20240619T071306Z',
      secretKey: DEMO_SK,
      region: 'cn-beijing',
      service: 'iam',
    });
    expect(result.canonicalRequest).to.equal(
      'GET\n/\nAction=ListUsers&Limit=10&Offset=0&Version=2018-01-01\nhost:iam.volcengineapi.com\nx-date:20240619T071306Z\n\nhost;x-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
    expect(sha256Hex(result.canonicalRequest)).to.equal(DEMO_CANONICAL_HASH);
    expect(result.stringToSign).to.equal(`HMAC-SHA256\n20240619T071306Z\n20240619/cn-beijing/iam/request\n${DEMO_CANONICAL_HASH}`);
    expect(result.signature).to.equal(DEMO_SIGNATURE);
  });

  it('a wrong secret or a changed query gives another signature', () => {
    const base = {
      method: 'GET',
      path: '/',
      query: { Action: 'ListUsers', Version: '2018-01-01', Limit: '10', Offset: '0' },
      signedHeaders: { host: 'iam.volcengineapi.com', 'x-date': '20240619T071306Z' },
      payloadHash: sha256Hex(''),
      xDate: '20240619T071306Z',
      secretKey: DEMO_SK,
      region: 'cn-beijing',
      service: 'iam',
    };
    expect(signParts({ ...base, secretKey: DEMO_SK.slice(1) }).signature).to.not.equal(DEMO_SIGNATURE);
    expect(signParts({ ...base, query: { ...base.query, Limit: '11' } }).signature).to.not.equal(DEMO_SIGNATURE);
  });

  it('sign() adds X-Date, X-Content-Sha256 and the Authorization header with the cv scope', () => {
    const body = JSON.stringify({ req_key: 'jimeng_vgfm_t2v_l20', prompt: 'a cat' });
    const signed = sign({
      method: 'POST',
      host: 'visual.volcengineapi.com',
      path: '/',
      query: { Action: 'CVSync2AsyncSubmitTask', Version: '2022-08-31' },
      headers: { 'Content-Type': 'application/json' },
      body,
      accessKey: 'AKTEST',
      secretKey: 'SKTEST',
      region: 'cn-north-1',
      service: 'cv',
      date: new Date(Date.UTC(2024, 0, 15, 12, 0, 0)),
    });
    expect(signed.headers['x-date']).to.equal('20240115T120000Z');
    expect(signed.headers['x-content-sha256']).to.equal(sha256Hex(body));
    expect(signed.headers.authorization).to.match(
      /^HMAC-SHA256 Credential=AKTEST\/20240115\/cn-north-1\/cv\/request, SignedHeaders=content-type;host;x-content-sha256;x-date, Signature=[0-9a-f]{64}$/,
    );
  });

  it('escapes the query as RFC 3986 and sorts it by key', () => {
    expect(uriEscape("a b+c*!'()")).to.equal('a%20b%2Bc%2A%21%27%28%29');
    expect(canonicalQuery({ Version: '2022-08-31', Action: 'CVSync2AsyncGetResult' })).to.equal('Action=CVSync2AsyncGetResult&Version=2022-08-31');
    expect(xDate(new Date(Date.UTC(2020, 1, 29, 23, 59, 59, 999)))).to.equal('20200229T235959Z');
  });
});
