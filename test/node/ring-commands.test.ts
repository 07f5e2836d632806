import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { measureEnv } from "../../scripts/lib/measure-env.mjs";

// The Redis commands each shape of ring decision runs, counted by INFO commandstats on a private
// redis-server (a shared one counts everyone's traffic). What the README's command table says,
// and what a regression in the ring's reads (an extra GETRANGE per decision) would break: the
// decisions' answers stay right, so only counting catches it.
type Env = Awaited<ReturnType<typeof measureEnv>>;
let env: Env;
let script: string;
const T = 1_700_000_000_000;

beforeAll(async () => {
  env = await measureEnv({ bridge: false });
  const lib = await env.bundle(`export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";`);
  // Stock Redis 7.0 refuses the allow-key-locking flag (Upstash's); the bridge strips it too.
  script = lib.EVALUATE_SCRIPTS["sliding-log"].replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
}, 60_000);
afterAll(async () => {
  await env?.close();
});

/** One decision of cost 1 on the caller's clock; whether it was allowed. */
function decide(key: string, limit: number, windowMs: number, now: number, member: string) {
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
    1,
  );
  return reply.split("\n")[0] === "1";
}

/** The commands `work` ran inside scripts, by name (EVAL itself left out). */
function commandsDuring(work: () => void): Record<string, number> {
  env.cli("CONFIG", "RESETSTAT");
  work();
  const counts: Record<string, number> = {};
  for (const line of env.cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (!match?.[1] || /^(eval|info|config)/.test(match[1])) continue;
    counts[match[1]] = Number(match[2]);
  }
  return counts;
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

  it("a large ring at its limit: two ranges read, one written; a denial reads two and writes nothing", () => {
    const key = "large";
    const limit = 300; // past the whole-read size (243)
    for (let i = 0; i < limit; i++) decide(key, limit, 300_000, T + i * 1_000, `f${i}`);
    let now = T + 300_000;
    // Steady admissions (each frees and takes one slot): 2 GETRANGEs and 1 SETRANGE, plus a header
    // write when the gap has drifted 16 slots and the whole ring once a lap.
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 64; i++, now += 1_000)
        expect(decide(key, limit, 300_000, now, `a${i}`)).toBe(true);
    });
    // Two ranges each (a third only when a range wraps past the string's end).
    expect(admitted.getrange).toBeGreaterThanOrEqual(128);
    expect(admitted.getrange).toBeLessThanOrEqual(128 + 2);
    expect(admitted.setrange).toBeGreaterThanOrEqual(64);
    expect(admitted.setrange).toBeLessThanOrEqual(74); // 4.12 commands an admission measured
    expect(admitted.get ?? 0).toBeLessThanOrEqual(1);
    const denied = commandsDuring(() => {
      for (let i = 0; i < 20; i++)
        expect(decide(key, limit, 300_000, now - 1_000, `d${i}`)).toBe(false);
    });
    expect(denied).toEqual({ getrange: 40 });
  });

  it("a large ring far under its limit: two ranges read (the hint's slots are in the second)", () => {
    const key = "under";
    // 1.5 requests a second under 8 000 a minute: ~90 inside the window, the rest of the ring free.
    let now = T;
    for (let i = 0; i < 300; i++, now += 667)
      expect(decide(key, 8_000, 60_000, now, `w${i}`)).toBe(true);
    const admitted = commandsDuring(() => {
      for (let i = 0; i < 100; i++, now += 667)
        expect(decide(key, 8_000, 60_000, now, `a${i}`)).toBe(true);
    });
    expect(admitted.getrange).toBeGreaterThanOrEqual(200);
    expect(admitted.getrange).toBeLessThanOrEqual(202);
  });
});
