import { Redis } from "@upstash/redis/cloudflare";
import { afterAll, inject } from "vitest";
import { createStoreClient } from "../../../src/store/upstash-client";

/** A real @upstash/redis client on the test bridge (real Redis), for setup and inspection. */
export function testRedis(): Redis {
  return new Redis({
    url: inject("bridgeUrl"),
    token: inject("bridgeToken"),
    retry: { retries: 0 },
    enableTelemetry: false,
  });
}

/** A key prefix no other test (or person) on this shared Redis uses. */
export function uniquePrefix(label: string): string {
  return `test-${label}-${crypto.randomUUID()}`;
}

/** Deletes every key under `prefix` (tests share one Redis: leave nothing behind). */
export async function deleteKeys(redis: Redis, pattern: string): Promise<number> {
  let cursor = "0";
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, { match: pattern, count: 1000 });
    cursor = String(next);
    if (keys.length > 0) deleted += await redis.del(...keys);
  } while (cursor !== "0");
  return deleted;
}

/**
 * The deadline of a store call in a test that is not about deadlines (a limiter's `timeoutMs`, a
 * store client's): on a busy machine a call past the default 500 ms would turn the store's
 * decision into the fallback's, and change the source and counts the test asserts.
 */
export const TEST_DEADLINE_MS = 10_000;

/** A store client configured as the worker configures it (one per "isolate"), on the test bridge. */
export function testStore(timeoutMs = TEST_DEADLINE_MS) {
  return createStoreClient({ url: inject("bridgeUrl"), token: inject("bridgeToken"), timeoutMs });
}

/** A unique key prefix for one test file; its keys are deleted after the file's tests. */
export function scopedPrefix(label: string): string {
  const prefix = uniquePrefix(label);
  afterAll(async () => {
    await deleteKeys(testRedis(), `${prefix}*`);
  });
  return prefix;
}
