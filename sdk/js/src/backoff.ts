// backoff.ts: the reconnect delay policies of Go package backoff
// (backoff/README.md), in milliseconds. Each policy is a quantile function:
// delay(attempt, prev, u) is monotone in u in [0, 1], so one uniform draw
// gives the delay, and the same (attempt, prev, u) gives the same delay as the
// Go code (test/reference/backoff.json holds the Go values; the unit tests
// compare). A server's retry hint h is a floor with the policy's jitter above
// it: h + u*w*h, uniform on [h, h*(1+w)], w the relative width of the policy's
// jitter (full 1, equal 1/2, decorrelated multiplier-1, grpc 2*jitter, none
// and exponential 0). A server that spaces the clients it sends away itself
// gives a retry window w beside the hint: the delay is then drawn uniformly
// from [h, h+w] whatever the policy (Backoff.HintWithin in Go).

/** The policy names, as in package backoff. */
export type PolicyName = "none" | "exponential" | "full" | "equal" | "decorrelated" | "grpc";

export const policyNames: readonly PolicyName[] = ["none", "exponential", "full", "equal", "decorrelated", "grpc"];

/** BackoffOptions names a policy and its parameters; a zero or absent field takes the policy's default. */
export interface BackoffOptions {
  /** Default "full" (the AWS study's full jitter). */
  policy?: PolicyName;
  /** First delay of the envelope in ms: default 500 (grpc 1000, none 0). */
  baseMs?: number;
  /** Largest delay in ms (grpc: the largest centre): default 30000 (grpc 120000). */
  capMs?: number;
  /** Growth per attempt, at least 1: default 2 (decorrelated 3, grpc 1.6); refused for none. */
  multiplier?: number;
  /** grpc only, in (0, 1]: default 0.2. */
  jitter?: number;
  /** Retry hints above it count as it: default 3600000 (1 h). */
  maxHintMs?: number;
}

/** Resolved options: every field set. */
export type ResolvedBackoff = Required<BackoffOptions>;

/** resolveBackoff fills defaults and checks the options, as backoff.Config.WithDefaults does. It throws a RangeError. */
export function resolveBackoff(o: BackoffOptions = {}): ResolvedBackoff {
  const policy = o.policy || "full";
  if (!policyNames.includes(policy)) {
    throw new RangeError(`corral: backoff: unknown policy "${policy}" (want one of ${policyNames.join(", ")})`);
  }
  for (const k of ["baseMs", "capMs", "maxHintMs"] as const) {
    const v = o[k];
    if (v !== undefined && !(v >= 0 && Number.isFinite(v))) throw new RangeError(`corral: backoff: ${k} ${v} is negative or not finite`);
  }
  const mult = o.multiplier ?? 0;
  if (!Number.isFinite(mult)) throw new RangeError(`corral: backoff: multiplier ${mult} is not a finite number`);
  if (mult !== 0 && mult < 1) throw new RangeError(`corral: backoff: multiplier ${mult} is below 1 (delays would shrink)`);
  if (policy === "none" && mult !== 0) {
    throw new RangeError("corral: backoff: multiplier has no effect on policy none (it retries after a constant base)");
  }
  const jitter = o.jitter ?? 0;
  if (!(jitter >= 0 && jitter <= 1)) throw new RangeError(`corral: backoff: jitter ${jitter} is outside (0, 1]`);
  if (policy !== "grpc" && jitter !== 0) {
    throw new RangeError(`corral: backoff: jitter applies only to policy grpc; policy ${policy} has its jitter fixed by its formula`);
  }
  const or = (v: number | undefined, d: number) => (v ? v : d);
  let r: ResolvedBackoff;
  switch (policy) {
    case "grpc":
      r = { policy, baseMs: or(o.baseMs, 1000), capMs: or(o.capMs, 120000), multiplier: or(mult, 1.6), jitter: or(jitter, 0.2), maxHintMs: 0 };
      break;
    case "none":
      r = { policy, baseMs: o.baseMs ?? 0, capMs: or(o.capMs, 30000), multiplier: 1, jitter: 0, maxHintMs: 0 };
      break;
    case "decorrelated":
      r = { policy, baseMs: or(o.baseMs, 500), capMs: or(o.capMs, 30000), multiplier: or(mult, 3), jitter: 0, maxHintMs: 0 };
      break;
    default:
      r = { policy, baseMs: or(o.baseMs, 500), capMs: or(o.capMs, 30000), multiplier: or(mult, 2), jitter: 0, maxHintMs: 0 };
  }
  r.maxHintMs = or(o.maxHintMs, 3600000);
  if (r.capMs < r.baseMs) throw new RangeError(`corral: backoff: capMs ${r.capMs} is below baseMs ${r.baseMs}`);
  return r;
}

/** clampU maps u into [0, 1]; NaN and negative values become 0. */
function clampU(u: number): number {
  if (!(u > 0)) return 0;
  return u > 1 ? 1 : u;
}

/** nonNeg maps NaN and negative values to 0. */
function nonNeg(v: number): number {
  return v > 0 ? v : 0;
}

/** Policy is a pure, immutable reconnect policy. Build one with newPolicy. */
export class Policy {
  readonly options: ResolvedBackoff;
  /** hintWidth is w: a hint h gives a delay in [h, h*(1+w)]. */
  readonly hintWidth: number;
  private readonly steps: number[] = [];
  private readonly capped: boolean = false;

