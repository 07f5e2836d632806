/**
 * `limiter.reset`: forget one key's count and the request ids decided on it (store/peek-reset.ts
 * resetQuota), everywhere this limiter knows of it: home's log, this isolate's memory of the key
 * (its cached denial, block and leases: answer-memory.ts), and every region's leases of it and
 * their held denials (docs/regions.md). Other isolates keep a cached denial until it would have
 * expired anyway (at most the Retry-After they announced): docs/check-api.md.
 */
import { boundedKey } from "../bounded-key";
import { DEFAULT_ALGORITHM } from "../store/algorithm";
import { storageKey } from "../store/keys";
import { resetQuota } from "../store/peek-reset";
import { regionForget } from "../store/region-lease";
import { type ScriptClient, withinDeadline } from "../store/script-runner";
import type { LimiterContext } from "./context";
import { resolvePolicies } from "./resolved-policy";
import type { LimitRequest } from "./types";

/**
 * What `reset` takes: the key, and what its cached denial is remembered under. A calendar
 * policy's `period` too: its bounds are checked as `limit` checks them, which requires it.
 */
export type ResetRequest = Pick<
  LimitRequest,
  "policy" | "key" | "limit" | "windowMs" | "algorithm" | "period"
>;

export interface ResetOutcome {
  /** The key had a count at home. */
  existed: boolean;
  /**
   * Regions that did not answer: they keep the key's leases and held denials until those end
   * (at most 0.9 of a lease's life). Empty without regions.
   */
  regionsFailed: { region: string; error: unknown }[];
}

export async function resetKey(
  ctx: LimiterContext,
  request: ResetRequest,
  forget: (request: ResetRequest) => void,
  regions: Readonly<Record<string, ScriptClient>> | undefined,
): Promise<ResetOutcome> {
  // As the limiter counts it (a key spelling a digest is digested: bounded-key.ts).
  const key = await boundedKey(request?.key);
  // Checked as `limit` checks a request (PolicyBoundsError): no key outside the bounds is built.
  resolvePolicies("reset", [{ ...request, key }], ctx.defaultFailMode);
  const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
  const existed = await resetQuota(ctx.store, {
    prefix: ctx.prefix,
    policy: request.policy,
    key,
    algorithm,
  });
  // This isolate may still remember the key as exhausted: it forgets it.
  forget(request);
  const regionsFailed: ResetOutcome["regionsFailed"] = [];
  const named = Object.entries(regions ?? {});
  if (named.length > 0) {
    const redisKey = storageKey(ctx.prefix, request.policy, key, algorithm);
    const forgotten = await Promise.allSettled(
      named.map(([, store]) =>
        withinDeadline(store, ctx.timeoutMs, (client) => regionForget(client, redisKey)),
      ),
    );
    forgotten.forEach((outcome, i) => {
      if (outcome.status === "rejected") {
        regionsFailed.push({
          region: (named[i] as [string, ScriptClient])[0],
          error: outcome.reason,
        });
      }
    });
  }
  return { existed, regionsFailed };
}
