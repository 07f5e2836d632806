// Every operation on a key moved by a reshard asks one router (src/limiter/shards/router.ts):
// concurrency slots held on the old shard count during the transition, a slot is released
// wherever it was taken, a block on the old shard is never lost to an override written during
// the transition, a peek agrees with the check after it, and a fallback slot taken while the old
// shard is down is given back. Three shard databases behind the bridges, the caller's clock.
import { describe, expect, it } from "vitest";
import type { Limiter } from "../../../../src/limiter/limiter-api";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { faultScenario } from "../../../support/worker/fault-control";
import { reshardAhead as reshardOf, shardPrefix } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("reshard-ops");
const TIMEOUT_MS = 2_000;

/** A key whose shard changes at `at`, from `from` to `to` when they are named. */
function movedKey(limiter: Limiter, at: number, label: string, from?: string, to?: string) {
  for (;;) {
    const key = `${label}-${crypto.randomUUID()}`;
    const before = limiter.shardOf(key, at - 1);
    const after = limiter.shardOf(key, at);
    if (before === after) continue;
    if ((from === undefined || before === from) && (to === undefined || after === to)) return key;
  }
}

/** The old and new configs (shard-stores.ts), under this test's prefix, and a key that moves. */
async function reshardAhead(label: string, firstUrl?: string) {
  const setup = await reshardOf(`${prefix}-${label}`, TIMEOUT_MS, firstUrl);
  return { ...setup, key: movedKey(setup.fresh, setup.at, label) };
}

const concurrency = (policy: string, key: string, limit: number): LimitRequest => ({
  policy,
  key,
  limit,
  windowMs: 30_000,
  algorithm: "concurrency",
});

