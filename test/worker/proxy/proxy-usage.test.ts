/**
 * The proxy with usage rules (docs/usage.md): the usage an origin's event stream reports is read
 * as the body passes to the client and settled when it ends. Each completed stream is charged
 * exactly what its origin reported; with a covering reservation, concurrent streams through two
 * workers never put the window over the limit; a client that cancels mid-stream is charged once
 * (the usage already reported, or the reservation) and holds nothing; a long stream without usage
 * passes through whole, its reservation standing. Real worker, origin and Redis.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import app from "../../../worker/worker";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { baseEnv, originUrl, postCheck } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("proxy-usage");
const run = crypto.randomUUID().slice(0, 8);
const LIMIT = 1_000;
const usageRule = (name: string, path: string, cost: number) => ({
  name,
  match: { path },
  key: "header:x-customer",
  limit: LIMIT,
  window: "1m",
  cost,
  usage: { json: "usage.total_tokens" },
});
const config = (timeoutMs: number) =>
  JSON.stringify({
    prefix,
    timeoutMs,
    rules: [
      usageRule("tokens", "/sse/*", 300),
      usageRule("dropped", "/sse-endless/*", 100),
      {
        name: "dropped-slots",
        match: { path: "/sse-endless/:n/held" },
        algorithm: "concurrency",
        limit: 5,
        timeout: "30s",
        key: "header:x-customer",
      },
      usageRule("bulk", "/sse-bulk/*", 50),
    ],
  });
// Two runtimes of the worker, each with its own limiter (as two isolates would have).
const workers = [
  { ...baseEnv, LIMITER_CONFIG: config(10_000) },
  { ...baseEnv, LIMITER_CONFIG: config(9_000) },
];

/** A request through the proxy, and a wait for its waitUntil work (the settle at body end). */
async function proxied(path: string, customer: string, on = 0) {
  const ctx = createExecutionContext();
  const request = new Request(new URL(path, "https://limited.test"), {
    headers: { "x-customer": `${customer}-${run}` },
  });
  const res = await app.fetch(request, workers[on] ?? baseEnv, ctx);
  return { res, settled: () => waitOnExecutionContext(ctx) };
}

/**
 * What the log leaves `customer` under `rule` now: a /check of 1 unit (remaining after it, + 1),
 * its receipt then settled at 0, so the probe leaves nothing counted.
 */
