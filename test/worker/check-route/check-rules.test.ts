import { describe, expect, it } from "vitest";
import { groupAddress } from "../../../src/net/ip-address";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { postCheck, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("check-rules");
const run = crypto.randomUUID().slice(0, 8);
const TOKEN = "test-limiter-token";

const LIMITER_CONFIG = JSON.stringify({
  prefix,
  // The store's counts and source are asserted: a busy machine's slow call must not make them
  // the fallback's.
  timeoutMs: 10_000,
  rules: [
    { name: "api", match: { path: "/api/*" }, limit: 3, window: "1m" },
    { name: "login", limit: 1, window: "10m", cost: 1 },
  ],
});
const worker = workerWith({ LIMITER_CONFIG });

describe("/check with configured rules", () => {
  it("uses the rule's limit and window, and shares the log the proxy writes for that key", async () => {
    const ip = "192.0.2.123";
    // The proxy counts one request of this client under rule "api"...
    const proxied = await worker(`/api/${run}`, { headers: { "CF-Connecting-IP": ip } });
    expect(proxied.headers.get("RateLimit")).toMatch(/^"api";r=2;/);
    // ...and /check, naming the same rule and key, sees it.
    const res = await postCheck(worker, { key: ip, rule: "api" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      allowed: true,
      limit: 3,
      remaining: 1,
      policy: "api",
    });
    expect(res.headers.get("RateLimit-Policy")).toBe('"api";q=3;w=60');
  });

  it('an "ip" rule groups an address key as the proxy does (IPv6 by /64), so both share one log', async () => {
    const net = `2001:db8:${run.slice(0, 4)}:${run.slice(4, 8)}`;
    const proxied = await worker(`/api/v6-${run}`, {
      headers: { "CF-Connecting-IP": `${net}::5` },
    });
    expect(proxied.headers.get("RateLimit")).toMatch(/^"api";r=2;/);
    // Another address of the same /64, through /check: the same client.
    const sibling = await postCheck(worker, { key: `${net}::77`, rule: "api" });
    expect(await sibling.json()).toMatchObject({ allowed: true, remaining: 1 });
    // The grouped form (what the README told callers to send) is still the same log.
    const grouped = groupAddress(`${net}::1`, { ipv4PrefixLength: 32, ipv6PrefixLength: 64 });
    const same = await postCheck(worker, { key: grouped, rule: "api" });
    expect(await same.json()).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("answers 400 naming the rule for an unknown rule, counting nothing", async () => {
    const res = await postCheck(worker, { key: `k-${run}`, rule: "nope" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { field: string; detail: string };
    expect(body.field).toBe("rule");
    // The detail lists the configured rules, so a typo shows.
    expect(body.detail).toMatch(/unknown rule "nope": the configured rules are "api", "login"$/);
    expect(await redis.keys(`${prefix}:*${run}*`)).toEqual([]);
  });

  it("is closed when no LIMITER_TOKEN is configured, whatever the caller sends", async () => {
    const open = workerWith({ LIMITER_CONFIG, LIMITER_TOKEN: undefined });
    for (const auth of [undefined, "Bearer ", "Bearer undefined", `Bearer ${TOKEN}`]) {
      const res = await open("/check", {
        method: "POST",
        headers: { "Content-Type": "application/json", ...(auth ? { Authorization: auth } : {}) },
        body: JSON.stringify({ key: `closed-${run}`, limit: 5, window: "1m" }),
      });
      expect(res.status, String(auth)).toBe(401);
      expect(res.headers.get("WWW-Authenticate")).toBe("Bearer");
    }
    expect(await redis.keys(`${prefix}:*closed-${run}*`)).toEqual([]);
  });
});

describe("admin: peek and reset", () => {
  it("reads a key's remaining quota without consuming it, then resets it", async () => {
    const key = `user-${run}`;
    const peekEmpty = await postCheck(worker, { key, rule: "login" }, { path: "/check/peek" });
    expect(peekEmpty.status).toBe(200);
    expect(await peekEmpty.json()).toMatchObject({
      allowed: true,
      limit: 1,
      remaining: 1,
      retryAfterMs: 0,
      source: "redis",
    });
    // The same headers as /check's answer.
    expect(peekEmpty.headers.get("RateLimit")).toMatch(/^"login";r=1;t=\d+$/);
    // Peeking twice consumed nothing: the real check is still allowed.
    expect((await postCheck(worker, { key, rule: "login" }, { path: "/check/peek" })).status).toBe(
      200,
    );
    expect((await postCheck(worker, { key, rule: "login" })).status).toBe(200);

    const peekFull = await postCheck(worker, { key, rule: "login" }, { path: "/check/peek" });
    const full = await peekFull.json<{
      allowed: boolean;
      remaining: number;
      retryAfterMs: number;
    }>();
    expect(full).toMatchObject({ allowed: false, remaining: 0 });
    expect(full.retryAfterMs).toBeGreaterThan(590_000);
    expect((await postCheck(worker, { key, rule: "login" })).status).toBe(429);
    // A denied check wrote nothing either: one member in the log.
    expect(await logCount(redis, `${prefix}:login:{${key}}`)).toBe(1);

    const reset = await postCheck(worker, { key, rule: "login" }, { path: "/check/reset" });
    expect(reset.status).toBe(200);
    expect(await reset.json()).toMatchObject({ reset: true, existed: true, policy: "login" });
    expect(await redis.exists(`${prefix}:login:{${key}}`)).toBe(0);
    expect((await postCheck(worker, { key, rule: "login" })).status).toBe(200);
  });

  it("reset forgets the key's request ids: the same requestId is decided afresh and counted", async () => {
    const key = `rid-${run}`;
    const body = { key, limit: 3, window: "1m", requestId: `req-${run}` };
    const first = await postCheck(worker, body);
    expect(await first.json()).toMatchObject({ allowed: true, remaining: 2 });
    expect(await (await postCheck(worker, body)).json()).toMatchObject({ replayed: true });
    await postCheck(worker, { key, limit: 3, window: "1m" });
    const reset = await postCheck(
      worker,
      { key, limit: 3, window: "1m" },
      { path: "/check/reset" },
    );
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    const again = await postCheck(worker, body);
    expect(again.status).toBe(200);
    const answer = await again.json<Record<string, unknown>>();
    expect(answer).toMatchObject({ allowed: true, remaining: 2 });
    expect(answer).not.toHaveProperty("replayed");
    expect(await logCount(redis, `${prefix}:check.60000ms.3:{${key}}`)).toBe(1);
  });

  it("peeks ad-hoc windows too, and sits behind the token", async () => {
    const key = `adhoc-${run}`;
    await postCheck(worker, { key, limit: 5, window: "1m", cost: 2 });
    const peek = await postCheck(
      worker,
      { key, limit: 5, window: "60s", cost: 4 },
      { path: "/check/peek" },
    );
    expect(await peek.json()).toMatchObject({ allowed: false, remaining: 3 });
    // Peek's remaining is the count before the request; the request itself leaves one less.
    const peekOne = await postCheck(
      worker,
      { key, limit: 5, window: "1m", cost: 1 },
      { path: "/check/peek" },
    );
    expect(await peekOne.json()).toMatchObject({ allowed: true, remaining: 3 });
    const checked = await postCheck(worker, { key, limit: 5, window: "1m", cost: 1 });
    expect(await checked.json()).toMatchObject({ allowed: true, remaining: 2 });
    expect(
      (
        await postCheck(
          worker,
          { key, limit: 5, window: "1m" },
          { path: "/check/peek", token: "wrong" },
        )
      ).status,
    ).toBe(401);
    expect(
      (
        await postCheck(
          worker,
          { key, limit: 5, window: "1m" },
          { path: "/check/reset", token: null },
        )
      ).status,
    ).toBe(401);
    expect(await logCount(redis, `${prefix}:check.60000ms.5:{${key}}`)).toBe(3);
  });

  it("peek and reset see a key that spells the digest prefix where /check counted it", async () => {
    // The limiter digests such a key (bounded-key.ts: so no key spells another's digest).
    const key = `#sha256:${run}`;
    const body = { key, limit: 5, window: "1m" };
    await postCheck(worker, body);
    await postCheck(worker, body);
    const peek = await postCheck(worker, body, { path: "/check/peek" });
    expect(await peek.json()).toMatchObject({ allowed: true, remaining: 3 });
    const reset = await postCheck(worker, body, { path: "/check/reset" });
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    expect(await (await postCheck(worker, body)).json()).toMatchObject({ remaining: 4 });
  });
});
