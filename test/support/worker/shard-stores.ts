/// <reference path="../provided.d.ts" />
// Three shards for the shards tests: the test bridge (database 0) and the two shard bridges
// (databases 1 and 2 of the same Redis: separate key spaces). Keys are deleted after the file.
import { Redis } from "@upstash/redis/cloudflare";
import { afterAll, inject } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { manualClock, storeAt } from "./fault-control";
import { deleteKeys, uniquePrefix } from "./redis";

/** The three shard URLs, database 0 first. */
export function shardUrls(): string[] {
  return [inject("bridgeUrl"), ...inject("shardBridgeUrls")];
}

/** A plain client per shard, for inspection. */
export function shardRedis(): Redis[] {
  return shardUrls().map(
    (url) =>
      new Redis({
        url,
        token: inject("bridgeToken"),
        retry: { retries: 0 },
        enableTelemetry: false,
      }),
  );
}

/** A prefix for one test file whose keys are deleted from every shard after its tests. */
export function shardPrefix(label: string): string {
  const prefix = uniquePrefix(label);
  afterAll(async () => {
    await Promise.all(shardRedis().map((redis) => deleteKeys(redis, `${prefix}*`)));
  });
  return prefix;
}

/**
 * Tells the three shards (names "", "B", "C", as the worker tests bind them) of a reshard before
 * its instant, as the first isolate on the new config does (docs/shards.md "Which mistakes are
 * refused"): a library limiter on `prefix`, its clock (passed to Redis) a second before `at`.
 * A test that deploys a reshard whose instant has passed needs this first: told to the shards
 * only after its instant, a reshard is refused.
 */
export async function announceReshard(
  prefix: string,
  shards: readonly string[],
  from: readonly string[],
  at: number,
): Promise<void> {
  const urls = shardUrls();
  const byName: Record<string, string> = {
    "": urls[0] as string,
    B: urls[1] as string,
    C: urls[2] as string,
  };
  const client = (name: string) => storeAt(byName[name] as string, 2_000);
  const limiter = createLimiter({
    prefix,
    clock: "caller",
    now: () => at - 1_000,
    store: Object.fromEntries(shards.map((name) => [name, client(name)])),
    reshard: {
      from,
      at,
      stores: Object.fromEntries(
        from.filter((name) => !shards.includes(name)).map((name) => [name, client(name)]),
      ),
    },
  });
  const told: Promise<unknown>[] = [];
  await limiter.limit(
    { policy: "announce", key: "announce", limit: 1, windowMs: 1_000 },
    { waitUntil: (promise) => told.push(promise) },
  );
  await Promise.all(told);
}

/**
 * An isolate on the old config (shards 0 and 1) and, from `another()`, isolates on the new
 * (0, 1, 2, with the reshard at 10 s from now on a manual clock passed to Redis), all under
 * `prefix`; the first new one (`fresh`) has told the shards of the reshard before its instant
 * (told only after it, a reshard is refused: docs/shards.md "Which mistakes are refused").
 * `firstUrl` puts another store (a fault server) in front of shard 0.
 */
export async function reshardAhead(prefix: string, timeoutMs: number, firstUrl?: string) {
  const clock = manualClock();
  const at = clock.now() + 10_000;
  const urls = shardUrls();
  const stores = () => [
    storeAt(firstUrl ?? (urls[0] as string), timeoutMs),
    storeAt(urls[1] as string, timeoutMs),
    storeAt(urls[2] as string, timeoutMs),
  ];
  const common = { prefix, clock: "caller" as const, now: clock.now, timeoutMs };
  const old = createLimiter({ ...common, store: stores().slice(0, 2) });
  const another = () =>
    createLimiter({ ...common, store: stores(), reshard: { from: ["0", "1"], at } });
  const fresh = another();
  const told: Promise<unknown>[] = [];
  await fresh.limit(
    { policy: "announce", key: "announce", limit: 1, windowMs: 1_000 },
    { waitUntil: (promise) => told.push(promise) },
  );
  await Promise.all(told);
  return { clock, at, settled: at + timeoutMs, old, fresh, another };
}
