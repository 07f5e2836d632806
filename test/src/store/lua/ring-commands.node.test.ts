import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureEnv } from "../../../../tools/measure-env.mjs";
import { commandsDuring as countCommands } from "../../../support/commandstats.js";

// The Redis commands each shape of ring decision runs, counted by INFO commandstats on a private
// redis-server (a shared one counts everyone's traffic). What the README's command table says,
// and what a regression in the ring's reads (an extra GETRANGE per decision) would break: the
// decisions' answers stay right, so only counting catches it.
type Env = Awaited<ReturnType<typeof measureEnv>>;
let env: Env;
let script: string;
let refundScript: string;
const T = 1_700_000_000_000;

beforeAll(async () => {
  env = await measureEnv({ bridge: false });
  const lib = await env.bundle(
    `export { EVALUATE_SCRIPTS, REFUND_SCRIPT } from "./src/store/lua/scripts";`,
  );
  // Stock Redis 7.0 refuses the allow-key-locking flag (Upstash's); the bridge strips it too.
  script = lib.EVALUATE_SCRIPTS["sliding-log"].replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
  refundScript = lib.REFUND_SCRIPT.replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
}, 60_000);
afterAll(async () => {
  await env?.close();
});

/** One decision of cost 1 on the caller's clock; whether it was allowed. */
function decide(key: string, limit: number, windowMs: number, now: number, member: string) {
  return decideCost(key, limit, windowMs, now, member, 1).allowed;
}

/** One decision of `cost` on the caller's clock: whether it was allowed, and the remaining. */
function decideCost(
  key: string,
  limit: number,
  windowMs: number,
  now: number,
  member: string,
  cost: number,
) {
  const reply = env.cli(
    "EVAL",
    script,
    1,
    key,
    now,
    member,
    1,
    0,
    0,
    "sliding-log",
    limit,
    windowMs,
    cost,
  );
  const lines = reply.split("\n");
  return { allowed: lines[0] === "1", remaining: Number(lines[5]) };
}

/** The refund of a request of `cost` admitted at `at`: the units given back. */
function refundOf(
  key: string,
  limit: number,
  windowMs: number,
  at: number,
  member: string,
  cost: number,
) {
  const reply = env.cli(
    "EVAL",
    refundScript,
    1,
    key,
    // The caller's clock, the admission's: a refund reads it (its age bound), no TIME.
    at,
    member,
    1,
    0,
    at,
    "sliding-log",
    limit,
    windowMs,
    cost,
  );
  return Number(reply.split("\n")[1]);
}

/**
 * The commands scripts ran during `work`, with their arguments, as MONITOR shows them (redis-cli
 * quotes binary bytes as \xHH): what a command count cannot tell, how many bytes each read.
 */
async function monitored(work: () => void): Promise<string[][]> {
  const child = spawn("redis-cli", ["-p", env.port, "monitor"], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  let out = "";
  const seen = (text: string) =>
    new Promise<void>((resolve) => {
      const poll = () => (out.includes(text) ? resolve() : setTimeout(poll, 5));
      poll();
    });
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk: string) => {
    out += chunk;
  });
  try {
    await seen("OK");
    work();
    env.cli("ECHO", "monitored-end");
    await seen("monitored-end");
  } finally {
    child.kill();
  }
  return out
    .split("\n")
    .filter((line) => line.includes("[0 lua]"))
    .map((line) =>
      [...line.slice(line.indexOf("]") + 1).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) =>
        // One byte per escape (\xHH, \", \\, \n …), as the argument was.
        (m[1] ?? "").replace(/\\x[0-9a-f]{2}|\\./g, "#"),
      ),
    );
}

/** The commands `work` ran inside scripts, by name. */
function commandsDuring(work: () => void): Record<string, number> {
  return countCommands((...args) => env.cli(...args), work);
}

