// Request ids where shards meet, on real Redis (three shards behind three bridges), on the
// caller clock the test moves: a retry during a reshard's transition, and a retry of a request
// whose parts live on two shards with different windows. A retry of an admitted request is
// replayed, and counts nothing anywhere.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { LimitRequest } from "../../../../src/limiter/types";
import { requestRecordKey, storageKey } from "../../../../src/store/keys";
import { manualClock, storeAt } from "../../../support/worker/fault-control";
import { logCount } from "../../../support/worker/log-state";
import { shardPrefix, shardRedis, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("shard-records");
const redis = shardRedis();

function limiterOn(clock: ReturnType<typeof manualClock>, reshardAt?: number) {
  const urls = shardUrls();
  return createLimiter({
    store: urls.map((url) => storeAt(url, 2_000)),
    prefix,
    timeoutMs: 2_000,
    failMode: "closed",
    clock: "caller",
    now: clock.now,
    denialCache: false,
    ...(reshardAt === undefined ? {} : { reshard: { from: ["0", "1"], at: reshardAt } }),
  });
}

describe("request ids across a reshard", () => {
  it("a retry during the transition is replayed, though the old shard's count fell since", async () => {
    const clock = manualClock();
    const at = clock.now() + 5_000;
    const limiter = limiterOn(clock, at);
    let key = "";
    for (let i = 0; key === ""; i++) {
      const candidate = `moved-${crypto.randomUUID()}-${i}`;
      if (limiter.shardOf(candidate, at - 1) !== limiter.shardOf(candidate, at)) key = candidate;
    }
    const request: LimitRequest = { policy: "rec-moved", key, limit: 10, windowMs: 10_000 };
    // 4 units on the old shard just before the instant.
    clock.set(at - 1_000);
    for (let i = 0; i < 4; i++) expect((await limiter.limit(request)).allowed).toBe(true);
    // After the settle interval: decided on the new shard with 10 - 4 = 6.
    clock.set(at + 2_500);
    const requestId = `rid-${crypto.randomUUID()}`;
    const first = await limiter.limitAll([request], { requestId });
    expect(first).toMatchObject({ allowed: true, replayed: false });
    expect(first.decisions[0]).toMatchObject({ limit: 10, remaining: 5 });
    // The old shard's units leave the window: what the router derives is now 10, not 6.
    clock.set(at + 9_500);
    const retry = await limiter.limitAll([request], { requestId });
    expect(retry.conflict).toBeUndefined();
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    expect(retry.decisions[0]).toMatchObject({ limit: 10, remaining: 5 });
    const newShard = Number(limiter.shardOf(key, at));
    // Denied as a whole by a part on another shard: the moved part's refund, with the request
    // id, matches its record (fingerprinted alike) and gives its unit back.
    let other = "";
    for (let i = 0; other === ""; i++) {
      const candidate = `other-${crypto.randomUUID()}-${i}`;
      if (Number(limiter.shardOf(candidate, at)) !== newShard) other = candidate;
    }
    const tight: LimitRequest = { policy: "rec-tight", key: other, limit: 1, windowMs: 10_000 };
    expect((await limiter.limit(tight)).allowed).toBe(true);
    const deniedId = `rid-${crypto.randomUUID()}`;
    const whole = await limiter.limitAll([request, tight], { requestId: deniedId });
    expect(whole).toMatchObject({ allowed: false, deniedBy: "rec-tight" });
    expect(whole.decisions[0]).toMatchObject({ allowed: true, remaining: 9 });
    const movedLog = storageKey(prefix, "rec-moved", key);
    expect(await logCount(redis[newShard] as (typeof redis)[0], movedLog)).toBe(1);
    expect(
      await logCount(redis[newShard] as (typeof redis)[0], storageKey(prefix, "rec-moved", key)),
    ).toBe(1);
  });
});

describe("request ids over two shards", () => {
  it("a retry is replayed when the original was admitted, though one part's record is gone", async () => {
    // The Redis clock: a record lives for its window in Redis's time, which no test clock moves.
    const limiter = createLimiter({
      store: shardUrls().map((url) => storeAt(url, 2_000)),
      prefix,
      timeoutMs: 2_000,
      failMode: "closed",
      denialCache: false,
    });
    const onShard = (shard: string, label: string) => {
      for (let i = 0; ; i++) {
        const key = `${label}-${crypto.randomUUID()}-${i}`;
        if (limiter.shardOf(key) === shard) return key;
      }
    };
    const a = onShard("0", "short");
    const b = onShard("1", "long");
    const short: LimitRequest = { policy: "rec-short", key: a, limit: 1, windowMs: 1_000 };
    const long: LimitRequest = { policy: "rec-long", key: b, limit: 5, windowMs: 60_000 };
    const free = async () => {
      const peeked = await limiter.peek(short);
      return peeked.peeked && peeked.allowed;
    };
    const requestId = `rid-${crypto.randomUUID()}`;
    const first = await limiter.limitAll([short, long], { requestId });
    expect(first).toMatchObject({ allowed: true, replayed: false });
    // The short part's window, and its record, end (polled, not slept); the long part's stay.
    const shardA = redis[0] as (typeof redis)[0];
    const record = requestRecordKey([storageKey(prefix, "rec-short", a)], requestId);
    await until(async () => (await shardA.exists(record)) === 0);
    await until(free);
    // Another request takes the short rule's only unit.
    expect((await limiter.limit(short)).allowed).toBe(true);
    const retry = await limiter.limitAll([short, long], { requestId });
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    expect(retry.receipt).toBeUndefined();
    expect(await logCount(redis[1] as (typeof redis)[0], storageKey(prefix, "rec-long", b))).toBe(
      1,
    );
    // Retried again at once: the short part, decided afresh above, recorded its denial for the
    // wait; the long part still replays the admission, so the retry is replayed again.
    const second = await limiter.limitAll([short, long], { requestId });
    expect(second).toMatchObject({ allowed: true, replayed: true });
    expect(second.decisions.map((decision) => decision.allowed)).toEqual([true, true]);
    // Once the short rule has room again, the retry's part there admits afresh: given back, so
    // the retry still counts nothing.
    await until(free);
    const again = await limiter.limitAll([short, long], { requestId });
    expect(again).toMatchObject({ allowed: true, replayed: true });
    expect(await limiter.peek(short)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await logCount(redis[1] as (typeof redis)[0], storageKey(prefix, "rec-long", b))).toBe(
      1,
    );
  });
});

/** Polls `done` until it holds (at most 10 s). */
async function until(done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error("condition not reached within 10 s");
  }
}
