/**
 * Concurrency limits in the limiter, on real Redis: at most `limit` in flight per key across
 * isolates, decided in the one evaluate script with the rate rules (all or nothing), released
 * by one script call, lapsing at the timeout, never cached as a denial.
 */
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import type { ConcurrencySlot, LimitRequest } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { createStoreClient } from "../../../src/store/upstash-client";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("concurrency");

/** One "isolate": its own store client and limiter (its own denial cache and fallback). */
function isolate(extra: Partial<LimiterOptions> = {}) {
  return createLimiter({ store: testStore(), prefix, timeoutMs: 10_000, ...extra });
}

const slots = (name: string, key: string, limit: number, timeoutMs = 30_000): LimitRequest => ({
  policy: name,
  key,
  limit,
  windowMs: timeoutMs,
  algorithm: "concurrency",
});
const rate = (name: string, key: string, limit: number): LimitRequest => ({
  policy: name,
  key,
  limit,
  windowMs: 60_000,
});
const setKey = (name: string, key: string) => storageKey(prefix, name, key, "concurrency");
const held = (name: string, key: string) => redis.zcard(setKey(name, key));

/**
 * The ids a caller holding `slot` would try for its neighbours: ids were once a per-isolate
 * prefix (12 characters) and a base-36 counter, so the holder just before had the counter - 1.
 */
function neighbourIds(slot: string): string[] {
  const prefix = slot.slice(0, 12);
  const counter = Number.parseInt(slot.slice(12), 36);
  const near = [-3, -2, -1, 1, 2, 3].map((d) => `${prefix}${(counter + d).toString(36)}`);
  return near.filter((id) => id !== slot);
}

describe("concurrency: exact in flight across isolates", () => {
  it("60 simultaneous acquires through two isolates admit exactly the limit", async () => {
    const [a, b] = [isolate(), isolate()];
    const key = `burst-${crypto.randomUUID()}`;
    const decided = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).limit(slots("c-burst", key, 5))),
    );
    const admitted = decided.filter((d) => d.allowed);
    expect(admitted).toHaveLength(5);
    expect(await held("c-burst", key)).toBe(5);
    // Every admitted decision carries its own slot; every denial none, and a 1 s retry.
    expect(new Set(admitted.map((d) => d.slot?.slot)).size).toBe(5);
    for (const d of decided.filter((d) => !d.allowed)) {
      expect(d.slot).toBeUndefined();
      expect(d.retryAfterMs).toBe(1_000);
      expect(d.remaining).toBe(0);
    }
    const released = await a.release(admitted.map((d) => d.slot as ConcurrencySlot));
    expect(released.released).toEqual([true, true, true, true, true]);
    expect(await held("c-burst", key)).toBe(0);
  });

  it("holders that acquire and release in waves never exceed the limit in flight", async () => {
    const isolates = [isolate(), isolate()];
    const key = `waves-${crypto.randomUUID()}`;
    const limit = 4;
    let inFlight = 0;
    let most = 0;
    let admittedTotal = 0;
    // A holder counts itself from the store's admission until just before its release is sent:
    // within the time the store holds its slot, so this count never exceeds the store's.
    const holder = async (i: number) => {
      for (let round = 0; round < 6; round++) {
        const limiter = isolates[(i + round) % 2] as ReturnType<typeof isolate>;
        const d = await limiter.limit(slots("c-waves", key, limit));
        if (!d.allowed) continue;
        inFlight++;
        admittedTotal++;
        most = Math.max(most, inFlight);
        await redis.ping(); // hold the slot for a round trip
        inFlight--;
        const out = await limiter.release(d.slot as ConcurrencySlot);
        expect(out.released).toEqual([true]);
      }
    };
    await Promise.all(Array.from({ length: 12 }, (_, i) => holder(i)));
    expect(most).toBeLessThanOrEqual(limit);
    // Slots were reused: more admissions than the limit over the run.
    expect(admittedTotal).toBeGreaterThan(limit);
    expect(await held("c-waves", key)).toBe(0);
  });
});

