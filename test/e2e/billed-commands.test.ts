import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureEnv } from "../../tools/measure-env.mjs";

// What Upstash bills per decision (the EVALSHA and every command the script runs), per traffic
// shape, through the real limiter, the real @upstash/redis client and the REST bridge, counted by
// INFO commandstats on a private redis-server. The answers stay right when a change adds a read,
// so only counting catches it: these pin the shapes of `npm run bench`'s billed-commands table
// (bench/README.md) at the script's floor. Every shape gets fresh keys; the denial cache is on,
// as deployed.
type Env = Awaited<ReturnType<typeof measureEnv>>;
let env: Env;
// biome-ignore lint/suspicious/noExplicitAny: the bundled src/index.ts, typed by its own tests
let lib: any;
let run = 0;

beforeAll(async () => {
  env = await measureEnv();
  lib = await env.bundle(`export * from "./src/index";`);
}, 60_000);
afterAll(async () => {
  await env?.close();
});

interface Tally {
  perDecision: number;
  byCommand: Record<string, number>;
  allowed: number;
  denied: number;
}

/**
 * Billed commands per decision while `keys` (one request each, in order) are decided against
 * `limit` a minute. A first call (not counted) loads the script, so a NOSCRIPT's EVAL is not
 * part of a shape.
 */
async function billed(
  keys: readonly string[],
  limit: number,
  clock: "redis" | "caller" = "redis",
  overrides = false,
  /** Before counting: what the admin sets (overrides, blocks), through the limiter. */
  // biome-ignore lint/suspicious/noExplicitAny: the bundled limiter
  setup?: (limiter: any) => Promise<void>,
): Promise<Tally> {
  const bridge = env.bridge as { url: string };
  const store = lib.createStoreClient({ url: bridge.url, token: env.token, timeoutMs: 5_000 });
  const prefix = `billed${run++}`;
  const limiter = lib.createLimiter({ store, prefix, clock });
  await limiter.limit({ policy: "warm", key: "warm", limit: 10, windowMs: 60_000, overrides });
  await setup?.(limiter);
  env.cli("CONFIG", "RESETSTAT");
  let allowed = 0;
  for (const key of keys) {
    const decision = await limiter.limit({
      policy: "shape",
      key,
      limit,
      windowMs: 60_000,
      overrides,
    });
    if (decision.allowed) allowed++;
  }
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const line of env.cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (!match?.[1] || /^(info|config)/.test(match[1])) continue;
    byCommand[match[1]] = Number(match[2]) / keys.length;
    total += Number(match[2]);
  }
  return {
    perDecision: total / keys.length,
    byCommand,
    allowed,
    denied: keys.length - allowed,
  };
}

/** `perKey` requests to each of `keys` keys, interleaved. */
const interleaved = (tag: string, keys: number, perKey: number) =>
  Array.from({ length: keys * perKey }, (_, i) => `${tag}:${i % keys}`);

describe("billed commands per decision, Redis clock (EVALSHA + TIME + one read + one write)", () => {
  for (const limit of [10, 100, 1_000, 10_000, 100_000]) {
    it(`sparse (40 keys × 5, far under the limit) at ${limit}: 4 each`, async () => {
      const tally = await billed(interleaved(`sparse${limit}`, 40, 5), limit);
      expect(tally.allowed).toBe(200);
      // A new key's first write is a SET with its TTL; later ones one SETRANGE: never a PEXPIRE.
      expect(tally.perDecision, JSON.stringify(tally.byCommand)).toBe(4);
      expect(tally.byCommand.time).toBe(1);
      expect(tally.byCommand.pexpire).toBeUndefined();
    });
  }

  for (const limit of [10, 100, 1_000]) {
    it(`busy (2 keys driven to 1.5 × the limit) at ${limit}: 4 an admission, denials free`, async () => {
      const tally = await billed(interleaved(`busy${limit}`, 2, Math.round(1.5 * limit)), limit);
      expect(tally.allowed).toBe(2 * limit);
      // Each key: limit admissions at 4. The last one said none were left, until when: the
      // isolate's denial cache answers every denial after it, with no round trip.
      expect(tally.perDecision * 3 * limit).toBeCloseTo(2 * 4 * limit, 6);
    });
  }

  it("flood (one key at 20 × a limit of 50): the store sees the admissions only", async () => {
    const tally = await billed(interleaved("flood", 1, 1_000), 50);
    expect(tally.allowed).toBe(50);
    expect(tally.perDecision * 1_000).toBeCloseTo(4 * 50, 6);
  });
});

describe("billed commands per decision, the caller's clock (no TIME)", () => {
  it("sparse at 1 000 and 100 000: 3 each", async () => {
    for (const limit of [1_000, 100_000]) {
      const tally = await billed(interleaved(`csparse${limit}`, 40, 5), limit, "caller");
      expect(tally.perDecision, JSON.stringify(tally.byCommand)).toBe(3);
      expect(tally.byCommand.time).toBeUndefined();
    }
  });
});

