// A reshard's premises, broken one at a time (docs/shards.md "Which mistakes are refused"): two
// isolates (two limiters over the three shard bridges, on one clock the test moves, passed to
// Redis), one key that moves, twice its limit sent across the instant. Each mistake either
// stays within the limit in every window, or the isolate at fault is refused with an error
// naming the setting — never both isolates admitting on their own view. The control keeps the
// premises.
import { describe, expect, it, vi } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { Limiter } from "../../../../src/limiter/limiter-api";
import type { StoreClient } from "../../../../src/store/upstash-client";
import { manualClock, storeAt } from "../../../support/worker/fault-control";
import { shardPrefix, shardRedis, shardUrls } from "../../../support/worker/shard-stores";

const base = shardPrefix("premises");
const limit = 20;
const windowMs = 4_000;

interface Isolate {
  /** The limiter this isolate runs at test time `t` (a redeploy changes it). */
  at(t: number): Limiter;
  /** What it told its onStoreError. */
  errors: Error[];
}

/** One scenario's world: its own prefix, clock, clients and the key that moves. */
function world(label: string) {
  const prefix = `${base}-${label}`;
  const clock = manualClock();
  const at = clock.now() + 10_000;
  const urls = shardUrls();
  const clients = urls.map((url) => storeAt(url, 2_000));
  const [a, b, c] = clients as [StoreClient, StoreClient, StoreClient];
  /** An isolate's limiter: on `now` (the test's clock, or one that is behind), telling `errors`. */
  const limiter = (
    errors: Error[],
    config: Pick<Parameters<typeof createLimiter>[0], "store" | "reshard">,
    now = clock.now,
  ) =>
    createLimiter({
      ...config,
      prefix,
      clock: "caller",
      now,
      timeoutMs: 1_000,
      failMode: "closed",
      onStoreError: (error) => errors.push(error as Error),
    });
  const oldShards = { store: [a, b] };
  const newShards = (reshardAt = at) => ({
    store: [a, b, c],
    reshard: { from: ["0", "1"], at: reshardAt },
  });
  // The key: on shard 0 or 1 before the instant, on 2 after it.
  const probe = createLimiter({ ...newShards(), prefix });
  let key = "";
  for (let i = 0; !key; i++) {
    const k = `moved-${i}-${crypto.randomUUID()}`;
    if (probe.shardOf(k, at) !== probe.shardOf(k, at - 1)) key = k;
  }
  /** An isolate that runs one limiter throughout (`limiter`'s arguments but its own errors). */
  const isolate = (
    config: Parameters<typeof limiter>[1],
    now?: () => number,
  ): Isolate & { limiter: Limiter } => {
    const errors: Error[] = [];
    const one = limiter(errors, config, now);
    return { at: () => one, errors, limiter: one };
  };
  return { label, prefix, clock, at, clients, limiter, isolate, oldShards, newShards, key };
}

/**
 * Isolates X and Y take turns every 500 ms from 6 s before `at` to 14 s after, each turn a burst
 * (a burst takes whatever its isolate believes is free, all at once): admission times. A burst
 * of 25 fills the limit at one instant; one of 7 spreads the units over several, so that some
 * leave the window while a stale isolate still decides.
 */
async function drive(
  w: ReturnType<typeof world>,
  x: Isolate,
  y: Isolate,
  burst = 25,
  lease = false,
): Promise<{ admitted: number[]; worst: number }> {
  const admitted: number[] = [];
  for (let t = w.at - 6_000, turn = 0; t < w.at + 14_000; t += 500, turn++) {
    w.clock.set(t);
    const isolate = turn % 2 === 0 ? x : y;
    for (let i = 0; i < burst; i++) {
      const d = await isolate.at(t).limit({ policy: "p", key: w.key, limit, windowMs, lease });
      if (d.allowed) admitted.push(t);
    }
  }
  // Counted strictly: every admission within a window of the first's send (the manual clock:
  // an answer is received when it is sent).
  let worst = 0;
  for (const [i, first] of admitted.entries()) {
    let n = 0;
    for (let j = i; j < admitted.length && (admitted[j] as number) < first + windowMs; j++) n++;
    worst = Math.max(worst, n);
  }
  // Printed (`--silent=false`): the figure beside the limit.
  console.log(`${w.label}: at most ${worst} admitted in a window (limit ${limit})`);
  return { admitted, worst };
}

const settings = (isolate: Isolate) =>
  isolate.errors.filter((e) => e.name === "PlacementFenceError").map((e) => e.message);

