// codec.test.ts: round trips and refusals of the two formats.
import { describe, expect, it } from "vitest";
import { decodeClientFrame, decodeServerFrame, encodeClientFrame, encodeServerFrame } from "../src/codec.js";
import { DecodeError, type ServerFrame } from "../src/frames.js";
import { parseReason, retryable } from "../src/close.js";

const unhex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));

describe("proto", () => {
  it("skips unknown fields of every wire type", () => {
    // ServerFrame{id: 3, field 99 varint, field 98 fixed64, field 97 bytes, field 96 fixed32, group 95, ping{}}
    const b = unhex("0803" + "98060a" + "91060102030405060708" + "8a0602aabb" + "850601020304" + "fb05" + "0801" + "fc05" + "4a00");
    expect(decodeServerFrame("proto", b)).toEqual({ id: 3, ping: { payload: new Uint8Array(0) } });
  });

  it("refuses truncated and malformed input with 1002", () => {
    const full = encodeServerFrame("proto", { id: 1, gap: { channel: "news", epoch: "e", fromOffset: 3, toOffset: 4, reason: "r" } }) as Uint8Array;
    for (let n = 1; n < full.length; n++) {
      let err: unknown;
      try {
        decodeServerFrame("proto", full.subarray(0, n));
      } catch (e) {
        err = e;
      }
      if (err !== undefined) {
        expect(err).toBeInstanceOf(DecodeError);
        expect((err as DecodeError).code).toBe(1002);
      }
    }
    expect(() => decodeServerFrame("proto", unhex("32040a02ffff"))).toThrow(/not UTF-8/); // a message whose channel is not UTF-8
    expect(() => decodeServerFrame("proto", unhex("08ffffffffffffffffffff01"))).toThrow(/longer than 10 bytes/);
    expect(() => decodeServerFrame("proto", unhex("0880808080808080801001"))).toThrow(/above 2\^53/); // id 2^60
    expect(() => decodeServerFrame("proto", "text")).toThrow(DecodeError);
  });

  it("round-trips every server frame", () => {
    const frames: ServerFrame[] = [
      { id: 0, message: { channel: "c", epoch: "e", offset: 2 ** 50, priority: 1, data: new Uint8Array([0, 1, 255]), timeUnixMs: -(2 ** 40) } },
      { id: 77, published: { channel: "c", epoch: "e", offset: 1, duplicate: false } },
    ];
    for (const f of frames) {
      expect(decodeServerFrame("proto", encodeServerFrame("proto", f))).toEqual(f);
      expect(decodeServerFrame("json", encodeServerFrame("json", f))).toEqual(f);
    }
  });

  it("refuses to encode offsets that are not safe integers", () => {
    expect(() => encodeClientFrame("proto", { id: 0, ack: { channel: "c", epoch: "e", offset: 2 ** 60 } })).toThrow(RangeError);
    expect(() => encodeClientFrame("proto", { id: 0, ack: { channel: "c", epoch: "e", offset: -1 } })).toThrow(RangeError);
  });
});

