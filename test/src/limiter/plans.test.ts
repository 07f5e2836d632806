import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { OVERRIDE_CLAIM_MAX_MS } from "../../../src/limiter/key-blocks";
import type { LimitRequest } from "../../../src/limiter/types";
import type { Algorithm } from "../../../src/store/algorithm";
import { storageKey } from "../../../src/store/keys";
import { plansKey, writePlan } from "../../../src/store/plans";
import { logCount } from "../../support/worker/log-state";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix, TEST_DEADLINE_MS, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("plans");
const admin = testStore();

/**
 * One "isolate": its own limiter (own caches) on its own store client, on a clock we move. The
 * clock starts a second into a minute, so a fixed window (aligned to the minute) never rolls
 * over between a test's first and last decision, whenever the test runs.
 */
function isolate() {
  let clock = Math.floor(Date.now() / 60_000) * 60_000 + 1_000;
  const limiter = createLimiter({
    store: testStore(),
    prefix,
    clock: "caller",
    now: () => clock,
    timeoutMs: TEST_DEADLINE_MS,
  });
  return { limiter, tick: (ms: number) => (clock += ms) };
}

const request = (
  key: string,
  limit: number,
  algorithm: Algorithm = "sliding-log",
  extra: Partial<LimitRequest> = {},
): LimitRequest => ({
  policy: "plan",
  key,
  limit,
  windowMs: 60_000,
  algorithm,
  overrides: true,
  ...extra,
});

describe("limit overrides read inside the decision script", () => {
  // (The token bucket keeps tokens, not a count: a raised limit refills faster, tested below.)
  for (const algorithm of ["sliding-log", "fixed-window"] as const) {
    it(`${algorithm}: set through one isolate, decided by it in another; removed, the rule's limit again`, async () => {
      const a = isolate();
      const b = isolate();
      const key = `k-${crypto.randomUUID()}`;
      expect(await b.limiter.limit(request(key, 2, algorithm))).toMatchObject({
        allowed: true,
        limit: 2,
        remaining: 1,
      });
      expect(
        await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 5, algorithm }),
      ).toEqual({ ok: true, existed: false });
      // A's change applies at B's next store decision: the headers' limit is the override's.
      const raised = await b.limiter.limit(request(key, 2, algorithm));
      expect(raised).toMatchObject({ allowed: true, limit: 5, remaining: 3, source: "redis" });
      for (let i = 0; i < 3; i++)
        expect((await a.limiter.limit(request(key, 2, algorithm))).allowed).toBe(true);
      const denied = await b.limiter.limit(request(key, 2, algorithm));
      expect(denied).toMatchObject({ allowed: false, limit: 5, source: "redis" });
      expect(await plansAdmin(admin, prefix).overrides.remove("plan", key)).toEqual({
        ok: true,
        existed: true,
      });
      // B's cached denial holds at most OVERRIDE_CLAIM_MAX_MS; then the store says limit 2.
      b.tick(OVERRIDE_CLAIM_MAX_MS);
      expect(await b.limiter.limit(request(key, 2, algorithm))).toMatchObject({
        allowed: false,
        limit: 2,
        source: "redis",
      });
    });
  }

  it("an override of 0 denies without counting; a rule without `overrides` ignores overrides", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 0 });
    const denied = await a.limiter.limit(request(key, 10));
    expect(denied).toMatchObject({ allowed: false, limit: 0, remaining: 0 });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(await logCount(redis, storageKey(prefix, "plan", key))).toBe(0);
    const plain = await isolate().limiter.limit(
      request(key, 10, "sliding-log", { overrides: false }),
    );
    expect(plain).toMatchObject({ allowed: true, limit: 10 });
  });

  it("token-bucket: the override is its capacity; 0 refuses everything", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).overrides.set("plan", key, {
      limit: 7,
      algorithm: "token-bucket",
    });
    expect(await a.limiter.limit(request(key, 2, "token-bucket"))).toMatchObject({
      allowed: true,
      limit: 7,
      remaining: 6,
    });
    await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 0 });
    expect(await a.limiter.limit(request(key, 2, "token-bucket"))).toMatchObject({
      allowed: false,
      limit: 0,
    });
  });

  it("an override below the cost denies; a cost within it is admitted", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 3 });
    expect((await a.limiter.limit(request(key, 10, "sliding-log", { cost: 4 }))).allowed).toBe(
      false,
    );
    expect(await a.limiter.limit(request(key, 10, "sliding-log", { cost: 3 }))).toMatchObject({
      allowed: true,
      remaining: 0,
    });
  });

  it("refuses an override past the algorithm's bounds, naming the field", async () => {
    const key = `k-${crypto.randomUUID()}`;
    expect(
      await plansAdmin(admin, prefix).overrides.set("plan", key, {
        limit: 10_001,
        algorithm: "concurrency",
      }),
    ).toMatchObject({ ok: false, field: "limit" });
    expect(await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: -1 })).toMatchObject(
      {
        ok: false,
        field: "limit",
      },
    );
    expect(
      await plansAdmin(admin, prefix).overrides.set("bad name", key, { limit: 1 }),
    ).toMatchObject({
      ok: false,
      field: "rule",
    });
  });

  it("an override rule is never leased (a lease would spend past a change)", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    for (let i = 0; i < 20; i++) {
      const d = await a.limiter.limit(request(key, 1000, "sliding-log", { lease: true }));
      expect(d.source).toBe("redis");
    }
  });
});

