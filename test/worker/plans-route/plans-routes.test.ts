import { describe, expect, it } from "vitest";
import { scopedPrefix } from "../../support/worker/redis";
import {
  type CheckPath,
  originCount,
  postCheck,
  workerWith,
} from "../../support/worker/worker-harness";

const prefix = scopedPrefix("plans-routes");
const run = crypto.randomUUID().slice(0, 8);
const TOKEN = "test-admin-token"; // vitest.config.ts's LIMITER_ADMIN_TOKEN

const config = {
  prefix,
  networkBlocks: true,
  rules: [
    {
      name: "api",
      match: { path: "/api/*" },
      limit: 3,
      window: "1m",
      key: "header:x-api-key",
      overrides: true,
    },
    { name: "web", match: { path: "/web/*" }, limit: 3, window: "1m", overrides: true },
    { name: "open", match: { path: "/open/*" }, limit: 100, window: "1m" },
  ],
};
// Two isolates: the same rules and prefix, each its own runtime (limiter, caches, block copy):
// the worker builds one runtime per distinct LIMITER_CONFIG text.
const isolateA = workerWith({ LIMITER_CONFIG: JSON.stringify(config) });
const isolateB = workerWith({ LIMITER_CONFIG: JSON.stringify(config, null, 1) });
const isolateC = workerWith({ LIMITER_CONFIG: JSON.stringify(config, null, 2) });

const admin = (
  worker: typeof isolateA,
  path: CheckPath,
  body: unknown,
  token: string | null = TOKEN,
) => postCheck(worker, body, { path, token });

const apiCall = (worker: typeof isolateA, path: string, apiKey: string) =>
  worker(path, { headers: { "x-api-key": apiKey } });

