import { Redis } from "@upstash/redis/cloudflare";
import { inject } from "vitest";

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