describe("concurrency with rate rules: one atomic step, all or nothing", () => {
  for (const order of ["slots first", "rates first"] as const) {
    it(`a rate denial takes no slot, a full set spends no rate (${order})`, async () => {
      const limiter = isolate({ denialCache: false });
      const key = `aon-${order.replace(" ", "-")}-${crypto.randomUUID()}`;
      const policies = (slotLimit: number, rateLimit: number) => {
        const s = [slots("c-aon", key, slotLimit)];
        const r = [rate("r-aon-wide", key, 100), rate("r-aon-tight", key, rateLimit)];
        return order === "slots first" ? [...s, ...r] : [...r, ...s];
      };
      // The tight rate rule allows 1: the first request takes a slot and a unit of each rate.
      const first = await limiter.limitAll(policies(3, 1));
      expect(first.allowed).toBe(true);
      expect(first.slots).toHaveLength(1);
      expect(await held("c-aon", key)).toBe(1);
      // Denied by the tight rate rule: no slot is taken.
      const rateDenied = await limiter.limitAll(policies(3, 1));
      expect(rateDenied).toMatchObject({ allowed: false, deniedBy: "r-aon-tight" });
      expect(rateDenied.slots).toBeUndefined();
      expect(await held("c-aon", key)).toBe(1);
      // A set of 1 is full: denied by the slots, and neither rate rule spends a unit.
      const wide = () =>
        limiter.peek(rate("r-aon-wide", key, 100)).then((p) => (p.peeked ? p.remaining : -1));
      const before = await wide();
      const full = await limiter.limitAll(policies(1, 100));
      expect(full).toMatchObject({ allowed: false, deniedBy: "c-aon" });
      expect(await wide()).toBe(before);
      expect(await held("c-aon", key)).toBe(1);
      await limiter.release(first.slots ?? []);
      expect(await held("c-aon", key)).toBe(0);
    });
  }
});

describe("release", () => {
  it("frees the slot for the next request, and a full set's denial is never cached", async () => {
    // The default denial cache is on: a concurrency denial must not be held in it.
    const limiter = isolate();
    const key = `free-${crypto.randomUUID()}`;
    const first = await limiter.limit(slots("c-free", key, 1));
    expect(first.allowed).toBe(true);
    const second = await limiter.limit(slots("c-free", key, 1));
    expect(second.allowed).toBe(false);
    expect(second.source).toBe("redis");
    expect((await limiter.release(first.slot as ConcurrencySlot)).released).toEqual([true]);
    const third = await limiter.limit(slots("c-free", key, 1));
    expect(third).toMatchObject({ allowed: true, source: "redis" });
    // Released twice: the second finds nothing.
    expect((await limiter.release(first.slot as ConcurrencySlot)).released).toEqual([false]);
    await limiter.release(third.slot as ConcurrencySlot);
  });

  it("an unknown or another key's slot is not there, and releasing it frees nothing", async () => {
    const limiter = isolate();
    const key = `foreign-${crypto.randomUUID()}`;
    const mine = await limiter.limit(slots("c-foreign", key, 1));
    const theirs = `${key}-other`;
    const out = await limiter.release([
      { policy: "c-foreign", key, slot: "no-such-slot" },
      { policy: "c-foreign", key: theirs, slot: mine.slot?.slot ?? "" },
      { policy: "c-other-rule", key, slot: mine.slot?.slot ?? "" },
    ]);
    expect(out).toEqual({ released: [false, false, false] });
    expect(await held("c-foreign", key)).toBe(1);
    expect((await limiter.limit(slots("c-foreign", key, 1))).allowed).toBe(false);
    await limiter.release(mine.slot as ConcurrencySlot);
  });

  it("a guessed slot id releases nothing: neither a neighbour of one's own nor r:<request id>", async () => {
    const limiter = isolate({ denialCache: false });
    const key = `guess-${crypto.randomUUID()}`;
    const requestId = `guess-rid-${crypto.randomUUID()}`;
    const holder = await limiter.limit(slots("c-guess", key, 3));
    const byId = await limiter.limitAll([slots("c-guess", key, 3)], { requestId });
    const mine = await limiter.limit(slots("c-guess", key, 3));
    for (const d of [holder, byId.decisions[0], mine]) expect(d?.allowed).toBe(true);
    const own = mine.slot?.slot ?? "";
    // What a caller can derive from the slot it holds: its neighbours, and the id a request id
    // names. Each guessed id is tried on the key the holders hold.
    const guesses = [...neighbourIds(own), `r:${requestId}`];
    const out = await limiter.release(guesses.map((slot) => ({ policy: "c-guess", key, slot })));
    expect(out.released).toEqual(guesses.map(() => false));
    expect(await held("c-guess", key)).toBe(3);
    expect((await limiter.limit(slots("c-guess", key, 3))).allowed).toBe(false);
    // At least 96 random bits each: 16 base64url characters, no shared prefix.
    for (const slot of [holder.slot?.slot, byId.slots?.[0]?.slot, own]) {
      expect(slot?.replace(/^r:/, "").length ?? 0).toBeGreaterThanOrEqual(16);
    }
    expect(own.slice(0, 8)).not.toBe(holder.slot?.slot.slice(0, 8));
    const back = await limiter.release([
      holder.slot as ConcurrencySlot,
      ...(byId.slots ?? []),
      mine.slot as ConcurrencySlot,
    ]);
    expect(back.released).toEqual([true, true, true]);
  });

  it("with waitUntil the release keeps itself alive: the caller need not await it", async () => {
    const limiter = isolate();
    const key = `alive-${crypto.randomUUID()}`;
    const taken = await limiter.limit(slots("c-alive", key, 1));
    const tasks: Promise<unknown>[] = [];
    const released = limiter.release(taken.slot as ConcurrencySlot, {
      waitUntil: (p) => tasks.push(p),
    });
    expect(tasks).toHaveLength(1);
    expect(tasks[0]).toBe(released);
    await Promise.all(tasks);
    expect(await held("c-alive", key)).toBe(0);
  });

  it("a malformed slot is answered, not thrown, and nothing is sent", async () => {
    const limiter = isolate();
    const out = await limiter.release({ policy: "bad name!", key: "k", slot: "s" });
    expect(out.released).toEqual([]);
    expect(out.error).toMatch(/policy/);
  });

  it("a store that fails is answered with the error, and retried off the path", async () => {
    const tasks: Promise<unknown>[] = [];
    const errors: unknown[] = [];
    const limiter = createLimiter({
      // Nothing listens there: every call fails at once.
      store: createStoreClient({ url: "http://127.0.0.1:9", token: "x", timeoutMs: 2_000 }),
      prefix,
      timeoutMs: 2_000,
      onStoreError: (error) => errors.push(error),
    });
    const out = await limiter.release(
      { policy: "c-down", key: "k", slot: "s" },
      { waitUntil: (p) => tasks.push(p) },
    );
    expect(out).toMatchObject({ released: [], retrying: true });
    expect(out.error).toBeDefined();
    await Promise.all(tasks);
    // The first attempt and each bounded retry reported their failure.
    expect(errors.length).toBe(4);
  });
});

