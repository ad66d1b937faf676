import { expect } from 'chai';
import { base64DataUrl, mediaType } from './data-url.js';

describe('base64 data: URLs', () => {
  it('reads the type and data, with parameters before ;base64 and any case', () => {
    expect(base64DataUrl('data:image/png;base64,AAAA')).to.deep.equal({ type: 'image/png', data: 'AAAA' });
    expect(base64DataUrl('data:image/png;name=a.png;base64,AAAA')).to.deep.equal({ type: 'image/png', data: 'AAAA' });
    expect(base64DataUrl('data:application/pdf;name=a.pdf;charset=x;BASE64,QQ==')).to.deep.equal({ type: 'application/pdf', data: 'QQ==' });
    expect(base64DataUrl('data:IMAGE/JPG;base64,AAAA')).to.deep.equal({ type: 'image/jpeg', data: 'AAAA' });
    expect(base64DataUrl('data:;base64,AAAA')).to.deep.equal({ type: '', data: 'AAAA' });
  });

  it('is undefined for a URL that is not base64 data', () => {
    expect(base64DataUrl('data:image/png,raw')).to.equal(undefined);
    expect(base64DataUrl('https://example.com/a.png')).to.equal(undefined);
  });

  it('media types as vendors take them', () => {
    expect(mediaType(' Image/PNG ')).to.equal('image/png');
    expect(mediaType('image/jpg')).to.equal('image/jpeg');
  });
});
