/** The rate-limit response headers, built from decisions (every surface sets them here). */
import type { Decision } from "../limiter/types";

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
 */
export function rateLimitHeaders(
  decisions: readonly HeaderDecision[],
  options: { legacy?: boolean } = {},
): Headers {
  const headers = new Headers();
  if (decisions.length === 0) return headers;
  headers.set(
    "RateLimit-Policy",
    decisions.map((d) => `"${d.policy}";q=${d.limit};w=${seconds(d.windowMs)}`).join(", "),
  );
  headers.set(
    "RateLimit",
    decisions
      .map((d) => `"${d.policy}";r=${d.remaining};t=${seconds(d.resetAfterMs, 0)}`)
      .join(", "),
  );
  const denied = decisions.filter((d) => !d.allowed);
  if (denied.length > 0) {
    const wait = Math.max(...denied.map((d) => d.retryAfterMs));
    headers.set("Retry-After", String(seconds(wait)));
  }
  if (options.legacy) {
    // The most restrictive policy speaks for the legacy single-valued headers.
    const tightest = [...decisions].sort((a, b) => a.remaining - b.remaining)[0] as HeaderDecision;
    headers.set("X-RateLimit-Limit", String(tightest.limit));
    headers.set("X-RateLimit-Remaining", String(tightest.remaining));
    headers.set("X-RateLimit-Reset", String(Math.ceil(tightest.reset / 1000)));
  }
  return headers;
}

/** Whole seconds, rounded up, at least `min`. */
function seconds(ms: number, min = 1): number {
  return Math.max(min, Math.ceil(ms / 1000));
}
