// The bound reserve-then-settle keeps (lua/settle-driver.lua.ts, docs/usage.md "How exact"):
// admissions and settles racing on one weighted log (each instant's events sent at once), on a
// fake clock. With a covering reservation no rolling window holds more usage than the limit;
// with a smaller one, a window is over by at most what the requests in flight when its last
// admission was decided used beyond their reservations. And each request is charged exactly
// what it reported.
import { describe, expect, it } from "vitest";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { settle } from "../../../src/store/settle";
import { prng } from "../../support/worker/prng";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { logHeader } from "../../support/worker/weighted-layout";

const T = 1_700_000_000_000;
const LIMIT = 2_000;
const WINDOW = 10_000;
const redis = testRedis();
const prefix = scopedPrefix("wlog-bound");
const store = testStore(10_000);

interface Req {
  id: string;
  at: number;
  ends: number;
  reserve: number;
  used: number;
  admitted?: boolean;
  /** The step its settle was sent in (events of one step race). */
  settledStep?: number;
  admittedStep?: number;
}

/** 240 requests over 6 windows from 20 clients at about twice the budget, 0.3–2 s each. */
function workload(seed: number, reserve: (used: number) => number): Req[] {
  const random = prng(seed);
  return Array.from({ length: 240 }, (_, i) => {
    const at = Math.floor(random() * 60) * 1_000 + Math.floor(random() * 10) * 100;
    const used = 50 + Math.floor(random() * 351);
    const ends = at + 300 + Math.floor(random() * 17) * 100;
    return { id: `r${seed}-${i}`, at, ends, reserve: reserve(used), used };
  });
}

async function play(name: string, requests: Req[]): Promise<StorePolicy> {
  const policy: StorePolicy = {
    redisKey: storageKey(prefix, name, "client", "sliding-log-weighted"),
    algorithm: "sliding-log-weighted",
    limit: LIMIT,
    windowMs: WINDOW,
    cost: 1,
  };
  const steps = [...new Set(requests.flatMap((r) => [r.at, r.ends]))].sort((a, b) => a - b);
  for (const [step, now] of steps.entries()) {
    // Settles and admissions of one instant sent together: Redis orders them as they come.
    await Promise.all([
      ...requests
        .filter((r) => r.ends === now && r.admitted)
        .map(async (r) => {
          r.settledStep = step;
          const answer = await settle(store, {
            policies: [policy],
            memberId: r.id,
            units: [r.used],
            at: 0,
          });
          expect(answer.status).toBe("settled");
        }),
      ...requests
        .filter((r) => r.at === now)
        .map(async (r) => {
          const decided = await evaluatePolicy(store, {
            ...policy,
            cost: r.reserve,
            memberId: r.id,
            now: T + now,
          });
          r.admitted = decided.allowed;
          r.admittedStep = step;
        }),
    ]);
  }
  return policy;
}

/** Per rolling window (ending at each admission k): usage charged, and the documented bound. */
function windows(requests: Req[]): { usage: number; bound: number }[] {
  const admitted = requests.filter((r) => r.admitted);
  return admitted.map((k) => {
    const inside = admitted.filter((r) => r.at > k.at - WINDOW && r.at <= k.at);
    const usage = inside.reduce((sum, r) => sum + r.used, 0);
    // In flight when k was decided: not settled in an earlier step (a settle racing k's
    // admission counts as in flight: the bound is then an upper one).
    const bound = inside
      .filter((r) => (r.settledStep ?? Infinity) >= (k.admittedStep ?? 0))
      .reduce((sum, r) => sum + Math.max(0, r.used - r.reserve), 0);
    return { usage, bound };
  });
}

describe("reserve, then settle: the bound on every rolling window", () => {
  it("with a covering reservation, no window is over the limit", async () => {
    const requests = workload(7, () => 400);
    await play("covering", requests);
    const seen = windows(requests);
    const fullest = Math.max(...seen.map((w) => w.usage));
    expect(fullest).toBeLessThanOrEqual(LIMIT);
    // Not vacuous: some requests were denied, and the budget was well used.
    expect(requests.some((r) => r.admitted === false)).toBe(true);
    expect(fullest).toBeGreaterThan(LIMIT / 2);
  });

  it("with a smaller reservation, over by at most the in-flight requests' excess", async () => {
    const requests = workload(11, () => 100);
    const policy = await play("small", requests);
    const seen = windows(requests);
    for (const { usage, bound } of seen) expect(usage).toBeLessThanOrEqual(LIMIT + bound);
    // Not vacuous: some window went over the limit.
    expect(seen.some((w) => w.usage > LIMIT)).toBe(true);
    // Each request charged exactly what it used: the log holds the admissions of the last
    // window, each at its reported units.
    const last = Math.max(...requests.filter((r) => r.admitted).map((r) => r.at));
    const live = requests.filter((r) => r.admitted && r.at > last - WINDOW);
    expect((await logHeader(redis, policy.redisKey)).sum).toBe(
      live.reduce((sum, r) => sum + r.used, 0),
    );
  });
});