describe("the ring's commands per decision (caller's clock: no TIME)", () => {
  it("a new key's first admission: one read, one write", () => {
    expect(commandsDuring(() => decide("fresh:small", 100, 60_000, T, "a"))).toEqual({
      get: 1,
      set: 1,
    });
    expect(commandsDuring(() => decide("fresh:large", 8_000, 60_000, T, "a"))).toEqual({
      getrange: 1,
      set: 1,
    });
  });

  it("a small ring (read whole): GET and one SETRANGE admitted, GET alone denied", () => {
    const key = "small";
    const limit = 100;
    for (let i = 0; i < limit; i++) expect(decide(key, limit, 60_000, T + i, `f${i}`)).toBe(true);
    expect(
      commandsDuring(() => expect(decide(key, limit, 60_000, T + 200, "d")).toBe(false)),
    ).toEqual({
      get: 1,
    });
    // At the limit, each admission frees and takes one slot: a GET and a SETRANGE, the ring
    // rewritten whole (SET) once a lap instead.
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 30; i++)
        expect(decide(key, limit, 60_000, T + 60_000 + i, `a${i}`)).toBe(true);
    });
    expect(admitted.get).toBe(30);
    expect((admitted.setrange ?? 0) + (admitted.set ?? 0)).toBe(30);
    expect(admitted.set ?? 0).toBeLessThanOrEqual(1);
    expect(admitted.getrange).toBeUndefined();
  });

  it("a ring of limit 1 000 is read whole: one GET, one write, at its limit too", () => {
    const key = "whole-1000";
    const limit = 1_000;
    // 100 calls of 10, 1 s apart, in a 100 s window: each later call frees and takes 10 slots.
    for (let i = 0; i < 100; i++) decideCost(key, limit, 100_000, T + i * 1_000, `f${i}`, 10);
    let now = T + 100_000;
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 64; i++, now += 1_000)
        expect(decideCost(key, limit, 100_000, now, `a${i}`, 10).allowed).toBe(true);
    });
    expect(admitted.get).toBe(64);
    expect((admitted.setrange ?? 0) + (admitted.set ?? 0)).toBe(64);
    expect(admitted.getrange).toBeUndefined();
    const denied = commandsDuring(() => {
      for (let i = 0; i < 20; i++)
        expect(decide(key, limit, 100_000, now - 1_000, `d${i}`)).toBe(false);
    });
    expect(denied).toEqual({ get: 20 });
  });

  it("a large ring at its limit: its first kB and a range read, one written; a denial writes nothing", () => {
    const key = "large";
    const limit = 2_000; // past the whole-read size (1 028)
    // 100 calls of 20, 1 s apart, in a 100 s window: each later call frees and takes 20 slots.
    for (let i = 0; i < 100; i++) decideCost(key, limit, 100_000, T + i * 1_000, `f${i}`, 20);
    let now = T + 100_000;
    // Steady admissions: the first read (1 kB: the header and the slots after it) and, unless
    // the gap is among those slots, a short range; one SETRANGE, plus a header write when the
    // gap has drifted 16 slots and the whole ring once a lap.
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 64; i++, now += 1_000)
        expect(decideCost(key, limit, 100_000, now, `a${i}`, 20).allowed).toBe(true);
    });
    expect(admitted.getrange).toBeGreaterThanOrEqual(64);
    expect(admitted.getrange).toBeLessThanOrEqual(128 + 2);
    expect(admitted.setrange).toBeGreaterThanOrEqual(64);
    // A header write too when the gap drifted 16 slots: every call of 20 here.
    expect(admitted.setrange).toBeLessThanOrEqual(2 * 64 + 1);
    expect(admitted.get ?? 0).toBeLessThanOrEqual(1);
    const denied = commandsDuring(() => {
      for (let i = 0; i < 20; i++)
        expect(decide(key, limit, 100_000, now - 1_000, `d${i}`)).toBe(false);
    });
    expect(Object.keys(denied)).toEqual(["getrange"]);
    expect(denied.getrange).toBeLessThanOrEqual(40);
  });

  it("a large ring far under its limit is kept compact: one read, one write", () => {
    const key = "under";
    // 1.5 requests a second under 8 000 a minute: ~90 inside the window, the rest of the ring
    // free. Past its first kB the ring is rewritten with its live times only, so the gap stays
    // among the slots the first read holds.
    let now = T;
    for (let i = 0; i < 300; i++, now += 667)
      expect(decide(key, 8_000, 60_000, now, `w${i}`)).toBe(true);
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 300; i++, now += 667)
        expect(decide(key, 8_000, 60_000, now, `a${i}`)).toBe(true);
    });
    expect(admitted.getrange).toBe(300);
    // One write an admission; the TTL (and the header with it) once a window: 200 s here.
    const renewals = admitted.pexpire ?? 0;
    expect(renewals).toBeLessThanOrEqual(4);
    expect((admitted.setrange ?? 0) + (admitted.set ?? 0)).toBe(300 + renewals);
    // Compact: at most the first read's size, never the 32 kB of the full ring.
    expect(Number(env.cli("STRLEN", key))).toBeLessThanOrEqual(1_024);
  });
});

