/**
 * The proxy with a concurrency rule (docs/concurrency.md): a slot is held until the origin's
 * answer has been delivered to the client, or the client went away, or the origin failed; the
 * origin never sees more than the limit in flight for a key, and no slot is leaked.
 */
import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { originUrl, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("proxy-concurrency");
const run = crypto.randomUUID().slice(0, 8);
const config = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    prefix,
    timeoutMs: 10_000,
    rules: [
      {
        name: "slow-slots",
        match: { path: ["/slow/*", "/stream/*", "/status/*"] },
        algorithm: "concurrency",
        limit: 3,
        timeout: "30s",
        key: "header:x-user",
      },
      { name: "slow-rate", match: { path: "/slow/*" }, limit: 10_000, window: "1m", key: "ip" },
    ],
    ...extra,
  });
// Two runtimes of the worker, each with its own limiter (as two isolates would have).
const workers = [
  workerWith({ LIMITER_CONFIG: config() }),
  workerWith({ LIMITER_CONFIG: config({ timeoutMs: 9_000 }) }),
];
const worker = workers[0] as (typeof workers)[number];
const user = (name: string) => ({ "x-user": `${name}-${run}`, "CF-Connecting-IP": "198.51.100.7" });

/** The slots held for a user: the header rule keys the hashed value, so read every such set. */
async function heldSlots(): Promise<number> {
  const keys = await redis.keys(`${prefix}:slow-slots/concurrency:*`);
  let held = 0;
  for (const key of keys) held += await redis.zcount(key, Date.now(), "+inf");
  return held;
}

/** Polls (bounded) until no slot is held: a release runs off the request path. */
async function allReleased(): Promise<number> {
  const deadline = Date.now() + 10_000;
  let held = await heldSlots();
  while (held > 0 && Date.now() < deadline) {
    await redis.ping();
    held = await heldSlots();
  }
  return held;
}

describe("proxy: a concurrency rule", () => {
  it("never lets the origin see more than the limit in flight, and releases every slot", async () => {
    const group = `g-${run}`;
    const results = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const res = await (workers[i % 2] as typeof worker)(`/slow/${group}/${i}`, {
          headers: user("burst"),
        });
        const text = await res.text();
        return { status: res.status, text, retryAfter: res.headers.get("Retry-After") };
      }),
    );
    const ok = results.filter((r) => r.status === 200);
    const refused = results.filter((r) => r.status === 429);
    expect(ok.length + refused.length).toBe(30);
    expect(ok.length).toBeGreaterThanOrEqual(3);
    for (const r of ok) expect(r.text).toContain("chunk 4");
    for (const r of refused) {
      expect(r.retryAfter).toBe("1");
      expect(JSON.parse(r.text)).toMatchObject({ status: 429 });
    }
    const seen = await (await fetch(`${originUrl()}/__inflight?group=${group}`)).json<{
      most: number;
    }>();
    expect(seen.most).toBeGreaterThan(0);
    expect(seen.most).toBeLessThanOrEqual(3);
    expect(await allReleased()).toBe(0);
  });

  it("holds the slot until the body is delivered: a full set refuses meanwhile", async () => {
    const id = `held-${run}`;
    const holders = [];
    for (let i = 0; i < 3; i++)
      holders.push(await worker(`/stream/${id}-${i}`, { headers: user("held") }));
    for (const res of holders) expect(res.status).toBe(200);
    // The origin has not finished any of the three: the fourth is refused, naming the rule.
    const fourth = await worker(`/stream/${id}-3`, { headers: user("held") });
    expect(fourth.status).toBe(429);
    expect(await fourth.json()).toMatchObject({ violated: ["slow-slots"] });
    expect(fourth.headers.get("RateLimit")).toMatch(/^"slow-slots";r=0;/);
    for (let i = 0; i < 3; i++) await fetch(`${originUrl()}/release/${id}-${i}`);
    for (const res of holders) expect(await res.text()).toBe("first\nrest\n");
    expect(await allReleased()).toBe(0);
    // A slot is free again: the next request is admitted, and holds its slot until its body
    // has been read.
    const next = await worker(`/stream/${id}-4`, { headers: user("held") });
    expect(next.status).toBe(200);
    await fetch(`${originUrl()}/release/${id}-4`);
    expect(await heldSlots()).toBe(1);
    expect(await next.text()).toBe("first\nrest\n");
    expect(await allReleased()).toBe(0);
  });

  it("releases the slot when the client cancels mid-body", async () => {
    const id = `cancel-${run}`;
    const res = await worker(`/stream/${id}`, { headers: user("cancel") });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe("first\n");
    expect(await heldSlots()).toBe(1);
    // The client goes away before the origin has finished. workerd's own stream carries the
    // body (release-at-end.ts): the pipe into it fails, and the slot goes back, when the
    // origin's next chunk finds no reader.
    await reader.cancel("client went away");
    await fetch(`${originUrl()}/release/${id}`);
    expect(await allReleased()).toBe(0);
  });

  it("releases the slot when the origin fails, and for a bodiless answer", async () => {
    const dead = workerWith({ LIMITER_CONFIG: config(), ORIGIN_URL: "http://127.0.0.1:9" });
    const failed = await dead(`/slow/dead-${run}`, { headers: user("dead") });
    expect(failed.status).toBe(502);
    await failed.text();
    expect(await allReleased()).toBe(0);
    const empty = await worker(`/status/204`, { headers: user("empty") });
    expect(empty.status).toBe(204);
    expect(await allReleased()).toBe(0);
  });
});
