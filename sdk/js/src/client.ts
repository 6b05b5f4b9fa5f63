// client.ts: the Client, a session to corral hubs that survives disconnects.
// The rules are those of the Go client (client/README.md) where a browser
// allows: a random address first and the next one after each disconnect,
// jittered reconnects (package backoff's policies, full jitter by default), a
// server's retry hint as the floor of the next delay with the policy's jitter
// above it (or, when the server sent a retry window beside the hint, a delay
// drawn within the window), resume positions per channel sent in Hello, a
// gap surfaced once per lost stretch, P0 messages acknowledged on receipt (or
// by the application with manualAck) and delivered once (a resume's
// redeliveries are dropped by offset), and a stop only on a terminal close
// the server sent.

import { Backoff, resolveBackoff, type BackoffOptions } from "./backoff.js";
import { closeName, CloseCode, parseReason, retryable } from "./close.js";
import { decodeServerFrame, encodeClientFrame, subprotocol, type Format } from "./codec.js";
import { Emitter } from "./emitter.js";
import type {
  ClientFrame,
  GapFrame,
  MessageFrame,
  Position,
  Priority,
  Published,
  ServerFrame,
  Subscribed,
  Welcome,
} from "./frames.js";
import { DecodeError } from "./frames.js";

/** VERSION is the SDK's version, sent in Hello.client. */
export const VERSION = "0.1.0";

/** The part of the browser's WebSocket the client uses (a test or Node can pass its own). */
export interface WebSocketLike {
  binaryType: string;
  readonly protocol: string;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string; wasClean?: boolean }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** ClientOptions say where and how a Client connects. urls and token are required. */
export interface ClientOptions {
  /** ws:// or wss:// URLs of hubs or edges (for example "wss://corral.example.com/v1/ws"). */
  urls: string | string[];
  /** The session JWT, or a function called before every connection attempt (to refresh it). */
  token: string | (() => string | Promise<string>);
  /** Session priority: 0 (P0), 1 or 2 (default 2). It may not exceed the token's. */
  priority?: Priority;
  /** "proto" (binary frames, default) or "json" (text frames, readable in the browser's devtools). */
  format?: Format;
  /** Leave the acknowledgement of P0 messages to the application (message.ack() or client.ack()). */
  manualAck?: boolean;
  /** Reconnect policy (package backoff's): default full jitter, base 500 ms, cap 30 s. */
  backoff?: BackoffOptions;
  /** Bounds one attempt, from opening the socket to Welcome. Default 5000 ms. */
  connectTimeoutMs?: number;
  /** Sent in Hello.client. Default "corral-js/<version>". */
  name?: string;
  /** The WebSocket constructor. Default globalThis.WebSocket. */
  WebSocket?: WebSocketConstructor;
  /** Uniform numbers in [0, 1) for the address order and the jitter. Default Math.random. */
  random?: () => number;
}

/** State is the connection state, as the "state" event and Client.state report it. */
export type State = "idle" | "connecting" | "connected" | "disconnected" | "closed";

/** A channel message delivered to the application, each offset once per epoch. */
export interface Message {
  channel: string;
  epoch: string;
  offset: number;
  priority: Priority;
  data: Uint8Array;
  timeUnixMs: number;
  /** text decodes data as UTF-8. */
  text(): string;
  /** ack acknowledges this P0 message and the ones before it (with manualAck; otherwise a no-op). */
  ack(): void;
}

/**
 * GapEvent: messages of a channel that will not come. reason "resume": a
 * reconnect could not recover them (the hub's window or the epoch moved on);
 * "resume impossible": the server refused every position (close 4006);
 * otherwise the server's Gap reason (messages dropped for a slow consumer).
 * Resync the channel from your source of truth; delivery goes on from
 * position. fromOffset..toOffset is the lost stretch in epoch (toOffset 0:
 * unknown, the epoch changed).
 */
export interface GapEvent {
  channel: string;
  reason: string;
  epoch: string;
  fromOffset: number;
  toOffset: number;
  position: Position;
}

export interface ConnectingEvent {
  url: string;
  attempt: number;
}

export interface ConnectedEvent {
  url: string;
  sessionId: string;
  nodeId: string;
  welcome: Welcome;
}

