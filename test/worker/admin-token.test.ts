import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { TEST_ADMIN_TOKEN, TEST_LIMITER_TOKEN, workerWith } from "../support/worker/worker-harness";

// Two tokens: LIMITER_TOKEN decides (/check, /check/peek); LIMITER_ADMIN_TOKEN changes or lists
// state (every other route under /check) and decides too. vitest.config.ts binds both.
const redis = testRedis();
const prefix = scopedPrefix("admin-token");
const run = crypto.randomUUID().slice(0, 8);
const LIMITER_CONFIG = JSON.stringify({
  prefix,
  networkBlocks: true,
  rules: [{ name: "api", match: { path: "/api/*" }, limit: 2, window: "1m", overrides: true }],
});
const worker = workerWith({ LIMITER_CONFIG });

type Worker = typeof worker;
interface Route {
  method: "POST" | "GET";
  path: string;
  body?: unknown;
}

/** Every route that changes or lists state, each with a body it would apply to `key`. */
function adminRoutes(key: string): Route[] {
  return [
    { method: "POST", path: "/check/reset", body: { rule: "api", key } },
    { method: "POST", path: "/check/override", body: { rule: "api", key, limit: 100_000 } },
    { method: "POST", path: "/check/block", body: { rule: "api", key } },
    { method: "POST", path: "/check/block", body: { ip: "192.0.2.0/24" } },
    { method: "POST", path: "/check/unblock", body: { rule: "api", key } },
    { method: "GET", path: "/check/plans?what=overrides" },
    { method: "GET", path: "/check/stats" },
    { method: "GET", path: "/check/dashboard" },
  ];
}

function call(target: Worker, route: Route, token: string | null): Promise<Response> {
  const headers: Record<string, string> =
    token === null ? {} : { Authorization: `Bearer ${token}` };
  if (route.method === "GET") return target(route.path, { headers });
  return target(route.path, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify(route.body),
  });
}

const decide = (target: Worker, key: string, token: string | null, path = "/check") =>
  call(target, { method: "POST", path, body: { rule: "api", key } }, token);

const label = (route: Route) => `${route.method} ${route.path} ${JSON.stringify(route.body)}`;

describe("the decision token on an admin route", () => {
  it("is a 403 naming LIMITER_ADMIN_TOKEN on every admin route, and changes nothing", async () => {
    const key = `decider-${run}`;
    // The key's quota used up: a reset, an override or an unblock that went through would let
    // the next check on.
    for (const expected of [200, 200, 429]) {
      expect((await decide(worker, key, TEST_LIMITER_TOKEN)).status).toBe(expected);
    }
    for (const route of adminRoutes(key)) {
      const res = await call(worker, route, TEST_LIMITER_TOKEN);
      expect(res.status, label(route)).toBe(403);
      expect(res.headers.get("Content-Type"), label(route)).toBe("application/problem+json");
      expect(res.headers.get("WWW-Authenticate"), label(route)).toBe(
        'Bearer error="insufficient_scope"',
      );
      expect(await res.json(), label(route)).toMatchObject({
        status: 403,
        title: "Forbidden",
        detail: expect.stringContaining("LIMITER_ADMIN_TOKEN"),
      });
    }
    // Still refused at the rule's limit, and the store holds the key's log and nothing else
    // (no override, no key block, no network block).
    const after = await decide(worker, key, TEST_LIMITER_TOKEN);
    expect(after.status).toBe(429);
    expect(await after.json()).toMatchObject({ limit: 2, remaining: 0 });
    expect(await redis.keys(`${prefix}:*`)).toEqual([`${prefix}:api:{${key}}`]);
  });

  it("a wrong or missing token on an admin route is a 401 naming LIMITER_ADMIN_TOKEN", async () => {
    for (const route of adminRoutes(`wrong-${run}`)) {
      for (const token of [null, "", "wrong", `${TEST_ADMIN_TOKEN}x`, `${TEST_LIMITER_TOKEN}x`]) {
        const res = await call(worker, route, token);
        expect(res.status, `${label(route)} ${token}`).toBe(401);
        expect(await res.json(), label(route)).toMatchObject({
          detail: expect.stringContaining("LIMITER_ADMIN_TOKEN"),
        });
      }
    }
    expect(await redis.keys(`${prefix}:*wrong-${run}*`)).toEqual([]);
  });
});

