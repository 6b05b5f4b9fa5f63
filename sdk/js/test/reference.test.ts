// reference.test.ts: the TypeScript backoff and codec against the values of
// the Go packages backoff and wire (test/reference/go.json, written and
// checked by TestReference in sdk/js/e2e).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Backoff, Policy, type BackoffOptions } from "../src/backoff.js";
import { parseReason } from "../src/close.js";
import { decodeServerFrame, encodeClientFrame } from "../src/codec.js";
import type { ClientFrame, ServerFrame } from "../src/frames.js";

interface Ref {
  backoff: {
    options: BackoffOptions;
    delays: [number, number, number, number][];
    hints: [number, number, number][];
    sequence: { op: string; ms?: number; within?: number; u?: number; ns?: number }[];
  }[];
  client: { name: string; proto: string; json: string }[];
  server: { name: string; proto: string; json: string }[];
  reasons: { reason: string; retryAfterMs: number; retryWithinMs: number; text: string }[];
}

const ref: Ref = JSON.parse(readFileSync(new URL("./reference/go.json", import.meta.url), "utf8"));

// Go computes in integer nanoseconds (truncating) where the SDK computes in
// float milliseconds: they agree within a nanosecond (plus float rounding of
// the largest values, and an ulp of pow for non-integer multipliers).
function close(tsMs: number, goNs: number): boolean {
  return Math.abs(tsMs * 1e6 - goNs) <= 1 + 1e-12 * goNs;
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
const unhex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const bytes = (s: string) => new TextEncoder().encode(s);

describe("backoff matches package backoff", () => {
  for (const c of ref.backoff) {
    const name = JSON.stringify(c.options);
    it(`delays of ${name}`, () => {
      const p = new Policy(c.options);
      const bad = c.delays.filter(([a, prev, u, ns]) => !close(p.delay(a, prev, u), ns));
      expect(bad.map(([a, prev, u, ns]) => ({ a, prev, u, go: ns / 1e6, ts: p.delay(a, prev, u) }))).toEqual([]);
      expect(c.delays.length).toBeGreaterThan(100);
    });
    it(`hints of ${name}`, () => {
      const p = new Policy(c.options);
      const bad = c.hints.filter(([h, u, ns]) => !close(p.hintDelay(h, u), ns));
      expect(bad).toEqual([]);
    });
    it(`a Backoff of ${name} steps as the Go Backoff`, () => {
      const draws = c.sequence.filter((s) => s.op === "next").map((s) => s.u ?? 0);
      const b = new Backoff(c.options, () => draws.shift()!);
      for (const s of c.sequence) {
        if (s.op === "hint") b.hint(s.ms!, s.within);
        else if (s.op === "reset") b.reset();
        else expect(close(b.next(), s.ns ?? 0), `step ${JSON.stringify(s)}`).toBe(true);
      }
    });
  }
});

// The frames of TestReference's clientFrames, built independently here.
const clientFrames: Record<string, ClientFrame> = {
  hello: {
    id: 1,
    hello: {
      token: "eyJhbGciOiJIUzI1NiJ9.e30.sig",
      priority: 1,
      subscribe: [
        { channel: "news", from: { epoch: "ep-1", offset: 41 } },
        { channel: "chat.room-7" },
        { channel: "zero", from: { epoch: "", offset: 0 } },
      ],
      previousSessionId: "s-123",
      client: "corral-js/0.1.0",
    },
  },
  "hello-p2-bare": { id: 1, hello: { token: "t", priority: 2, subscribe: [], previousSessionId: "", client: "" } },
  subscribe: { id: 7, subscribe: { channel: "news.eu", from: { epoch: "e", offset: 2 ** 40 } } },
  unsubscribe: { id: 300, unsubscribe: { channel: "news" } },
  publish: { id: 9, publish: { channel: "news", priority: 0, data: Uint8Array.from([...bytes("héllo"), 0, 0xff]), clientMessageId: "m-1" } },
  ack: { id: 0, ack: { channel: "news", epoch: "ep-1", offset: Number.MAX_SAFE_INTEGER } },
  pong: { id: 5, pong: { payload: Uint8Array.from([1, 2, 3]) } },
  ping: { id: 6, ping: { payload: new Uint8Array(0) } },
};

// The frames of TestReference's serverFrames, as the SDK decodes them.
const serverFrames: Record<string, ServerFrame> = {
  welcome: {
    id: 1,
    welcome: {
      sessionId: "s-1",
      nodeId: "hub-1",
      nodeEpoch: "n-2",
      serverTimeUnixMs: 1764582000123,
      hints: { pingIntervalMs: 25000, maxFrameBytes: 65536, maxSubscriptions: 128, reconnectBaseMs: 50, reconnectCapMs: 5000, historyWindowMs: 30000, publishRatePerSecond: 50 },
      priority: 0,
    },
  },
  subscribed: { id: 1, subscribed: { channel: "news", position: { epoch: "ep-1", offset: 45 }, resumed: true, recovered: false } },
  unsubscribed: { id: 0, unsubscribed: { channel: "news", reason: "bye" } },
  published: { id: 9, published: { channel: "news", epoch: "ep-1", offset: 46, duplicate: true } },
  message: {
    id: 0,
    message: { channel: "news", epoch: "ep-1", offset: 2 ** 53 - 1, priority: 0, data: Uint8Array.from([...bytes("héllo"), 0, 0xff]), timeUnixMs: -5 },
  },
  "message-unspecified": { id: 0, message: { channel: "a", epoch: "e", offset: 1, priority: 2, data: new Uint8Array(0), timeUnixMs: 0 } },
  gap: { id: 0, gap: { channel: "news", epoch: "ep-1", fromOffset: 10, toOffset: 12, reason: "slow consumer" } },
  goaway: { id: 0, goAway: { code: 1001, reason: "draining", retryAfterMs: 1500, drain: true, retryWithinMs: 0 } },
  "goaway-window": { id: 0, goAway: { code: 1001, reason: "draining", retryAfterMs: 1500, drain: true, retryWithinMs: 250 } },
  ping: { id: 0, ping: { payload: new Uint8Array(0) } },
  pong: { id: 4, pong: { payload: bytes("x") } },
  error: { id: 1, error: { code: 4005, text: "channel secret not allowed by the token", retryAfterMs: 0, channel: "secret", retryWithinMs: 0 } },
  "error-close": { id: 0, error: { code: 1013, text: "overloaded", retryAfterMs: 2000, channel: "", retryWithinMs: 0 } },
  "error-window": { id: 0, error: { code: 1013, text: "overloaded", retryAfterMs: 2000, channel: "", retryWithinMs: 120 } },
};

describe("frames match package wire", () => {
  it("covers every frame of the reference", () => {
    expect(Object.keys(clientFrames).sort()).toEqual(ref.client.map((c) => c.name));
    expect(Object.keys(serverFrames).sort()).toEqual(ref.server.map((c) => c.name));
  });
  for (const c of ref.client) {
    it(`client frame ${c.name}: the bytes and the JSON of the Go codec`, () => {
      const f = clientFrames[c.name];
      expect(hex(encodeClientFrame("proto", f) as Uint8Array)).toBe(c.proto);
      expect(JSON.parse(encodeClientFrame("json", f) as string)).toEqual(JSON.parse(c.json));
    });
  }
  for (const c of ref.server) {
    it(`server frame ${c.name}: decoded from the Go codec's proto and JSON`, () => {
      expect(decodeServerFrame("proto", unhex(c.proto))).toEqual(serverFrames[c.name]);
      expect(decodeServerFrame("json", c.json)).toEqual(serverFrames[c.name]);
    });
  }
});

describe("close reasons match package wire", () => {
  it("reads every reason of the reference as wire.ParseReason does", () => {
    expect(ref.reasons.length).toBeGreaterThan(20);
    expect(ref.reasons.some((r) => r.retryWithinMs > 0)).toBe(true);
    for (const r of ref.reasons) {
      expect(parseReason(r.reason), JSON.stringify(r.reason)).toEqual({ retryAfterMs: r.retryAfterMs, retryWithinMs: r.retryWithinMs, text: r.text });
    }
  });
});
