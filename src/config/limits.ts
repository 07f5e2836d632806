/** Documented bounds of what a check may ask for (docs/check-api.md "Limits"). */

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
