/**
 * /check's concurrency slots across a reshard, through the worker app in workerd: slots taken
 * on a shard being removed, before the reshard's config is deployed, are released by
 * POST /check/release after its instant (the release names no shard: the router asks the key's
 * shard now, then the one it lived on), and count against the limit until they are.
 */
import { describe, expect, it } from "vitest";
import type { Env } from "../../../worker/env";
import { announceReshard, shardPrefix } from "../../support/worker/shard-stores";
import { keyOnShard, shardedEnv } from "../../support/worker/sharded-worker";
import { postCheck } from "../../support/worker/worker-harness";

const prefix = shardPrefix("shards-reshard-slots");

const envWith = (config: Record<string, unknown>): Env =>
  shardedEnv({
    prefix,
    rules: [
      { name: "jobs", algorithm: "concurrency", limit: 5, timeout: "10m", key: "header:x-c" },
      { name: "probe", limit: 1_000, window: "1m", key: "header:x-c" },
    ],
    ...config,
  });

interface Answer {
  allowed: boolean;
  shard?: string;
  slot?: string;
}

describe("a reshard and /check's slots", () => {
  it("slots taken on a removed shard before the instant: held against the limit, released after it (200)", async () => {
    const before = envWith({});
    // Past the instant and its settle interval, within the transition.
    const at = Date.now() - 60_000;
    const after = envWith({
      shards: ["", "B"],
      reshard: { from: ["", "B", "C"], at: new Date(at).toISOString() },
    });
    // A key on C, the shard the reshard removes.
    const key = await keyOnShard(before, "probe", "C", "jobs");
    const slots: string[] = [];
    for (let i = 0; i < 5; i++) {
      const answer = await (await postCheck(before, { rule: "jobs", key })).json<Answer>();
      expect(answer).toMatchObject({ allowed: true, shard: "C" });
      slots.push(answer.slot as string);
    }
    // The shards told of the reshard before its instant, as an isolate on the new config does
    // (docs/shards.md "Which mistakes are refused"; told after it, the reshard is refused).
    await announceReshard(prefix, ["", "B"], ["", "B", "C"], at);
    // On the new placement: C's 5 slots still held, so nothing more.
    const full = await (await postCheck(after, { rule: "jobs", key })).json<Answer>();
    expect(full).toMatchObject({ allowed: false });
    const statuses: number[] = [];
    for (const slot of slots) {
      const res = await postCheck(after, { rule: "jobs", key, slot }, { path: "/check/release" });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    const again = await postCheck(
      after,
      { rule: "jobs", key, slot: slots[0] },
      { path: "/check/release" },
    );
    await again.arrayBuffer();
    expect(again.status).toBe(404);
    // All given back: the new shard admits.
    const admitted = await (await postCheck(after, { rule: "jobs", key })).json<Answer>();
    expect(admitted).toMatchObject({ allowed: true });
    expect(["", "B"]).toContain(admitted.shard);
  });
});
