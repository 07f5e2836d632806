/**
 * Peek at one key's quota without consuming it (a decision route: LIMITER_TOKEN), or reset it
 * (an admin route: LIMITER_ADMIN_TOKEN): HTTP over the limiter's `peek` and `reset`.
 */

import type { LimitRequest, Peek } from "edge-limiter";
import { describeStoreError, problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import { authorizeCheck } from "./authorized-check";
import type { Env } from "./env";
import type { ReadyRuntime } from "./runtime";
import type { TokenScope } from "./token-scope";

/**
 * POST /check/peek: what a request of this body would get now — allowed, limit, remaining,
 * reset, retryAfterMs — without consuming anything. Same body, token and validation as /check
 * (a look at the quota a decision would consult: it changes nothing, so the decision token).
 * Always 200: the answer is about the quota, not a refusal of this call.
 */
export async function peekHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedSingleCheck(c, "decision");
  if (!authorized.ok) return authorized.response;
  const { runtime, limitRequest, named } = authorized;
  let peek: Peek;
  try {
    peek = await runtime.limiter.peek(limitRequest);
  } catch (error) {
    return storeUnavailable(error);
  }
  if (!peek.peeked) {
    // An approximate answer is worse than none for an admin tool: the limiter says so.
    return problemResponse(400, {
      title: "Bad Request",
      detail: peek.detail,
      field: named ? "rule" : "algorithm",
    });
  }
  const { allowed, limit, remaining, reset, retryAfterMs, source, policy, algorithm } = peek;
  const body = { allowed, limit, remaining, reset, retryAfterMs, source, policy, algorithm };
  // A block, or an override below the cost: nothing was read, so no headers.
  // (A parsed check always carries its cost: the rule's, the body's, or 1.)
  if (peek.blocked || (limitRequest.cost ?? 1) > limit) {
    return c.json({ ...body, ...(peek.blocked ? { blocked: true } : {}) });
  }
  // The headers as /check spells them (a record: Headers would lower-case the names).
  return c.json(body, 200, runtime.rules.headers([{ ...peek, allowed: true }]));
}

/**
 * POST /check/reset: forget the key's log for that rule (or ad-hoc window); 200 either way. The
 * admin token: a reset hands a client back its whole quota.
 */
export async function resetHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedSingleCheck(c, "admin");
  if (!authorized.ok) return authorized.response;
  const { runtime, limitRequest } = authorized;
  try {
    const { existed, regionsFailed } = await runtime.limiter.reset(limitRequest);
    // A region that did not answer keeps the key's leases until they end (docs/regions.md).
    for (const { error } of regionsFailed) {
      console.error(JSON.stringify({ event: "region-reset-failed", error: String(error) }));
    }
    return c.json({ reset: true, existed, policy: limitRequest.policy }, 200);
  } catch (error) {
    return storeUnavailable(error);
  }
}

/** The shared /check preamble, for one policy: a `"rules"` body is refused (400). */
async function authorizedSingleCheck(
  c: Context<{ Bindings: Env }>,
  scope: TokenScope,
): Promise<
  | {
      ok: true;
      runtime: ReadyRuntime;
      limitRequest: LimitRequest;
      /** The body named a configured rule (else an ad-hoc limit). */
      named: boolean;
    }
  | { ok: false; response: Response }
> {
  const authorized = await authorizeCheck(c.req.raw, c.env, scope);
  if (!authorized.ok) return authorized;
  const [limitRequest] = authorized.check.requests;
  if (authorized.check.multi || !limitRequest) {
    return {
      ok: false,
      response: problemResponse(400, {
        title: "Bad Request",
        detail: 'peek and reset take one "rule" (or an ad-hoc limit), not "rules"',
        field: "rules",
      }),
    };
  }
  return { ok: true, runtime: authorized.runtime, limitRequest, named: authorized.check.named };
}

/** 503 for an admin route whose store did not answer (logged once, with the error). */
export function storeUnavailable(error: unknown): Response {
  const { cause, detail } = describeStoreError(error);
  console.error(JSON.stringify({ event: "admin-store-error", cause, error: String(error) }));
  // The cause, not the error's text (it may quote the request): a wrong token is named so.
  return problemResponse(503, { title: "Store unavailable", detail, cause });
}