describe("a full ring of 100 000 whose limit alternates: no rebuild, no whole read", () => {
  // A limit that changes call by call (a function limit, two versions of a rule) decides on the
  // ring as it is: a lower one on its newest slots, the capacity kept. Rebuilding it (a GET of
  // 400 kB, every slot decoded and sorted, a SET) on each change cost 30-60 ms of Redis a call.
  const fill = (key: string, window: number) => {
    for (let i = 0; i < 100; i++)
      expect(decideCost(key, 100_000, window, T + i, `f${i}`, 1_000).allowed).toBe(true);
  };

  it("100 000 ↔ 99 999: the commands of a limit that never changed, full and draining", () => {
    const window = 3_600_000;
    const run = (key: string, low: number) => {
      fill(key, window);
      const full = commandsDuring(() => {
        for (let i = 0; i < 20; i++)
          expect(decide(key, i % 2 ? low : 100_000, window, T + 200 + i, `d${i}`)).toBe(false);
      });
      // A window on, a batch of 1 000 leaves each ms: every call admitted at its own limit.
      const draining = commandsDuring(() => {
        for (let i = 0; i < 20; i++)
          expect(decide(key, i % 2 ? low : 100_000, window, T + window + i, `a${i}`)).toBe(true);
      });
      return { full, draining, bytes: Number(env.cli("STRLEN", key)) };
    };
    const alternating = run("alternate:99999", 99_999);
    // Reads of a range, no write while full; while draining one SETRANGE a call, the frontier's
    // probes, and the whole ring once a lap, exactly as under the constant limit (a rebuild per
    // change would be a GET and a SET every other call).
    expect(alternating).toEqual(run("constant:100000", 100_000));
    expect(Object.keys(alternating.full)).toEqual(["getrange"]);
    expect(alternating.draining.get ?? 0).toBeLessThanOrEqual(1);
    expect(alternating.bytes).toBe(47 + 4 * 100_001);
  });

  it("100 000 ↔ 100: nothing written while full, the capacity kept", () => {
    const key = "alternate:100";
    const window = 3_600_000;
    fill(key, window);
    const full = commandsDuring(() => {
      for (let i = 0; i < 20; i++)
        expect(decide(key, i % 2 ? 100 : 100_000, window, T + 200 + i, `d${i}`)).toBe(false);
    });
    // The limit of 100 reads a ring as its size says (GET up to 1 028); nothing is written.
    expect(full.get).toBe(10);
    expect(full.set ?? 0).toBe(0);
    expect(full.setrange ?? 0).toBe(0);
    expect(Number(env.cli("STRLEN", key))).toBe(47 + 4 * 100_001);
  });
});

