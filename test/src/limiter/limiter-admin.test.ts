// What a limiter does to its keys besides deciding (docs/plans.md, docs/check-api.md): peek,
// reset, overrides, key and network blocks, their listing and the network blocks' copy, all on
// the prefix, clock and store it was built with.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import type { LimitRequest } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { regionKey } from "../../../src/store/region-lease";
import { PolicyBoundsError } from "../../../src/store/script-inputs";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, TEST_DEADLINE_MS, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("limiter-admin");
const other = scopedPrefix("limiter-admin-other");

/**
 * A limiter on the test store and this file's prefix. A long deadline (these tests are not about
 * deadlines): a busy machine's slow answer must not turn a "redis" decision into the fallback's.
 */
const limiterWith = (options: Partial<LimiterOptions> = {}) =>
  createLimiter({ store: testStore(), prefix, timeoutMs: TEST_DEADLINE_MS, ...options });

const request = (key: string, extra: Partial<LimitRequest> = {}): LimitRequest => ({
  policy: "admin",
  key,
  limit: 3,
  windowMs: 60_000,
  overrides: true,
  ...extra,
});

describe("one handle: plans on the limiter's own prefix", () => {
  it("an override set through limiter.overrides is what limiter.limit decides by; removed, the request's limit again", async () => {
    const limiter = limiterWith({ denialCache: false });
    const key = `k-${crypto.randomUUID()}`;
    expect(await limiter.overrides.set("admin", key, { limit: 10 })).toEqual({
      ok: true,
      existed: false,
    });
    expect(await limiter.limit(request(key))).toMatchObject({ allowed: true, limit: 10 });
    expect(await limiter.overrides.remove("admin", key)).toEqual({ ok: true, existed: true });
    expect(await limiter.limit(request(key))).toMatchObject({ allowed: true, limit: 3 });
  });

  it("two limiters with two prefixes on one store do not see each other's overrides or blocks", async () => {
    const store = testStore();
    const mine = limiterWith({ store, denialCache: false });
    const theirs = limiterWith({ store, prefix: other, denialCache: false });
    const key = `k-${crypto.randomUUID()}`;
    await theirs.overrides.set("admin", key, { limit: 0 });
    await theirs.blocks.add({ policy: "admin", key: `${key}-blocked` });
    expect(await mine.limit(request(key))).toMatchObject({ allowed: true, limit: 3 });
    expect((await mine.limit(request(`${key}-blocked`))).source).toBe("redis");
    expect(await theirs.limit(request(key))).toMatchObject({ allowed: false, limit: 0 });
    expect((await theirs.limit(request(`${key}-blocked`))).source).toBe("block");
    const listed = await mine.plans.list({ what: "overrides", policy: "admin", count: 1_000 });
    expect(listed.entries.map((entry) => entry.value)).not.toContain(key);
    const theirList = await theirs.plans.list({ what: "overrides", policy: "admin", count: 1_000 });
    expect(theirList.entries).toContainEqual({
      type: "override",
      by: "key",
      policy: "admin",
      value: key,
      limit: 0,
    });
  });

  it("refuses bad input as a result, naming the field, without asking the store", async () => {
    const limiter = limiterWith();
    expect(await limiter.overrides.set("bad name", "k", { limit: 1 })).toMatchObject({
      ok: false,
      field: "rule",
    });
    expect(await limiter.blocks.add({ policy: "admin", key: "k" }, { seconds: 0 })).toMatchObject({
      ok: false,
      field: "seconds",
    });
    expect(await limiter.blocks.add([])).toMatchObject({ ok: false, field: "key" });
    expect(
      await limiter.networks.add({ by: "mac" as "ip", value: "00:11:22:33:44:55" }),
    ).toMatchObject({ ok: false, field: "by" });
  });

  it("normalizes a network's value before it is stored, and refuses one that is none", async () => {
    const limiter = limiterWith();
    // Any spelling of one network is one block: the answer says which it is as stored.
    expect(await limiter.networks.add({ by: "ip", value: "192.0.2.77/24" })).toMatchObject({
      ok: true,
      value: "192.0.2.0/24",
    });
    expect(await limiter.networks.add({ by: "asn", value: 13335 })).toMatchObject({
      ok: true,
      value: "13335",
    });
    expect(await limiter.networks.remove({ by: "asn", value: "AS13335" })).toEqual({
      ok: true,
      existed: true,
      value: "13335",
    });
    expect(await limiter.networks.add({ by: "country", value: "UK" })).toMatchObject({
      ok: false,
      field: "country",
    });
    expect(await limiter.networks.add({ by: "ip", value: "0.0.0.0/0" })).toMatchObject({
      ok: false,
      field: "ip",
    });
    const listed = await limiter.plans.list({ what: "network" });
    expect(listed.entries.map((entry) => entry.value)).toEqual(["192.0.2.0/24"]);
    await limiter.networks.remove({ by: "ip", value: "192.0.2.0/24" });
  });
});

