/**
 * What home writes into a region, off the request path, and what goes back to home: a lease home
 * grants for a claim a spend made, a denial home decided, and the units of leases nobody will
 * spend. Why a granted lease stays exact is the header of regional-leases.ts; this file is where
 * the stamp and the lease's end are set.
 */
import { evaluate } from "../../store/evaluate";
import { refund } from "../../store/refund";
import {
  type RegionSpendAnswer,
  type RegionSpendItem,
  regionPut,
  type TakenLease,
} from "../../store/region-lease";
import { withinDeadline } from "../../store/script-runner";
import type { LimiterContext } from "../context";
import { policyFingerprint, spendableMs } from "../leases/lease";
import { nextMemberId } from "../member-id";
import type { ResolvedPolicy } from "../resolved-policy";
import type { WaitUntil } from "../types";
import type { RegionStores } from "./region-stores";
import type { RoundTrip } from "./round-trip";

/** RegionsOptions as resolved and checked (regional-leases.ts). */
export interface RegionalSizing {
  /** The longest a regional lease lives (ms). */
  maxLifetimeMs: number;
  /** A lease below this many units is not asked for. */
  minUnits: number;
  /** The regions' deadline (ms). */
  timeoutMs: number;
}

export interface RegionalGrants {
  /** δ for a policy; 0: too short a window to lease across a region (a grant's trip eats it). */
  lifeOf(policy: ResolvedPolicy): number;
  /** What a spend from the region's leases asks of the policy's key. */
  spendItem(policy: ResolvedPolicy): RegionSpendItem;
  /** A spend that claimed the key's next lease: home's grant, written into the region. */
  grantClaimed(
    policy: ResolvedPolicy,
    region: string,
    answer: RegionSpendAnswer,
    waitUntil: WaitUntil | undefined,
  ): void;
  /** Home's denial held in the region for `denyMs`. */
  holdDenial(
    policy: ResolvedPolicy,
    region: string,
    remaining: number,
    denyMs: number,
    waitUntil: WaitUntil | undefined,
  ): void;
  /**
   * Units home still counts at `stamp` that nobody will spend: out of the log, exactly. Resolves
   * to the units home took back, as its refund script answered: 0 when nothing was asked (home's
   * breaker is open: they lapse, held until they leave the window) or when home refused them
   * (the key was reset since the grant: the reset already deleted them).
   */
  giveBack(
    policy: ResolvedPolicy,
    stamp: number,
    units: number,
    memberId: string,
    resetMark: string,
  ): Promise<number>;
}

/** The shortest regional lease worth writing (ms): a window under 8 × this is decided at home. */
const MIN_LIFE_MS = 100;

