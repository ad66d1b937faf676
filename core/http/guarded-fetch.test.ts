import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isGatewayError } from '../errors.js';
import { classifyAddress, fetchImage, type AddressClass } from './guarded-fetch.js';

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

describe('guarded fetch: the address classifier', () => {
  const table: Array<[string, AddressClass]> = [
    // IPv4
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['100.63.255.255', 'public'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['100.128.0.0', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.9.9.9', 'loopback'],
    ['169.254.1.1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['172.15.255.255', 'public'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.0', 'public'],
    ['192.168.1.1', 'private'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    // IPv6
    ['2606:4700:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456:789a::1', 'unique-local'],
    ['fd00:ec2::254', 'metadata'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2001:0:4136:e378::1', 'reserved'],
    ['100::1', 'reserved'],
    // IPv4 inside IPv6
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::FFFF:10.1.2.3', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:8.8.8.8', 'public'],
    ['0:0:0:0:0:ffff:192.168.0.1', 'private'],
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::127.0.0.1', 'reserved'],
    ['64:ff9b::10.0.0.1', 'private'],
    ['64:ff9b::8.8.8.8', 'public'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:0808:0808::1', 'public'],
    ['[::1]', 'loopback'],
    // not addresses
    ['example.com', 'invalid'],
    ['1.2.3', 'invalid'],
    ['256.1.1.1', 'invalid'],
    ['1:2:3:4:5:6:7:8:9', 'invalid'],
    ['1::2::3', 'invalid'],
  ];
  for (const [address, kind] of table) {
    it(`${address} is ${kind}`, () => expect(classifyAddress(address)).to.equal(kind));
  }
});

describe('guarded fetch: fetchImage', () => {
  let server: http.Server;
  let port = 0;
  before(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/cat.png') {
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': PNG.length });
        res.end(PNG);
      } else if (req.url === '/octets') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(PNG);
      } else if (req.url === '/host') {
        res.writeHead(200, { 'content-type': 'image/png' });
        res.end(Buffer.concat([PNG, Buffer.from(String(req.headers.host))]));
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  async function refusal(promise: Promise<unknown>): Promise<{ message: string; param: string | null; status: number }> {
    try {
      await promise;
    } catch (error) {
      if (!isGatewayError(error)) throw error;
      return { message: error.message, param: error.param, status: error.status };
    }
    throw new Error('the fetch was not refused');
  }

  it('refuses a loopback URL unless the host is allowed', async () => {
    const url = `http://127.0.0.1:${port}/cat.png`;
    const refused = await refusal(fetchImage(url, { param: 'messages[0].content[1]' }));
    expect(refused).to.deep.include({ status: 400, param: 'messages[0].content[1]' });
    expect(refused.message).to.match(/loopback address/);
    const image = await fetchImage(url, { param: 'p', allowPrivate: ['127.0.0.1'] });
    expect(image.mimeType).to.equal('image/png');
    expect(image.bytes.equals(PNG)).to.equal(true);
  });

  it('refuses a name if any of its addresses is private, and says nothing of the addresses', async () => {
    const resolve = async () => [{ address: '93.184.215.14', family: 4 }, { address: '10.1.2.3', family: 4 }];
    const refused = await refusal(fetchImage('http://mixed.example/cat.png', { param: 'p', resolve }));
    expect(refused.message).to.match(/private address/);
    expect(refused.message).not.to.include('10.1.2.3');
  });

  it('connects to the checked address, not to a second resolution (no rebinding)', async () => {
    let lookups = 0;
    // `pinned.invalid` exists in no DNS: the only way to reach the server is the checked address.
    const resolve = async () => {
      lookups++;
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const image = await fetchImage(`http://pinned.invalid:${port}/host`, { param: 'p', resolve, allowPrivate: ['pinned.invalid'] });
    expect(lookups).to.equal(1);
    expect(image.bytes.subarray(PNG.length).toString()).to.equal(`pinned.invalid:${port}`);
  });

  it('never fetches a metadata address, allow-list or not', async () => {
    const resolve = async () => [{ address: '169.254.169.254', family: 4 }];
    const refused = await refusal(fetchImage('http://metadata.internal/latest', { param: 'p', resolve, allowPrivate: true }));
    expect(refused.message).to.match(/metadata address/);
    const v6 = await refusal(fetchImage('http://[fd00:ec2::254]/latest', { param: 'p', allowPrivate: true }));
    expect(v6.message).to.match(/metadata address/);
    const mapped = await refusal(fetchImage('http://[::ffff:169.254.169.254]/latest', { param: 'p', allowPrivate: true }));
    expect(mapped.message).to.match(/metadata address/);
  });

  it('a resolver that hangs ends with the deadline; a name that does not resolve is refused', async () => {
    const hang = () => new Promise<never>(() => undefined);
    const slow = await refusal(fetchImage('http://hangs.example/x.png', { param: 'p', resolve: hang, timeoutMs: 100 }));
    expect(slow.message).to.match(/did not answer within 100 ms/);
    const none = await refusal(fetchImage('http://nothing.example/x.png', { param: 'p', resolve: async () => [] }));
    expect(none.message).to.match(/could not be resolved/);
  });

  it('refuses other schemes and URLs with credentials', async () => {
    expect((await refusal(fetchImage('file:///etc/passwd', { param: 'p' }))).message).to.match(/only http and https/);
    expect((await refusal(fetchImage('ftp://example.com/x.png', { param: 'p' }))).message).to.match(/only http and https/);
    expect((await refusal(fetchImage('http://user:pw@example.com/x.png', { param: 'p' }))).message).to.match(/credentials/);
    expect((await refusal(fetchImage('not a url', { param: 'p' }))).message).to.match(/not a valid URL/);
  });

  it('takes application/octet-stream when the bytes are an image, and reports an error status', async () => {
    const image = await fetchImage(`http://127.0.0.1:${port}/octets`, { param: 'p', allowPrivate: true });
    expect(image.mimeType).to.equal('image/png');
    expect((await refusal(fetchImage(`http://127.0.0.1:${port}/nothing`, { param: 'p', allowPrivate: true }))).message).to.match(/HTTP status 404/);
  });
});
