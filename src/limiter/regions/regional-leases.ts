/**
 * Regional leases (docs/regions.md): the isolate lease one level up. Home keeps the exact log
 * and grants a region k units stamped at s = t + δ; the region's own store holds them, and any
 * isolate in the region spends them in one near round trip. No lease with room: the request is
 * decided at home as without regions, and a key warm in the region gets a lease off the request
 * path.
 *
 * Why it stays exact: the proof of isolate leases (lease.ts), unchanged, given that no unit is
 * spent after s on home's clock. The spend that claims a lease runs at r0 on the region's clock
 * and answers it; only then is the grant sent, so home decides at some t later than r0 (in real
 * time) and stamps s = t + δ. The put writes the lease's end as r0 + spendableMs(δ) on the
 * region's clock and is refused if that has passed when it runs; the spend script pays only
 * before the end. So every unit is spent before r0 + δ < t + δ = s, in real time, whatever the
 * grant's and the put's transit, retries or queueing. No clock offset enters (the region's
 * clock is compared only with itself); clock rates are taken as equal (ppm drift is covered many
 * times by the tenth of δ spendableMs keeps). An isolate lease taken from a region's lease lives
 * no longer than what that lease had left when the take ran (after the isolate sent it).
 * The proof counts stamps against one limit: every lease is bound to the policy it was granted
 * under (lease.ts samePolicy; in a region its fingerprint, the hash's `p<s>`), spent only by a
 * request of that policy, and ended by the first request of another (which goes home).
 *
 * This file decides a request in its region and refunds one paid there; the regions' stores and
 * breakers are region-stores.ts, what home writes into a region regional-lease-grants.ts, and isolate
 * leases over a region regional-lease-store.ts.
 */

import { LEASABLE } from "../../store/algorithm";
import { STAMP_AHEAD_MAX_MS } from "../../store/keys";
import { regionReturn, regionSpend } from "../../store/region-lease";
import type { CircuitBreaker, CircuitBreakerOptions } from "../circuit-breaker";
import type { LimiterContext } from "../context";
import { fromRegion, regionDenied } from "../decisions";
import type { LeaseStore } from "../leases/isolate-lease-store";
import type { RegionsOptions } from "../limiter-options";
import { type CountedReceipt, countedReceipt, type RegionalSpend } from "../receipt-state";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision, RefundOutcome, WaitUntil } from "../types";
import { createRegionalGrants } from "./lease-grants";
import { regionalLeaseStore } from "./lease-store";
import { createRegionStores } from "./region-stores";
import { createRoundTrip } from "./round-trip";

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
  refund(receipt: CountedReceipt, only: readonly string[] | undefined): Promise<RefundOutcome>;
  /**
   * Isolate leases taken from a region's leases (isolate-lease-store.ts's interface): a take spends k
   * units of a live regional lease and lives no longer than it; a give-back returns units into
   * it while it lives, else to home by its stamp.
   */
  leaseStore(region: string): LeaseStore;
  /** Whether a region's store is not being asked now (its breaker is open). */
  regionDown(region: string): boolean;
  /**
   * Home answered a call `ms` after it was sent: a region slower than that is not waited for on
   * the request path (region-stores.ts).
   */
  homeAnswered(ms: number): void;
  /** Each region's breaker (tests and the dashboard). */
  readonly breakers: ReadonlyMap<string, CircuitBreaker>;
}

const DEFAULTS = { maxLifetimeMs: 10_000, minUnits: 2 };
/** The shortest home denial worth holding in a region (ms). */
const MIN_HELD_DENIAL_MS = 20;

