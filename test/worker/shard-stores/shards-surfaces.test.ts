/**
 * The worker's other surfaces with `shards` on (docs/shards.md), in workerd over three real
 * databases (the test bridge's database 0 unsuffixed, databases 1 and 2 as B and C): cost, peek
 * and reset on the key's shard; an override and a key block set through the admin routes stored
 * on the key's shard alone and applied there; network blocks and the analytics on the first
 * shard; a reshard ahead of its instant deciding on the old placement, and one past it (told
 * to the shards before it) deciding a removed shard's keys elsewhere with that shard's count
 * held against the limit; and
 * one shard's bridge hanging while the other shards' keys are still decided by Redis.
 */
import { describe, expect, it } from "vitest";
import type { Env } from "../../../worker/env";
import { faultScenario } from "../../support/worker/fault-control";
import { announceReshard, shardPrefix, shardRedis } from "../../support/worker/shard-stores";
import { shardedEnv } from "../../support/worker/sharded-worker";
import {
  baseEnv,
  callWorker,
  postCheck,
  TEST_ADMIN_TOKEN,
} from "../../support/worker/worker-harness";

const prefix = shardPrefix("shards-surfaces");
const SHARDS = ["", "B", "C"] as const;
const redis = shardRedis();

const envWith = (config: Record<string, unknown>, overrides: Partial<Env> = {}): Env =>
  shardedEnv(
    {
      prefix,
      shards: SHARDS,
      rules: [
        {
          name: "api",
          match: { path: "/sh-api/*" },
          limit: 5,
          window: "1m",
          key: "header:x-client",
          overrides: true,
        },
        { name: "open", match: { path: "/sh-open/*" }, limit: 100, window: "1m" },
        // Keyed as "api" is (the same client key, so the same shard), with room to spare: it
        // finds keys on each shard without touching "api"'s counts.
        { name: "probe", limit: 1_000, window: "1m", key: "header:x-client" },
      ],
      ...config,
    },
    overrides,
  );

interface Answer {
  allowed: boolean;
  limit: number;
  remaining: number;
  source: string;
  shard?: string;
}

async function check(env: Env, body: Record<string, unknown>): Promise<Answer> {
  return (await postCheck(env, body)).json<Answer>();
}

/** A client key on each shard, by what the worker answers ("", "B", "C" in that order). */
async function keysOnEachShard(env: Env, label: string): Promise<string[]> {
  const found = new Map<string, string>();
  for (let i = 0; found.size < SHARDS.length; i++) {
    const key = `${label}-${i}-${crypto.randomUUID()}`;
    const answer = await check(env, { rule: "probe", key });
    expect(answer.source, JSON.stringify(answer)).toBe("redis");
    if (!found.has(answer.shard as string)) found.set(answer.shard as string, key);
  }
  return SHARDS.map((name) => found.get(name) as string);
}

/** How many keys under `under` each shard's database holds, in SHARDS order. */
const held = (under: string) =>
  Promise.all(redis.map(async (client) => (await client.keys(`${under}*`)).length));

