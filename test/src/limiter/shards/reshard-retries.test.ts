// A request id's retry of a key moved by a reshard, on real Redis (three shards behind three
// bridges, the first behind the fault server), on the caller's clock: the original admitted on
// the old shard before the instant is replayed from its record there after it, and an old
// shard that cannot be read is asked once per call, as without a request id.
import { describe, expect, it } from "vitest";
import type { Limiter } from "../../../../src/limiter/limiter-api";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { faultScenario } from "../../../support/worker/fault-control";
import { reshardAhead as reshardOf, shardPrefix } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("reshard-retries");
const TIMEOUT_MS = 2_000;

/** The old and new configs (shard-stores.ts), under this test's prefix. */
const reshardAhead = (label: string, firstUrl?: string) =>
  reshardOf(`${prefix}-${label}`, TIMEOUT_MS, firstUrl);

/** A key that moves at `at` from shard `from`. */
function movedKey(limiter: Limiter, at: number, from: string): string {
  for (;;) {
    const key = `moved-${crypto.randomUUID()}`;
    const before = limiter.shardOf(key, at - 1);
    if (before === from && limiter.shardOf(key, at) !== before) return key;
  }
}

describe("a request id's retry across a reshard", () => {
  it("a rate and a concurrency retry at the limit are replayed, counted once", async () => {
    const { clock, at, settled, old, fresh } = await reshardAhead("t1");
    const key = movedKey(fresh, at, "1");
    const rate: LimitRequest = { policy: "rr-rate", key, limit: 1, windowMs: 60_000 };
    const slots: LimitRequest = {
      policy: "rr-slots",
      key,
      limit: 1,
      windowMs: 30_000,
      algorithm: "concurrency",
    };
    clock.set(at - 1_000);
    const original = await old.limitAll([rate, slots], { requestId: "rr-1" });
    expect(original.allowed).toBe(true);
    const slot = original.decisions[1]?.slot as ConcurrencySlot;
    // In the settle interval and after it: the original's answer, its slot, nothing counted.
    for (const t of [at + 100, settled + 100]) {
      clock.set(t);
      const retry = await fresh.limitAll([rate, slots], { requestId: "rr-1" });
      expect(retry).toMatchObject({ allowed: true, replayed: true });
      expect(retry.decisions[1]?.slot?.slot).toBe(slot.slot);
    }
    // Counted once: another request is over both limits.
    expect((await fresh.limitAll([rate, slots], { requestId: "rr-2" })).allowed).toBe(false);
    expect((await fresh.inFlight(["rr-slots"]))[0]?.inFlight).toBe(1);
  });

  it("an old shard that cannot be read is asked once, and the call goes to its failure policy", async () => {
    const scenario = await faultScenario("forward");
    const { clock, at, settled, fresh } = await reshardAhead("t2", scenario.url);
    const key = movedKey(fresh, at, "0");
    const request: LimitRequest = { policy: "rr-down", key, limit: 5, windowMs: 60_000 };
    await scenario.set("error-500");
    // In the settle interval: denied as without a request id, not sent to the fallback.
    clock.set(at + 100);
    const settling = await fresh.limitAll([request], { requestId: "rr-down-0" });
    expect(settling.decisions[0]).toMatchObject({ allowed: false, source: "cache" });
    clock.set(settled + 100);
    const asked = async (run: () => Promise<unknown>) => {
      const before = (await scenario.stats()).requests;
      await run();
      return (await scenario.stats()).requests - before;
    };
    // Control: without a request id, one read of the old shard.
    const plain = await asked(() => fresh.limitAll([request]));
    const withId = await asked(async () => {
      const decided = await fresh.limitAll([request], { requestId: "rr-down-1" });
      expect(decided.decisions[0]).toMatchObject({ source: "fallback" });
    });
    expect({ plain, withId }).toEqual({ plain: 1, withId: 1 });
  });
});
