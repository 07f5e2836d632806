// A moved key's fallback slots during a reshard's transition, on real Redis (shards 0 and 1
// behind the bridges, the new shard 2 a store that refuses every connection), on the caller's
// clock. A request that goes to its failure policy is decided by the fallback of whichever
// shard's path failed: the new shard's own (its limitAll failed) or the old shard's (the key's
// plan could not be read on both). Either way the key's slots in this isolate are one count,
// never more than the limit.
import { describe, expect, inject, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { manualClock, storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("reshard-fallback-slots");
const TIMEOUT_MS = 2_000;

describe("a moved key's fallback slots while its new shard is down", () => {
  it("are counted once in the isolate, whichever shard's path took them", async () => {
    const clock = manualClock();
    const at = clock.now() + 10_000;
    const [first, second] = shardUrls();
    const limiter = createLimiter({
      prefix,
      clock: "caller",
      now: clock.now,
      timeoutMs: TIMEOUT_MS,
      failMode: "open",
      store: [
        storeAt(first as string, TIMEOUT_MS),
        storeAt(second as string, TIMEOUT_MS),
        storeAt(inject("refusedUrl"), TIMEOUT_MS),
      ],
      reshard: { from: ["0", "1"], at },
      onBreakerChange: () => {},
      onStoreError: () => {},
    });
    // Told to the shards before the instant, as the first isolate on the new config does
    // (docs/shards.md "Which mistakes are refused"); the new shard is not told (it is down).
    const told: Promise<unknown>[] = [];
    await limiter.limit(
      { policy: "announce", key: "announce", limit: 1, windowMs: 1_000 },
      { waitUntil: (promise) => told.push(promise) },
    );
    await Promise.allSettled(told);
    let key = "";
    while (!key) {
      const candidate = `moved-${crypto.randomUUID()}`;
      if (limiter.shardOf(candidate, at - 1) === "0" && limiter.shardOf(candidate, at) === "2") {
        key = candidate;
      }
    }
    const slots: LimitRequest = {
      policy: "rfs-slots",
      key,
      limit: 3,
      windowMs: 30_000,
      algorithm: "concurrency",
    };
    // A rule that reads the key's plan: during the transition it is read on both shards, and
    // the new shard not answering sends the request to the failure policy on the old one.
    const plan: LimitRequest = {
      policy: "rfs-plan",
      key,
      limit: 10,
      windowMs: 60_000,
      overrides: true,
    };
    clock.set(at + TIMEOUT_MS + 1_000);
    const sources: string[] = [];
    const held: ConcurrencySlot[] = [];
    // The concurrency rule alone: the old shard's slots read (none), the new shard's call
    // fails, its fallback takes the slots. Then with the plan rule: the old shard's fallback.
    for (const requests of [[slots], [slots], [slots], [slots, plan], [slots, plan]]) {
      const decided = await limiter.limitAll(requests);
      sources.push(decided.decisions[0]?.source as string);
      if (decided.allowed) held.push(...(decided.slots ?? []));
    }
    expect(sources).toEqual(Array(5).fill("fallback"));
    expect(held).toHaveLength(3);
    // Each released where its slot names (the old shard or the new), freeing the key's count.
    const released = await limiter.release(held);
    expect(released.released).toEqual([true, true, true]);
    expect((await limiter.limitAll([slots, plan])).allowed).toBe(true);
  });
});
