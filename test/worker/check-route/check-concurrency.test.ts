/**
 * /check with a concurrency rule and POST /check/release (docs/check-api.md): an allowed answer
 * carries its slot, a full set answers 429 with Retry-After 1 and the free slots in RateLimit, a
 * release gives the slot back (200) and an unknown, foreign or lapsed one is 404 and frees
 * nothing; bad input is a 400 naming the field.
 */
import { afterAll, describe, expect, it } from "vitest";
import { storageKey } from "../../../src/store/keys";
import { deleteKeys, testRedis, uniquePrefix } from "../../support/worker/redis";
import { type CheckPath, postCheck, workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = uniquePrefix("check-concurrency");
afterAll(async () => {
  await deleteKeys(redis, `${prefix}*`);
});
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    timeoutMs: 10_000,
    rules: [
      { name: "exports", algorithm: "concurrency", limit: 2, timeout: "30s", key: "header:x-user" },
      { name: "quick", algorithm: "concurrency", limit: 1, timeout: 1000 },
      { name: "api", limit: 100, window: "1m" },
    ],
  }),
});
const check = (body: unknown) => postCheck(worker, body);
const release = (body: unknown, token?: string | null) =>
  postCheck(worker, body, { path: "/check/release", token });
const run = crypto.randomUUID();

