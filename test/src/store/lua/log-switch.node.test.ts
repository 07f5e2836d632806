import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureEnv } from "../../../../scripts/lib/measure-env.mjs";
import { commandsDuring as countCommands } from "../../../support/commandstats.js";

// One log key whose limit changes (a configured rule's key is per client key: every limit shares
// it): what Redis stores and the commands it runs, on a private redis-server (MEMORY USAGE,
// STRLEN, INFO commandstats). A change keeps only what the new limit needs and is paid once, even
// when the call that meets it is denied.
type Env = Awaited<ReturnType<typeof measureEnv>>;
let env: Env;
let script = "";
const T = 1_700_000_000_000;
const WEEK = 604_800_000;
let member = 0;

beforeAll(async () => {
  env = await measureEnv({ bridge: false });
  const lib = await env.bundle(`export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";`);
  // Stock Redis 7.0 refuses the allow-key-locking flag (Upstash's); the bridge strips it too.
  const stock = (lua: string) => lua.replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
  script = env.cli("SCRIPT", "LOAD", stock(lib.EVALUATE_SCRIPTS["sliding-log"])).trim();
}, 60_000);
afterAll(async () => {
  await env?.close();
});

interface Call {
  limit: number;
  cost?: number;
  windowMs?: number;
  /** ms ahead of now to stamp (a lease's units). */
  ahead?: number;
  member?: string;
}

/** One decision on the caller's clock; whether it was allowed. */
function decide(key: string, now: number, call: Call): boolean {
  const reply = env.cli(
    "EVALSHA",
    script,
    1,
    key,
    now,
    call.member ?? `m${member++}`,
    1,
    0,
    call.ahead ?? 0,
    "sliding-log",
    call.limit,
    call.windowMs ?? WEEK,
    call.cost ?? 1,
  );
  return reply.split("\n")[0] === "1";
}

/** The commands `work` ran inside scripts, by name. */
function commandsDuring(work: () => void): Record<string, number> {
  return countCommands((...args) => env.cli(...args), work);
}

const cli = (...args: (string | number)[]) => env.cli(...args).trim();
/** Bytes of a ring of limit L: the 47-byte header and L + 1 slots of 4 bytes. */
const ringBytes = (limit: number) => 47 + 4 * (limit + 1);

describe("a log key whose limit changes: paid once, at the new limit's size", () => {
  it("a key of another type (a sorted set of the retired layout) reads as no ring; an admission replaces it", () => {
    const key = "switch:other-type";
    env.cli("ZADD", key, T, "old.1", T + 1, "old.2");
    // A denial (a cost above the limit) leaves it as it is.
    expect(decide(key, T + 2, { limit: 5, cost: 6 })).toBe(false);
    expect(cli("ZCARD", key)).toBe("2");
    // The whole limit fits (nothing of the old layout is counted), written with one SET.
    const admitted = commandsDuring(() =>
      expect(decide(key, T + 3, { limit: 5, cost: 5 })).toBe(true),
    );
    expect(admitted.set).toBe(1);
    expect(cli("TYPE", key)).toBe("string");
    expect(decide(key, T + 4, { limit: 5 })).toBe(false);
  });

  it("a ring of 300 grown to 8 000 by a denial is written once, its new slots not stored", () => {
    const key = "switch:grow";
    expect(decide(key, T, { limit: 300, cost: 300 })).toBe(true);
    const resizing = commandsDuring(() =>
      expect(decide(key, T + 1, { limit: 8_000, cost: 8_000 })).toBe(false),
    );
    expect(resizing.set).toBe(1);
    // Its 300 slots and the gap: the 7 700 new slots are empty, past the string's end (a ring
    // still growing), not 32 kB of zeros.
    expect(Number(cli("STRLEN", key))).toBe(ringBytes(300));
    expect(Number(cli("PTTL", key))).toBeGreaterThan(0);
    // Read by range, as a ring still growing: its first kB, from its gap to its end, and the
    // slots from 0 the cost wraps onto; nothing written.
    expect(
      commandsDuring(() => expect(decide(key, T + 2, { limit: 8_000, cost: 8_000 })).toBe(false)),
    ).toEqual({ getrange: 3 });
  });

  it("a lower limit's denial rewrites nothing: the higher limit still counts every admission", () => {
    const key = "switch:lower";
    expect(decide(key, T, { limit: 1_000, cost: 1_000 })).toBe(true);
    expect(
      commandsDuring(() => expect(decide(key, T + 1, { limit: 5 })).toBe(false)).set,
    ).toBeUndefined();
    expect(Number(cli("STRLEN", key))).toBe(ringBytes(1_000));
    expect(decide(key, T + 2, { limit: 1_000 })).toBe(false);
  });

  it("a resize down keeps out-of-order (lease) times counted: never more than the limit in a window", () => {
    const window = 60_000;
    const key = "switch:order";
    // A lease's 5 units stamped 1 s ahead, then 5 ordinary admissions: the ring's newest slots
    // hold the older times.
    expect(decide(key, T, { limit: 10, cost: 5, windowMs: window, ahead: 1_000 })).toBe(true);
    for (let i = 1; i <= 5; i++)
      expect(decide(key, T + i, { limit: 10, windowMs: window })).toBe(true);
    expect(decide(key, T + 10, { limit: 5, windowMs: window })).toBe(false);
    // The ordinary ones have left; the lease's 5 are still inside the window: still full.
    expect(decide(key, T + 5 + window + 1, { limit: 5, windowMs: window })).toBe(false);
    expect(decide(key, T + 1_000 + window - 1, { limit: 5, windowMs: window })).toBe(false);
    // Exact: the lease's units leave at their stamp + window, and their 5 units are free then.
    expect(decide(key, T + 1_000 + window, { limit: 5, cost: 5, windowMs: window })).toBe(true);
  });
});

describe("a ring whose gap is at its end (a cost that filled it)", () => {
  it("a cost of the whole limit is decided from two ranges, not one GETRANGE a slot", () => {
    const key = "wrap:full";
    const limit = 20_000;
    expect(decide(key, T, { limit, cost: limit })).toBe(true);
    const denied = commandsDuring(() =>
      expect(decide(key, T + 1, { limit, cost: limit })).toBe(false),
    );
    expect(denied.getrange).toBeLessThanOrEqual(3);
  });
});
