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
  | "garbage";

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
}
