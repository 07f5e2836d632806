// A limiter over three shards on real Redis (databases 0, 1, 2 behind three bridges): where keys
// are counted, all-or-nothing across shards, request ids, a hanging shard, and what it costs.
import { describe, expect, it } from "vitest";
import { boundedKey } from "../../../../src/bounded-key";
import type { BreakerEvent } from "../../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { LimiterOptions } from "../../../../src/limiter/limiter-options";
import { SHARD_MAX_COOLDOWN_MS } from "../../../../src/limiter/shards/shard";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import {
  counting,
  faultScenario,
  manualClock,
  storeAt,
} from "../../../support/worker/fault-control";
import { logCount } from "../../../support/worker/log-state";
import { shardPrefix, shardRedis, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("shards");
const redis = shardRedis();

function sharded(extra: Partial<LimiterOptions> = {}) {
  const counted = shardUrls().map((url) => counting(storeAt(url, 2_000)));
  const limiter = createLimiter({
    store: counted.map((c) => c.store),
    prefix,
    timeoutMs: 2_000,
    ...extra,
  });
  return { limiter, calls: () => counted.map((c) => c.calls()) };
}

/** Keys that the limiter places on distinct shards: one per shard, "0", "1", "2". */
function keysOnEachShard(limiter: ReturnType<typeof createLimiter>, label: string): string[] {
  const found: (string | undefined)[] = [undefined, undefined, undefined];
  for (let i = 0; found.some((key) => key === undefined); i++) {
    const key = `${label}-${crypto.randomUUID()}-${i}`;
    const shard = Number(limiter.shardOf(key));
    if (found[shard] === undefined) found[shard] = key;
  }
  return found as string[];
}

const rule = (policy: string, key: string, limit: number, extra: Partial<LimitRequest> = {}) => ({
  policy,
  key,
  limit,
  windowMs: 60_000,
  ...extra,
});

describe("a limiter over three shards", () => {
  it("counts a key on its shard only, names the shard, and adds no store command", async () => {
    const { limiter, calls } = sharded();
    const keys = keysOnEachShard(limiter, "where");
    for (const [shard, key] of keys.entries()) {
      const request = rule("sh-where", key, 5);
      const first = await limiter.limit(request);
      expect(first).toMatchObject({ allowed: true, source: "redis", shard: String(shard) });
      const before = calls();
      const second = await limiter.limitAll([request, rule("sh-where2", key, 5)]);
      expect(second.decisions.map((d) => d.shard)).toEqual([String(shard), String(shard)]);
      // One key, one shard: one script call, as with one store.
      const after = calls();
      expect(after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0)).toBe(1);
      expect((after[shard] as number) - (before[shard] as number)).toBe(1);
      for (const [other, client] of redis.entries()) {
        expect(await logCount(client, storageKey(prefix, "sh-where", key))).toBe(
          other === shard ? 2 : 0,
        );
      }
    }
  });

  it("a burst of concurrent decisions on one key admits exactly the limit", async () => {
    // Fail closed: a call past its deadline on a loaded machine is denied, not admitted locally.
    const { limiter } = sharded({ denialCache: false, failMode: "closed" });
    const key = `burst-${crypto.randomUUID()}`;
    const decisions = await Promise.all(
      Array.from({ length: 60 }, () => limiter.limit(rule("sh-burst", key, 17))),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(17);
  });

  it("a request over two shards is all or nothing: a denial gives the other shard's part back", async () => {
    const { limiter } = sharded({ denialCache: false });
    const [a, b] = keysOnEachShard(limiter, "partial") as [string, string];
    // b's rule exhausted on its own shard.
    expect((await limiter.limit(rule("sh-tight", b, 1))).allowed).toBe(true);
    const both = [rule("sh-wide", a, 5), rule("sh-tight", b, 1)];
    const decided = await limiter.limitAll(both);
    expect(decided).toMatchObject({ allowed: false, deniedBy: "sh-tight", replayed: false });
    expect(decided.receipt).toBeUndefined();
    expect(decided.decisions.map((d) => [d.shard, d.allowed])).toEqual([
      ["0", true],
      ["1", false],
    ]);
    // The wide policy's count is back, and it says so (its remaining without this request).
    expect(decided.decisions[0]?.remaining).toBe(5);
    expect(await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-wide", a))).toBe(0);
    // Admitted across shards: one receipt, refunded on both.
    const c = keysOnEachShard(limiter, "refund")[2] as string;
    const ok = await limiter.limitAll([rule("sh-wide", a, 5), rule("sh-other", c, 5)]);
    expect(ok.allowed).toBe(true);
    expect(await logCount(redis[2] as (typeof redis)[0], storageKey(prefix, "sh-other", c))).toBe(
      1,
    );
    const refunded = await limiter.refund(ok.receipt as NonNullable<typeof ok.receipt>);
    expect(refunded).toMatchObject({ refunded: true, units: [1, 1] });
    expect(await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-wide", a))).toBe(0);
    expect(await logCount(redis[2] as (typeof redis)[0], storageKey(prefix, "sh-other", c))).toBe(
      0,
    );
  });

  it("a key past the length bound counts under one digest whether alone or across shards", async () => {
    const { limiter } = sharded();
    let long = "";
    for (let i = 0; ; i++) {
      long = `${"x".repeat(600)}-${i}`;
      if (limiter.shardOf(long) === "0") break;
    }
    const other = keysOnEachShard(limiter, "long")[1] as string;
    expect((await limiter.limit(rule("sh-long", long, 5))).allowed).toBe(true);
    const both = await limiter.limitAll([rule("sh-long", long, 5), rule("sh-long-b", other, 5)]);
    expect(both.allowed).toBe(true);
    const digest = await boundedKey(long);
    expect(
      await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-long", digest)),
    ).toBe(2);
  });

  it("cost, peek, reset, overrides and key blocks: each on the key's shard", async () => {
    // Plain clients: a peek needs the store client's read-only script calls.
    const fresh = () =>
      createLimiter({
        store: shardUrls().map((url) => storeAt(url, 2_000)),
        prefix,
        timeoutMs: 2_000,
        denialCache: false,
      });
    const limiter = fresh();
    const keys = keysOnEachShard(limiter, "plans");
    // One limiter per database alone, same prefix: what each shard holds for a key.
    const alone = shardUrls().map((url) =>
      createLimiter({ store: storeAt(url, 2_000), prefix, denialCache: false }),
    );
    const asked = (key: string, extra: Partial<LimitRequest> = {}) =>
      rule("sh-plans", key, 10, { overrides: true, ...extra });
    const peekOn = async (single: (typeof alone)[number], key: string) => {
      const peeked = await single.peek(asked(key));
      return peeked.peeked ? peeked : undefined;
    };
    for (const [shard, key] of keys.entries()) {
      const name = String(shard);
      expect(await limiter.limit(asked(key, { cost: 4 }))).toMatchObject({
        allowed: true,
        remaining: 6,
        shard: name,
      });
      expect(
        await logCount(redis[shard] as (typeof redis)[0], storageKey(prefix, "sh-plans", key)),
      ).toBe(4);
      expect(await limiter.peek(asked(key))).toMatchObject({
        peeked: true,
        remaining: 6,
        shard: name,
      });

      // An override is stored with the key: only its shard's database has it.
      expect(await limiter.overrides.set("sh-plans", key, { limit: 5 })).toMatchObject({
        ok: true,
      });
      for (const [i, single] of alone.entries()) {
        expect(await peekOn(single, key)).toMatchObject({
          limit: i === shard ? 5 : 10,
        });
      }
      expect(await limiter.limit(asked(key))).toMatchObject({
        allowed: true,
        limit: 5,
        remaining: 0,
      });
      expect(await limiter.limit(asked(key))).toMatchObject({ allowed: false, limit: 5 });

      // Reset: the count is gone, on the key's shard.
      expect(await limiter.reset(asked(key))).toMatchObject({
        existed: true,
      });
      expect(
        await logCount(redis[shard] as (typeof redis)[0], storageKey(prefix, "sh-plans", key)),
      ).toBe(0);
      expect(await limiter.limit(asked(key))).toMatchObject({ allowed: true, remaining: 4 });

      // A key block, likewise with the key: blocked through the sharded limiter, and on its
      // shard's database alone.
      expect(await limiter.blocks.add({ policy: "sh-plans", key }, { seconds: 60 })).toMatchObject({
        ok: true,
      });
      expect(await limiter.limit(asked(key))).toMatchObject({
        allowed: false,
        source: "block",
        shard: name,
      });
      for (const [i, single] of alone.entries()) {
        expect((await peekOn(single, key))?.source).toBe(i === shard ? "block" : "redis");
      }
      // Removed on its shard: another isolate's sharded limiter decides it by Redis again (this
      // one may answer its remembered block for up to a second: OVERRIDE_CLAIM_MAX_MS).
      await limiter.blocks.remove({ policy: "sh-plans", key });
      await limiter.overrides.remove("sh-plans", key);
      expect(await fresh().limit(asked(key))).toMatchObject({
        allowed: true,
        limit: 10,
        source: "redis",
      });
    }
  });

  it("a retry of a multi-shard request with its request id is counted once", async () => {
    const { limiter } = sharded();
    const [a, , c] = keysOnEachShard(limiter, "retry") as [string, string, string];
    const both = [rule("sh-rid-a", a, 5), rule("sh-rid-c", c, 5)];
    const requestId = `rid-${crypto.randomUUID()}`;
    const first = await limiter.limitAll(both, { requestId });
    const retry = await limiter.limitAll(both, { requestId });
    expect(first).toMatchObject({ allowed: true, replayed: false });
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    expect(retry.receipt).toBeUndefined();
    expect(await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-rid-a", a))).toBe(
      1,
    );
    expect(await logCount(redis[2] as (typeof redis)[0], storageKey(prefix, "sh-rid-c", c))).toBe(
      1,
    );

    // A request denied on one shard: its refunded part does not replay as admitted; the retry
    // is decided again there and given back again, so that part's count stays 0.
    const [x, y] = keysOnEachShard(limiter, "retry-denied") as [string, string];
    expect((await limiter.limit(rule("sh-rid-tight", y, 1))).allowed).toBe(true);
    const pair = [rule("sh-rid-wide", x, 3), rule("sh-rid-tight", y, 1)];
    const deniedId = `rid-${crypto.randomUUID()}`;
    for (let i = 0; i < 2; i++) {
      const decided = await limiter.limitAll(pair, { requestId: deniedId });
      expect(decided.allowed).toBe(false);
      expect(decided.decisions[0]).toMatchObject({ allowed: true, remaining: 3 });
    }
    expect(
      await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-rid-wide", x)),
    ).toBe(0);
  });

  it("multi-rule requests over shards are never over any rule in any window, 4 senders", async () => {
    const clock = manualClock();
    const windowMs = 1_000;
    // Four isolates: each its own limiter (own caches), the same three stores, one clock.
    const senders = Array.from({ length: 4 }, () =>
      createLimiter({
        store: shardUrls().map((url) => storeAt(url, 2_000)),
        prefix,
        timeoutMs: 2_000,
        failMode: "closed",
        clock: "caller",
        now: clock.now,
      }),
    );
    const users = Array.from({ length: 3 }, (_, i) => `user-${i}-${crypto.randomUUID()}`);
    const ips = Array.from({ length: 6 }, (_, i) => `ip-${i}-${crypto.randomUUID()}`);
    const admitted = new Map<string, number[]>();
    const note = (name: string, t: number) => {
      const list = admitted.get(name) ?? [];
      list.push(t);
      admitted.set(name, list);
    };
    let spread = 0;
    for (let round = 0; round < 40; round++) {
      await Promise.all(
        senders.flatMap((sender, s) =>
          Array.from({ length: 3 }, async (_, r) => {
            const user = users[(s + r + round) % users.length] as string;
            const ip = ips[(s * 3 + r) % ips.length] as string;
            const requests = [
              { policy: "sh-ip", key: ip, limit: 3, windowMs },
              { policy: "sh-user", key: user, limit: 5, windowMs },
            ];
            if (sender.shardOf(ip) !== sender.shardOf(user)) spread++;
            const t = clock.now();
            const decided = await sender.limitAll(requests);
            if (decided.allowed) {
              note(`ip ${ip}`, t);
              note(`user ${user}`, t);
            }
          }),
        ),
      );
      clock.advance(100);
    }
    expect(spread).toBeGreaterThan(100);
    let total = 0;
    for (const [name, times] of admitted) {
      const limit = name.startsWith("ip") ? 3 : 5;
      times.sort((a, b) => a - b);
      total += times.length;
      for (let i = limit; i < times.length; i++) {
        // The (limit + 1)-th admission back must be a whole window earlier.
        expect(times[i] as number, name).toBeGreaterThanOrEqual(
          (times[i - limit] as number) + windowMs,
        );
      }
    }
    expect(total).toBeGreaterThan(0);
  });

  it("a hanging shard sends only its keys to the fallback; the others are decided by Redis", async () => {
    const hang = await faultScenario("hang");
    const breakerEvents: BreakerEvent[] = [];
    const urls = shardUrls();
    const limiter = createLimiter({
      store: [
        storeAt(urls[0] as string, 200),
        storeAt(hang.url, 200),
        storeAt(urls[2] as string, 200),
      ],
      prefix,
      timeoutMs: 200,
      breaker: { failureThreshold: 2 },
      onBreakerChange: (event) => breakerEvents.push(event),
    });
    const [a, b, c] = keysOnEachShard(limiter, "hang") as [string, string, string];
    expect(await limiter.limit(rule("sh-hang", a, 5))).toMatchObject({
      source: "redis",
      shard: "0",
    });
    expect(await limiter.limit(rule("sh-hang", b, 5))).toMatchObject({
      source: "fallback",
      shard: "1",
    });
    expect(await limiter.limit(rule("sh-hang", c, 5))).toMatchObject({
      source: "redis",
      shard: "2",
    });
    // One request over a healthy and the sick shard: that part by its fail policy, no waiting
    // for it past the deadline; the healthy part by Redis.
    const mixed = await limiter.limitAll([
      rule("sh-hang-a", a, 5),
      rule("sh-hang-b", b, 5, { failMode: "closed" }),
    ]);
    expect(mixed.allowed).toBe(false);
    expect(mixed.decisions.map((d) => [d.shard, d.source, d.allowed])).toEqual([
      ["0", "redis", true],
      ["1", "fail-closed", false],
    ]);
    // Two failures opened the sick shard's breaker, and its event names it; no other opened.
    expect(breakerEvents.map((e) => [e.shard, e.to])).toEqual([["1", "open"]]);
    expect(limiter.shards().map((shard) => shard.breaker)).toEqual(["closed", "open", "closed"]);
    // The healthy part was given back.
    expect(await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-hang-a", a))).toBe(
      0,
    );
    await hang.set("forward");
  });
  it("no decision of a healthy shard's key waits on a hanging one", async () => {
    const hang = await faultScenario("hang");
    const urls = shardUrls();
    // A deadline far past what the healthy calls take: every call to the sick shard is still
    // out when they are answered, and its breaker never opens during the test.
    const limiter = createLimiter({
      store: [
        storeAt(urls[0] as string, 4_000),
        storeAt(hang.url, 4_000),
        storeAt(urls[2] as string, 4_000),
      ],
      prefix,
      timeoutMs: 4_000,
      failMode: "closed",
    });
    const [a, b, c] = keysOnEachShard(limiter, "no-wait") as [string, string, string];
    let sickSettled = 0;
    const sick = [
      limiter.limit(rule("sh-nowait", b, 5)),
      limiter.limitAll([rule("sh-nowait", b, 5), rule("sh-nowait", a, 5)]),
    ].map((p) => p.finally(() => sickSettled++));
    // Both calls have reached the sick shard and hang there.
    for (let stats = await hang.stats(); stats.pending < 2; stats = await hang.stats()) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const healthy = await Promise.all([
      limiter.limit(rule("sh-nowait", a, 5)),
      limiter.limit(rule("sh-nowait", c, 5)),
      limiter.limitAll([rule("sh-nowait-a", a, 5), rule("sh-nowait-c", c, 5)]),
    ]);
    // Answered by Redis, admitted, while every call to the sick shard is still out.
    expect(sickSettled).toBe(0);
    expect([healthy[0], healthy[1]].map((d) => [d.shard, d.source, d.allowed])).toEqual([
      ["0", "redis", true],
      ["2", "redis", true],
    ]);
    expect(healthy[2].allowed).toBe(true);
    expect(healthy[2].decisions.map((d) => [d.shard, d.source])).toEqual([
      ["0", "redis"],
      ["2", "redis"],
    ]);
    expect(limiter.shards().map((shard) => shard.breaker)).toEqual(["closed", "closed", "closed"]);
    // The sick shard's keys go to their failure policy at the deadline (closed: denied), and
    // the healthy part of the mixed request is given back.
    const [alone, mixed] = (await Promise.all(sick)) as [
      Awaited<ReturnType<typeof limiter.limit>>,
      Awaited<ReturnType<typeof limiter.limitAll>>,
    ];
    expect([alone.source, alone.allowed]).toEqual(["fail-closed", false]);
    expect(mixed.allowed).toBe(false);
    expect(mixed.decisions.map((d) => [d.shard, d.source])).toEqual([
      ["1", "fail-closed"],
      ["0", "redis"],
    ]);
    expect(await logCount(redis[0] as (typeof redis)[0], storageKey(prefix, "sh-nowait", a))).toBe(
      1,
    );
    await hang.set("forward");
  }, 20_000);

  it("network blocks on a first shard whose breaker is open: no request waits on it", async () => {
    const hang = await faultScenario("hang");
    const clock = manualClock();
    const urls = shardUrls();
    const limiter = createLimiter({
      store: [
        storeAt(hang.url, 300),
        storeAt(urls[1] as string, 2_000),
        storeAt(urls[2] as string, 2_000),
      ],
      prefix,
      now: clock.now,
      timeoutMs: 300,
      breaker: { failureThreshold: 1 },
      failMode: "closed",
    });
    const [a, b] = keysOnEachShard(limiter, "first-sick") as [string, string, string];
    const blocks = limiter.networkBlocks({ refreshMs: 1_000, onRefreshFailed: () => {} });
    // A decision of the first shard's own key meets the hanging store and opens its breaker.
    expect(await limiter.limit(rule("sh-first-sick", a, 50))).toMatchObject({
      shard: "0",
      source: "fail-closed",
    });
    expect(limiter.shards()[0]?.breaker).toBe("open");
    const sent = (await hang.stats()).requests;
    // Each past the copy's refresh interval: without the breaker each would wait for a load.
    for (let i = 0; i < 5; i++) {
      clock.advance(1_100);
      expect(await blocks.match({ ip: "192.0.2.9" }, ["api"])).toBeUndefined();
      expect(await limiter.limit(rule("sh-first-sick", b, 50))).toMatchObject({
        shard: "1",
        source: "redis",
        allowed: true,
      });
    }
    expect((await hang.stats()).requests).toBe(sent);
    // A decision of the first shard's own key probes it; answering again, loads resume.
    await hang.set("forward");
    clock.advance(SHARD_MAX_COOLDOWN_MS);
    expect(await limiter.limit(rule("sh-first-sick", a, 50))).toMatchObject({
      shard: "0",
      source: "redis",
    });
    expect(limiter.shards()[0]?.breaker).toBe("closed");
    const probed = (await hang.stats()).requests;
    clock.advance(1_100);
    expect(await blocks.match({ ip: "192.0.2.9" }, ["api"])).toBeUndefined();
    expect((await hang.stats()).requests).toBeGreaterThan(probed);
  });

  it("a recovered shard's keys are back on Redis within its capped cool-down, however long it hung", async () => {
    const hang = await faultScenario("hang");
    const clock = manualClock();
    const urls = shardUrls();
    const sick = counting(storeAt(hang.url, 200));
    const limiter = createLimiter({
      store: [storeAt(urls[0] as string, 2_000), sick.store, storeAt(urls[2] as string, 2_000)],
      prefix,
      clock: "caller",
      now: clock.now,
      timeoutMs: 200,
      breaker: { failureThreshold: 1, cooldownMs: 1_000, maxCooldownMs: 30_000 },
    });
    const [, b] = keysOnEachShard(limiter, "cooldown") as [string, string, string];
    expect(await limiter.limit(rule("sh-cool", b, 5))).toMatchObject({ source: "fallback" });
    expect(limiter.shards()[1]?.breaker).toBe("open");
    // Ten failed probes, each past the cool-down: uncapped it would have doubled to 30 s.
    for (let i = 0; i < 10; i++) {
      clock.advance(SHARD_MAX_COOLDOWN_MS);
      const before = sick.calls();
      expect(await limiter.limit(rule("sh-cool", b, 5))).toMatchObject({ source: "fallback" });
      expect(sick.calls(), `probe ${i}`).toBe(before + 1);
    }
    // Within the cool-down nothing is asked of it.
    const idle = sick.calls();
    expect(await limiter.limit(rule("sh-cool", b, 5))).toMatchObject({ source: "fallback" });
    expect(sick.calls()).toBe(idle);
    // It answers again: the first request past the capped cool-down finds it, and Redis decides.
    await hang.set("forward");
    clock.advance(SHARD_MAX_COOLDOWN_MS);
    expect(await limiter.limit(rule("sh-cool", b, 5))).toMatchObject({
      source: "redis",
      shard: "1",
    });
    expect(limiter.shards()[1]?.breaker).toBe("closed");
  });
  it("a hot key is leased by its own shard, and the lease's units are counted there only", async () => {
    const clock = manualClock();
    const pending: Promise<unknown>[] = [];
    const counted = shardUrls().map((url) => counting(storeAt(url, 2_000)));
    const limiter = createLimiter({
      store: counted.map((c) => c.store),
      prefix,
      timeoutMs: 2_000,
      clock: "caller",
      now: clock.now,
    });
    const key = keysOnEachShard(limiter, "lease")[1] as string;
    const hot = rule("sh-lease", key, 100, { windowMs: 10_000, lease: true });
    const waitUntil = (promise: Promise<unknown>) => {
      pending.push(promise);
    };
    const first = await limiter.limitAll([hot], { waitUntil });
    expect(first.decisions[0]).toMatchObject({ source: "redis", shard: "1" });
    // Two units within a lease's lifetime make the key hot: the second is paid from a lease.
    const second = await limiter.limitAll([hot], { waitUntil });
    expect(second.decisions[0]).toMatchObject({ allowed: true, source: "lease", shard: "1" });
    while (pending.length > 0) await Promise.all(pending.splice(0));
    // Spent from the lease: no call for the decision, at most the renewal it starts in the
    // background, and that on the key's shard; none on the others.
    const before = counted.map((c) => c.calls());
    clock.advance(100);
    const local = await limiter.limitAll([hot], { waitUntil });
    expect(local.decisions[0]).toMatchObject({ allowed: true, source: "lease", shard: "1" });
    while (pending.length > 0) await Promise.all(pending.splice(0));
    const added = counted.map((c, i) => c.calls() - (before[i] as number));
    expect(added[1]).toBeLessThanOrEqual(1);
    expect([added[0], added[2]]).toEqual([0, 0]);
    // The lease's units are in the key's log on its shard; the others hold nothing of it.
    const logs = await Promise.all(
      redis.map((client) => logCount(client, storageKey(prefix, "sh-lease", key))),
    );
    expect(logs[1]).toBeGreaterThan(2);
    expect([logs[0], logs[2]]).toEqual([0, 0]);
    await limiter.endLeases();
  });

  it("concurrency slots over shards: released where they are held; a partial denial holds none", async () => {
    const urls = shardUrls();
    const limiter = createLimiter({
      store: urls.map((url) => storeAt(url, 2_000)),
      prefix,
      timeoutMs: 2_000,
      failMode: "closed",
    });
    const [a, b, c] = keysOnEachShard(limiter, "slots") as [string, string, string];
    const slots = (key: string): LimitRequest => ({
      policy: "sh-slots",
      key,
      limit: 1,
      windowMs: 30_000,
      algorithm: "concurrency",
    });
    const held = (i: number, key: string) =>
      (redis[i] as (typeof redis)[0]).zcard(storageKey(prefix, "sh-slots", key, "concurrency"));
    const taken = await Promise.all([a, b, c].map((key) => limiter.limit(slots(key))));
    expect(taken.map((d) => [d.allowed, d.shard, d.slot?.shard])).toEqual([
      [true, "0", "0"],
      [true, "1", "1"],
      [true, "2", "2"],
    ]);
    expect(await Promise.all([held(0, a), held(1, b), held(2, c)])).toEqual([1, 1, 1]);
    // One call gives back all three, each on its own shard.
    const outcome = await limiter.release(taken.map((d) => d.slot as ConcurrencySlot));
    expect(outcome.released).toEqual([true, true, true]);
    expect(await Promise.all([held(0, a), held(1, b), held(2, c)])).toEqual([0, 0, 0]);
    // A request whose slot shard admits while a rate rule on another shard denies: the slot
    // taken on the first is given back, so nothing is held for a refused request.
    await limiter.limit(rule("sh-slots-rate", c, 1));
    const refused = await limiter.limitAll([slots(a), rule("sh-slots-rate", c, 1)]);
    expect(refused.allowed).toBe(false);
    expect(refused.slots).toBeUndefined();
    expect(await held(0, a)).toBe(0);
    // A slot given back by hand (as /check/release takes it: no shard named) goes to its key's.
    const again = await limiter.limit(slots(b));
    const { shard: _named, ...unnamed } = again.slot as ConcurrencySlot;
    expect((await limiter.release(unnamed)).released).toEqual([true]);
    expect(await held(1, b)).toBe(0);
    // In flight over every shard adds up.
    await Promise.all([a, b].map((key) => limiter.limit(slots(key))));
    expect(await limiter.inFlight(["sh-slots"])).toEqual([
      { policy: "sh-slots", inFlight: 2, keys: 2, complete: true },
    ]);
  });
});
