/**
 * A reset (resetQuota + the limiter's forget, what /check/reset does) against leases: the
 * isolate that resets drops its own leases of the key (nothing more is spent from them, nothing
 * given back), and no lease's give-back ever frees units of the log the reset started (a
 * give-back carries the reset mark it was granted under; the store refuses it after a reset).
 * Real Redis behind the bridge, limiters as isolates on one manual clock (caller clock).
 */
import { describe, expect, it } from "vitest";
import type { LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { resetQuota } from "../../../../src/store/peek-reset";
import { LOG_LAYOUTS, type LogLayout, readLog } from "../../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../../support/worker/redis";
import { decideAndRecord, type Isolate, isolateOn, type Use } from "./lease-support";

const redis = testRedis();
const store = testStore(5_000);
const prefix = scopedPrefix("lease-reset");
const T0 = 1_900_000_000_000;
// Generous leases, so that one isolate holds most of a small limit.
const LEASES = { leases: { maxShare: 1, headroom: 4, minUnits: 2 } };

const leased = (policy: string, layout: LogLayout): LimitRequest => ({
  policy,
  key: `k-${crypto.randomUUID()}`,
  limit: 100,
  windowMs: 10_000,
  algorithm: layout,
  lease: true,
});

const logKey = (request: LimitRequest) =>
  storageKey(prefix, request.policy, request.key, request.algorithm);

/** Decides `count` requests on `isolate` at once; resolves to how many were admitted. */
async function fire(isolate: Isolate, request: LimitRequest, count: number, at: number) {
  const uses: Use[] = [];
  const decided = await Promise.all(
    Array.from({ length: count }, () => decideAndRecord(isolate, [request], at, uses)),
  );
  await isolate.settle();
  return { admitted: decided.filter((d) => d.allowed).length, decided };
}

/** The admin reset of a request's key, in Redis (every isolate's) and in `isolate`. */
async function reset(isolate: Isolate, request: LimitRequest) {
  await resetQuota(store, {
    prefix,
    policy: request.policy,
    key: request.key,
    algorithm: request.algorithm ?? "sliding-log",
  });
  isolate.limiter.forget(request);
}

describe.each(LOG_LAYOUTS)("a reset against leases on the %s layout", (layout) => {
  it("the resetting isolate spends nothing more from its leases: 100 in the window, not 123", async () => {
    const clock = { t: T0 };
    const a = isolateOn(clock, prefix, LEASES);
    const b = isolateOn(clock, prefix);
    const request = leased("own", layout);
    // A makes the key hot and holds a lease (most of the rest of the limit).
    await fire(a, request, 10, clock.t);
    clock.t += 1;
    const held = await fire(a, request, 5, clock.t);
    expect(held.decided.every((d) => d.decisions[0]?.source === "lease")).toBe(true);
    clock.t += 1;
    await reset(a, request);
    // B (no lease) fills the new log.
    const byB = await fire(b, { ...request, lease: false }, 100, clock.t);
    expect(byB.admitted).toBe(100);
    // A's leases ended with the reset: the store decides, and the log is full.
    clock.t += 1;
    const afterReset = await fire(a, request, 23, clock.t);
    expect(afterReset.admitted).toBe(0);
    await a.limiter.endLeases();
    await a.settle();
    // Nothing A held came back into the new log, nor freed B's units.
    expect((await readLog(redis, logKey(request))).times.length).toBe(100);
  });

  it("another isolate's give-back after the reset frees none of the new log's units", async () => {
    const clock = { t: T0 };
    const c = isolateOn(clock, prefix, LEASES);
    const admin = isolateOn(clock, prefix);
    const b = isolateOn(clock, prefix);
    const request = leased("other", layout);
    await fire(c, request, 10, clock.t);
    // C's lease is stamped at its end: T0 + 500 (a twentieth of the window).
    const before = (await readLog(redis, logKey(request))).times;
    expect(before.filter((s) => s === T0 + 500).length).toBeGreaterThan(20);
    // Reset by another isolate: C's leases cannot be reached, only the store knows.
    clock.t += 1;
    await reset(admin, request);
    // At C's stamp, B fills the new log: its units sit at the very time C's lease was stamped.
    clock.t = T0 + 500;
    const plain = { ...request, lease: false };
    expect((await fire(b, plain, 100, clock.t)).admitted).toBe(100);
    // C's lease ends and gives back its unspent units: refused, the new log keeps all 100.
    await c.limiter.endLeases();
    await c.settle();
    expect((await readLog(redis, logKey(request))).times.length).toBe(100);
    expect((await fire(b, plain, 1, clock.t)).admitted).toBe(0);
  });
});
