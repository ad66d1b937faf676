/**
 * Health of each target (provider + upstream model): a circuit breaker with a half-open probe,
 * and recent error rate and latency for the operator.
 */

export interface BreakerOptions {
  /** Consecutive failures that open the circuit. */
  failureThreshold: number;
  /** How long an opened circuit stays open before a probe may go through. */
  cooldownMs: number;
  /** Longest cooldown after repeated failed probes (the cooldown doubles each time). */
  maxCooldownMs: number;
  /** Outcomes kept for the error rate and latency. */
  window: number;
  /**
   * Least time between two early probes of a target that cools down while some call has no
   * other target (see claimEarly); 0: no early probes, such calls are refused until the cooldown ends.
   */
  earlyProbeMs: number;
}

/** healthy; cooling_down (skipped); half_open (cooldown over: the next call probes it); probing (a probe is in flight). */
export type CircuitState = 'healthy' | 'cooling_down' | 'half_open' | 'probing';

export interface TargetHealthView {
  target: string;
  provider: string;
  model: string;
  state: CircuitState;
  coolingDownUntil: string | null;
  consecutiveFailures: number;
  recentRequests: number;
  recentErrorRate: number;
  latencyMs: { avg: number | null; p50: number | null; p95: number | null };
  lastError: string | null;
}

interface Outcome {
  ok: boolean;
  latencyMs: number;
}

/** What the tracker is told of the call an outcome belongs to. */
export interface CallOfTarget {
  /** The probe the call held (claim()'s number; 0 or false: none; true: whichever is in flight). */
  probe: number | boolean;
  /** When the call was sent to the target, on the tracker's clock. */
  sentAt: number;
}

class TargetHealth {
  consecutiveFailures = 0;
  openUntil = 0;
  /** Cooldown to use the next time the circuit opens. */
  nextCooldownMs: number;
  probing = false;
  /** The number of the probe in flight (claim()), 0 when none: only its call ends it. */
  probeId = 0;
  /** The probe's stream began (the circuit closed then): its end is still the probe's outcome. */
  probeStreaming = false;
  lastError: string | null = null;
  /** The error code of the failure that opened the circuit (the cooldown and its probe), until a success. */
  openedBy: string | null = null;
  /** When the circuit last opened: a call sent before it says nothing of the back end since. */
  openedAt = 0;
  /** Until when the back end itself asked to be left alone (its Retry-After): no early probe before then. */
  heldByBackEndUntil = 0;
  /** When the last early probe was claimed (claimEarly), and the one before (unclaimEarly puts it back). */
  earlyProbedAt = -Infinity;
  earlyProbedBefore = -Infinity;
  /** Early probes that failed since the circuit last opened on the gateway's count: each doubles the wait for the next. */
  earlyFailures = 0;
  readonly outcomes: Outcome[] = [];
  private head = 0;

  constructor(
    readonly provider: string,
    readonly model: string,
    private readonly options: BreakerOptions,
  ) {
    this.nextCooldownMs = options.cooldownMs;
  }

  record(ok: boolean, latencyMs: number): void {
    if (this.outcomes.length < this.options.window) this.outcomes.push({ ok, latencyMs });
    else {
      // The oldest outcome's object is reused: a busy target allocates nothing per call.
      const oldest = this.outcomes[this.head]!;
      oldest.ok = ok;
      oldest.latencyMs = latencyMs;
      this.head = (this.head + 1) % this.options.window;
    }
  }
}

export class HealthTracker {
  /** By provider, then by model: looked up on every call without building a key string. */
  private readonly targets = new Map<string, Map<string, TargetHealth>>();

  constructor(
    private readonly options: BreakerOptions,
    private readonly now: () => number = Date.now,
  ) {}

  static key(provider: string, model: string): string {
    return `${provider}/${model}`;
  }

  private find(provider: string, model: string): TargetHealth | undefined {
    return this.targets.get(provider)?.get(model);
  }

