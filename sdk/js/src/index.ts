// @corralhq/corral: the browser SDK of corral. See README.md.
export {
  Client,
  Subscription,
  CorralError,
  ClosedError,
  VERSION,
  type ClientOptions,
  type ClientEvents,
  type SubscriptionEvents,
  type State,
  type StateEvent,
  type Message,
  type GapEvent,
  type ConnectingEvent,
  type ConnectedEvent,
  type DisconnectedEvent,
  type ResumedEvent,
  type RefusedEvent,
  type ClosedEvent,
  type WebSocketLike,
  type WebSocketConstructor,
} from "./client.js";
export { Backoff, Policy, resolveBackoff, policyNames, type BackoffOptions, type PolicyName } from "./backoff.js";
export { CloseCode, closeName, retryable, parseReason } from "./close.js";
export { subprotocol, encodeClientFrame, decodeServerFrame, encodeServerFrame, decodeClientFrame, type Format } from "./codec.js";
export { DecodeError, type Position, type Priority, type ClientFrame, type ServerFrame, type Subscribed, type Published, type Welcome, type ServerHints } from "./frames.js";
