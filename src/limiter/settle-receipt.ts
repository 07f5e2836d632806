/**
 * The limiter's settle: an admitted request's reservation in its usage rules (the weighted log,
 * sliding-log-weighted; a fixed window or a calendar period, `usage: true`) becomes what it
 * used, exactly once (store/settle.ts; the bound it keeps is argued in
 * store/lua/settle-driver.lua.ts and docs/usage.md).
 */
import { USAGE_ALGORITHMS } from "../store/algorithm";
import { MAX_USAGE_LIMIT } from "../store/caps";
import { withinDeadline } from "../store/script-runner";
import { settle } from "../store/settle";
import { capacityFreed, type LimiterContext } from "./context";
import type { CountedReceipt } from "./receipt-state";
import { type ResolvedPolicy, receiptIssue, withStorageKeys } from "./resolved-policy";
import type { RefundReceipt, SettleOutcome, SettleUnits } from "./types";

/** Why a usage is refused: the same words wherever it is given (settle, /check/settle). */
export const USAGE_RANGE = `must be an integer from 0 to ${MAX_USAGE_LIMIT}`;

/** Whether `units` is a usage a settle takes. */
export function isUsage(units: unknown): units is number {
  return (
    typeof units === "number" &&
    Number.isSafeInteger(units) &&
    units >= 0 &&
    units <= MAX_USAGE_LIMIT
  );
}

/** A policy a settle charges: the weighted log's, or a usage rule's on a window or a period. */
export function isUsagePolicy(policy: ResolvedPolicy): boolean {
  return (
    policy.algorithm === "sliding-log-weighted" ||
    (policy.usage === true && USAGE_ALGORITHMS.has(policy.algorithm))
  );
}

export async function settleReceipt(
  ctx: LimiterContext,
  receipt: RefundReceipt,
  units: SettleUnits,
): Promise<SettleOutcome> {
  const failed = (error: string): SettleOutcome => ({
    status: "failed",
    policies: [],
    charged: [],
    error,
  });
  const perRule = typeof units === "object" && units !== null ? units : undefined;
  const bad = perRule
    ? Object.entries(perRule).find(([, used]) => !isUsage(used))
    : isUsage(units)
      ? undefined
      : ["", units];
  if (bad) return failed(`usage${bad[0] ? ` of ${JSON.stringify(bad[0])}` : ""} ${USAGE_RANGE}`);
  // A receipt that went out as /check's string comes back without Redis keys: this limiter's.
  const given = (receipt as Partial<CountedReceipt>).resolved;
  if (
    Array.isArray(given) &&
    given.every((p) => typeof p?.name === "string" && typeof p.clientKey === "string") &&
    given.some((p) => p.redisKey === "")
  ) {
    withStorageKeys(given, ctx.prefix);
  }
  const refused = receiptIssue(receipt, undefined);
  if (refused) return failed(String(refused));
  const counted = receipt as CountedReceipt;
  const picked = counted.resolved.flatMap((policy, i) =>
    isUsagePolicy(policy) && (!perRule || Object.hasOwn(perRule, policy.name)) ? [i] : [],
  );
  const usage = picked.map((i) => counted.resolved[i] as ResolvedPolicy);
  // A receipt comes back from a caller: an offset that is not one is none (the script bounds it).
  const offsets = picked.map((i) => {
    const offset = Array.isArray(counted.offsets) ? counted.offsets[i] : undefined;
    return Number.isSafeInteger(offset) ? (offset as number) : -1;
  });
  const policies = usage.map((policy) => policy.name);
  if (usage.length === 0) return { status: "unknown", policies, charged: [] };
  if (ctx.breaker.state === "open") return failed("circuit open");
  try {
    const used = usage.map((policy) =>
      perRule ? (perRule[policy.name] as number) : (units as number),
    );
    // On the clock the admission was decided on, as a refund: a window or a period is charged
    // only while it runs.
    const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        settle(client, {
          policies: usage,
          memberId: counted.memberId,
          at: counted.at,
          units: used,
          offsets,
          request: counted.resolved,
          now,
        }),
      ),
    );
    // Units given back free capacity this isolate may be denying from (as a refund's do).
    if (answer.charged.some((units) => units < 0)) {
      capacityFreed(
        ctx,
        usage.map((policy) => policy.cacheKey),
      );
    }
    return { status: answer.status, policies, charged: answer.charged };
  } catch (error) {
    ctx.onStoreError?.(error);
    return { ...failed(String(error)), policies };
  }
}
