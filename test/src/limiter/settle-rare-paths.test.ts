// limiter.settle of a weighted log where its one-BITFIELD fast path (the receipt's offset) does
// not hold (src/store/lua/weighted-settle.lua.ts): the entry moved, left, was refunded or reset
// away, the receipt has no offset, the log is still v1. Each on the real store through the
// bridge, on a fake clock, asserting the status, the charge, the log's sum (through a later
// admission's `remaining`) and that no key is left without a TTL.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { CountedReceipt } from "../../../src/limiter/receipt-state";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { HEADER_BYTES, logEntries, logHeader, v1Log } from "../../support/worker/weighted-layout";

const prefix = scopedPrefix("settle-rare");
const clock = manualClock();
const redis = testRedis();
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });
const LIMIT = 1_000_000;

const tokens = (key: string, cost: number): LimitRequest => ({
  policy: "tokens",
  key,
  limit: LIMIT,
  windowMs: 60_000,
  cost,
  algorithm: "sliding-log-weighted",
});
const keyOf = (key: string) => storageKey(prefix, "tokens", key, "sliding-log-weighted");

async function admit(key: string, cost: number): Promise<CountedReceipt> {
  const decided = await limiter.limitAll([tokens(key, cost)]);
  expect(decided.allowed).toBe(true);
  return decided.receipt as CountedReceipt;
}

/** The units the log holds, as the next admission (of 1, refunded at once) sees them. */
async function held(key: string): Promise<number> {
  const decided = await limiter.limitAll([tokens(key, 1)]);
  await limiter.refund(decided.receipt as RefundReceipt);
  return LIMIT - 1 - (decided.decisions[0]?.remaining ?? 0);
}

/** No key of the log without a TTL: gone, or expiring; v2 with nothing after its entries. */
async function tidy(key: string): Promise<void> {
  const ttl = await redis.pttl(keyOf(key));
  expect(ttl === -2 || ttl > 0, `PTTL ${ttl}`).toBe(true);
  if (ttl === -2) return;
  const header = await logHeader(redis, keyOf(key));
  expect(header.magic).toBe(true);
  expect(await redis.strlen(keyOf(key))).toBe(HEADER_BYTES + header.end);
}

