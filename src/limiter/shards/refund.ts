/**
 * A sharded limiter's refund (docs/shards.md): each part of a receipt given back on the shard
 * that counted it, and the outcomes put back together in the receipt's order.
 */
import { refundsAs } from "../lease-refund-once";
import type { Limiter } from "../limiter-api";
import type { CountedReceipt } from "../receipt-state";
import type { RefundOutcome } from "../types";

type Part = NonNullable<CountedReceipt["parts"]>[number];

export async function refundParts(
  receipt: CountedReceipt,
  only: readonly string[] | undefined,
  limiterOf: (shard: string) => Limiter | undefined,
): Promise<RefundOutcome> {
  const parts = receipt.parts as readonly Part[];
  // A refund of some of the request's policies leaves every part's request-id record (as one
  // store leaves its one record): a retry then replays the admission and counts nowhere.
  const partial = only !== undefined && !receipt.policies.every((name) => only.includes(name));
  const outcomes = await Promise.all(
    parts.map(async (part) => {
      const picked =
        only === undefined ? undefined : part.receipt.policies.filter((n) => only.includes(n));
      if (picked !== undefined && picked.length === 0) return undefined;
      const limiter = limiterOf(part?.shard);
      if (!limiter) {
        return { refunded: false, units: [], error: `no shard ${JSON.stringify(part?.shard)}` };
      }
      const given: CountedReceipt = partial ? { ...part.receipt } : part.receipt;
      if (partial) {
        delete given.requestId;
        // What a lease paid gives back once per receipt object: the copy counts as its part.
        refundsAs(given, part.receipt);
      }
      return limiter.refund(given, picked === undefined ? undefined : { policies: picked });
    }),
  );
  // Units in the receipt's order: each part's in its own order, which the receipt keeps.
  const queues = outcomes.map((outcome) => [...(outcome?.units ?? [])]);
  const owner = new Map<number, number>();
  parts.forEach((part, p) => {
    for (const index of part.indices) owner.set(index, p);
  });
  const units: number[] = [];
  for (const index of [...owner.keys()].sort((a, b) => a - b)) {
    const p = owner.get(index) as number;
    const outcome = outcomes[p];
    const name = parts[p]?.receipt.policies[(parts[p]?.indices ?? []).indexOf(index)];
    if (!outcome?.refunded || (only !== undefined && !only.includes(name ?? ""))) continue;
    const unit = queues[p]?.shift();
    if (unit !== undefined) units.push(unit);
  }
  const answered = outcomes.filter((outcome) => outcome !== undefined);
  const result: RefundOutcome = {
    refunded: answered.some((outcome) => outcome.refunded),
    units,
  };
  // Already refunded only if every part was: a part that gave back, or failed, says otherwise.
  if (answered.length > 0 && answered.every((outcome) => outcome.alreadyRefunded === true)) {
    result.alreadyRefunded = true;
  }
  const failed = answered.find((outcome) => outcome.error !== undefined);
  if (failed?.error !== undefined) result.error = failed.error;
  return result;
}