describe("POST /check/override", () => {
  it("a raw API key's override, set through one isolate, is the limit the other's proxy applies", async () => {
    const apiKey = `customer-${run}-42`;
    const path = `/api/override-${run}`;
    const first = await apiCall(isolateB, path, apiKey);
    expect(first.headers.get("RateLimit-Policy")).toBe('"api";q=3;w=60');
    const set = await admin(isolateA, "/check/override", { rule: "api", key: apiKey, limit: 10 });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({ ok: true, existed: false, rules: ["api"] });
    const raised = await apiCall(isolateB, path, apiKey);
    expect(raised.status).toBe(200);
    expect(raised.headers.get("RateLimit-Policy")).toBe('"api";q=10;w=60');
    expect(raised.headers.get("RateLimit")).toMatch(/^"api";r=8;/);
    // /check names the rule and the raw key: the same log, the same override.
    const checked = await admin(isolateB, "/check", { rule: "api", key: apiKey });
    expect(await checked.json()).toMatchObject({ allowed: true, limit: 10, remaining: 7 });
    // Peek reads the override too.
    const peeked = await admin(isolateB, "/check/peek", { rule: "api", key: apiKey });
    expect(await peeked.json()).toMatchObject({ allowed: true, limit: 10, remaining: 7 });
    // Removed: the rule's limit again (3, and 3 are counted already).
    const removed = await admin(isolateA, "/check/override", {
      rule: "api",
      key: apiKey,
      limit: null,
    });
    expect(await removed.json()).toMatchObject({ ok: true, existed: true });
    const back = await apiCall(isolateC, path, apiKey);
    expect(back.status).toBe(429);
    expect(back.headers.get("RateLimit-Policy")).toBe('"api";q=3;w=60');
  });

  it("an ip rule's override groups the address as the proxy does", async () => {
    const ip = `2001:db8:${run.slice(0, 4)}:1::9`;
    await admin(isolateA, "/check/override", { rule: "web", key: ip, limit: 0 });
    // Another address of the same /64.
    const refused = await isolateB(`/web/${run}`, {
      headers: { "CF-Connecting-IP": `2001:db8:${run.slice(0, 4)}:1::77` },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("RateLimit-Policy")).toBe('"web";q=0;w=60');
  });

  it("refuses what it cannot apply, naming the field, and counts nothing", async () => {
    const cases: [unknown, string][] = [
      [{ rule: "open", key: "k", limit: 5 }, "rule"],
      [{ rule: "nope", key: "k", limit: 5 }, "rule"],
      [{ rule: "api", key: "", limit: 5 }, "key"],
      [{ rule: "api", key: "k" }, "limit"],
      [{ rule: "api", key: "k", limit: 1.5 }, "limit"],
      [{ rule: "api", key: "k", limit: 100_001 }, "limit"],
      [{ rule: "api", key: "k", limit: 5, extra: 1 }, "extra"],
      [[1], "body"],
    ];
    for (const [body, field] of cases) {
      const res = await admin(isolateA, "/check/override", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get("Content-Type")).toBe("application/problem+json");
      expect(await res.json()).toMatchObject({ field });
    }
    expect(
      (await admin(isolateA, "/check/override", { rule: "api", key: "k", limit: 5 }, null)).status,
    ).toBe(401);
    expect(
      (await admin(isolateA, "/check/override", { rule: "api", key: "k", limit: 5 }, "wrong"))
        .status,
    ).toBe(401);
  });
});

describe("POST /check/block and /check/unblock", () => {
  it("a key blocked through one isolate is refused 403 by the other, origin untouched; unblocked, it passes", async () => {
    const apiKey = `abuser-${run}`;
    const path = `/api/block-${run}`;
    const blocked = await admin(isolateA, "/check/block", {
      rule: "api",
      key: apiKey,
      seconds: 600,
    });
    expect(await blocked.json()).toEqual({ ok: true, existed: false, rules: ["api"] });
    const refused = await apiCall(isolateB, path, apiKey);
    expect(refused.status).toBe(403);
    expect(refused.headers.get("Content-Type")).toBe("application/problem+json");
    const problem = await refused.json<Record<string, unknown>>();
    expect(problem).toMatchObject({
      status: 403,
      title: "Forbidden",
      policy: "api",
      blocked: { by: "key", until: expect.any(Number) },
    });
    expect(String(problem.detail)).toMatch(
      /this client's key is blocked for rule "api" until 20\d\d-/,
    );
    expect(Number(refused.headers.get("Retry-After"))).toBeGreaterThan(500);
    expect(await originCount(path)).toBe(0);
    // /check: 403, allowed false, blocked true.
    const checked = await admin(isolateB, "/check", { rule: "api", key: apiKey });
    expect(checked.status).toBe(403);
    expect(await checked.json()).toMatchObject({
      allowed: false,
      blocked: true,
      policy: "api",
      source: "block",
    });
    const peeked = await admin(isolateB, "/check/peek", { rule: "api", key: apiKey });
    expect(await peeked.json()).toMatchObject({ allowed: false, blocked: true, source: "block" });
    // Unblocked through A; C (an isolate that never saw the block) passes at once.
    const unblocked = await admin(isolateA, "/check/unblock", { rule: "api", key: apiKey });
    expect(await unblocked.json()).toMatchObject({ ok: true, existed: true });
    const passed = await apiCall(isolateC, path, apiKey);
    expect(passed.status).toBe(200);
    // Nothing was counted while blocked: this is the first request of three.
    expect(passed.headers.get("RateLimit")).toMatch(/^"api";r=2;/);
    expect(await originCount(path)).toBe(1);
  });

  it('a key block without "rule" blocks the key in every rule that reads overrides', async () => {
    const ip = `198.51.100.${Number.parseInt(run.slice(0, 2), 16) % 200}`;
    const res = await admin(isolateA, "/check/block", { key: ip });
    expect(await res.json()).toMatchObject({ ok: true, rules: ["api", "web"] });
    expect(
      (await isolateB(`/web/all-${run}`, { headers: { "CF-Connecting-IP": ip } })).status,
    ).toBe(403);
    // "open" does not read overrides: the key block is not its.
    expect(
      (await isolateB(`/open/all-${run}`, { headers: { "CF-Connecting-IP": ip } })).status,
    ).toBe(200);
    await admin(isolateA, "/check/unblock", { key: ip });
  });

  it("network blocks: a CIDR, an IPv6 prefix, a country, an AS, each refused by a fresh isolate", async () => {
    const fresh = (n: number) =>
      workerWith({ LIMITER_CONFIG: JSON.stringify(config, null, 3 + n) });
    const v4 = `203.0.113.0/${24}`;
    const answers = [
      await admin(isolateA, "/check/block", { ip: "203.0.113.77/24" }),
      await admin(isolateA, "/check/block", { ip: "2001:DB8:ffff::/48", rule: "web" }),
      await admin(isolateA, "/check/block", { country: "kp", seconds: 3600 }),
      await admin(isolateA, "/check/block", { asn: 64_496 }),
    ];
    expect(await Promise.all(answers.map((res) => res.json()))).toEqual([
      { ok: true, existed: false, ip: v4, rule: null },
      { ok: true, existed: false, ip: "2001:db8:ffff::/48", rule: "web" },
      { ok: true, existed: false, country: "KP", rule: null },
      { ok: true, existed: false, asn: "64496", rule: null },
    ]);
    const worker = fresh(1);
    const byIp = await worker(`/open/net-${run}`, {
      headers: { "CF-Connecting-IP": "203.0.113.9" },
    });
    expect(byIp.status).toBe(403);
    expect(await byIp.json()).toMatchObject({ policy: "open", blocked: { by: "ip", value: v4 } });
    // The IPv6 block names "web" only.
    const v6 = { headers: { "CF-Connecting-IP": "2001:db8:ffff:1::1" } };
    expect((await worker(`/web/net-${run}`, v6)).status).toBe(403);
    expect((await worker(`/open/net-${run}`, v6)).status).toBe(200);
    const fromKp = await worker(`/open/net-${run}`, {
      headers: { "CF-Connecting-IP": "192.0.2.1" },
      cf: { country: "KP" },
    } as RequestInit);
    expect(fromKp.status).toBe(403);
    expect(await fromKp.json()).toMatchObject({
      blocked: { by: "country", value: "KP", until: expect.any(Number) },
    });
    const fromAs = await worker(`/open/net-${run}`, {
      headers: { "CF-Connecting-IP": "192.0.2.1" },
      cf: { asn: 64_496 },
    } as RequestInit);
    expect(fromAs.status).toBe(403);
    expect(await originCount(`/open/net-${run}`)).toBe(1);
    // Listed, then removed: a fresh isolate passes them all.
    const listed = await isolateA("/check/plans?what=network", {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    const page = await listed.json<{ cursor: string; entries: unknown[] }>();
    expect(page.entries).toEqual(
      expect.arrayContaining([
        { type: "block", by: "ip", value: v4 },
        { type: "block", by: "asn", value: "64496" },
        { type: "block", by: "ip", policy: "web", value: "2001:db8:ffff::/48" },
      ]),
    );
    await admin(isolateA, "/check/unblock", { ip: v4 });
    await admin(isolateA, "/check/unblock", { ip: "2001:db8:ffff::/48", rule: "web" });
    await admin(isolateA, "/check/unblock", { country: "KP" });
    await admin(isolateA, "/check/unblock", { asn: "64496" });
    const cleared = fresh(2);
    expect((await cleared(`/web/net-${run}`, v6)).status).toBe(200);
    expect(
      (
        await cleared(`/open/net-${run}`, {
          headers: { "CF-Connecting-IP": "203.0.113.9" },
          cf: { country: "KP", asn: 64_496 },
        } as RequestInit)
      ).status,
    ).toBe(200);
  });

  it("a CIDR blocked through one isolate holds on the other's first request after a quiet spell", async () => {
    // A short refreshMs stands in for the default second; the quiet spell outlasts it.
    const quick = { ...config, prefix: `${prefix}-idle`, networkBlocks: { refreshMs: 100 } };
    const one = workerWith({ LIMITER_CONFIG: JSON.stringify(quick) });
    const two = workerWith({ LIMITER_CONFIG: JSON.stringify(quick, null, 1) });
    const from = { headers: { "CF-Connecting-IP": "203.0.113.5" } };
    const path = `/open/idle-${run}`;
    // The second isolate has its copy, without the block.
    expect((await two(path, from)).status).toBe(200);
    const set = await admin(one, "/check/block", { ip: "203.0.113.0/24" });
    expect(await set.json()).toMatchObject({ ok: true, ip: "203.0.113.0/24" });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const refused = await two(path, from);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ blocked: { by: "ip", value: "203.0.113.0/24" } });
    expect(await originCount(path)).toBe(1);
    await admin(one, "/check/unblock", { ip: "203.0.113.0/24" });
  });

  it("refuses bad blocks, naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ key: "a", ip: "192.0.2.1" }, "key"],
      [{}, "key"],
      [{ ip: "300.1.1.1" }, "ip"],
      [{ ip: "192.0.2.0/33" }, "ip"],
      [{ country: "DEU" }, "country"],
      [{ asn: -1 }, "asn"],
      [{ ip: "192.0.2.1", seconds: 0 }, "seconds"],
      [{ ip: "192.0.2.1", rule: "nope" }, "rule"],
      [{ rule: "open", key: "x" }, "rule"],
    ];
    for (const [body, field] of cases) {
      const res = await admin(isolateA, "/check/block", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toMatchObject({ field });
    }
  });

  it("without networkBlocks in the config, a network block is refused with the reason", async () => {
    const plain = workerWith({
      LIMITER_CONFIG: JSON.stringify({ ...config, networkBlocks: false }),
    });
    const res = await admin(plain, "/check/block", { ip: "192.0.2.1" });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ detail: expect.stringContaining("networkBlocks") });
  });
});

