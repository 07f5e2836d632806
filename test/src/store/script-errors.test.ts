// A failed script call is reported as the command, the script's SHA-1 and the store's own words,
// bounded: never the script. @upstash/redis puts the whole request in its error message, and an
// EVAL carries the script's text (the evaluate script is ~26 KB); that message reached log lines
// whole (the admin route's, a breaker event, a refund's outcome).
import { describe, expect, it } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { storageKey } from "../../../src/store/keys";
import { runScript, StoreCommandError, scriptSha } from "../../../src/store/script-runner";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("script-errors");
const store = testStore(5_000);

describe("a store error from a script call", () => {
  it("EVAL of a 30 KB script that fails: the command, its SHA and the store's words, about 1 KB", async () => {
    const key = `${prefix}:not-a-number`;
    await redis.set(key, "text");
    // A script this Redis has never seen (EVALSHA answers NOSCRIPT, then EVAL sends the text),
    // long like ours, failing in Redis.
    const script = `-- ${crypto.randomUUID()} ${"padding ".repeat(3_750)}\nreturn redis.call('INCR', KEYS[1])`;
    const failed = await runScript(store, script, [key], []).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failed).toBeInstanceOf(StoreCommandError);
    const error = failed as StoreCommandError;
    expect(error.command).toBe("EVAL");
    expect(error.sha).toBe(await scriptSha(script));
    expect(error.said).toMatch(/ERR value is not an integer or out of range/);
    expect(error.message.startsWith(`EVAL ${error.sha}: `)).toBe(true);
    expect(error.message).toContain("ERR value is not an integer or out of range");
    expect(error.message).not.toContain("padding");
    expect(String(error).length).toBeLessThanOrEqual(1_024);
  });

  it("reaches the breaker's event (one log line) bounded, the same way", async () => {
    const events: BreakerEvent[] = [];
    const limiter = createLimiter({
      store,
      prefix,
      breaker: { failureThreshold: 1 },
      fallback: false,
      onBreakerChange: (event) => events.push(event),
      onClockChange: () => {},
    });
    const request = {
      policy: "wrongtype",
      key: "k",
      limit: 5,
      windowMs: 60_000,
      algorithm: "fixed-window" as const,
    };
    // A key holding another type: the script fails in Redis (WRONGTYPE), a store failure.
    await redis.hset(storageKey(prefix, request.policy, request.key, request.algorithm), {
      f: "v",
    });
    expect(await limiter.limit(request)).toMatchObject({ source: "fail-open" });
    expect(events[0]).toMatchObject({ to: "open" });
    const said = events[0]?.error ?? "";
    expect(said).toMatch(/^StoreCommandError: EVAL(SHA)? [0-9a-f]{40}: .*WRONGTYPE/);
    expect(said.length).toBeLessThanOrEqual(1_024);
  });
});
