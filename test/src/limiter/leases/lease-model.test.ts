/**
 * Leases against a reference model, property style (docs/leases.md). Seeded random workloads —
 * 3 to 5 isolates on one manual clock (the caller clock), random limits, windows, costs, bursts
 * and pauses, two leased rules decided together or alone, request ids and refunds — on the real
 * store, in both log layouts. The model is the exact log of uses: every admitted unit at the
 * instant it was admitted, and where its units sit in the store (the store's now, or its lease's
 * stamp). Two properties:
 *
 *   1. never more than `limit` units in use in any window-length span, per rule;
 *   2. once every lease has ended, the store holds exactly the model's stamps: every unspent
 *      unit was given back, every refund the limiter reported was made, nothing else moved.
 *
 * A failing seed replays: the seed is in the test name.
 */
import { describe, expect, it } from "vitest";
import type { CountedReceipt } from "../../../../src/limiter/receipt-state";
import type { LimitRequest, MultiDecision } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { LOG_LAYOUTS, readLog } from "../../../support/worker/log-state";
import { prng } from "../../../support/worker/prng";
import { scopedPrefix, testRedis } from "../../../support/worker/redis";
import {
  decideAndRecord,
  isolateOn,
  mostInAnyWindow,
  recordedUses,
  type Use,
} from "./lease-support";

const redis = testRedis();
const prefix = scopedPrefix("lease-model");
const T0 = 1_900_000_000_000;
const SEEDS = [11, 23, 37];

describe.each(LOG_LAYOUTS)("leases against the reference model (%s)", (layout) => {
  it.each(SEEDS)("seed %i", async (seed) => {
    const rnd = prng(seed * 7919 + (layout === "sliding-log" ? 1 : 2));
    const pick = <T>(values: readonly T[]) => values[Math.floor(rnd() * values.length)] as T;
    const clock = { t: T0 };
    const isolates = Array.from({ length: 3 + Math.floor(rnd() * 3) }, () =>
      isolateOn(clock, prefix),
    );
    const windowMs = pick([1_000, 2_000, 5_000, 10_000]);
    const key = `k-${crypto.randomUUID()}`;
    const rules: LimitRequest[] = [
      { policy: "model-a", key, limit: 5 + Math.floor(rnd() * 56), windowMs, algorithm: layout },
      { policy: "model-b", key, limit: 20 + Math.floor(rnd() * 81), windowMs, algorithm: layout },
    ].map((rule) => ({ ...rule, lease: true }));
    const uses: Use[] = [];
    const receipts: { decided: MultiDecision; isolate: number }[] = [];
    const refunds: string[] = [];

    for (let step = 0; step < 200; step++) {
      // Mostly small steps (leases live across several), sometimes a pause past a lifetime.
      clock.t += rnd() < 0.1 ? Math.floor(rnd() * windowMs) : Math.floor(rnd() * (windowMs / 40));
      const fired: Promise<unknown>[] = [];
      for (const [i, isolate] of isolates.entries()) {
        const burst = rnd() < 0.05 ? 20 : Math.floor(rnd() * 4);
        for (let r = 0; r < burst; r++) {
          const cost = rnd() < 0.2 ? 2 : 1;
          const which = rnd();
          const requests = (which < 0.3 ? rules : which < 0.8 ? [rules[0]] : [rules[1]]).map(
            (rule) => ({ ...(rule as LimitRequest), cost }),
          );
          const requestId = rnd() < 0.05 ? `rid-${seed}-${step}-${i}-${r}` : undefined;
          // Drawn now, not when the answer comes: the draws stay in seed order.
          const refundLater = rnd() < 0.08;
          fired.push(
            decideAndRecord(isolate, requests, clock.t, uses, requestId).then((decided) => {
              if (decided.receipt && refundLater) receipts.push({ decided, isolate: i });
            }),
          );
        }
      }
      await Promise.all(fired);
      // Refund some admitted requests (their leases may be live or over).
      while (receipts.length > 0 && rnd() < 0.5) {
        const { decided, isolate } = receipts.shift() as (typeof receipts)[number];
        const receipt = decided.receipt;
        if (!receipt) continue;
        const outcome = await (isolates[isolate]?.limiter.refund(receipt) ?? Promise.reject());
        refunds.push(
          `${(receipt as CountedReceipt).leased ? "lease" : "store"}:${outcome.units.join("+")}`,
        );
        // The model follows what the limiter reports it gave back, per policy.
        for (const [p, use] of (recordedUses.get(decided) ?? []).entries()) {
          const given = outcome.units[p] ?? 0;
          use.cost -= given;
          if (use.cost <= 0) use.refunded = true;
        }
      }
      await Promise.all(isolates.map((isolate) => isolate.settle()));
    }
    await Promise.all(isolates.map((isolate) => isolate.limiter.endLeases()));

    for (const rule of rules) {
      expect(mostInAnyWindow(uses, rule.policy, windowMs)).toBeLessThanOrEqual(rule.limit);
      const stored = (await readLog(redis, storageKey(prefix, rule.policy, key, layout))).times
        .filter((t) => t > clock.t - windowMs)
        .sort((x, y) => x - y);
      const model = uses
        .filter((u) => u.policy === rule.policy && !u.refunded && u.stamp > clock.t - windowMs)
        .flatMap((u) => Array.from({ length: u.cost }, () => u.stamp))
        .sort((x, y) => x - y);
      expect(stored).toEqual(model);
    }
    console.log(
      `seed ${seed} (${layout}): ${isolates.length} isolates, limits ${rules.map((r) => r.limit)} per ${windowMs} ms,` +
        ` ${uses.length} uses (${uses.filter((u) => u.source === "lease").length} from leases), refunds ${refunds.join(" ")}`,
    );
    expect(uses.some((use) => use.source === "lease")).toBe(true);
  });
});