describe("a reshard meets every operation on a moved key", () => {
  it("slots held on the old shard count on the new one: never more in flight than the limit", async () => {
    const { clock, at, settled, old, fresh, key } = await reshardAhead("slots");
    const request = concurrency("ro-slots", key, 5);
    clock.set(at - 1_000);
    const held: ConcurrencySlot[] = [];
    for (let i = 0; i < 5; i++) {
      const d = await old.limit(request);
      expect(d.allowed).toBe(true);
      held.push(d.slot as ConcurrencySlot);
    }
    clock.set(settled + 100);
    const after = await Promise.all(Array.from({ length: 5 }, () => fresh.limit(request)));
    expect(after.filter((d) => d.allowed)).toHaveLength(0);
    expect(after[0]).toMatchObject({ limit: 5, remaining: 0 });
    expect((await fresh.inFlight(["ro-slots"]))[0]?.inFlight).toBe(5);
    // Two given back on the old shard: two more fit on the new one, and no third.
    expect((await fresh.release(held.slice(0, 2))).released).toEqual([true, true]);
    const again = await Promise.all(Array.from({ length: 3 }, () => fresh.limit(request)));
    expect(again.filter((d) => d.allowed)).toHaveLength(2);
    expect((await fresh.inFlight(["ro-slots"]))[0]?.inFlight).toBe(5);
  });

  it("a slot taken before the instant is released after it by its id alone", async () => {
    const { clock, at, settled, old, fresh, key } = await reshardAhead("release");
    const request = concurrency("ro-release", key, 5);
    clock.set(at - 1_000);
    const slots: ConcurrencySlot[] = [];
    for (let i = 0; i < 3; i++) slots.push((await old.limit(request)).slot as ConcurrencySlot);
    clock.set(settled + 100);
    // As /check/release gives it back: no shard named.
    const byId = slots.map(({ policy, key: slotKey, slot }) => ({ policy, key: slotKey, slot }));
    expect((await fresh.release(byId)).released).toEqual([true, true, true]);
    expect((await fresh.release(byId)).released).toEqual([false, false, false]);
    expect((await fresh.inFlight(["ro-release"]))[0]?.inFlight).toBe(0);
  });

  it("a block on the old shard holds after an override is written in the transition", async () => {
    const { clock, at, settled, old, fresh, key } = await reshardAhead("block");
    const request: LimitRequest = { policy: "ro-block", key, limit: 100, windowMs: 60_000 };
    const planned = { ...request, overrides: true };
    clock.set(at - 1_000);
    // Blocked where the key lived, by the old config (no end: the clocks need not agree).
    expect(await old.blocks.add({ policy: "ro-block", key })).toMatchObject({ ok: true });
    expect((await old.limit(planned)).allowed).toBe(false);
    clock.set(settled + 100);
    expect(await fresh.overrides.set("ro-block", key, { limit: 50 })).toMatchObject({ ok: true });
    // The block is copied to the new shard off the path: awaited, so the unblock comes after.
    const copies: Promise<unknown>[] = [];
    const waitUntil = (promise: Promise<unknown>) => void copies.push(promise);
    let admitted = 0;
    for (let i = 0; i < 20; i++) {
      if ((await fresh.limit(planned, { waitUntil })).allowed) admitted++;
    }
    expect(admitted).toBe(0);
    await Promise.all(copies);
    // Unblocked by the new config: the override applies.
    expect(await fresh.blocks.remove({ policy: "ro-block", key })).toMatchObject({ ok: true });
    expect(await fresh.limit(planned)).toMatchObject({ allowed: true, limit: 50 });
  });

  it("an old receipt refunded after the instant frees its unit at once", async () => {
    const { clock, at, settled, old, fresh, key } = await reshardAhead("refund");
    const request: LimitRequest = { policy: "ro-refund", key, limit: 2, windowMs: 60_000 };
    clock.set(at - 1_000);
    const first = await old.limitAll([request]);
    expect((await old.limit(request)).allowed).toBe(true);
    clock.set(settled + 100);
    // The old shard's 2 units hold the key (this isolate remembers that count).
    expect((await fresh.limit(request)).allowed).toBe(false);
    expect(await fresh.refund(first.receipt as NonNullable<typeof first.receipt>)).toMatchObject({
      refunded: true,
    });
    // One unit given back: one admitted on the new shard (as without a reshard), and no more.
    const after = [await fresh.limit(request), await fresh.limit(request)];
    expect(after.map((decision) => decision.allowed)).toEqual([true, false]);
  });

  it("a peek agrees with the check after it, in the settle interval and after it", async () => {
    const { clock, at, settled, old, fresh, key } = await reshardAhead("peek");
    const request: LimitRequest = { policy: "ro-peek", key, limit: 10, windowMs: 60_000 };
    clock.set(at - 5_000);
    for (let i = 0; i < 4; i++) expect((await old.limit(request)).allowed).toBe(true);
    const agree = async () => {
      const peeked = await fresh.peek(request);
      const decided = await fresh.limit(request);
      expect(peeked).toMatchObject({
        peeked: true,
        allowed: decided.allowed,
        limit: decided.limit,
        // A peek's remaining is before its cost, a decision's after it.
        remaining: decided.remaining + (decided.allowed ? 1 : 0),
        retryAfterMs: decided.retryAfterMs,
      });
      return decided;
    };
    clock.set(at + 500);
    expect(await agree()).toMatchObject({ allowed: false });
    clock.set(settled + 100);
    expect(await agree()).toMatchObject({ allowed: true, limit: 10, remaining: 5 });
    for (let i = 0; i < 5; i++) await fresh.limit(request);
    expect(await agree()).toMatchObject({ allowed: false, remaining: 0 });
  });

  it("fallback slots taken while the old shard is down are given back", async () => {
    const scenario = await faultScenario("forward");
    const { clock, settled, fresh, key: _key, at } = await reshardAhead("fallback", scenario.url);
    const key = movedKey(fresh, at, "fallback", "0");
    const request = { ...concurrency("ro-fallback", key, 5), overrides: true };
    clock.set(settled + 100);
    await scenario.set("error-500");
    let admitted = 0;
    let released = 0;
    for (let i = 0; i < 10; i++) {
      const d = await fresh.limit(request);
      if (!d.allowed) continue;
      admitted++;
      expect(d.source).toBe("fallback");
      if ((await fresh.release(d.slot as ConcurrencySlot)).released[0]) released++;
    }
    expect({ admitted, released }).toEqual({ admitted: 10, released: 10 });
  });

  it("a fallback slot of a request another shard denied is given back where it was taken", async () => {
    const scenario = await faultScenario("forward");
    const { clock, settled, fresh, at, another } = await reshardAhead("pair", scenario.url);
    const key = movedKey(fresh, at, "pair", "0");
    let other = "";
    while (!other) {
      const candidate = `pair-other-${crypto.randomUUID()}`;
      if (fresh.shardOf(candidate, at - 1) === "1" && fresh.shardOf(candidate, at) === "1") {
        other = candidate;
      }
    }
    const slot = { ...concurrency("ro-pair-c", key, 1), overrides: true };
    const rate: LimitRequest = { policy: "ro-pair-r", key: other, limit: 1, windowMs: 60_000 };
    clock.set(settled + 100);
    // The rate spent by another isolate on the same config: this one's denial cache does not
    // know it is exhausted (it would deny the pair before any part is decided).
    const twin = another();
    expect((await twin.limit(rate)).allowed).toBe(true);
    await scenario.set("error-500");
    // The slot is taken from the fallback (the old shard is down), the rate denies on shard 1:
    // all or nothing, so the slot goes back.
    const pair = await fresh.limitAll([slot, rate]);
    expect(pair.allowed).toBe(false);
    expect(pair.decisions[0]?.source).toBe("fallback");
    const alone = await fresh.limit(slot);
    expect(alone).toMatchObject({ allowed: true, source: "fallback" });
    expect((await fresh.release(alone.slot as ConcurrencySlot)).released).toEqual([true]);
  });
});
