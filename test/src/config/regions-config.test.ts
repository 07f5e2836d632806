/**
 * LIMITER_CONFIG's `regions`, the region bindings and LIMITER_REGION (docs/regions.md): what the
 * config takes and refuses, how a request's region is picked, and the worker in workerd deciding
 * a warm key in its region (`"source": "region"`) through /check. Here the region's
 * store is the same bridge as home's (its keys are the home keys + ":region"); the three-database
 * topology with its delays is test/e2e/regions.test.ts.
 */
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";
import { regionPicker } from "../../../src/config/regions-config";
import type { Env } from "../../../worker/env";
import { scopedPrefix } from "../../support/worker/redis";
import { baseEnv, callWorker, postCheck } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("regions-config");
const regions = {
  us: { store: "US", continents: ["NA"], colos: ["iad", "EWR"] },
  eu: { store: "EU", continents: ["EU"] },
  lab: { store: "LAB" },
};

function envWith(overrides: Record<string, unknown>): Env {
  return {
    ...baseEnv,
    LIMITER_CONFIG: JSON.stringify({
      prefix,
      timeoutMs: 5_000,
      regions,
      rules: [
        {
          name: "leased",
          match: { path: "/leased/*" },
          limit: 10_000,
          window: "1m",
          key: "header:x-client",
          lease: true,
        },
      ],
    }),
    UPSTASH_REDIS_REST_URL_US: baseEnv.UPSTASH_REDIS_REST_URL,
    UPSTASH_REDIS_REST_TOKEN_US: baseEnv.UPSTASH_REDIS_REST_TOKEN,
    UPSTASH_REDIS_REST_URL_EU: baseEnv.UPSTASH_REDIS_REST_URL,
    UPSTASH_REDIS_REST_TOKEN_EU: baseEnv.UPSTASH_REDIS_REST_TOKEN,
    UPSTASH_REDIS_REST_URL_LAB: baseEnv.UPSTASH_REDIS_REST_URL,
    UPSTASH_REDIS_REST_TOKEN_LAB: baseEnv.UPSTASH_REDIS_REST_TOKEN,
    ...overrides,
  } as Env;
}

const call = callWorker;

describe("regions in LIMITER_CONFIG", () => {
  it("takes regions with colos (upper-cased) and continents, both optional", () => {
    const parsed = parseConfig({ regions });
    expect(parsed.ok && parsed.value.regions).toEqual({
      us: { store: "US", continents: ["NA"], colos: ["IAD", "EWR"] },
      eu: { store: "EU", continents: ["EU"], colos: [] },
      lab: { store: "LAB", continents: [], colos: [] },
    });
    expect(parseConfig({}).ok && parseConfig({})).toMatchObject({
      value: { regions: {} },
    });
  });

  it.each([
    [{ regions: [] }, "regions"],
    [{ regions: { us: {} } }, "regions.us.store"],
    [{ regions: { us: { store: "us-east" } } }, "regions.us.store"],
    [{ regions: { us: { store: "US", continents: ["Europe"] } } }, "regions.us.continents[0]"],
    [{ regions: { us: { store: "US", colos: ["FRANKFURT"] } } }, "regions.us.colos[0]"],
    [{ regions: { us: { store: "US", stores: "US" } } }, "regions.us.stores"],
    [{ regions: { "a b": { store: "US" } } }, "regions.a b"],
    [{ isolateLeases: "no" }, "isolateLeases"],
  ])("refuses %j, naming %s", (config, field) => {
    expect(parseConfig(config)).toMatchObject({ ok: false, field });
  });

  it("turns isolate leases off with isolateLeases: false (on by default)", () => {
    expect(parseConfig({}).ok && parseConfig({})).toMatchObject({
      value: { isolateLeases: true },
    });
    expect(parseConfig({ isolateLeases: false })).toMatchObject({
      ok: true,
      value: { isolateLeases: false },
    });
  });

  it("picks a colo's region first, then a continent's; a pinned worker always its own", () => {
    const parsed = parseConfig({ regions });
    if (!parsed.ok) throw new Error(parsed.detail);
    const pick = regionPicker(parsed.value.regions, undefined);
    expect(pick({ colo: "IAD", continent: "EU" })).toBe("us");
    expect(pick({ colo: "FRA", continent: "EU" })).toBe("eu");
    expect(pick({ colo: "SIN", continent: "AS" })).toBeUndefined();
    expect(pick(undefined)).toBeUndefined();
    expect(regionPicker(parsed.value.regions, "lab")({ colo: "IAD" })).toBe("lab");
  });

  it("answers 503 naming a region's missing binding, or a LIMITER_REGION no region has", async () => {
    const missing = await call(envWith({ UPSTASH_REDIS_REST_URL_EU: undefined }), "/leased/a", {
      headers: { "x-client": "a" },
    });
    expect(missing.status).toBe(503);
    expect(await missing.text()).toContain("UPSTASH_REDIS_REST_URL_EU");
    const unknown = await call(envWith({ LIMITER_REGION: "mars" }), "/leased/a", {
      headers: { "x-client": "a" },
    });
    expect(unknown.status).toBe(503);
    expect(await unknown.text()).toContain("LIMITER_REGION");
  });

  it("decides a warm key in the pinned region: /check answers source region", async () => {
    const env = envWith({ LIMITER_REGION: "lab" });
    const sources: string[] = [];
    for (let i = 0; i < 8; i++) {
      const res = await postCheck(env, { key: "warm", limit: 1_000, window: "1m", lease: true });
      expect(res.status).toBe(200);
      sources.push((await res.json<{ source: string }>()).source);
    }
    // Home decides until the key is warm and its first lease is in the region.
    expect(sources.slice(0, 2)).toEqual(["redis", "redis"]);
    // Then the region decides (one near round trip), and once this isolate asks often, the
    // isolate lease it took from the region's lease (no round trip).
    expect(sources).toContain("region");
    expect(sources.at(-1)).toMatch(/^(region|lease)$/);
    // A rule without lease, or a request id, is decided at home.
    const plain = await postCheck(env, { key: "warm", limit: 1_000, window: "1m" });
    expect((await plain.json<{ source: string }>()).source).toBe("redis");
  });

  it("reaches the region on POST /check/reset: the key's leases there go", async () => {
    const env = envWith({ LIMITER_REGION: "lab" });
    const body = { key: "reset-me", limit: 1_000, window: "1m", lease: true };
    const check = async () =>
      (await (await postCheck(env, body)).json<{ source: string }>()).source;
    const sources: string[] = [];
    for (let i = 0; i < 8; i++) sources.push(await check());
    expect(sources.at(-1)).toMatch(/^(region|lease)$/);
    const reset = await postCheck(env, body, { path: "/check/reset" });
    expect(reset.status).toBe(200);
    // No lease left anywhere for the key: home decides it again.
    expect(await check()).toBe("redis");
  });
});
