/**
 * Leases with the rest of a request (docs/leases.md): several rules all or nothing, request ids,
 * costs a lease cannot cover, refunds, the O(1) algorithms, and a store that stops answering.
 * Real Redis and bridge; limiters as isolates on a manual clock (the caller clock).
 */
import { describe, expect, it } from "vitest";
import { parseRules } from "../../../../src/config/limiter-config";
import { parseCheckBody } from "../../../../src/http/check-request";
import type { LimitRequest } from "../../../../src/limiter/types";
import { storageKey } from "../../../../src/store/keys";
import { faultScenario, storeAt } from "../../../support/worker/fault-control";
import { LOG_LAYOUTS, readLog } from "../../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../../support/worker/redis";
import { admitted, decideAndRecord, type Isolate, isolateOn, type Use } from "./lease-support";

const redis = testRedis();
const prefix = scopedPrefix("lease-rules");
const T0 = 1_900_000_000_000;

const leased = (policy: string, key: string, extra: Partial<LimitRequest> = {}): LimitRequest => ({
  policy,
  key,
  limit: 1_000,
  windowMs: 60_000,
  lease: true,
  ...extra,
});

/** Admissions in a request's log that still count (every test runs within a window of T0). */
async function inLog(request: LimitRequest): Promise<number> {
  const key = storageKey(prefix, request.policy, request.key, request.algorithm);
  return (await readLog(redis, key)).times.filter((t) => t > T0 - request.windowMs).length;
}

/**
 * Makes the requests' keys hot on `isolate`: 10 at once, decided by the store, so each key's
 * demand is 10 in a lifetime and one lease of 15 units (1.5 × 10) is taken; waits for it.
 */
async function warm(isolate: Isolate, requests: LimitRequest[], at: number, uses: Use[]) {
  await Promise.all(Array.from({ length: 10 }, () => decideAndRecord(isolate, requests, at, uses)));
  await isolate.settle();
}