/** DisconnectedEvent: a session or an attempt ended. retryInMs and nextRetryAt are set when the client retries. */
export interface DisconnectedEvent {
  url: string;
  code: number;
  /** The close code's name and the server's text ("going away: draining"). */
  reason: string;
  retryAfterMs: number;
  /** The server's retry window beside its hint (0: none, the policy's jitter above the hint). */
  retryWithinMs: number;
  willRetry: boolean;
  retryInMs?: number;
  /** Date.now() at which the next attempt starts. */
  nextRetryAt?: number;
}

export interface ResumedEvent {
  channel: string;
  recovered: boolean;
  position: Position;
}

export interface RefusedEvent {
  channel: string;
  code: number;
  text: string;
}

export interface StateEvent {
  state: State;
  previous: State;
}

export interface ClosedEvent {
  /** Set when a terminal close stopped the client; undefined after close(). */
  error?: CorralError;
}

/** The events of a Client, by name. */
export interface ClientEvents {
  state: StateEvent;
  connecting: ConnectingEvent;
  connected: ConnectedEvent;
  disconnected: DisconnectedEvent;
  resumed: ResumedEvent;
  gap: GapEvent;
  message: Message;
  refused: RefusedEvent;
  closed: ClosedEvent;
}

/** The events of a Subscription, by name. */
export interface SubscriptionEvents {
  message: Message;
  gap: GapEvent;
  resumed: ResumedEvent;
  refused: RefusedEvent;
}

/**
 * CorralError is a close or an error reply of the server: code is a close code
 * of wire/README.md, retryAfterMs the server's hint and retryWithinMs the
 * retry window beside it (0 without a hint).
 */
export class CorralError extends Error {
  readonly code: number;
  readonly retryAfterMs: number;
  readonly retryWithinMs: number;
  readonly text: string;
  constructor(code: number, text: string, retryAfterMs = 0, retryWithinMs = 0) {
    const name = closeName(code);
    const within = retryAfterMs > 0 && retryWithinMs > 0 ? retryWithinMs : 0;
    const retry = retryAfterMs > 0 ? ` (retry after ${retryAfterMs} ms${within ? ` within ${within} ms` : ""})` : "";
    super(`corral: ${code}${name ? " " + name : ""}${text ? ": " + text : ""}${retry}`);
    this.name = "CorralError";
    this.code = code;
    this.text = text;
    this.retryAfterMs = retryAfterMs;
    this.retryWithinMs = within;
  }
  /** retryable reports whether the code is one a reconnect may get past. */
  get retryable(): boolean {
    return retryable(this.code);
  }
}

/** ClosedError rejects the requests of a client that was closed. */
export class ClosedError extends Error {
  constructor() {
    super("corral: client closed");
    this.name = "ClosedError";
  }
}

const utf8 = new TextDecoder();
const utf8enc = new TextEncoder();

/** chanState is the client's view of a subscribed channel. */
interface ChanState {
  sub: Subscription;
  epoch: string;
  received: number; // highest offset delivered to the application
  unacked: number[]; // P0 offsets delivered and not acknowledged, ascending (manualAck)
  confirmed: boolean; // a Subscribed arrived
  sent: boolean; // asked for on the current session (in its Hello or by a Subscribe)
}

function resumeFrom(st: ChanState): Position | undefined {
  if (st.epoch === "") return undefined;
  const off = st.unacked.length > 0 ? st.unacked[0] - 1 : st.received;
  return { epoch: st.epoch, offset: off };
}

interface Request {
  frame: ClientFrame;
  resolve: (f: ServerFrame) => void;
  reject: (e: Error) => void;
  retry: boolean; // sent again on the next session when this one ends first
}

/** Said is what the server announced before a close (GoAway, or an Error answering no request). */
interface Said {
  code: number;
  retryAfterMs: number;
  retryWithinMs: number; // taken only with its hint (ended)
  text: string;
}

/** saidOf reads the close a GoAway or an Error announces, with its hint and window. */
function saidOf(f: ServerFrame): Said | undefined {
  if (f.goAway) {
    const g = f.goAway;
    return { code: g.code || CloseCode.GoingAway, retryAfterMs: g.retryAfterMs, retryWithinMs: g.retryWithinMs, text: g.reason };
  }
  if (f.error) {
    const e = f.error;
    return { code: e.code, retryAfterMs: e.retryAfterMs, retryWithinMs: e.retryWithinMs, text: e.text };
  }
  return undefined;
}

