/**
 * The middleware's usage settle (src/http/usage-settle.ts) against careless apps and operators:
 * a settle called with units it refuses, a sibling rule's refundOn on a 5xx, a body the app
 * compresses inside the rate limiter. Real store through the bridge.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { Hono, type MiddlewareHandler } from "hono";
import { compress } from "hono/compress";
import { describe, expect, it } from "vitest";
import { createLimiter, type RateLimitVariables, rateLimit } from "../../../src/index";
import type { SettleOutcome } from "../../../src/limiter/types";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("mw-usage-hostile");
const limiter = createLimiter({ store: testStore(2_000), prefix });
const run = crypto.randomUUID().slice(0, 8);

type Rules = Parameters<typeof rateLimit>[0]["rules"];
type Settle = (units: number) => Promise<SettleOutcome>;

const tokens = (name: string, extra: object = {}) => ({
  name,
  limit: 1_000,
  window: "1m",
  cost: 100,
  usage: { json: "usage.total_tokens" },
  ...extra,
});

function appWith(rules: Rules, key: string, inner?: MiddlewareHandler) {
  const app = new Hono<{ Variables: RateLimitVariables }>();
  app.use(rateLimit({ limiter, rules, key: () => key }));
  if (inner) app.use(inner);
  app.get("/json/:n", (c) =>
    c.json({ answer: "x".repeat(2_000), usage: { total_tokens: Number(c.req.param("n")) } }),
  );
  app.get("/down/:n", (c) => c.json({ usage: { total_tokens: Number(c.req.param("n")) } }, 503));
  app.get("/none", (c) => c.text("none"));
  const outcomes: SettleOutcome[] = [];
  app.get("/self/:bad/:n", async (c) => {
    const settle = c.get("rateLimit").settle as Settle;
    outcomes.push(await settle(Number(c.req.param("bad"))));
    outcomes.push(await settle(Number(c.req.param("n"))));
    return c.json({ usage: { total_tokens: 55 } });
  });
  return { app, outcomes };
}

async function settledAfter(app: Hono<{ Variables: RateLimitVariables }>, path: string) {
  const ctx = createExecutionContext();
  const res = await app.request(path, { headers: { "Accept-Encoding": "gzip" } }, {}, ctx);
  await res.arrayBuffer();
  await waitOnExecutionContext(ctx);
  return res;
}

const remaining = (res: Response) =>
  Number(/;r=(\d+)/.exec(res.headers.get("RateLimit") ?? "")?.[1]);

describe("the middleware's settle against careless apps", () => {
  it("a settle with units it refuses answers failed and leaves the settle to a right one", async () => {
    const { app, outcomes } = appWith(tokens("self"), `self-${run}`);
    await settledAfter(app, "/self/-1/30");
    expect(outcomes[0]?.status).toBe("failed");
    expect(outcomes[1]?.status).toBe("settled");
    // The app's 30, not the body's 55: the app's settle wins over the read.
    expect(remaining(await app.request("/none"))).toBe(1_000 - 30 - 100);
  });

  it("two bad figures: the body's usage is read at its end", async () => {
    const { app, outcomes } = appWith(tokens("self-nan"), `self-nan-${run}`);
    // Both calls refused (NaN, then a fraction): the request is settled from its body's 55.
    await settledAfter(app, "/self/NaN/1.5");
    expect(outcomes.map((o) => o.status)).toEqual(["failed", "failed"]);
    expect(outcomes[0]?.error).toMatch(/^usage must be an integer/);
    expect(remaining(await app.request("/none"))).toBe(1_000 - 55 - 100);
  });

  it("a usage rule's own refundOn gives a 5xx back whole, its usage unread", async () => {
    const { app } = appWith(tokens("own-refund", { refundOn: "5xx" }), `own-${run}`);
    expect((await settledAfter(app, "/down/700")).status).toBe(503);
    expect(remaining(await app.request("/none"))).toBe(1_000 - 100);
  });

  // Only a rule with refundOn gives the request back on a 5xx: a usage rule without it is
  // charged what the 5xx reports, whatever its sibling rules say.
  it("a sibling rule's refundOn leaves the usage rule's 5xx usage read", async () => {
    const requests = { name: "requests", limit: 100, window: "1m", refundOn: "5xx" as const };
    const { app } = appWith([tokens("sibling"), requests], `sibling-${run}`);
    expect((await settledAfter(app, "/down/700")).status).toBe(503);
    const next = await app.request("/none");
    expect(next.status).toBe(200);
    // The tokens rule's remaining: 700 charged for the 5xx, 100 reserved for this one.
    const tokensLeft = /"sibling";r=(\d+)/.exec(next.headers.get("RateLimit") ?? "")?.[1];
    expect(Number(tokensLeft ?? remaining(next))).toBe(1_000 - 700 - 100);
  });

  // Rules whose specs are equal (two objects) share one reading, which charges each of them
  // beside a rule that reads another spec; a 5xx gives back the one with refundOn whole while
  // its twin is charged what the 5xx reports.
  it("twin specs: one reading charges both; on a 5xx only the twin without refundOn", async () => {
    const header = { ...tokens("twin-h"), usage: { header: "x-usage" } };
    const twins = [tokens("twin-a", { refundOn: "5xx" }), tokens("twin-b"), header];
    const left = (res: Response) =>
      [...(res.headers.get("RateLimit") ?? "").matchAll(/;r=(\d+)/g)].map((m) => Number(m[1]));
    const { app } = appWith(twins, `twins-${run}`);
    await settledAfter(app, "/json/7");
    // No x-usage header: that rule's reservation stands.
    expect(left(await app.request("/none"))).toEqual([1_000 - 7 - 100, 1_000 - 7 - 100, 800]);
    const other = appWith(twins, `twins-5xx-${run}`).app;
    expect((await settledAfter(other, "/down/700")).status).toBe(503);
    expect(left(await other.request("/none"))).toEqual([1_000 - 100, 1_000 - 700 - 100, 800]);
  });

  // BUG (low-medium): a body compressed inside the rate limiter (compress() registered after
  // it) is scanned as gzip bytes: no usage is read and the reservation stands, silently
  // (test/src/http/usage-hostile.test.ts shows the reader's side). Left failing.
  it.fails("reads the usage of a body an inner compress() encoded", async () => {
    const { app } = appWith(tokens("gzip"), `gzip-${run}`, compress());
    const res = await settledAfter(app, "/json/7");
    expect(res.headers.get("Content-Encoding")).toBe("gzip");
    expect(remaining(await app.request("/none"))).toBe(1_000 - 7 - 100);
  });
});
