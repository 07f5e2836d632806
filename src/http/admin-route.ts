import type { Context } from "hono";
import type { Env } from "../env";
import { peekQuota, resetQuota } from "../store/quota";
import { authorizedCheckRequest } from "./check-route";
import { problem } from "./problem";
import { rateLimitHeaders } from "./rate-limit-headers";

/**
 * POST /check/peek: what a request of this body would get now — allowed, limit, remaining,
 * reset, retryAfterMs — without consuming anything. Same body, token and validation as /check.
 * Always 200: the answer is about the quota, not a refusal of this call.
 */
export async function peekHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const parsed = await authorizedCheckRequest(c);
  if (!parsed.ok) return parsed.response;
  const { runtime, request } = parsed;
  try {
    const result = await peekQuota(runtime.store, {
      prefix: runtime.config.prefix,
      policy: request.policy,
      key: request.key,
      limit: request.limit,
      windowMs: request.windowMs,
      cost: request.cost ?? 1,
      ...(runtime.config.clock === "caller" ? { now: Date.now() } : {}),
    });
    const decision = {
      ...result,
      limit: request.limit,
      policy: request.policy,
      windowMs: request.windowMs,
      resetAfterMs: Math.max(0, result.reset - result.now),
      source: "redis" as const,
    };
    const { allowed, limit, remaining, reset, retryAfterMs, policy } = decision;
    return c.json(
      { allowed, limit, remaining, reset, retryAfterMs, policy },
      200,
      Object.fromEntries(rateLimitHeaders([{ ...decision, allowed: true }])),
    );
  } catch (error) {
    return storeUnavailable(c, error);
  }
}

/** POST /check/reset: forget the key's log for that rule (or ad-hoc window); 200 either way. */
export async function resetHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const parsed = await authorizedCheckRequest(c);
  if (!parsed.ok) return parsed.response;
  const { runtime, request } = parsed;
  try {
    const existed = await resetQuota(runtime.store, {
      prefix: runtime.config.prefix,
      policy: request.policy,
      key: request.key,
    });
    // This isolate may still remember the key as exhausted; forget it (the limiter's cache key
    // spelling, src/limiter/limiter.ts). Other isolates keep a cached denial until it would
    // have expired anyway (at most the Retry-After they announced): documented in the README.
    runtime.denialCache.forget(
      `${request.policy}\n${request.limit}\n${request.windowMs}\n${request.key}`,
    );
    return c.json({ reset: true, existed, policy: request.policy }, 200);
  } catch (error) {
    return storeUnavailable(c, error);
  }
}

function storeUnavailable(c: Context, error: unknown): Response {
  console.error(JSON.stringify({ event: "admin-store-error", error: String(error) }));
  return problem(c, 503, { title: "Store unavailable", detail: "the store did not answer" });
}