async function remainingFor(rule: string, customer: string): Promise<number> {
  const target = workers[0] ?? baseEnv;
  const res = await postCheck(target, { rule, key: `${customer}-${run}`, cost: 1 });
  const body = (await res.json()) as { remaining: number; receipt: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  const settle = await postCheck(
    target,
    { receipt: body.receipt, usage: 0 },
    { path: "/check/settle" },
  );
  expect(settle.status).toBe(200);
  return body.remaining + 1;
}

/** The concurrency slots held now under the drop test's rule. */
async function heldSlots(): Promise<number> {
  let held = 0;
  for (const key of await redis.keys(`${prefix}:dropped-slots/concurrency:*`)) {
    held += await redis.zcount(key, Date.now(), "+inf");
  }
  return held;
}

const remainingHeader = (res: Response) =>
  Number(/;r=(\d+)/.exec(res.headers.get("RateLimit") ?? "")?.[1]);

/** What the origin reported for a group's streams sent whole. */
async function originUsage(group: string): Promise<{ streams: number; units: number }> {
  return (await fetch(`${originUrl()}/__usage?group=${group}`)).json();
}

describe("proxy: usage read from the origin's event stream", () => {
  it("charges each completed stream exactly the usage its origin reported", async () => {
    const group = `exact-${run}`;
    const first = await proxied(`/sse/${group}/42`, "exact");
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get("content-type")).toBe("text/event-stream");
    const text = await first.res.text();
    expect(text).toContain('"usage":{"total_tokens":42}');
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    await first.settled();
    // The headers went out before the usage event: they count the reservation.
    expect(remainingHeader(first.res)).toBe(LIMIT - 300);
    expect(await remainingFor("tokens", "exact")).toBe(LIMIT - 42);

    const second = await proxied(`/sse/${group}/250`, "exact", 1);
    await second.res.text();
    await second.settled();
    expect(remainingHeader(second.res)).toBe(LIMIT - 42 - 300);
    expect(await originUsage(group)).toEqual({ streams: 2, units: 292 });
    expect(await remainingFor("tokens", "exact")).toBe(LIMIT - 292);
  });

  it("with a covering reservation, concurrent streams never put the window over the limit", async () => {
    const group = `cover-${run}`;
    // Up to the reservation (300) each, in waves of 6 concurrent streams at about 3× the budget.
    const used = (i: number) => 20 + ((i * 97) % 281);
    let statuses: number[] = [];
    for (let wave = 0; wave < 4; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 6 }, async (_, j) => {
          const i = wave * 6 + j;
          const { res, settled } = await proxied(`/sse/${group}/${used(i)}`, "cover", i % 2);
          await res.text();
          await settled();
          return res.status;
        }),
      );
      statuses = [...statuses, ...answers];
    }
    const admitted = statuses.filter((status) => status === 200).length;
    expect(admitted + statuses.filter((status) => status === 429).length).toBe(24);
    // Settles gave the unused reservations back: more got through than 1 000 / 300.
    expect(admitted).toBeGreaterThan(3);
    expect(admitted).toBeLessThan(24);
    const origin = await originUsage(group);
    expect(origin.streams).toBe(admitted);
    // Counted at the origin, all in one window: never over the limit.
    expect(origin.units).toBeLessThanOrEqual(LIMIT);
    expect(await remainingFor("tokens", "cover")).toBe(LIMIT - origin.units);
  });

  it("with a smaller reservation, over by at most what the streams in flight used beyond it", async () => {
    const group = `small-${run}`;
    // Reserving 100 where a stream uses up to 300: waves of 6 concurrent streams, each wave
    // ended and settled before the next, through two workers.
    const reserved = 100;
    const small = [0, 1].map((on) => ({
      ...(workers[on] ?? baseEnv),
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        timeoutMs: 10_000,
        rules: [usageRule("small", "/sse/*", reserved)],
      }),
    }));
    const used = (i: number) => 20 + ((i * 97) % 281);
    let bound = 0;
    let admitted = 0;
    for (let wave = 0; wave < 4; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 6 }, async (_, j) => {
          const i = wave * 6 + j;
          const ctx = createExecutionContext();
          const request = new Request(`https://limited.test/sse/${group}/${used(i)}`, {
            headers: { "x-customer": `small-${run}` },
          });
          const res = await app.fetch(request, small[i % 2] ?? baseEnv, ctx);
          await res.text();
          await waitOnExecutionContext(ctx);
          return { status: res.status, excess: Math.max(0, used(i) - reserved) };
        }),
      );
      const through = answers.filter((a) => a.status === 200);
      admitted += through.length;
      // docs/usage.md, "How exact": the last admission k of the window counted every settled
      // stream at its usage and those in flight (its own wave's) at their reservation.
      bound = Math.max(
        bound,
        through.reduce((sum, a) => sum + a.excess, 0),
      );
    }
    const origin = await originUsage(group);
    expect(origin.streams).toBe(admitted);
    // Counted at the origin, all in one window: within the limit plus that bound.
    expect(origin.units).toBeLessThanOrEqual(LIMIT + bound);
    // A smaller reservation admits more than a covering one could (1 000 / 300).
    expect(admitted).toBeGreaterThan(3);
  });

  it("a client that cancels mid-stream: charged once, the usage reported or the reservation", async () => {
    const cancelled = async (path: string) => {
      const { res, settled } = await proxied(path, "drop");
      expect(res.status).toBe(200);
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      await reader.read();
      expect(await heldSlots()).toBe(path.endsWith("/held") ? 1 : 0);
      await reader.cancel("client went away");
      // Resolves only once the body's end was seen and its settle and release ran.
      await settled();
    };
    // The usage event (7) came before the cancel: charged that, not the reservation. This one
    // also holds a concurrency slot; the next two hold none, and their body is read for usage
    // alone.
    await cancelled("/sse-endless/7/held");
    expect(await remainingFor("dropped", "drop")).toBe(LIMIT - 7);
    // None came: the reservation (100) stands.
    await cancelled("/sse-endless/0");
    expect(await remainingFor("dropped", "drop")).toBe(LIMIT - 7 - 100);
    await cancelled("/sse-endless/5");
    expect(await remainingFor("dropped", "drop")).toBe(LIMIT - 7 - 100 - 5);
    // Nothing held: the slot is back.
    expect(await heldSlots()).toBe(0);
  });

  it("a 10 MB event stream without usage passes through whole; its reservation stands", async () => {
    const bytes = 10 * 1_048_576;
    const { res, settled } = await proxied(`/sse-bulk/${bytes}`, "bulk");
    expect(res.status).toBe(200);
    let received = 0;
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      received += read.value.byteLength;
    }
    await settled();
    expect(received).toBe(bytes);
    expect(remainingHeader(res)).toBe(LIMIT - 50);
    expect(await remainingFor("bulk", "bulk")).toBe(LIMIT - 50);
  });
});
