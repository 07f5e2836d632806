// The denial cache where shards meet, on real Redis (three shards behind three bridges): a client
// over its IP rate floods with a concurrency rule keyed by a shared API key. Its request's parts
// live on two shards; the IP part is known to deny, so no part may reach a store: neither the
// store calls on the API key's shard nor the slots the flood would hold for a moment there may
// exceed what one shard holding both rules costs. Control: both rules' keys on one shard.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { ConcurrencySlot, LimitRequest } from "../../../../src/limiter/types";
import { counting, storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardUrls } from "../../../support/worker/shard-stores";

const prefix = shardPrefix("shard-denials");

const FLOOD = 200;
const HOLDERS = 10;

/** One flood beside HOLDERS legitimate holders; the flood's IP on `floodShard`. */
async function flood(floodShard: string) {
  const counted = shardUrls().map((url) => counting(storeAt(url, 5_000)));
  const limiter = createLimiter({
    store: counted.map((c) => c.store),
    prefix,
    timeoutMs: 5_000,
    failMode: "closed",
  });
  const onShard = (shard: string, label: string) => {
    for (let i = 0; ; i++) {
      const key = `${label}-${crypto.randomUUID()}-${i}`;
      if (limiter.shardOf(key) === shard) return key;
    }
  };
  const apiKey = onShard("0", "api");
  const request = (ip: string): LimitRequest[] => [
    { policy: "den-ip", key: ip, limit: 5, windowMs: 60_000 },
    {
      policy: "den-api",
      key: apiKey,
      limit: HOLDERS,
      windowMs: 30_000,
      algorithm: "concurrency",
    },
  ];
  const floodIp = onShard(floodShard, "flood");
  // The flooding client spends its IP rate (each request ends at once), and is then denied.
  for (let i = 0; i < 5; i++) {
    const d = await limiter.limitAll(request(floodIp));
    expect(d.allowed).toBe(true);
    await limiter.release(d.slots ?? []);
  }
  expect((await limiter.limitAll(request(floodIp))).allowed).toBe(false);
  const holderIps = Array.from({ length: HOLDERS }, (_, i) => onShard(floodShard, `holder-${i}`));
  const before = counted[0]?.calls() ?? 0;
  const all = await Promise.all([
    ...Array.from({ length: FLOOD }, () => limiter.limitAll(request(floodIp))),
    ...holderIps.map((ip) => limiter.limitAll(request(ip))),
  ]);
  const callsOnApiShard = (counted[0]?.calls() ?? 0) - before;
  const holders = all.slice(FLOOD);
  const denied = holders.filter((d) => !d.allowed).length;
  expect(all.slice(0, FLOOD).every((d) => !d.allowed)).toBe(true);
  await limiter.release(holders.flatMap((d) => d.slots ?? []) as ConcurrencySlot[]);
  return { callsOnApiShard, denied };
}

describe("a request over two shards and the denial cache", () => {
  it("a flood denied by its IP part reaches no store: as cheap as on one shard, no holder denied", async () => {
    const oneShard = await flood("0");
    const twoShards = await flood("1");
    console.log(
      `flood of ${FLOOD} beside ${HOLDERS} holders: store calls on the API key's shard ` +
        `${twoShards.callsOnApiShard} over two shards (${oneShard.callsOnApiShard} on one), ` +
        `holders denied ${twoShards.denied} (${oneShard.denied} on one)`,
    );
    expect(oneShard.denied).toBe(0);
    expect(twoShards.denied).toBe(0);
    expect(twoShards.callsOnApiShard).toBeLessThanOrEqual(oneShard.callsOnApiShard);
  });
});
