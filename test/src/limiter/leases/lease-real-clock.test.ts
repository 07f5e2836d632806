/**
 * Leases on the real clocks (docs/leases.md): the Redis clock (TIME in the script), each
 * isolate's Date.now, real timers ending the leases, real concurrency — 3 limiters (each its own
 * store client) hammering one key at once for 2.5 s, on a 1 s window (100 ms leases). The manual
 * clock tests (lease.test.ts) decide the same on one clock; this one checks that nothing in the
 * conversion between the two clocks, or in a lease ended by its timer, admits too many.
 */
import { describe, expect, inject, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { LimitRequest } from "../../../../src/limiter/types";
import { counting, storeAt } from "../../../support/worker/fault-control";
import { LOG_LAYOUTS } from "../../../support/worker/log-state";
import { scopedPrefix } from "../../../support/worker/redis";
import { mostInAnyWindow, type Use } from "./lease-support";

const prefix = scopedPrefix("lease-real");

describe.each(LOG_LAYOUTS)("leases on the real clocks (%s)", (layout) => {
  it("3 isolates at once, over the limit: never more than the limit in any 1 s span", async () => {
    const request: LimitRequest = {
      policy: "real",
      key: `k-${crypto.randomUUID()}`,
      limit: 40,
      windowMs: 1_000,
      algorithm: layout,
      lease: true,
    };
    const isolates = [0, 1, 2].map(() => {
      const counted = counting(storeAt(inject("bridgeUrl"), 2_000));
      const pending: Promise<unknown>[] = [];
      const limiter = createLimiter({ store: counted.store, prefix, timeoutMs: 2_000 });
      return { limiter, pending, calls: counted.calls };
    });
    const uses: Use[] = [];
    const until = Date.now() + 2_500;
    // Each isolate: 4 requests at a time, again as soon as they are answered.
    await Promise.all(
      isolates.flatMap((isolate) =>
        Array.from({ length: 4 }, async () => {
          while (Date.now() < until) {
            // Each request an event, as in workerd, whose clock advances with I/O only (a
            // timer is one): without it a loop of lease answers would read one frozen instant.
            await new Promise((resolve) => setTimeout(resolve, 0));
            // A lease pays synchronously inside the call: its use is now.
            const sent = Date.now();
            const decided = await isolate.limiter.limitAll([request], {
              waitUntil: (promise) => isolate.pending.push(promise),
            });
            if (!decided.allowed) continue;
            const source = decided.decisions[0]?.source ?? "?";
            // The store's admissions happen on its clock (the receipt's `at`).
            const at = source === "lease" ? sent : (decided.receipt?.at ?? sent);
            uses.push({ policy: "real", at, stamp: at, cost: 1, source, refunded: false });
          }
        }),
      ),
    );
    await Promise.all(isolates.flatMap((isolate) => isolate.pending));
    const leased = uses.filter((use) => use.source === "lease").length;
    console.log(
      `real clocks (${layout}): ${uses.length} admitted over 2.5 s at 40 per 1 s, ${leased} from leases,` +
        ` store calls ${isolates.reduce((sum, isolate) => sum + isolate.calls(), 0)}`,
    );
    expect(leased).toBeGreaterThan(0);
    expect(mostInAnyWindow(uses, "real", 1_000)).toBeLessThanOrEqual(40);
  });
});