describe("a store that hangs mid-request", () => {
  it("the release is retried once it answers; nothing over the limit once it is back", async () => {
    const store = await faultScenario("forward");
    const limiter = createLimiter({
      store: storeAt(store.url, 300),
      prefix,
      timeoutMs: 300,
      fallback: false,
      denialCache: false,
    });
    const key = `hang-${crypto.randomUUID()}`;
    const first = await limiter.limit(slots("c-hang", key, 2));
    expect(first.allowed).toBe(true);
    // The store hangs while the request ends: the release's first attempt times out.
    await store.set("hang");
    const tasks: Promise<unknown>[] = [];
    const out = await limiter.release(first.slot as ConcurrencySlot, {
      waitUntil: (p) => tasks.push(p),
    });
    expect(out).toMatchObject({ released: [], retrying: true });
    expect(await held("c-hang", key)).toBe(1);
    // It answers again: a retry off the path lands, and the slot is back.
    await store.set("forward");
    await Promise.all(tasks);
    expect(await held("c-hang", key)).toBe(0);
    // Back: a burst admits exactly the limit, through the store.
    const burst = await Promise.all(
      Array.from({ length: 12 }, () => limiter.limit(slots("c-hang", key, 2))),
    );
    expect(burst.filter((d) => d.allowed)).toHaveLength(2);
    expect(await held("c-hang", key)).toBe(2);
  });
});