  private get(provider: string, model: string): TargetHealth {
    let models = this.targets.get(provider);
    if (!models) {
      models = new Map();
      this.targets.set(provider, models);
    }
    let health = models.get(model);
    if (!health) {
      health = new TargetHealth(provider, model, this.options);
      models.set(model, health);
    }
    return health;
  }

  /** Whether a call may go to the target now; a cooled-down target lets one probe through. */
  available(provider: string, model: string): boolean {
    const health = this.find(provider, model);
    if (!health || health.openUntil === 0) return true;
    if (this.now() < health.openUntil) return false;
    return !health.probing;
  }

  /** Whether the target's cooldown is over and no probe is in flight: the next call may probe it. */
  halfOpen(provider: string, model: string): boolean {
    const health = this.find(provider, model);
    return Boolean(health && health.openUntil !== 0 && this.now() >= health.openUntil && !health.probing);
  }

  /**
   * Reserve the one probe of a half-open target for a call; true when this call got it. Until the
   * probe's outcome (success, failure or neutral) the target is unavailable to every other call,
   * including the retries of calls that chose their order before.
   */
  claim(provider: string, model: string): number {
    if (!this.halfOpen(provider, model)) return 0;
    const health = this.find(provider, model)!;
    health.probing = true;
    health.probeId = ++this.probes;
    return health.probeId;
  }

  /** Probes claimed so far (each gets the next number). */
  private probes = 0;

  /**
   * When the target may take an early probe (see claimEarly), else undefined: it is cooling
   * down, not for an account out of credit, and no probe is in flight. That is earlyProbeMs
   * after the circuit opened, and after the last early probe, the wait doubling with each early
   * probe that failed; not before a Retry-After of its back end ends; and only if that comes
   * before the cooldown's end (the half-open probe is due then).
   */
  earlyProbeAt(provider: string, model: string): number | undefined {
    const health = this.find(provider, model);
    const now = this.now();
    if (!this.options.earlyProbeMs || !health || health.probing || health.openUntil <= now) return undefined;
    if (health.openedBy === 'upstream_quota_exhausted') return undefined;
    const wait = this.options.earlyProbeMs * 2 ** Math.min(health.earlyFailures, 30);
    const at = Math.max(now, Math.max(health.openedAt, health.earlyProbedAt) + wait, health.heldByBackEndUntil);
    return at < health.openUntil ? at : undefined;
  }

  /**
   * Reserve the one probe of a target that is still cooling down, for a call that has no other
   * target to go to, when earlyProbeAt says now. Its outcome is a probe's: a success closes the
   * circuit at once; a failure ends the probe, and while the cooldown runs leaves it as it was
   * (the next early probe waits twice as long as this one did).
   */
  claimEarly(provider: string, model: string): number {
    const at = this.earlyProbeAt(provider, model);
    if (at === undefined || at > this.now()) return 0;
    const health = this.find(provider, model)!;
    health.earlyProbedBefore = health.earlyProbedAt;
    health.earlyProbedAt = this.now();
    health.probing = true;
    health.probeId = ++this.probes;
    return health.probeId;
  }

  /**
   * An early probe `probe` that was never sent (the call was refused or ended before its attempt):
   * released, and its time given back, so that the next call may probe at once.
   */
  unclaimEarly(provider: string, model: string, probe: number): void {
    const health = this.find(provider, model);
    if (!health?.probing || health.probeId !== probe) return;
    health.earlyProbedAt = health.earlyProbedBefore;
    this.endProbe(health);
  }

  /** Whether a probe (half-open or early) of the target is in flight. */
  probing(provider: string, model: string): boolean {
    return this.find(provider, model)?.probing === true;
  }

  /** Whether `call` holds the target's probe in flight (see CallOfTarget.probe). */
  private holds(health: TargetHealth, call: CallOfTarget | undefined): boolean {
    if (!call || call.probe === true) return true;
    return typeof call.probe === 'number' && call.probe !== 0 && call.probe === health.probeId;
  }

