import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { originCount, workerWith } from "../support/worker/worker-harness";

// One prefix for the file, cleaned up after it (a hook registered inside a test never runs).
const filePrefix = scopedPrefix("stats");

// Mixed proxy traffic with analytics on: /check/stats must show each rule's counts to the
// request, cached denials included (they never reach Redis).
const redis = testRedis();
const prefix = scopedPrefix("analytics");
const run = crypto.randomUUID().slice(0, 8);
const TOKEN = "test-admin-token"; // vitest.config.ts's LIMITER_ADMIN_TOKEN
const DECISION_TOKEN = "test-limiter-token"; // and its LIMITER_TOKEN

const config = {
  prefix,
  analytics: { enabled: true },
  rules: [
    { name: "api", match: { path: `/api-${run}/*` }, limit: 3, window: "1m", key: "ip" },
    {
      name: "login",
      match: { path: `/login-${run}`, methods: ["POST"] },
      limit: 1,
      window: "1m",
      key: "ip",
    },
    {
      name: "quota",
      match: { path: `/api-${run}/*` },
      limit: 1,
      window: "1m",
      key: "header:X-API-Key",
      missingKey: "skip",
      shadow: true,
    },
  ],
};
const worker = workerWith({ LIMITER_CONFIG: JSON.stringify(config) });
const bearer = { Authorization: `Bearer ${TOKEN}` };
const basic = (password: string) => ({ Authorization: `Basic ${btoa(`ops:${password}`)}` });
const ip = (n: number) => ({ "CF-Connecting-IP": `198.51.100.${n}` });

interface StatsBody {
  enabled: boolean;
  rules: {
    rule: string;
    shadow: boolean;
    totals: {
      allowed: number;
      denied: number;
      deniedFromCache: number;
      shadowDenied: number;
      sources: Record<string, number>;
    };
    minutes: { minute: number; allowed: number; denied: number }[];
    topDenied: { key: string; count: number }[];
  }[];
  isolate: { breaker: { state: string }; flushes: number };
}