describe("peek", () => {
  it("says what a request would get, counting nothing; at the key's override; blocked as blocked", async () => {
    const limiter = limiterWith({ denialCache: false });
    const key = `k-${crypto.randomUUID()}`;
    await limiter.limit(request(key));
    expect(await limiter.peek(request(key))).toMatchObject({
      peeked: true,
      allowed: true,
      limit: 3,
      remaining: 2,
      source: "redis",
      policy: "admin",
      algorithm: "sliding-log",
    });
    expect(await logCount(redis, storageKey(prefix, "admin", key))).toBe(1);
    await limiter.overrides.set("admin", key, { limit: 1 });
    expect(await limiter.peek(request(key))).toMatchObject({
      peeked: true,
      allowed: false,
      limit: 1,
      remaining: 0,
    });
    await limiter.blocks.add({ policy: "admin", key }, { seconds: 60 });
    const blocked = await limiter.peek(request(key));
    expect(blocked).toMatchObject({ peeked: true, allowed: false, source: "block", blocked: true });
    expect(blocked.peeked && blocked.resetAfterMs).toBeGreaterThan(50_000);
    // A request without `overrides` does not read them.
    expect(await limiter.peek(request(key, { overrides: false }))).toMatchObject({
      allowed: true,
      limit: 3,
      remaining: 2,
    });
  });

  it("answers another algorithm as not peeked, and rejects a request out of bounds like limit", async () => {
    const limiter = limiterWith();
    expect(await limiter.peek(request("k", { algorithm: "token-bucket" }))).toMatchObject({
      peeked: false,
      policy: "admin",
      algorithm: "token-bucket",
      detail: expect.stringContaining("sliding log only"),
    });
    await expect(limiter.peek(request("k", { limit: 0 }))).rejects.toBeInstanceOf(
      PolicyBoundsError,
    );
  });
});

describe("reset", () => {
  it("forgets the count, and this isolate's cached denial of the key", async () => {
    const limiter = limiterWith();
    const key = `k-${crypto.randomUUID()}`;
    for (let i = 0; i < 3; i++) await limiter.limit(request(key));
    // The third answer proved the key full: this isolate denies from its cache.
    expect(await limiter.limit(request(key))).toMatchObject({ allowed: false, source: "cache" });
    expect(await limiter.reset(request(key))).toEqual({ existed: true, regionsFailed: [] });
    expect(await limiter.limit(request(key))).toMatchObject({
      allowed: true,
      remaining: 2,
      source: "redis",
    });
    expect(await limiter.reset(request(`${key}-never`))).toEqual({
      existed: false,
      regionsFailed: [],
    });
  });

  it("forgets every region's copy of the key: its leases go, the forget's mark stays", async () => {
    // The region's store is the same bridge as home's (its keys are the home keys + ":region").
    const limiter = limiterWith({ regions: { stores: { lab: testStore() } } });
    const key = `k-${crypto.randomUUID()}`;
    const leased = { ...request(key), overrides: false, limit: 1_000, lease: true };
    const pending: Promise<unknown>[] = [];
    for (let i = 0; i < 12; i++) {
      await limiter.limitAll([leased], { region: "lab", waitUntil: (p) => pending.push(p) });
      await Promise.allSettled(pending.splice(0));
    }
    const inRegion = regionKey(storageKey(prefix, "admin", key));
    const before = await redis.hkeys(inRegion);
    // Leases live in the region's hash beside its clock fields.
    expect(before.filter((field) => !["t", "o", "g"].includes(field)).length).toBeGreaterThan(0);
    await limiter.endLeases();
    expect(await limiter.reset(leased)).toMatchObject({ existed: true, regionsFailed: [] });
    // What is left is the forget's mark: the clock, no lease.
    const after = await redis.hkeys(inRegion);
    expect(after.filter((field) => !["t", "o", "g"].includes(field))).toEqual([]);
  });

  it("reports a region that does not answer, and still resets home", async () => {
    const unreachable = { evalsha: () => Promise.reject(new Error("down")) };
    const limiter = limiterWith({
      regions: {
        stores: { far: { ...unreachable, eval: unreachable.evalsha } as never },
      },
    });
    const key = `k-${crypto.randomUUID()}`;
    await limiter.limit(request(key, { overrides: false }));
    const outcome = await limiter.reset(request(key, { overrides: false }));
    expect(outcome.existed).toBe(true);
    expect(outcome.regionsFailed).toHaveLength(1);
    expect(outcome.regionsFailed[0]?.region).toBe("far");
    expect(await logCount(redis, storageKey(prefix, "admin", key))).toBe(0);
  });
});

describe("networkBlocks()", () => {
  it("one copy per limiter and options; a change through the limiter applies to it at once", async () => {
    const own = `${prefix}-net`;
    const limiter = limiterWith({ prefix: own });
    const copy = limiter.networkBlocks();
    expect(limiter.networkBlocks()).toBe(copy);
    expect(limiter.networkBlocks({ refreshMs: 1_000 })).toBe(copy);
    expect(limiter.networkBlocks({ refreshMs: 60_000 })).not.toBe(copy);
    expect(limiterWith({ prefix: own }).networkBlocks()).not.toBe(copy);
    expect(await copy.match({ ip: "192.0.2.9" }, ["api"])).toBeUndefined();
    // Loaded a moment ago (refreshMs 1 s): without the invalidation the old copy would decide.
    expect(await limiter.networks.add({ by: "ip", value: "192.0.2.0/24" })).toEqual({
      ok: true,
      existed: false,
      value: "192.0.2.0/24",
    });
    expect(await copy.match({ ip: "192.0.2.9" }, ["api"])).toMatchObject({
      by: "ip",
      value: "192.0.2.0/24",
    });
    const slow = limiter.networkBlocks({ refreshMs: 60_000 });
    expect(await slow.match({ ip: "192.0.2.9" }, ["api"])).toBeDefined();
    await limiter.networks.remove({ by: "ip", value: "192.0.2.0/24" });
    expect(await slow.match({ ip: "192.0.2.9" }, ["api"])).toBeUndefined();
    const listed = await limiter.plans.list({ what: "network" });
    expect(listed.entries).toEqual([]);
  });
});