describe("a sharded worker's surfaces", () => {
  it("cost, peek and reset: each on the key's shard", async () => {
    const env = envWith({});
    const keys = await keysOnEachShard(env, "peek");
    for (const [i, key] of keys.entries()) {
      const checked = await check(env, { rule: "api", key, cost: 2 });
      expect(checked).toMatchObject({ allowed: true, remaining: 3, shard: SHARDS[i] });
      const peeked = await (
        await postCheck(env, { rule: "api", key }, { path: "/check/peek" })
      ).json();
      expect(peeked).toMatchObject({ allowed: true, limit: 5, remaining: 3 });
      const reset = await postCheck(env, { rule: "api", key }, { path: "/check/reset" });
      expect(await reset.json()).toMatchObject({ reset: true, existed: true });
      const after = await (
        await postCheck(env, { rule: "api", key }, { path: "/check/peek" })
      ).json();
      expect(after).toMatchObject({ remaining: 5 });
      expect(await check(env, { rule: "api", key, cost: 5 })).toMatchObject({
        allowed: true,
        remaining: 0,
        shard: SHARDS[i],
      });
    }
  });

  it("an override and a key block live on the key's shard alone and apply there", async () => {
    const plans = `${prefix}-plans`;
    const env = envWith({ prefix: plans });
    const key = (await keysOnEachShard(env, "plans"))[2] as string;
    // Only the probes' logs so far, none on C yet for this key's rule; remember what is there.
    const before = await held(plans);
    const set = await postCheck(env, { rule: "api", key, limit: 1 }, { path: "/check/override" });
    expect(await set.json()).toMatchObject({ ok: true, rules: ["api"] });
    const added = (await held(plans)).map((n, i) => n - (before[i] as number));
    expect(added[2]).toBeGreaterThan(0);
    expect(added.slice(0, 2)).toEqual([0, 0]);
    expect(await check(env, { rule: "api", key })).toMatchObject({
      allowed: true,
      limit: 1,
      shard: "C",
    });
    expect(await check(env, { rule: "api", key })).toMatchObject({ allowed: false, shard: "C" });
    // Listed with the shard that holds it.
    const listed = await callWorker(env, "/check/plans?what=overrides&count=1000", {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const entries: { shard?: string; policy?: string }[] = [];
    let page = await listed.json<{ cursor: string; entries: typeof entries }>();
    entries.push(...page.entries);
    while (page.cursor !== "0") {
      const next = await callWorker(
        env,
        `/check/plans?what=overrides&count=1000&cursor=${page.cursor}`,
        { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } },
      );
      page = await next.json();
      entries.push(...page.entries);
    }
    expect(entries.filter((e) => e.policy === "api").map((e) => e.shard)).toEqual(["C"]);
    // A shard index no page answers is the caller's error, here and without shards.
    const listOn = (on: Env, cursor: string) =>
      callWorker(on, `/check/plans?what=overrides&cursor=${cursor}`, {
        headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      });
    expect((await listOn(env, "3:0")).status).toBe(400);
    expect((await listOn(env, "2:0")).status).toBe(200);
    const single = { ...baseEnv, LIMITER_CONFIG: JSON.stringify({ prefix: plans, rules: [] }) };
    expect(await (await listOn(single as Env, "1:0")).json()).toMatchObject({ field: "cursor" });

    // A key block of another key on B: stored on B, and B's decisions refuse it.
    const blocked = (await keysOnEachShard(env, "block"))[1] as string;
    const beforeBlock = await held(plans);
    const block = await postCheck(
      env,
      { rule: "api", key: blocked, seconds: 600 },
      { path: "/check/block" },
    );
    expect(block.status).toBe(200);
    const blockAdded = (await held(plans)).map((n, i) => n - (beforeBlock[i] as number));
    expect(blockAdded[1]).toBeGreaterThan(0);
    expect([blockAdded[0], blockAdded[2]]).toEqual([0, 0]);
    const refused = await postCheck(env, { rule: "api", key: blocked });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ allowed: false, shard: "B" });
  });

  it("network blocks and the analytics live on the first shard", async () => {
    const net = `${prefix}-net`;
    const config = { prefix: net, networkBlocks: true, analytics: { enabled: true } };
    const env = envWith(config);
    expect(await held(net)).toEqual([0, 0, 0]);
    const block = await postCheck(env, { ip: "203.0.113.0/24" }, { path: "/check/block" });
    expect(block.status).toBe(200);
    const afterBlock = await held(net);
    expect(afterBlock[0]).toBeGreaterThan(0);
    expect(afterBlock.slice(1)).toEqual([0, 0]);
    // A fresh isolate (another config text) reads the block from the first shard.
    const fresh = envWith(config, { LIMITER_CONFIG: `${env.LIMITER_CONFIG} ` });
    const byIp = await callWorker(fresh, "/sh-open/x", {
      headers: { "CF-Connecting-IP": "203.0.113.9" },
    });
    expect(byIp.status).toBe(403);
    await byIp.arrayBuffer();

    // Decisions on every shard, then the stats: their counts are flushed to the first shard only.
    const keys = await keysOnEachShard(env, "analytics");
    for (const key of keys) expect((await check(env, { rule: "api", key })).allowed).toBe(true);
    const analyticsKeys = () =>
      Promise.all(redis.map(async (client) => (await client.keys(`${net}:analytics:*`)).length));
    const stats = await callWorker(env, "/check/stats", {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    const body = await stats.json<{
      rules: { rule: string; totals: { allowed: number } }[];
      shards: { shards: { name: string; decided: Record<string, number> }[] };
    }>();
    expect(body.rules.find((r) => r.rule === "api")?.totals.allowed).toBe(3);
    expect(body.shards.shards.map((s) => s.name)).toEqual(["", "B", "C"]);
    for (const shard of body.shards.shards) expect(shard.decided.redis).toBeGreaterThan(0);
    const written = await analyticsKeys();
    expect(written[0]).toBeGreaterThan(0);
    expect(written.slice(1)).toEqual([0, 0]);
    await postCheck(env, { ip: "203.0.113.0/24" }, { path: "/check/unblock" });
  });

  it("a reshard ahead of its instant: keys decided on the old shards, the phase 'before'", async () => {
    const env = envWith({ reshard: { from: ["", "B"], at: "2999-01-01T00:00:00Z" } });
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const answer = await check(env, { rule: "probe", key: `before-${i}-${crypto.randomUUID()}` });
      expect(answer.source).toBe("redis");
      seen.add(answer.shard as string);
    }
    expect([...seen].sort()).toEqual(["", "B"]);
    const stats = await callWorker(env, "/check/stats", {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    expect(await stats.json()).toMatchObject({
      shards: { placement: { phase: "before", shards: ["", "B"] } },
    });
  });

  it("a shard being removed, past the instant: its keys decided elsewhere with its count held", async () => {
    const removing = `${prefix}-rm`;
    const before = envWith({ prefix: removing });
    // Past the instant and its settle interval, within the transition (the longest window).
    const at = new Date(Date.now() - 60_000).toISOString();
    const after = envWith({
      prefix: removing,
      shards: ["", "B"],
      reshard: { from: ["", "B", "C"], at },
    });
    const onC = (await keysOnEachShard(before, "removing"))[2] as string;
    for (let i = 0; i < 3; i++) {
      expect(await check(before, { rule: "api", key: onC })).toMatchObject({
        allowed: true,
        shard: "C",
      });
    }
    // The premise the shards check (docs/shards.md "Which mistakes are refused"): an isolate on
    // the new config told them of the reshard before its instant (after the old config's last
    // decisions here).
    await announceReshard(removing, ["", "B"], ["", "B", "C"], Date.parse(at));
    // On the new placement: not C, and C's 3 still count against the limit of 5.
    const moved = await check(after, { rule: "api", key: onC });
    expect(moved).toMatchObject({ allowed: true, limit: 5, remaining: 1 });
    expect(["", "B"]).toContain(moved.shard);
    expect(await check(after, { rule: "api", key: onC })).toMatchObject({
      allowed: true,
      remaining: 0,
      shard: moved.shard,
    });
    expect(await check(after, { rule: "api", key: onC })).toMatchObject({ allowed: false });
    // The old config, still running past the instant, is refused on C (it would admit 2 more).
    expect(await check(before, { rule: "api", key: onC })).toMatchObject({
      allowed: false,
      source: "fail-closed",
    });
    const stats = await callWorker(after, "/check/stats", {
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
    });
    expect(await stats.json()).toMatchObject({
      shards: { placement: { phase: "transition", shards: ["", "B"] } },
    });
  });

  it("one shard's bridge hanging: the others' keys are decided by Redis while its call waits", async () => {
    // The deadline (shardedEnv's 10 s) must outlast the four checks below on a busy machine:
    // they are to come back while C's call still waits. The test then waits it out once.
    const healthy = envWith({});
    const [onFirst, onB, onC] = (await keysOnEachShard(healthy, "hang")) as [
      string,
      string,
      string,
    ];
    const hang = await faultScenario("hang");
    try {
      const sick = envWith({}, { UPSTASH_REDIS_REST_URL_C: hang.url });
      let sickAnswered = false;
      const pending = check(sick, { rule: "api", key: onC }).then((answer) => {
        sickAnswered = true;
        return answer;
      });
      // While C's call hangs, keys of "" and B are answered by their own databases, before it.
      for (const key of [onFirst, onB, onFirst, onB]) {
        const answer = await check(sick, { rule: "api", key });
        expect(answer).toMatchObject({ allowed: true, source: "redis" });
        expect(["", "B"]).toContain(answer.shard);
      }
      expect(sickAnswered).toBe(false);
      // C's key goes to its failure policy (fail open through the fallback) at the deadline.
      expect(await pending).toMatchObject({ allowed: true, source: "fallback", shard: "C" });
    } finally {
      await hang.set("forward");
    }
  });
});
