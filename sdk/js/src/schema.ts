// schema.ts: the field tables of the protobuf messages the SDK speaks. One
// table drives both encodings (protobuf wire format and the protobuf JSON
// mapping), so a field is named and numbered in one place, as in
// proto/corral/v1/corral.proto.

/** Scalar kinds: proto3 types as the SDK represents them. */
export type Scalar =
  | "string"
  | "bytes"
  | "uint64" // number, exact up to 2^53 - 1
  | "int64" // number, exact between -(2^53 - 1) and 2^53 - 1
  | "uint32"
  | "bool"
  | "priority"; // the Priority enum, read as a rank 0..2

export interface Field {
  no: number;
  name: string; // lowerCamelCase JSON name
  type: Scalar | Schema;
  repeated?: boolean;
  /** A message field whose absence matters (Subscribe.from): undefined when absent. */
  optional?: boolean;
  /** A oneof member: undefined when absent, written even when empty. */
  oneof?: boolean;
}

export interface Schema {
  name: string;
  fields: Field[];
  byNo?: Map<number, Field>;
  byJSON?: Map<string, Field>;
}

function schema(name: string, fields: Field[]): Schema {
  const s: Schema = { name, fields, byNo: new Map(), byJSON: new Map() };
  for (const f of fields) {
    s.byNo!.set(f.no, f);
    s.byJSON!.set(f.name, f);
    s.byJSON!.set(protoName(f.name), f);
  }
  return s;
}

/** protoName returns the proto field name of a JSON name: sessionId -> session_id. */
export function protoName(json: string): string {
  return json.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
}

const str = (no: number, name: string): Field => ({ no, name, type: "string" });
const u64 = (no: number, name: string): Field => ({ no, name, type: "uint64" });
const u32 = (no: number, name: string): Field => ({ no, name, type: "uint32" });

export const Position = schema("Position", [str(1, "epoch"), u64(2, "offset")]);

export const Subscribe = schema("Subscribe", [
  str(1, "channel"),
  { no: 2, name: "from", type: Position, optional: true },
]);

export const Hello = schema("Hello", [
  str(1, "token"),
  { no: 2, name: "priority", type: "priority" },
  { no: 3, name: "subscribe", type: Subscribe, repeated: true },
  str(4, "previousSessionId"),
  str(5, "client"),
]);

export const Unsubscribe = schema("Unsubscribe", [str(1, "channel")]);

export const Publish = schema("Publish", [
  str(1, "channel"),
  { no: 2, name: "priority", type: "priority" },
  { no: 3, name: "data", type: "bytes" },
  str(4, "clientMessageId"),
]);

export const Ack = schema("Ack", [str(1, "channel"), str(2, "epoch"), u64(3, "offset")]);

export const Payload = schema("Ping", [{ no: 1, name: "payload", type: "bytes" }]);

export const ClientFrame = schema("ClientFrame", [
  u64(1, "id"),
  { no: 2, name: "hello", type: Hello, oneof: true },
  { no: 3, name: "subscribe", type: Subscribe, oneof: true },
  { no: 4, name: "unsubscribe", type: Unsubscribe, oneof: true },
  { no: 5, name: "publish", type: Publish, oneof: true },
  { no: 6, name: "ack", type: Ack, oneof: true },
  { no: 7, name: "ping", type: Payload, oneof: true },
  { no: 8, name: "pong", type: Payload, oneof: true },
]);

export const ServerHints = schema("ServerHints", [
  u32(1, "pingIntervalMs"),
  u32(2, "maxFrameBytes"),
  u32(3, "maxSubscriptions"),
  u32(4, "reconnectBaseMs"),
  u32(5, "reconnectCapMs"),
  u32(6, "historyWindowMs"),
  u32(7, "publishRatePerSecond"),
]);

export const Welcome = schema("Welcome", [
  str(1, "sessionId"),
  str(2, "nodeId"),
  str(3, "nodeEpoch"),
  { no: 4, name: "serverTimeUnixMs", type: "int64" },
  { no: 5, name: "hints", type: ServerHints },
  { no: 6, name: "priority", type: "priority" },
]);

export const Subscribed = schema("Subscribed", [
  str(1, "channel"),
  { no: 2, name: "position", type: Position },
  { no: 3, name: "resumed", type: "bool" },
  { no: 4, name: "recovered", type: "bool" },
]);

export const Unsubscribed = schema("Unsubscribed", [str(1, "channel"), str(2, "reason")]);

export const Published = schema("Published", [
  str(1, "channel"),
  str(2, "epoch"),
  u64(3, "offset"),
  { no: 4, name: "duplicate", type: "bool" },
]);

export const Message = schema("Message", [
  str(1, "channel"),
  str(2, "epoch"),
  u64(3, "offset"),
  { no: 4, name: "priority", type: "priority" },
  { no: 5, name: "data", type: "bytes" },
  { no: 6, name: "timeUnixMs", type: "int64" },
]);

export const Gap = schema("Gap", [
  str(1, "channel"),
  str(2, "epoch"),
  u64(3, "fromOffset"),
  u64(4, "toOffset"),
  str(5, "reason"),
]);

export const GoAway = schema("GoAway", [
  u32(1, "code"),
  str(2, "reason"),
  u32(3, "retryAfterMs"),
  { no: 4, name: "drain", type: "bool" },
  u32(5, "retryWithinMs"),
]);

export const ErrorMsg = schema("Error", [
  u32(1, "code"),
  str(2, "text"),
  u32(3, "retryAfterMs"),
  str(4, "channel"),
  u32(5, "retryWithinMs"),
]);

export const ServerFrame = schema("ServerFrame", [
  u64(1, "id"),
  { no: 2, name: "welcome", type: Welcome, oneof: true },
  { no: 3, name: "subscribed", type: Subscribed, oneof: true },
  { no: 4, name: "unsubscribed", type: Unsubscribed, oneof: true },
  { no: 5, name: "published", type: Published, oneof: true },
  { no: 6, name: "message", type: Message, oneof: true },
  { no: 7, name: "gap", type: Gap, oneof: true },
  { no: 8, name: "goAway", type: GoAway, oneof: true },
  { no: 9, name: "ping", type: Payload, oneof: true },
  { no: 10, name: "pong", type: Payload, oneof: true },
  { no: 11, name: "error", type: ErrorMsg, oneof: true },
]);

/** defaults returns a message of s with every field at its zero value. */
export function defaults(s: Schema): Record<string, unknown> {
  const m: Record<string, unknown> = {};
  for (const f of s.fields) {
    if (f.repeated) m[f.name] = [];
    else if (f.optional || f.oneof) continue;
    else if (typeof f.type === "object") m[f.name] = defaults(f.type);
    else m[f.name] = zero(f.type);
  }
  return m;
}

export function zero(t: Scalar): unknown {
  switch (t) {
    case "string":
      return "";
    case "bytes":
      return new Uint8Array(0);
    case "bool":
      return false;
    case "priority":
      return 2;
    default:
      return 0;
  }
}