async function sha256(text: string): Promise<string> {
  const bytes = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

describe("GET /check/stats with analytics on", () => {
  it("counts mixed proxy traffic per rule to the request, cached denials and shadow denials included", async () => {
    const statuses: number[] = [];
    // Client 1: 6 API calls with an API key: 3 allowed, then 3 denied, all from this isolate's
    // denial cache (the third admission left 0, which the cache remembers: no store call); the
    // shadow quota (limit 1) would deny 5 of them.
    for (let i = 0; i < 6; i++) {
      const res = await worker(`/api-${run}/items`, {
        headers: { ...ip(1), "X-API-Key": `key-${run}` },
      });
      statuses.push(res.status);
      await res.body?.cancel();
    }
    // Client 2: 2 API calls, no key (the shadow rule skips them): allowed.
    for (let i = 0; i < 2; i++) {
      const res = await worker(`/api-${run}/items`, { headers: ip(2) });
      statuses.push(res.status);
      await res.body?.cancel();
    }
    // Logins: client 3 twice (1 allowed, 1 denied), client 4 once.
    for (const n of [3, 3, 4]) {
      const res = await worker(`/login-${run}`, { method: "POST", headers: ip(n), body: "x" });
      statuses.push(res.status);
      await res.body?.cancel();
    }
    // A path no rule matches: no decision, nothing counted.
    await (await worker(`/plain-${run}`)).body?.cancel();
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429, 200, 200, 200, 429, 200]);
    expect(await originCount(`/api-${run}/items`)).toBe(5);

    const res = await worker("/check/stats", { headers: bearer });
    expect(res.status).toBe(200);
    expect(res.headers.get("Cache-Control")).toBe("no-store");
    const stats = await res.json<StatsBody>();
    expect(stats.enabled).toBe(true);
    const rule = (name: string) => stats.rules.find((r) => r.rule === name);
    expect(stats.rules.map((r) => r.rule)).toEqual(["api", "login", "quota"]);

    expect(rule("api")?.totals).toEqual({
      allowed: 5,
      denied: 3,
      deniedFromCache: 3,
      shadowDenied: 0,
      sources: { redis: 5, cache: 3, fallback: 0, "fail-open": 0, "fail-closed": 0 },
    });
    expect(rule("api")?.topDenied).toEqual([{ key: "198.51.100.1", count: 3 }]);
    expect(rule("login")?.totals).toMatchObject({ allowed: 2, denied: 1, deniedFromCache: 1 });
    expect(rule("login")?.topDenied).toEqual([{ key: "198.51.100.3", count: 1 }]);
    // The shadow rule: 1 admitted, 5 would-be denials (from the cache), none enforced; its key is
    // the header's SHA-256, never the key itself.
    expect(rule("quota")?.shadow).toBe(true);
    expect(rule("quota")?.totals).toMatchObject({ allowed: 1, denied: 0, shadowDenied: 5 });
    expect(rule("quota")?.totals.sources).toMatchObject({ redis: 1, cache: 5 });
    expect(rule("quota")?.topDenied).toEqual([{ key: await sha256(`key-${run}`), count: 5 }]);

    // The last hour, a minute per entry; this minute holds the counts.
    const minutes = rule("api")?.minutes ?? [];
    expect(minutes).toHaveLength(60);
    expect(minutes.at(-1)).toMatchObject({ allowed: 5, denied: 3 });
    expect(minutes.slice(0, -2).every((m) => m.allowed === 0 && m.denied === 0)).toBe(true);
    expect(stats.isolate.breaker.state).toBe("closed");

    // Every key the analytics wrote expires (counts after a day, top keys after an hour).
    const keys = await redis.keys(`${prefix}:analytics:*`);
    expect(keys.length).toBeGreaterThanOrEqual(4);
    // analytics.keyLabels is off by default: no raw value (an API key) is stored.
    expect(keys.filter((key) => key.includes(":labels:"))).toEqual([]);
    for (const key of keys) {
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(key.includes(":top:") ? 63 * 60_000 : 1441 * 60_000);
    }

    // Asked again, nothing is counted twice (the flush took the isolate's counts).
    const again = await (
      await worker("/check/stats?minutes=5", { headers: bearer })
    ).json<StatsBody>();
    expect(again.rules.find((r) => r.rule === "api")?.totals.allowed).toBe(5);
    expect(again.rules.find((r) => r.rule === "api")?.minutes).toHaveLength(5);
  });

  it("takes the admin token as a bearer token or as the Basic password, and nothing else", async () => {
    const none = await worker("/check/stats");
    expect(none.status).toBe(401);
    expect(none.headers.get("WWW-Authenticate")).toMatch(/^Basic realm="edge-limiter"/);
    expect((await worker("/check/stats", { headers: basic("wrong") })).status).toBe(401);
    expect((await worker("/check/stats", { headers: basic(TOKEN) })).status).toBe(200);
    expect(
      (await worker("/check/stats", { headers: { Authorization: `Basic ${btoa(TOKEN)}` } })).status,
    ).toBe(401); // no "user:" part
    expect(
      (await worker("/check/stats", { headers: { Authorization: "Bearer nope" } })).status,
    ).toBe(401);
    expect((await worker("/check/dashboard")).status).toBe(401);
    expect((await worker("/check/stats", { headers: { Authorization: "Basic %%%" } })).status).toBe(
      401,
    );
    // The decision token decides, it does not read: 403 as a bearer token; as a browser's
    // password a 401 with the Basic challenge, so the browser asks again.
    const asBearer = await worker("/check/stats", {
      headers: { Authorization: `Bearer ${DECISION_TOKEN}` },
    });
    expect(asBearer.status).toBe(403);
    expect(await asBearer.json()).toMatchObject({
      detail: expect.stringContaining("LIMITER_ADMIN_TOKEN"),
    });
    for (const path of ["/check/stats", "/check/dashboard"]) {
      const asPassword = await worker(path, { headers: basic(DECISION_TOKEN) });
      expect(asPassword.status, path).toBe(401);
      expect(asPassword.headers.get("WWW-Authenticate"), path).toMatch(/^Basic /);
      expect(await asPassword.json(), path).toMatchObject({
        detail: expect.stringContaining("LIMITER_ADMIN_TOKEN"),
      });
    }
  });

  it("refuses a bad minutes with 400 naming it, and other methods with 405", async () => {
    for (const minutes of ["0", "1441", "1.5", "abc", ""]) {
      const res = await worker(`/check/stats?minutes=${minutes}`, { headers: bearer });
      expect(res.status, minutes).toBe(400);
      expect(await res.json()).toMatchObject({ field: "minutes" });
    }
    const post = await worker("/check/stats", { method: "POST", headers: bearer });
    expect(post.status).toBe(405);
    expect(post.headers.get("Allow")).toBe("GET, HEAD");
    expect((await worker("/check/dashboard", { method: "DELETE" })).status).toBe(405);
  });

  it("serves the dashboard as one self-contained page that loads nothing from elsewhere", async () => {
    const res = await worker("/check/dashboard", { headers: basic(TOKEN) });
    expect(res.status).toBe(200);
    expect(res.headers.get("Content-Type")).toMatch(/^text\/html/);
    expect(res.headers.get("Content-Security-Policy")).toMatch(/^default-src 'none'/);
    const html = await res.text();
    expect(html).toContain("stats?minutes=60");
    // No external script, style sheet, font or image: no src= or href= at all, no @import/url().
    expect(html).not.toMatch(/\s(src|href)=|@import|url\(/i);
  });
});

