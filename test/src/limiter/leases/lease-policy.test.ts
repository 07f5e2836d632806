/**
 * A key's limit changes while this isolate holds a lease of it (a downgrade, a deploy, a
 * per-request limit): the lease pays only for requests of the policy it was granted under; a
 * request of another is decided by the store with its own limit, and the old lease ends at once,
 * its unspent units given back. Real Redis behind the bridge, a limiter on a manual clock.
 */
import { describe, expect, it } from "vitest";
import type { CountedReceipt } from "../../../../src/limiter/receipt-state";
import type { LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { LOG_LAYOUTS, type LogLayout, readLog } from "../../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../../support/worker/redis";
import { type Isolate, isolateOn } from "./lease-support";

const redis = testRedis();
const prefix = scopedPrefix("lease-policy");
const T0 = 1_900_000_000_000;
// Generous leases, so that one lease holds many units past a lowered limit.
const LEASES = { leases: { maxShare: 1, headroom: 4, minUnits: 2 } };

const at = (request: LimitRequest, limit: number): LimitRequest => ({ ...request, limit });
const logKey = (request: LimitRequest) =>
  storageKey(prefix, request.policy, request.key, request.algorithm);

async function fire(isolate: Isolate, request: LimitRequest, count: number) {
  const decided = await Promise.all(
    Array.from({ length: count }, () =>
      isolate.limiter.limitAll([request], { waitUntil: isolate.waitUntil }),
    ),
  );
  await isolate.settle();
  return decided;
}

describe.each(LOG_LAYOUTS)(
  "a lease and a change of limit on the %s layout",
  (layout: LogLayout) => {
    const plan = (): LimitRequest => ({
      policy: "plan",
      key: `k-${crypto.randomUUID()}`,
      limit: 1_000,
      windowMs: 10_000,
      algorithm: layout,
      lease: true,
    });

    it("a lowered limit is never paid from the old lease, which ends and gives back at once", async () => {
      const clock = { t: T0 };
      const a = isolateOn(clock, prefix, LEASES);
      const request = plan();
      await fire(a, request, 10);
      clock.t += 1;
      const held = await fire(a, request, 5);
      expect(held.every((d) => d.decisions[0]?.source === "lease")).toBe(true);
      // The log: 15 admitted, and the lease's unspent units at its stamp (over the new limit).
      expect((await readLog(redis, logKey(request))).times.length).toBeGreaterThan(30);

      clock.t += 1;
      const lowered = at(request, 20);
      const first = await fire(a, lowered, 1);
      expect(first[0]?.decisions[0]?.source).toBe("redis");
      // The old lease ended with that request: only admitted units are left in the log.
      const admittedFirst = first[0]?.allowed ? 1 : 0;
      expect((await readLog(redis, logKey(request))).times.length).toBe(15 + admittedFirst);

      // The new limit's own leases may pay now; never more than it in the window.
      const rest = await fire(a, lowered, 10);
      for (const decided of rest.filter((d) => d.decisions[0]?.source === "lease")) {
        expect(
          (decided.receipt as CountedReceipt | undefined)?.leased?.[0]?.lease.policy.limit,
        ).toBe(20);
      }
      const admitted = admittedFirst + rest.filter((d) => d.allowed).length;
      expect(admitted).toBe(5);
      await a.limiter.endLeases();
      await a.settle();
      expect((await readLog(redis, logKey(request))).times.length).toBe(20);
    });

    it("a raised limit is decided by the store at once", async () => {
      const clock = { t: T0 };
      const a = isolateOn(clock, prefix, LEASES);
      const request = at(plan(), 10);
      expect((await fire(a, request, 15)).filter((d) => d.allowed).length).toBeLessThanOrEqual(10);
      expect((await fire(a, request, 1))[0]?.allowed).toBe(false);
      const raised = await fire(a, at(request, 1_000), 1);
      expect([raised[0]?.allowed, raised[0]?.decisions[0]?.source]).toEqual([true, "redis"]);
      await a.limiter.endLeases();
      await a.settle();
    });
  },
);
