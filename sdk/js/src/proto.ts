// proto.ts: the protobuf wire format of the frames, for the corral.v1.proto
// subprotocol. A small table-driven encoder and decoder (schema.ts) instead of
// a protobuf runtime: the SDK has no dependencies. Encoding follows protobuf-go
// for proto3 (fields in number order, zero scalars left out), so a frame the
// SDK encodes has the bytes the Go client would send. Decoding skips unknown
// fields, as protobuf does, and refuses truncated or malformed input with a
// DecodeError carrying close code 1002.

import { DecodeError, priorityFromWire, type Priority } from "./frames.js";
import { defaults, type Field, type Scalar, type Schema } from "./schema.js";

const utf8enc = new TextEncoder();
const utf8dec = new TextDecoder("utf-8", { fatal: true });

const protocolError = 1002;

class Writer {
  buf = new Uint8Array(64);
  len = 0;

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const b = new Uint8Array(size);
    b.set(this.buf.subarray(0, this.len));
    this.buf = b;
  }

  byte(b: number): void {
    this.room(1);
    this.buf[this.len++] = b;
  }

  /** varint writes a non-negative integer (exact up to 2^53 - 1). */
  varint(v: number): void {
    this.room(10);
    while (v >= 0x80) {
      this.buf[this.len++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.len++] = v;
  }

  /** varint64 writes a signed 64-bit integer as protobuf does (negative: ten bytes). */
  varint64(v: number): void {
    if (v >= 0) {
      this.varint(v);
      return;
    }
    let u = BigInt.asUintN(64, BigInt(v));
    this.room(10);
    while (u >= 0x80n) {
      this.buf[this.len++] = Number(u & 0x7fn) | 0x80;
      u >>= 7n;
    }
    this.buf[this.len++] = Number(u);
  }

  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.room(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  tag(no: number, wireType: number): void {
    this.varint(no * 8 + wireType);
  }

  result(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}

function isZero(t: Scalar, v: unknown): boolean {
  switch (t) {
    case "string":
      return v === "" || v === undefined;
    case "bytes":
      return v === undefined || (v as Uint8Array).length === 0;
    case "bool":
      return !v;
    case "priority":
      return false; // a rank is always written (P2 is 3 on the wire)
    default:
      return !v;
  }
}

function writeScalar(w: Writer, f: Field, t: Scalar, v: unknown): void {
  switch (t) {
    case "string":
      w.tag(f.no, 2);
      w.bytes(utf8enc.encode(v as string));
      return;
    case "bytes":
      w.tag(f.no, 2);
      w.bytes(v as Uint8Array);
      return;
    case "bool":
      w.tag(f.no, 0);
      w.varint(1);
      return;
    case "priority":
      w.tag(f.no, 0);
      w.varint(rankOf(v) + 1);
      return;
    case "int64":
      w.tag(f.no, 0);
      w.varint64(checkInt(f, v as number, true));
      return;
    case "uint32":
      w.tag(f.no, 0);
      w.varint(checkInt(f, v as number, false) >>> 0);
      return;
    default:
      w.tag(f.no, 0);
      w.varint(checkInt(f, v as number, false));
  }
}

function rankOf(v: unknown): Priority {
  return v === 0 || v === 1 ? v : 2;
}

function checkInt(f: Field, v: number, signed: boolean): number {
  if (!Number.isSafeInteger(v) || (!signed && v < 0)) {
    throw new RangeError(`corral: ${f.name} ${v} is not a ${signed ? "safe" : "non-negative safe"} integer`);
  }
  return v;
}

function writeMessage(w: Writer, s: Schema, m: Record<string, unknown>): void {
  for (const f of s.fields) {
    const v = m[f.name];
    if (v === undefined || v === null) continue;
    if (typeof f.type === "object") {
      const list = f.repeated ? (v as Record<string, unknown>[]) : [v as Record<string, unknown>];
      for (const item of list) {
        const sub = new Writer();
        writeMessage(sub, f.type, item);
        w.tag(f.no, 2);
        w.bytes(sub.buf.subarray(0, sub.len));
      }
      continue;
    }
    if (f.repeated) {
      for (const item of v as unknown[]) writeScalar(w, f, f.type, item);
      continue;
    }
    if (!isZero(f.type, v)) writeScalar(w, f, f.type, v);
  }
}

/** encodeProto returns the protobuf encoding of message m of schema s. */
export function encodeProto(s: Schema, m: object): Uint8Array {
  const w = new Writer();
  writeMessage(w, s, m as Record<string, unknown>);
  return w.result();
}

class Reader {
  pos = 0;
  constructor(
    readonly buf: Uint8Array,
    readonly end: number,
  ) {}

  fail(what: string): never {
    throw new DecodeError(protocolError, `corral: malformed frame: ${what}`);
  }

  /** varint returns the next varint as an unsigned number, exact up to 2^53 - 1. */
  varint(): number {
    let v = 0;
    let shift = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) this.fail("truncated varint");
      const b = this.buf[this.pos++];
      if (i < 7) {
        v += (b & 0x7f) * shift;
        shift *= 0x80;
        if (b < 0x80) return v;
        continue;
      }
      // Past 49 bits: finish in BigInt; the caller checks the range.
      return this.bigTail(v, b, i);
    }
    this.fail("varint longer than 10 bytes");
  }

  private big = 0n;
  private bigTail(low: number, first: number, index: number): number {
    let v = BigInt(low);
    let shift = BigInt(7 * index);
    let b = first;
    for (let i = index; ; i++) {
      v |= BigInt(b & 0x7f) << shift;
      shift += 7n;
      if (b < 0x80) break;
      if (i === 9) this.fail("varint longer than 10 bytes");
      if (this.pos >= this.end) this.fail("truncated varint");
      b = this.buf[this.pos++];
    }
    this.big = BigInt.asUintN(64, v);
    return -1; // the caller reads this.big
  }

  /** uint returns a varint that must fit in a safe integer (an offset, an id). */
  uint(f: Field): number {
    const v = this.varint();
    if (v >= 0) return v;
    if (this.big > BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`${f.name} above 2^53`);
    return Number(this.big);
  }

  /** int64 returns a signed 64-bit varint. */
  int64(f: Field): number {
    const v = this.varint();
    if (v >= 0) return v;
    const s = BigInt.asIntN(64, this.big);
    if (s > BigInt(Number.MAX_SAFE_INTEGER) || s < -BigInt(Number.MAX_SAFE_INTEGER)) this.fail(`${f.name} out of range`);
    return Number(s);
  }

  /** uint32 returns the low 32 bits of a varint, as protobuf reads uint32 and enums. */
  uint32(): number {
    const v = this.varint();
    if (v >= 0) return v % 0x100000000;
    return Number(this.big & 0xffffffffn);
  }

  /** tag returns the next field tag (field number * 8 + wire type). */
  tag(): number {
    const t = this.uint32();
    return t;
  }

  lenDelim(): [number, number] {
    const n = this.varint();
    if (n < 0 || this.pos + n > this.end) this.fail("length past the end");
    const start = this.pos;
    this.pos += n;
    return [start, this.pos];
  }

  skip(wireType: number, no: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        if (this.pos + 8 > this.end) this.fail("truncated fixed64");
        this.pos += 8;
        return;
      case 2:
        this.lenDelim();
        return;
      case 5:
        if (this.pos + 4 > this.end) this.fail("truncated fixed32");
        this.pos += 4;
        return;
      case 3:
        for (;;) {
          const t = this.tag();
          const wt = t & 7;
          const n = Math.floor(t / 8);
          if (wt === 4) {
            if (n !== no) this.fail("mismatched end group");
            return;
          }
          this.skip(wt, n);
        }
      default:
        this.fail(`wire type ${wireType}`);
    }
  }
}

