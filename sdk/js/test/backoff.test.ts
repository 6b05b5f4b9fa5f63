// backoff.test.ts: the policies' rules beyond the Go reference values:
// validation, monotony in u, and a herd given one hint spreading above it.
import { describe, expect, it } from "vitest";
import { Backoff, Policy, policyNames, resolveBackoff } from "../src/backoff.js";
import { mulberry32 } from "./random.js";

describe("resolveBackoff", () => {
  it.each([
    [{ policy: "fibonacci" as never }, "unknown policy"],
    [{ baseMs: -1 }, "baseMs -1"],
    [{ baseMs: 2000, capMs: 1000 }, "capMs 1000 is below baseMs 2000"],
    [{ multiplier: 0.5 }, "below 1"],
    [{ multiplier: Infinity }, "not a finite number"],
    [{ policy: "none" as const, multiplier: 2 }, "no effect on policy none"],
    [{ jitter: 0.3 }, "only to policy grpc"],
    [{ policy: "grpc" as const, jitter: 1.5 }, "outside (0, 1]"],
  ])("refuses %j (%s)", (o, msg) => {
    expect(() => resolveBackoff(o)).toThrow(msg);
    expect(() => resolveBackoff(o)).toThrow(/^corral: backoff: /);
  });

  it("fills the defaults of package backoff", () => {
    expect(resolveBackoff()).toEqual({ policy: "full", baseMs: 500, capMs: 30000, multiplier: 2, jitter: 0, maxHintMs: 3600000 });
    expect(resolveBackoff({ policy: "grpc" })).toMatchObject({ baseMs: 1000, capMs: 120000, multiplier: 1.6, jitter: 0.2 });
    expect(resolveBackoff({ policy: "decorrelated" })).toMatchObject({ multiplier: 3 });
    expect(resolveBackoff({ policy: "none" })).toMatchObject({ baseMs: 0 });
  });
});

describe("Policy", () => {
  it("is monotone in u and clamps it", () => {
    for (const policy of policyNames) {
      const p = new Policy({ policy });
      for (const a of [0, 1, 4, 9, 50]) {
        let last = -1;
        for (let u = 0; u <= 1.0000001; u += 0.01) {
          const d = p.delay(a, 700, u);
          expect(d).toBeGreaterThanOrEqual(last);
          last = d;
        }
        expect(p.delay(a, 700, NaN)).toBe(p.delay(a, 700, 0));
        expect(p.delay(a, 700, -3)).toBe(p.delay(a, 700, 0));
        expect(p.delay(a, 700, 7)).toBe(p.delay(a, 700, 1));
      }
    }
  });

  it("never overflows or goes negative", () => {
    for (const policy of policyNames) {
      const p = new Policy({ policy });
      for (const a of [-5, 0, 1000, Number.MAX_SAFE_INTEGER]) {
        const d = p.delay(a, Number.MAX_VALUE, 1);
        expect(Number.isFinite(d) && d >= 0).toBe(true);
      }
      expect(p.hintDelay(-1, 0.5)).toBe(0);
      expect(p.hintDelay(10 * 3600000, 0)).toBe(3600000);
    }
  });
});

