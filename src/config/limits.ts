/** Documented bounds of what a check may ask for (docs/check-api.md "Limits"). */
// The client key's bound is the limiter's too (it digests longer keys): one number, one file.
export { MAX_KEY_LENGTH } from "../bounded-key";
// The caps on what one request may make Redis store and do live with the store, which enforces
// them before calling Redis; they are part of the documented bounds, so they are re-exported here.
// The window bounds and the policy names are the store's too (the limiter refuses the same).
export {
  boundsIssue,
  limitRange,
  MAX_LIMIT,
  MAX_LOG_COST,
  MAX_LOG_LIMIT,
  MAX_RING_COST,
  MAX_WINDOW_MS,
  MAX_ZSET_COST,
  MAX_ZSET_LIMIT,
  MIN_WINDOW_MS,
  maxLimitOf,
} from "../store/caps";
export { POLICY_NAME } from "../store/keys";

/**
 * Ad-hoc checks (`limit` + `window` in a /check body) use the policy `check.<window>ms`: one log
 * per client key and window, so two windows never trim each other's log. Rule names may not
 * start with it, so an ad-hoc check never shares a rule's log.
 */
export const ADHOC_POLICY_PREFIX = "check.";

/**
 * A request id (Idempotency-Key, cf-ray, /check "requestId") is part of a Redis key: bounded. A
 * longer header value is not used as an id (the request is counted as if it had none).
 */
export const MAX_REQUEST_ID_LENGTH = 256;
