import { expect } from 'chai';
import { HealthTracker, RetryBudget } from './health.js';

/** A tracker on a clock the test moves by hand. */
function tracker(options: Partial<ConstructorParameters<typeof HealthTracker>[0]> = {}) {
  const clock = { now: 1_000_000 };
  const health = new HealthTracker({ failureThreshold: 3, cooldownMs: 1000, maxCooldownMs: 5000, window: 10, earlyProbeMs: 100, ...options }, () => clock.now);
  return { health, clock };
}

describe('routing HealthTracker (circuit breaker)', () => {
  it('is healthy and available for a target it never saw', () => {
    const { health } = tracker();
    expect(health.available('p', 'm')).to.equal(true);
    expect(health.halfOpen('p', 'm')).to.equal(false);
    expect(health.availableAt('p', 'm')).to.equal(0);
    expect(health.view('p', 'm')).to.deep.include({ state: 'healthy', coolingDownUntil: null, recentRequests: 0, recentErrorRate: 0 });
  });

  it('opens after failureThreshold consecutive failures, not before; a success in between starts the count again', () => {
    const { health, clock } = tracker();
    health.failure('p', 'm', 10, 'upstream_error');
    health.failure('p', 'm', 10, 'upstream_error');
    health.success('p', 'm', 10);
    health.failure('p', 'm', 10, 'upstream_error');
    health.failure('p', 'm', 10, 'upstream_error');
    expect(health.available('p', 'm')).to.equal(true);
    health.failure('p', 'm', 10, 'upstream_timeout');
    expect(health.available('p', 'm')).to.equal(false);
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 1000);
    expect(health.view('p', 'm')).to.deep.include({
      state: 'cooling_down',
      coolingDownUntil: new Date(clock.now + 1000).toISOString(),
      consecutiveFailures: 3,
      lastError: 'upstream_timeout',
    });
  });

  it('rateLimited: while a 429 opened the circuit, through its cooldown and its probe, whatever fails late; until a success', () => {
    const { health, clock } = tracker();
    health.failure('p', 'm', 10, 'upstream_rate_limited', 2000);
    expect(health.rateLimited('p', 'm')).to.equal(true);
    // A call sent before the 429 times out late: the cooldown and its cause stand.
    health.failure('p', 'm', 10, 'upstream_timeout');
    expect(health.rateLimited('p', 'm')).to.equal(true);
    clock.now += 2000;
    expect(health.claim('p', 'm')).to.be.above(0);
    expect(health.rateLimited('p', 'm')).to.equal(true);
    health.success('p', 'm', 10);
    expect(health.rateLimited('p', 'm')).to.equal(false);
    // Opened by server errors: not a rate limit, even if a late 429 without Retry-After follows.
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error');
    health.failure('p', 'm', 10, 'upstream_rate_limited');
    expect(health.available('p', 'm')).to.equal(false);
    expect(health.rateLimited('p', 'm')).to.equal(false);
  });

  it('does not stretch the cooldown for failures of calls sent before the circuit opened', () => {
    const { health, clock } = tracker();
    // Six calls were in flight when the back end died; they fail one after the other.
    for (let i = 0; i < 6; i++) health.failure('p', 'm', 10, 'upstream_error');
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 1000);
    expect(health.view('p', 'm').consecutiveFailures).to.equal(6);
    // The first probe after that cooldown that fails doubles it, once.
    clock.now += 1000;
    expect(health.claim('p', 'm')).to.be.above(0);
    health.failure('p', 'm', 10, 'upstream_error');
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 2000);
  });

  it('a probe whose stream began closes the circuit at once (other calls need not wait out the stream); a stall then reopens it with the longer cooldown, a clean end keeps it closed', () => {
    const { health, clock } = tracker();
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error');
    clock.now += 1000;
    expect(health.claim('p', 'm')).to.be.above(0);
    health.answered('p', 'm');
    // Other calls go to it while the probe's stream runs.
    expect(health.view('p', 'm')).to.deep.include({ state: 'healthy', consecutiveFailures: 3 });
    expect(health.available('p', 'm')).to.equal(true);
    // It stalls midway: the circuit opens again, with the longer cooldown, as for a failed probe.
    health.failure('p', 'm', 10, 'upstream_timeout');
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 2000);
    // Next probe streams to the end: healthy again.
    clock.now += 2000;
    expect(health.claim('p', 'm')).to.be.above(0);
    health.answered('p', 'm');
    health.success('p', 'm', 10);
    expect(health.view('p', 'm')).to.deep.include({ state: 'healthy', consecutiveFailures: 0 });
  });

  it('a call sent before the circuit opened that fails (or succeeds) after the cooldown neither reopens it, nor lengthens the cooldown, nor closes it', () => {
    const { health, clock } = tracker();
    const slowSentAt = clock.now;
    clock.now += 100;
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error', undefined, { probe: false, sentAt: clock.now });
    expect(health.available('p', 'm')).to.equal(false);
    clock.now += 1100; // the 1 s cooldown is over: half-open, no probe yet
    expect(health.halfOpen('p', 'm')).to.equal(true);
    health.failure('p', 'm', 1200, 'upstream_timeout', undefined, { probe: false, sentAt: slowSentAt });
    expect(health.halfOpen('p', 'm')).to.equal(true);
    health.success('p', 'm', 1200, { probe: false, sentAt: slowSentAt });
    expect(health.halfOpen('p', 'm')).to.equal(true);
    // The probe fails: the cooldown doubles from 1 s, not from a doubling the late call made.
    expect(health.claim('p', 'm')).to.be.above(0);
    health.failure('p', 'm', 10, 'upstream_error', undefined, { probe: true, sentAt: clock.now });
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 2000);
  });

  it("only the call that holds the probe ends it: another call's neutral outcome or failure leaves the target to the probe alone", () => {
    const { health, clock } = tracker();
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error');
    clock.now += 1100;
    expect(health.claim('p', 'm')).to.be.above(0);
    health.neutral('p', 'm', { probe: false, sentAt: clock.now - 5000 });
    expect(health.claim('p', 'm')).to.equal(0);
    health.neutral('p', 'm', { probe: true, sentAt: clock.now });
    expect(health.claim('p', 'm')).to.be.above(0);
  });

  it("a probe's outcome ends only that probe: an earlier probe's stream ending later leaves a newer probe in flight", () => {
    const { health, clock } = tracker();
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error');
    clock.now += 1100;
    const first = health.claim('p', 'm');
    health.answered('p', 'm', { probe: first, sentAt: clock.now }); // its stream began: closed
    for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error', undefined, { probe: 0, sentAt: clock.now });
    clock.now += 2100;
    const second = health.claim('p', 'm');
    expect(second).to.be.above(first);
    // The first probe's stream ends now (its client left): the second probe stays the only one.
    health.neutral('p', 'm', { probe: first, sentAt: clock.now - 3200 });
    expect(health.claim('p', 'm')).to.equal(0);
    health.success('p', 'm', 10, { probe: second, sentAt: clock.now });
    expect(health.view('p', 'm').state).to.equal('healthy');
  });

  it('keeps targets apart: one provider model cooling down says nothing of another', () => {
    const { health } = tracker({ failureThreshold: 1 });
    health.failure('p', 'm1', 10, 'upstream_error');
    expect(health.available('p', 'm1')).to.equal(false);
    expect(health.available('p', 'm2')).to.equal(true);
    expect(health.available('q', 'm1')).to.equal(true);
  });

  it('lets exactly one probe through after the cooldown; a successful probe closes the circuit', () => {
    const { health, clock } = tracker({ failureThreshold: 1 });
    health.failure('p', 'm', 10, 'upstream_error');
    clock.now += 999;
    expect(health.available('p', 'm')).to.equal(false);
    expect(health.claim('p', 'm')).to.equal(0);
    clock.now += 1;
    expect(health.view('p', 'm').state).to.equal('half_open');
    expect(health.halfOpen('p', 'm')).to.equal(true);
    expect(health.claim('p', 'm')).to.be.above(0);
    // While the probe is out, nobody else gets the target.
    expect(health.claim('p', 'm')).to.equal(0);
    expect(health.available('p', 'm')).to.equal(false);
    expect(health.view('p', 'm').state).to.equal('probing');
    health.success('p', 'm', 20);
    expect(health.available('p', 'm')).to.equal(true);
    expect(health.view('p', 'm')).to.deep.include({ state: 'healthy', consecutiveFailures: 0, coolingDownUntil: null });
    expect(health.availableAt('p', 'm')).to.equal(0);
  });

  it('doubles the cooldown after each failed probe, up to maxCooldownMs, and starts again from cooldownMs after a success', () => {
    const { health, clock } = tracker({ failureThreshold: 1 });
    health.failure('p', 'm', 10, 'upstream_error');
    const cooldowns: number[] = [];
    for (let i = 0; i < 5; i++) {
      clock.now = health.availableAt('p', 'm');
      expect(health.claim('p', 'm')).to.be.above(0);
      health.failure('p', 'm', 10, 'upstream_error');
      cooldowns.push(health.availableAt('p', 'm') - clock.now);
    }
    expect(cooldowns).to.deep.equal([2000, 4000, 5000, 5000, 5000]);
    clock.now = health.availableAt('p', 'm');
    health.claim('p', 'm');
    health.success('p', 'm', 10);
    health.failure('p', 'm', 10, 'upstream_error');
    expect(health.availableAt('p', 'm') - clock.now).to.equal(1000);
  });

  it('a neutral outcome (client left, bad request) releases the probe without judging the target', () => {
    const { health, clock } = tracker({ failureThreshold: 1 });
    health.failure('p', 'm', 10, 'upstream_error');
    clock.now += 1000;
    expect(health.claim('p', 'm')).to.be.above(0);
    health.neutral('p', 'm');
    expect(health.view('p', 'm').state).to.equal('half_open');
    expect(health.claim('p', 'm')).to.be.above(0);
  });

  it("honours the back end's Retry-After at once (no threshold), capped at maxCooldownMs", () => {
    const { health, clock } = tracker();
    health.failure('p', 'm', 10, 'upstream_rate_limited', 2500);
    expect(health.available('p', 'm')).to.equal(false);
    expect(health.availableAt('p', 'm')).to.equal(clock.now + 2500);
    health.failure('q', 'm', 10, 'upstream_rate_limited', 60_000);
    expect(health.availableAt('q', 'm')).to.equal(clock.now + 5000);
    clock.now += 2500;
    expect(health.available('p', 'm')).to.equal(true);
    expect(health.halfOpen('p', 'm')).to.equal(true);
  });

  it('reports the recent error rate and latency over the window', () => {
    const { health } = tracker({ window: 4, failureThreshold: 100 });
    health.success('p', 'm', 100);
    health.failure('p', 'm', 300, 'upstream_error');
    health.success('p', 'm', 200);
    health.success('p', 'm', 400);
    expect(health.view('p', 'm')).to.deep.include({ recentRequests: 4, recentErrorRate: 0.25 });
    expect(health.view('p', 'm').latencyMs).to.deep.equal({ avg: 250, p50: 300, p95: 400 });
    // The window slides: the oldest outcome (100 ms, ok) drops out.
    health.failure('p', 'm', 500, 'upstream_error');
    expect(health.view('p', 'm')).to.deep.include({ recentRequests: 4, recentErrorRate: 0.5 });
    expect(health.view('p', 'm').latencyMs.avg).to.equal(350);
  });

  describe('early probes (a call with no other target)', () => {
    const open = (health: HealthTracker) => {
      for (let i = 0; i < 3; i++) health.failure('p', 'm', 10, 'upstream_error');
    };

    it('one earlyProbeMs after the circuit opened, one at a time, the wait doubling after each that failed', () => {
      const { health, clock } = tracker({ cooldownMs: 10_000, maxCooldownMs: 60_000, earlyProbeMs: 100 });
      open(health);
      const opened = clock.now;
      expect(health.earlyProbeAt('p', 'm')).to.equal(opened + 100);
      expect(health.claimEarly('p', 'm'), 'not at once').to.equal(0);
      clock.now += 100;
      const id = health.claimEarly('p', 'm');
      expect(id).to.be.above(0);
      expect(health.view('p', 'm').state).to.equal('probing');
      expect(health.earlyProbeAt('p', 'm'), 'one in flight at a time').to.equal(undefined);
      expect(health.claimEarly('p', 'm')).to.equal(0);
      // It fails: the cooldown stands as it was, not longer; the next early probe 200 ms after this one.
      clock.now += 30;
      health.failure('p', 'm', 30, 'upstream_error', undefined, { probe: id, sentAt: clock.now - 30 });
      expect(health.availableAt('p', 'm')).to.equal(opened + 10_000);
      expect(health.view('p', 'm').state).to.equal('cooling_down');
      expect(health.earlyProbeAt('p', 'm')).to.equal(opened + 300);
      clock.now = opened + 300;
      const second = health.claimEarly('p', 'm');
      expect(second).to.be.above(id);
      health.failure('p', 'm', 30, 'upstream_error', undefined, { probe: second, sentAt: clock.now });
      expect(health.earlyProbeAt('p', 'm'), 'then 400 ms').to.equal(opened + 700);
      clock.now = opened + 700;
      const third = health.claimEarly('p', 'm');
      // It succeeds: the circuit closes at once, and the next cooldown is cooldownMs again.
      health.success('p', 'm', 5, { probe: third, sentAt: clock.now });
      expect(health.available('p', 'm')).to.equal(true);
      expect(health.view('p', 'm')).to.deep.include({ state: 'healthy', consecutiveFailures: 0 });
      open(health);
      expect(health.availableAt('p', 'm')).to.equal(clock.now + 10_000);
      // The wait starts again at earlyProbeMs.
      expect(health.earlyProbeAt('p', 'm')).to.equal(clock.now + 100);
    });

    it('a probe never sent gives its time back; the one in flight is seen by probing()', () => {
      const { health, clock } = tracker({ cooldownMs: 10_000, earlyProbeMs: 100 });
      open(health);
      clock.now += 100;
      const id = health.claimEarly('p', 'm');
      expect(health.probing('p', 'm')).to.equal(true);
      health.unclaimEarly('p', 'm', id + 1); // not its probe: nothing
      expect(health.probing('p', 'm')).to.equal(true);
      health.unclaimEarly('p', 'm', id);
      expect(health.probing('p', 'm')).to.equal(false);
      expect(health.claimEarly('p', 'm'), 'at once').to.be.above(id);
    });

    it('a failed early probe says what the back end says now: out of credit stops them', () => {
      const { health, clock } = tracker({ cooldownMs: 10_000, earlyProbeMs: 100 });
      open(health);
      clock.now += 100;
      const id = health.claimEarly('p', 'm');
      health.failure('p', 'm', 10, 'upstream_quota_exhausted', undefined, { probe: id, sentAt: clock.now });
      expect(health.openedBy('p', 'm')).to.equal('upstream_quota_exhausted');
      clock.now += 5000;
      expect(health.earlyProbeAt('p', 'm')).to.equal(undefined);
    });

    it("a back end's Retry-After shorter than the cooldown: the next early probe when it ends; a success forgets it", () => {
      const { health, clock } = tracker({ cooldownMs: 10_000, maxCooldownMs: 60_000, earlyProbeMs: 100 });
      open(health);
      const opened = clock.now;
      clock.now += 100;
      const id = health.claimEarly('p', 'm');
      health.failure('p', 'm', 10, 'upstream_overloaded', 2000, { probe: id, sentAt: clock.now });
      expect(health.availableAt('p', 'm')).to.equal(opened + 10_000);
      expect(health.earlyProbeAt('p', 'm')).to.equal(clock.now + 2000);
      clock.now += 2000;
      const next = health.claimEarly('p', 'm');
      expect(next).to.be.above(id);
      health.success('p', 'm', 5, { probe: next, sentAt: clock.now });
      open(health);
      expect(health.earlyProbeAt('p', 'm')).to.equal(clock.now + 100);
    });

    it('a stream that begins closes the circuit as a probe does', () => {
      const { health, clock } = tracker({ cooldownMs: 10_000, earlyProbeMs: 100 });
      open(health);
      clock.now += 100;
      const id = health.claimEarly('p', 'm');
      health.answered('p', 'm', { probe: id, sentAt: clock.now });
      expect(health.available('p', 'm')).to.equal(true);
    });

    it('none while a Retry-After of the back end runs, nor for an account out of credit, nor with earlyProbeMs 0, nor past the cooldown (a half-open probe is due then)', () => {
      const retryAfter = tracker({ cooldownMs: 10_000, maxCooldownMs: 60_000, earlyProbeMs: 100 });
      retryAfter.health.failure('p', 'm', 10, 'upstream_overloaded', 5000);
      retryAfter.clock.now += 4999;
      expect(retryAfter.health.earlyProbeAt('p', 'm')).to.equal(undefined);
      expect(retryAfter.health.claimEarly('p', 'm')).to.equal(0);
      // Its Retry-After over, then failures the gateway counted open it again: early probes then.
      retryAfter.clock.now += 1;
      const probe = retryAfter.health.claim('p', 'm');
      retryAfter.health.failure('p', 'm', 10, 'upstream_error', undefined, { probe, sentAt: retryAfter.clock.now });
      expect(retryAfter.health.earlyProbeAt('p', 'm')).to.equal(retryAfter.clock.now + 100);

      const credit = tracker({ cooldownMs: 10_000, earlyProbeMs: 100 });
      for (let i = 0; i < 3; i++) credit.health.failure('p', 'm', 10, 'upstream_quota_exhausted');
      credit.clock.now += 500;
      expect(credit.health.earlyProbeAt('p', 'm')).to.equal(undefined);

      const off = tracker({ cooldownMs: 10_000, earlyProbeMs: 0 });
      open(off.health);
      off.clock.now += 500;
      expect(off.health.earlyProbeAt('p', 'm')).to.equal(undefined);

      const short = tracker({ cooldownMs: 100, earlyProbeMs: 100 });
      open(short.health);
      expect(short.health.earlyProbeAt('p', 'm'), 'the cooldown ends first').to.equal(undefined);
    });
  });
});

