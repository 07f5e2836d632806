/**
 * What a limited surface (the proxy, the middleware) answers: a passed response with the
 * rate-limit headers added, or the refusal (429 problem+json, 400 for a missing key).
 */
import type { Context } from "hono";
import { enforcedDecisions, type RulesOutcome } from "../rules/decide";
import { problemResponse } from "./problem";
import { rateLimitHeaders } from "./rate-limit-headers";

/** The rate-limit headers for an outcome (shared by the proxy and the middleware). */
export function outcomeHeaders(outcome: RulesOutcome, legacy: boolean): Headers {
  return rateLimitHeaders(enforcedDecisions(outcome), { legacy });
}

/**
 * The response with the rate-limit headers added. Always a new Response around the same body
 * stream (a fetch() response's headers are immutable): status, statusText and every header,
 * each Set-Cookie included, carry over; nothing is buffered.
 */
export function withRateLimitHeaders(response: Response, headers: Headers): Response {
  if (!headers.has("RateLimit-Policy")) return response;
  const out = new Response(response.body, response);
  for (const [name, value] of headers) out.headers.set(name, value);
  return out;
}

/**
 * The answer when a request is refused: 429 problem+json naming the violated policies, with the
 * headers; or 400 when a rule with `missingKey: "deny"` found no key material.
 */
export function refusal(_c: Context | undefined, outcome: RulesOutcome, legacy: boolean): Response {
  if (outcome.missingKey) {
    const { rule, reason } = outcome.missingKey;
    return problemResponse(400, {
      title: "Bad Request",
      detail: `rate limit "${rule}" found no client key: ${reason}`,
      policy: rule,
    });
  }
  const headers = Object.fromEntries(outcomeHeaders(outcome, legacy));
  const denied = outcome.decisions.filter((d) => outcome.violated.includes(d.policy));
  const retryAfterMs = Math.max(0, ...denied.map((d) => d.retryAfterMs));
  return problemResponse(
    429,
    {
      title: "Too Many Requests",
      detail: `rate limit exceeded: ${outcome.violated.map((p) => `"${p}"`).join(", ")}`,
      violated: outcome.violated,
      ...(outcome.deniedBy !== undefined ? { deniedBy: outcome.deniedBy } : {}),
      retryAfterMs,
    },
    headers,
  );
}