describe("Backoff and server hints", () => {
  it("spreads 1,000 clients given one 2 s hint over [2 s, 4 s], none below the hint", () => {
    const random = mulberry32(11);
    const delays: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const b = new Backoff({}, random);
      b.next(); // one failure before the hint
      b.hint(2000);
      delays.push(b.next());
    }
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(2000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(4000);
    // Uniform over the window: each tenth holds about 100 of them.
    const buckets = new Array(10).fill(0);
    for (const d of delays) buckets[Math.min(9, Math.floor((d - 2000) / 200))]++;
    for (const n of buckets) {
      expect(n).toBeGreaterThan(60);
      expect(n).toBeLessThan(140);
    }
    // No lock-step: hardly two clients within the same millisecond.
    const ms = new Set(delays.map((d) => Math.floor(d)));
    expect(ms.size).toBeGreaterThan(600);
  });

  it("uses the hint once, counts it as an attempt, and reset drops a pending one", () => {
    const b = new Backoff({ policy: "exponential", baseMs: 100, capMs: 10000 }, () => 0.5);
    expect(b.next()).toBe(100);
    b.hint(5000);
    b.hint(3000);
    expect(b.next()).toBe(5000);
    expect(b.attempt).toBe(2);
    expect(b.next()).toBe(400);
    b.hint(9000);
    b.reset();
    expect(b.next()).toBe(100);
  });

  // Package backoff's TestBackoffHintWithin.
  it.each(["none", "full", "equal", "decorrelated", "grpc"] as const)(
    "draws within a server's retry window [h, h + w], whatever the policy (%s), uniformly",
    (policy) => {
      const h = 10000;
      const w = 500;
      const b = new Backoff({ policy }, mulberry32(7));
      const delays: number[] = [];
      for (let i = 0; i < 4000; i++) {
        b.hint(h, w);
        delays.push(b.next());
      }
      const lo = Math.min(...delays);
      const hi = Math.max(...delays);
      expect(lo).toBeGreaterThanOrEqual(h);
      expect(hi).toBeLessThanOrEqual(h + w);
      // Uniform: the extremes near the window's ends, the mean near its middle.
      expect(lo).toBeLessThan(h + w / 50);
      expect(hi).toBeGreaterThan(h + w - w / 50);
      const mean = delays.reduce((a, d) => a + d, 0) / delays.length;
      expect(Math.abs(mean - (h + w / 2))).toBeLessThan(w / 20);
    },
  );

  it("takes the largest hint with its own window, the policy's jitter without one, and clamps both to maxHintMs", () => {
    const b = new Backoff({}, () => 1);
    b.hint(2000, 1);
    b.hint(1000, 3600000); // a smaller hint: ignored, window and all
    expect(b.next()).toBe(2001);
    b.hint(1000, 1);
    b.hint(3000); // a larger hint without a window: full jitter's [h, 2h]
    expect(b.next()).toBe(6000);
    for (const w of [0, -1000, NaN]) {
      b.hint(1000, w); // no window: the policy's jitter
      expect(b.next(), String(w)).toBe(2000);
    }
    b.hint(0, 500); // a window without a hint is nothing
    expect(b.next()).toBe(b.policy.delay(5, 2000, 1));
    b.hint(1000, 10);
    b.reset();
    expect(b.next()).toBe(500); // the schedule's first delay at u = 1
    const capped = new Backoff({ maxHintMs: 60000 }, () => 1);
    capped.hint(3600000, 3600000);
    expect(capped.next()).toBe(120000);
    const p = new Policy({ maxHintMs: 60000 });
    expect(p.windowDelay(3600000, 10, 0.5)).toBe(60005);
    expect(p.windowDelay(100, 3600000, 0.5)).toBe(30100);
    expect(p.windowDelay(100, 50, NaN)).toBe(100);
    expect(p.windowDelay(100, 50, 7)).toBe(150);
    expect(p.windowDelay(-1, 50, 0.5)).toBe(0);
  });

  it("brings a herd given one hint and a 200 ms window back within it: 1,000 clients in [2 s, 2.2 s]", () => {
    const random = mulberry32(12);
    const delays: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const b = new Backoff({}, random);
      b.next();
      b.hint(2000, 200);
      delays.push(b.next());
    }
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(2000);
    expect(Math.max(...delays)).toBeLessThanOrEqual(2200);
    const buckets = new Array(10).fill(0);
    for (const d of delays) buckets[Math.min(9, Math.floor((d - 2000) / 20))]++;
    for (const n of buckets) {
      expect(n).toBeGreaterThan(60);
      expect(n).toBeLessThan(140);
    }
  });
});
