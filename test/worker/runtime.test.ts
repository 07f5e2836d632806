import { Hono } from "hono";
import { describe, expect, inject, it, vi } from "vitest";
import { createLimiter, rateLimit } from "../../src/index";
import type { Env } from "../../worker/env";
import { getRuntime } from "../../worker/runtime";
import { testStore, uniquePrefix } from "../support/worker/redis";
import { workerWith } from "../support/worker/worker-harness";

describe("getRuntime", () => {
  it("an isolate's env object is looked up, not serialized again, on every request", () => {
    const config = JSON.stringify({ prefix: uniquePrefix("runtime"), rules: [] });
    let reads = 0;
    const env: Env = {
      UPSTASH_REDIS_REST_URL: inject("bridgeUrl"),
      UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
      get LIMITER_CONFIG() {
        reads++;
        return config;
      },
    };
    const first = getRuntime(env);
    expect(first.ok).toBe(true);
    const afterBuild = reads;
    for (let i = 0; i < 10; i++) expect(getRuntime(env)).toBe(first);
    expect(reads).toBe(afterBuild);
    // Another env object with the same bindings (a binding-for-binding copy) shares the runtime.
    expect(
      getRuntime({
        UPSTASH_REDIS_REST_URL: env.UPSTASH_REDIS_REST_URL,
        UPSTASH_REDIS_REST_TOKEN: env.UPSTASH_REDIS_REST_TOKEN,
        LIMITER_CONFIG: config,
      }),
    ).toBe(first);
  });
});

describe("a misconfigured worker", () => {
  // A malformed store URL: the Upstash client's error quotes it. Unique per run, so the
  // once-per-isolate log is this test's.
  const badUrl = `not-a-url.example/${crypto.randomUUID()}?token=secret-in-url`;
  const env = {
    UPSTASH_REDIS_REST_URL: badUrl,
    UPSTASH_REDIS_REST_TOKEN: "store-token-value",
    LIMITER_TOKEN: "limiter-token-value",
    LIMITER_CONFIG: JSON.stringify({ prefix: uniquePrefix("runtime"), rules: [] }),
  };
  const secrets = [badUrl, "secret-in-url", "store-token-value", "limiter-token-value"];

  it("tells public clients only that it is misconfigured, and logs why once per isolate", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const worker = workerWith(env);
      for (let i = 0; i < 3; i++) {
        const res = await worker(`/anything-${i}`, { method: i === 2 ? "POST" : "GET" });
        expect(res.status).toBe(503);
        expect(res.headers.get("Content-Type")).toContain("application/problem+json");
        const text = await res.text();
        for (const secret of secrets) expect(text).not.toContain(secret);
        expect(JSON.parse(text)).toMatchObject({
          status: 503,
          title: "Limiter misconfigured",
          field: "UPSTASH_REDIS_REST_URL",
        });
      }
      // The operator's log has the detail, once (not per request).
      const logged = errors.mock.calls
        .map((args) => args.join(" "))
        .filter((l) => l.includes(badUrl));
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain("UPSTASH_REDIS_REST_URL");
    } finally {
      errors.mockRestore();
    }
  });

  it("tells a /check caller holding the token what is wrong, and no one else", async () => {
    const worker = workerWith(env);
    const check = (authorization?: string) =>
      worker("/check", {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          ...(authorization ? { Authorization: authorization } : {}),
        },
        body: JSON.stringify({ key: "k", limit: 1, window: "1m" }),
      });
    const authorized = await check("Bearer limiter-token-value");
    expect(authorized.status).toBe(503);
    const problem = await authorized.json<{ field: string; detail: string }>();
    expect(problem.field).toBe("UPSTASH_REDIS_REST_URL");
    expect(problem.detail).toContain("invalid URL");
    for (const authorization of [undefined, "Bearer wrong"]) {
      const res = await check(authorization);
      expect(res.status).toBe(401);
      const text = await res.text();
      for (const secret of secrets) expect(text).not.toContain(secret);
    }
  });

  it("the middleware's public 503 does not quote its rules either", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const app = new Hono();
      app.use(
        rateLimit({
          limiter: createLimiter({ store: testStore(), prefix: uniquePrefix("runtime") }),
          rules: [
            { name: "secret-rule-name", limit: 1, window: "1m" },
            { name: "secret-rule-name", limit: 2, window: "1m" },
          ],
        }),
      );
      app.get("/", (c) => c.text("should not run"));
      const res = await app.request("/");
      expect(res.status).toBe(503);
      const text = await res.text();
      expect(text).not.toContain("secret-rule-name");
      expect(JSON.parse(text)).toMatchObject({ field: "rules[1].name" });
      // Reported once, when the middleware was built.
      expect(
        errors.mock.calls.filter((args) => args.join(" ").includes("secret-rule-name")),
      ).toHaveLength(1);
    } finally {
      errors.mockRestore();
    }
  });
});

describe("a worker whose store refuses its token", () => {
  it("names the cause in the 503 of a route without a fallback, and in its log", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    const warnings = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const worker = workerWith({
        UPSTASH_REDIS_REST_TOKEN: "not-the-token",
        LIMITER_TOKEN: "limiter-token-value",
        LIMITER_CONFIG: JSON.stringify({ prefix: uniquePrefix("runtime"), rules: [] }),
      });
      const request = (path: string) =>
        worker(path, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            Authorization: "Bearer limiter-token-value",
          },
          body: JSON.stringify({ key: "k", limit: 5, window: "1m" }),
        });
      const peek = await request("/check/peek");
      expect(peek.status).toBe(503);
      const problem = await peek.json<{ cause: string; detail: string }>();
      expect(problem.cause).toBe("unauthorized");
      expect(problem.detail).toMatch(/unauthorized.*UPSTASH_REDIS_REST_TOKEN/);
      expect(problem.detail).not.toContain("not-the-token");
      // A decision is the fallback's, and the log says so, naming the cause.
      const check = await request("/check");
      expect(await check.json()).toMatchObject({ allowed: true, source: "fallback" });
      const lines = warnings.mock.calls.map((args) => JSON.parse(String(args[0])));
      expect(lines).toContainEqual(
        expect.objectContaining({ cause: "unauthorized", meanwhile: "fallback" }),
      );
    } finally {
      errors.mockRestore();
      warnings.mockRestore();
    }
  });
});

describe("a worker without its store bindings (plain `wrangler dev` without .dev.vars)", () => {
  it("names .dev.vars for wrangler dev and `wrangler secret put` for a deploy", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      const worker = workerWith({
        UPSTASH_REDIS_REST_URL: undefined,
        UPSTASH_REDIS_REST_TOKEN: undefined,
        LIMITER_TOKEN: "limiter-token-value",
        LIMITER_CONFIG: JSON.stringify({ prefix: uniquePrefix("runtime-unset"), rules: [] }),
      });
      const res = await worker("/check", {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          Authorization: "Bearer limiter-token-value",
        },
        body: JSON.stringify({ key: "k", limit: 5, window: "1m" }),
      });
      expect(res.status).toBe(503);
      const problem = await res.json<{ field: string; detail: string }>();
      expect(problem.field).toBe("UPSTASH_REDIS_REST_URL");
      expect(problem.detail).toContain("cp .dev.vars.example .dev.vars");
      expect(problem.detail).toContain("`wrangler secret put UPSTASH_REDIS_REST_URL` for a deploy");
    } finally {
      errors.mockRestore();
    }
  });
});
