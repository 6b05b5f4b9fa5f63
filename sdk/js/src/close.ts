// close.ts: the close-code table of wire/README.md and the close reason
// format (retry_after_ms=<N> [retry_within_ms=<W>] <text>).

/** Close codes of the session protocol (WebSocket close codes; Error.code and GoAway.code use the same numbers). */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  ProtocolError: 1002,
  /** No close frame: the connection was cut (browsers report 1006). */
  Abnormal: 1006,
  InvalidPayload: 1007,
  PolicyViolation: 1008,
  TooBig: 1009,
  Internal: 1011,
  TryAgainLater: 1013,
  SlowConsumer: 4000,
  SubscriptionLimit: 4001,
  RateLimited: 4002,
  HandshakeTimeout: 4003,
  BadRequest: 4004,
  Forbidden: 4005,
  ResumeImpossible: 4006,
  SessionReplaced: 4007,
} as const;

const names: Record<number, string> = {
  1000: "normal",
  1001: "going away",
  1002: "protocol error",
  1006: "connection lost",
  1007: "invalid payload",
  1008: "policy violation",
  1009: "too big",
  1011: "internal error",
  1013: "try again later",
  4000: "slow consumer",
  4001: "subscription limit",
  4002: "rate limited",
  4003: "handshake timeout",
  4004: "bad request",
  4005: "forbidden",
  4006: "resume impossible",
  4007: "session replaced",
};

/** closeName returns the short name of a close code ("going away"), or "" for a code outside the table. */
export function closeName(code: number): string {
  return names[code] ?? "";
}

/**
 * retryable reports whether a client reconnects after a close with this code:
 * false for the codes a reconnect with the same input would hit again (policy,
 * malformed or oversized frames, bad requests, forbidden channels, the
 * subscription limit, a replaced session), true for every other code.
 */
export function retryable(code: number): boolean {
  switch (code) {
    case CloseCode.PolicyViolation:
    case CloseCode.ProtocolError:
    case CloseCode.InvalidPayload:
    case CloseCode.TooBig:
    case CloseCode.BadRequest:
    case CloseCode.Forbidden:
    case CloseCode.SubscriptionLimit:
    case CloseCode.SessionReplaced:
      return false;
  }
  return true;
}

/**
 * parseReason splits a close reason into its retry hint in milliseconds (0 when
 * there is none), its retry window (0 when there is none) and its text, as
 * wire.ParseReason does: a reason that does not start with "retry_after_ms="
 * and a positive number of at most 12 digits followed by a space or the end
 * is all text, with neither; a window is read only right after a hint, the
 * same way ("retry_within_ms=", a positive number of at most 12 digits, a
 * space or the end), else what follows the hint is all text.
 */
export function parseReason(reason: string): { retryAfterMs: number; retryWithinMs: number; text: string } {
  const hint = reasonField(reason, "retry_after_ms=");
  if (!hint) return { retryAfterMs: 0, retryWithinMs: 0, text: reason };
  const within = reasonField(hint.rest, "retry_within_ms=");
  if (!within) return { retryAfterMs: hint.ms, retryWithinMs: 0, text: hint.rest };
  return { retryAfterMs: hint.ms, retryWithinMs: within.ms, text: within.rest };
}

/**
 * reasonField reads key and a positive count of milliseconds (at most 12
 * digits) at the start of s, followed by a space or the end; rest is what
 * follows the space. undefined when s does not start so.
 */
function reasonField(s: string, key: string): { ms: number; rest: string } | undefined {
  if (!s.startsWith(key)) return undefined;
  const rest = s.slice(key.length);
  let end = 0;
  while (end < rest.length && rest[end] >= "0" && rest[end] <= "9") end++;
  if (end === 0 || end > 12 || (end < rest.length && rest[end] !== " ")) return undefined;
  const ms = Number(rest.slice(0, end));
  if (ms === 0) return undefined;
  return { ms, rest: rest.slice(end + 1) };
}
