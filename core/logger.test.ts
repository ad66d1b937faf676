import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import { createLogger } from './logger.js';

describe('createLogger, pretty format', () => {
  it("writes a client's control characters escaped: they neither drive the terminal nor start a forged line", async () => {
    const sink = new PassThrough();
    let text = '';
    sink.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    const logger = createLogger({ level: 'info', format: 'pretty' }, sink);
    const model = 'mock-\u001b[31mRED\u001b]0;pwned\u0007\r\n13:00:00.000 info shutting down (forged)\u202e';
    logger.info('request', { model, usage: { note: '\u009b2J' } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(text.trimEnd().split('\n'), text).to.have.length(1);
    // The level's own colour is the gateway's; nothing else may be raw.
    const own = text.replace(/\u001b\[\d+m(\w+)\u001b\[39m/, '$1');
    expect(own).to.not.match(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    expect(text).to.include('model="mock-\\u001b[31mRED\\u001b]0;pwned\\u0007\\u000d\\u000a13:00:00.000 info shutting down (forged)\\u202e"');
  });

  it('quotes a value with a space, = or ", so that it cannot pass for more fields', async () => {
    const sink = new PassThrough();
    let text = '';
    sink.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    const logger = createLogger({ level: 'info', format: 'pretty' }, sink);
    logger.info('request', { model: 'gpt 4o status=500', key: 'say "hi"', empty: '', plain: 'mock-chat', status: 200 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(text).to.include('model="gpt 4o status=500" key="say \\"hi\\"" empty="" plain=mock-chat status=200');
    // A backslash before a quote cannot end the value early: it is escaped too.
    logger.info('request', { model: 'a\\" status=500 x=1' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(text).to.include('model="a\\\\\\" status=500 x=1"');
  });
});
