/**
 * Which bearer token a /check route takes. LIMITER_TOKEN decides (POST /check, /check/peek);
 * LIMITER_ADMIN_TOKEN changes or lists state (reset, override, block, unblock, plans, stats,
 * the dashboard) and decides too: admin ⊇ decision, so an operator needs one token, while a
 * service that only asks "may user X proceed?" cannot reset, override or unblock anyone.
 */

import { bearerTokenMatches } from "./bearer-token";
import { howToSet } from "./binding-hint";
import type { Env } from "./env";

/** "decision": /check and /check/peek; "admin": every route that changes or lists state. */
export type TokenScope = "decision" | "admin";

/** Why a call is refused: 401 (no valid token) or 403 (the decision token on an admin route). */
export interface TokenRefusal {
  status: 401 | 403;
  detail: string;
}

/**
 * undefined when `header` (an `Authorization: Bearer …` value) carries a token `scope` accepts;
 * otherwise why not. Each comparison is constant-time (bearer-token.ts). A second comparison
 * runs only when the first fails: how long a call takes says whether the caller sent the token
 * compared first, which the caller knows, never anything about either secret.
 */
export function tokenRefusal(
  header: string | undefined,
  env: Env,
  scope: TokenScope,
): TokenRefusal | undefined {
  const decision = env.LIMITER_TOKEN;
  const admin = env.LIMITER_ADMIN_TOKEN;
  if (scope === "decision") {
    // The decision token first: it is the one the hot path is called with.
    if (decision && bearerTokenMatches(header, decision)) return undefined;
    if (admin && bearerTokenMatches(header, admin)) return undefined;
    // Closed, never open by default: a decision service anyone can drain is a liability. 401
    // like any unauthenticated call (no credential can succeed, and clients handle one
    // status); the detail tells the operator why.
    return decision ? WRONG_TOKEN : DECISION_CLOSED;
  }
  // Unset, the admin routes are closed: the decision token never stands in for it.
  if (!admin) return ADMIN_CLOSED;
  if (bearerTokenMatches(header, admin)) return undefined;
  // A valid credential without the right: 403 (RFC 6750's insufficient_scope), naming the one
  // this route takes.
  if (decision && bearerTokenMatches(header, decision)) return DECISION_ON_ADMIN;
  return WRONG_ADMIN_TOKEN;
}

// One object each: nothing built per refused request.
const WRONG_TOKEN: TokenRefusal = Object.freeze({
  status: 401,
  detail: "missing or wrong bearer token",
});
const DECISION_CLOSED: TokenRefusal = Object.freeze({
  status: 401,
  detail: `LIMITER_TOKEN is not configured: /check is closed (${howToSet("LIMITER_TOKEN")})`,
});
const ADMIN_CLOSED: TokenRefusal = Object.freeze({
  status: 401,
  detail: `LIMITER_ADMIN_TOKEN is not configured: the admin routes are closed (${howToSet("LIMITER_ADMIN_TOKEN")})`,
});
const DECISION_ON_ADMIN: TokenRefusal = Object.freeze({
  status: 403,
  detail:
    "this is an admin route: send the LIMITER_ADMIN_TOKEN (the LIMITER_TOKEN is for /check and /check/peek only)",
});
const WRONG_ADMIN_TOKEN: TokenRefusal = Object.freeze({
  status: 401,
  detail: "missing or wrong bearer token: this admin route takes the LIMITER_ADMIN_TOKEN",
});
