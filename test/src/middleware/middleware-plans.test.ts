import { Hono } from "hono";
import { describe, expect, inject, it } from "vitest";
import { createStoreClient, type RateLimitVariables, rateLimit } from "../../../src/index";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix } from "../../support/worker/redis";

// The middleware with plans (docs/plans.md): a rule with `overrides: true` takes a key's
// override and block from the store; `networkBlocks` refuses blocked networks. Two apps stand
// for two isolates: each builds its own limiter and caches.
const prefix = scopedPrefix("middleware-plans");
const store = createStoreClient({ url: inject("bridgeUrl"), token: inject("bridgeToken") });
type Env = { Variables: RateLimitVariables };

function app(handler?: () => Response) {
  const hono = new Hono<Env>();
  hono.use(
    rateLimit<Env>({
      rules: { name: "plan", limit: 2, window: "1m", overrides: true },
      key: (c) => c.req.header("X-Key"),
      store: { url: inject("bridgeUrl"), token: inject("bridgeToken") },
      limiterOptions: { prefix },
      // The copy of the limiter this middleware builds (one per app: one per isolate).
      networkBlocks: true,
      ...(handler ? { handler } : {}),
    }),
  );
  hono.get("/", (c) => c.text("ok"));
  return hono;
}

describe("the middleware with plans", () => {
  it("applies a key's override and answers a blocked key 403, even with a custom handler", async () => {
    const [one, two] = [app(), app(() => new Response("custom", { status: 429 }))];
    const key = `mw-${crypto.randomUUID()}`;
    await plansAdmin(store, prefix).overrides.set("plan", key, { limit: 4 });
    const res = await one.request("/", { headers: { "X-Key": key } });
    expect(res.headers.get("RateLimit-Policy")).toBe('"plan";q=4;w=60');
    await plansAdmin(store, prefix).blocks.add({ policy: "plan", key });
    const refused = await two.request("/", { headers: { "X-Key": key } });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ policy: "plan", blocked: { by: "key" } });
  });

  it("a stored override replaces the limit a rule's function returned (tiers in code, exceptions in data)", async () => {
    const hono = new Hono<Env>();
    hono.use(
      rateLimit<Env>({
        rules: {
          name: "tiered",
          window: "1m",
          limit: (c) => (c.req.header("X-Plan") === "pro" ? 20 : 5),
          overrides: true,
        },
        key: (c) => c.req.header("X-Key"),
        store,
        limiterOptions: { prefix },
      }),
    );
    hono.get("/", (c) => c.text("ok"));
    const key = `tier-${crypto.randomUUID()}`;
    const pro = { headers: { "X-Key": key, "X-Plan": "pro" } };
    expect((await hono.request("/", pro)).headers.get("RateLimit-Policy")).toBe(
      '"tiered";q=20;w=60',
    );
    await plansAdmin(store, prefix).overrides.set("tiered", key, { limit: 500 });
    expect((await hono.request("/", pro)).headers.get("RateLimit-Policy")).toBe(
      '"tiered";q=500;w=60',
    );
  });

  it("refuses a blocked network before any key is derived", async () => {
    await plansAdmin(store, prefix).networks.add({ by: "ip", value: "192.0.2.0/24" });
    const refused = await app().request("/", {
      headers: { "X-Key": "anyone", "CF-Connecting-IP": "192.0.2.200" },
    });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ blocked: { by: "ip", value: "192.0.2.0/24" } });
    const other = await app().request("/", {
      headers: { "X-Key": "anyone", "CF-Connecting-IP": "198.51.100.1" },
    });
    expect(other.status).toBe(200);
  });
});
