/**
 * The two store calls a lease makes, and nothing else: take k units stamped in the future, and
 * give back n unspent units of a lease. Each is one script call within the limiter's deadline, on
 * the limiter's clock. The lease book (isolate-lease-book.ts) never sees Redis: only this interface.
 */
import { evaluate } from "../../store/evaluate";
import { fenceKey } from "../../store/placement-fence";
import { refund } from "../../store/refund";
import { withinDeadline } from "../../store/script-runner";
import type { LimiterContext } from "../context";
import { fenceError, tellRefusal } from "../placement-refusal";
import type { ResolvedPolicy } from "../resolved-policy";
import type { WaitUntil } from "../types";
import type { Lease } from "./lease";

/** What the store answered to a lease request. */
interface LeaseGrant {
  /** The store admitted all `units` (a lease is all or nothing, like any request). */
  granted: boolean;
  /** The store's clock when it decided (ms). */
  now: number;
  /** Where the units were stamped in the log: `now + lifetime` (store clock). */
  stamp: number;
  /** What the store reports as remaining after the grant (before it, when not granted). */
  remaining: number;
  /** Store-clock ms when capacity next frees (PolicyAnswer.reset). */
  reset: number;
  /** The key's reset mark it was granted under ('' for none): Lease.resetMark. */
  resetMark: string;
  /**
   * A shorter life than asked, counted from when the call was sent: a lease taken from a
   * regional lease lives no longer than what is left of that one (regional-leases.ts).
   */
  lifetimeMs?: number;
}

/** What a give-back names: the lease's key, its units' member id and stamp, its reset mark. */
type LeaseUnits = Pick<Lease, "policy" | "memberId" | "stamp" | "resetMark">;

export interface LeaseStore {
  /**
   * Asks the store for `units` of `policy` recorded as admissions at its now + `lifetimeMs`,
   * under `memberId`. Rejects on a store failure.
   */
  take(
    policy: ResolvedPolicy,
    units: number,
    lifetimeMs: number,
    memberId: string,
    waitUntil?: WaitUntil,
  ): Promise<LeaseGrant>;
  /**
   * Gives back `units` of the lease recorded under `memberId` at `stamp` (store clock): exactly
   * that many of its admissions leave the log, or fewer if fewer are left; none if the key was reset since the grant (its reset mark
   * changed: the reset already deleted them, and the log's units are other requests'). Resolves
   * to the units given back; rejects on a store failure.
   */
  giveBack(lease: LeaseUnits, units: number): Promise<number>;
}

/** The lease calls over the limiter's store, deadline and clock. */
export function createLeaseStore(ctx: LimiterContext): LeaseStore {
  return {
    async take(policy, units, lifetimeMs, memberId) {
      // A shard's grant is fenced as its decisions are (store/placement-fence.ts): by the
      // placement in force when it was asked for, so a stale isolate's lease is refused too.
      const view = ctx.placementView?.(ctx.now());
      const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
        ctx.clock.run(store, (client, now) =>
          evaluate(client, {
            policies: [{ ...policy, cost: units }],
            memberId,
            now,
            stampOffsetMs: lifetimeMs,
            resetMarks: "read",
            fence: view && { key: fenceKey(ctx.prefix), view },
          }),
        ),
      );
      if (answer.fenced) tellRefusal(ctx, fenceError(answer.fenced, view));
      const only = answer.policies[0];
      return {
        granted: answer.allowed,
        now: answer.now,
        stamp: answer.stamp,
        remaining: only?.remaining ?? 0,
        reset: only?.reset ?? answer.now,
        resetMark: answer.resetMarks?.[0] ?? "",
      };
    },
    async giveBack({ policy, memberId, stamp, resetMark }, units) {
      // The ring gives back `units` admissions stamped `stamp`: exactly these.
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
      // (More only if an earlier give-back failed: those were unspent units, never used.)
      return Math.min(units, answer.units[0] ?? 0);
    },
  };
}
