/**
 * What a limited surface (the proxy, the middleware) answers a refused request with: 429
 * problem+json, 403 for a block, 400 for a missing key, 409 for a conflicting request id, each
 * with the rate-limit headers (rate-limit-headers.ts).
 */
import type { Context } from "hono";
import type { RequestIdConflict } from "../limiter/types";
import type { RequestBlock, RulesOutcome } from "../rules/outcome";
import { problemResponse } from "./problem";
import { outcomeHeaders } from "./rate-limit-headers";

// The request field a conflicting policy field is (in /check's body and in a rule alike).
const FIELD_NAMES: Record<RequestIdConflict["field"], string> = {
  algorithm: "algorithm",
  limit: "limit",
  windowMs: "window",
  cost: "cost",
};

/**
 * 409 for a request id already decided with other parameters (MultiDecision.conflict): nothing
 * was counted. Like an Idempotency-Key reused with another request body: an error, never a replay
 * (which would admit the other cost for free) nor a fresh decision (which would count a genuine
 * retry whose cost was recomputed twice). No rate-limit headers: nothing was decided.
 */
export function requestIdConflict(conflict: RequestIdConflict): Response {
  const field = FIELD_NAMES[conflict.field];
  return problemResponse(409, {
    title: "Conflict",
    detail:
      `the request id was decided with ${field} ${conflict.recorded} for "${conflict.policy}", ` +
      `this request has ${conflict.asked}: a retry must repeat the request, or use a new id`,
    field,
    policy: conflict.policy,
    recorded: conflict.recorded,
    asked: conflict.asked,
  });
}

/**
 * The answer when a request is refused: 429 problem+json naming the violated policies, with the
 * headers; 400 when a rule with `missingKey: "deny"` found no key material; 409 when its request
 * id was decided with other parameters (the rules changed since: nothing is counted).
 */
export function refusal(_c: Context | undefined, outcome: RulesOutcome, legacy: boolean): Response {
  if (outcome.conflict) return requestIdConflict(outcome.conflict);
  if (outcome.blocked) return blockedResponse(outcome.blocked);
  if (outcome.missingKey) {
    const { rule, reason } = outcome.missingKey;
    return problemResponse(400, {
      title: "Bad Request",
      detail: `rate limit "${rule}" found no client key: ${reason}`,
      policy: rule,
    });
  }
  const headers = outcomeHeaders(outcome, legacy);
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

/**
 * 403 for a blocked request (docs/plans.md), naming the block and the rule. No rate-limit
 * headers: nothing was counted, and waiting does not lift a block (unless it ends: then
 * Retry-After says when).
 */
function blockedResponse(block: RequestBlock): Response {
  const what =
    block.by === "key"
      ? "this client's key"
      : block.by === "ip"
        ? `address ${block.value}`
        : block.by === "country"
          ? `country ${block.value}`
          : `AS ${block.value}`;
  const until = block.until === undefined ? "" : ` until ${new Date(block.until).toISOString()}`;
  const headers: Record<string, string> = {};
  if (block.until !== undefined) {
    headers["Retry-After"] = String(Math.max(1, Math.ceil((block.until - Date.now()) / 1000)));
  }
  return problemResponse(
    403,
    {
      title: "Forbidden",
      detail: `${what} is blocked for rule "${block.rule}"${until}`,
      policy: block.rule,
      blocked: {
        by: block.by,
        ...(block.value !== undefined ? { value: block.value } : {}),
        ...(block.until !== undefined ? { until: block.until } : {}),
      },
    },
    headers,
  );
}
