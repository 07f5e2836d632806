/**
 * The limiter's refund: give back what an admitted request consumed, from its receipt (all its
 * policies or the named ones), and stop this isolate denying from claims the refund makes false.
 */
import { settleGateKey } from "../store/keys";
import { keepsUsageCount, refund } from "../store/refund";
import { withinDeadline } from "../store/script-runner";
import { capacityFreed, type LimiterContext } from "./context";
import type { CountedReceipt } from "./receipt-state";
import type { RefundOutcome } from "./types";

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
  // A usage count is given back only if no settle came first: the script takes the gate the
  // settle takes, beside the first such policy of the request (as settle.ts names it).
  const gated = receipt.resolved.find(keepsUsageCount);
  // This isolate must not go on denying from a claim the refund just made false. (Other
  // isolates may, until their entry expires: at most the Retry-After they announced.) Again
  // when it ends: an answer that arrived in between may have been remembered. A count a settle
  // had taken gives nothing back, and forgetting its claim only costs a store call.
  const forgetAsked = () =>
    capacityFreed(
      ctx,
      asked.map((policy) => policy.cacheKey),
    );
  forgetAsked();
  if (ctx.breaker.state === "open") return { refunded: false, units: [], error: "circuit open" };
  // The request-id record belongs to the whole set of policies: a partial refund leaves it,
  // so a retry within the window replays the original admission (and counts nowhere).
  const whole = asked.length === receipt.resolved.length;
  try {
    return await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        refund(client, {
          policies: asked,
          memberId: receipt.memberId,
          at: receipt.at,
          now,
          requestId: whole ? receipt.requestId : undefined,
          gateKey: gated ? settleGateKey(gated.redisKey, receipt.memberId) : undefined,
        }),
      ),
    );
  } catch (error) {
    ctx.onStoreError?.(error);
    return { refunded: false, units: [], error: String(error) };
  } finally {
    forgetAsked();
  }
}