export function createRegionalGrants(
  ctx: LimiterContext,
  regions: RegionStores,
  /** Home's round trip, which a grant's answer measures too (region-stores.ts reads it). */
  home: RoundTrip,
  sizing: RegionalSizing,
): RegionalGrants {
  const { maxLifetimeMs, minUnits } = sizing;
  // A claim to ask home outlives the grant's deadline and the put's: then another may ask.
  const claimMs = 2 * ctx.timeoutMs + 2 * sizing.timeoutMs;

  function lifeOf(policy: ResolvedPolicy): number {
    const life = Math.min(maxLifetimeMs, Math.floor(policy.windowMs / 8));
    return life >= MIN_LIFE_MS ? life : 0;
  }

  function background(work: Promise<unknown>, waitUntil: WaitUntil | undefined) {
    const settled = work.catch((error: unknown) => ctx.onStoreError?.(error));
    waitUntil?.(settled);
  }

  async function giveBack(
    policy: ResolvedPolicy,
    stamp: number,
    units: number,
    memberId: string,
    resetMark: string,
  ): Promise<number> {
    if (units <= 0) return 0;
    if (ctx.breaker.state === "open") return 0;
    const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
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
    return answer.units[0] ?? 0;
  }

  /** The unspent units of leases a put took out of the region, back to home. */
  async function giveBackTaken(policy: ResolvedPolicy, taken: readonly TakenLease[]) {
    for (const lease of taken) {
      await giveBack(policy, lease.stamp, lease.units, lease.memberId, lease.resetMark);
    }
  }

  /**
   * Asks home for `units` of the policy's key and writes the lease into the region, for the
   * claim a spend made at `regionNow` (the region's clock): the lease ends at regionNow +
   * spendableMs(δ) there, before its stamp (the proof in regional-leases.ts).
   */
  async function grant(policy: ResolvedPolicy, region: string, units: number, regionNow: number) {
    const life = lifeOf(policy);
    const memberId = nextMemberId();
    const sentAt = ctx.now();
    const claim = regionNow + claimMs;
    // Home not answering: keep the claim until it expires (no put), so that every spend in the
    // region does not claim, fail and release again.
    if (ctx.breaker.state === "open") return;
    const release = { stamp: 0, units: 0, endsAt: 0, memberId, resetMark: "" };
    let answer: Awaited<ReturnType<typeof evaluate>> | undefined;
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
    const elapsed = ctx.now() - sentAt;
    if (answer) home.observe(elapsed);
    const only = answer?.policies[0];
    const endsAt = regionNow + spendableMs(life);
    const resetMark = answer?.resetMarks?.[0] ?? "";
    const put = {
      redisKey: policy.redisKey,
      ...(answer?.allowed ? { stamp: answer.stamp, units, endsAt, memberId, resetMark } : release),
      claim,
      remaining: only ? Math.max(0, only.remaining) : -1,
      resetAfterMs: only ? Math.max(0, only.reset - only.now - elapsed) : 0,
      denyMs: 0,
      denyCost: 0,
      ttlMs: life * 2,
      // The lease is bound to the policy home granted it under (lease.ts samePolicy).
      policy: policyFingerprint(policy),
    };
    const wrote = await regions.inRegion(region, (client) => regionPut(client, put));
    if (answer?.allowed && wrote?.refused) {
      // The put ran after the lease's end (a slow grant or put): its units were never written
      // anywhere, so they go back to home exactly.
      await giveBack(policy, answer.stamp, units, memberId, resetMark);
    }
    // (A put that failed may or may not have run: its units are left to lapse, held capacity
    // until their stamp leaves the window, never an admission.)
    // Unspent units of the leases the put took out go back to home while capacity is scarce
    // (what home last reported is under half the limit). With plenty left they are left to
    // lapse: they hold capacity until their stamp leaves the window, and a far round trip per
    // lease to give back what nobody is short of would cost more than it frees.
    const scarce = only === undefined || only.remaining < policy.limit / 2;
    if (scarce) await giveBackTaken(policy, wrote?.taken ?? []);
  }

  async function holdDenial(
    policy: ResolvedPolicy,
    region: string,
    remaining: number,
    denyMs: number,
  ) {
    const put = {
      redisKey: policy.redisKey,
      stamp: 0,
      units: 0,
      endsAt: 0,
      // Answers no claim: releases none.
      claim: -1,
      memberId: "",
      resetMark: "",
      remaining: Math.max(0, remaining),
      resetAfterMs: 0,
      denyMs,
      denyCost: policy.cost,
      ttlMs: denyMs + 1,
      // It denies only requests of this policy: a raised limit is decided at home at once.
      policy: policyFingerprint(policy),
    };
    const wrote = await regions.inRegion(region, (client) => regionPut(client, put));
    // A denial means capacity is scarce: leases the put took out give their units back.
    await giveBackTaken(policy, wrote?.taken ?? []);
  }

  return {
    lifeOf,
    spendItem: (policy) => ({
      redisKey: policy.redisKey,
      cost: policy.cost,
      lifeMs: lifeOf(policy),
      limit: policy.limit,
      minUnits,
      claimMs,
      wantLifeMs: 0,
      policy: policyFingerprint(policy),
    }),
    grantClaimed(policy, region, answer, waitUntil) {
      if (answer.claim > 0) {
        background(grant(policy, region, answer.claim, answer.regionNow), waitUntil);
      }
    },
    holdDenial(policy, region, remaining, denyMs, waitUntil) {
      background(holdDenial(policy, region, remaining, denyMs), waitUntil);
    },
    giveBack,
  };
}