describe("overrides stay exact", () => {
  it("a burst of 300 through two isolates at an override of 50 (rule: 10) admits exactly 50", async () => {
    const [a, b] = [isolate(), isolate()];
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 50 });
    const decisions = await Promise.all(
      Array.from({ length: 300 }, (_, i) => (i % 2 ? a : b).limiter.limit(request(key, 10))),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(50);
    expect(await logCount(redis, storageKey(prefix, "plan", key))).toBe(50);
  });

  it("a request id's retry is replayed with the limit it was decided by", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).overrides.set("plan", key, { limit: 8 });
    const first = await a.limiter.limitAll([request(key, 2)], { requestId: `r-${key}` });
    const retry = await a.limiter.limitAll([request(key, 2)], { requestId: `r-${key}` });
    expect(first.decisions[0]).toMatchObject({ allowed: true, limit: 8, remaining: 7 });
    expect(retry).toMatchObject({ replayed: true, allowed: true });
    expect(retry.decisions[0]).toMatchObject({ limit: 8, remaining: 7 });
    expect(await logCount(redis, storageKey(prefix, "plan", key))).toBe(1);
  });
});

describe("key blocks", () => {
  it("a block set through one isolate refuses at the other's next store decision, counting nothing", async () => {
    const a = isolate();
    const b = isolate();
    const key = `k-${crypto.randomUUID()}`;
    expect((await b.limiter.limit(request(key, 5))).allowed).toBe(true);
    expect(await plansAdmin(admin, prefix).blocks.add({ policy: "plan", key })).toEqual({
      ok: true,
      existed: false,
    });
    const refused = await b.limiter.limitAll([request(key, 5)]);
    expect(refused).toMatchObject({
      allowed: false,
      deniedBy: "plan",
      blocked: { policy: "plan", key },
    });
    expect(refused.blocked?.until).toBeUndefined();
    expect(refused.decisions[0]).toMatchObject({ allowed: false, source: "block" });
    expect(await logCount(redis, storageKey(prefix, "plan", key))).toBe(1);
    // Unblocked through A: B answers the block from memory at most OVERRIDE_CLAIM_MAX_MS.
    await plansAdmin(admin, prefix).blocks.remove({ policy: "plan", key });
    expect((await b.limiter.limitAll([request(key, 5)])).blocked).toBeDefined();
    b.tick(OVERRIDE_CLAIM_MAX_MS);
    expect(await b.limiter.limit(request(key, 5))).toMatchObject({ allowed: true, remaining: 3 });
    expect((await a.limiter.limit(request(key, 5))).allowed).toBe(true);
  });

  it("a block with an end says when; a reset (forget) in this isolate drops its memory of it", async () => {
    const a = isolate();
    const key = `k-${crypto.randomUUID()}`;
    await plansAdmin(admin, prefix).blocks.add({ policy: "plan", key }, { seconds: 30 });
    const refused = await a.limiter.limitAll([request(key, 5)]);
    expect(refused.blocked?.until).toBeGreaterThan(Date.now() + 20_000);
    expect(refused.decisions[0]?.retryAfterMs).toBeGreaterThan(20_000);
    await plansAdmin(admin, prefix).blocks.remove({ policy: "plan", key });
    a.limiter.forget(request(key, 5));
    expect((await a.limiter.limit(request(key, 5))).allowed).toBe(true);
  });

  it("lists overrides and blocks page by page, decoded, with the store's end of a block", async () => {
    const own = scopedPrefix("plans-list");
    for (let i = 0; i < 5; i++) {
      await plansAdmin(admin, own).overrides.set("list", `user ${i}`, { limit: 100 + i });
    }
    await plansAdmin(admin, own).blocks.add({ policy: "list", key: "abuser" }, { seconds: 60 });
    const seen: unknown[] = [];
    let cursor = "0";
    do {
      const page = await plansAdmin(admin, own).plans.list({ what: "overrides", cursor, count: 2 });
      seen.push(...page.entries);
      cursor = page.cursor;
    } while (cursor !== "0");
    expect(seen).toHaveLength(5);
    expect(seen).toContainEqual({
      type: "override",
      by: "key",
      policy: "list",
      value: "user 3",
      limit: 103,
    });
    const blocks = await plansAdmin(admin, own).plans.list({
      what: "blocks",
      cursor: "0",
      count: 100,
    });
    expect(blocks.entries).toEqual([
      { type: "block", by: "key", policy: "list", value: "abuser", until: expect.any(Number) },
    ]);
  });
});

describe("bounds", () => {
  it("a hash at its most fields refuses a new one, but takes changes and removals of existing ones", async () => {
    const own = scopedPrefix("plans-bounds");
    const write = (field: string, value: string | null) =>
      writePlan(admin, { hash: plansKey(own), field, value, max: 2 });
    expect(await write("o|a|1", "5")).toEqual({
      existed: false,
      full: false,
      fullBytes: false,
      size: 1,
    });
    expect(await write("o|a|2", "5")).toEqual({
      existed: false,
      full: false,
      fullBytes: false,
      size: 2,
    });
    expect(await write("o|a|3", "5")).toEqual({
      existed: false,
      full: true,
      fullBytes: false,
      size: 2,
    });
    expect(await write("o|a|2", "7")).toEqual({
      existed: true,
      full: false,
      fullBytes: false,
      size: 2,
    });
    expect(await write("o|a|1", null)).toEqual({
      existed: true,
      full: false,
      fullBytes: false,
      size: 1,
    });
    expect(await write("o|a|3", "5")).toEqual({
      existed: false,
      full: false,
      fullBytes: false,
      size: 2,
    });
  });
});
