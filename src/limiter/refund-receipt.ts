/**
 * The limiter's refund: give back what an admitted request consumed, from its receipt (all its
 * policies or the named ones), and stop this isolate denying from claims the refund makes false.
 */
import { refund, refundGateLife, requestGateKey } from "../store/refund";
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
  // Each policy gives back once, and a usage count only if no settle came first: the script
  // takes the request's gate, the one its settle takes (requestGateKey, both name it).
  const gateKey = requestGateKey(receipt.resolved, receipt.memberId);
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
    const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        refund(client, {
          policies: asked,
          memberId: receipt.memberId,
          at: receipt.at,
          now,
          requestId: whole ? receipt.requestId : undefined,
          gate:
            gateKey === undefined
              ? undefined
              : {
                  key: gateKey,
                  indices: asked.map((policy) => receipt.resolved.indexOf(policy)),
                  size: receipt.resolved.length,
                  lifeMs: refundGateLife(receipt.resolved),
                },
        }),
      ),
    );
    const outcome: RefundOutcome = { refunded: answer.refunded, units: answer.units };
    if (answer.again === true) outcome.alreadyRefunded = true;
    return outcome;
  } catch (error) {
    ctx.onStoreError?.(error);
    return { refunded: false, units: [], error: String(error) };
  } finally {
    forgetAsked();
  }
}