/**
 * Subscription is one channel of a Client. Listen with on("message", ...);
 * ready resolves with the first Subscribed, or rejects when the server
 * refuses the channel.
 */
export class Subscription extends Emitter<SubscriptionEvents> {
  readonly channel: string;
  readonly ready: Promise<Subscribed>;
  /** @internal */ settle!: { resolve: (s: Subscribed) => void; reject: (e: Error) => void };
  private readonly client: Client;

  /** @internal */
  constructor(client: Client, channel: string) {
    super();
    this.client = client;
    this.channel = channel;
    this.ready = new Promise<Subscribed>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.ready.catch(() => {}); // a refusal is also an event; an unobserved ready must not be reported
  }

  /** position returns the epoch and the highest offset delivered, or undefined before the first. */
  position(): Position | undefined {
    return this.client.position(this.channel);
  }

  /** unsubscribe stops the channel. */
  unsubscribe(): void {
    this.client.unsubscribe(this.channel);
  }

  /** @internal */
  fire<K extends keyof SubscriptionEvents>(name: K, e: SubscriptionEvents[K]): void {
    this.emit(name, e);
  }
}

/**
 * Client is a connection to corral hubs that survives disconnects. Create
 * it, add listeners and subscriptions, then connect(). Most callers want
 * subscribe() and the "message" events of the Subscription it returns.
 */
export class Client extends Emitter<ClientEvents> {
  private readonly urls: string[];
  private readonly opts: ClientOptions;
  private readonly format: Format;
  private readonly WS: WebSocketConstructor;
  private readonly random: () => number;
  private retry: Backoff;
  private readonly subs = new Map<string, ChanState>();
  private queue: Request[] = []; // requests waiting for a session
  private pending = new Map<number, Request>(); // requests sent on this session, by frame id
  private st: State = "idle";
  private ws?: WebSocketLike;
  private url = "";
  private next = 0;
  private attempts = 0;
  private nextId = 1; // 1 is the Hello
  private welcomed = false;
  private said?: Said;
  private sessionId = "";
  private timer?: ReturnType<typeof setTimeout>;
  private liveness?: ReturnType<typeof setInterval>;
  private lastHeard = 0;
  private dups = 0;

  constructor(options: ClientOptions) {
    super();
    const urls = typeof options.urls === "string" ? [options.urls] : [...(options.urls ?? [])];
    if (urls.length === 0) throw new TypeError("corral: no url");
    for (const u of urls) {
      if (!/^wss?:\/\//.test(u)) throw new TypeError(`corral: url ${JSON.stringify(u)}: want ws:// or wss://`);
    }
    if (!options.token) throw new TypeError("corral: no token");
    if (options.priority !== undefined && ![0, 1, 2].includes(options.priority)) {
      throw new TypeError(`corral: priority ${String(options.priority)}: want 0, 1 or 2`);
    }
    if (options.format !== undefined && options.format !== "proto" && options.format !== "json") {
      throw new TypeError(`corral: format ${String(options.format)}: want "proto" or "json"`);
    }
    const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) throw new TypeError("corral: no WebSocket in this environment: pass options.WebSocket");
    this.opts = options;
    this.format = options.format ?? "proto";
    this.WS = WS;
    this.random = options.random ?? Math.random;
    this.retry = new Backoff(options.backoff ?? {}, this.random);
    // A random order: a fleet of clients given the same list spreads over it
    // from the first connection; after each disconnect the next address.
    for (let i = urls.length - 1; i > 0; i--) {
      const j = Math.floor(this.random() * (i + 1));
      [urls[i], urls[j]] = [urls[j], urls[i]];
    }
    this.urls = urls;
  }

  /** state is the connection state. */
  get state(): State {
    return this.st;
  }

  /** duplicates counts the messages dropped because their offset was already delivered (a resume's P0 redeliveries). */
  get duplicates(): number {
    return this.dups;
  }

  /** connectedUrl is the URL of the current session, "" while disconnected. */
  get connectedUrl(): string {
    return this.st === "connected" ? this.url : "";
  }

  /** connect starts connecting (and reconnecting until close() or a terminal close). */
  connect(): void {
    if (this.st === "closed") throw new ClosedError();
    if (this.st !== "idle") return;
    this.attempt();
  }

