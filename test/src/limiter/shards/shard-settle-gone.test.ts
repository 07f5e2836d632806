/**
 * A sharded limiter's settle of a receipt whose shard the limiter no longer has (a shard taken
 * out while receipts it counted were outstanding). Three databases through the bridges: the
 * receipts are made on three shards and settled by a limiter of the first two.
 */
import { describe, expect, it } from "vitest";
import { openReceipt, sealReceipt } from "../../../../src/http/usage-receipt";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../../src/limiter/types";
import { storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("shard-settle-gone");
const stores = (n: number) =>
  shardUrls()
    .slice(0, n)
    .map((url) => storeAt(url, 2_000));
const three = createLimiter({ store: stores(3), prefix, timeoutMs: 2_000 });
const two = createLimiter({ store: stores(2), prefix, timeoutMs: 2_000 });

const usage = (policy: string, key: string): LimitRequest => ({
  policy,
  key,
  limit: 1_000,
  windowMs: 60_000,
  cost: 100,
  algorithm: "sliding-log-weighted",
});

/** A key the three-shard placement puts on shard "2", and one it puts elsewhere. */
function keys(): [onGone: string, onKept: string] {
  let gone: string | undefined;
  let kept: string | undefined;
  for (let i = 0; i < 300 && !(gone && kept); i++) {
    const key = `client-${i}`;
    if (three.shardOf(key) === "2") gone ??= key;
    else kept ??= key;
  }
  if (!gone || !kept) throw new Error("no key on each side among 300");
  return [gone, kept];
}

/** The receipt as /check hands it out and /check/settle opens it. */
async function throughCheck(receipt: RefundReceipt | undefined): Promise<RefundReceipt> {
  const opened = await openReceipt((await sealReceipt(receipt as RefundReceipt, "s")) ?? "", "s");
  if (!opened) throw new Error("the sealed receipt did not open");
  return opened;
}

describe("settle of a receipt counted on a shard taken out since", () => {
  it("one shard's receipt: nothing to settle (404), as for a request that left its window", async () => {
    const [gone] = keys();
    const receipt = await throughCheck((await three.limitAll([usage("one", gone)])).receipt);
    expect(await two.settle(receipt, 5)).toMatchObject({ status: "unknown" });
  });

  // BUG (low): a receipt counted on two shards, one of them gone, answers "failed" (/check/
  // settle: 503, "nothing is known to be charged; retry") although the kept shard's part was
  // charged, and answers it again on every retry (the kept part already settled, the gone one
  // failing): a caller following the contract retries forever. One shard's receipt answers
  // "unknown" for the same gone shard (the settle falls back to the key's shard). The parts'
  // settle (src/limiter/shards/settle.ts) could answer a gone shard's part as unknown too.
  // Not local to src/http: left failing.
  it.fails("two shards' receipt, one gone: settled once, then already settled", async () => {
    const [gone, kept] = keys();
    const decided = await three.limitAll([usage("gone", gone), usage("kept", kept)]);
    const receipt = await throughCheck(decided.receipt);
    const first = await two.settle(receipt, 5);
    // The kept shard's part was charged: 5 used of 100 reserved.
    expect(first.charged).toEqual([-95]);
    expect(first.status).toBe("settled");
    expect((await two.settle(receipt, 5)).status).toBe("already-settled");
  });
});
