import { describe, expect, it } from "vitest";
import type { Algorithm } from "../../../src/store/algorithm";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testStore } from "../../support/worker/redis";

// Two isolates on the caller's clock, a few ms apart, straddling a window boundary. The slower
// one must count in the faster one's (later) window, never write its older window over it —
// otherwise each resets the other's count at every boundary and both admit a full limit.
const T = 1_700_000_000_000; // aligned to the 1 s windows used here
const prefix = scopedPrefix("skew");
const store = testStore(5_000);

let member = 0;
function policy(algorithm: Algorithm, limit: number, windowMs = 1_000) {
  const key = storageKey(prefix, `skew.${algorithm}`, "client", algorithm);
  const at = (now: number, cost = 1) =>
    evaluatePolicy(store, {
      redisKey: key,
      algorithm,
      limit,
      windowMs,
      cost,
      memberId: `k${member++}`,
      now,
    });
  return { key, at };
}

describe.each(["fixed-window", "sliding-counter"] as const)(
  "%s on skewed caller clocks",
  (algorithm) => {
    it("a slower isolate counts in the faster one's window and cannot reset it", async () => {
      const p = policy(algorithm, 5);
      const fast = T + 2; // already in the window that starts at T
      const slow = T - 3; // still in the window before
      for (let i = 0; i < 5; i++) expect((await p.at(fast)).allowed).toBe(true);
      expect((await p.at(slow)).allowed).toBe(false);
      expect((await p.at(fast)).allowed).toBe(false);
      // Neither clock can squeeze in more than the limit between them.
      let admitted = 0;
      for (let i = 0; i < 10; i++) if ((await p.at(i % 2 ? fast : slow)).allowed) admitted++;
      expect(admitted).toBe(0);
    });
  },
);

describe("token-bucket", () => {
  it("keeps its debt in time when the rule's limit changes (no free refill)", async () => {
    const before = policy("token-bucket", 10);
    for (let i = 0; i < 10; i++) expect((await before.at(T)).allowed).toBe(true);
    expect((await before.at(T)).allowed).toBe(false);
    // The same key, now at 20 per second: the bucket was empty and refills at the new rate
    // (one token every 50 ms), it is not read as full.
    const after = policy("token-bucket", 20);
    expect((await after.at(T + 10)).allowed).toBe(false);
    expect(await after.at(T + 50)).toMatchObject({ allowed: true });
  });
});
