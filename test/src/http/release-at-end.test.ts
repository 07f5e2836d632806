/**
 * src/http/release-at-end.ts in workerd, on real Redis: the request's context is held (through
 * its waitUntil) from the moment slots are taken until their release has reached the store,
 * whichever path ends the request; a body piped through workerd's native stream releases when
 * it ends, when it fails, and when its reader went away (seen at the next write).
 */
import { describe, expect, it } from "vitest";
import { heldUntilReleased, releasingAtEnd } from "../../../src/http/release-at-end";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { ConcurrencySlot } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("release-at-end");
const limiter = createLimiter({ store: testStore(), prefix, timeoutMs: 10_000 });
const held = (key: string) => redis.zcard(storageKey(prefix, "rae", key, "concurrency"));

/** A slot of a limit-1 rule with a 30 s timeout, taken for real. */
async function takeSlot(key: string): Promise<ConcurrencySlot> {
  const decided = await limiter.limit({
    policy: "rae",
    key,
    limit: 1,
    windowMs: 30_000,
    algorithm: "concurrency",
  });
  expect(decided.allowed).toBe(true);
  return decided.slot as ConcurrencySlot;
}

/** Polls (bounded) until the key holds no slot: a release runs off the path. */
async function releasedBy(key: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  let now = await held(key);
  while (now > 0 && Date.now() < deadline) now = await held(key);
  return now;
}

/** A waitUntil that records what it was given, as the request's ExecutionContext would hold. */
function recordingWaitUntil() {
  const given: Promise<unknown>[] = [];
  return { given, waitUntil: (promise: Promise<unknown>) => void given.push(promise) };
}

describe("heldUntilReleased", () => {
  it("holds the context from the start until the release has reached the store, once", async () => {
    const key = `held-${crypto.randomUUID()}`;
    const slot = await takeSlot(key);
    const { given, waitUntil } = recordingWaitUntil();
    let calls = 0;
    const release = heldUntilReleased(() => {
      calls++;
      return limiter.release(slot, { waitUntil });
    }, waitUntil);
    // Registered before anything ended: a disconnect after this point still finds the
    // context alive. It has not settled, as nothing was released yet.
    expect(given).toHaveLength(1);
    const holding = given[0] as Promise<unknown>;
    let settled = false;
    void holding.then(() => {
      settled = true;
    });
    expect(await held(key)).toBe(1);
    expect(settled).toBe(false);
    release();
    release();
    await holding;
    // Settled only once the slot was back in the store; the second call did nothing.
    expect(await held(key)).toBe(0);
    expect(calls).toBe(1);
  });
});

describe("releasingAtEnd in workerd", () => {
  const bodyOf = () => {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    return { readable, writer: writable.getWriter() };
  };
  const bytes = (text: string) => new TextEncoder().encode(text);

  it("releases when the body has been read to its end, not before", async () => {
    const key = `end-${crypto.randomUUID()}`;
    const slot = await takeSlot(key);
    const { readable, writer } = bodyOf();
    const res = releasingAtEnd(new Response(readable, { status: 201 }), () => {
      void limiter.release(slot);
    });
    expect(res.status).toBe(201);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    void writer.write(bytes("part"));
    await reader.read();
    expect(await held(key)).toBe(1);
    void writer.close();
    expect((await reader.read()).done).toBe(true);
    expect(await releasedBy(key)).toBe(0);
  });

  it("releases when its reader went away, at the body's next write", async () => {
    const key = `gone-${crypto.randomUUID()}`;
    const slot = await takeSlot(key);
    const { readable, writer } = bodyOf();
    const res = releasingAtEnd(new Response(readable), () => {
      void limiter.release(slot);
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    void writer.write(bytes("part"));
    await reader.read();
    await reader.cancel("client went away");
    // The producer writes on, as an origin still sending would: that write fails, and the
    // producer's stream is cancelled too (the pipe's shutdown), so it stops.
    await writer.write(bytes("more")).catch(() => {});
    expect(await releasedBy(key)).toBe(0);
    await expect(writer.closed).rejects.toBeDefined();
  });

  it("releases when the body fails mid-stream", async () => {
    const key = `fail-${crypto.randomUUID()}`;
    const slot = await takeSlot(key);
    const { readable, writer } = bodyOf();
    const res = releasingAtEnd(new Response(readable), () => {
      void limiter.release(slot);
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    void writer.write(bytes("part"));
    await reader.read();
    void writer.abort(new Error("origin broke off"));
    await expect(reader.read()).rejects.toBeDefined();
    expect(await releasedBy(key)).toBe(0);
  });
});