describe("analytics off (the default)", () => {
  it("counts nothing and says how to turn it on", async () => {
    const offPrefix = `${filePrefix}-off`;
    const off = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix: offPrefix,
        rules: [{ name: "api", match: { path: `/off-${run}/*` }, limit: 1, window: "1m" }],
      }),
    });
    await (await off(`/off-${run}/a`, { headers: ip(9) })).body?.cancel();
    const res = await off("/check/stats", { headers: bearer });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ enabled: false, rules: [] });
    expect(await redis.keys(`${offPrefix}:analytics:*`)).toEqual([]);
  });

  it("a bad analytics setting is a 503 naming the field; a missing dataset names the binding", async () => {
    const bad = workerWith({
      LIMITER_CONFIG: JSON.stringify({ rules: [], analytics: { enabled: true, topKeys: 99 } }),
    });
    const res = await bad("/check/stats", { headers: bearer });
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field: "analytics.topKeys" });
    const noDataset = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        rules: [],
        analytics: { enabled: true, sinks: ["analytics-engine"] },
      }),
    });
    const missing = await noDataset("/check/stats", { headers: bearer });
    expect(missing.status).toBe(503);
    expect(await missing.json()).toMatchObject({ field: "LIMITER_ANALYTICS" });
  });
});

describe("GET /check/stats stays the size of the config", () => {
  it("counts every ad-hoc window in one bucket and lists nothing else stored under the prefix", async () => {
    const boundedPrefix = `${filePrefix}-bounded`;
    const bounded = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix: boundedPrefix,
        analytics: { enabled: true },
        rules: [{ name: "api", match: { path: `/bounded-${run}/*` }, limit: 5, window: "1m" }],
      }),
    });
    // 300 ad-hoc checks, each with a window of its own: 300 policies `check.<window>ms`.
    const WINDOWS = 300;
    for (let batch = 0; batch < WINDOWS; batch += 25) {
      const answers = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          bounded("/check", {
            method: "POST",
            headers: { ...bearer, "Content-Type": "application/json" },
            body: JSON.stringify({ key: `adhoc-${run}`, limit: 1, window: 60_000 + batch + i }),
          }),
        ),
      );
      for (const answer of answers) {
        expect(answer.status).toBe(200);
        await answer.body?.cancel();
      }
    }
    // Another deployment under the same prefix: its rule's counts in this minute's hash and its
    // top keys; and ad-hoc windows counted by name (as before they were folded into one bucket).
    const minute = Math.floor(Date.now() / 60_000);
    const hash = `${boundedPrefix}:analytics:${minute}`;
    await redis.hincrby(hash, "foreign|a", 7);
    await redis.hincrby(hash, "check.1234ms|a", 3);
    await redis.zincrby(`${hash}:top:foreign`, 2, "203.0.113.9");
    await redis.pexpire(hash, 120_000);
    await redis.pexpire(`${hash}:top:foreign`, 120_000);

    for (const minutes of [60, 1_440]) {
      const res = await bounded(`/check/stats?minutes=${minutes}`, { headers: bearer });
      expect(res.status).toBe(200);
      const text = await res.text();
      const stats = JSON.parse(text) as StatsBody;
      expect(stats.rules.map((r) => r.rule)).toEqual(["api", "(ad-hoc)"]);
      const adhoc = stats.rules.find((r) => r.rule === "(ad-hoc)");
      expect(adhoc?.totals).toMatchObject({ allowed: WINDOWS, denied: 0 });
      expect(adhoc?.minutes).toHaveLength(minutes);
      // Two rules × `minutes` entries of ~60 bytes each: the size of the config and the span,
      // not of the windows callers picked (300 listed one by one were 345 KB at 60 minutes).
      expect(text.length, `${minutes} minutes`).toBeLessThan(2 * minutes * 90 + 2_000);
      console.log(`stats, ${WINDOWS} ad-hoc windows, ${minutes} minutes: ${text.length} B`);
    }
  });
});