describe("json", () => {
  it("accepts proto names, numbers as strings or numbers, enums by number, URL-safe base64", () => {
    const f = decodeServerFrame("json", '{"id":5,"message":{"channel":"c","epoch":"e","offset":"9","priority":1,"data":"_-8","time_unix_ms":-3},"extra":true}');
    expect(f).toEqual({ id: 5, message: { channel: "c", epoch: "e", offset: 9, priority: 0, data: new Uint8Array([0xff, 0xef]), timeUnixMs: -3 } });
  });

  it("refuses bad input with 1007", () => {
    for (const bad of ["{", "[]", '{"id":"x"}', '{"message":{"offset":-1}}', '{"message":{"data":"***"}}', '{"ping":{},"pong":{}}', '{"gap":{"channel":5}}']) {
      let err: unknown;
      try {
        decodeServerFrame("json", bad);
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(DecodeError);
      expect((err as DecodeError).code).toBe(1007);
    }
    expect(() => decodeServerFrame("json", new Uint8Array([1]))).toThrow(DecodeError);
  });

  it("writes client frames the hub reads: ids and offsets as strings, enums by name", () => {
    const t = encodeClientFrame("json", { id: 3, subscribe: { channel: "n", from: { epoch: "e", offset: 12 } } });
    expect(JSON.parse(t as string)).toEqual({ id: "3", subscribe: { channel: "n", from: { epoch: "e", offset: "12" } } });
    expect(decodeClientFrame("json", t)).toEqual({ id: 3, subscribe: { channel: "n", from: { epoch: "e", offset: 12 } } });
  });
});

describe("close codes", () => {
  // The cases of wire's TestReasonRoundTrip (the reasons FormatReason
  // writes) and TestParseReasonForeign.
  it.each([
    ["hint and text", "retry_after_ms=1234 draining", 1234, 0, "draining"],
    ["hint only", "retry_after_ms=2000", 2000, 0, ""],
    ["text only", "bye", 0, 0, "bye"],
    ["sub-millisecond hint rounded up", "retry_after_ms=2", 2, 0, ""],
    ["text that looks like a hint", "retry_after_ms=x", 0, 0, "retry_after_ms=x"],
    ["hint, window and text", "retry_after_ms=1234 retry_within_ms=120 full", 1234, 120, "full"],
    ["hint and window", "retry_after_ms=1000 retry_within_ms=2", 1000, 2, ""],
    ["text that looks like a window", "retry_after_ms=1000 retry_within_ms=x", 1000, 0, "retry_within_ms=x"],
    ["a window of 12 digits", "retry_after_ms=5 retry_within_ms=999999999999", 5, 999999999999, ""],
    ["a window read once", "retry_after_ms=5 retry_within_ms=7 retry_within_ms=8", 5, 7, "retry_within_ms=8"],
    ["a window only right after the hint", "retry_after_ms=5 x retry_within_ms=7", 5, 0, "x retry_within_ms=7"],
  ])("parses %s as wire.ParseReason does", (_, reason, retryAfterMs, retryWithinMs, text) => {
    expect(parseReason(reason)).toEqual({ retryAfterMs, retryWithinMs, text });
  });

  it("reads a foreign reason as all text, and anything after a hint but a well-formed window as text", () => {
    const foreign = ["", "going away", "plain text", "retry_after_ms=", "retry_after_ms=12x", "retry_after_ms=0 x", "retry_after_ms=1234567890123"];
    foreign.push("retry_after_ms=99999999999999999 big", "Retry_after_ms=5", "retry_within_ms=5 text");
    for (const whole of foreign) {
      expect(parseReason(whole), whole).toEqual({ retryAfterMs: 0, retryWithinMs: 0, text: whole });
    }
    for (const rest of ["retry_within_ms=", "retry_within_ms=0 x", "retry_within_ms=7x", "retry_within_ms=9999999999999 x", " retry_within_ms=7"]) {
      expect(parseReason("retry_after_ms=5 " + rest), rest).toEqual({ retryAfterMs: 5, retryWithinMs: 0, text: rest });
    }
  });

  it("decodes the retry windows of GoAway and Error in both formats", () => {
    const frames: ServerFrame[] = [
      { id: 0, goAway: { code: 1013, reason: "shed", retryAfterMs: 800, drain: false, retryWithinMs: 40 } },
      { id: 0, error: { code: 1013, text: "full", retryAfterMs: 3000, channel: "", retryWithinMs: 4294967295 } },
    ];
    for (const f of frames) {
      expect(decodeServerFrame("proto", encodeServerFrame("proto", f))).toEqual(f);
      expect(decodeServerFrame("json", encodeServerFrame("json", f))).toEqual(f);
    }
    expect(decodeServerFrame("json", '{"goAway":{"retry_after_ms":5,"retry_within_ms":"6"}}').goAway).toMatchObject({ retryAfterMs: 5, retryWithinMs: 6 });
    expect(decodeServerFrame("proto", unhex("4200")).goAway).toMatchObject({ retryAfterMs: 0, retryWithinMs: 0 }); // an older server's GoAway
  });

  it("stops only on the terminal codes of the table", () => {
    const terminal = [1002, 1007, 1008, 1009, 4001, 4004, 4005, 4007];
    for (const c of [1000, 1001, 1002, 1005, 1006, 1007, 1008, 1009, 1011, 1013, 4000, 4001, 4002, 4003, 4004, 4005, 4006, 4007, 4999]) {
      expect(retryable(c), String(c)).toBe(!terminal.includes(c));
    }
  });
});
