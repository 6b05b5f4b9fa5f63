// codec.ts: one frame per WebSocket message, in one of the two formats the
// hub offers as WebSocket subprotocols.

import type { ClientFrame, ServerFrame } from "./frames.js";
import { DecodeError } from "./frames.js";
import { decodeJSON, encodeJSON } from "./json.js";
import { decodeProto, encodeProto } from "./proto.js";
import * as S from "./schema.js";

/** Format is the encoding of frames: "proto" (binary messages, the default) or "json" (text messages). */
export type Format = "proto" | "json";

/** subprotocol returns the WebSocket subprotocol of a format. */
export function subprotocol(f: Format): string {
  return f === "json" ? "corral.v1.json" : "corral.v1.proto";
}

/** encodeClientFrame encodes a client frame: bytes for "proto", text for "json". */
export function encodeClientFrame(format: Format, f: ClientFrame): Uint8Array | string {
  return format === "json" ? encodeJSON(S.ClientFrame, f) : encodeProto(S.ClientFrame, f);
}

/** encodeServerFrame encodes a server frame (for test servers). */
export function encodeServerFrame(format: Format, f: ServerFrame): Uint8Array | string {
  return format === "json" ? encodeJSON(S.ServerFrame, f) : encodeProto(S.ServerFrame, f);
}

function decode(format: Format, s: S.Schema, data: unknown): Record<string, unknown> {
  if (format === "json") {
    if (typeof data !== "string") throw new DecodeError(1007, "corral: a binary message under corral.v1.json");
    return decodeJSON(s, data);
  }
  if (typeof data === "string") throw new DecodeError(1002, "corral: a text message under corral.v1.proto");
  if (data instanceof ArrayBuffer) return decodeProto(s, new Uint8Array(data));
  if (data instanceof Uint8Array) return decodeProto(s, data);
  throw new DecodeError(1002, "corral: a message that is neither text nor bytes");
}

/** decodeServerFrame decodes one WebSocket message from a server. It throws a DecodeError. */
export function decodeServerFrame(format: Format, data: unknown): ServerFrame {
  return decode(format, S.ServerFrame, data) as unknown as ServerFrame;
}

/** decodeClientFrame decodes one WebSocket message from a client (for test servers). */
export function decodeClientFrame(format: Format, data: unknown): ClientFrame {
  return decode(format, S.ClientFrame, data) as unknown as ClientFrame;
}
