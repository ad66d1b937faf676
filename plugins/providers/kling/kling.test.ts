import { expect } from 'chai';
import { klingBody } from './index.js';

describe('kling request body', () => {
  it('names what Kling has no field for (n above 1, fps, seed, a size; an aspect ratio on image2video) as losses, only when asked', () => {
    const text: string[] = [];
    const t2v = klingBody({ model: 'kling-v1-6', prompt: 'p', n: 2, fps: 24, seed: 7, width: 1280, height: 720, aspectRatio: '16:9' }, text);
    expect(t2v.kind).to.equal('text2video');
    expect(t2v.body.aspect_ratio).to.equal('16:9');
    expect(text).to.deep.equal(['n', 'fps', 'seed', 'width', 'height']);
    const image: string[] = [];
    const i2v = klingBody({ model: 'kling-v1-6', prompt: 'p', image: 'https://e.com/a.png', aspectRatio: '16:9', n: 1 }, image);
    expect(i2v.kind).to.equal('image2video');
    expect(i2v.body).to.not.have.property('aspect_ratio');
    expect(image).to.deep.equal(['aspectRatio']);
  });
});
