import { describe, expect, it } from "vitest";
import { parseConfig } from "../../../src/config/limiter-config";
import {
  applyingRules,
  type CompiledRule,
  compilePattern,
  compileRules,
} from "../../../src/rules/match";

/** Whether one compiled rule applies to a request (what applyingRules decides per rule). */
const matches = (rule: CompiledRule | undefined, method: string, path: string) =>
  rule !== undefined && applyingRules([rule], method, path).length > 0;

import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { originCount, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("rules");
const run = crypto.randomUUID().slice(0, 8);

describe("LIMITER_CONFIG validation", () => {
  it("fills documented defaults", () => {
    const parsed = parseConfig('{"rules":[{"name":"api","limit":5,"window":"10s"}]}');
    // toMatchObject: the resilience knobs (resilience-config.ts) have their own tests.
    expect(parsed).toMatchObject({
      ok: true,
      value: {
        rules: [
          {
            name: "api",
            limit: 5,
            windowMs: 10_000,
            cost: 1,
            key: "ip",
            shadow: false,
            missingKey: "shared",
          },
        ],
        timeoutMs: 500,
        failMode: "open",
        prefix: "edge-limiter",
        clock: "redis",
        legacyHeaders: false,
        clientIp: { trustedProxyHops: 1, ipv6PrefixLength: 64, ipv4PrefixLength: 32 },
      },
    });
  });

  it("accepts a TOML table as wrangler hands it (an object)", () => {
    const parsed = parseConfig({
      rules: [{ name: "api", limit: 5, window: 1000, match: { path: "/api/*", methods: ["get"] } }],
    });
    expect(parsed.ok && parsed.value.rules[0]?.match).toEqual({
      paths: ["/api/*"],
      methods: ["GET"],
    });
  });

  const bad: [string, unknown, string][] = [
    ["not JSON", "{rules:", "LIMITER_CONFIG"],
    ["an array", "[]", "LIMITER_CONFIG"],
    ["unknown top-level field", { rule: [] }, "rule"],
    ["bad timeout", { timeoutMs: 0 }, "timeoutMs"],
    ["bad fail mode", { failMode: "maybe" }, "failMode"],
    ["rules not an array", { rules: {} }, "rules"],
    ["missing limit", { rules: [{ name: "a", window: "1m" }] }, "rules[0].limit"],
    ["bad window", { rules: [{ name: "a", limit: 1, window: "1y" }] }, "rules[0].window"],
    [
      "typo in a rule",
      { rules: [{ name: "a", limit: 1, window: "1m", limt: 2 }] },
      "rules[0].limt",
    ],
    [
      "cost over limit",
      { rules: [{ name: "a", limit: 1, window: "1m", cost: 2 }] },
      "rules[0].cost",
    ],
    [
      "bad key",
      { rules: [{ name: "a", limit: 1, window: "1m", key: "cookie:x" }] },
      "rules[0].key",
    ],
    [
      "bad path",
      { rules: [{ name: "a", limit: 1, window: "1m", match: { path: "api" } }] },
      "rules[0].match.path",
    ],
    [
      "bad method",
      { rules: [{ name: "a", limit: 1, window: "1m", match: { methods: ["G T"] } }] },
      "rules[0].match.methods[0]",
    ],
    [
      "bad shadow",
      { rules: [{ name: "a", limit: 1, window: "1m", shadow: "yes" }] },
      "rules[0].shadow",
    ],
    [
      "duplicate names",
      {
        rules: [
          { name: "a", limit: 1, window: "1m" },
          { name: "a", limit: 2, window: "1m" },
        ],
      },
      "rules[1].name",
    ],
    ["reserved name", { rules: [{ name: "check.x", limit: 1, window: "1m" }] }, "rules[0].name"],
    ["bad prefix length", { clientIp: { ipv6PrefixLength: 129 } }, "clientIp.ipv6PrefixLength"],
    [
      "bad proxy header",
      { clientIp: { trustedProxyHeader: "Forwarded" } },
      "clientIp.trustedProxyHeader",
    ],
  ];
  for (const [label, input, field] of bad) {
    it(`names "${field}" for ${label}`, () => {
      const parsed = parseConfig(input);
      expect(parsed.ok).toBe(false);
      expect(!parsed.ok && parsed.field).toBe(field);
    });
  }
});

describe("rule matching", () => {
  it("compiles path patterns: literals, :params, * and a trailing /*", () => {
    const api = compilePattern("/api/*");
    for (const path of ["/api", "/api/", "/api/v1/users"]) expect(api.test(path), path).toBe(true);
    for (const path of ["/apiv1", "/x/api", "/API/x"]) expect(api.test(path), path).toBe(false);
    const user = compilePattern("/users/:id/posts");
    expect(user.test("/users/42/posts")).toBe(true);
    expect(user.test("/users//posts")).toBe(false);
    expect(user.test("/users/4/2/posts")).toBe(false);
    expect(compilePattern("/files/*.png").test("/files/a/b.png")).toBe(true);
    expect(compilePattern("/a.b").test("/aXb")).toBe(false);
  });

  it("a trailing slash or another letter case does not dodge a rule (opt out: caseSensitive)", () => {
    const parsed = parseConfig({
      rules: [
        { name: "login", limit: 1, window: "1m", match: { path: "/login", methods: ["POST"] } },
        { name: "user", limit: 1, window: "1m", match: { path: "/users/:id/" } },
        {
          name: "exact",
          limit: 1,
          window: "1m",
          match: { path: "/Admin", caseSensitive: true },
        },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const [login, user, exact] = compileRules(parsed.value.rules);
    for (const path of ["/login", "/login/", "/Login", "/LOGIN/", "//login//"]) {
      expect(matches(login, "POST", path), path).toBe(true);
    }
    for (const path of ["/login/x", "/logins", "/x/login"]) {
      expect(matches(login, "POST", path), path).toBe(false);
    }
    expect(matches(user, "GET", "/users/42")).toBe(true);
    expect(matches(user, "GET", "/USERS/42/")).toBe(true);
    expect(matches(exact, "GET", "/Admin/")).toBe(true);
    expect(matches(exact, "GET", "/admin")).toBe(false);
  });

  it("counts every path spelling common servers route to the rule's path", () => {
    const parsed = parseConfig({
      rules: [
        { name: "login", limit: 1, window: "1m", match: { path: "/login", methods: ["POST"] } },
        { name: "api", limit: 1, window: "1m", match: { path: "/api/*" } },
        { name: "user", limit: 1, window: "1m", match: { path: "/users/:id/edit" } },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const [login, api, user] = compileRules(parsed.value.rules);
    const counted = {
      // `;` parameters stripped from each segment (Tomcat, Jetty, Spring).
      params: ["/login;jsessionid=1", "/login;", "/LOGIN;a=1;b=2/", "/x/..;/login", "/;x/login"],
      // %2F, %5C and "\" read as "/" before dot segments are resolved (and %3B as ";").
      separators: [
        "/x/..%2Flogin",
        "/x/..%2flogin",
        "/x/..%5Clogin",
        "/x/..\\login",
        "/x/%2e%2e%2flogin",
        "/a/b/..%2F..%2Flogin",
        "/x/.%2e/login",
        "%2Flogin",
        "/login%3Bjsessionid=1",
        "/x/..%3B/login",
      ],
      // Trailing dots and spaces stripped from a segment (IIS, Windows).
      trailing: ["/login.", "/login..", "/login%2e", "/login%20", "/login. %20.", "/x/.. /login"],
      // Dot segments, percent-encoded unreserved characters, runs of "/", case.
      plain: ["/x/../login", "/./login", "/../login", "/%6Cogin", "//login", "/a//../login"],
      // Several readings at once.
      combined: ["/x/..%2Flogin.;x=1", "/X/..;/LOGIN%20", "/x%5C..%5Clogin.", "/x/..;/%6cogin."],
    };
    for (const [reading, paths] of Object.entries(counted)) {
      for (const path of paths)
        expect(matches(login, "POST", path), `${reading} ${path}`).toBe(true);
    }
    for (const path of ["/login-x", "/loginx.", "/x/login;", "/x/..%2Fy/login", "/login%2Fx"]) {
      expect(matches(login, "POST", path), path).toBe(false);
    }
    for (const path of ["/x/..%2Fapi/v1", "/API;v=1/keys", "/api./keys", "/x/..%5Capi"]) {
      expect(matches(api, "GET", path), path).toBe(true);
    }
    for (const path of ["/users/42;v=1/edit", "/users/42/edit.", "/users/1/x/..%2Fedit"]) {
      expect(matches(user, "GET", path), path).toBe(true);
    }
  });

  it("a GET rule counts HEAD (frameworks serve HEAD with the GET handler)", () => {
    const parsed = parseConfig({
      rules: [
        { name: "get", limit: 1, window: "1m", match: { path: "/x", methods: ["GET"] } },
        { name: "post", limit: 1, window: "1m", match: { path: "/x", methods: ["POST"] } },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const [get, post] = compileRules(parsed.value.rules);
    expect(matches(get, "HEAD", "/x")).toBe(true);
    expect(matches(get, "head", "/x;a")).toBe(true);
    expect(matches(post, "HEAD", "/x")).toBe(false);
  });

  it("matches methods case-insensitively and every method when none is given", () => {
    const parsed = parseConfig({
      rules: [
        { name: "post", limit: 1, window: "1m", match: { path: "/x", methods: ["POST"] } },
        { name: "any", limit: 1, window: "1m" },
      ],
    });
    if (!parsed.ok) throw new Error(parsed.detail);
    const [post, any] = compileRules(parsed.value.rules);
    expect(matches(post, "post", "/x")).toBe(true);
    expect(matches(post, "GET", "/x")).toBe(false);
    expect(matches(any, "DELETE", "/anything")).toBe(true);
  });
});

describe("rules through the proxy", () => {
  const config = (rules: unknown[], extra: Record<string, unknown> = {}) =>
    JSON.stringify({ prefix, rules, ...extra });

  it("an invalid config answers every request with 503 problem+json naming the field", async () => {
    const broken = workerWith({
      LIMITER_CONFIG: config([{ name: "api", limit: 0, window: "1m" }]),
    });
    const path = `/unmatched-${run}`;
    for (const res of [
      await broken(path),
      await broken("/check", {
        method: "POST",
        headers: { Authorization: "Bearer test-limiter-token", "Content-Type": "application/json" },
        body: "{}",
      }),
    ]) {
      expect(res.status).toBe(503);
      expect(res.headers.get("Content-Type")).toContain("application/problem+json");
      expect(await res.json()).toMatchObject({ status: 503, field: "rules[0].limit" });
    }
    expect(await originCount(path)).toBe(0);
  });

  it("an absent, empty or rule-less LIMITER_CONFIG is a 503, not an unprotected proxy", async () => {
    const path = `/unconfigured-${run}`;
    const cases: [string | undefined, string][] = [
      [undefined, "LIMITER_CONFIG"],
      ["", "LIMITER_CONFIG"],
      ["  ", "LIMITER_CONFIG"],
      [JSON.stringify({ prefix }), "rules"],
    ];
    for (const [raw, field] of cases) {
      const res = await workerWith({ LIMITER_CONFIG: raw })(path);
      expect(res.status, String(raw)).toBe(503);
      expect(await res.json()).toMatchObject({ status: 503, field });
    }
    expect(await originCount(path)).toBe(0);
    // An explicit empty list is a choice (a /check-only deployment): the proxy forwards.
    const checkOnly = workerWith({ LIMITER_CONFIG: config([]) });
    const res = await checkOnly(path);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    expect(await originCount(path)).toBe(1);
  });

  it("shadow mode decides, logs and adds headers, but never denies", async () => {
    const shadow = workerWith({
      LIMITER_CONFIG: config([
        { name: "shadowed", match: { path: "/shadow/*" }, limit: 1, window: "1m", shadow: true },
      ]),
    });
    const path = `/shadow/${run}`;
    const headers = { "CF-Connecting-IP": "192.0.2.77" };
    const first = await shadow(path, { headers });
    expect(first.status).toBe(200);
    const lines: string[] = [];
    const original = console.log;
    console.log = (line: unknown) => lines.push(String(line));
    let second: Response;
    try {
      second = await shadow(path, { headers });
    } finally {
      console.log = original;
    }
    expect(second.status).toBe(200);
    // The worker logs one JSON line per shadow denial.
    expect(lines.map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({ event: "shadow-deny", policy: "shadowed", limit: 1 }),
    ]);
    expect(second.headers.get("RateLimit")).toMatch(/^"shadowed";r=0;t=\d+$/);
    expect(second.headers.has("Retry-After")).toBe(false);
    expect(await originCount(path)).toBe(2);
    // It really counted: the log holds the one admitted request.
    expect(await logCount(redis, `${prefix}:shadowed:{192.0.2.77}`)).toBe(1);
  });

  it("groups IPv6 clients by /64 and keeps spoofed forwarding headers out of the key", async () => {
    const limited = workerWith({
      LIMITER_CONFIG: config([{ name: "v6", match: { path: "/v6/*" }, limit: 2, window: "1m" }]),
    });
    const path = `/v6/${run}`;
    const from = (ip: string, spoof: string) => ({
      headers: { "CF-Connecting-IP": ip, "X-Forwarded-For": spoof, "True-Client-IP": spoof },
    });
    expect((await limited(path, from("2001:db8:aa:1::1", "10.0.0.1"))).status).toBe(200);
    expect((await limited(path, from("2001:db8:aa:1:ffff::2", "10.0.0.2"))).status).toBe(200);
    // Same /64, new interface id and new forged headers: still the same client.
    expect((await limited(path, from("2001:db8:aa:1:abcd::3", "10.0.0.3"))).status).toBe(429);
    // The neighbouring /64 is another client.
    expect((await limited(path, from("2001:db8:aa:2::1", "10.0.0.1"))).status).toBe(200);
    expect(
      await logCount(redis, `${prefix}:v6:{${encodeURIComponent("2001:db8:aa:1::/64")}}`),
    ).toBe(2);
  });

  it("keys header rules by the hashed header and applies the missing-key outcome", async () => {
    const limited = workerWith({
      LIMITER_CONFIG: config([
        {
          name: "by-key",
          match: { path: "/keyed/*" },
          limit: 1,
          window: "1m",
          key: "header:X-API-Key",
        },
        {
          name: "strict",
          match: { path: "/strict/*" },
          limit: 5,
          window: "1m",
          key: "header:X-API-Key",
          missingKey: "deny",
        },
        {
          name: "optional",
          match: { path: "/optional/*" },
          limit: 1,
          window: "1m",
          key: "header:X-API-Key",
          missingKey: "skip",
        },
      ]),
    });
    const path = `/keyed/${run}`;
    const withKey = (key: string) => ({ headers: { "X-API-Key": key } });
    expect((await limited(path, withKey(`alpha-${run}`))).status).toBe(200);
    expect((await limited(path, withKey(`alpha-${run}`))).status).toBe(429);
    expect((await limited(path, withKey(`beta-${run}`))).status).toBe(200);
    const keys = await redis.keys(`${prefix}:by-key:*`);
    expect(keys.some((k) => k.includes(run))).toBe(false);
    // "shared" (default): every request without the header shares one log.
    expect((await limited(path)).status).toBe(200);
    expect((await limited(path)).status).toBe(429);
    // "deny": 400 problem, nothing counted, origin not called.
    const strictPath = `/strict/${run}`;
    const refused = await limited(strictPath);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ policy: "strict" });
    expect(await originCount(strictPath)).toBe(0);
    expect(await redis.keys(`${prefix}:strict:*`)).toEqual([]);
    // "skip": the rule does not apply.
    const optionalPath = `/optional/${run}`;
    for (let i = 0; i < 3; i++) expect((await limited(optionalPath)).status).toBe(200);
    expect((await limited(optionalPath)).headers.has("RateLimit")).toBe(false);
  });

  it("adds legacy X-RateLimit-* headers when asked", async () => {
    const legacy = workerWith({
      LIMITER_CONFIG: config(
        [{ name: "old", match: { path: "/legacy/*" }, limit: 3, window: "1m" }],
        {
          legacyHeaders: true,
        },
      ),
    });
    const res = await legacy(`/legacy/${run}`, { headers: { "CF-Connecting-IP": "192.0.2.99" } });
    expect(res.headers.get("X-RateLimit-Limit")).toBe("3");
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("2");
    expect(Number(res.headers.get("X-RateLimit-Reset"))).toBeGreaterThan(Date.now() / 1000);
  });
});
