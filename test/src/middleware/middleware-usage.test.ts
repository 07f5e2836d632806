// The middleware with usage rules (docs/usage.md): the reservation taken at admission becomes what
// the handler's response reports (a header, JSON fields, an event stream's events), or what the
// app settles itself, once. Real store through the bridge.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLimiter, type RateLimitVariables, rateLimit } from "../../../src/index";
import type { SettleOutcome } from "../../../src/limiter/types";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("mw-usage");
const limiter = createLimiter({ store: testStore(2_000), prefix });
const run = crypto.randomUUID().slice(0, 8);

type UsageRule = Parameters<typeof rateLimit>[0]["rules"];

function appWith(rules: UsageRule, key: string) {
  const app = new Hono<{ Variables: RateLimitVariables }>();
  app.use(rateLimit({ limiter, rules, key: () => key }));
  app.get("/header/:n", (c) => c.text("ok", 200, { "x-usage": c.req.param("n") }));
  app.get("/json", (c) => c.json({ answer: "hi", usage: { input_tokens: 30, output_tokens: 12 } }));
  app.get("/none", (c) => c.text("no usage"));
  app.get("/both", (c) =>
    c.json({ usage: { input_tokens: 30, output_tokens: 12 } }, 200, { "x-usage": "7" }),
  );
  app.get("/sse/:n", (c) => new Response(events(Number(c.req.param("n"))), { headers: sse }));
  app.get("/endless/:n", (c) => new Response(endless(Number(c.req.param("n"))), { headers: sse }));
  app.get("/throws", () => {
    throw new Error("handler failed");
  });
  app.get("/5xx", (c) => c.text("origin down", 503, { "x-usage": "99" }));
  const settled: SettleOutcome[] = [];
  app.get("/self/:n", async (c) => {
    const n = Number(c.req.param("n"));
    const rateLimited = c.get("rateLimit");
    settled.push(await (rateLimited.settle as (units: number) => Promise<SettleOutcome>)(n));
    // A second call is the first's outcome: the usage is charged once.
    settled.push(await (rateLimited.settle as (units: number) => Promise<SettleOutcome>)(n + 50));
    return c.text("ok", 200, { "x-usage": "1" });
  });
  return { app, settled };
}

const sse = { "content-type": "text/event-stream" };
const encoder = new TextEncoder();

/** Three events, the usage in the last (split across two chunks), as an LLM API streams it. */
function events(units: number): ReadableStream<Uint8Array> {
  const chunks = [
    'data: {"delta":"he"}\n\n',
    'data: {"delta":"llo"}\n\ndata: {"usage":{"input_tok',
    `ens":${units - 2},"output_tokens":2}}\n\ndata: [DONE]\n\n`,
  ];
  return new ReadableStream({
    pull(controller) {
      const chunk = chunks.shift();
      if (chunk === undefined) controller.close();
      else controller.enqueue(encoder.encode(chunk));
    },
  });
}

/** An event with usage `units` (none when 0), then events without usage, as long as it is read. */
function endless(units: number): ReadableStream<Uint8Array> {
  let first = units > 0;
  return new ReadableStream({
    pull(controller) {
      const usage = `{"usage":{"input_tokens":${units},"output_tokens":0}}`;
      controller.enqueue(encoder.encode(`data: ${first ? usage : '{"delta":"more"}'}\n\n`));
      first = false;
    },
  });
}

/** A request with an execution context, and its waitUntil work (a settle at body end) awaited. */
async function settledAfter(
  app: ReturnType<typeof appWith>["app"],
  path: string,
  read: (res: Response) => Promise<void>,
) {
  const ctx = createExecutionContext();
  const res = await app.request(path, {}, {}, ctx);
  await read(res);
  await waitOnExecutionContext(ctx);
  return res;
}

const remaining = (res: Response) =>
  Number(/;r=(\d+)/.exec(res.headers.get("RateLimit") ?? "")?.[1]);

