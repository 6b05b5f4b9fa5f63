// frames.ts: the frames of corral's session protocol (proto/corral/v1/corral.proto)
// as plain objects. Field names are the protobuf JSON names (lowerCamelCase).
// Offsets and frame ids are uint64 on the wire and numbers here: exact up to
// 2^53, which a channel does not reach (a decoder refuses larger ones).

/** Priority of a session or a message: 0 is P0 (the most important), 2 is P2. */
export type Priority = 0 | 1 | 2;

/** A place in a channel's stream: an epoch and the highest offset seen in it. */
export interface Position {
  epoch: string;
  offset: number;
}

export interface Subscribe {
  channel: string;
  /** Absent: start live. Present: resume after from.offset of from.epoch. */
  from?: Position;
}

export interface Hello {
  token: string;
  priority: Priority;
  subscribe: Subscribe[];
  previousSessionId: string;
  client: string;
}

export interface Publish {
  channel: string;
  priority: Priority;
  data: Uint8Array;
  clientMessageId: string;
}

export interface Ack {
  channel: string;
  epoch: string;
  offset: number;
}

/** Everything a client sends: exactly one of the frame fields is set. */
export interface ClientFrame {
  id: number;
  hello?: Hello;
  subscribe?: Subscribe;
  unsubscribe?: { channel: string };
  publish?: Publish;
  ack?: Ack;
  ping?: { payload: Uint8Array };
  pong?: { payload: Uint8Array };
}

export interface ServerHints {
  pingIntervalMs: number;
  maxFrameBytes: number;
  maxSubscriptions: number;
  reconnectBaseMs: number;
  reconnectCapMs: number;
  historyWindowMs: number;
  publishRatePerSecond: number;
}

export interface Welcome {
  sessionId: string;
  nodeId: string;
  nodeEpoch: string;
  serverTimeUnixMs: number;
  hints: ServerHints;
  priority: Priority;
}

export interface Subscribed {
  channel: string;
  position: Position;
  resumed: boolean;
  recovered: boolean;
}

export interface Unsubscribed {
  channel: string;
  reason: string;
}

export interface Published {
  channel: string;
  epoch: string;
  offset: number;
  duplicate: boolean;
}

export interface MessageFrame {
  channel: string;
  epoch: string;
  offset: number;
  priority: Priority;
  data: Uint8Array;
  timeUnixMs: number;
}

export interface GapFrame {
  channel: string;
  epoch: string;
  fromOffset: number;
  toOffset: number;
  reason: string;
}

/**
 * Retry windows: with retryAfterMs and retryWithinMs both set, the server has
 * spaced the clients it sends away itself and asks each to come back
 * uniformly within [retryAfterMs, retryAfterMs + retryWithinMs] instead of
 * adding its own policy's jitter above the hint. 0 (an older server): the
 * policy's jitter. A window without a hint means nothing.
 */
export interface GoAway {
  code: number;
  reason: string;
  retryAfterMs: number;
  drain: boolean;
  retryWithinMs: number;
}

export interface ErrorFrame {
  code: number;
  text: string;
  retryAfterMs: number;
  channel: string;
  /** See GoAway. */
  retryWithinMs: number;
}

/** Everything a server sends: exactly one of the frame fields is set. */
export interface ServerFrame {
  id: number;
  welcome?: Welcome;
  subscribed?: Subscribed;
  unsubscribed?: Unsubscribed;
  published?: Published;
  message?: MessageFrame;
  gap?: GapFrame;
  goAway?: GoAway;
  ping?: { payload: Uint8Array };
  pong?: { payload: Uint8Array };
  error?: ErrorFrame;
}

/** The kinds of ServerFrame, in field order. */
export const serverKinds = [
  "welcome",
  "subscribed",
  "unsubscribed",
  "published",
  "message",
  "gap",
  "goAway",
  "ping",
  "pong",
  "error",
] as const;

export type ServerKind = (typeof serverKinds)[number];

/** kindOf returns which frame a ServerFrame carries, or undefined for none. */
export function kindOf(f: ServerFrame): ServerKind | undefined {
  for (const k of serverKinds) {
    if (f[k] !== undefined) return k;
  }
  return undefined;
}

/** Priority enum numbers on the wire: PRIORITY_P0 = 1 ... PRIORITY_P2 = 3, 0 unspecified (P2). */
export function priorityToWire(p: Priority): number {
  return p + 1;
}

/** priorityFromWire reads a wire enum number as a rank; unspecified and unknown read as P2. */
export function priorityFromWire(n: number): Priority {
  if (n === 1) return 0;
  if (n === 2) return 1;
  return 2;
}

/** DecodeError is a frame that could not be decoded; code is the close code it deserves. */
export class DecodeError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = "DecodeError";
    this.code = code;
  }
}
