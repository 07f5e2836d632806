// Analytics per region (docs/regions.md): a decision of a request in a region counts under that
// region's name whoever decided it, flushed to Redis and read back by GET /check/stats's reader;
// a request decided as home's counts under no region. The region's store here is the same
// bridge as home's (its keys are the home keys + ":region").
import { describe, expect, it } from "vitest";
import { createAnalytics } from "../../../src/analytics/create-analytics";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("region-counts");

describe("analytics per region", () => {
  it("counts each region's decisions under its name, and home's under none", async () => {
    const flushes: Promise<unknown>[] = [];
    const analytics = createAnalytics({
      store: testStore(),
      prefix,
      rules: ["api"],
      regions: ["lab", "idle"],
      waitUntil: (p) => flushes.push(p),
    });
    const limiter = createLimiter({
      store: testStore(),
      prefix,
      timeoutMs: 5_000,
      regions: { stores: { lab: testStore() } },
      onDecision: analytics.record,
    });
    const request = { policy: "api", key: "client", limit: 1_000, windowMs: 60_000, lease: true };
    const pending: Promise<unknown>[] = [];
    const sources: string[] = [];
    for (let i = 0; i < 12; i++) {
      const decided = await limiter.limitAll([request], {
        region: "lab",
        waitUntil: (p) => pending.push(p),
      });
      expect(decided.region).toBe("lab");
      sources.push(decided.decisions[0]?.source ?? "");
      // The lease call is off the request path: let it land before the next request.
      await Promise.allSettled(pending.splice(0));
    }
    for (let i = 0; i < 3; i++) {
      const decided = await limiter.limitAll([{ ...request, lease: false }]);
      expect(decided.region).toBeUndefined();
    }
    expect(sources).toContain("region");
    await limiter.endLeases();
    await Promise.allSettled(flushes);
    const span = await analytics.stats(5, ["api"]);
    const api = span?.rules.find((rule) => rule.rule === "api");
    expect(api?.totals.regions).toEqual({ lab: 12 });
    expect(api?.totals.allowed).toBe(15);
    expect(api?.totals.sources.region).toBeGreaterThan(0);
  });
});
