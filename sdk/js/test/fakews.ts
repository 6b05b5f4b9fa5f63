// fakews.ts: a WebSocket stand-in for the unit tests, with the server's end
// in the test's hands: frames the client sent, frames to push, closes.
import { decodeClientFrame, encodeServerFrame, type Format } from "../src/codec.js";
import type { ClientFrame, ServerFrame } from "../src/frames.js";
import type { WebSocketLike } from "../src/client.js";

export class FakeWS implements WebSocketLike {
  static sockets: FakeWS[] = [];
  binaryType = "blob";
  protocol = "";
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string; wasClean?: boolean }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  readonly url: string;
  readonly protocols: string[];
  readonly sent: unknown[] = [];
  closedByClient?: number;
  format: Format;

  constructor(url: string, protocols?: string | string[]) {
    this.url = url;
    this.protocols = typeof protocols === "string" ? [protocols] : (protocols ?? []);
    this.format = this.protocols[0] === "corral.v1.json" ? "json" : "proto";
    FakeWS.sockets.push(this);
  }

  send(data: string | Uint8Array): void {
    this.sent.push(typeof data === "string" ? data : data.slice());
  }

  close(code?: number): void {
    this.closedByClient = code ?? 1005;
  }

  // The server's end.

  /** frames returns what the client sent, decoded. */
  frames(): ClientFrame[] {
    return this.sent.map((d) => decodeClientFrame(this.format, d));
  }

  accept(): void {
    this.protocol = this.protocols[0];
    this.onopen?.({});
  }

  push(f: Partial<ServerFrame>): void {
    const frame = { id: 0, ...f } as ServerFrame;
    const data = encodeServerFrame(this.format, frame);
    this.onmessage?.({ data: typeof data === "string" ? data : data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) });
  }

  /** closeFromServer ends the connection as the browser reports it (1006: cut without a close frame). */
  closeFromServer(code: number, reason = ""): void {
    this.onclose?.({ code, reason, wasClean: code !== 1006 });
  }

  static last(): FakeWS {
    const s = FakeWS.sockets[FakeWS.sockets.length - 1];
    if (!s) throw new Error("no socket opened");
    return s;
  }
}

export function welcome(sessionId = "s-1", pingIntervalMs = 0): Partial<ServerFrame> {
  return {
    id: 1,
    welcome: {
      sessionId,
      nodeId: "hub-" + sessionId,
      nodeEpoch: "n",
      serverTimeUnixMs: 0,
      priority: 2,
      hints: { pingIntervalMs, maxFrameBytes: 65536, maxSubscriptions: 128, reconnectBaseMs: 0, reconnectCapMs: 0, historyWindowMs: 30000, publishRatePerSecond: 50 },
    },
  };
}
