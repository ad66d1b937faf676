import { expect } from 'chai';
import { startGateway, type RunningGateway } from './support/gateway.js';

const KEY = 'sk-video-budget-0000000001';

/**
 * A video submission is admitted against the key's budget with the seconds it asks for (or the
 * default length), before it goes to a back end: a key near its budget is refused at submit
 * rather than let through to overspend when the task is charged.
 */
describe('video budgets', () => {
  let gw: RunningGateway;
  before(async () => {
    gw = await startGateway(`
server: { host: 127.0.0.1, port: 0 }
storage: { url: ':memory:' }
auth:
  keys: [{ name: v, key: ${KEY}, budget: 1.2 }]
providers:
  - { id: mock, type: mock, models: [mock-video] }
pricing:
  mock-video: { perSecond: 0.1 }
`);
  });
  after(async () => gw?.stop());

  const submit = (body: Record<string, unknown>) =>
    fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-video', prompt: 'a lighthouse at dusk', ...body }),
    });

  it('charges each submission its seconds and refuses the one that would pass the budget', async () => {
    const first = await submit({ duration: 5 });
    expect(first.status, await first.clone().text()).to.equal(200);
    const second = await submit({});
    expect(second.status).to.equal(200);
    await gw.gateway.stores.flush();
    expect((await gw.gateway.stores.keys.get('v'))!.spent).to.be.closeTo(1.0, 1e-9);
    // 1.0 spent, 0.5 more asked, 1.2 allowed: refused before any back end sees it.
    const third = await submit({ duration: 5 });
    expect(third.status).to.equal(429);
    const refusal = ((await third.json()) as { error: { code: string; message: string } }).error;
    expect(refusal.code).to.equal('insufficient_quota');
    // The advice fits a video: its length, not a max_tokens it does not have.
    expect(refusal.message).to.include('shorter video (fewer seconds)').and.not.to.include('max_tokens');
    // A shorter video still fits.
    const short = await submit({ duration: 2 });
    expect(short.status).to.equal(200);
    // A submission without a prompt is a submission all the same (not a free read of a task).
    const bare = await fetch(`${gw.url}/v1/video/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-video', duration: 20 }),
    });
    expect(bare.status).to.equal(429);
  });
});
