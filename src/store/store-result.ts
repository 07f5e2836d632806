/** What the store answers for one policy of one evaluation; the limiter turns it into a decision. */
export interface StoreResult {
  allowed: boolean;
  remaining: number;
  /**
   * Store-clock ms when capacity next frees: when allowed, when the next unit frees (the window's
   * end for fixed-window; `now` when nothing is in use); when denied, when this cost fits.
   */
  reset: number;
  /** ms from the store's `now` until a denied request of this cost could pass (0 when allowed). */
  retryAfterMs: number;
  /** The store's clock when it decided (ms). */
  now: number;
}

/** A reply the store cannot parse means the endpoint is not what we think: said loudly. */
export class StoreReplyError extends Error {
  override name = "StoreReplyError";
}