describe("settle of a weighted log off its fast path", () => {
  it("settles a receipt whose offset is right in one go, and a second time answers 409", async () => {
    await admit("twice", 5);
    const receipt = await admit("twice", 100);
    expect(receipt.offsets?.[0]).toBeGreaterThan(0);
    expect(await limiter.settle(receipt, 30)).toMatchObject({ status: "settled", charged: [-70] });
    expect(await limiter.settle(receipt, 90)).toMatchObject({
      status: "already-settled",
      charged: [0],
    });
    expect(await held("twice")).toBe(35);
    await tidy("twice");
  });

  it("writes nothing in one log when another of the request's was settled before", async () => {
    const day = { ...tokens("both", 100), policy: "tokens-day", windowMs: 86_400_000 };
    const decided = await limiter.limitAll([tokens("both", 100), day]);
    const receipt = decided.receipt as CountedReceipt;
    expect(await limiter.settle(receipt, { "tokens-day": 20 })).toMatchObject({
      status: "settled",
      charged: [-80],
    });
    // The minute's fast path writes its entry, then the day's says settled: written back.
    expect(await limiter.settle(receipt, 500)).toMatchObject({
      status: "already-settled",
      charged: [0, 0],
    });
    expect(await held("both")).toBe(100);
    expect(await limiter.settle(receipt, { tokens: 50 })).toMatchObject({ charged: [-50] });
    expect(await held("both")).toBe(50);
    await tidy("both");
  });

  it("finds an entry a compaction moved, settles it once, and leaves the log its length", async () => {
    // 120 entries (~5 kB) leave the window together: the next admission writes the live ones
    // whole, and the one to settle moves from past them to the front.
    for (let i = 0; i < 120; i++) await admit("moved", 1);
    clock.advance(1_000);
    const receipt = await admit("moved", 100);
    clock.advance(59_500);
    await admit("moved", 7);
    expect((await logHeader(redis, keyOf("moved"))).start).toBe(0);
    expect(await logEntries(redis, keyOf("moved"))).toMatch(
      new RegExp(`^${receipt.memberId},\\d{13},0000000000100,r;`),
    );
    expect(await limiter.settle(receipt, 40)).toMatchObject({ status: "settled", charged: [-60] });
    await tidy("moved");
    expect(await limiter.settle(receipt, 40)).toMatchObject({
      status: "already-settled",
      charged: [0],
    });
    expect(await held("moved")).toBe(47);
    await tidy("moved");
  });

  it("answers unknown after a reset, and leaves no key without a TTL", async () => {
    const receipt = await admit("reset", 100);
    await limiter.reset(tokens("reset", 100));
    expect(await limiter.settle(receipt, 500)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await redis.exists(keyOf("reset"))).toBe(0);
    // Reset, then a new log whose first entry sits where the old one did: not this request's.
    const again = await admit("reset", 100);
    await limiter.reset(tokens("reset", 100));
    const other = await admit("reset", 20);
    expect(other.offsets).toEqual(again.offsets);
    expect(await limiter.settle(again, 500)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await held("reset")).toBe(20);
    await tidy("reset");
  });

  it("answers unknown for an entry that left the window, its bytes still in the log", async () => {
    const receipt = await admit("left", 100);
    clock.advance(60_000);
    await admit("left", 10);
    expect(await logEntries(redis, keyOf("left"))).toMatch(
      new RegExp(`^${receipt.memberId},\\d{13},0000000000100,r;`),
    );
    expect(await limiter.settle(receipt, 500)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await logEntries(redis, keyOf("left"))).toMatch(/^[^;]*,0000000000100,r;/);
    expect(await held("left")).toBe(10);
    await tidy("left");
  });

  it("answers unknown for a refunded request", async () => {
    const receipt = await admit("refunded", 100);
    await admit("refunded", 3);
    expect(await limiter.refund(receipt)).toMatchObject({ refunded: true });
    expect(await limiter.settle(receipt, 50)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await held("refunded")).toBe(3);
    await tidy("refunded");
  });

  it("settles a receipt without offsets (issued before them) by searching the log", async () => {
    const receipt = await admit("old-receipt", 100);
    await admit("old-receipt", 3);
    const { offsets: _, ...old } = receipt;
    expect(await limiter.settle(old, 250)).toMatchObject({ status: "settled", charged: [150] });
    expect(await limiter.settle(old, 250)).toMatchObject({ status: "already-settled" });
    expect(await held("old-receipt")).toBe(253);
    await tidy("old-receipt");
  });

  it("keeps a v1 log exact through its refund, its settle and its conversion", async () => {
    const now = clock.now();
    // The log as the v1 code left it, with three requests it admitted then.
    const entries = [
      { member: "v1a", at: now - 3_000, units: 100, state: "r" as const },
      { member: "v1b", at: now - 2_000, units: 200, state: "r" as const },
      { member: "v1c", at: now - 1_000, units: 300, state: "r" as const },
    ];
    await redis.set(keyOf("v1"), v1Log(entries, now + 120_000), { px: 120_000 });
    // Their receipts had no offsets: made from a fresh one, its member, cost and key swapped.
    const fresh = await admit("v1-template", 100);
    const of = (memberId: string, cost: number): CountedReceipt => ({
      ...fresh,
      memberId,
      costs: [cost],
      resolved: [
        {
          ...(fresh.resolved[0] as CountedReceipt["resolved"][number]),
          cost,
          clientKey: "v1",
          redisKey: keyOf("v1"),
        },
      ],
      offsets: [-1],
    });
    // On v1: a settle and a refund rewrite it in place (still v1).
    expect(await limiter.settle(of("v1a", 100), 150)).toMatchObject({
      status: "settled",
      charged: [50],
    });
    expect(await limiter.refund(of("v1b", 200))).toMatchObject({ refunded: true });
    expect((await logHeader(redis, keyOf("v1"))).magic).toBe(false);
    // An admission writes it whole as v2: 150 + 300 + 40 held.
    const next = await admit("v1", 40);
    expect((await logHeader(redis, keyOf("v1"))).magic).toBe(true);
    expect((await logHeader(redis, keyOf("v1"))).sum).toBe(490);
    // Its entries settle exactly once after the conversion, old and new.
    expect(await limiter.settle(of("v1c", 300), 0)).toMatchObject({
      status: "settled",
      charged: [-300],
    });
    expect(await limiter.settle(of("v1a", 100), 0)).toMatchObject({
      status: "already-settled",
    });
    expect(await limiter.settle(of("v1b", 200), 0)).toMatchObject({
      status: "unknown",
    });
    expect(await limiter.settle(next, 10)).toMatchObject({ status: "settled", charged: [-30] });
    expect(await held("v1")).toBe(160);
    await tidy("v1");
  });
});

describe("receipts the limiter did not make, and a refund after a settle", () => {
  it("refuses a member id holding a log's separators: nothing patched, the sum stays its entries'", async () => {
    const a = await admit("forged", 1000);
    clock.advance(1);
    const b = await admit("forged", 1);
    // A member id spanning A's entry into B's: a search would match A and patch B.
    const forged = `${a.memberId}.1,0000000000000,0000000001000,r;${b.memberId}.1`;
    const hand = { ...a, memberId: forged, offsets: undefined } as unknown as CountedReceipt;
    expect(await limiter.settle(hand, 1000)).toMatchObject({ status: "failed" });
    expect(await limiter.refund(hand)).toMatchObject({ refunded: false });
    expect(await held("forged")).toBe(1001);
    await tidy("forged");
  });

  it("a settled entry gives nothing back to a refund, as a settled count does", async () => {
    const key = `both-${crypto.randomUUID()}`;
    const weighted = tokens(key, 50);
    const fixed: LimitRequest = {
      ...weighted,
      policy: "fixed",
      algorithm: "fixed-window",
      usage: true,
    };
    const receipt = (await limiter.limitAll([weighted, fixed])).receipt as RefundReceipt;
    expect(await limiter.settle(receipt, 20)).toMatchObject({
      status: "settled",
      charged: [-30, -30],
    });
    expect(await limiter.refund(receipt)).toMatchObject({ units: [0, 0] });
    expect(await held(key)).toBe(20);
  });
});