describe("billed commands per decision with plans (docs/plans.md): one HMGET more, only when opted in", () => {
  it("sparse at 1 000 with overrides: true: 5 each (4 + the HMGET), with or without overrides stored", async () => {
    const plain = await billed(interleaved("osparse", 40, 5), 1_000, "redis", true);
    expect(plain.perDecision, JSON.stringify(plain.byCommand)).toBe(5);
    expect(plain.byCommand.hmget).toBe(1);
    const stored = await billed(
      interleaved("ostored", 40, 5),
      1_000,
      "redis",
      true,
      async (limiter) => {
        for (let i = 0; i < 40; i++) {
          await limiter.overrides.set("shape", `ostored:${i}`, { limit: 2_000 });
        }
      },
    );
    expect(stored.perDecision, JSON.stringify(stored.byCommand)).toBe(5);
  });

  it("a blocked key costs the EVALSHA, TIME and the HMGET, and nothing is written", async () => {
    const tally = await billed(
      interleaved("oblocked", 4, 5),
      100,
      "redis",
      true,
      async (limiter) => {
        for (let i = 0; i < 4; i++)
          await limiter.blocks.add({ policy: "shape", key: `oblocked:${i}` });
      },
    );
    expect(tally.allowed).toBe(0);
    // The first refusal of each key reaches the store (3); the isolate answers the next 4 from
    // its memory of the block (at most 1 s) with none.
    expect(tally.perDecision * 20).toBeCloseTo(4 * 3, 6);
    expect(Object.keys(tally.byCommand).sort()).toEqual(["evalsha", "hmget", "time"]);
  });
});

describe("billed commands of a concurrency slot (docs/concurrency.md)", () => {
  /** Commands counted while `run` runs on a fresh limiter, after the scripts are loaded. */
  // biome-ignore lint/suspicious/noExplicitAny: the bundled limiter
  async function counted(body: (limiter: any, prefix: string) => Promise<void>) {
    const bridge = env.bridge as { url: string };
    const store = lib.createStoreClient({ url: bridge.url, token: env.token, timeoutMs: 5_000 });
    const prefix = `billed${run++}`;
    const limiter = lib.createLimiter({ store, prefix });
    const warm = await limiter.limit({ ...slot, key: "warm" });
    await limiter.release(warm.slot);
    env.cli("CONFIG", "RESETSTAT");
    await body(limiter, prefix);
    const byCommand: Record<string, number> = {};
    for (const line of env.cli("INFO", "commandstats").split("\n")) {
      const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
      if (!match?.[1] || /^(info|config)/.test(match[1])) continue;
      byCommand[match[1]] = Number(match[2]);
    }
    return byCommand;
  }
  const slot = { policy: "slots", limit: 1, windowMs: 30_000, algorithm: "concurrency" };

  it("acquire 6 (EVALSHA, TIME, trim, count, ZADD, PEXPIRE), release 4, a full set's denial 4", async () => {
    let held: unknown;
    const acquire = await counted(async (limiter) => {
      held = (await limiter.limit({ ...slot, key: "a" })).slot;
    });
    expect(acquire).toEqual({
      evalsha: 1,
      time: 1,
      zremrangebyscore: 1,
      zcard: 1,
      zadd: 1,
      pexpire: 1,
    });
    const denied = await counted(async (limiter) => {
      await limiter.limit({ ...slot, key: "b" });
      env.cli("CONFIG", "RESETSTAT");
      expect((await limiter.limit({ ...slot, key: "b" })).allowed).toBe(false);
    });
    expect(denied).toEqual({ evalsha: 1, time: 1, zremrangebyscore: 1, zcard: 1 });
    const release = await counted(async (limiter) => {
      expect((await limiter.release(held)).released).toEqual([false]);
    });
    // Another limiter's prefix: not there (ZSCORE only).
    expect(release).toEqual({ evalsha: 1, time: 1, zscore: 1 });
    const own = await counted(async (limiter) => {
      const mine = (await limiter.limit({ ...slot, key: "c" })).slot;
      env.cli("CONFIG", "RESETSTAT");
      expect((await limiter.release(mine)).released).toEqual([true]);
    });
    expect(own).toEqual({ evalsha: 1, time: 1, zscore: 1, zrem: 1 });
  });
});

/** The commands `body` made Redis run, by name. */
async function counted(body: () => Promise<void>): Promise<Record<string, number>> {
  env.cli("CONFIG", "RESETSTAT");
  await body();
  const byCommand: Record<string, number> = {};
  for (const line of env.cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (!match?.[1] || /^(info|config)/.test(match[1])) continue;
    byCommand[match[1]] = Number(match[2]);
  }
  return byCommand;
}