  /** close ends the session and stops reconnecting. Pending requests reject with ClosedError. */
  close(): void {
    if (this.st === "closed") return;
    this.stop(undefined);
  }

  /**
   * subscribe subscribes to a channel, live or, with from, resuming after a
   * position the application kept. After a reconnect the client resumes the
   * channel by itself. Subscribing to a channel already subscribed returns
   * its Subscription.
   */
  subscribe(channel: string, from?: Position): Subscription {
    if (this.st === "closed") throw new ClosedError();
    const have = this.subs.get(channel);
    if (have && !from) return have.sub;
    const sub = have?.sub ?? new Subscription(this, channel);
    const st: ChanState = { sub, epoch: from?.epoch ?? "", received: from?.offset ?? 0, unacked: [], confirmed: false, sent: false };
    this.subs.set(channel, st);
    if (this.st === "connected") this.sendSubscribe(st);
    return sub;
  }

  /** unsubscribe stops a channel. */
  unsubscribe(channel: string): void {
    if (!this.subs.delete(channel)) return;
    if (this.st === "connected") this.send({ id: this.takeId(), unsubscribe: { channel } });
  }

  /** position returns a channel's epoch and highest offset delivered. */
  position(channel: string): Position | undefined {
    const st = this.subs.get(channel);
    if (!st || st.epoch === "") return undefined;
    return { epoch: st.epoch, offset: st.received };
  }

  /**
   * publish sends data on a channel and resolves with the server's answer. It
   * waits for a session when there is none, and is sent again on the next
   * session when this one ends first: clientMessageId (one is made when not
   * given) lets the server answer a retry as a duplicate.
   */
  publish(channel: string, data: Uint8Array | string, options: { priority?: Priority; clientMessageId?: string } = {}): Promise<Published> {
    if (this.st === "closed") return Promise.reject(new ClosedError());
    const bytes = typeof data === "string" ? utf8enc.encode(data) : data;
    const id = options.clientMessageId ?? randomId(this.random);
    return this.request(
      { id: 0, publish: { channel, priority: options.priority ?? 2, data: bytes, clientMessageId: id } },
      true,
    ).then((f) => f.published!);
  }

  /**
   * ack acknowledges every P0 message of channel up to offset (with
   * manualAck). Until then a resume, on whichever hub, starts before the
   * oldest unacknowledged P0 message, so the hub sends it again (the client
   * does not deliver it twice).
   */
  ack(channel: string, epoch: string, offset: number): void {
    const st = this.subs.get(channel);
    if (st && st.epoch === epoch) st.unacked = st.unacked.filter((o) => o > offset);
    if (this.st === "connected") this.send({ id: 0, ack: { channel, epoch, offset } });
  }

  // Connection attempts.

  private setState(s: State): void {
    if (s === this.st) return;
    const previous = this.st;
    this.st = s;
    this.emit("state", { state: s, previous });
  }

  private attempt(): void {
    this.timer = undefined;
    const url = this.urls[this.next % this.urls.length];
    this.next++;
    this.attempts++;
    this.url = url;
    this.welcomed = false;
    this.said = undefined;
    this.setState("connecting");
    this.emit("connecting", { url, attempt: this.attempts });
    const deadline = this.opts.connectTimeoutMs ?? 5000;
    this.timer = setTimeout(() => this.abort(CloseCode.Abnormal, `no welcome within ${deadline} ms`), deadline);
    const tok = this.opts.token;
    const n = this.attempts;
    const current = () => this.attempts === n && this.st === "connecting" && !this.ws;
    Promise.resolve()
      .then(() => (typeof tok === "function" ? tok() : tok))
      .then(
        (token) => {
          if (current()) this.open(url, token);
        },
        (err) => {
          if (current()) this.ended(CloseCode.Abnormal, `token: ${String(err)}`, true);
        },
      );
  }

