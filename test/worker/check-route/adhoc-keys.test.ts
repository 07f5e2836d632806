/**
 * An ad-hoc /check log is per client key, window, limit and layout: a caller switching one key's
 * limit or layout gets another log, so no call reads, converts or rewrites a log another limit
 * wrote (a full ring of 100 000 turned into a sorted set was 10 MB and ~300 ms of Redis; read at
 * limit 1, ~50 ms a call). Real worker, real Redis through the bridge.
 */
import { describe, expect, it } from "vitest";
import { adhocPolicyName } from "../../../src/http/check-request";
import { storageKey } from "../../../src/store/keys";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { postCheck, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("adhoc-keys");
const run = crypto.randomUUID().slice(0, 8);
const worker = workerWith({ LIMITER_CONFIG: JSON.stringify({ prefix, rules: [] }) });

const WEEK = 7 * 86_400_000;

describe("ad-hoc logs across a limit or layout switch", () => {
  it("a full 100 000 ring, then a sorted set of 8 000 and a ring of 1 on the key: each its own log, the ring untouched", async () => {
    const key = `victim-${run}`;
    const ring = storageKey(prefix, adhocPolicyName(WEEK, 100_000, "sliding-log"), key);
    const full = await postCheck(worker, { key, limit: 100_000, window: "7d", cost: 100_000 });
    expect(full.status).toBe(200);
    const ringBytes = await redis.strlen(ring);
    expect(ringBytes).toBeGreaterThan(400_000);

    const zset = await postCheck(worker, {
      key,
      limit: 8_000,
      window: "7d",
      algorithm: "sliding-log-zset",
    });
    expect(zset.status).toBe(200);
    expect(await zset.json()).toMatchObject({
      allowed: true,
      remaining: 7_999,
      policy: "check.604800000ms.8000.zset",
    });
    const one = await postCheck(worker, { key, limit: 1, window: "7d" });
    expect(await one.json()).toMatchObject({ allowed: true, remaining: 0 });

    // The ring is still the ring, byte for byte as long; the others hold their own units only.
    expect(await redis.type(ring)).toBe("string");
    expect(await redis.strlen(ring)).toBe(ringBytes);
    const zsetKey = storageKey(
      prefix,
      adhocPolicyName(WEEK, 8_000, "sliding-log-zset"),
      key,
      "sliding-log-zset",
    );
    expect(await redis.zcard(zsetKey)).toBe(1);
    expect(
      await logCount(redis, storageKey(prefix, adhocPolicyName(WEEK, 1, "sliding-log"), key)),
    ).toBe(1);
    // And the 100 000 log still denies: nothing another limit did freed it.
    const again = await postCheck(worker, { key, limit: 100_000, window: "7d" });
    expect(again.status).toBe(429);
    await redis.del(ring, zsetKey);
  });
});