/**
 * The end of the budget (docs/leases.md): an isolate whose store answers count only its own
 * units in the window takes more than a quarter of what remains, up to all of it. Exactness does
 * not rest on the share (the store grants a lease whole or not at all, counted against the
 * limit), and this checks it where the rule bites: one isolate alone spends the budget, then two
 * more join while its big leases are live, all over the limit, across windows and pauses.
 */
describe.each(LOG_LAYOUTS)("an isolate alone takes the rest of the budget (%s)", (layout) => {
  it("stays within the limit in every window when others join, and gives back exactly", async () => {
    const rnd = prng(layout === "sliding-log" ? 101 : 202);
    const clock = { t: T0 };
    const isolates = Array.from({ length: 3 }, () => isolateOn(clock, prefix));
    const limit = 200;
    const windowMs = 10_000;
    const key = `k-${crypto.randomUUID()}`;
    const rule: LimitRequest = {
      policy: "model-sole",
      key,
      limit,
      windowMs,
      algorithm: layout,
      lease: true,
    };
    const uses: Use[] = [];
    const largest = [0, 0, 0];
    const admittedBy = [0, 0, 0];
    const run = async (active: number, steps: number, most: number) => {
      for (let step = 0; step < steps; step++) {
        clock.t += rnd() < 0.05 ? Math.floor(rnd() * windowMs) : 5 + Math.floor(rnd() * 20);
        const fired: Promise<unknown>[] = [];
        for (const [index, isolate] of isolates.slice(0, active).entries()) {
          for (let r = 0; r < 1 + Math.floor(rnd() * most); r++) {
            const cost = rnd() < 0.2 ? 2 : 1;
            const decided = decideAndRecord(isolate, [{ ...rule, cost }], clock.t, uses);
            fired.push(
              decided.then(({ allowed, receipt }) => {
                if (allowed) admittedBy[index] = (admittedBy[index] ?? 0) + 1;
                const lease = (receipt as CountedReceipt | undefined)?.leased?.[0]?.lease;
                if (lease) largest[index] = Math.max(largest[index] ?? 0, lease.granted);
              }),
            );
          }
        }
        await Promise.all(fired);
        await Promise.all(isolates.map((isolate) => isolate.settle()));
      }
    };
    // Alone until the budget is spent (its leases follow its demand, not a quarter of what is
    // left), then the others join it, all over the limit, for several windows.
    await run(1, 60, 12);
    await run(3, 400, 4);
    await Promise.all(isolates.map((isolate) => isolate.limiter.endLeases()));

    expect(mostInAnyWindow(uses, rule.policy, windowMs)).toBeLessThanOrEqual(limit);
    const stored = (await readLog(redis, storageKey(prefix, rule.policy, key, layout))).times
      .filter((t) => t > clock.t - windowMs)
      .sort((x, y) => x - y);
    const model = uses
      .filter((u) => !u.refunded && u.stamp > clock.t - windowMs)
      .flatMap((u) => Array.from({ length: u.cost }, () => u.stamp))
      .sort((x, y) => x - y);
    expect(stored).toEqual(model);
    // The rule bit: the first isolate was granted more than a quarter of the limit at once (a
    // quarter of what remains is at most that); the ones who joined were admitted too.
    expect(largest[0]).toBeGreaterThan(limit / 4);
    expect(admittedBy[1]).toBeGreaterThan(0);
    expect(admittedBy[2]).toBeGreaterThan(0);
    console.log(
      `sole (${layout}): admitted ${admittedBy.join("/")} by isolate, largest leases ${largest.join("/")}, limit ${limit}`,
    );
  });
});
