import { Hono } from "hono";
import { describe, expect, inject, it } from "vitest";
import { createStoreClient, fromEnv, type RateLimitVariables, rateLimit } from "../../../src/index";
import { scopedPrefix, TEST_DEADLINE_MS } from "../../support/worker/redis";

// One call: `rateLimit({ rules, store })` builds its limiter, keeps it for the isolate (one per
// store), and answers 503 naming what is missing rather than running unprotected.
const prefix = scopedPrefix("mw-store");
const url = inject("bridgeUrl");
const token = inject("bridgeToken");
type Env = { Bindings: Record<string, string | undefined>; Variables: RateLimitVariables };

/** An app limited at 3 a minute per `X-Key`, answering with where each decision came from. */
function appWith(options: Omit<Parameters<typeof rateLimit<Env>>[0], "rules">, name: string) {
  const app = new Hono<Env>();
  app.use(
    rateLimit<Env>({
      rules: { name, limit: 3, window: "1 minute" },
      key: (c) => c.req.header("X-Key"),
      handler: (c, result) =>
        c.json(
          result.decisions.map((d) => d.source),
          429,
        ),
      // The source is asserted: a busy machine's slow call must not make it the fallback's.
      limiterOptions: { prefix, timeoutMs: TEST_DEADLINE_MS },
      ...options,
    }),
  );
  app.get("/", (c) => c.json(c.get("rateLimit").decisions.map((d) => d.source)));
  return app;
}

async function statuses(app: Hono<Env>, key: string, n: number, env?: Record<string, string>) {
  const out: { status: number; sources: unknown; limit: string | null }[] = [];
  for (let i = 0; i < n; i++) {
    const res = await app.request("/", { headers: { "X-Key": key } }, env);
    out.push({
      status: res.status,
      sources: res.status === 503 ? null : await res.json(),
      limit: res.headers.get("RateLimit"),
    });
  }
  return out;
}

describe("rateLimit({ rules, store })", () => {
  it("with { url, token }: 200 three times, then 429, the limiter kept between requests", async () => {
    const app = appWith({ store: { url, token } }, "cfg");
    const key = `cfg-${crypto.randomUUID()}`;
    const got = await statuses(app, key, 5);
    expect(got.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(got[0]?.sources).toEqual(["redis"]);
    expect(got[2]?.limit).toMatch(/^"cfg";r=0;t=\d+$/);
    // The denials come from the kept limiter's denial cache (the last admission said nothing was
    // left): a limiter built per request would have asked the store.
    expect(got[3]?.sources).toEqual(["cache"]);
    expect(got[4]?.sources).toEqual(["cache"]);
  });

  it("with fromEnv: the Worker's bindings, and a 503 naming a missing one", async () => {
    const app = appWith({ store: fromEnv }, "env");
    const key = `env-${crypto.randomUUID()}`;
    const env = { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: token };
    expect((await statuses(app, key, 4, env)).map((r) => r.status)).toEqual([200, 200, 200, 429]);

    // Blank, not absent: this workerd mirrors the test Worker's own bindings (which have a
    // token) into process.env, where fromEnv looks for one absent from c.env.
    const missing = await app.request(
      "/",
      { headers: { "X-Key": key } },
      { UPSTASH_REDIS_REST_URL: url, UPSTASH_REDIS_REST_TOKEN: " " },
    );
    expect(missing.status).toBe(503);
    expect(await missing.json()).toMatchObject({ field: "UPSTASH_REDIS_REST_TOKEN" });
  });

  it("with a client, or a function returning one: one limiter per client", async () => {
    const client = createStoreClient({ url, token });
    let built = 0;
    const app = appWith(
      {
        store: () => {
          built++;
          return client;
        },
      },
      "client",
    );
    const key = `client-${crypto.randomUUID()}`;
    const got = await statuses(app, key, 4);
    expect(got.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    expect(got[3]?.sources).toEqual(["cache"]);
    expect(built).toBe(4);
  });

  it("without a store or a limiter: 503 naming store, the route never runs", async () => {
    const app = new Hono();
    app.use(rateLimit({ rules: { name: "none", limit: 1, window: "1m" } }));
    app.get("/", (c) => c.text("should not run"));
    const res = await app.request("/");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field: "store" });
  });
});