  constructor(o: BackoffOptions = {}) {
    const r = resolveBackoff(o);
    this.options = r;
    switch (r.policy) {
      case "full":
        this.hintWidth = 1;
        break;
      case "equal":
        this.hintWidth = 0.5;
        break;
      case "decorrelated":
        this.hintWidth = r.multiplier - 1;
        break;
      case "grpc":
        this.hintWidth = 2 * r.jitter;
        break;
      default:
        this.hintWidth = 0;
    }
    for (let n = 0; n < 128; n++) {
      const v = r.baseMs * Math.pow(r.multiplier, n);
      if (!(v < r.capMs)) {
        this.capped = true;
        break;
      }
      this.steps.push(v);
    }
  }

  /** envelope returns min(cap, base*multiplier^n). */
  envelope(n: number): number {
    if (!(n > 0)) n = 0;
    if (n < this.steps.length) return this.steps[n];
    if (this.capped) return this.options.capMs;
    const v = this.options.baseMs * Math.pow(this.options.multiplier, n);
    return v < this.options.capMs ? v : this.options.capMs;
  }

  private limit(d: number): number {
    return d > this.options.capMs ? this.options.capMs : d;
  }

  /**
   * delay returns the delay in ms before retry number attempt (0 is the first
   * retry), given the previous delay and a uniform u in [0, 1] (clamped).
   */
  delay(attempt: number, prevMs: number, u: number): number {
    const o = this.options;
    u = clampU(u);
    switch (o.policy) {
      case "none":
        return this.limit(o.baseMs);
      case "exponential":
        return this.limit(this.envelope(attempt));
      case "full":
        return this.limit(nonNeg(u * this.envelope(attempt)));
      case "equal": {
        const v = this.envelope(attempt);
        return this.limit(nonNeg(v / 2 + (u * v) / 2));
      }
      case "decorrelated": {
        const lo = o.baseMs;
        let hi = nonNeg(prevMs);
        if (hi < lo) hi = lo;
        hi *= o.multiplier;
        if (hi < lo) hi = lo;
        const d = lo + u * (hi - lo);
        return d < o.capMs ? this.limit(nonNeg(d)) : o.capMs;
      }
      default: {
        // grpc: the first retry waits the base exactly; the cap bounds the centre.
        if (!(attempt > 0)) return this.limit(o.baseMs);
        const c = this.envelope(attempt);
        return nonNeg(c * (1 + o.jitter * (2 * u - 1)));
      }
    }
  }

  /** hintDelay returns the delay in ms after a server's retry hint: h + u*w*h with h clamped to maxHintMs; 0 for h <= 0. */
  hintDelay(hintMs: number, u: number): number {
    if (!(hintMs > 0)) return 0;
    const h = Math.min(hintMs, this.options.maxHintMs);
    const d = h + clampU(u) * this.hintWidth * h;
    return d < h ? h : d;
  }

  /**
   * windowDelay returns the delay in ms after a server's retry hint with its
   * retry window: uniform on [h, h + w] by u, whatever the policy (the window
   * replaces the policy's jitter above the hint), h and w each clamped to
   * maxHintMs; 0 for h <= 0, hintDelay(h, u) for w <= 0.
   */
  windowDelay(hintMs: number, withinMs: number, u: number): number {
    if (!(hintMs > 0)) return 0;
    if (!(withinMs > 0)) return this.hintDelay(hintMs, u);
    const max = this.options.maxHintMs;
    const h = Math.min(hintMs, max);
    const d = h + clampU(u) * Math.min(withinMs, max);
    return d < h ? h : d;
  }
}

/**
 * Backoff is the reconnect schedule of one connection: next() returns the
 * delay before the next attempt, reset() starts over after a success, hint()
 * records a server's retry-after (and its retry window, if it gave one) for
 * the next delay. One draw of random() per next(). Not shared between
 * connections.
 */
export class Backoff {
  readonly policy: Policy;
  private readonly random: () => number;
  private attempts = 0;
  private prev = 0;
  private pending = 0;
  private within = 0; // the pending hint's retry window, 0 when none

  constructor(options: BackoffOptions | Policy = {}, random: () => number = Math.random) {
    this.policy = options instanceof Policy ? options : new Policy(options);
    this.random = random;
  }

  /** next returns the delay in ms before the next attempt and advances the schedule; a pending hint is used and consumed. */
  next(): number {
    const u = this.random();
    let d: number;
    if (this.pending > 0) {
      d = this.policy.windowDelay(this.pending, this.within, u);
      this.pending = this.within = 0;
    } else {
      d = this.policy.delay(this.attempts, this.prev, u);
    }
    this.prev = d;
    this.attempts++;
    return d;
  }

  /**
   * hint records a server's retry-after (ms) for the next delay, with the
   * retry window the server gave beside it (withinMs, 0 or absent when none).
   * With a window the next delay is drawn uniformly from [retryAfterMs,
   * retryAfterMs + withinMs] instead of above the hint by the policy's jitter
   * ([h, 2h] for full jitter), which would stretch a herd's return over as
   * long again as the server planned; without one, the policy's jitter. Both
   * are clamped to maxHintMs. The largest of several hints wins, with its own
   * window; a hint of 0 or less is ignored, window and all.
   */
  hint(retryAfterMs: number, withinMs = 0): void {
    if (retryAfterMs > this.pending) {
      this.pending = retryAfterMs;
      this.within = withinMs; // windowDelay takes 0 or less (or NaN) as none
    }
  }

  /** reset starts over, as after a successful connection, and drops a pending hint. */
  reset(): void {
    this.attempts = 0;
    this.prev = 0;
    this.pending = this.within = 0;
  }

  /** attempt is the number of delays next() returned since the last reset. */
  get attempt(): number {
    return this.attempts;
  }
}