describe('routing RetryBudget', () => {
  it('starts with the burst and never holds more', () => {
    const budget = new RetryBudget(0.2, 10);
    expect(budget.available).to.equal(10);
    for (let i = 0; i < 100; i++) budget.deposit();
    expect(budget.available).to.equal(10);
  });

  it('allows the burst, then about ratio retries per call', () => {
    const budget = new RetryBudget(0.2, 10);
    let retries = 0;
    for (let call = 0; call < 1000; call++) {
      budget.deposit();
      // Every call fails and would retry as often as it may.
      while (budget.withdraw()) retries++;
    }
    // 10 from the burst plus 0.2 per call but the first (its deposit found the budget full).
    expect(retries).to.equal(10 + Math.floor(0.2 * 999));
  });

  it('five deposits of 0.2 after a balance of 0.8 are one whole retry (0.2 added in binary fractions falls short of 1)', () => {
    const budget = new RetryBudget(0.2, 10);
    for (let i = 0; i < 10; i++) expect(budget.withdraw()).to.equal(true);
    // 19 calls, the last 11 of them retried once each: 0.8 left.
    for (let call = 0; call < 19; call++) {
      budget.deposit();
      if (call >= 8) budget.withdraw();
    }
    expect(budget.available).to.equal(0.8);
    expect(budget.withdraw()).to.equal(false);
    budget.deposit();
    expect(budget.withdraw()).to.equal(true);
  });

  it('refuses a retry below one whole unit, and a zero ratio allows only the burst', () => {
    const budget = new RetryBudget(0, 2);
    expect(budget.withdraw()).to.equal(true);
    expect(budget.withdraw()).to.equal(true);
    expect(budget.withdraw()).to.equal(false);
    budget.deposit();
    expect(budget.withdraw()).to.equal(false);
    expect(budget.available).to.equal(0);
  });
});
