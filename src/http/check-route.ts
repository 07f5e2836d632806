/**
 * POST /check: the decision service. A caller holding the token names rules (or an ad-hoc limit)
 * and a key; the answer is the limiter's decision as JSON, with the rate-limit headers.
 */
import type { Context } from "hono";
import type { Env } from "../env";
import type { Decision, MultiDecision } from "../limiter/types";
import { authorizedCheck } from "./authorized-check";
import { rateLimitHeaders } from "./rate-limit-headers";

/** POST /check (README "The /check contract"). */
export async function checkHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedCheck(c);
  if (!authorized.ok) return authorized.response;
  const { runtime, check } = authorized;
  const decided = await runtime.limiter.limitAll(
    check.requests,
    check.requestId !== undefined ? { requestId: check.requestId } : {},
  );
  return c.json(
    checkAnswer(decided, check.multi),
    decided.allowed ? 200 : 429,
    Object.fromEntries(
      rateLimitHeaders(decided.decisions, { legacy: runtime.config.legacyHeaders }),
    ),
  );
}

/**
 * The JSON answer. The top-level limit/remaining/reset/retryAfterMs/source/policy are the binding
 * policy's: the one that denied with the longest wait, or when allowed the one with the least
 * remaining. A `"rules"` check also lists every policy's decision, in the order named.
 */
function checkAnswer(decided: MultiDecision, multi: boolean) {
  const binding =
    decided.decisions.find((d) => d.policy === decided.deniedBy) ??
    decided.decisions.reduce((least, d) => (d.remaining < least.remaining ? d : least));
  const { limit, remaining, reset, retryAfterMs, source, policy, algorithm } = binding as Decision;
  return {
    allowed: decided.allowed,
    limit,
    remaining,
    reset,
    retryAfterMs: decided.allowed ? 0 : retryAfterMs,
    source,
    policy,
    algorithm,
    ...(decided.deniedBy !== undefined ? { deniedBy: decided.deniedBy } : {}),
    ...(decided.replayed ? { replayed: true } : {}),
    ...(multi ? { decisions: decided.decisions.map(decisionAnswer) } : {}),
  };
}

function decisionAnswer(decision: Decision) {
  const { policy, algorithm, allowed, limit, remaining, reset, retryAfterMs, source } = decision;
  return { policy, algorithm, allowed, limit, remaining, reset, retryAfterMs, source };
}
