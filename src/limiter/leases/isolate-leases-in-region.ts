/**
 * Isolate leases on top of regional ones (docs/regions.md): in a region, an isolate leases from
 * the region's leases, not from home, in one lease book per region built on first use. This is
 * step 0 of store-limiter.ts's flow for a request in a region: paid from a lease this isolate
 * took from the region, else from the region's leases in one near round trip, or denied there
 * from a denial home decided.
 */
import type { LimiterContext } from "../context";
import type { CountedReceipt } from "../receipt-state";
import type { RegionalLeases } from "../regions/regional-leases";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision, WaitUntil } from "../types";
import { createLimiterLeases, type LimiterLeases } from "./isolate-leases";
import type { LeaseOptions } from "./lease-sizing";

export interface RegionBooks {
  /** The request decided in `region`, or undefined: ask home. */
  decide(
    policies: readonly ResolvedPolicy[],
    region: string,
    waitUntil: WaitUntil | undefined,
  ): Promise<MultiDecision | undefined>;
  /** The book whose leases paid a receipt (receipt.leasedIn), if this isolate built it. */
  paid(receipt: CountedReceipt): LimiterLeases | undefined;
  /** Every book built so far, in the order they were built. */
  built(): Iterable<LimiterLeases>;
}

export function createRegionBooks(
  ctx: LimiterContext,
  options: LeaseOptions | false | undefined,
  regional: RegionalLeases,
): RegionBooks {
  const books = new Map<string, LimiterLeases>();

  function bookIn(region: string): LimiterLeases | undefined {
    const built = books.get(region);
    if (built || options === false) return built;
    const book = createLimiterLeases(ctx, options, {
      region,
      store: regional.leaseStore(region),
      storeDown: () => regional.regionDown(region),
    });
    if (book) books.set(region, book);
    return book;
  }

  return {
    async decide(policies, region, waitUntil) {
      const book = bookIn(region);
      let local = book?.decide(policies, waitUntil);
      // (A promise only while the key's lease call is in flight: this request waits for it.)
      if (local instanceof Promise) local = await local;
      if (local) return local;
      const decidedThere = await regional.decide(policies, region, waitUntil);
      // A key this isolate asks often gets an isolate lease from the region (off the path).
      if (decidedThere?.allowed) {
        book?.book.afterStore(
          policies,
          decidedThere.decisions.map((decision) => decision.remaining),
          ctx.now(),
          waitUntil,
        );
      }
      return decidedThere;
    },

    paid(receipt) {
      if (!receipt.leased || receipt.leasedIn === undefined) return undefined;
      return books.get(receipt.leasedIn);
    },

    built: () => books.values(),
  };
}