  private open(url: string, token: string): void {
    let ws: WebSocketLike;
    try {
      ws = new this.WS(url, [subprotocol(this.format)]);
    } catch (e) {
      this.ended(CloseCode.Abnormal, `open ${url}: ${String(e)}`, true);
      return;
    }
    this.ws = ws;
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      const subscribe = [...this.subs.entries()]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([channel, st]) => {
          st.sent = true;
          return { channel, from: resumeFrom(st) };
        });
      this.send({
        id: 1,
        hello: {
          token,
          priority: this.opts.priority ?? 2,
          subscribe,
          previousSessionId: this.sessionId,
          client: this.opts.name ?? `corral-js/${VERSION}`,
        },
      });
    };
    ws.onmessage = (ev) => {
      let f: ServerFrame;
      try {
        f = decodeServerFrame(this.format, ev.data);
      } catch (e) {
        const code = e instanceof DecodeError ? e.code : CloseCode.ProtocolError;
        this.abort(code, (e as Error).message);
        return;
      }
      this.lastHeard = Date.now();
      this.handle(f);
    };
    ws.onclose = (ev) => this.ended(ev.code || CloseCode.Abnormal, ev.reason ?? "", false);
    ws.onerror = () => {}; // a close event follows
  }

  /** abort ends the current attempt or session from this side. */
  private abort(code: number, text: string): void {
    const ws = this.ws;
    if (ws) {
      try {
        ws.close(1000);
      } catch {
        // already closing
      }
    }
    this.ended(code, text, true);
  }

  private send(f: ClientFrame): boolean {
    if (!this.ws) return false;
    try {
      this.ws.send(encodeClientFrame(this.format, f));
      return true;
    } catch {
      return false; // the close event follows
    }
  }

  private takeId(): number {
    this.nextId++;
    return this.nextId;
  }

  private request(frame: ClientFrame, retry: boolean): Promise<ServerFrame> {
    return new Promise((resolve, reject) => {
      const r: Request = { frame, resolve, reject, retry };
      if (this.st === "connected") this.sendRequest(r);
      else this.queue.push(r);
    });
  }

  private sendRequest(r: Request): void {
    const id = this.takeId();
    r.frame = { ...r.frame, id };
    this.pending.set(id, r);
    this.send(r.frame);
  }

  private sendSubscribe(st: ChanState): void {
    const id = this.takeId();
    const channel = st.sub.channel;
    st.sent = true;
    const r: Request = {
      frame: { id, subscribe: { channel, from: resumeFrom(st) } },
      resolve: () => {},
      reject: (e) => {
        const c = e instanceof CorralError ? e : new CorralError(CloseCode.Internal, e.message);
        this.refuse(channel, c.code, c.text);
      },
      retry: false, // a subscription goes into the next Hello instead
    };
    this.pending.set(id, r);
    this.send(r.frame);
  }

  // Frames.

  private handle(f: ServerFrame): void {
    if (!this.welcomed) {
      if (f.welcome) {
        this.welcome(f.welcome);
        return;
      }
      if ((f.error && f.id === 0 && !f.error.channel) || f.goAway) this.said = saidOf(f);
      return;
    }
    // A reply carries the id of its request; a server's Ping carries an id
    // of the server's own (echoed in the Pong), never a reply.
    const reply = f.subscribed || f.published || f.pong || f.error;
    if (f.id > 1 && reply) {
      const r = this.pending.get(f.id);
      if (r) {
        this.pending.delete(f.id);
        if (f.subscribed) this.onSubscribed(f.subscribed, false);
        if (f.error) {
          if (f.error.channel && !r.frame.subscribe) this.refuse(f.error.channel, f.error.code, f.error.text);
          r.reject(new CorralError(f.error.code, f.error.text, f.error.retryAfterMs, f.error.retryWithinMs));
        } else r.resolve(f);
        return;
      }
    }
    if (f.message) this.onMessage(f.message);
    else if (f.subscribed) this.onSubscribed(f.subscribed, true);
    else if (f.gap) this.onGap(f.gap);
    else if (f.ping) this.send({ id: f.id, pong: { payload: f.ping.payload } });
    else if (f.goAway) this.said = saidOf(f);
    else if (f.error) {
      if (f.error.channel) this.refuse(f.error.channel, f.error.code, f.error.text);
      else if (f.id === 0) this.said = saidOf(f);
    } else if (f.unsubscribed && f.id === 0 && this.subs.get(f.unsubscribed.channel)) {
      // The server ended the subscription (an answer to our Unsubscribe has its id).
      const channel = f.unsubscribed.channel;
      this.refuse(channel, CloseCode.Normal, f.unsubscribed.reason || "ended by the server");
    }
  }

  private welcome(w: Welcome): void {
    this.welcomed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.retry = this.schedule(w.hints?.reconnectBaseMs ?? 0, w.hints?.reconnectCapMs ?? 0);
    this.sessionId = w.sessionId;
    this.lastHeard = Date.now();
    const ping = w.hints?.pingIntervalMs ?? 0;
    if (ping > 0) {
      // A server that says nothing for two ping intervals is gone.
      this.liveness = setInterval(() => {
        if (Date.now() - this.lastHeard > 2 * ping) this.abort(CloseCode.Abnormal, "no frame from the server for two ping intervals");
      }, ping);
    }
    this.setState("connected");
    this.emit("connected", { url: this.url, sessionId: w.sessionId, nodeId: w.nodeId, welcome: w });
    for (const st of this.subs.values()) if (!st.sent) this.sendSubscribe(st);
    const queued = this.queue;
    this.queue = [];
    for (const r of queued) this.sendRequest(r);
  }

  /**
   * schedule returns the reconnect schedule for the session a Welcome just
   * started: the configured policy, with the base and cap the server
   * advertised (hints.reconnect_base_ms, reconnect_cap_ms) in place of the
   * client's when set, the cap raised to the base if below it.
   */
  private schedule(baseMs: number, capMs: number): Backoff {
    const own = this.opts.backoff ?? {};
    if (!(baseMs > 0) && !(capMs > 0)) return new Backoff(own, this.random);
    const r = resolveBackoff(own);
    const base = baseMs > 0 ? baseMs : r.baseMs;
    const cap = Math.max(capMs > 0 ? capMs : r.capMs, base);
    try {
      return new Backoff({ ...own, baseMs: base, capMs: cap }, this.random);
    } catch {
      return new Backoff(own, this.random); // the client's own options were checked in the constructor
    }
  }

  private onSubscribed(s: Subscribed, inHello: boolean): void {
    const st = this.subs.get(s.channel);
    if (!st) return;
    const first = !st.confirmed;
    st.confirmed = true;
    if (s.resumed && !s.recovered) {
      // The hole cannot be filled: surface it once and go on from the
      // server's position, so that the next resume does not report it again.
      const from = resumeFrom(st);
      const sameEpoch = from !== undefined && from.epoch === s.position.epoch;
      const gap: GapEvent = {
        channel: s.channel,
        reason: "resume",
        epoch: from?.epoch ?? "",
        fromOffset: (from?.offset ?? 0) + 1,
        toOffset: sameEpoch ? s.position.offset : 0,
        position: { ...s.position },
      };
      st.epoch = s.position.epoch;
      st.received = s.position.offset;
      st.unacked = [];
      this.fireGap(st, gap);
    } else if (!s.resumed) {
      st.epoch = s.position.epoch;
      st.received = s.position.offset;
      st.unacked = [];
    }
    if (first) st.sub.settle.resolve(s);
    if (inHello && s.resumed) {
      const e: ResumedEvent = { channel: s.channel, recovered: s.recovered, position: { ...s.position } };
      st.sub.fire("resumed", e);
      this.emit("resumed", e);
    }
  }

  private fireGap(st: ChanState, gap: GapEvent): void {
    st.sub.fire("gap", gap);
    this.emit("gap", gap);
  }

  private onGap(g: GapFrame): void {
    const st = this.subs.get(g.channel);
    if (!st) return;
    this.fireGap(st, {
      channel: g.channel,
      reason: g.reason || "gap",
      epoch: g.epoch,
      fromOffset: g.fromOffset,
      toOffset: g.toOffset,
      position: { epoch: g.epoch, offset: g.toOffset },
    });
  }

  private refuse(channel: string, code: number, text: string): void {
    const st = this.subs.get(channel);
    if (!st) return;
    this.subs.delete(channel);
    st.sub.settle.reject(new CorralError(code, text));
    const e: RefusedEvent = { channel, code, text };
    st.sub.fire("refused", e);
    this.emit("refused", e);
  }

  private onMessage(m: MessageFrame): void {
    const st = this.subs.get(m.channel);
    if (!st) return;
    if (m.epoch === st.epoch && m.offset <= st.received) {
      // Already delivered: an unacknowledged P0 message a resume sent
      // again, or an overlap of recovered and live messages.
      this.dups++;
      return;
    }
    if (m.epoch !== st.epoch) {
      st.epoch = m.epoch;
      st.unacked = [];
    }
    st.received = m.offset;
    const p0 = m.priority === 0;
    const manual = !!this.opts.manualAck;
    if (p0 && manual) st.unacked.push(m.offset);
    if (p0 && !manual) this.send({ id: 0, ack: { channel: m.channel, epoch: m.epoch, offset: m.offset } });
    const msg: Message = {
      channel: m.channel,
      epoch: m.epoch,
      offset: m.offset,
      priority: m.priority,
      data: m.data,
      timeUnixMs: m.timeUnixMs,
      text: () => utf8.decode(m.data),
      ack: () => {
        if (p0 && manual) this.ack(m.channel, m.epoch, m.offset);
      },
    };
    st.sub.fire("message", msg);
    this.emit("message", msg);
  }

  // Ends.

  /**
   * ended handles the end of an attempt or a session: the close code and
   * reason the browser reports (1006 when the connection was cut), or those
   * the server announced before (GoAway, Error), which win. Of the close
   * reason's hint and the announced one the larger wins with its own window
   * (the close reason's on a tie, as the Go client reads it).
   */
  private ended(code: number, reason: string, local: boolean): void {
    const ws = this.ws;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      this.ws = undefined;
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    clearInterval(this.liveness);
    this.liveness = undefined;
    if (this.st === "closed") return;
    this.welcomed = false;
    for (const r of this.pending.values()) {
      if (r.retry) this.queue.push(r);
    }
    this.pending.clear();
    for (const st of this.subs.values()) st.sent = false;

    let { retryAfterMs, retryWithinMs, text } = local ? { retryAfterMs: 0, retryWithinMs: 0, text: reason } : parseReason(reason);
    if (this.said) {
      code = this.said.code;
      if (this.said.retryAfterMs > retryAfterMs) ({ retryAfterMs, retryWithinMs } = this.said);
      if (!text) text = this.said.text;
    }
    const name = closeName(code);
    const full = name && text ? `${name}: ${text}` : name || text;
    // Only a close the server sent can be terminal; a cut never is.
    const terminal = !local && !retryable(code);
    if (code === CloseCode.ResumeImpossible) this.dropPositions();
    if (terminal) {
      this.emit("disconnected", { url: this.url, code, reason: full, retryAfterMs, retryWithinMs, willRetry: false });
      this.stop(new CorralError(code, text, retryAfterMs, retryWithinMs));
      return;
    }
    this.retry.hint(retryAfterMs, retryWithinMs);
    const d = Math.min(this.retry.next(), 0x7fffffff);
    const nextRetryAt = Date.now() + d;
    this.setState("disconnected");
    this.emit("disconnected", { url: this.url, code, reason: full, retryAfterMs, retryWithinMs, willRetry: true, retryInMs: d, nextRetryAt });
    if (this.st !== "disconnected") return; // a listener closed the client
    this.timer = setTimeout(() => this.attempt(), d);
  }

  /** dropPositions forgets every resume position (close 4006), surfacing a gap per channel. */
  private dropPositions(): void {
    for (const st of this.subs.values()) {
      const from = resumeFrom(st);
      if (!from) continue;
      st.epoch = "";
      st.received = 0;
      st.unacked = [];
      this.fireGap(st, {
        channel: st.sub.channel,
        reason: "resume impossible",
        epoch: from.epoch,
        fromOffset: from.offset + 1,
        toOffset: 0,
        position: { epoch: "", offset: 0 },
      });
    }
  }

  private stop(err: CorralError | undefined): void {
    const ws = this.ws;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
      this.ws = undefined;
      try {
        ws.close(1000);
      } catch {
        // already closing
      }
    }
    clearTimeout(this.timer);
    clearInterval(this.liveness);
    this.timer = this.liveness = undefined;
    this.setState("closed");
    const why = err ?? new ClosedError();
    for (const r of [...this.queue, ...this.pending.values()]) r.reject(why);
    this.queue = [];
    this.pending.clear();
    for (const st of this.subs.values()) if (!st.confirmed) st.sub.settle.reject(why);
    this.emit("closed", { error: err });
  }
}

function randomId(random: () => number): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (c?.randomUUID) return c.randomUUID();
  let s = "";
  for (let i = 0; i < 4; i++) s += Math.floor(random() * 0x100000000).toString(16).padStart(8, "0");
  return s;
}
