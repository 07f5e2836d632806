/**
 * A store limiter's settle, reported: settle-receipt.ts settles, and what it charged goes to the
 * `onSettle` hook (metrics: the analytics' units charged and top spenders), each usage rule with
 * its client key from the receipt's own record. Apart from the settle itself, which only says
 * which rules it charged and by how much.
 */
import type { LimiterContext } from "./context";
import type { Limiter } from "./limiter-api";
import type { StoreLimiterOptions } from "./limiter-options";
import type { CountedReceipt } from "./receipt-state";
import { settleReceipt } from "./settle-receipt";
import type { SettledUsage, SettleOutcome } from "./types";

export function reportedSettle(
  ctx: LimiterContext,
  onSettle: StoreLimiterOptions["onSettle"],
): Limiter["settle"] {
  if (!onSettle) return (receipt, units) => settleReceipt(ctx, receipt, units);
  return async (receipt, units) => {
    const outcome = await settleReceipt(ctx, receipt, units);
    if (outcome.status === "settled") {
      try {
        const settled = chargesOf(receipt as CountedReceipt, outcome);
        if (settled.charges.length > 0) onSettle(settled);
      } catch {
        // A metrics hook must never turn a settle into an error.
      }
    }
    return outcome;
  };
}

/**
 * The settle's charges with their client keys. `policies` are the receipt's usage policies in
 * its order, so each is the next policy of that name in the receipt's record (a request may
 * name one policy twice, for two keys).
 */
function chargesOf(receipt: CountedReceipt, outcome: SettleOutcome): SettledUsage {
  const resolved = receipt.resolved;
  const charges: SettledUsage["charges"] = [];
  let from = 0;
  outcome.policies.forEach((policy, i) => {
    let j = from;
    while (j < resolved.length && resolved[j]?.name !== policy) j++;
    from = j + 1;
    const key = resolved[j]?.clientKey;
    const units = outcome.charged[i];
    if (key === undefined || typeof units !== "number" || units === 0) return;
    charges.push({ policy, key, units });
  });
  return { at: receipt.at, charges };
}