function wireTypeOf(f: Field): number {
  if (typeof f.type === "object") return 2;
  return f.type === "string" || f.type === "bytes" ? 2 : 0;
}

function readMessage(r: Reader, s: Schema): Record<string, unknown> {
  const m = defaults(s);
  while (r.pos < r.end) {
    const t = r.tag();
    const wt = t & 7;
    const no = Math.floor(t / 8);
    if (no === 0) r.fail("field number 0");
    const f = s.byNo!.get(no);
    if (!f || wt !== wireTypeOf(f)) {
      r.skip(wt, no); // unknown field, or a known one with another type: ignored
      continue;
    }
    const v = readValue(r, f);
    if (f.repeated) (m[f.name] as unknown[]).push(v);
    else {
      if (f.oneof) for (const o of s.fields) if (o.oneof) delete m[o.name];
      m[f.name] = v;
    }
  }
  return m;
}

function readValue(r: Reader, f: Field): unknown {
  if (typeof f.type === "object") {
    const [start, end] = r.lenDelim();
    const sub = new Reader(r.buf, end);
    sub.pos = start;
    return readMessage(sub, f.type);
  }
  switch (f.type) {
    case "string": {
      const [start, end] = r.lenDelim();
      try {
        return utf8dec.decode(r.buf.subarray(start, end));
      } catch {
        r.fail(`${f.name} is not UTF-8`);
      }
    }
    case "bytes": {
      const [start, end] = r.lenDelim();
      return r.buf.slice(start, end);
    }
    case "bool":
      return r.varint() !== 0;
    case "priority":
      return priorityFromWire(r.uint32());
    case "uint32":
      return r.uint32();
    case "int64":
      return r.int64(f);
    default:
      return r.uint(f);
  }
}

/** decodeProto decodes a message of schema s; it throws a DecodeError (code 1002) on malformed input. */
export function decodeProto(s: Schema, b: Uint8Array): Record<string, unknown> {
  const r = new Reader(b, b.length);
  return readMessage(r, s);
}
