// worker.ts answers an exact `POST /check`, and sends every path outside /check to the proxy,
// without Hono (its dispatch and context cost CPU per decision); these pin that the fast paths and the Hono routes are one contract,
// that the proxy's ORIGIN_URL (read once per isolate) still maps every path, and that a bug on
// a fast path is still a 500 problem.
import { createExecutionContext } from "cloudflare:test";
import { afterAll, describe, expect, it } from "vitest";
import type { Env } from "../../../worker/env";
import app from "../../../worker/worker";
import { deleteKeys, testRedis } from "../../support/worker/redis";
import { baseEnv, originUrl, workerWith } from "../../support/worker/worker-harness";

const TOKEN = "test-limiter-token"; // bound in vitest.config.ts
const run = crypto.randomUUID();
const redis = testRedis();

afterAll(async () => {
  await deleteKeys(redis, `edge-limiter:*${run}*`);
});

function post(path: string, body: unknown, env: Env = baseEnv) {
  return app.fetch(
    new Request(`https://limiter.test${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
    }),
    env,
    createExecutionContext(),
  );
}

/** What a /check answer says, headers included (minus the time-dependent reset and wait). */
async function contract(response: Response) {
  const { reset, retryAfterMs, ...body } = await response.json<Record<string, unknown>>();
  expect(typeof reset).toBe("number");
  expect(typeof retryAfterMs).toBe("number");
  return {
    status: response.status,
    body,
    headers: Object.fromEntries(
      ["Content-Type", "RateLimit-Policy", "RateLimit", "Retry-After"].map((h) => [
        h,
        response.headers.get(h),
      ]),
    ),
  };
}

describe("POST /check on the fast path and through Hono", () => {
  it("answers alike: /check (fast path) and /%63heck (Hono decodes it to /check)", async () => {
    // One key each, the same limit: the same sequence of answers, allowed then denied.
    const fast = [];
    const routed = [];
    for (let i = 0; i < 3; i++) {
      fast.push(await contract(await post("/check", { key: `f-${run}`, limit: 2, window: "1m" })));
      routed.push(
        await contract(await post("/%63heck", { key: `r-${run}`, limit: 2, window: "1m" })),
      );
    }
    expect(fast.map((a) => a.status)).toEqual([200, 200, 429]);
    expect(routed).toEqual(fast);
    expect(fast[2]?.headers).toMatchObject({
      "Content-Type": "application/json",
      RateLimit: '"check.60000ms.2";r=0;t=60',
      "Retry-After": "60",
    });
  });

  it("takes a query string; /check/ and below are not /check, /checks is the proxy's", async () => {
    const withQuery = await post("/check?trace=1", { key: `q-${run}`, limit: 5, window: "1m" });
    expect(withQuery.status).toBe(200);
    expect(await withQuery.json()).toMatchObject({ allowed: true, remaining: 4 });
    for (const path of ["/check/", "/check/x"]) {
      const res = await post(path, { key: `q-${run}`, limit: 5, window: "1m" });
      expect(res.status, path).toBe(404);
    }
    // No rule matches /checks: forwarded to the origin, which echoes its path.
    const proxied = await post("/checks", { key: `q-${run}`, limit: 5, window: "1m" });
    expect(await proxied.text()).toBe("origin /checks");
  });

  it("answers a bug of ours with a 500 problem+json, like the app's onError", async () => {
    // A binding that throws when read stands in for a bug on the path: nothing is counted.
    const broken = Object.defineProperty({ ...baseEnv }, "LIMITER_TOKEN", {
      get() {
        throw new Error("boom");
      },
    });
    const res = await post("/check", { key: `b-${run}`, limit: 5, window: "1m" }, broken);
    expect(res.status).toBe(500);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await res.json()).toMatchObject({ status: 500, title: "Internal Server Error" });
  });
});

describe("the proxy's fast path", () => {
  it("forwards under ORIGIN_URL's path with the query, and follows a changed ORIGIN_URL", async () => {
    const config = JSON.stringify({ rules: [] });
    const echo = workerWith({ LIMITER_CONFIG: config, ORIGIN_URL: `${originUrl()}/echo/base/` });
    const plain = workerWith({ LIMITER_CONFIG: config, ORIGIN_URL: originUrl() });
    for (let i = 0; i < 2; i++) {
      // Alternating bindings: the per-isolate copy of ORIGIN_URL must follow each.
      const res = await echo("/a/b%20c?q=1&r=%2F");
      expect(await res.json()).toMatchObject({
        method: "GET",
        path: "/echo/base/a/b%20c",
        query: "?q=1&r=%2F",
      });
      expect(await (await plain("/x/y?z")).text()).toBe("origin /x/y");
    }
  });

  it("answers a bug of ours with a 500 problem+json", async () => {
    const broken = Object.defineProperty({ ...baseEnv }, "ORIGIN_URL", {
      get() {
        throw new Error("boom");
      },
    });
    const res = await app.fetch(new Request("https://limiter.test/x"), broken);
    expect(res.status).toBe(500);
    expect(res.headers.get("Content-Type")).toBe("application/problem+json");
  });
});
