/** Small statistics for the benchmark: medians, percentiles, a least-squares slope. */

/** The p-th percentile (0-100) of `values`, by the nearest-rank method on a sorted copy. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

/** The median; the mean of the two middle values for an even count. */
export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return NaN;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  return values.reduce((s, v) => s + v, 0) / values.length;
}

/** Least-squares slope of y over x (units of y per unit of x). */
export function slope(points: ReadonlyArray<{ x: number; y: number }>): number {
  if (points.length < 2) return NaN;
  const mx = mean(points.map((p) => p.x));
  const my = mean(points.map((p) => p.y));
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}

/** Round to `digits` decimals (for the results file: no 17-digit noise). */
export function round(value: number, digits = 1): number {
  if (!Number.isFinite(value)) return value;
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export interface SoakVerdict {
  /** Median RSS of the second quarter of the soak and of the last quarter, MB. */
  secondQuarterMB: number;
  lastQuarterMB: number;
  /** lastQuarterMB − secondQuarterMB. */
  growthMB: number;
  /** How much growth still counts as flat: 5% of the second quarter's RSS, at least 10 MB. */
  toleranceMB: number;
  /** Least-squares slope over the second half, MB per minute (for information: GC saw-teeth move it). */
  lastHalfSlopeMBPerMin: number;
  flat: boolean;
  rule: string;
}

/**
 * Is memory flat over a soak? The garbage collector makes RSS a saw-tooth, so single samples and
 * short slopes mislead; medians of whole quarters do not. The first quarter is left out (start-up,
 * warming, the rate-limit windows filling): the second quarter is compared with the last.
 */
export function soakVerdict(samples: ReadonlyArray<{ t: number; rssMB: number }>, durationS: number): SoakVerdict {
  const within = (from: number, to: number) => samples.filter((s) => s.t >= from * durationS && s.t <= to * durationS).map((s) => s.rssMB);
  const secondQuarterMB = round(median(within(0.25, 0.5)), 1);
  const lastQuarterMB = round(median(within(0.75, 1.01)), 1);
  const growthMB = round(lastQuarterMB - secondQuarterMB, 1);
  const toleranceMB = round(Math.max(10, 0.05 * secondQuarterMB), 1);
  const lastHalf = samples.filter((s) => s.t >= durationS / 2);
  return {
    secondQuarterMB,
    lastQuarterMB,
    growthMB,
    toleranceMB,
    lastHalfSlopeMBPerMin: round(slope(lastHalf.map((s) => ({ x: s.t / 60, y: s.rssMB }))), 2),
    flat: Number.isFinite(growthMB) && growthMB <= toleranceMB,
    rule: 'median RSS of the last quarter ≤ that of the second quarter + max(5%, 10 MB)',
  };
}
