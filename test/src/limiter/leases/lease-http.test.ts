/**
 * Leases through the surfaces (docs/leases.md): an ad-hoc /check with `"lease": true` and a
 * middleware rule with `lease: true`, each with the request's `waitUntil` (the execution
 * context's), against the real bridge and Redis. And what they refuse.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { digestHex } from "../../../../src/digest";
import { createLimiter, type RateLimitVariables, rateLimit } from "../../../../src/index";
import { storageKey } from "../../../../src/store/keys";
import app from "../../../../worker/worker";
import { readLog } from "../../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../../support/worker/redis";
import { baseEnv, postCheck } from "../../../support/worker/worker-harness";

const prefix = scopedPrefix("lease-http");
const env = {
  ...baseEnv,
  LIMITER_CONFIG: JSON.stringify({
    rules: [
      { name: "named", limit: 100, window: "1m", match: { path: "/never" } },
      {
        name: "proxied",
        match: { path: "/lease/*" },
        limit: 1_000,
        window: "10s",
        key: "header:x-client",
        lease: true,
      },
    ],
    prefix,
    timeoutMs: 5_000,
  }),
};

/** One request through the worker (the proxy); its background work is left running (`done`). */
async function proxied(client: string): Promise<{ status: number; done: Promise<unknown> }> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request("https://limited.test/lease/item", { headers: { "X-Client": client } }),
    env,
    ctx,
  );
  await res.arrayBuffer();
  return { status: res.status, done: waitOnExecutionContext(ctx) };
}

/** One POST /check, the background work it started awaited; its status and answer. */
async function check(body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await postCheck(env, body);
  return { status: res.status, json: await res.json<Record<string, unknown>>() };
}

describe("leases through /check and the middleware", () => {
  it('/check with "lease": true: a hot key is answered from the lease', async () => {
    // A 2 s window: 100 ms leases (the lease ends by a real timer, which waitOnExecutionContext waits for).
    const body = { key: `k-${crypto.randomUUID()}`, limit: 1_000, window: "2s", lease: true };
    const first = await Promise.all(Array.from({ length: 6 }, () => check(body)));
    expect(first.every((answer) => answer.status === 200)).toBe(true);
    const later = await check(body);
    expect(later).toMatchObject({ status: 200, json: { allowed: true, source: "lease" } });
    // Without the field, the same key is decided by the store.
    const { lease: _, ...plain } = body;
    expect((await check(plain)).json.source).toBe("redis");
  });

  it('/check refuses "lease" with an O(1) algorithm and beside a named rule, naming the field', async () => {
    const o1 = await check({
      key: "k",
      limit: 10,
      window: "1m",
      algorithm: "token-bucket",
      lease: true,
    });
    expect(o1.status).toBe(400);
    expect(o1.json).toMatchObject({ field: "lease" });
    expect(String(o1.json.detail)).toContain("sliding log only");
    const named = await check({ key: "k", rule: "named", lease: true });
    expect(named.status).toBe(400);
    expect(named.json).toMatchObject({ field: "lease" });
    const wrong = await check({ key: "k", limit: 10, window: "1m", lease: 1 });
    expect(wrong.json).toMatchObject({ field: "lease" });
  });

  it("a middleware rule with lease: true is answered from the lease, and the app sees it", async () => {
    const limiter = createLimiter({ store: testStore(5_000), prefix, timeoutMs: 5_000 });
    const hono = new Hono<{ Variables: RateLimitVariables }>();
    hono.use(
      rateLimit({
        limiter,
        rules: { name: "mw-lease", limit: 1_000, window: "2s", lease: true },
        key: () => "one",
      }),
    );
    hono.get("/", (c) => c.json(c.get("rateLimit").decisions[0]?.source));
    const call = async () => {
      const ctx = createExecutionContext();
      const res = await hono.fetch(new Request("https://app.test/"), {}, ctx);
      const source = await res.json();
      await waitOnExecutionContext(ctx);
      return { status: res.status, source, limit: res.headers.get("RateLimit") };
    };
    await Promise.all(Array.from({ length: 6 }, call));
    // The key is hot: a lease call started, and the lease answers. It lives an eighth of the
    // window (250 ms): on a busy machine it can end before the next call, and another is
    // taken. Asked until one answers (at most 30 calls).
    let later = await call();
    for (let i = 0; i < 30 && later.source !== "lease"; i++) later = await call();
    expect(later).toMatchObject({ status: 200, source: "lease" });
    expect(later.limit).toMatch(/^"mw-lease";r=\d+;t=\d+$/);
    await limiter.endLeases();
  });

  it("the proxy leases a rule with lease: true: its units are stamped ahead in the log", async () => {
    const client = `c-${crypto.randomUUID()}`;
    // A burst makes the key hot (the store decides it and a lease call starts); the next
    // request is paid from that lease (waiting for the call if it is still out).
    const burst = await Promise.all(Array.from({ length: 6 }, () => proxied(client)));
    const next = await proxied(client);
    for (const { status } of [...burst, next]) expect(status === 429 || status >= 500).toBe(false);
    // The lease ends on its timer and gives back what was unspent: 7 units stay, the last at
    // the lease's end, 500 ms (10 s / 20) after the store's now (the burst's are at its now).
    await Promise.all([...burst, next].map(({ done }) => done));
    // A "header:" key is the SHA-256 hex of the header (docs/proxy.md "Client keys").
    const key = storageKey(prefix, "proxied", await digestHex("SHA-256", client));
    const times = (await readLog(testRedis(), key)).times;
    expect(times.length).toBe(7);
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(400);
  });

  it("a middleware rule with lease: true and an O(1) algorithm is a 503 naming the field", async () => {
    const limiter = createLimiter({ store: testStore(5_000), prefix });
    const hono = new Hono();
    hono.use(
      rateLimit({
        limiter,
        rules: { name: "bad", limit: 10, window: "1m", algorithm: "fixed-window", lease: true },
      }),
    );
    hono.get("/", (c) => c.text("should not run"));
    const res = await hono.request("/");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field: "rules[0].lease" });
  });
});
