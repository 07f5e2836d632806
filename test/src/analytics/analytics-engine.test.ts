// The Workers Analytics Engine sink: one data point per rule decision (rule, source, outcome,
// key, cost). The dataset is Cloudflare's binding, which only Cloudflare's network runs: here,
// an object with its one method, recording what the limiter's decisions wrote.
import { describe, expect, it } from "vitest";
import { createAnalytics } from "../../../src/analytics/create-analytics";
import type { AnalyticsEngineDatasetLike } from "../../../src/analytics/types";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { scopedPrefix, testStore } from "../../support/worker/redis";

// One prefix for the file, cleaned up after it (a hook registered inside a test never runs).
const filePrefix = scopedPrefix("ae");

describe("the Analytics Engine sink", () => {
  it("writes one data point per decision, cached denials included", async () => {
    const prefix = `${filePrefix}-engine`;
    const points: Parameters<AnalyticsEngineDatasetLike["writeDataPoint"]>[0][] = [];
    const analytics = createAnalytics({
      analyticsEngine: { writeDataPoint: (point) => points.push(point) },
      prefix,
    });
    const limiter = createLimiter({ store: testStore(), prefix, onDecision: analytics.record });
    const request = { policy: "api", key: "203.0.113.5", limit: 2, windowMs: 60_000, cost: 1 };
    for (let i = 0; i < 4; i++) await limiter.limit(request);
    expect(points.map((p) => p?.blobs)).toEqual([
      ["api", "redis", "allowed", "203.0.113.5"],
      ["api", "redis", "allowed", "203.0.113.5"],
      ["api", "cache", "denied", "203.0.113.5"],
      ["api", "cache", "denied", "203.0.113.5"],
    ]);
    expect(points[0]).toMatchObject({ indexes: ["api"], doubles: [1, 1] });
    // No store sink: nothing to flush, nothing read.
    expect(await analytics.stats(60, ["api"])).toBeUndefined();
    expect(analytics.isolate()).toMatchObject({ decisions: 4, flushes: 0 });
  });
});