describe("POST /check with a concurrency rule", () => {
  it("hands out slots, refuses the full set with 429 and Retry-After 1, and takes them back", async () => {
    const key = `user-${run}`;
    const first = await check({ key, rule: "exports" });
    expect(first.status).toBe(200);
    const a = await first.json<Record<string, unknown>>();
    expect(a).toMatchObject({ allowed: true, limit: 2, remaining: 1, policy: "exports" });
    expect(typeof a.slot).toBe("string");
    expect(a.expires).toBeGreaterThan(Date.now() + 20_000);
    expect(first.headers.get("RateLimit")).toBe('"exports";r=1;t=0');

    const second = await check({ key, rule: "exports" });
    const b = await second.json<Record<string, unknown>>();
    expect(b.slot).not.toBe(a.slot);
    const full = await check({ key, rule: "exports" });
    expect(full.status).toBe(429);
    expect(full.headers.get("Retry-After")).toBe("1");
    // t is the Retry-After (docs/concurrency.md says so): no reset to name.
    expect(full.headers.get("RateLimit")).toBe('"exports";r=0;t=1');
    expect(await full.json()).toMatchObject({
      allowed: false,
      deniedBy: "exports",
      retryAfterMs: 1000,
    });

    const back = await release({ rule: "exports", key, slot: a.slot });
    expect(back.status).toBe(200);
    expect(await back.json()).toEqual({ released: true, rule: "exports", slot: a.slot });
    // Given back: the next check is admitted at once (no cached denial), and says 0 are free.
    const after = await check({ key, rule: "exports" });
    expect(after.status).toBe(200);
    expect(after.headers.get("RateLimit")).toBe('"exports";r=0;t=0');
    // Released twice: 404, and the set still holds the other two.
    const again = await release({ rule: "exports", key, slot: a.slot });
    expect(again.status).toBe(404);
    expect(again.headers.get("Content-Type")).toBe("application/problem+json");
    const c = await after.json<Record<string, unknown>>();
    for (const slot of [b.slot, c.slot]) {
      expect((await release({ rule: "exports", key, slot })).status).toBe(200);
    }
  });

  it("an unknown or another key's slot is 404 and frees nothing", async () => {
    const key = `owner-${run}`;
    const held = await (await check({ key, rule: "exports" })).json<{ slot: string }>();
    await check({ key, rule: "exports" });
    expect((await release({ rule: "exports", key, slot: "nope" })).status).toBe(404);
    expect((await release({ rule: "exports", key: `thief-${run}`, slot: held.slot })).status).toBe(
      404,
    );
    expect((await check({ key, rule: "exports" })).status).toBe(429);
    // The header rule keys its value as the proxy does (hashed): its set holds both slots.
    expect(await redis.keys(`${prefix}:exports/concurrency:*`)).toHaveLength(1);
  });

  it("a guessed slot id is 404 and frees nothing: a third request is still refused", async () => {
    const key = `guess-${run}`;
    const holder = await (await check({ key, rule: "exports" })).json<{ slot: string }>();
    const mine = await (await check({ key, rule: "exports" })).json<{ slot: string }>();
    // Ids were once an isolate's prefix (12 characters) and a base-36 counter: the holder
    // before me had my counter - 1 (or a little less, under other tests' traffic).
    const prefix12 = mine.slot.slice(0, 12);
    const counter = Number.parseInt(mine.slot.slice(12), 36);
    for (let d = 1; d <= 5; d++) {
      const slot = `${prefix12}${(counter - d).toString(36)}`;
      expect((await release({ rule: "exports", key, slot })).status).toBe(404);
    }
    expect((await check({ key, rule: "exports" })).status).toBe(429);
    expect(holder.slot.length).toBeGreaterThanOrEqual(16);
    for (const slot of [holder.slot, mine.slot]) {
      expect((await release({ rule: "exports", key, slot })).status).toBe(200);
    }
  });

  it("a slot not released lapses at its timeout: 404 for the release, room for the next", async () => {
    const key = `lapse-${run}`;
    const held = await (await check({ key, rule: "quick" })).json<{ slot: string }>();
    let next = await check({ key, rule: "quick" });
    const deadline = Date.now() + 10_000;
    while (next.status === 429 && Date.now() < deadline) {
      await redis.ping();
      next = await check({ key, rule: "quick" });
    }
    expect(next.status).toBe(200);
    expect((await release({ rule: "quick", key, slot: held.slot })).status).toBe(404);
    expect(await redis.zcard(storageKey(prefix, "quick", key, "concurrency"))).toBe(1);
  });

  it("with several rules: a rate rule beside the slot, both in one answer", async () => {
    const key = `multi-${run}`;
    const res = await check({ key, rules: ["api", "quick"] });
    expect(res.status).toBe(200);
    const body = await res.json<{ slot: string; slots: unknown[] }>();
    expect(body.slots).toEqual([{ rule: "quick", slot: body.slot, expires: expect.any(Number) }]);
    expect((await release({ rule: "quick", key, slot: body.slot })).status).toBe(200);
  });

  it("with a requestId, a retry gets the same slot and is counted once", async () => {
    const key = `rid-${run}`;
    const requestId = `rid-${run}`;
    const first = await (await check({ key, rule: "quick", requestId })).json<
      Record<string, unknown>
    >();
    const retry = await check({ key, rule: "quick", requestId });
    expect(retry.status).toBe(200);
    expect(await retry.json()).toMatchObject({
      replayed: true,
      slot: first.slot,
      expires: first.expires,
    });
    expect(await redis.zcard(storageKey(prefix, "quick", key, "concurrency"))).toBe(1);
    expect((await release({ rule: "quick", key, slot: first.slot })).status).toBe(200);
  });

  const bad: [CheckPath, string, unknown, string][] = [
    ["/check", "a cost but 1", { key: "k", rule: "exports", cost: 2 }, "cost"],
    [
      "/check",
      "an ad-hoc concurrency",
      { key: "k", algorithm: "concurrency", limit: 2, window: "1m" },
      "algorithm",
    ],
    ["/check/release", "no slot", { rule: "exports", key: "k" }, "slot"],
    ["/check/release", "an empty slot", { rule: "exports", key: "k", slot: "" }, "slot"],
    ["/check/release", "a rate rule", { rule: "api", key: "k", slot: "s" }, "rule"],
    ["/check/release", "an unknown rule", { rule: "nope", key: "k", slot: "s" }, "rule"],
    ["/check/release", "no key", { rule: "exports", slot: "s" }, "key"],
    [
      "/check/release",
      "an unknown field",
      { rule: "exports", key: "k", slot: "s", cost: 1 },
      "cost",
    ],
  ];
  for (const [path, what, body, field] of bad) {
    it(`${path} refuses ${what} with 400 naming ${field}`, async () => {
      const res = await postCheck(worker, body, { path });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ field });
    });
  }

  it("GET /check/stats counts each concurrency rule's slots in flight over every key", async () => {
    const stats = async () => {
      const res = await worker("/check/stats", {
        headers: { Authorization: "Bearer test-admin-token" },
      });
      expect(res.status).toBe(200);
      const body = await res.json<{
        inFlight: { policy: string; inFlight: number; keys: number }[];
      }>();
      return body.inFlight.find((r) => r.policy === "exports");
    };
    const before = (await stats())?.inFlight ?? 0;
    const a = await (await check({ key: `stats-a-${run}`, rule: "exports" })).json<{
      slot: string;
    }>();
    await check({ key: `stats-b-${run}`, rule: "exports" });
    expect((await stats())?.inFlight).toBe(before + 2);
    await release({ rule: "exports", key: `stats-a-${run}`, slot: a.slot });
    expect((await stats())?.inFlight).toBe(before + 1);
  });

  it("/check/release takes the /check token", async () => {
    const body = { rule: "exports", key: "k", slot: "s" };
    expect((await release(body, null)).status).toBe(401);
    expect((await release(body, "wrong")).status).toBe(401);
  });
});
