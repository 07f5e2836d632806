// Shared by the fault server (Node) and the tests that drive it (workerd): no runtime imports.

export type FaultMode =
  /** Relay to `target` (the bridge): a healthy store. */
  | "forward"
  /** Accept and never answer. */
  | "hang"
  /** Wait `delayMs`, then relay only if the client is still connected (a slow store). */
  | "delay-forward"
  /** Reset the TCP connection on every request. */
  | "reset"
  /** 500 with an Upstash-style JSON error. */
  | "error-500"
  /** 200 with a body that is not JSON. */
  | "garbage"
  /**
   * Relay at once (Redis runs the command), then hold the answer `delayMs` (a slow store whose
   * late answers have already counted).
   */
  | "late-answer"
  /**
   * Every request as "late-answer" except every fourth, which is answered at once: a store that
   * is slow, not dead.
   */
  | "mostly-late"
  /**
   * A store that wants deterministic scripts: a script (EVAL, EVAL_RO, or EVALSHA/EVALSHA_RO of
   * one this server has seen by text) runs with every TIME call refused with an error, so only a
   * call that reaches TIME fails; EVALSHA of a script this server has not seen by text is
   * answered NOSCRIPT. Everything else is relayed.
   */
  | "refuse-time";

export interface FaultStats {
  /** Requests received (store calls, counted at the network). */
  requests: number;
  /** Requests relayed to the bridge (they reached Redis). */
  forwarded: number;
  /** Delayed requests whose client had gone before the delay ended: never relayed. */
  dropped: number;
  /** Requests the client closed before an answer (aborts). */
  clientClosed: number;
  /** Requests not yet finished one way or another. */
  pending: number;
  /** "late-answer"/"mostly-late": requests Redis has answered (their answers may be held). */
  answered?: number;
  /** Script calls refused because they called TIME ("refuse-time"). */
  refusedTime?: number;
  /** Requests that carried these @upstash/redis headers, by lower-case name (when any did). */
  headers?: Record<string, number>;
}