describe("the admin token", () => {
  it("gets 200 on every admin route, and each applies", async () => {
    const key = `admin-${run}`;
    for (const expected of [200, 200, 429]) {
      expect((await decide(worker, key, TEST_LIMITER_TOKEN)).status).toBe(expected);
    }
    const [reset, override, block, netBlock, unblock, plans, stats, dashboard] = adminRoutes(key);
    const ok = async (route: Route | undefined) => {
      if (!route) throw new Error("adminRoutes lists eight routes");
      const res = await call(worker, route, TEST_ADMIN_TOKEN);
      expect(res.status, `${label(route)}: ${await res.clone().text()}`).toBe(200);
      return res;
    };
    expect(await (await ok(reset)).json()).toMatchObject({ reset: true, existed: true });
    expect((await decide(worker, key, TEST_LIMITER_TOKEN)).status).toBe(200);
    await ok(override);
    expect(await (await decide(worker, key, TEST_LIMITER_TOKEN)).json()).toMatchObject({
      limit: 100_000,
    });
    await ok(block);
    expect((await decide(worker, key, TEST_LIMITER_TOKEN)).status).toBe(403);
    expect(await (await ok(unblock)).json()).toMatchObject({ existed: true });
    expect((await decide(worker, key, TEST_LIMITER_TOKEN)).status).toBe(200);
    const listed = await (await ok(plans)).json<{ entries: { value: string }[] }>();
    expect(listed.entries.map((entry) => entry.value)).toContain(key);
    await (await ok(stats)).body?.cancel();
    expect(await (await ok(dashboard)).text()).toContain("<html");
    await ok(netBlock);
    await ok({ method: "POST", path: "/check/unblock", body: { ip: "192.0.2.0/24" } });
  });

  it("decides too: /check and /check/peek take either token", async () => {
    const key = `either-${run}`;
    expect(await (await decide(worker, key, TEST_ADMIN_TOKEN)).json()).toMatchObject({
      allowed: true,
      remaining: 1,
    });
    expect(await (await decide(worker, key, TEST_LIMITER_TOKEN)).json()).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    for (const token of [TEST_ADMIN_TOKEN, TEST_LIMITER_TOKEN]) {
      const peek = await decide(worker, key, token, "/check/peek");
      expect(peek.status, token).toBe(200);
      expect(await peek.json(), token).toMatchObject({ allowed: false, remaining: 0 });
    }
  });

  it("decides without LIMITER_TOKEN, which then closes /check to every other token", async () => {
    const noDecisionToken = workerWith({ LIMITER_CONFIG, LIMITER_TOKEN: undefined });
    const key = `no-decision-${run}`;
    expect((await decide(noDecisionToken, key, TEST_ADMIN_TOKEN)).status).toBe(200);
    const refused = await decide(noDecisionToken, key, TEST_LIMITER_TOKEN);
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      // Where to set it: .dev.vars locally (`wrangler secret put` does nothing there), a secret
      // for a deploy.
      detail:
        "LIMITER_TOKEN is not configured: /check is closed (set it in .dev.vars for `wrangler dev` (cp .dev.vars.example .dev.vars), or with `wrangler secret put LIMITER_TOKEN` for a deploy)",
    });
  });
});

describe("without LIMITER_ADMIN_TOKEN", () => {
  const closed = workerWith({ LIMITER_CONFIG, LIMITER_ADMIN_TOKEN: undefined });

  it("every admin route is a 401 naming it, whatever is sent; /check still decides", async () => {
    const key = `closed-${run}`;
    for (const route of adminRoutes(key)) {
      for (const token of [null, "", "undefined", TEST_LIMITER_TOKEN, TEST_ADMIN_TOKEN]) {
        const res = await call(closed, route, token);
        expect(res.status, `${label(route)} ${token}`).toBe(401);
        expect(res.headers.get("Content-Type")).toBe("application/problem+json");
        expect(await res.json(), `${label(route)} ${token}`).toMatchObject({
          status: 401,
          detail: expect.stringMatching(
            /^LIMITER_ADMIN_TOKEN is not configured: the admin routes are closed \(set it in \.dev\.vars .*`wrangler secret put LIMITER_ADMIN_TOKEN` for a deploy\)$/,
          ),
        });
      }
    }
    expect(await redis.keys(`${prefix}:*closed-${run}*`)).toEqual([]);
    expect((await decide(closed, key, TEST_LIMITER_TOKEN)).status).toBe(200);
    expect((await decide(closed, key, TEST_LIMITER_TOKEN, "/check/peek")).status).toBe(200);
  });
});