describe("a refund of a ring at limit 100 000 reads and writes what it moves, not the ring", () => {
  it("a refund of 1 right after its admission: a few slots read and written, no GET or SET", async () => {
    const key = "refund:full";
    const limit = 100_000;
    const window = 3_600_000;
    // Full: 100 calls of 1 000 units, 1 ms apart.
    for (let i = 0; i < 100; i++)
      expect(decideCost(key, limit, window, T + i, `f${i}`, 1_000).allowed).toBe(true);
    const size = Number(env.cli("STRLEN", key));
    expect(size).toBe(47 + 4 * (limit + 1));
    // A window on, the first 1 000 units have left: an admission of 1, then its refund.
    const now = T + window;
    expect(decideCost(key, limit, window, now, "a", 1)).toEqual({ allowed: true, remaining: 999 });
    let back = 0;
    const commands = await monitored(() => {
      back = refundOf(key, limit, window, now, "a", 1);
    });
    expect(back).toBe(1);
    const names = commands.map((c) => c[0]?.toLowerCase());
    expect(names).not.toContain("get");
    expect(names).not.toContain("set");
    let read = 0;
    let written = 0;
    for (const [name, , a, b] of commands) {
      if (name === "GETRANGE") read += Number(b) - Number(a) + 1;
      if (name === "SETRANGE") written += (b ?? "").length;
    }
    // The first 1 kB (a small ring whole, a large one's header: one read either way), the gap's
    // range and the newest slots: under 2 kB of a 400 kB ring.
    expect(read).toBeLessThan(2_048);
    expect(written).toBeLessThan(256);
    // The first 1 kB, the newest slots and the gap (two ranges: they wrap past the string's end
    // here), the same two written back, and the header (the gap moved back before it).
    expect(commands.length).toBeLessThanOrEqual(6);
    expect(Number(env.cli("STRLEN", key))).toBe(size);
    // Exact after it: the unit is back at once, and the ring holds 99 000 then 100 000.
    expect(decideCost(key, limit, window, now, "b", 1_000)).toEqual({
      allowed: true,
      remaining: 0,
    });
    expect(decideCost(key, limit, window, now, "c", 1).allowed).toBe(false);
    expect(decideCost(key, limit, window, now + 1, "d", 1_000)).toEqual({
      allowed: true,
      remaining: 0,
    });
  });

  it("a refund behind later admissions moves only those (order kept, the decisions exact)", async () => {
    const key = "refund:behind";
    const limit = 100_000;
    const window = 3_600_000;
    // 100 calls of 1 000 units, 1 s apart; a window on, the first 11 have left.
    for (let i = 0; i < 100; i++) decideCost(key, limit, window, T + i * 1_000, `f${i}`, 1_000);
    const now = T + window + 10_000;
    expect(decideCost(key, limit, window, now, "a", 3).remaining).toBe(11_000 - 3);
    for (let i = 0; i < 50; i++) decideCost(key, limit, window, now + 1 + i, `o${i}`, 1);
    let back = 0;
    const commands = await monitored(() => {
      back = refundOf(key, limit, window, now, "a", 3);
    });
    expect(back).toBe(3);
    const names = commands.map((c) => c[0]?.toLowerCase());
    expect(names).not.toContain("get");
    expect(names).not.toContain("set");
    let read = 0;
    for (const [name, , a, b] of commands)
      if (name === "GETRANGE") read += Number(b) - Number(a) + 1;
    expect(read).toBeLessThan(2_048);
    expect(commands.length).toBeLessThanOrEqual(7);
    // 11 000 - 50 free: they fill; then the next call of 1 000 leaves at T + 11 000 + window.
    expect(decideCost(key, limit, window, now + 60, "b", 10_950)).toEqual({
      allowed: true,
      remaining: 0,
    });
    expect(decideCost(key, limit, window, now + 60, "c", 1).allowed).toBe(false);
    expect(decideCost(key, limit, window, T + window + 10_999, "d", 1).allowed).toBe(false);
    expect(decideCost(key, limit, window, T + window + 11_000, "e", 1_000)).toEqual({
      allowed: true,
      remaining: 0,
    });
    expect(decideCost(key, limit, window, T + window + 11_000, "f", 1).allowed).toBe(false);
  });
  it("an old request's refund (past half the ring) rewrites it once, exactly", () => {
    const key = "refund:old";
    const limit = 100_000;
    const window = 3_600_000;
    for (let i = 0; i < 100; i++) decideCost(key, limit, window, T + i, `f${i}`, 1_000);
    const counts = commandsDuring(() => {
      expect(refundOf(key, limit, window, T + 10, "f10", 1_000)).toBe(1_000);
      expect(refundOf(key, limit, window, T + 80, "f80", 1_000)).toBe(1_000);
    });
    // The one past half: the rest read in one go and one SET; the newer one moved in place.
    expect(counts.set).toBe(1);
    expect(counts.get).toBeUndefined();
    expect(Number(env.cli("STRLEN", key))).toBe(47 + 4 * (limit + 1));
    expect(decideCost(key, limit, window, T + 100, "b", 2_000)).toEqual({
      allowed: true,
      remaining: 0,
    });
    expect(decideCost(key, limit, window, T + 100, "c", 1).allowed).toBe(false);
    // The oldest live call (T + 0) leaves first, the refunded T + 10 does not hold a slot.
    expect(decideCost(key, limit, window, T + window, "d", 1_000)).toEqual({
      allowed: true,
      remaining: 0,
    });
    expect(decideCost(key, limit, window, T + window + 9, "e", 1).allowed).toBe(true);
  });
});

describe("a ring grown in writes takes no more memory than the full ring", () => {
  const limit = 100_000;
  const window = 3_600_000;
  const usage = (key: string) => Number(env.cli("MEMORY", "USAGE", key, "SAMPLES", "0"));
  let full = 0;
  beforeAll(() => {
    expect(decideCost("grow:full", limit, window, T, "f", limit).allowed).toBe(true);
    full = usage("grow:full");
    // 51 + 4 × limit bytes of value, in its allocation class: 458 800 measured.
    expect(full).toBeLessThan(470_000);
  });

  it("cost 1, cost 1, then 98 300 in one call", () => {
    const key = "grow:jump";
    let now = T;
    for (const cost of [1, 1, 98_300]) {
      expect(decideCost(key, limit, window, now++, `j${now}`, cost).allowed).toBe(true);
      expect(usage(key)).toBeLessThanOrEqual(1.1 * full);
    }
  });

  it("growth in steps of every size stays under the full ring's size", () => {
    const key = "grow:steps";
    let now = T;
    let total = 0;
    for (const cost of [1, 1, 30_000, 1, 20_000, 5, 40_000, 1, 9_000, 991]) {
      expect(decideCost(key, limit, window, now++, `s${now}`, cost).allowed).toBe(true);
      total += cost;
      expect(usage(key), `after ${total}`).toBeLessThanOrEqual(1.1 * full);
    }
    // Steady admissions of 1 000 from there on, round the ring.
    for (let i = 0; i < 30; i++) {
      decideCost(key, limit, window, now++ + window, `t${i}`, 1_000);
      expect(usage(key)).toBeLessThanOrEqual(1.1 * full);
    }
  });

  it("a few admissions under a large limit still cost bytes for those few", () => {
    const key = "grow:few";
    for (let i = 0; i < 3; i++) decideCost(key, limit, window, T + i, `w${i}`, 1);
    expect(Number(env.cli("STRLEN", key))).toBe(47 + 4 * 4);
  });
});
