/**
 * A sharded limiter's settle (docs/shards.md, docs/usage.md): the settle reaches the shard that
 * admitted the request, also for a request counted on two shards and for a receipt that went
 * out through /check's sealed string and came back. Three databases through the bridges.
 */
import { describe, expect, it } from "vitest";
import { openReceipt, sealReceipt } from "../../../../src/http/usage-receipt";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { CountedReceipt } from "../../../../src/limiter/receipt-state";
import type { LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardRedis, shardUrls } from "../../../support/worker/shard-stores";
import { logHeader } from "../../../support/worker/weighted-layout";

const prefix = shardPrefix("shard-settle");
// An array of stores: shards named by position.
const names = ["0", "1", "2"];
const limiter = createLimiter({
  store: shardUrls().map((url) => storeAt(url, 2_000)),
  prefix,
  timeoutMs: 2_000,
  failMode: "closed",
});
const redis = shardRedis();

const usage = (policy: string, key: string): LimitRequest => ({
  policy,
  key,
  limit: 1_000,
  windowMs: 60_000,
  cost: 100,
  algorithm: "sliding-log-weighted",
});

/** The units a weighted log holds (its header's sum) on the named shard. */
async function sumOn(shard: string, policy: string, key: string): Promise<number> {
  const at = redis[names.indexOf(shard)];
  if (!at) return 0;
  return (await logHeader(at, storageKey(prefix, policy, key, "sliding-log-weighted"))).sum;
}

/** Two client keys the placement puts on two different shards. */
function keysOnTwoShards(): [string, string] {
  const first = "client-0";
  for (let i = 1; i < 200; i++) {
    const key = `client-${i}`;
    if (limiter.shardOf(key) !== limiter.shardOf(first)) return [first, key];
  }
  throw new Error("no two shards among 200 keys");
}

describe("settle on a sharded limiter", () => {
  it("reaches the shard that admitted the request, once", async () => {
    const key = "one-client";
    const shard = limiter.shardOf(key);
    const decided = await limiter.limitAll([usage("u1", key)]);
    expect(decided.allowed).toBe(true);
    const receipt = decided.receipt;
    if (!receipt) throw new Error("no receipt");
    expect(await limiter.settle(receipt, 250)).toMatchObject({
      status: "settled",
      charged: [150],
    });
    expect(await sumOn(shard, "u1", key)).toBe(250);
    for (const other of names.filter((name) => name !== shard)) {
      expect(await sumOn(other, "u1", key)).toBe(0);
    }
    expect((await limiter.settle(receipt, 1)).status).toBe("already-settled");
    expect(await sumOn(shard, "u1", key)).toBe(250);
  });

  it("a request counted on two shards is settled on each, also through a sealed receipt", async () => {
    const [a, b] = keysOnTwoShards();
    const decided = await limiter.limitAll([usage("u2", a), usage("u3", b)]);
    expect(decided.allowed).toBe(true);
    const sealed = await sealReceipt(decided.receipt as NonNullable<typeof decided.receipt>, "s");
    const opened = await openReceipt(sealed as string, "s");
    if (!opened) throw new Error("the sealed receipt did not open");
    expect(await openReceipt(sealed as string, "another secret")).toBeUndefined();
    // Each shard's part keeps where its entry went: its settle is one BITFIELD there.
    const counted = decided.receipt as unknown as CountedReceipt;
    expect(opened.parts?.map((part) => part.receipt.offsets)).toEqual(
      counted.parts?.map((part) => part.receipt.offsets),
    );
    expect(opened.parts?.every((part) => (part.receipt.offsets?.[0] ?? -1) >= 0)).toBe(true);
    const outcome = await limiter.settle(opened, 40);
    expect(outcome.status).toBe("settled");
    expect(outcome.charged).toEqual([-60, -60]);
    expect(await sumOn(limiter.shardOf(a), "u2", a)).toBe(40);
    expect(await sumOn(limiter.shardOf(b), "u3", b)).toBe(40);
    expect((await limiter.settle(opened, 40)).status).toBe("already-settled");
  });
});