export function createRegionalLeases(
  ctx: LimiterContext,
  options: RegionsOptions,
  breakerOptions: CircuitBreakerOptions | undefined,
): RegionalLeases {
  const timeoutMs = options.timeoutMs ?? ctx.timeoutMs;
  const maxLifetimeMs = options.maxLifetimeMs ?? DEFAULTS.maxLifetimeMs;
  const minUnits = options.minUnits ?? DEFAULTS.minUnits;
  // A lease stamped further ahead than the store takes would make every grant throw, a
  // fractional count would never be reached: refuse them here, naming the option.
  if (!Number.isInteger(maxLifetimeMs) || maxLifetimeMs < 1 || maxLifetimeMs > STAMP_AHEAD_MAX_MS) {
    throw new RangeError(
      `regions.maxLifetimeMs must be an integer from 1 to ${STAMP_AHEAD_MAX_MS} (got ${String(maxLifetimeMs)})`,
    );
  }
  if (!Number.isInteger(minUnits) || minUnits < 1) {
    throw new RangeError(`regions.minUnits must be a positive integer (got ${String(minUnits)})`);
  }
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) {
    throw new RangeError(`regions.timeoutMs must be a positive integer (got ${String(timeoutMs)})`);
  }
  const home = createRoundTrip();
  const regions = createRegionStores(ctx, options.stores, timeoutMs, breakerOptions, home);
  const grants = createRegionalGrants(ctx, regions, home, { maxLifetimeMs, minUnits, timeoutMs });
  const { inRegion } = regions;

  return {
    breakers: regions.breakers,

    applies(policies, region): region is string {
      if (!regions.has(region)) return false;
      if (
        !policies.every(
          (policy) => policy.lease && LEASABLE.has(policy.algorithm) && grants.lifeOf(policy) > 0,
        )
      ) {
        return false;
      }
      // One key twice in a request breaks limitAll's contract (distinct policies); the spend
      // script would read its lease twice and take one cost off: such a request goes home.
      if (policies.length > 1) {
        const seen = new Set<string>();
        for (const policy of policies) {
          const id = `${policy.name}\u0000${policy.algorithm}\u0000${policy.clientKey}`;
          if (seen.has(id)) return false;
          seen.add(id);
        }
      }
      return true;
    },

    async decide(policies, region, waitUntil) {
      const items = policies.map(grants.spendItem);
      const answers = await inRegion(region, (client) => regionSpend(client, items), {
        onPath: true,
      });
      if (!answers) return undefined;
      const at = ctx.now();
      answers.forEach((answer, i) => {
        grants.grantClaimed(policies[i] as ResolvedPolicy, region, answer, waitUntil);
      });
      if (answers.every((answer) => answer.status === "spent")) {
        return {
          allowed: true,
          replayed: false,
          decisions: policies.map((policy, i) => {
            const answer = answers[i] as (typeof answers)[number];
            return fromRegion(policy, answer.remaining, answer.waitMs, at);
          }),
          receipt: countedReceipt({
            memberId: answers[0]?.memberId || "region",
            policies: policies.map((policy) => policy.name),
            costs: policies.map((policy) => policy.cost),
            resolved: policies,
            at: answers[0]?.stamp ?? 0,
            regional: {
              region,
              stamps: answers.map((answer) => answer.stamp),
              memberIds: answers.map((answer) => answer.memberId),
              resetMarks: answers.map((answer) => answer.resetMark),
            },
          }),
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
        // (It may hold a little longer than that, by the put's transit: a late end only denies,
        // never admits.) Too short to be worth a put: not held.
        const denyMs = answer.retryAfterMs - elapsed;
        if (denyMs < MIN_HELD_DENIAL_MS) return;
        grants.holdDenial(policy, region, answer.remaining, denyMs, waitUntil);
      });
    },

    regionDown: regions.down,

    homeAnswered: (ms) => home.observe(ms),

    leaseStore: (region) => regionalLeaseStore(region, regions, grants),

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
          // What home took back, as its script answered: none after a reset (the lease's reset
          // mark is no longer the key's), and then the refund says so.
          units.push(
            await grants.giveBack(
              policy,
              stamp,
              policy.cost,
              regional.memberIds[i] ?? "",
              regional.resetMarks[i] ?? "",
            ),
          );
        } catch (error) {
          ctx.onStoreError?.(error);
          units.push(0);
        }
      }
      return { refunded: units.some((n) => n > 0), units };
    },
  };
}
