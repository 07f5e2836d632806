/**
 * A sharded limiter's settle (docs/shards.md, docs/usage.md): the receipt settled on the shard
 * that admitted it, or each part on the shard that counted it, the outcomes put together.
 */
import type { Limiter } from "../limiter-api";
import type { CountedReceipt } from "../receipt-state";
import type { SettleOutcome, SettleUnits } from "../types";

type Part = NonNullable<CountedReceipt["parts"]>[number];

// The order an outcome of several parts takes: any failure, then any settled, then any already.
const RANK: Record<SettleOutcome["status"], number> = {
  failed: 3,
  settled: 2,
  "already-settled": 1,
  unknown: 0,
};

export async function settleParts(
  receipt: CountedReceipt,
  units: SettleUnits,
  limiterOf: (shard: string) => Limiter | undefined,
): Promise<SettleOutcome> {
  const parts = receipt.parts as readonly Part[];
  const outcomes = await Promise.all(
    parts.map((part) => {
      const limiter = limiterOf(part?.shard);
      if (limiter) return limiter.settle(part.receipt, units);
      const error = `no shard ${JSON.stringify(part?.shard)}`;
      return { status: "failed", policies: [], charged: [], error } satisfies SettleOutcome;
    }),
  );
  const result: SettleOutcome = {
    status: "unknown",
    policies: outcomes.flatMap((outcome) => outcome.policies),
    charged: outcomes.flatMap((outcome) => outcome.charged),
  };
  for (const outcome of outcomes) {
    if (RANK[outcome.status] > RANK[result.status]) result.status = outcome.status;
    if (outcome.error !== undefined) result.error ??= outcome.error;
  }
  return result;
}