describe("the middleware settles usage rules", () => {
  it("from a header: the difference charged, and the headers show the budget left", async () => {
    const rule = {
      name: "tok-h",
      limit: 100,
      window: "1m",
      cost: 20,
      usage: { header: "X-Usage" },
    };
    const { app } = appWith(rule, `h-${run}`);
    const first = await app.request("/header/35");
    expect(first.status).toBe(200);
    // 100 − 35: what the request used, not its reservation of 20.
    expect(remaining(first)).toBe(65);
    const second = await app.request("/header/5");
    expect(remaining(second)).toBe(60);
  });

  it("from JSON fields summed as the body passes: the headers show the reservation", async () => {
    const rule = {
      name: "tok-j",
      limit: 1_000,
      window: "1m",
      cost: 100,
      usage: { json: ["usage.input_tokens", "usage.output_tokens"] },
    };
    const { app } = appWith(rule, `j-${run}`);
    const res = await settledAfter(app, "/json", async (r) => {
      expect(await r.json()).toMatchObject({ answer: "hi" });
    });
    // Settled at the body's end, after the headers went out: they count the reservation.
    expect(remaining(res)).toBe(1_000 - 100);
    expect(remaining(await app.request("/json"))).toBe(1_000 - 42 - 100);
  });

  it("from an event stream: each stream charged its last usage event, the body whole", async () => {
    const rule = {
      name: "tok-e",
      limit: 1_000,
      window: "1m",
      cost: 300,
      usage: { json: ["usage.input_tokens", "usage.output_tokens"] },
    };
    const { app } = appWith(rule, `e-${run}`);
    let text = "";
    const first = await settledAfter(app, "/sse/42", async (r) => {
      text = await r.text();
    });
    expect(first.headers.get("content-type")).toBe("text/event-stream");
    expect(text).toContain('"output_tokens":2}}\n\ndata: [DONE]');
    expect(remaining(first)).toBe(1_000 - 300);
    await settledAfter(app, "/sse/250", (r) => r.text().then(() => {}));
    // 42 + 250 charged, this one's 300 reserved.
    expect(remaining(await app.request("/none"))).toBe(1_000 - 292 - 300);
  });

  it("rules that read their usage differently: each settled with its own", async () => {
    const rules = [
      { name: "tok-ba", limit: 100, window: "1m", cost: 20, usage: { header: "X-Usage" } },
      {
        name: "tok-bb",
        limit: 1_000,
        window: "1m",
        cost: 100,
        usage: { json: ["usage.input_tokens", "usage.output_tokens"] },
      },
    ];
    const { app } = appWith(rules, `b-${run}`);
    const first = await settledAfter(app, "/both", (r) => r.json().then(() => {}));
    expect(first.status).toBe(200);
    // The next request sees 7 and 42 charged, and its own reservations.
    const next = await settledAfter(app, "/none", (r) => r.text().then(() => {}));
    expect(next.headers.get("RateLimit")).toBe('"tok-ba";r=73;t=60, "tok-bb";r=858;t=60');
  });

  it("a client that cancels mid-stream: the usage already reported, or the reservation, once", async () => {
    const rule = {
      name: "tok-c",
      limit: 1_000,
      window: "1m",
      cost: 100,
      usage: { json: "usage.input_tokens" },
    };
    const { app } = appWith(rule, `c-${run}`);
    const cancelAfterTwo = async (res: Response) => {
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      await reader.read();
      await reader.cancel();
    };
    // The usage event (7) came before the cancel: charged that.
    await settledAfter(app, "/endless/7", cancelAfterTwo);
    // None came: the reservation (100) stands.
    await settledAfter(app, "/endless/0", cancelAfterTwo);
    expect(remaining(await app.request("/none"))).toBe(1_000 - 7 - 100 - 100);
  });

  it("c.get('rateLimit').settle(units) counts once, and the response is not read after it", async () => {
    const rule = {
      name: "tok-s",
      limit: 100,
      window: "1m",
      cost: 10,
      usage: { header: "x-usage" },
    };
    const { app, settled } = appWith(rule, `s-${run}`);
    const res = await app.request("/self/30");
    expect(settled.map((s) => s.status)).toEqual(["settled", "settled"]);
    expect(settled[0]).toMatchObject({ policies: ["tok-s"], charged: [20] });
    expect(settled[1]).toBe(settled[0]);
    expect(remaining(res)).toBe(70);
    expect(remaining(await app.request("/none"))).toBe(60);
  });

  it("a settle the store did not take is not the request's one: the next call charges it", async () => {
    const store = await faultScenario("forward");
    const flaky = createLimiter({ store: storeAt(store.url, 2_000), prefix });
    const outcomes: SettleOutcome[] = [];
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(
      rateLimit({
        limiter: flaky,
        rules: { name: "tok-f", limit: 100, window: "1m", cost: 10, usage: { header: "x-u" } },
        key: () => `f-${run}`,
      }),
    );
    app.get("/", async (c) => {
      const settle = c.get("rateLimit").settle as (units: number) => Promise<SettleOutcome>;
      await store.set("error-500");
      outcomes.push(await settle(30));
      await store.set("forward");
      outcomes.push(await settle(30));
      outcomes.push(await settle(99));
      return c.text("ok");
    });
    const res = await app.request("/");
    expect(res.status).toBe(200);
    expect(outcomes.map((o) => o.status)).toEqual(["failed", "settled", "settled"]);
    expect(outcomes[1]).toMatchObject({ charged: [20] });
    // Charged once: 30 of 100, whatever the calls after the one the store took.
    expect(remaining(res)).toBe(70);
  });

  it("no usage read (no header, handler threw, a 5xx refundOn gives back): as without usage", async () => {
    const rule = {
      name: "tok-n",
      limit: 100,
      window: "1m",
      cost: 10,
      usage: { header: "x-usage" },
    };
    const { app } = appWith(rule, `n-${run}`);
    expect(remaining(await app.request("/none"))).toBe(90);
    expect((await app.request("/throws")).status).toBe(500);
    // Both reservations stood: 100 − 10 (none) − 10 (thrown) − 10 (this one).
    expect(remaining(await app.request("/none"))).toBe(70);

    const refunding = { ...rule, name: "tok-r", refundOn: "5xx" as const };
    const { app: other } = appWith(refunding, `r-${run}`);
    expect(remaining(await other.request("/none"))).toBe(90);
    // The 503 is given back whole (refundOn), its x-usage unread.
    expect(remaining(await other.request("/5xx"))).toBe(90);
    expect(remaining(await other.request("/none"))).toBe(80);
  });

  it("a monthly token quota (calendar) and a fixed window: settled as the weighted log is", async () => {
    const month = {
      name: "tok-month",
      period: "month" as const,
      timezone: "Europe/Berlin",
      anchor: "2026-01-15T09:00:00+01:00",
      limit: 5_000_000,
      cost: 4_000,
      usage: { json: ["usage.input_tokens", "usage.output_tokens"] },
    };
    const { app } = appWith(month, `m-${run}`);
    const res = await settledAfter(app, "/json", (r) => r.json().then(() => {}));
    expect(res.headers.get("RateLimit-Policy")).toContain("q=5000000");
    expect(remaining(res)).toBe(5_000_000 - 4_000);
    // 42 charged at the body's end, 3 958 given back; then 30 by the app, once.
    const { app: self, settled } = appWith(month, `m-${run}`);
    expect(remaining(await self.request("/self/30"))).toBe(5_000_000 - 42 - 30);
    expect(settled[0]).toMatchObject({ status: "settled", charged: [30 - 4_000] });

    const minute = { name: "tok-fw", algorithm: "fixed-window" as const, limit: 100, window: "1m" };
    const { app: fixed } = appWith(
      { ...minute, cost: 20, usage: { header: "x-usage" } },
      `f-${run}`,
    );
    expect(remaining(await fixed.request("/header/35"))).toBe(65);
    expect(remaining(await fixed.request("/header/5"))).toBe(60);
  });

  it("refuses a bad usage spec, naming the field: 503 for every request", async () => {
    for (const usage of [
      { header: "bad header" },
      { json: "usage..total" },
      { json: [] },
      { json: ["a", "b", "c", "d", "e", "f", "g", "h", "i"] },
      { header: "x", json: "y" },
      {},
    ]) {
      const { app } = appWith({ name: "bad", limit: 10, window: "1m", usage } as UsageRule, "x");
      const res = await app.request("/none");
      expect(res.status, JSON.stringify(usage)).toBe(503);
      expect(((await res.json()) as { field: string }).field).toMatch(/^rules\[0\]\.usage/);
    }
    const { app } = appWith(
      { name: "bad", limit: 10, window: "1m", usage: { header: "x" }, algorithm: "token-bucket" },
      "x",
    );
    expect(await (await app.request("/none")).json()).toMatchObject({ field: "rules[0].usage" });
  });
});
