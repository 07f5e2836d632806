// A concurrency slot of a key past MAX_KEY_LENGTH over three shards: its key as counted is a
// digest, which no placement can tell the shard of. Released from the decision's slot (its shard
// named) and by its id with the slot's key alone, as POST /check/release gives one back.
import { describe, expect, it } from "vitest";
import { boundedKey } from "../../../../src/bounded-key";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("shard-long-slots");
const TIMEOUT_MS = 2_000;
const limiter = createLimiter({
  prefix,
  store: shardUrls().map((url) => storeAt(url, TIMEOUT_MS)),
  timeoutMs: TIMEOUT_MS,
});

const request = (key: string): LimitRequest => ({
  policy: "long-slots",
  key,
  limit: 1,
  windowMs: 30_000,
  algorithm: "concurrency",
});

describe("a long key's slot over three shards", () => {
  it("is released from the decision's slot and by its id, on whichever shard holds it", async () => {
    let released = 0;
    let admittedAfter = 0;
    for (let i = 0; i < 6; i++) {
      // A key whose digest, placed as a key, would live on another shard.
      let key = "";
      while (!key) {
        const candidate = `long-${crypto.randomUUID()}${"k".repeat(600)}`;
        const digest = await boundedKey(candidate);
        if (limiter.shardOf(digest) !== limiter.shardOf(candidate)) key = candidate;
      }
      const first = await limiter.limit(request(key));
      expect(first.allowed).toBe(true);
      const slot = first.slot as ConcurrencySlot;
      if (i % 2 === 0) {
        if ((await limiter.release(slot)).released[0]) released++;
      } else {
        const byId = { policy: slot.policy, key: slot.key, slot: slot.slot };
        if ((await limiter.release(byId)).released[0]) released++;
      }
      if ((await limiter.limit(request(key))).allowed) admittedAfter++;
    }
    expect({ released, admittedAfter }).toEqual({ released: 6, admittedAfter: 6 });
  });
});