describe("leases with several rules, request ids, costs and refunds", () => {
  it("a request spends from every rule's lease or goes to the store, all or nothing", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix);
    const key = `k-${crypto.randomUUID()}`;
    const wide = leased("multi-wide", key);
    const narrow = leased("multi-narrow", key);
    const uses: Use[] = [];
    await warm(one, [wide, narrow], clock.t, uses);
    clock.t += 10;
    const both = await decideAndRecord(one, [wide, narrow], clock.t, uses);
    expect(both.decisions.map((d) => d.source)).toEqual(["lease", "lease"]);
    // The narrow rule's lease holds 15 units (1.5 × 10): a cost of 20 fits the wide rule's lease
    // only... the request goes to the store, and the wide rule's lease pays nothing for it.
    const big = await decideAndRecord(one, [wide, { ...narrow, cost: 20 }], clock.t, uses);
    expect(big.decisions.map((d) => d.source)).toEqual(["redis", "redis"]);
    // A rule without a lease in the request: the store decides the whole request.
    const mixed = await decideAndRecord(
      one,
      [wide, leased("multi-plain", key, { lease: false })],
      clock.t,
      uses,
    );
    expect(mixed.decisions.map((d) => d.source)).toEqual(["redis", "redis"]);
    await one.settle();
    await one.limiter.endLeases();
    // Exactly what each rule admitted is in its log: no lease paid for what the store decided.
    for (const request of [wide, narrow]) {
      expect(await inLog(request)).toBe(admitted(uses, request.policy));
    }
  });

  it("a request id goes to the store even while a lease is live", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix);
    const request = leased("rid", `k-${crypto.randomUUID()}`);
    const uses: Use[] = [];
    await warm(one, [request], clock.t, uses);
    expect((await decideAndRecord(one, [request], clock.t, uses)).decisions[0]?.source).toBe(
      "lease",
    );
    const first = await decideAndRecord(one, [request], clock.t, uses, "id-1");
    expect(first.decisions[0]?.source).toBe("redis");
    const retry = await decideAndRecord(one, [request], clock.t, uses, "id-1");
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    await one.settle();
    await one.limiter.endLeases();
    expect(await inLog(request)).toBe(admitted(uses, "rid"));
  });

  it.each(LOG_LAYOUTS)(
    "a refund after its lease ended gives the units back to the store (%s)",
    async (layout) => {
      const clock = { t: T0 };
      const one = isolateOn(clock, prefix);
      const request = leased("late-refund", `k-${crypto.randomUUID()}`, { algorithm: layout });
      const uses: Use[] = [];
      await warm(one, [request], clock.t, uses);
      const paid = await Promise.all(
        [1, 2, 3].map(() => decideAndRecord(one, [request], clock.t, uses)),
      );
      expect(paid.map((d) => d.decisions[0]?.source)).toEqual(["lease", "lease", "lease"]);
      await one.limiter.endLeases();
      const before = await inLog(request);
      expect(before).toBe(admitted(uses, "late-refund"));
      // Each refund takes exactly its own unit out, after the lease gave back its unspent ones.
      for (const [i, decided] of paid.entries()) {
        const refunded = await one.limiter.refund(decided.receipt as never);
        expect(refunded).toEqual({ refunded: true, units: [1] });
        expect(await inLog(request)).toBe(before - i - 1);
      }
    },
  );

  it("the O(1) algorithms are never leased: the limiter asks the store, config and /check refuse", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix);
    const request = leased("o1", `k-${crypto.randomUUID()}`, { algorithm: "token-bucket" });
    const uses: Use[] = [];
    await warm(one, [request], clock.t, uses);
    const decided = await decideAndRecord(one, [request], clock.t, uses);
    expect(decided.decisions[0]?.source).toBe("redis");

    const rules = parseRules([
      { name: "o1", limit: 10, window: "1m", algorithm: "token-bucket", lease: true },
    ]);
    expect(rules).toMatchObject({ ok: false, field: "rules[0].lease" });
    if (!rules.ok) expect(rules.detail).toContain("sliding log only");
    expect(parseRules([{ name: "log", limit: 10, window: "1m", lease: true }])).toMatchObject({
      ok: true,
    });
    expect(parseRules([{ name: "log", limit: 10, window: "1m", lease: "yes" }])).toMatchObject({
      ok: false,
      field: "rules[0].lease",
    });
    const body = { key: "k", limit: 10, window: "1m", algorithm: "fixed-window", lease: true };
    expect(parseCheckBody(body, new Map())).toMatchObject({ ok: false, field: "lease" });
    const adhoc = parseCheckBody({ key: "k", limit: 10, window: "1m", lease: true }, new Map());
    expect(adhoc).toMatchObject({ ok: true, value: { requests: [{ lease: true }] } });
  });

  it("leases: false decides every request with the store", async () => {
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix, { leases: false });
    const request = leased("off", `k-${crypto.randomUUID()}`);
    const uses: Use[] = [];
    await warm(one, [request], clock.t, uses);
    expect(uses.every((use) => use.source === "redis")).toBe(true);
    expect(await inLog(request)).toBe(10);
  });
});

describe("leases when the store stops answering", () => {
  it("a live lease is spent until its end and no later; then the failure policy decides", async () => {
    const scenario = await faultScenario("forward");
    const clock = { t: T0 };
    const one = isolateOn(clock, prefix, {
      store: storeAt(scenario.url, 300),
      timeoutMs: 300,
      failMode: "closed",
    });
    const request = leased("outage", `k-${crypto.randomUUID()}`);
    const uses: Use[] = [];
    await warm(one, [request], clock.t, uses);
    await scenario.set("reset");
    // The lease (15 units, 1 s: 60 s / 20 caps at 1 s, spent for 900 ms, the last tenth slack
    // for a lagging isolate clock) pays while it lives ...
    clock.t += 899;
    for (let i = 0; i < 5; i++) {
      expect((await decideAndRecord(one, [request], clock.t, uses)).decisions[0]?.source).toBe(
        "lease",
      );
    }
    // ... and not a millisecond longer: past its end the store is asked, fails, and the rule's
    // fail mode (closed) denies.
    clock.t = T0 + 900;
    const after = await decideAndRecord(one, [request], clock.t, uses);
    expect(after.decisions[0]).toMatchObject({ allowed: false, source: "fail-closed" });
    await one.settle();
  });
});
