/**
 * The rate-limit response headers: built from decisions (every surface sets them here), from a
 * request's outcome, and added to a passed response.
 */
import type { Decision } from "../limiter/types";
import { enforcedDecisions } from "../rules/decide";
import type { RulesOutcome } from "../rules/outcome";

/** What the headers read of a decision (a caller may build one by hand). */
export type HeaderDecision = Pick<
  Decision,
  | "allowed"
  | "limit"
  | "remaining"
  | "reset"
  | "resetAfterMs"
  | "retryAfterMs"
  | "policy"
  | "windowMs"
>;

/**
 * The IETF rate-limit headers (draft-ietf-httpapi-ratelimit-headers), one list item per policy:
 *   RateLimit-Policy: "api";q=100;w=60
 *   RateLimit: "api";r=42;t=17
 * plus Retry-After (whole seconds, rounded up: never earlier than capacity frees) on a denial.
 * Every surface (proxy, /check, middleware) sets its headers here and nowhere else.
 *
 * @example
 * ```ts
 * const decision = await limiter.limit({ policy: "api", key, limit: 100, windowMs: 60_000 });
 * const headers = rateLimitHeaders([decision]);
 * return new Response(null, { status: decision.allowed ? 204 : 429, headers });
 * ```
 */
export function rateLimitHeaders(
  decisions: readonly HeaderDecision[],
  options: { legacy?: boolean } = {},
): Headers {
  return new Headers(rateLimitHeaderRecord(decisions, options.legacy === true));
}

/**
 * The same headers as a plain object, for a Response built in one step (/check's answer): no
 * Headers object to build and copy again. An object, not name/value pairs: workerd reads an
 * object's properties directly, but walks pairs through the iterator protocol, each step a call
 * back into JS (the pairs made `new Response` a tenth of a /check decision's CPU).
 */
export function rateLimitHeaderRecord(
  decisions: readonly HeaderDecision[],
  legacy: boolean,
): Record<string, string> {
  if (decisions.length === 0) return {};
  let policy = "";
  let state = "";
  let wait = -1;
  for (const d of decisions) {
    const sep = policy === "" ? "" : ", ";
    policy += `${sep}"${d.policy}";q=${d.limit};w=${seconds(d.windowMs)}`;
    state += `${sep}"${d.policy}";r=${d.remaining};t=${seconds(d.resetAfterMs, 0)}`;
    if (!d.allowed && d.retryAfterMs > wait) wait = d.retryAfterMs;
  }
  const headers: Record<string, string> = { "RateLimit-Policy": policy, RateLimit: state };
  if (wait >= 0) headers["Retry-After"] = String(seconds(wait));
  if (legacy) {
    // The most restrictive policy speaks for the legacy single-valued headers (the first of
    // those with the least remaining, as a stable sort would pick).
    let tightest = decisions[0] as HeaderDecision;
    for (const d of decisions) if (d.remaining < tightest.remaining) tightest = d;
    headers["X-RateLimit-Limit"] = String(tightest.limit);
    headers["X-RateLimit-Remaining"] = String(tightest.remaining);
    headers["X-RateLimit-Reset"] = String(Math.ceil(tightest.reset / 1000));
  }
  return headers;
}

/** Whole seconds, rounded up, at least `min`. */
function seconds(ms: number, min = 1): number {
  return Math.max(min, Math.ceil(ms / 1000));
}

/** The rate-limit headers for an outcome (shared by the proxy and the middleware). */
export function outcomeHeaders(outcome: RulesOutcome, legacy: boolean): Record<string, string> {
  return rateLimitHeaderRecord(enforcedDecisions(outcome), legacy);
}

/**
 * The response with the rate-limit headers added. Always a new Response around the same body
 * stream (a fetch() response's headers are immutable): status, statusText and every header,
 * each Set-Cookie included, carry over; nothing is buffered.
 */
export function withRateLimitHeaders(
  response: Response,
  headers: Record<string, string>,
): Response {
  if (headers["RateLimit-Policy"] === undefined) return response;
  const out = new Response(response.body, response);
  for (const [name, value] of Object.entries(headers)) out.headers.set(name, value);
  return out;
}
