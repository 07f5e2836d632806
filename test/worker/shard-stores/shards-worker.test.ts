/**
 * The worker with `shards` in LIMITER_CONFIG (docs/shards.md), in workerd: its shards' bindings
 * (the test bridge on database 0 unsuffixed, databases 1 and 2 as B and C), /check naming the
 * shard that decided, /check/stats each shard's breaker and decisions, and a config it cannot
 * run on refused with a 503 naming the field, as every config error is.
 */
import { describe, expect, it } from "vitest";
import type { Env } from "../../../worker/env";
import { shardPrefix, shardRedis } from "../../support/worker/shard-stores";
import { shardedEnv } from "../../support/worker/sharded-worker";
import { callWorker, originCount, postCheck } from "../../support/worker/worker-harness";

const prefix = shardPrefix("shards-worker");
const TOKEN = "shards-worker-token";
const ADMIN = "shards-worker-admin";

const envWith = (config: Record<string, unknown>, overrides: Partial<Env> = {}): Env =>
  shardedEnv(
    {
      prefix,
      rules: [
        { name: "api", limit: 3, window: "1m", key: "header:x-client" },
        {
          name: "proxied",
          match: { path: "/sharded/*" },
          limit: 2,
          window: "1m",
          key: "header:x-client",
        },
      ],
      ...config,
    },
    { LIMITER_TOKEN: TOKEN, LIMITER_ADMIN_TOKEN: ADMIN, ...overrides },
  );

const call = callWorker;

const check = (env: Env, key: string) => postCheck(env, { rule: "api", key }, { token: TOKEN });

describe("a sharded worker", () => {
  const env = envWith({});

  it("names the shard that decided each /check, one per key, and counts it there only", async () => {
    const seen = new Map<string, string>();
    for (let i = 0; i < 30; i++) {
      const key = `spread-${i}`;
      const res = await check(env, key);
      expect(res.status).toBe(200);
      const body = await res.json<{ shard?: string; remaining: number }>();
      expect(["", "B", "C"]).toContain(body.shard);
      seen.set(key, body.shard as string);
    }
    expect(new Set(seen.values()).size).toBe(3);
    // The same key again: the same shard, its count going on.
    const again = await (await check(env, "spread-0")).json<{ shard: string; remaining: number }>();
    expect(again).toMatchObject({ shard: seen.get("spread-0"), remaining: 1 });
    // Its log is in that shard's database alone.
    const redis = shardRedis();
    const holding: string[] = [];
    for (const [i, name] of ["", "B", "C"].entries()) {
      const keys = await redis[i]?.keys(`${prefix}*`);
      if (keys?.some((key) => key.includes("api"))) holding.push(name);
    }
    expect(holding.sort()).toEqual(["", "B", "C"]);
  });

  it("denies at the limit on the key's shard", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await check(env, "at-limit")).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });

  it("proxies: each client's requests decided on its shard, the third refused before the origin", async () => {
    for (const client of ["p-1", "p-2", "p-3", "p-4"].map((c) => `${c}-${crypto.randomUUID()}`)) {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await call(env, `/sharded/${client}`, { headers: { "x-client": client } });
        statuses.push(res.status);
        await res.arrayBuffer();
      }
      expect(statuses, client).toEqual([200, 200, 429]);
      expect(await originCount(`/sharded/${client}`), client).toBe(2);
    }
  });

  it("reports each shard's breaker and decisions in /check/stats", async () => {
    await check(env, "stats-a");
    const res = await call(env, "/check/stats", { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(res.status).toBe(200);
    const stats = await res.json<{
      shards: {
        placement: { phase: string; shards: string[] };
        shards: {
          name: string;
          breaker: string;
          placed: boolean;
          decided: Record<string, number>;
        }[];
      };
    }>();
    expect(stats.shards.placement).toMatchObject({ phase: "stable", shards: ["", "B", "C"] });
    expect(stats.shards.shards.map((s) => [s.name, s.breaker, s.placed])).toEqual([
      ["", "closed", true],
      ["B", "closed", true],
      ["C", "closed", true],
    ]);
    const redisDecided = stats.shards.shards.reduce((n, s) => n + (s.decided.redis ?? 0), 0);
    expect(redisDecided).toBeGreaterThan(0);
  });
});

describe("a sharded config the worker cannot run on", () => {
  it.each([
    [
      "a shard whose bindings are missing",
      () => envWith({ shards: ["", "B", "D"] }),
      "UPSTASH_REDIS_REST_URL_D",
    ],
    [
      "a shard with a URL but no token",
      () => envWith({}, { UPSTASH_REDIS_REST_TOKEN_C: undefined }),
      "UPSTASH_REDIS_REST_TOKEN_C",
    ],
    ["a shard named twice", () => envWith({ shards: ["", "B", "B"] }), "shards"],
    ["a shard name no binding can have", () => envWith({ shards: ["", "B", "c"] }), "shards[2]"],
    [
      "a reshard from a shard name no binding can have",
      () => envWith({ reshard: { from: ["", "b-2"], at: "2026-12-10T12:00:00Z" } }),
      "reshard.from[1]",
    ],
    [
      "a reshard from a shard named twice",
      () => envWith({ reshard: { from: ["B", "B"], at: "2026-12-10T12:00:00Z" } }),
      "reshard.from",
    ],
    [
      "a reshard instant that does not parse",
      () => envWith({ reshard: { from: ["", "B"], at: "next tuesday" } }),
      "reshard.at",
    ],
    [
      "a reshard from a shard without bindings",
      () => envWith({ reshard: { from: ["", "E"], at: "2026-12-10T12:00:00Z" } }),
      "UPSTASH_REDIS_REST_URL_E",
    ],
  ])("%s: 503 naming the field", async (_label, env, field) => {
    const res = await check(env(), "refused");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field });
  });
});
