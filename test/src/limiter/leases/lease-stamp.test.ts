/**
 * Why leases are stamped at their end (docs/leases.md): the same lease book, the same store,
 * the same load — 10 isolates, limit 100 per 10 s, each far over the limit — once with the lease's
 * units stamped at the lease's end (as the limiter does) and once at the grant. The first never
 * passes the limit in any 10 s span; the second does. The isolates here are the lease book plus
 * the store call the limiter makes on a miss (no denial cache: every miss asks the store).
 */
import { describe, expect, inject, it } from "vitest";
import { createLimiterContext } from "../../../../src/limiter/context";
import { createLeaseBook } from "../../../../src/limiter/leases/isolate-lease-book";
import {
  createLeaseStore,
  type LeaseStore,
} from "../../../../src/limiter/leases/isolate-lease-store";
import { resolveLeaseSizing } from "../../../../src/limiter/leases/lease-sizing";
import { nextMemberId } from "../../../../src/limiter/member-id";
import { resolvePolicy, withStorageKeys } from "../../../../src/limiter/resolved-policy";
import { evaluatePolicy } from "../../../../src/store/evaluate";
import { storeAt } from "../../../support/worker/fault-control";
import { scopedPrefix } from "../../../support/worker/redis";
import { mostInAnyWindow, type Use } from "./lease-support";

const prefix = scopedPrefix("lease-stamp");
const T0 = 1_900_000_000_000;

/**
 * 10 isolates, a burst each window: every isolate asks once every 20 ms during the first second
 * of each 10 s, for 8 windows. The most units in any 10 s span. (Bursts one window apart are where
 * a unit stamped at its grant, but spent up to 0.45 s later, frees too early: the next burst takes
 * it again while its use is still inside the window.)
 */
async function run(stampAtEnd: boolean): Promise<{ most: number; leased: number }> {
  const clock = { t: T0 };
  const key = `k-${crypto.randomUUID()}`;
  const request = { policy: "stamp", key, limit: 100, windowMs: 10_000, lease: true };
  const isolates = Array.from({ length: 10 }, () => {
    // A short client timeout: each call holds an AbortSignal.timeout timer that long, and one
    // workerd request (this test) may hold 10 000 at once.
    const store = storeAt(inject("bridgeUrl"), 1_000);
    const ctx = createLimiterContext({ store, prefix, clock: "caller", now: () => clock.t });
    const real = createLeaseStore(ctx);
    const leases: LeaseStore = stampAtEnd
      ? real
      : // The broken variant: the units are stamped at the grant (offset 0), spent as long.
        {
          ...real,
          take: (policy, units, _lifetime, memberId) => real.take(policy, units, 0, memberId),
        };
    const book = createLeaseBook({
      sizing: resolveLeaseSizing(undefined),
      store: leases,
      now: () => clock.t,
      timers: false,
      timeoutMs: 5_000,
      storeDown: () => false,
      capacityFreed: () => {},
      onStoreError: undefined,
    });
    return { store, book, pending: [] as Promise<unknown>[] };
  });
  const uses: Use[] = [];
  for (; clock.t < T0 + 80_000; clock.t += 20) {
    // Quiet for the rest of each window.
    if ((clock.t - T0) % 10_000 >= 1_000) continue;
    await Promise.all(
      isolates.map(async (isolate) => {
        const policy = resolvePolicy(request, "open");
        const waitUntil = (promise: Promise<unknown>) => isolate.pending.push(promise);
        const at = clock.t;
        const use = (source: string) =>
          uses.push({ policy: "stamp", at, stamp: at, cost: 1, source, refunded: false });
        if (isolate.book.spend([policy], at, waitUntil)) return use("lease");
        withStorageKeys([policy], prefix);
        const answer = await evaluatePolicy(isolate.store, {
          ...policy,
          memberId: nextMemberId(),
          now: at,
        });
        if (answer.allowed) use("redis");
        isolate.book.afterStore([policy], [answer.remaining], at, waitUntil);
      }),
    );
    for (const isolate of isolates) await Promise.all(isolate.pending.splice(0));
  }
  return {
    most: mostInAnyWindow(uses, "stamp", 10_000),
    leased: uses.filter((use) => use.source === "lease").length,
  };
}

describe("the future stamp is what keeps leases exact", () => {
  it("10 isolates bursting at limit 100 per 10 s: stamped at the lease's end never over; at the grant, over", async () => {
    const atEnd = await run(true);
    const atGrant = await run(false);
    console.log(
      `most units in any 10 s span at limit 100: stamped at the lease's end ${atEnd.most}` +
        ` (${atEnd.leased} from leases), at the grant ${atGrant.most} (${atGrant.leased} from leases)`,
    );
    expect(atEnd.leased).toBeGreaterThan(0);
    expect(atEnd.most).toBeLessThanOrEqual(100);
    expect(atGrant.most).toBeGreaterThan(100);
    // Two runs of ~4 000 store calls each: seconds on a slow machine, past vitest's 5 s default.
  }, 60_000);
});
