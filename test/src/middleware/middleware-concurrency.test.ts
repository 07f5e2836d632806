/**
 * The middleware with a concurrency rule (docs/concurrency.md): the slot is held while the
 * handler runs and its response body is being sent, and released when the body ends (a stream
 * included), is cancelled, or the handler threw.
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLimiter, rateLimit } from "../../../src/index";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("middleware-concurrency");
const limiter = createLimiter({ store: testStore(10_000), prefix, timeoutMs: 10_000 });
const run = crypto.randomUUID().slice(0, 8);

/** An app whose /stream handler answers a body the test writes and ends. */
function app(key: string) {
  const writers: WritableStreamDefaultWriter<Uint8Array>[] = [];
  const hono = new Hono();
  hono.use(
    rateLimit({
      limiter,
      rules: { name: "mw-slots", algorithm: "concurrency", limit: 2, timeout: "30s" },
      key: () => key,
    }),
  );
  hono.get("/stream", () => {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    writers.push(writable.getWriter());
    return new Response(readable);
  });
  hono.get("/plain", (c) => c.text("plain"));
  hono.get("/throws", () => {
    throw new Error("the handler failed");
  });
  return { hono, writers };
}

const held = (key: string) => redis.zcard(storageKey(prefix, "mw-slots", key, "concurrency"));

/** Polls (bounded) until the key holds `n` slots: a release runs off the request path. */
async function heldBecomes(key: string, n: number): Promise<number> {
  const deadline = Date.now() + 10_000;
  let now = await held(key);
  while (now !== n && Date.now() < deadline) {
    await redis.ping();
    now = await held(key);
  }
  return now;
}

describe("middleware: a concurrency rule", () => {
  it("holds the slot until a streamed body ends, refusing a third meanwhile", async () => {
    const key = `stream-${run}`;
    const { hono, writers } = app(key);
    const first = await hono.request("/stream");
    const second = await hono.request("/stream");
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(first.headers.get("RateLimit")).toBe('"mw-slots";r=1;t=0');
    expect(await held(key)).toBe(2);
    const third = await hono.request("/plain");
    expect(third.status).toBe(429);
    expect(third.headers.get("Retry-After")).toBe("1");
    expect(await third.json()).toMatchObject({ violated: ["mw-slots"] });
    // The first body ends: its slot is given back, and a plain request passes again.
    const [w1, w2] = writers as [
      WritableStreamDefaultWriter<Uint8Array>,
      WritableStreamDefaultWriter<Uint8Array>,
    ];
    void w1.write(new TextEncoder().encode("done"));
    void w1.close();
    expect(await first.text()).toBe("done");
    expect(await heldBecomes(key, 1)).toBe(1);
    const plain = await hono.request("/plain");
    expect(plain.status).toBe(200);
    expect(await plain.text()).toBe("plain");
    expect(await heldBecomes(key, 1)).toBe(1);
    // The second client goes away mid-body: released too.
    void w2.write(new TextEncoder().encode("part"));
    const reader = (second.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    await reader.cancel();
    // In workerd the body runs through its own stream (release-at-end.ts), which learns of the
    // cancel when the handler's next chunk finds no reader.
    void w2.write(new TextEncoder().encode("more")).catch(() => {});
    expect(await heldBecomes(key, 0)).toBe(0);
  });

  it("releases the slot when the body breaks off mid-stream", async () => {
    const key = `broken-${run}`;
    const { hono, writers } = app(key);
    const res = await hono.request("/stream");
    expect(await held(key)).toBe(1);
    const writer = writers[0] as WritableStreamDefaultWriter<Uint8Array>;
    void writer.write(new TextEncoder().encode("part"));
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    // The producer fails: the client's read errors, and the slot goes back.
    void writer.abort(new Error("upstream broke"));
    await expect(reader.read()).rejects.toThrow("upstream broke");
    expect(await heldBecomes(key, 0)).toBe(0);
  });

  it("releases the slot when the request's signal aborts while the body waits on its producer", async () => {
    // The client went away (a runtime aborts the request's signal), and nothing reads or cancels
    // the body: the signal alone gives the slot back.
    const key = `gone-${run}`;
    const { hono, writers } = app(key);
    const gone = new AbortController();
    const res = await hono.request(new Request("http://app.test/stream", { signal: gone.signal }));
    expect(res.status).toBe(200);
    expect(await held(key)).toBe(1);
    const writer = writers[0] as WritableStreamDefaultWriter<Uint8Array>;
    const wrote = writer.write(new TextEncoder().encode("part")).catch(() => "refused");
    gone.abort();
    expect(await heldBecomes(key, 0)).toBe(0);
    // Nobody is there to read the rest: the body is cut off, the handler's stream with it.
    await expect(res.text()).rejects.toThrow();
    expect(await writer.closed.catch(() => "errored")).toBe("errored");
    await wrote;
    // Released once, and the slot is free for the next request.
    const next = await hono.request("/plain");
    expect(next.status).toBe(200);
    expect(await next.text()).toBe("plain");
    expect(await heldBecomes(key, 0)).toBe(0);
  });

  it("releases the slot when the handler throws", async () => {
    const key = `throws-${run}`;
    const { hono, writers } = app(key);
    const res = await hono.request("/throws");
    expect(res.status).toBe(500);
    await res.text();
    expect(await heldBecomes(key, 0)).toBe(0);
    // Both slots are free: two streams are admitted.
    const a = await hono.request("/stream");
    const b = await hono.request("/stream");
    expect([a.status, b.status]).toEqual([200, 200]);
    await Promise.all([a.body?.cancel(), b.body?.cancel()]);
    for (const writer of writers) void writer.close().catch(() => {});
    expect(await heldBecomes(key, 0)).toBe(0);
  });
});
