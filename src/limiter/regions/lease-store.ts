/**
 * Isolate leases taken from a region's leases: isolate-lease-store.ts's interface over a region, so the
 * lease book works unchanged one level down. A take spends k units of a live regional lease and
 * lives no longer than it (the proof in regional-leases.ts); a give-back returns units into it
 * while it lives, else to home by its stamp.
 */
import { regionReturn, regionSpend } from "../../store/region-lease";
import type { LeaseStore } from "../leases/isolate-lease-store";
import type { RegionalGrants } from "./lease-grants";
import type { RegionStores } from "./region-stores";

export function regionalLeaseStore(
  region: string,
  regions: RegionStores,
  grants: RegionalGrants,
): LeaseStore {
  return {
    async take(policy, units, lifetimeMs, _memberId, waitUntil) {
      const item = { ...grants.spendItem(policy), cost: units, wantLifeMs: lifetimeMs };
      // Through the region's breaker, like a spend; but a failure rejects (the book notes it).
      // Off the request path (a request waits for it only while its isolate's lease is spent
      // and this is in flight), so the region's own deadline, not home's round trip: a slow
      // region still serves isolate leases, which then decide with no round trip at all.
      const [answer] = await regions.inRegion(region, (client) => regionSpend(client, [item]), {
        rethrow: true,
      });
      if (!answer) throw new Error("empty region spend reply");
      grants.grantClaimed(policy, region, answer, waitUntil);
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
      const back = await regions.inRegion(region, (client) =>
        regionReturn(client, lease.policy.redisKey, lease.stamp, units),
      );
      if (back === true) return units;
      // The region did not answer: the return may have landed; give back nothing twice.
      if (back === undefined) return 0;
      return grants.giveBack(lease.policy, lease.stamp, units, lease.memberId, lease.resetMark);
    },
  };
}
