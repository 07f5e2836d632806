import { Hono } from "hono";
import { describe, expect, inject, it } from "vitest";
import { type RateLimitVariables, rateLimit } from "../../../src/index";
import { scopedPrefix } from "../../support/worker/redis";

// A middleware rule's limit and cost as functions of the context (docs/plans.md): a
// plan per request, with the same headers and 429 as a fixed limit, and a 503 naming the rule
// when a function returns something no rule could have.
const prefix = scopedPrefix("per-request");
const url = inject("bridgeUrl");
const token = inject("bridgeToken");
type Env = { Variables: RateLimitVariables };

function planApp(
  name: string,
  extra: { cost?: (c: { req: { header(n: string): string | undefined } }) => number } = {},
) {
  const app = new Hono<Env>();
  app.use(
    rateLimit<Env>({
      rules: {
        name,
        window: "1 minute",
        // Async, as a JWT verification would be.
        limit: async (c) => (c.req.header("X-Plan") === "pro" ? 5 : 2),
        ...extra,
      },
      key: (c) => c.req.header("X-Key"),
      store: { url, token },
      limiterOptions: { prefix },
    }),
  );
  app.get("/", (c) => c.text("ok"));
  return app;
}

async function run(app: Hono<Env>, headers: Record<string, string>, n: number) {
  const out: { status: number; policy: string | null; limit: string | null }[] = [];
  for (let i = 0; i < n; i++) {
    const res = await app.request("/", { headers });
    out.push({
      status: res.status,
      policy: res.headers.get("RateLimit-Policy"),
      limit: res.headers.get("RateLimit"),
    });
  }
  return out;
}

describe("per-request limits and costs in the middleware", () => {
  it("gives each plan its own limit, with headers and 429s as a fixed limit has", async () => {
    const app = planApp("plans");
    const free = await run(app, { "X-Key": `free-${crypto.randomUUID()}` }, 3);
    expect(free.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(free[0]?.policy).toBe('"plans";q=2;w=60');
    const pro = await run(app, { "X-Key": `pro-${crypto.randomUUID()}`, "X-Plan": "pro" }, 6);
    expect(pro.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 429]);
    expect(pro[0]?.policy).toBe('"plans";q=5;w=60');
    expect(pro[4]?.limit).toMatch(/^"plans";r=0;t=\d+$/);
  });

  it("takes a cost per request", async () => {
    const app = planApp("costs", { cost: (c) => Number(c.req.header("X-Units") ?? 1) });
    const key = `cost-${crypto.randomUUID()}`;
    const got = await run(app, { "X-Key": key, "X-Plan": "pro", "X-Units": "2" }, 3);
    expect(got.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(got[1]?.limit).toMatch(/^"costs";r=1;t=\d+$/);
  });

  it("answers 503 naming the rule's field when a function returns what no rule may, counting nothing", async () => {
    const app = planApp("bad", { cost: (c) => Number(c.req.header("X-Units")) });
    const key = `bad-${crypto.randomUUID()}`;
    for (const units of ["0", "2.5", "99"]) {
      const res = await app.request("/", { headers: { "X-Key": key, "X-Units": units } });
      expect(res.status).toBe(503);
      expect(((await res.json()) as { field: string }).field).toBe("rules[bad].cost");
    }
    // Nothing was counted: the free plan's 2 are all there.
    const after = await run(app, { "X-Key": key, "X-Units": "1" }, 3);
    expect(after.map((r) => r.status)).toEqual([200, 200, 429]);
  });

  it("holds each rule's returned limit to its own bounds: a usage rule's, then a request rule's", async () => {
    const app = new Hono<Env>();
    app.use(
      rateLimit<Env>({
        rules: [
          // Units (tokens): a limit up to 10¹².
          { name: "mixed-tokens", window: "1m", limit: () => 1_000_000, usage: { header: "x-u" } },
          { name: "mixed-requests", window: "1m", limit: (c) => Number(c.req.header("X-Limit")) },
        ],
        key: (c) => c.req.header("X-Key"),
        store: { url, token },
        limiterOptions: { prefix },
      }),
    );
    app.get("/", (c) => c.text("ok"));
    const key = `mixed-${crypto.randomUUID()}`;
    const fine = await app.request("/", { headers: { "X-Key": key, "X-Limit": "10" } });
    expect(fine.status).toBe(200);
    // What the usage rule may return, the request rule may not (its limit is up to 100 000).
    const over = await app.request("/", { headers: { "X-Key": key, "X-Limit": "1000000" } });
    expect(over.status).toBe(503);
    expect(((await over.json()) as { field: string }).field).toBe("rules[mixed-requests].limit");
  });
});
