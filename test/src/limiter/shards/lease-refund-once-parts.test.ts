import { describe, expect, it } from "vitest";
import { refundLeasedOnce } from "../../../../src/limiter/lease-refund-once";
import type { Limiter } from "../../../../src/limiter/limiter-api";
import type { CountedReceipt } from "../../../../src/limiter/receipt-state";
import { refundParts } from "../../../../src/limiter/shards/refund";

// A sharded refund in part hands each shard a copy of its part's receipt (without the request
// id); what a lease paid must still give back once per part, however the refund is repeated.
// Each shard's limiter below refunds as store-limiter.ts does for a lease-paid receipt: the
// store is not involved (the lease gives back in the isolate), only the once-per-receipt memory.
function leasedShard(givenBack: string[]): Limiter {
  return {
    refund: (receipt: CountedReceipt, options?: { policies?: string[] }) =>
      refundLeasedOnce(receipt, options?.policies, async (rest) => {
        const names = rest ?? receipt.policies;
        givenBack.push(...names);
        return { refunded: true, units: names.map(() => 1) };
      }),
  } as unknown as Limiter;
}

function shardedReceipt(): CountedReceipt {
  const part = {
    policies: ["a", "b"],
    costs: [1, 1],
    memberId: "m",
    at: 0,
    requestId: "r",
    resolved: [{ name: "a" }, { name: "b" }],
    leased: [],
  } as unknown as CountedReceipt;
  return {
    policies: ["a", "b", "c"],
    parts: [{ shard: "s1", indices: [0, 1], receipt: part }],
  } as unknown as CountedReceipt;
}

describe("a sharded, lease-paid receipt refunded in part", () => {
  it("twice: gives back once", async () => {
    const givenBack: string[] = [];
    const shard = leasedShard(givenBack);
    const receipt = shardedReceipt();
    expect((await refundParts(receipt, ["a"], () => shard)).units).toEqual([1]);
    const again = await refundParts(receipt, ["a"], () => shard);
    expect(again.alreadyRefunded).toBe(true);
    expect(givenBack).toEqual(["a"]);
  });

  it("then whole: gives back only what the part did not", async () => {
    const givenBack: string[] = [];
    const shard = leasedShard(givenBack);
    const receipt = shardedReceipt();
    await refundParts(receipt, ["a"], () => shard);
    await refundParts(receipt, ["a", "b"], () => shard);
    await refundParts(receipt, undefined, () => shard);
    expect(givenBack).toEqual(["a", "b"]);
  });
});
