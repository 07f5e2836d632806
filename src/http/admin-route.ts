/**
 * Peek at one key's quota without consuming it (a decision route: LIMITER_TOKEN), or reset it
 * (an admin route: LIMITER_ADMIN_TOKEN). The one place in http/ that reads the store directly (a quota's
 * state as stored, not a decision).
 */
import type { Context } from "hono";
import { boundedKey } from "../bounded-key";
import { ADHOC_POLICY_PREFIX } from "../config/limits";
import type { Env } from "../env";
import { DEFAULT_COST } from "../limiter/defaults";
import { planOf } from "../limiter/plan-changes";
import type { LimitRequest } from "../limiter/types";
import type { ReadyRuntime } from "../runtime";
import { DEFAULT_ALGORITHM, isLogAlgorithm } from "../store/algorithm";
import { storageKey } from "../store/keys";
import { peekQuota, resetQuota } from "../store/peek-reset";
import { regionForget } from "../store/region-lease";
import { withinDeadline } from "../store/script-runner";
import { authorizeCheck } from "./authorized-check";
import { problemResponse } from "./problem";
import { rateLimitHeaderRecord } from "./rate-limit-headers";
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
  const { runtime, limitRequest } = authorized;
  const algorithm = limitRequest.algorithm ?? DEFAULT_ALGORITHM;
  if (!isLogAlgorithm(algorithm)) {
    // The O(1) algorithms' state is a counter or a time, readable only by re-running their
    // arithmetic; an approximate answer is worse than none for an admin tool. Say so.
    return problemResponse(400, {
      title: "Bad Request",
      detail: `peek supports the sliding logs only (sliding-log, sliding-log-zset); this check uses "${algorithm}"`,
      field: limitRequest.policy.startsWith(ADHOC_POLICY_PREFIX) ? "algorithm" : "rule",
    });
  }
  try {
    // A rule with overrides: the key's own limit, or its block (docs/plans.md).
    const plan = limitRequest.overrides
      ? await planOf(runtime.store, {
          prefix: runtime.config.prefix,
          clock: runtime.config.clock,
          policy: limitRequest.policy,
          key: limitRequest.key,
        })
      : undefined;
    const limit = plan?.limit ?? limitRequest.limit;
    const cost = limitRequest.cost ?? DEFAULT_COST;
    if (plan?.blockedUntil !== undefined || cost > limit) {
      const blocked = plan?.blockedUntil !== undefined;
      return c.json({
        allowed: false,
        limit,
        remaining: 0,
        reset: blocked ? (plan?.blockedUntil ?? 0) : Date.now() + limitRequest.windowMs,
        retryAfterMs: blocked ? 0 : limitRequest.windowMs,
        source: blocked ? "block" : "redis",
        policy: limitRequest.policy,
        algorithm,
        ...(blocked ? { blocked: true } : {}),
      });
    }
    const quota = await peekQuota(runtime.store, {
      prefix: runtime.config.prefix,
      policy: limitRequest.policy,
      // As the limiter counts it (a key spelling a digest is digested: bounded-key.ts).
      key: await boundedKey(limitRequest.key),
      limit,
      windowMs: limitRequest.windowMs,
      cost,
      ...(runtime.config.clock === "caller" ? { now: Date.now() } : {}),
    });
    const decision = {
      ...quota,
      limit,
      policy: limitRequest.policy,
      windowMs: limitRequest.windowMs,
      resetAfterMs: Math.max(0, quota.reset - quota.now),
      source: "redis" as const,
      algorithm,
    };
    const { allowed, remaining, reset, retryAfterMs, policy, source } = decision;
    // The headers as /check spells them (a record: Headers would lower-case the names).
    return c.json(
      { allowed, limit, remaining, reset, retryAfterMs, source, policy, algorithm },
      200,
      rateLimitHeaderRecord([{ ...decision, allowed: true }], false),
    );
  } catch (error) {
    return storeUnavailable(error);
  }
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
    const existed = await resetQuota(runtime.store, {
      prefix: runtime.config.prefix,
      policy: limitRequest.policy,
      // As the limiter counts it (a key spelling a digest is digested: bounded-key.ts).
      key: await boundedKey(limitRequest.key),
      algorithm: limitRequest.algorithm ?? DEFAULT_ALGORITHM,
    });
    // This isolate may still remember the key as exhausted; forget it. Other isolates keep a
    // cached denial until it would have expired anyway (at most the Retry-After they
    // announced): documented in docs/check-api.md.
    runtime.limiter.forget(limitRequest);
    // The regions' leases of the key and their held denials go too (docs/regions.md). A region
    // that does not answer keeps them until they end (at most 0.9 of a lease's life).
    if (runtime.regionStores.length > 0) {
      const redisKey = storageKey(
        runtime.config.prefix,
        limitRequest.policy,
        await boundedKey(limitRequest.key),
        limitRequest.algorithm ?? DEFAULT_ALGORITHM,
      );
      const forgotten = await Promise.allSettled(
        runtime.regionStores.map((store) =>
          withinDeadline(store, runtime.config.timeoutMs, (client) =>
            regionForget(client, redisKey),
          ),
        ),
      );
      for (const outcome of forgotten) {
        if (outcome.status === "rejected") {
          console.error(
            JSON.stringify({ event: "region-reset-failed", error: String(outcome.reason) }),
          );
        }
      }
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
  return { ok: true, runtime: authorized.runtime, limitRequest };
}

/** 503 for an admin route whose store did not answer (logged once, with the error). */
export function storeUnavailable(error: unknown): Response {
  console.error(JSON.stringify({ event: "admin-store-error", error: String(error) }));
  return problemResponse(503, { title: "Store unavailable", detail: "the store did not answer" });
}