  private endProbe(health: TargetHealth): void {
    health.probing = false;
    health.probeStreaming = false;
    health.probeId = 0;
  }

  /**
   * Whether the target is out of use (cooling down, or its probe in flight) because the back end
   * said it was rate limiting us: a 429 opened its circuit.
   */
  rateLimited(provider: string, model: string): boolean {
    return this.openedBy(provider, model) === 'upstream_rate_limited';
  }

  /** The error code of the failure that took the target out of use, while it is out of use. */
  openedBy(provider: string, model: string): string | undefined {
    const health = this.find(provider, model);
    return health && health.openUntil !== 0 ? (health.openedBy ?? undefined) : undefined;
  }

  /** When the target can be tried again (0: now). */
  availableAt(provider: string, model: string): number {
    const health = this.find(provider, model);
    if (!health || health.openUntil === 0) return 0;
    return health.openUntil;
  }

  /**
   * A stream began. A probe's closes the circuit at once: other calls need not wait out a stream
   * that may run for minutes. The stream's end is still the probe's outcome: `success()` when it
   * completes; `failure()` when it breaks or stalls opens the circuit again with the longer
   * cooldown, as a failed probe does, so a back end whose streams always stall never stays open.
   */
  answered(provider: string, model: string, call?: CallOfTarget): void {
    const health = this.find(provider, model);
    if (!health?.probing || !this.holds(health, call)) return;
    health.probing = false;
    health.probeStreaming = true;
    health.openUntil = 0;
    health.openedBy = null;
    health.heldByBackEndUntil = 0;
    health.earlyFailures = 0;
  }

  /**
   * `call` says whether the call held the target's probe and when it was sent; without it (a
   * caller that does not know), any probe in flight is taken as this call's. A success of a call
   * sent before the circuit last opened, coming in while it is open or half-open, is recorded but
   * closes nothing: the back end has said nothing since.
   */
  success(provider: string, model: string, latencyMs: number, call?: CallOfTarget): void {
    const health = this.get(provider, model);
    const holds = this.holds(health, call);
    // Sent before the circuit last opened, and not its probe (a probe of an earlier opening is
    // such a call too): recorded, nothing more.
    if (call && !holds && call.sentAt < health.openedAt) {
      health.record(true, latencyMs);
      return;
    }
    health.record(true, latencyMs);
    health.consecutiveFailures = 0;
    health.openUntil = 0;
    health.openedBy = null;
    health.heldByBackEndUntil = 0;
    health.earlyFailures = 0;
    if (holds || !health.probing) this.endProbe(health);
    health.nextCooldownMs = this.options.cooldownMs;
  }

  /** A failure that says the target is unwell (not a bad request). `retryAfterMs` from the back end wins. */
  failure(provider: string, model: string, latencyMs: number, code: string, retryAfterMs?: number, call?: CallOfTarget): void {
    const health = this.get(provider, model);
    health.record(false, latencyMs);
    health.lastError = code;
    health.consecutiveFailures++;
    const now = this.now();
    // Only the call that holds the probe ends it (see success()).
    const wasProbe = this.holds(health, call) && (health.probing || health.probeStreaming);
    if (wasProbe) this.endProbe(health);
    if (retryAfterMs !== undefined && retryAfterMs > 0) {
      const until = now + Math.min(retryAfterMs, this.options.maxCooldownMs);
      if (until > health.openUntil) {
        health.openUntil = until;
        health.openedBy = code;
        health.openedAt = now;
      }
      health.heldByBackEndUntil = Math.max(health.heldByBackEndUntil, until);
      return;
    }
    // Already cooling down: a call sent before the circuit opened failed late, or an early probe
    // failed. The cooldown stands; only a failed half-open probe makes it longer. An early probe
    // says what the back end says now (out of credit, say), and the next one waits longer.
    if (now < health.openUntil) {
      if (wasProbe) {
        health.openedBy = code;
        health.earlyFailures++;
      }
      return;
    }
    // Past the cooldown, a call sent before the circuit opened (a slow one timing out late) says
    // nothing of the back end since: it neither opens the circuit again nor lengthens the cooldown.
    if (!wasProbe && call && call.sentAt < health.openedAt) return;
    if (wasProbe || health.consecutiveFailures >= this.options.failureThreshold) {
      health.openUntil = now + health.nextCooldownMs;
      health.openedBy = code;
      health.openedAt = now;
      health.earlyFailures = 0;
      health.nextCooldownMs = Math.min(health.nextCooldownMs * 2, this.options.maxCooldownMs);
    }
  }

