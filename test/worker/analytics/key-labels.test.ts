import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { workerWith } from "../../support/worker/worker-harness";

// analytics.keyLabels: a header rule counts a client under the SHA-256 of its header value, so
// its top denied keys are digests nobody can read; with keyLabels on, the raw value is stored
// beside each (for an hour) and /check/stats answers it as `label`.
const redis = testRedis();
const prefix = scopedPrefix("key-labels");
const run = crypto.randomUUID().slice(0, 8);
const bearer = { Authorization: "Bearer test-admin-token" }; // vitest.config.ts's admin token

const config = (keyLabels: boolean) => ({
  prefix: `${prefix}-${keyLabels}`,
  analytics: { enabled: true, keyLabels },
  rules: [
    {
      name: "quota",
      match: { path: `/labels-${run}/*` },
      limit: 1,
      window: "1m",
      key: "header:X-API-Key",
    },
  ],
});

async function sha256(text: string): Promise<string> {
  const bytes = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function topDenied(keyLabels: boolean, apiKey: string) {
  const worker = workerWith({ LIMITER_CONFIG: JSON.stringify(config(keyLabels)) });
  for (let i = 0; i < 3; i++) {
    const res = await worker(`/labels-${run}/x`, { headers: { "X-API-Key": apiKey } });
    await res.body?.cancel();
  }
  const res = await worker("/check/stats?minutes=5", { headers: bearer });
  expect(res.status).toBe(200);
  const stats = await res.json<{ rules: { rule: string; topDenied: unknown[] }[] }>();
  return stats.rules.find((rule) => rule.rule === "quota")?.topDenied;
}

describe("analytics.keyLabels", () => {
  it("on: a header rule's top denied key comes with its raw value", async () => {
    const apiKey = `customer-acme-${run}`;
    expect(await topDenied(true, apiKey)).toEqual([
      { key: await sha256(apiKey), count: 2, label: apiKey },
    ]);
    // Stored for the dashboard's hour, and no longer.
    const labels = await redis.keys(`${prefix}-true:analytics:labels:*`);
    expect(labels).toHaveLength(1);
    const ttl = await redis.pttl(labels[0] as string);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(122 * 60_000);
  });

  it("off (the default): the digest alone, and no raw value in Redis", async () => {
    const apiKey = `customer-secret-${run}`;
    expect(await topDenied(false, apiKey)).toEqual([{ key: await sha256(apiKey), count: 2 }]);
    expect(await redis.keys(`${prefix}-false:analytics:labels:*`)).toEqual([]);
  });
});
