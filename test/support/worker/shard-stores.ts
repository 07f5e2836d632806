/// <reference path="../provided.d.ts" />
// Three shards for the shards tests: the test bridge (database 0) and the two shard bridges
// (databases 1 and 2 of the same Redis: separate key spaces). Keys are deleted after the file.
import { Redis } from "@upstash/redis/cloudflare";
import { afterAll, inject } from "vitest";
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
