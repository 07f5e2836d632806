/**
 * Regional leases (docs/regions.md): the isolate lease one level up. Home keeps the exact log
 * and grants a region k units stamped at s = t + δ; the region's own store holds them, and any
 * isolate in the region spends them in one near round trip. No lease with room: the request is
 * decided at home as without regions, and a key warm in the region gets a lease off the request
 * path.
 *
 * Why it stays exact: the proof of isolate leases (lease.ts), unchanged, given that no unit is
 * spent after s on home's clock. A grant is asked at `sentAt` (this isolate's clock, read before
 * the call is sent) and home decides at some t no earlier, so s = t + δ is no earlier than
 * sentAt + δ. The lease is written into the region with a *life*, counted by the region's own
 * clock from when the write arrives: spendableMs(δ) − (answeredAt − sentAt) − transitMarginMs.
 * It therefore ends, in real time, at sentAt + spendableMs(δ) + (transit − transitMarginMs),
 * which is before s whenever the write's one-way transit is within the margin (and the tenth of
 * δ that spendableMs keeps covers an isolate clock that lags). No clock offset enters: home's
 * clock is only compared with itself, the region's with itself, this isolate's with itself.
 * A put that arrives later than the margin can end a lease late by the excess: what the margin
 * assumes, stated in docs/regions.md.
 */
import { evaluate } from "../store/evaluate";
import { refund } from "../store/refund";
import { type RegionSpendItem, regionPut, regionReturn, regionSpend } from "../store/region-lease";
import type { ScriptClient } from "../store/script-runner";
import { withinDeadline } from "../store/script-runner";
import { type CircuitBreaker, createCircuitBreaker } from "./circuit-breaker";
import type { LimiterContext } from "./context";
import { fromRegion, regionDenied } from "./decisions";
import { LEASABLE, spendableMs, type WaitUntil } from "./lease";
import type { LeaseStore } from "./lease-store";
import { nextMemberId } from "./member-id";
import type { ResolvedPolicy } from "./resolved-policy";
import type { MultiDecision, RefundOutcome, RefundReceipt } from "./types";

export interface RegionsOptions {
  /** Each region's name and its own store client (createStoreClient). */
  stores: Readonly<Record<string, ScriptClient>>;
  /**
   * The longest a decision waits for a region's store before it asks home instead.
   * @default the limiter's timeoutMs
   */
  timeoutMs?: number;
  /**
   * The longest a regional lease lives: δ = min(maxLifetimeMs, window / 8).
   * @default 10000
   */
  maxLifetimeMs?: number;
  /**
   * What a lease's write into its region may take in transit, taken off its life (docs/regions.md).
   * @default 50
   */
  transitMarginMs?: number;
  /** A lease below this many units is not asked for. @default 2 */
  minUnits?: number;
}

/** Where a request paid from regional leases took each policy's units (RefundReceipt.regional). */
export interface RegionalSpend {
  region: string;
  /** Per policy, the stamp of the lease it was paid from, and its reset mark at home. */
  stamps: readonly number[];
  memberIds: readonly string[];
  resetMarks: readonly string[];
}

export interface RegionalLeases {
  /** Whether this request is one for its region: a known region, every policy leasable. */
  applies(policies: readonly ResolvedPolicy[], region: string | undefined): region is string;
  /**
   * Decided in the region (spent from its leases, or denied from a denial home decided), or
   * undefined: ask home. Never rejects: a region that fails is skipped.
   */
  decide(
    policies: readonly ResolvedPolicy[],
    region: string,
    waitUntil: WaitUntil | undefined,
  ): Promise<MultiDecision | undefined>;
  /** Home decided a request of this region: a denial is held in the region (off the path). */
  afterHome(
    policies: readonly ResolvedPolicy[],
    region: string,
    denied: readonly { allowed: boolean; retryAfterMs: number; remaining: number }[],
    sentAt: number,
    waitUntil: WaitUntil | undefined,
  ): void;
  refund(receipt: RefundReceipt, only: readonly string[] | undefined): Promise<RefundOutcome>;
  /**
   * Isolate leases taken from a region's leases (lease-store.ts's interface): a take spends k
   * units of a live regional lease and lives no longer than it; a give-back returns units into
   * it while it lives, else to home by its stamp.
   */
  leaseStore(region: string): LeaseStore;
  /** Each region's breaker (tests and the dashboard). */
  readonly breakers: ReadonlyMap<string, CircuitBreaker>;
}

