/**
 * An ad-hoc /check log is per client key, window and limit: a caller switching one key's limit
 * gets another log, so no call reads or rewrites a log another limit wrote (a full ring of 100 000
 * read at limit 1 was ~50 ms a call). Real worker, real Redis through the bridge.
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

describe("ad-hoc logs across a limit switch", () => {
  it("a full 100 000 ring, then a ring of 1 on the key: each its own log, the full one untouched", async () => {
    const key = `victim-${run}`;
    const ring = storageKey(prefix, adhocPolicyName(WEEK, 100_000), key);
    const full = await postCheck(worker, { key, limit: 100_000, window: "7d", cost: 100_000 });
    expect(full.status).toBe(200);
    const ringBytes = await redis.strlen(ring);
    expect(ringBytes).toBeGreaterThan(400_000);

    const one = await postCheck(worker, { key, limit: 1, window: "7d" });
    expect(await one.json()).toMatchObject({
      allowed: true,
      remaining: 0,
      policy: "check.604800000ms.1",
    });

    // The ring is still the ring, byte for byte as long; the other holds its own unit only.
    expect(await redis.type(ring)).toBe("string");
    expect(await redis.strlen(ring)).toBe(ringBytes);
    const small = storageKey(prefix, adhocPolicyName(WEEK, 1), key);
    expect(await logCount(redis, small)).toBe(1);
    // And the 100 000 log still denies: nothing another limit did freed it.
    const again = await postCheck(worker, { key, limit: 100_000, window: "7d" });
    expect(again.status).toBe(429);
    await redis.del(ring, small);
  });
});
