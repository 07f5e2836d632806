/**
 * Leases (docs/leases.md): hot keys decided from a lease with no round trip, still exact. Real
 * Redis behind the bridge, several limiters as isolates (each its own store client), one manual
 * clock that the isolates and the store (caller clock) share. Each step fires its requests at one
 * instant, concurrently, then waits for them and for the background calls they started (lease
 * calls, give-backs) before the clock moves on.
 */
import { describe, expect, it } from "vitest";
import type { LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { LOG_LAYOUTS, type LogLayout, readLog } from "../../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../../support/worker/redis";
import {
  admitted,
  decideAndRecord,
  type Isolate,
  isolateOn,
  type ManualClock,
  mostInAnyWindow,
  type Use,
} from "./lease-support";

const redis = testRedis();
const prefix = scopedPrefix("lease");
const T0 = 1_900_000_000_000;

const leased = (
  policy: string,
  key: string,
  layout: LogLayout,
  limit: number,
  windowMs: number,
  extra: Partial<LimitRequest> = {},
): LimitRequest => ({ policy, key, limit, windowMs, algorithm: layout, lease: true, ...extra });

/** Stamps held in the log of a request's key (store clock ms) that still count at `now`. */
async function stamps(request: LimitRequest, now = Number.NEGATIVE_INFINITY): Promise<number[]> {
  const key = storageKey(prefix, request.policy, request.key, request.algorithm);
  return (await readLog(redis, key)).times.filter((s) => s > now - request.windowMs);
}

/** The reference model's count of the same: admitted units whose stamps still count at `now`. */
function stampsOf(uses: readonly Use[], request: LimitRequest, now: number): number {
  return uses
    .filter((u) => u.policy === request.policy && !u.refunded && u.stamp > now - request.windowMs)
    .reduce((sum, u) => sum + u.cost, 0);
}

/** Fires `count` requests on `isolate` at the clock's now, concurrently, and records them. */
function fire(
  isolate: Isolate,
  request: LimitRequest,
  count: number,
  clock: ManualClock,
  uses: Use[],
) {
  return Array.from({ length: count }, () => decideAndRecord(isolate, [request], clock.t, uses));
}

describe.each(LOG_LAYOUTS)("leases on the %s layout", (layout) => {
  it("a hot key is leased: units stamped at the lease's end, spent with no store call until then", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix);
    const request = leased("hot", `k-${crypto.randomUUID()}`, layout, 100, 10_000);
    const uses: Use[] = [];
    // The first request is decided by the store. The second makes the key hot (2 units within a
    // lifetime): it starts a lease call, waits for it (one round trip, as the store would
    // cost) and is paid from the lease.
    const first = await decideAndRecord(one, [request], clock.t, uses);
    expect(first.decisions[0]?.source).toBe("redis");
    const second = await decideAndRecord(one, [request], clock.t, uses);
    expect(second.decisions[0]?.source).toBe("lease");
    await one.settle();
    // The lease (3 units: 1.5 × demand) is in the log at now + 500 ms (10 s / 20).
    expect((await stamps(request)).sort()).toEqual([T0, T0 + 500, T0 + 500, T0 + 500]);
    const before = one.calls();
    clock.t += 100;
    const local = await decideAndRecord(one, [request], clock.t, uses);
    expect(local.decisions[0]).toMatchObject({ allowed: true, source: "lease" });
    expect(local.receipt?.at).toBe(T0 + 500);
    // No call for the decision; at most the renewal it started in the background (1 unit left,
    // under half the recent demand of 3).
    expect(one.calls() - before).toBeLessThanOrEqual(1);
    // Past the lease's end (isolate clock ≥ sent + lifetime) nothing more is spent from it: its
    // unspent units go back and the store decides again.
    await one.settle();
    clock.t = T0 + 10_000;
    const after = await decideAndRecord(one, [request], clock.t, uses);
    expect(after.decisions[0]?.source).toBe("redis");
    await one.settle();
    await one.limiter.endLeases();
    // Exactly what was admitted is in the log: no unspent unit stayed.
    expect((await stamps(request, clock.t)).length).toBe(stampsOf(uses, request, clock.t));
    // (The second and third at the lease's stamp, the last at T0 + 10 s: the lease's third
    // unit, never spent, went back.)
    expect(stampsOf(uses, request, clock.t)).toBe(3);
  });

  it("gives back exactly the unspent units: when a lease ends, by endLeases, and on a refund", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix);
    const request = leased("give-back", `k-${crypto.randomUUID()}`, layout, 1_000, 60_000);
    const uses: Use[] = [];
    // Demand of 40 at one instant: the lease asks for 60 (1.5 × 40, within a quarter of 1000).
    await Promise.all(fire(one, request, 40, clock, uses));
    await one.settle();
    expect((await stamps(request)).length).toBe(40 + 60);
    clock.t += 10;
    const spent = await Promise.all(fire(one, request, 25, clock, uses));
    expect(spent.every((d) => d.decisions[0]?.source === "lease")).toBe(true);
    // A refund of a request the lease paid goes back into the live lease (no store call) ...
    const refunded = await one.limiter.refund(spent[0]?.receipt as never);
    expect(refunded).toEqual({ refunded: true, units: [1] });
    // ... once: the same receipt again gives nothing back (the count below would be one short).
    expect(await one.limiter.refund(spent[0]?.receipt as never)).toEqual({
      refunded: false,
      units: [0],
      alreadyRefunded: true,
    });
    (uses.find((use) => use.source === "lease") as Use).refunded = true;
    await one.settle();
    // ... and every unspent unit leaves the log when the leases end: exactly the admitted remain.
    await one.limiter.endLeases();
    expect((await stamps(request)).length).toBe(admitted(uses, "give-back"));
    expect(admitted(uses, "give-back")).toBe(40 + 24);
  });

  it("3 isolates, limit 100 per 10 s, bursts: never more than 100 in any 10 s span", async () => {
    const clock = { t: T0 };
    const isolates = [0, 1, 2].map(() => isolateOn(clock, prefix));
    const request = leased("burst", `k-${crypto.randomUUID()}`, layout, 100, 10_000);
    const uses: Use[] = [];
    // A trickle over the limit (each isolate 10/s, the limit 10/s) keeps the key hot in every
    // isolate; bursts of 60 per isolate at once, every 3.7 s, over 4 windows.
    for (let step = 0; step < 400; step++) {
      const burst = step % 37 === 20;
      await Promise.all(
        isolates.flatMap((isolate) => fire(isolate, request, burst ? 60 : 1, clock, uses)),
      );
      await Promise.all(isolates.map((isolate) => isolate.settle()));
      clock.t += 100;
    }
    await Promise.all(isolates.map((isolate) => isolate.limiter.endLeases()));
    expect(uses.some((use) => use.source === "lease")).toBe(true);
    expect(mostInAnyWindow(uses, "burst", 10_000)).toBeLessThanOrEqual(100);
    // Nothing leaked: every unit in the log is one admitted.
    expect((await stamps(request, clock.t)).length).toBe(stampsOf(uses, request, clock.t));
  });

  it("3 isolates, a steady over-limit sender: never over 100 per 10 s, ≥ 90 % of capacity", async () => {
    const clock = { t: T0 };
    const isolates = [0, 1, 2].map(() => isolateOn(clock, prefix));
    const request = leased("steady", `k-${crypto.randomUUID()}`, layout, 100, 10_000);
    const uses: Use[] = [];
    // 3 × 25 requests/s (one per isolate every 40 ms) against 10/s, for 4 windows.
    const duration = 40_000;
    while (clock.t < T0 + duration) {
      await Promise.all(isolates.flatMap((isolate) => fire(isolate, request, 1, clock, uses)));
      await Promise.all(isolates.map((isolate) => isolate.settle()));
      clock.t += 40;
    }
    await Promise.all(isolates.map((isolate) => isolate.limiter.endLeases()));
    const total = admitted(uses, "steady");
    // In steady state (past the first window, which an empty log fills at once): the share of
    // the 300 units three windows allow.
    const steady = uses.filter((use) => use.at >= T0 + 10_000).length;
    console.log(
      `steady over-limit (${layout}): ${total} admitted of 400, ${steady} of 300 after the first` +
        ` window (${((steady / 300) * 100).toFixed(1)} %), ` +
        `${uses.filter((u) => u.source === "lease").length} from leases,` +
        ` store calls ${isolates.reduce((sum, isolate) => sum + isolate.calls(), 0)}`,
    );
    expect(uses.some((use) => use.source === "lease")).toBe(true);
    expect(mostInAnyWindow(uses, "steady", 10_000)).toBeLessThanOrEqual(100);
    expect(steady).toBeGreaterThanOrEqual(270);
  });
});