const DEFAULTS = { maxLifetimeMs: 10_000, transitMarginMs: 50, minUnits: 2 };
const REGION_MAX_COOLDOWN_MS = 2_000;

export function createRegionalLeases(
  ctx: LimiterContext,
  options: RegionsOptions,
  breakerOptions: Parameters<typeof createCircuitBreaker>[0],
): RegionalLeases {
  const timeoutMs = options.timeoutMs ?? ctx.timeoutMs;
  const maxLifetimeMs = options.maxLifetimeMs ?? DEFAULTS.maxLifetimeMs;
  const margin = options.transitMarginMs ?? DEFAULTS.transitMarginMs;
  const minUnits = options.minUnits ?? DEFAULTS.minUnits;
  const stores = new Map(Object.entries(options.stores));
  const breakers = new Map<string, CircuitBreaker>();
  // A region's store down costs a far round trip (home decides), not an outage: its breaker
  // probes again within REGION_MAX_COOLDOWN_MS, so a region that recovers is used again soon.
  const cooldownMs = Math.min(breakerOptions?.cooldownMs ?? 1_000, REGION_MAX_COOLDOWN_MS);
  for (const name of stores.keys()) {
    breakers.set(
      name,
      createCircuitBreaker({
        ...breakerOptions,
        cooldownMs,
        maxCooldownMs: Math.min(breakerOptions?.maxCooldownMs ?? 30_000, REGION_MAX_COOLDOWN_MS),
        now: ctx.now,
      }),
    );
  }
  // A claim to ask home outlives the grant's deadline and the put's: then another may ask.
  const claimMs = 2 * ctx.timeoutMs + 2 * timeoutMs;

  /** δ for a policy; 0: too short a window to lease across a region (the margins eat it). */
  function lifeOf(policy: ResolvedPolicy): number {
    const life = Math.min(maxLifetimeMs, Math.floor(policy.windowMs / 8));
    return spendableMs(life) - margin >= life / 2 ? life : 0;
  }

  function spendItem(policy: ResolvedPolicy): RegionSpendItem {
    return {
      redisKey: policy.redisKey,
      cost: policy.cost,
      lifeMs: lifeOf(policy),
      limit: policy.limit,
      minUnits,
      claimMs,
      wantLifeMs: 0,
    };
  }

  /** A region store call within the region's deadline, through its breaker. */
  async function inRegion<T>(
    region: string,
    work: (client: ScriptClient) => Promise<T>,
  ): Promise<T | undefined> {
    const store = stores.get(region);
    const breaker = breakers.get(region);
    if (!store || !breaker) return undefined;
    const permit = breaker.acquire();
    if (permit === "skip") return undefined;
    try {
      const result = await withinDeadline(store, timeoutMs, work);
      breaker.success(permit);
      return result;
    } catch (error) {
      breaker.failure(permit, error);
      ctx.onStoreError?.(error);
      return undefined;
    }
  }

  function background(work: Promise<unknown>, waitUntil: WaitUntil | undefined) {
    const settled = work.catch((error: unknown) => ctx.onStoreError?.(error));
    waitUntil?.(settled);
  }

  /** Units home still counts at `stamp` that nobody will spend: out of the log, exactly. */
  async function giveBack(
    policy: ResolvedPolicy,
    stamp: number,
    units: number,
    memberId: string,
    resetMark: string,
  ) {
    if (units <= 0 || ctx.breaker.state === "open") return;
    await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        refund(client, {
          policies: [{ ...policy, cost: units }],
          memberId,
          at: stamp,
          now,
          resetMarks: [resetMark],
        }),
      ),
    );
  }

  /** Asks home for `units` of the policy's key and writes the lease into the region. */
  async function grant(policy: ResolvedPolicy, region: string, units: number) {
    const life = lifeOf(policy);
    const memberId = nextMemberId();
    const sentAt = ctx.now();
    const release = { stamp: 0, units: 0, lifeMs: 0, memberId, resetMark: "" };
    let answer: Awaited<ReturnType<typeof evaluate>> | undefined;
    if (ctx.breaker.state !== "open") {
      try {
        answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
          ctx.clock.run(store, (client, now) =>
            evaluate(client, {
              policies: [{ ...policy, cost: units }],
              memberId,
              now,
              stampOffsetMs: life,
              resetMarks: "read",
            }),
          ),
        );
      } catch (error) {
        ctx.onStoreError?.(error);
      }
    }
    const elapsed = ctx.now() - sentAt;
    const only = answer?.policies[0];
    const lifeMs = spendableMs(life) - elapsed - margin;
    const granted = answer?.allowed === true && lifeMs >= life / 4;
    const resetMark = answer?.resetMarks?.[0] ?? "";
    const put = {
      redisKey: policy.redisKey,
      ...(granted && answer
        ? { stamp: answer.stamp, units, lifeMs, memberId, resetMark }
        : release),
      remaining: only ? Math.max(0, only.remaining) : -1,
      resetAfterMs: only ? Math.max(0, only.reset - only.now - elapsed) : 0,
      denyMs: 0,
      denyCost: 0,
      ttlMs: life * 2,
    };
    const taken = await inRegion(region, (client) => regionPut(client, put));
    if (answer?.allowed && !granted) {
      // Home recorded the units but too little life is left to spend them: give them back.
      await giveBack(policy, answer.stamp, units, memberId, resetMark);
    } else if (answer?.allowed && taken === undefined) {
      // The put failed: the units may or may not be in the region. Leave them to lapse (held
      // capacity until their stamp leaves the window, never an admission).
    }
    // Unspent units of the leases the put took out go back to home while capacity is scarce
    // (what home last reported is under half the limit). With plenty left they are left to
    // lapse: they hold capacity until their stamp leaves the window, and a far round trip per
    // lease to give back what nobody is short of would cost more than it frees.
    const scarce = only === undefined || only.remaining < policy.limit / 2;
    for (const lease of scarce ? (taken ?? []) : []) {
      await giveBack(policy, lease.stamp, lease.units, lease.memberId, lease.resetMark);
    }
  }

  return {
    breakers,

    applies(policies, region): region is string {
      if (region === undefined || !stores.has(region)) return false;
      return policies.every(
        (policy) => policy.lease && LEASABLE.has(policy.algorithm) && lifeOf(policy) > 0,
      );
    },

    async decide(policies, region, waitUntil) {
      const items = policies.map(spendItem);
      const answers = await inRegion(region, (client) => regionSpend(client, items));
      if (!answers) return undefined;
      const at = ctx.now();
      answers.forEach((answer, i) => {
        const policy = policies[i] as ResolvedPolicy;
        if (answer.claim > 0) background(grant(policy, region, answer.claim), waitUntil);
      });
      if (answers.every((answer) => answer.status === "spent")) {
        return {
          allowed: true,
          replayed: false,
          decisions: policies.map((policy, i) => {
            const answer = answers[i] as (typeof answers)[number];
            return fromRegion(policy, answer.remaining, answer.waitMs, at);
          }),
          receipt: {
            memberId: answers[0]?.memberId || "region",
            policies: policies.map((policy) => policy.name),
            resolved: policies,
            at: answers[0]?.stamp ?? 0,
            regional: {
              region,
              stamps: answers.map((answer) => answer.stamp),
              memberIds: answers.map((answer) => answer.memberId),
              resetMarks: answers.map((answer) => answer.resetMark),
            },
          },
        };
      }
      if (answers.some((answer) => answer.status === "denied")) {
        let longest = 0;
        const decisions = policies.map((policy, i) => {
          const answer = answers[i] as (typeof answers)[number];
          if (answer.status !== "denied") {
            return fromRegion(policy, answer.remaining + policy.cost, 0, at);
          }
          if (answer.waitMs > (answers[longest]?.waitMs ?? 0)) longest = i;
          return regionDenied(policy, answer.waitMs, at);
        });
        if (answers[longest]?.status !== "denied") {
          longest = answers.findIndex((answer) => answer.status === "denied");
        }
        return {
          allowed: false,
          replayed: false,
          decisions,
          deniedBy: policies[longest]?.name as string,
        };
      }
      return undefined;
    },

    afterHome(policies, region, answers, sentAt, waitUntil) {
      const elapsed = ctx.now() - sentAt;
      policies.forEach((policy, i) => {
        const answer = answers[i];
        // Only a denial is held: time alone frees capacity in a log, so it stays true until
        // home's Retry-After, counted here from before the call was sent (no later than home's).
        if (!answer || answer.allowed) return;
        const denyMs = answer.retryAfterMs - elapsed;
        if (denyMs <= margin) return;
        const put = {
          redisKey: policy.redisKey,
          stamp: 0,
          units: 0,
          lifeMs: 0,
          memberId: "",
          resetMark: "",
          remaining: Math.max(0, answer.remaining),
          resetAfterMs: 0,
          denyMs,
          denyCost: policy.cost,
          ttlMs: denyMs + 1,
        };
        // A denial means capacity is scarce: leases the put took out give their units back.
        const held = async () => {
          const taken = await inRegion(region, (client) => regionPut(client, put));
          for (const lease of taken ?? []) {
            await giveBack(policy, lease.stamp, lease.units, lease.memberId, lease.resetMark);
          }
        };
        background(held(), waitUntil);
      });
    },

    leaseStore(region) {
      return {
        async take(policy, units, lifetimeMs, _memberId, waitUntil) {
          const item = { ...spendItem(policy), cost: units, wantLifeMs: lifetimeMs };
          const store = stores.get(region);
          if (!store) throw new Error(`no store for region ${region}`);
          // Through the region's breaker, like a spend; a failure rejects (the book notes it).
          const breaker = breakers.get(region) as CircuitBreaker;
          const permit = breaker.acquire();
          if (permit === "skip") throw new Error(`region ${region}: breaker open`);
          let answer: Awaited<ReturnType<typeof regionSpend>>[number] | undefined;
          try {
            [answer] = await withinDeadline(store, timeoutMs, (client) =>
              regionSpend(client, [item]),
            );
            breaker.success(permit);
          } catch (error) {
            breaker.failure(permit, error);
            throw error;
          }
          if (!answer) throw new Error("empty region spend reply");
          if (answer.claim > 0) background(grant(policy, region, answer.claim), waitUntil);
          return {
            granted: answer.status === "spent",
            // The book ages `reset - now` on its own clock: a relative reset, from 0.
            now: 0,
            stamp: answer.stamp,
            remaining: answer.remaining,
            reset: answer.waitMs,
            resetMark: answer.resetMark,
            // The regional lease's life left, counted by the region from after this call was
            // sent: the isolate lease ends before it (and so before its stamp).
            lifetimeMs: answer.lifeLeftMs,
          };
        },
        async giveBack(lease, units) {
          const back = await inRegion(region, (client) =>
            regionReturn(client, lease.policy.redisKey, lease.stamp, units),
          );
          if (back === true) return units;
          // The region did not answer: the return may have landed; give back nothing twice.
          if (back === undefined) return 0;
          await giveBack(lease.policy, lease.stamp, units, lease.memberId, lease.resetMark);
          return units;
        },
      };
    },

    async refund(receipt, only) {
      const regional = receipt.regional as RegionalSpend;
      const units: number[] = [];
      for (let i = 0; i < receipt.resolved.length; i++) {
        const policy = receipt.resolved[i] as ResolvedPolicy;
        if (only !== undefined && !only.includes(policy.name)) continue;
        const stamp = regional.stamps[i] ?? 0;
        const back = await inRegion(regional.region, (client) =>
          regionReturn(client, policy.redisKey, stamp, policy.cost),
        );
        if (back !== false) {
          // Back in the lease; or the region did not answer, and then nothing is given back
          // anywhere: the return may have landed, and giving back twice would admit too much.
          units.push(back ? policy.cost : 0);
          continue;
        }
        // The lease has ended: its stamp is still in home's log until it leaves the window, so
        // the units go back there, by that stamp. (A put that took the lease out gave back only
        // its unspent units, never these.)
        try {
          await giveBack(
            policy,
            stamp,
            policy.cost,
            regional.memberIds[i] ?? "",
            regional.resetMarks[i] ?? "",
          );
          units.push(policy.cost);
        } catch (error) {
          ctx.onStoreError?.(error);
          units.push(0);
        }
      }
      return { refunded: units.some((n) => n > 0), units };
    },
  };
}