describe("billed commands of a usage request (docs/usage.md): admission, then settle", () => {
  const tokens = {
    policy: "tokens",
    limit: 1_000_000_000,
    windowMs: 60_000,
    cost: 1_000,
    algorithm: "sliding-log-weighted",
  };
  const month = {
    policy: "tokens-month",
    limit: 5_000_000,
    windowMs: 0,
    cost: 4_000,
    algorithm: "calendar",
    period: { unit: "month", timezone: "UTC" },
    usage: true,
  };
  /** A limiter of its own prefix on the bridge, on the Redis clock. */
  const freshLimiter = () =>
    lib.createLimiter({
      store: lib.createStoreClient({
        url: (env.bridge as { url: string }).url,
        token: env.token,
        timeoutMs: 5_000,
      }),
      prefix: `billed${run++}`,
    });

  it("admission 4 (EVALSHA, TIME, GETRANGE, BITFIELD), settle 2 (EVALSHA, BITFIELD), again 3", async () => {
    const limiter = freshLimiter();
    // Scripts loaded first: a NOSCRIPT's EVAL is no part of a shape.
    const warm = await limiter.limitAll([{ ...tokens, key: "warm" }]);
    await limiter.settle(warm.receipt, 1);
    // A key that already holds entries: the admission reads the header and appends.
    await limiter.limitAll([{ ...tokens, key: "a" }]);
    let receipt: unknown;
    const admission = await counted(async () => {
      receipt = (await limiter.limitAll([{ ...tokens, key: "a" }])).receipt;
    });
    expect(admission).toEqual({ evalsha: 1, time: 1, getrange: 1, bitfield: 1 });
    // The receipt names where the entry went: one BITFIELD reads, checks and writes it.
    const settle = await counted(async () => {
      expect((await limiter.settle(receipt, 2_345)).status).toBe("settled");
    });
    expect(settle).toEqual({ evalsha: 1, bitfield: 1 });
    // Settled before: what the BITFIELD wrote is written back (a second BITFIELD), 409.
    const again = await counted(async () => {
      expect((await limiter.settle(receipt, 2_345)).status).toBe("already-settled");
    });
    expect(again).toEqual({ evalsha: 1, bitfield: 2 });
  });

  it("a log past 8 kB: admission still 4, settle still 2", async () => {
    const limiter = freshLimiter();
    const warm = await limiter.limitAll([{ ...tokens, key: "warm" }]);
    await limiter.settle(warm.receipt, 1);
    // ~45 bytes an entry: 250 entries are ~11 kB, the header and the oldest in the first 8 kB.
    for (let i = 0; i < 250; i++) await limiter.limitAll([{ ...tokens, key: "long" }]);
    const length = Number(env.cli("STRLEN", `billed${run - 1}:tokens/sliding-log-weighted:{long}`));
    expect(length).toBeGreaterThan(8_192);
    let receipt: unknown;
    const admission = await counted(async () => {
      receipt = (await limiter.limitAll([{ ...tokens, key: "long" }])).receipt;
    });
    expect(admission).toEqual({ evalsha: 1, time: 1, getrange: 1, bitfield: 1 });
    const settle = await counted(async () => {
      expect((await limiter.settle(receipt, 1)).status).toBe("settled");
    });
    expect(settle).toEqual({ evalsha: 1, bitfield: 1 });
  });

  it("a settle off its fast path (caller's clock): each rare path counted", async () => {
    const bridge = env.bridge as { url: string };
    const store = lib.createStoreClient({ url: bridge.url, token: env.token, timeoutMs: 5_000 });
    let t = Date.now();
    const limiter = lib.createLimiter({
      store,
      prefix: `billed${run++}`,
      clock: "caller",
      now: () => t,
    });
    const admit = async (key: string) => (await limiter.limitAll([{ ...tokens, key }])).receipt;
    await limiter.settle(await admit("warm"), 1);
    await limiter.refund(await admit("warm"));
    // Refunded: the BITFIELD, then the one writing back.
    const refunded = await admit("refunded");
    await limiter.refund(refunded);
    const afterRefund = await counted(async () => {
      expect((await limiter.settle(refunded, 1)).status).toBe("unknown");
    });
    expect(afterRefund).toEqual({ evalsha: 1, bitfield: 2 });
    // Reset: the BITFIELD made the key again, without a TTL: DEL.
    const reset = await admit("reset");
    await limiter.reset({ ...tokens, key: "reset" });
    const afterReset = await counted(async () => {
      expect((await limiter.settle(reset, 1)).status).toBe("unknown");
    });
    expect(afterReset).toEqual({ evalsha: 1, bitfield: 1, del: 1 });
    // A receipt from before offsets: the search, then the entry written in place.
    const { offsets: _, ...old } = await admit("old");
    const oldSettle = await counted(async () => {
      expect((await limiter.settle(old, 1)).status).toBe("settled");
    });
    expect(oldSettle).toEqual({ evalsha: 1, getrange: 1, bitfield: 1 });
    // Left the window (its bytes still there): the BITFIELD and the one writing back.
    const left = await admit("left");
    t += 61_000;
    await admit("left");
    const afterLeft = await counted(async () => {
      expect((await limiter.settle(left, 1)).status).toBe("unknown");
    });
    expect(afterLeft).toEqual({ evalsha: 1, bitfield: 2 });
    // Moved by a compaction past where the receipt says: written back, cut back, searched,
    // written in place.
    for (let i = 0; i < 120; i++) await admit("moved");
    t += 1_000;
    const moved = await admit("moved");
    t += 59_500;
    await admit("moved");
    const afterMove = await counted(async () => {
      expect((await limiter.settle(moved, 1)).status).toBe("settled");
    });
    expect(afterMove).toEqual({ evalsha: 1, bitfield: 3, getrange: 2, set: 1 });
  });

  it("a monthly quota (calendar): admission 4, settle 5 (EVALSHA, TIME, GET, SET NX, SET), again 5", async () => {
    const limiter = freshLimiter();
    const warm = await limiter.limitAll([{ ...month, key: "warm" }]);
    await limiter.settle(warm.receipt, 1);
    await limiter.limitAll([{ ...month, key: "a" }]);
    let receipt: unknown;
    const admission = await counted(async () => {
      receipt = (await limiter.limitAll([{ ...month, key: "a" }])).receipt;
    });
    expect(admission).toEqual({ evalsha: 1, time: 1, get: 1, set: 1 });
    const settle = await counted(async () => {
      expect((await limiter.settle(receipt, 2_345)).status).toBe("settled");
    });
    // The once-gate (SET NX) and the count (SET KEEPTTL).
    expect(settle).toEqual({ evalsha: 1, time: 1, get: 1, set: 2 });
    const again = await counted(async () => {
      expect((await limiter.settle(receipt, 2_345)).status).toBe("already-settled");
    });
    // The gate's GET tells a settle taken before (409) from a refund's (unknown).
    expect(again).toEqual({ evalsha: 1, time: 1, get: 2, set: 1 });
  });

  it("a refund of a monthly quota's count: 6 (EVALSHA, GET + SET of the gate, TIME, GET, SET), after a settle 2", async () => {
    const limiter = freshLimiter();
    // Both scripts loaded first.
    await limiter.refund((await limiter.limitAll([{ ...month, key: "warm" }])).receipt);
    await limiter.settle((await limiter.limitAll([{ ...month, key: "warm" }])).receipt, 1);
    const first = (await limiter.limitAll([{ ...month, key: "a" }])).receipt;
    const refunded = await counted(async () => {
      expect(await limiter.refund(first)).toEqual({ refunded: true, units: [4_000] });
    });
    // The gate read and taken in the refund's own script: no call before it. The clock: a
    // refund too long after its admission gives nothing back.
    expect(refunded).toEqual({ evalsha: 1, set: 2, get: 2, time: 1 });
    const settled = (await limiter.limitAll([{ ...month, key: "a" }])).receipt;
    await limiter.settle(settled, 1_000);
    const late = await counted(async () => {
      expect(await limiter.refund(settled)).toEqual({ refunded: false, units: [0] });
    });
    // The gate's GET says settled: the count is not read.
    expect(late).toEqual({ evalsha: 1, get: 1 });
  });

  it("a refund of a plain sliding-log request: 7 (EVALSHA, GET + SET of the gate, TIME, GETRANGE, 2 SETRANGE), again 2", async () => {
    const limiter = freshLimiter();
    const rule = { policy: "plain", limit: 100, windowMs: 60_000 };
    // The refund script loaded first.
    await limiter.refund((await limiter.limitAll([{ ...rule, key: "warm" }])).receipt);
    const receipt = (await limiter.limitAll([{ ...rule, key: "a" }])).receipt;
    const refunded = await counted(async () => {
      expect(await limiter.refund(receipt)).toEqual({ refunded: true, units: [1] });
    });
    // The ring: its slots from the request's on, and the header (the gap moved back past it).
    expect(refunded).toEqual({ evalsha: 1, get: 1, set: 1, time: 1, getrange: 1, setrange: 2 });
    // Again: the gate's GET says refunded, the ring is not read.
    const again = await counted(async () => {
      expect(await limiter.refund(receipt)).toEqual({
        refunded: false,
        units: [0],
        alreadyRefunded: true,
      });
    });
    expect(again).toEqual({ evalsha: 1, get: 1 });
  });
});
