/**
 * /check's request ids across a reshard, through the worker app in workerd: a request admitted
 * on a shard being removed, before the reshard's config is deployed, is retried with its
 * `requestId` after the instant. The retry is the original's replay (the old shard holds its
 * record), not a second decision on the new shard, which at the limit denies it: the old
 * shard's count of the original holds the new shard's limit down.
 */
import { describe, expect, it } from "vitest";
import type { Env } from "../../../worker/env";
import { announceReshard, shardPrefix } from "../../support/worker/shard-stores";
import { keyOnShard, shardedEnv } from "../../support/worker/sharded-worker";
import { postCheck } from "../../support/worker/worker-harness";

// A prefix per test: the shards' record of a reshard (docs/shards.md "Which mistakes are
// refused") closes the old placement under its prefix once told.
const prefixes = [shardPrefix("srr-1"), shardPrefix("srr-2")];

const envWith = (prefix: string, config: Record<string, unknown>): Env =>
  shardedEnv({
    prefix,
    rules: [
      { name: "jobs", algorithm: "concurrency", limit: 1, timeout: "10m", key: "header:x-c" },
      { name: "once", limit: 1, window: "10m", key: "header:x-c" },
      { name: "probe", limit: 1_000, window: "1m", key: "header:x-c" },
    ],
    ...config,
  });

interface Answer {
  allowed: boolean;
  replayed?: boolean;
  shard?: string;
  slot?: string;
}

// Past the instant and its settle interval, within the transition.
const at = Date.now() - 60_000;
const envs = (prefix: string) => ({
  before: envWith(prefix, {}),
  after: envWith(prefix, {
    shards: ["", "B"],
    reshard: { from: ["", "B", "C"], at: new Date(at).toISOString() },
  }),
  // The shards told of the reshard before its instant, as an isolate on the new config does
  // (told after it, the reshard is refused): here once the old config's requests are in.
  told: () => announceReshard(prefix, ["", "B"], ["", "B", "C"], at),
});

const check = async (env: Env, body: Record<string, unknown>) =>
  (await postCheck(env, body)).json<Answer>();

describe("a reshard and /check's request ids", () => {
  it("a retry after the instant of a request admitted before it is replayed (limit 1)", async () => {
    const { before, after, told } = envs(prefixes[0] as string);
    const key = await keyOnShard(before, "probe", "C", "once");
    const original = await check(before, { rule: "once", key, requestId: "order-1" });
    expect(original).toMatchObject({ allowed: true, shard: "C" });
    // Control, no reshard: the retry is the original's replay.
    expect(await check(before, { rule: "once", key, requestId: "order-1" })).toMatchObject({
      allowed: true,
      replayed: true,
    });
    await told();
    const retry = await check(after, { rule: "once", key, requestId: "order-1" });
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    // Counted once: another request is still over the limit.
    expect(await check(after, { rule: "once", key, requestId: "order-2" })).toMatchObject({
      allowed: false,
    });
  });

  it("a concurrency retry gets the original's slot, released after the instant (200)", async () => {
    const { before, after, told } = envs(prefixes[1] as string);
    const key = await keyOnShard(before, "probe", "C", "jobs");
    const original = await check(before, { rule: "jobs", key, requestId: "job-1" });
    expect(original).toMatchObject({ allowed: true, shard: "C" });
    await told();
    const retry = await check(after, { rule: "jobs", key, requestId: "job-1" });
    expect(retry).toMatchObject({ allowed: true, replayed: true, slot: original.slot });
    const released = await postCheck(
      after,
      { rule: "jobs", key, slot: retry.slot },
      { path: "/check/release" },
    );
    await released.arrayBuffer();
    expect(released.status).toBe(200);
    // The one slot given back: the new shard admits.
    expect(await check(after, { rule: "jobs", key, requestId: "job-2" })).toMatchObject({
      allowed: true,
    });
  });
});
