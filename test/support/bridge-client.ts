// Shared by the bridge tests: a real @upstash/redis client on the bridge the global setup started,
// raw access for what the client hides, and cleanup that touches only the caller's own keys.
import { randomUUID } from "node:crypto";
import { Redis } from "@upstash/redis";
import { inject } from "vitest";

/** One attempt, no telemetry: a failure shows at once instead of after ~4 s of retries. */
export function bridgeRedis(options: { token?: string; url?: string } = {}): Redis {
  return new Redis({
    url: options.url ?? inject("bridgeUrl"),
    token: options.token ?? inject("bridgeToken"),
    retry: { retries: 0 },
    enableTelemetry: false,
  });
}

/** A key prefix no other test file (or person) shares. */
export function uniquePrefix(name: string): string {
  return `bridge-test:${name}:${randomUUID()}:`;
}

/** POSTs a raw body to the bridge; returns the status and the parsed JSON answer. */
export async function postRaw(
  path: "/" | "/pipeline" | "/multi-exec" | (string & {}),
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown; headers: Headers }> {
  const res = await fetch(new URL(path, inject("bridgeUrl")), {
    method: "POST",
    headers: {
      authorization: `Bearer ${inject("bridgeToken")}`,
      "content-type": "application/json",
      ...headers,
    },
    body,
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), headers: res.headers };
}

/** Deletes every key under the prefix (SCAN, never FLUSH: the Redis is shared). */
export async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = "0";
  do {
    const [next, keys] = await redis.scan(cursor, { match: `${prefix}*`, count: 1000 });
    if (keys.length > 0) await redis.del(...keys);
    cursor = String(next);
  } while (cursor !== "0");
}
