// json.ts: the protobuf JSON mapping of the frames, for the corral.v1.json
// subprotocol (text messages). Output follows protobuf-go's protojson:
// lowerCamelCase names, 64-bit integers as strings, bytes as base64, enums by
// name, zero values left out. Input accepts what protojson accepts for these
// messages: JSON or proto names, integers as numbers or strings, enums by name
// or number, standard or URL-safe base64; unknown fields are ignored. A text
// that is not such a JSON object is a DecodeError with close code 1007.

import { DecodeError, priorityFromWire, type Priority } from "./frames.js";
import { defaults, type Field, type Scalar, type Schema } from "./schema.js";

const invalidPayload = 1007;

const priorityNames = ["PRIORITY_UNSPECIFIED", "PRIORITY_P0", "PRIORITY_P1", "PRIORITY_P2"];

function fail(what: string): never {
  throw new DecodeError(invalidPayload, `corral: invalid JSON frame: ${what}`);
}

/** base64 encodes bytes with the standard alphabet and padding. */
export function base64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) {
    s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** fromBase64 decodes standard or URL-safe base64, with or without padding. */
export function fromBase64(s: string): Uint8Array {
  let t = s.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (t.length % 4 === 1) throw new Error("bad base64 length");
  t += "===".slice(0, (4 - (t.length % 4)) % 4);
  const bin = atob(t);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function scalarToJSON(t: Scalar, v: unknown): unknown {
  switch (t) {
    case "bytes":
      return base64(v as Uint8Array);
    case "uint64":
    case "int64":
      return String(v);
    case "priority":
      return priorityNames[((v as Priority) ?? 2) + 1];
    default:
      return v;
  }
}

function isZero(t: Scalar, v: unknown): boolean {
  switch (t) {
    case "bytes":
      return (v as Uint8Array).length === 0;
    case "priority":
      return false;
    default:
      return !v;
  }
}

function toJSON(s: Schema, m: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of s.fields) {
    const v = m[f.name];
    if (v === undefined || v === null) continue;
    if (typeof f.type === "object") {
      const sub = f.type;
      if (f.repeated) {
        const list = v as Record<string, unknown>[];
        if (list.length) out[f.name] = list.map((x) => toJSON(sub, x));
      } else out[f.name] = toJSON(sub, v as Record<string, unknown>);
      continue;
    }
    if (f.repeated) {
      const list = v as unknown[];
      if (list.length) out[f.name] = list.map((x) => scalarToJSON(f.type as Scalar, x));
      continue;
    }
    if (!isZero(f.type, v)) out[f.name] = scalarToJSON(f.type, v);
  }
  return out;
}

/** encodeJSON returns the protobuf JSON text of message m of schema s. */
export function encodeJSON(s: Schema, m: object): string {
  return JSON.stringify(toJSON(s, m as Record<string, unknown>));
}

function intOf(f: Field, v: unknown, min: number, max: number): number {
  let n: number;
  if (typeof v === "number") n = v;
  else if (typeof v === "string" && /^-?\d+$/.test(v)) n = Number(v);
  else fail(`${f.name}: not an integer`);
  if (!Number.isInteger(n) || n < min || n > max) fail(`${f.name}: ${String(v)} out of range`);
  return n;
}

function scalarFromJSON(f: Field, t: Scalar, v: unknown): unknown {
  switch (t) {
    case "string":
      if (typeof v !== "string") fail(`${f.name}: not a string`);
      return v;
    case "bytes":
      if (typeof v !== "string") fail(`${f.name}: not base64`);
      try {
        return fromBase64(v);
      } catch {
        fail(`${f.name}: not base64`);
      }
    case "bool":
      if (typeof v !== "boolean") fail(`${f.name}: not a boolean`);
      return v;
    case "priority": {
      if (typeof v === "string") {
        const i = priorityNames.indexOf(v);
        if (i >= 0) return priorityFromWire(i);
      }
      return priorityFromWire(intOf(f, v, -0x80000000, 0x7fffffff));
    }
    case "uint32":
      return intOf(f, v, 0, 0xffffffff);
    case "int64":
      return intOf(f, v, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    default:
      return intOf(f, v, 0, Number.MAX_SAFE_INTEGER);
  }
}

function fromJSON(s: Schema, j: unknown): Record<string, unknown> {
  if (typeof j !== "object" || j === null || Array.isArray(j)) fail(`${s.name}: not an object`);
  const m = defaults(s);
  let oneof: string | undefined;
  for (const [k, v] of Object.entries(j as Record<string, unknown>)) {
    const f = s.byJSON!.get(k);
    if (!f || v === null) continue; // unknown fields are ignored; null is the default
    if (f.oneof) {
      if (oneof !== undefined && oneof !== f.name) fail(`${s.name}: both ${oneof} and ${f.name} set`);
      oneof = f.name;
    }
    if (f.repeated) {
      if (!Array.isArray(v)) fail(`${f.name}: not a list`);
      m[f.name] = v.map((x) => (typeof f.type === "object" ? fromJSON(f.type, x) : scalarFromJSON(f, f.type, x)));
      continue;
    }
    m[f.name] = typeof f.type === "object" ? fromJSON(f.type, v) : scalarFromJSON(f, f.type, v);
  }
  return m;
}

/** decodeJSON decodes the JSON text of a message of schema s; it throws a DecodeError (code 1007) on bad input. */
export function decodeJSON(s: Schema, text: string): Record<string, unknown> {
  let j: unknown;
  try {
    j = JSON.parse(text);
  } catch {
    fail("not JSON");
  }
  return fromJSON(s, j);
}
