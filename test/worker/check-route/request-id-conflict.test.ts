/**
 * A request id's retry with other parameters (cost, limit, window, algorithm) is refused with 409
 * on every surface, counting nothing; the genuine retry still replays. Real worker, real Redis.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLimiter, rateLimit } from "../../../src/index";
import { storageKey } from "../../../src/store/keys";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { originCount, postCheck, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("rid-conflict");
const run = crypto.randomUUID().slice(0, 8);

const config = (limit: number) =>
  JSON.stringify({
    prefix,
    requestIdHeaders: ["Idempotency-Key"],
    rules: [{ name: "orders", match: { path: "/orders/*" }, limit, window: "1m" }],
  });
const worker = workerWith({ LIMITER_CONFIG: config(5) });

describe("a request id retried with other parameters", () => {
  it("/check: cost 1 then cost 100 under one requestId is a 409 naming cost, counting nothing", async () => {
    const key = `cost-${run}`;
    const first = await postCheck(worker, {
      key,
      limit: 100,
      window: "1m",
      cost: 1,
      requestId: "X",
    });
    expect(first.status).toBe(200);
    const costly = await postCheck(worker, {
      key,
      limit: 100,
      window: "1m",
      cost: 100,
      requestId: "X",
    });
    expect(costly.status).toBe(409);
    expect(costly.headers.get("Content-Type")).toBe("application/problem+json");
    expect(await costly.json()).toMatchObject({
      status: 409,
      title: "Conflict",
      field: "cost",
      recorded: "1",
      asked: "100",
    });
    expect(await logCount(redis, `${prefix}:check.60000ms.100:{${key}}`)).toBe(1);
    // The genuine retry replays; another id is decided (and counted) afresh.
    const retry = await postCheck(worker, {
      key,
      limit: 100,
      window: "1m",
      cost: 1,
      requestId: "X",
    });
    expect(await retry.json()).toMatchObject({ allowed: true, remaining: 99, replayed: true });
    const other = await postCheck(worker, {
      key,
      limit: 100,
      window: "1m",
      cost: 100,
      requestId: "Y",
    });
    expect(other.status).toBe(429);
    expect(await logCount(redis, `${prefix}:check.60000ms.100:{${key}}`)).toBe(1);
  });

  it("/check: another limit is another ad-hoc log, so the id is decided there afresh", async () => {
    const key = `limit-${run}`;
    expect((await postCheck(worker, { key, limit: 10, window: "1m", requestId: "L" })).status).toBe(
      200,
    );
    const res = await postCheck(worker, { key, limit: 1_000, window: "1m", requestId: "L" });
    expect(res.status).toBe(200);
    expect(await res.json()).not.toHaveProperty("replayed");
    expect(await logCount(redis, `${prefix}:check.60000ms.10:{${key}}`)).toBe(1);
    expect(await logCount(redis, `${prefix}:check.60000ms.1000:{${key}}`)).toBe(1);
  });

  it("proxy: an Idempotency-Key retried after the rule's limit changed is a 409, the origin not reached", async () => {
    const path = `/orders/${run}`;
    const headers = { "CF-Connecting-IP": "203.0.113.77", "Idempotency-Key": `o-${run}` };
    expect((await worker(path, { headers })).status).toBe(200);
    const redeployed = workerWith({ LIMITER_CONFIG: config(50) });
    const res = await redeployed(path, { headers });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ field: "limit", policy: "orders" });
    expect(await originCount(path)).toBe(1);
    expect(await logCount(redis, storageKey(prefix, "orders", "203.0.113.77"))).toBe(1);
  });

  it("middleware: a conflict is a 409 even with a custom handler, and the app never runs", async () => {
    const limiter = createLimiter({ store: testStore(5_000), prefix });
    let ran = 0;
    const app = (cost: number) => {
      const hono = new Hono();
      hono.use(
        rateLimit({
          limiter,
          rules: { name: "mw", limit: 10, window: "1m", cost },
          key: () => `mw-${run}`,
          requestIdHeaders: ["Idempotency-Key"],
          handler: (c) => c.text("custom 429", 429),
        }),
      );
      hono.get("/", (c) => {
        ran++;
        return c.text("ok");
      });
      return hono;
    };
    const headers = { "Idempotency-Key": "m" };
    expect((await app(1).request("/", { headers })).status).toBe(200);
    const res = await app(3).request("/", { headers });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ field: "cost", recorded: "1", asked: "3" });
    expect(ran).toBe(1);
  });
});
