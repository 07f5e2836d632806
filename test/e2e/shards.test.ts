/**
 * Shards end to end (docs/shards.md): the worker as deployed (`wrangler deploy --dry-run`),
 * served by workerd alone, twice (two isolates), over three private redis-servers, each behind
 * its own REST bridge: LIMITER_CONFIG's `"shards": ["", "B", "C"]`. A burst on one key over both
 * workers admits exactly the limit, decided on the one shard the key is placed on; keys spread
 * over all three shards, each always on the same one whichever worker decides it.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBridge } from "../../bridge/server.mjs";
import { serveWorker, wranglerBundle } from "../../tools/infra.mjs";
import { startPrivateRedis } from "../../tools/redis.mjs";

const SHARDS = ["", "B", "C"] as const;
const TOKEN = "shards-e2e";
const LIMITER_TOKEN = "shards-e2e-decisions";
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-shards-"));

type Served = Awaited<ReturnType<typeof serveWorker>>;
const stops: (() => Promise<void>)[] = [];
const direct: Record<string, Redis> = {};
const workers: Served[] = [];

interface Answer {
  allowed: boolean;
  source?: string;
  shard?: string;
}

beforeAll(async () => {
  const bindings: Record<string, string> = {
    LIMITER_TOKEN,
    LIMITER_CONFIG: JSON.stringify({
      prefix: "shards-e2e",
      // The longest deadline: beside the rest of the suite on 2 cores a store call was seen to
      // pass 5 s, and its breaker then sent both workers to their fallbacks (200 admitted).
      timeoutMs: 30_000,
      shards: SHARDS,
      rules: [{ name: "api", limit: 100, window: "1m", key: "header:x-client" }],
    }),
  };
  for (const name of SHARDS) {
    const redis = await startPrivateRedis();
    stops.push(redis.stop);
    const bridge = await startBridge({ port: 0, token: TOKEN, redisUrl: redis.url });
    stops.push(bridge.close);
    direct[name] = new Redis(redis.url);
    const suffix = name === "" ? "" : `_${name}`;
    bindings[`UPSTASH_REDIS_REST_URL${suffix}`] = bridge.url;
    bindings[`UPSTASH_REDIS_REST_TOKEN${suffix}`] = TOKEN;
  }
  const scriptPath = await wranglerBundle(join(dir, "ours"));
  // Two isolates that share nothing but the stores, each with wrangler.toml's date and flags.
  for (let i = 0; i < 2; i++) workers.push(await serveWorker({ scriptPath, bindings }));
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.dispose()));
  for (const redis of Object.values(direct)) redis.disconnect();
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

async function check(worker: Served, key: string): Promise<{ status: number; body: Answer }> {
  const res = await fetch(`${worker.url}/check`, {
    method: "POST",
    headers: { authorization: `Bearer ${LIMITER_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ rule: "api", key }),
  });
  return { status: res.status, body: (await res.json()) as Answer };
}

/**
 * Which shards' databases hold the log of a client key: a header rule counts a key given to
 * /check raw under its SHA-256, as the proxy counts the header.
 */
async function holders(key: string): Promise<string[]> {
  const digest = createHash("sha256").update(key).digest("hex");
  const found: string[] = [];
  for (const name of SHARDS) {
    const keys = await (direct[name] as Redis).keys(`*${digest}*`);
    if (keys.length > 0) found.push(name);
  }
  return found;
}

describe("three shards behind two workers", () => {
  it("a burst of 2 000 on one key over both workers admits exactly 100, on one shard", async () => {
    const key = `burst-${Date.now()}`;
    for (const worker of workers) expect((await check(worker, `warm-${key}`)).status).toBe(200);
    const results = await Promise.all(
      Array.from({ length: 2_000 }, (_, i) => check(workers[i % 2] as Served, key)),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(100);
    expect(results.filter((r) => r.status === 429)).toHaveLength(1_900);
    const admitted = results.filter((r) => r.body.allowed);
    expect(new Set(admitted.map((r) => r.body.source))).toEqual(new Set(["redis"]));
    const shards = new Set(results.map((r) => r.body.shard));
    expect(shards.size).toBe(1);
    const [shard] = [...shards];
    expect(SHARDS).toContain(shard);
    expect(await holders(key)).toEqual([shard]);
  }, 120_000);

  it("spreads keys over every shard, each key on one shard whichever worker decides it", async () => {
    const run = `spread-${Date.now()}`;
    const keys = Array.from({ length: 300 }, (_, i) => `${run}-${i}`);
    const first: Awaited<ReturnType<typeof check>>[] = [];
    const second: Awaited<ReturnType<typeof check>>[] = [];
    for (let i = 0; i < keys.length; i += 50) {
      const batch = keys.slice(i, i + 50);
      first.push(...(await Promise.all(batch.map((key) => check(workers[0] as Served, key)))));
      second.push(...(await Promise.all(batch.map((key) => check(workers[1] as Served, key)))));
    }
    const counts = new Map<string, number>();
    for (const [i, answer] of first.entries()) {
      expect(answer.status).toBe(200);
      // Decided by Redis (on a loaded machine a timed-out call would be the fallback's).
      expect(answer.body.source, JSON.stringify(answer.body)).toBe("redis");
      const shard = answer.body.shard as string;
      expect(second[i]?.body.shard).toBe(shard);
      counts.set(shard, (counts.get(shard) ?? 0) + 1);
    }
    // Rendezvous hashing: about a third each (300 keys: each well over 60).
    expect([...counts.keys()].sort()).toEqual([...SHARDS].sort());
    for (const count of counts.values()) expect(count).toBeGreaterThan(60);
    // The log of each key is on its shard's database and nowhere else.
    for (const [i, key] of keys.slice(0, 12).entries()) {
      expect(await holders(key), JSON.stringify(first[i]?.body)).toEqual([first[i]?.body.shard]);
    }
  }, 120_000);
});