  /** A failure that says nothing of the target's health (the client left, a 400): only release a probe (the call's own, when `call` says). */
  neutral(provider: string, model: string, call?: CallOfTarget): void {
    const health = this.find(provider, model);
    if (health && this.holds(health, call)) this.endProbe(health);
  }

  /** The tracker's clock (the `sentAt` of a CallOfTarget is read on it). */
  clock(): number {
    return this.now();
  }

  view(provider: string, model: string): TargetHealthView {
    const health = this.find(provider, model);
    const now = this.now();
    if (!health) {
      return {
        target: HealthTracker.key(provider, model),
        provider,
        model,
        state: 'healthy',
        coolingDownUntil: null,
        consecutiveFailures: 0,
        recentRequests: 0,
        recentErrorRate: 0,
        latencyMs: { avg: null, p50: null, p95: null },
        lastError: null,
      };
    }
    const latencies = health.outcomes.map((o) => o.latencyMs).sort((a, b) => a - b);
    const pick = (q: number) => (latencies.length ? round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!) : null);
    const failures = health.outcomes.filter((o) => !o.ok).length;
    const cooling = health.openUntil > now;
    return {
      target: HealthTracker.key(provider, model),
      provider,
      model,
      // An early probe (claimEarly) is in flight while the target still cools down.
      state: health.probing ? 'probing' : cooling ? 'cooling_down' : health.openUntil !== 0 ? 'half_open' : 'healthy',
      coolingDownUntil: cooling ? new Date(health.openUntil).toISOString() : null,
      consecutiveFailures: health.consecutiveFailures,
      recentRequests: health.outcomes.length,
      recentErrorRate: health.outcomes.length ? round(failures / health.outcomes.length) : 0,
      latencyMs: {
        avg: latencies.length ? round(latencies.reduce((a, b) => a + b, 0) / latencies.length) : null,
        p50: pick(0.5),
        p95: pick(0.95),
      },
      lastError: health.lastError,
    };
  }
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/**
 * A retry budget: every call earns `ratio` of a retry, each retry spends one, and the balance
 * never exceeds `burst`. So retries stay near `ratio` of the traffic however many back ends
 * fail, while a quiet gateway still has a few to spend.
 */
/** One retry, in the budget's units: thousandths, whole numbers, so that 0.2 five times is one (not 0.9999999999999969). */
const ONE_RETRY = 1000;

export class RetryBudget {
  /** In thousandths of a retry. */
  private balance: number;
  private readonly ratio: number;
  private readonly burst: number;

  constructor(ratio: number, burst: number) {
    this.ratio = Math.round(ratio * ONE_RETRY);
    this.burst = Math.round(burst * ONE_RETRY);
    this.balance = this.burst;
  }

  /** A new call arrived. */
  deposit(): void {
    this.balance = Math.min(this.burst, this.balance + this.ratio);
  }

  /** Take one retry if the budget has one. */
  withdraw(): boolean {
    if (this.balance < ONE_RETRY) return false;
    this.balance -= ONE_RETRY;
    return true;
  }

  get available(): number {
    return Math.floor(this.balance) / ONE_RETRY;
  }
}
