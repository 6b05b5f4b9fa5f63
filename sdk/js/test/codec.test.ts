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
  it("parses reasons as wire.ParseReason does", () => {
    expect(parseReason("retry_after_ms=1500 draining")).toEqual({ retryAfterMs: 1500, text: "draining" });
    expect(parseReason("retry_after_ms=20")).toEqual({ retryAfterMs: 20, text: "" });
    for (const whole of ["retry_after_ms=0 x", "retry_after_ms=12x", "retry_after_ms=1234567890123", "retry_after_ms=", "plain text", ""]) {
      expect(parseReason(whole)).toEqual({ retryAfterMs: 0, text: whole });
    }
  });

  it("stops only on the terminal codes of the table", () => {
    const terminal = [1002, 1007, 1008, 1009, 4001, 4004, 4005, 4007];
    for (const c of [1000, 1001, 1002, 1005, 1006, 1007, 1008, 1009, 1011, 1013, 4000, 4001, 4002, 4003, 4004, 4005, 4006, 4007, 4999]) {
      expect(retryable(c), String(c)).toBe(!terminal.includes(c));
    }
  });
});
