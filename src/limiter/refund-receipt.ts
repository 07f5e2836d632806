/**
 * The limiter's refund: give back what an admitted request consumed, from its receipt (all its
 * policies or the named ones), and stop this isolate denying from claims the refund makes false.
 */
import { settleGateKey } from "../store/keys";
import { refund } from "../store/refund";
import { takeRefundGate } from "../store/refund-gate";
import { withinDeadline } from "../store/script-runner";
import { capacityFreed, type LimiterContext } from "./context";
import type { CountedReceipt } from "./receipt-state";
import type { ResolvedPolicy } from "./resolved-policy";
import { isUsagePolicy } from "./settle-receipt";
import type { RefundOutcome } from "./types";

/** A usage policy that keeps a count (a window or period), not an entry per request. */
const countedUsage = (policy: ResolvedPolicy) =>
  isUsagePolicy(policy) && policy.algorithm !== "sliding-log-weighted";

export async function refundReceipt(
  ctx: LimiterContext,
  receipt: CountedReceipt,
  only: readonly string[] | undefined,
): Promise<RefundOutcome> {
  const asked =
    only === undefined
      ? receipt.resolved
      : receipt.resolved.filter((policy) => only.includes(policy.name));
  if (asked.length === 0) return { refunded: false, units: [] };
  // A usage count is given back only if no settle came first (refund-gate.ts): the gate the
  // settle takes, beside the first such policy of the request (as settle.ts names it).
  let picked = asked;
  const gated = receipt.resolved.find(countedUsage);
  if (gated && asked.some(countedUsage) && ctx.breaker.state !== "open") {
    const gate = settleGateKey(gated.redisKey, receipt.memberId);
    let took: boolean;
    try {
      took = await withinDeadline(ctx.store, ctx.timeoutMs, (store) => takeRefundGate(store, gate));
    } catch (error) {
      ctx.onStoreError?.(error);
      return { refunded: false, units: [], error: String(error) };
    }
    if (!took) picked = asked.filter((policy) => !countedUsage(policy));
    if (picked.length === 0) return { refunded: false, units: asked.map(() => 0) };
  }
  // This isolate must not go on denying from a claim the refund just made false. (Other
  // isolates may, until their entry expires: at most the Retry-After they announced.) Again
  // when it ends: an answer that arrived in between may have been remembered.
  const forgetPicked = () =>
    capacityFreed(
      ctx,
      picked.map((policy) => policy.cacheKey),
    );
  forgetPicked();
  if (ctx.breaker.state === "open") return { refunded: false, units: [], error: "circuit open" };
  // The request-id record belongs to the whole set of policies: a partial refund leaves it,
  // so a retry within the window replays the original admission (and counts nowhere).
  const whole = picked.length === receipt.resolved.length;
  try {
    const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        refund(client, {
          policies: picked,
          memberId: receipt.memberId,
          at: receipt.at,
          now,
          requestId: whole ? receipt.requestId : undefined,
        }),
      ),
    );
    if (picked === asked) return answer;
    // Units per policy asked, 0 for a count a settle had taken first.
    const units = asked.map((policy) => answer.units[picked.indexOf(policy)] ?? 0);
    return { ...answer, units };
  } catch (error) {
    ctx.onStoreError?.(error);
    return { refunded: false, units: [], error: String(error) };
  } finally {
    forgetPicked();
  }
}