describe("timeouts and idempotence", () => {
  it("a slot never released lapses at its timeout (the caller's clock, moved by the test)", async () => {
    let at = Date.now();
    const limiter = isolate({ clock: "caller", now: () => at });
    const key = `lapse-${crypto.randomUUID()}`;
    const first = await limiter.limit(slots("c-lapse", key, 1, 1_000));
    expect(first.allowed).toBe(true);
    expect(first.slot?.expires).toBe(at + 1_000);
    // Every key has a TTL: the timeout (plus the caller-clock grace).
    const ttl = await redis.pttl(setKey("c-lapse", key));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(2_000);
    at += 999;
    expect((await limiter.limit(slots("c-lapse", key, 1, 1_000))).allowed).toBe(false);
    at += 1;
    const after = await limiter.limit(slots("c-lapse", key, 1, 1_000));
    expect(after.allowed).toBe(true);
    // The lapsed slot was removed by that acquire; releasing it now finds nothing.
    expect((await limiter.release(first.slot as ConcurrencySlot)).released).toEqual([false]);
    expect(await held("c-lapse", key)).toBe(1);
    await limiter.release(after.slot as ConcurrencySlot);
  });

  it("on the Redis clock too: a 1 s slot frees without a release (polled, not slept)", async () => {
    const limiter = isolate();
    const key = `lapse-redis-${crypto.randomUUID()}`;
    const first = await limiter.limit(slots("c-lapse-r", key, 1, 1_000));
    expect(first.allowed).toBe(true);
    let next = await limiter.limit(slots("c-lapse-r", key, 1, 1_000));
    const deadline = Date.now() + 10_000;
    while (!next.allowed && Date.now() < deadline) {
      await redis.ping();
      next = await limiter.limit(slots("c-lapse-r", key, 1, 1_000));
    }
    expect(next.allowed).toBe(true);
    expect(await held("c-lapse-r", key)).toBe(1);
    await limiter.release(next.slot as ConcurrencySlot);
  });

  it("with a request id, a retry gets the same slot and is counted once", async () => {
    const limiter = isolate();
    const key = `rid-${crypto.randomUUID()}`;
    const requestId = crypto.randomUUID();
    const policies = [slots("c-rid", key, 2), rate("r-rid", key, 10)];
    const first = await limiter.limitAll(policies, { requestId });
    const retry = await limiter.limitAll(policies, { requestId });
    expect(first.allowed).toBe(true);
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    expect(retry.slots).toEqual(first.slots);
    expect(await held("c-rid", key)).toBe(1);
    // Another request takes the second slot; the set is then full.
    const other = await limiter.limitAll(policies);
    expect(other.allowed).toBe(true);
    expect((await limiter.limitAll(policies)).allowed).toBe(false);
    expect(
      (await limiter.release([...(first.slots ?? []), ...(other.slots ?? [])])).released,
    ).toEqual([true, true]);
  });

  it("a set never holds more than its limit, however many are denied", async () => {
    const limiter = isolate({ denialCache: false });
    const key = `bounded-${crypto.randomUUID()}`;
    await Promise.all(Array.from({ length: 30 }, () => limiter.limit(slots("c-bound", key, 3))));
    expect(await held("c-bound", key)).toBe(3);
  });
});

describe("store down: the local fallback bounds in flight per isolate", () => {
  const down = (extra: Partial<LimiterOptions> = {}) =>
    createLimiter({
      store: createStoreClient({ url: "http://127.0.0.1:9", token: "x", timeoutMs: 2_000 }),
      prefix,
      timeoutMs: 2_000,
      onStoreError: () => {},
      ...extra,
    });

  it("admits this isolate's share in flight, released by the same hook, lapsing at the timeout", async () => {
    let at = 1_000_000;
    const limiter = down({ fallback: { fraction: 0.5 }, now: () => at });
    const request = slots("c-down", "k", 4, 1_000);
    const [a, b, c] = [
      await limiter.limit(request),
      await limiter.limit(request),
      await limiter.limit(request),
    ];
    expect([a.allowed, b.allowed, c.allowed]).toEqual([true, true, false]);
    expect(a).toMatchObject({ source: "fallback", slot: { policy: "c-down", key: "k" } });
    expect(a.slot?.slot.startsWith("local:")).toBe(true);
    expect(c.retryAfterMs).toBe(1_000);
    // Given back locally, no store asked: a slot frees for the next request.
    expect((await limiter.release(a.slot as ConcurrencySlot)).released).toEqual([true]);
    expect((await limiter.release(a.slot as ConcurrencySlot)).released).toEqual([false]);
    expect((await limiter.limit(request)).allowed).toBe(true);
    expect((await limiter.limit(request)).allowed).toBe(false);
    // Never released: both lapse at the timeout.
    at += 1_000;
    expect((await limiter.limit(request)).allowed).toBe(true);
    expect((await limiter.release(b.slot as ConcurrencySlot)).released).toEqual([false]);
  });

  it("a rule that fails closed denies, and a denied request holds no local slot", async () => {
    const limiter = down({ fallback: { fraction: 1 } });
    const closed = await limiter.limit({ ...slots("c-closed", "k", 2), failMode: "closed" });
    expect(closed).toMatchObject({ allowed: false, source: "fail-closed" });
    expect(closed.slot).toBeUndefined();
    // One slot of 1, beside a rate rule of 1 whose unit is spent: the second request is denied by
    // the rate and must not keep the slot it would have taken.
    const both = [slots("c-both", "k", 1), rate("r-both", "k", 1)];
    const first = await limiter.limitAll(both);
    expect(first.allowed).toBe(true);
    await limiter.release(first.slots ?? []);
    const second = await limiter.limitAll(both);
    expect(second.allowed).toBe(false);
    expect(second.slots).toBeUndefined();
    expect((await limiter.limitAll([slots("c-both", "k", 1)])).allowed).toBe(true);
  });
});