describe("GET /check/plans", () => {
  it("lists overrides and key blocks page by page, with the key as counted", async () => {
    const keys = [1, 2, 3].map((i) => `list-${run}-${i}`);
    for (const key of keys)
      await admin(isolateA, "/check/override", { rule: "web", key, limit: 7 });
    const seen: { value: string; limit?: number; policy?: string }[] = [];
    let cursor = "0";
    do {
      const res = await isolateA(`/check/plans?what=overrides&rule=web&count=1&cursor=${cursor}`, {
        headers: { Authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(200);
      const page = await res.json<{ cursor: string; entries: typeof seen }>();
      seen.push(...page.entries);
      cursor = page.cursor;
    } while (cursor !== "0");
    for (const key of keys)
      expect(seen).toContainEqual({
        type: "override",
        by: "key",
        policy: "web",
        value: key,
        limit: 7,
      });
    const bad = await isolateA("/check/plans?what=everything", {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    expect(bad.status).toBe(400);
    expect((await isolateA("/check/plans")).status).toBe(401);
  });
});

describe("a calendar quota's own anchor through POST /check/override", () => {
  const quotaConfig = {
    prefix,
    rules: [
      {
        name: "monthly",
        limit: 2,
        period: "month",
        timezone: "UTC",
        key: "header:x-api-key",
        overrides: true,
      },
      { name: "minute", match: { path: "/minute/*" }, limit: 5, window: "1m", overrides: true },
    ],
  };
  const worker = workerWith({ LIMITER_CONFIG: JSON.stringify(quotaConfig) });
  const quotaCheck = (key: string) => postCheck(worker, { rule: "monthly", key });

  it("the rule's month, then the key's own from its billing day with its budget; 429 to its boundary", async () => {
    const key = `billing-${run}`;
    const first = await quotaCheck(key);
    expect(first.status).toBe(200);
    const month = await first.json<{ reset: number }>();
    const now = new Date();
    expect(month.reset).toBe(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    // Billing from the 1st's anchor a day ago: its period started yesterday at this time.
    const anchor = new Date(Date.now() - 86_400_000);
    anchor.setUTCDate(1);
    const set = await admin(worker, "/check/override", {
      rule: "monthly",
      key,
      limit: 3,
      anchor: anchor.toISOString(),
    });
    expect(set.status).toBe(200);
    const own = await quotaCheck(key);
    expect(own.status).toBe(200);
    const answer = await own.json<{ reset: number; limit: number; remaining: number }>();
    expect(answer.limit).toBe(3);
    expect(new Date(answer.reset).getUTCDate()).toBe(1);
    expect(new Date(answer.reset).getUTCHours()).toBe(anchor.getUTCHours());
    expect((await quotaCheck(key)).status).toBe(200);
    const denied = await quotaCheck(key);
    expect(denied.status).toBe(429);
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThanOrEqual(
      Math.floor((answer.reset - Date.now()) / 1000),
    );
    const listed = await worker("/check/plans?what=overrides&rule=monthly", {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    expect((await listed.json<{ entries: unknown[] }>()).entries).toContainEqual(
      expect.objectContaining({ limit: 3, anchor: Date.parse(anchor.toISOString()) }),
    );
  });

  it("refuses an anchor on a rule without a period, or one that is not an instant, naming it", async () => {
    for (const body of [
      { rule: "minute", key: `a-${run}`, limit: 3, anchor: "2026-01-15T09:00:00Z" },
      { rule: "monthly", key: `a-${run}`, limit: 3, anchor: "the 15th" },
      { rule: "monthly", key: `a-${run}`, limit: null, anchor: "2026-01-15T09:00:00Z" },
    ]) {
      const res = await admin(worker, "/check/override", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toMatchObject({ field: "anchor" });
    }
  });
});
