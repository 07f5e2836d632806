// An exact reshard: two workers, A on the old config (two shards) until the instant and then
// redeployed on the new one, B on the new (three, with `reshard`) throughout, each with two
// senders, on one clock the test moves (the caller clock, so Redis counts on it too). 300 keys
// at twice their limit across the instant: no key over its limit in any rolling window, and at
// least 90% of what one exact log per key would admit.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import { manualClock, storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("reshard");

describe("reshard: two shards become three", () => {
  it("stays within every key's limit in every window across the instant, and admits ≥ 90% of exact", async () => {
    const clock = manualClock();
    const windowMs = 10_000;
    const limit = 5;
    const at = clock.now() + 30_000;
    const urls = shardUrls();
    // Fail closed: on a loaded machine a call past its deadline must not be admitted by the
    // fallback (that is the failure policy's slack, not the reshard's). The settle interval is
    // the timeout, on the test's clock.
    const common = {
      prefix,
      clock: "caller" as const,
      now: clock.now,
      timeoutMs: 2_000,
      failMode: "closed" as const,
    };
    const oldConfig = createLimiter({
      ...common,
      store: [storeAt(urls[0] as string, 2_000), storeAt(urls[1] as string, 2_000)],
    });
    const onNewConfig = () =>
      createLimiter({
        ...common,
        store: urls.map((url) => storeAt(url, 2_000)),
        reshard: { from: ["0", "1"], at },
      });
    const newConfig = onNewConfig();
    // Worker A once redeployed: a new isolate, on the new config.
    const redeployed = onNewConfig();
    const keys = Array.from({ length: 300 }, (_, i) => `k-${i}-${crypto.randomUUID()}`);
    const moved = keys.filter(
      (key) => newConfig.shardOf(key, at) !== newConfig.shardOf(key, at - 1),
    );
    expect(moved.length).toBeGreaterThan(60);
    const admitted = new Map<string, number[]>(keys.map((key) => [key, []]));
    const exact = new Map<string, number[]>(keys.map((key) => [key, []]));
    let peeksOnly = 0;
    // Twice the limit: 2 * 5 per 10 s, one request every second per key, from -30 s to +40 s.
    for (let t = at - 30_000; t < at + 40_000; t += 1_000) {
      clock.set(t);
      await Promise.all(
        keys.map(async (key, i) => {
          // Each key starts at its own second of the window, so that the instant (and the
          // settle interval after it) falls at every point of the keys' admission cycles, not
          // at the same one for all (where the run's end could hide what it costs).
          if (t < at - 30_000 + (i % 10) * 1_000) return;
          // Four senders take turns on each key: senders 0 and 1 send to worker A (the old
          // config until the instant, then redeployed on the new), 2 and 3 to worker B.
          const sender = (i + (t - at) / 1_000 + 40) % 4;
          const onA = sender < 2;
          const isolate = onA ? (t < at ? oldConfig : redeployed) : newConfig;
          const d = await isolate.limit({ policy: "rs", key, limit, windowMs });
          if (d.allowed) (admitted.get(key) as number[]).push(t);
          if (t >= at && moved.includes(key)) {
            expect(d.shard).toBe(newConfig.shardOf(key, t));
            expect(d.limit).toBe(limit);
            if (d.source === "cache") peeksOnly++;
          }
          const log = exact.get(key) as number[];
          if (log.filter((s) => s > t - windowMs).length < limit) log.push(t);
        }),
      );
    }
    let total = 0;
    let ideal = 0;
    for (const key of keys) {
      const times = admitted.get(key) as number[];
      total += times.length;
      ideal += (exact.get(key) as number[]).length;
      for (let i = limit; i < times.length; i++) {
        expect(times[i] as number, key).toBeGreaterThanOrEqual(
          (times[i - limit] as number) + windowMs,
        );
      }
    }
    // Printed (`--silent=false`): the share over the run, and over the window after the instant
    // for the moved keys alone, where the settle interval's denials fall (over the run a sliding
    // log makes them up later, so the first share hides them).
    const within = (times: number[]) => times.filter((s) => s >= at && s < at + windowMs).length;
    const movedAfter = moved.reduce((n, key) => n + within(admitted.get(key) as number[]), 0);
    const movedExact = moved.reduce((n, key) => n + within(exact.get(key) as number[]), 0);
    const pct = (a: number, b: number) => `${((100 * a) / b).toFixed(1)} %`;
    console.log(
      `reshard: ${total} admitted of ${ideal} an exact log admits (${pct(total, ideal)}); ` +
        `${moved.length} of ${keys.length} keys moved, in the window after the instant ` +
        `${movedAfter} of ${movedExact} (${pct(movedAfter, movedExact)})`,
    );
    expect(total / ideal).toBeGreaterThanOrEqual(0.9);
    expect(peeksOnly).toBeGreaterThan(0);
    // The placement's phase lasts until the longest window any policy may have has passed.
    expect(newConfig.placement(at + 40_000).phase).toBe("transition");
  }, 120_000);
});