describe("reshard premises: each mistake within the limit, or refused naming the setting", () => {
  it("control: both isolates on the reshard, same instant and clock: at most 20 in any window", async () => {
    const w = world("control");
    const x = w.isolate(w.newShards());
    const y = w.isolate(w.newShards());
    const { worst, admitted } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    // Both sides of the instant admit (the fence refuses nobody who keeps the premises).
    expect(admitted.some((t) => t < w.at)).toBe(true);
    expect(admitted.some((t) => t > w.at + 2_000)).toBe(true);
    expect([...settings(x), ...settings(y)]).toEqual([]);
    // Every shard was told the reshard (its instant in the record), and the old placement is
    // closed where the key lived and where it moved (by the close before the count was read,
    // and by the decisions on the new placement).
    const records = await Promise.all(
      shardRedis().map((r) => r.get<string>(`${w.prefix}:placement`)),
    );
    for (const record of records) expect(String(record)).toContain(`|${w.at}|`);
    expect(String(records[Number(x.limiter.shardOf(w.key, w.at - 1))])).toMatch(/\|1$/);
    expect(String(records[Number(x.limiter.shardOf(w.key, w.at))])).toMatch(/\|1$/);
  }, 60_000);

  it("a second isolate's reshard.at 3 s later: refused, naming reshard.at", async () => {
    const w = world("other-at");
    const x = w.isolate(w.newShards());
    const y = w.isolate(w.newShards(w.at + 3_000));
    const { worst } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    // Whichever told the shards second is the one refused.
    const told = [...settings(x), ...settings(y)];
    expect(told.some((m) => m.startsWith("reshard.at:"))).toBe(true);
  }, 60_000);

  it("a second isolate's clock 2 s behind: at most 20 in any window", async () => {
    const w = world("behind");
    const x = w.isolate(w.newShards());
    const y = w.isolate(w.newShards(), () => w.clock.now() - 2_000);
    const { worst } = await drive(w, x, y, 7);
    // X closed the old placement on the key's old shard before reading its count there; Y,
    // still before the instant on its clock, is refused there from then on.
    expect(settings(y).some((m) => m.startsWith("reshard.at:"))).toBe(true);
    expect(worst).toBeLessThanOrEqual(limit);
  }, 60_000);

  it("an isolate still on the old config after the instant: refused, naming reshard.at", async () => {
    const w = world("old-config");
    const x = w.isolate(w.newShards());
    const y = w.isolate(w.oldShards);
    const { worst } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    expect(settings(y).some((m) => m.startsWith("reshard.at:"))).toBe(true);
    expect(settings(x)).toEqual([]);
  }, 60_000);

  it("an isolate still on the old config, with leases: refused, naming reshard.at", async () => {
    // Its requests ask for leases (paid locally, granted by the old shard): a grant is fenced
    // as a decision is, and none outlives the close.
    const w = world("old-config-leases");
    const x = w.isolate(w.newShards());
    const y = w.isolate(w.oldShards);
    const { worst } = await drive(w, x, y, 25, true);
    expect(worst).toBeLessThanOrEqual(limit);
    expect(settings(y).some((m) => m.startsWith("reshard.at:"))).toBe(true);
  }, 60_000);

  it("a second reshard deployed during the first's transition: refused, naming reshard", async () => {
    const w = world("second");
    const [a, b, c] = w.clients as [StoreClient, StoreClient, StoreClient];
    const x = w.isolate(w.newShards());
    const ye: Error[] = [];
    const first = w.limiter(ye, w.newShards());
    // Y redeployed 1 s after the first instant with a reshard from its shards, removing "2"
    // at 3 s after it: the moved key would move back.
    const second = w.limiter(ye, {
      store: [a, b],
      reshard: { from: ["0", "1", "2"], at: w.at + 3_000, stores: { "2": c } },
    });
    const y = { at: (t: number) => (t < w.at + 1_000 ? first : second), errors: ye };
    const { worst } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    expect(settings(y).some((m) => m.startsWith("reshard: a second reshard"))).toBe(true);
  }, 60_000);

  it("an isolate on shards that are neither side of the reshard: refused, naming reshard.from", async () => {
    const w = world("other-shards");
    const [a, , c] = w.clients as [StoreClient, StoreClient, StoreClient];
    const x = w.isolate(w.newShards());
    // Shards "0" and "2": a config that is neither the reshard's before nor its after.
    const y = w.isolate({ store: { "0": a, "2": c } });
    const { worst } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    expect(settings(y).some((m) => m.startsWith("reshard.from:"))).toBe(true);
    expect(settings(x)).toEqual([]);
  }, 60_000);

  it("reshard.at already 20 s past when deployed: refused, naming reshard.at", async () => {
    const w = world("late");
    // X is deployed (its first call) 6 s before w.at, with an instant 20 s before that.
    const x = w.isolate(w.newShards(w.at - 26_000));
    const y = w.isolate(w.oldShards);
    const { worst } = await drive(w, x, y);
    expect(worst).toBeLessThanOrEqual(limit);
    expect(settings(x).some((m) => m.startsWith("reshard.at:") && m.includes("had passed"))).toBe(
      true,
    );
  }, 60_000);

  it("a refused isolate's default log says its requests are denied (closed), not the fallback", async () => {
    const w = world("refusal-log");
    const [a, b] = w.clients as [StoreClient, StoreClient, StoreClient];
    const request = { policy: "p", key: w.key, limit, windowMs };
    const fresh = createLimiter({
      ...w.newShards(),
      prefix: w.prefix,
      clock: "caller",
      now: w.clock.now,
    });
    // The default failure policy (the local fallback decides) and the default log: no hooks.
    const stale = createLimiter({
      store: [a, b],
      prefix: w.prefix,
      clock: "caller",
      now: w.clock.now,
    });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      // The new config tells the shards before the instant and closes the old placement after.
      w.clock.set(w.at - 1_000);
      expect((await fresh.limit(request)).allowed).toBe(true);
      w.clock.set(w.at + 1_000);
      expect((await fresh.limit(request)).allowed).toBe(true);
      const refused = await stale.limit(request);
      expect(refused).toMatchObject({ allowed: false, source: "fail-closed" });
      const lines = warn.mock.calls.map((args) => JSON.parse(String(args[0])));
      expect(lines).toContainEqual(
        expect.objectContaining({
          event: "rate-limit-store-error",
          meanwhile: "closed",
          error: expect.stringContaining("PlacementFenceError: reshard.at:"),
          detail: expect.stringContaining("denied"),
        }),
      );
      expect(lines.filter((line) => line.meanwhile === "fallback")).toEqual([]);
    } finally {
      warn.mockRestore();
    }
  }, 60_000);
});
