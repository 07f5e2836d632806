import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { workerWith } from "../support/worker/worker-harness";

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
      overrides: true,
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

describe("analytics.keyLabels in the plans", () => {
  /** Sets an override and a key block with a raw API key, then lists both. */
  async function listed(keyLabels: boolean, apiKey: string) {
    const worker = workerWith({ LIMITER_CONFIG: JSON.stringify(config(keyLabels)) });
    const admin = (path: string, body: unknown) =>
      worker(path, {
        method: "POST",
        headers: { ...bearer, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    expect((await admin("/check/override", { rule: "quota", key: apiKey, limit: 50 })).status).toBe(
      200,
    );
    expect((await admin("/check/block", { rule: "quota", key: `${apiKey}-b` })).status).toBe(200);
    const page = async (what: string) => {
      const res = await worker(`/check/plans?what=${what}`, { headers: bearer });
      expect(res.status).toBe(200);
      return (await res.json<{ entries: Record<string, unknown>[] }>()).entries;
    };
    return { overrides: await page("overrides"), blocks: await page("blocks") };
  }

  it("on: an override and a key block set with a raw key are listed with it", async () => {
    const apiKey = `plan-acme-${run}`;
    const { overrides, blocks } = await listed(true, apiKey);
    expect(overrides).toEqual([
      expect.objectContaining({ value: await sha256(apiKey), label: apiKey, limit: 50 }),
    ]);
    expect(blocks).toEqual([
      expect.objectContaining({ value: await sha256(`${apiKey}-b`), label: `${apiKey}-b` }),
    ]);
  });

  it("off (the default): digests alone, and no raw value in Redis", async () => {
    const apiKey = `plan-secret-${run}`;
    const { overrides, blocks } = await listed(false, apiKey);
    expect(overrides).toEqual([expect.not.objectContaining({ label: expect.anything() })]);
    expect(overrides[0]?.value).toBe(await sha256(apiKey));
    expect(blocks).toEqual([expect.not.objectContaining({ label: expect.anything() })]);
    expect(await redis.keys(`${prefix}-false:plans:labels`)).toEqual([]);
  });
});
