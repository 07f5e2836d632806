/**
 * A concurrency slot of a client key longer than MAX_KEY_LENGTH (counted under its digest, which
 * the slot carries as its key): given back by the middleware when the request ends, by the
 * library from the decision's slot, and from the local fallback when the store is down.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { boundedKey } from "../../../src/bounded-key";
import { createLimiter, rateLimit } from "../../../src/index";
import { storageKey } from "../../../src/store/keys";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("long-key-slots");
const limiter = createLimiter({ store: testStore(10_000), prefix, timeoutMs: 10_000 });

/** Polls (bounded) until the key holds `n` slots: a release runs off the request path. */
async function heldBecomes(key: string, n: number): Promise<number> {
  const redisKey = storageKey(prefix, "long-slots", await boundedKey(key), "concurrency");
  const deadline = Date.now() + 5_000;
  let now = await redis.zcard(redisKey);
  while (now !== n && Date.now() < deadline) {
    await redis.ping();
    now = await redis.zcard(redisKey);
  }
  return now;
}

describe("a long client key's concurrency slot", () => {
  it("is given back by the middleware when the request ends", async () => {
    // A bearer token of 600 characters: counted under its digest.
    const key = `token-${crypto.randomUUID()}${"t".repeat(600)}`;
    const hono = new Hono();
    hono.use(
      rateLimit({
        limiter,
        rules: { name: "long-slots", algorithm: "concurrency", limit: 1, timeout: "30s" },
        key: () => key,
      }),
    );
    hono.get("/plain", (c) => c.text("plain"));
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const response = await hono.request("/plain");
      statuses.push(response.status);
      await response.text();
      await heldBecomes(key, 0);
    }
    // One at a time, each ended before the next: every one admitted (control: a short key).
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
    expect(await heldBecomes(key, 0)).toBe(0);
  });

  it("is given back by the library from the decision's slot", async () => {
    const key = `lib-${crypto.randomUUID()}${"l".repeat(600)}`;
    const request = {
      policy: "long-slots",
      key,
      limit: 1,
      windowMs: 30_000,
      algorithm: "concurrency" as const,
    };
    const first = await limiter.limit(request);
    expect(first.allowed).toBe(true);
    expect(await limiter.release(first.slot as NonNullable<typeof first.slot>)).toMatchObject({
      released: [true],
    });
    expect((await limiter.limit(request)).allowed).toBe(true);
  });

  it("taken from the fallback while the store is down, is given back there", async () => {
    const scenario = await faultScenario("error-500");
    const down = createLimiter({ store: storeAt(scenario.url, 2_000), prefix, timeoutMs: 2_000 });
    const key = `down-${crypto.randomUUID()}${"d".repeat(600)}`;
    const request = {
      policy: "long-slots",
      key,
      limit: 1,
      windowMs: 30_000,
      algorithm: "concurrency" as const,
    };
    let admitted = 0;
    let released = 0;
    for (let i = 0; i < 5; i++) {
      const decided = await down.limit(request);
      if (!decided.allowed) continue;
      admitted++;
      expect(decided.source).toBe("fallback");
      const slot = decided.slot as NonNullable<typeof decided.slot>;
      if ((await down.release(slot)).released[0]) released++;
    }
    // Control, a short key: 5 admitted, 5 released.
    expect({ admitted, released }).toEqual({ admitted: 5, released: 5 });
  });
});
