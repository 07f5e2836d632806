/**
 * The limiter's side of leases: the lease book built from the limiter's context, and the three
 * hooks store-limiter.ts calls — decide a request from leases, tell the book what the store
 * answered, refund a request leases paid for. The book (isolate-lease-book.ts) keeps the leases; this
 * file turns its spends into decisions and receipts.
 */
import type { EvaluateAnswer } from "../../store/evaluate";
import { capacityFreed, type LimiterContext } from "../context";
import { fromLease } from "../decisions";
import { type CountedReceipt, countedReceipt } from "../receipt-state";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision, RefundOutcome, WaitUntil } from "../types";
import { createLeaseBook } from "./isolate-lease-book";
import type { LeaseBook } from "./isolate-lease-book-contract";
import { createLeaseStore, type LeaseStore } from "./isolate-lease-store";
import type { LeaseSpend } from "./lease";
import { type LeaseOptions, resolveLeaseSizing } from "./lease-sizing";

export interface LimiterLeases {
  /**
   * The request decided from this isolate's leases, or undefined: ask the store. A promise when
   * the request waits for its key's lease call in flight (one policy, a hot key whose lease
   * ran out): then it is decided from that lease, or from the store if it still cannot pay.
   */
  decide(
    policies: readonly ResolvedPolicy[],
    waitUntil: WaitUntil | undefined,
  ): MultiDecision | Promise<MultiDecision | undefined> | undefined;
  /** The store answered this request: the book learns what remains, and leases hot keys. */
  afterStore(
    policies: readonly ResolvedPolicy[],
    answer: EvaluateAnswer,
    waitUntil: WaitUntil | undefined,
  ): void;
  /** Refund of a request leases paid for (receipt.leased). */
  refund(receipt: CountedReceipt, only: readonly string[] | undefined): Promise<RefundOutcome>;
  endAll(): Promise<void>;
  readonly book: LeaseBook;
}

/** Leases taken from a region's leases, not from home (isolate-leases-in-region.ts). */
export interface RegionLeaseSource {
  region: string;
  store: LeaseStore;
  /** Whether the region's store is not being asked now. */
  storeDown: () => boolean;
}

/**
 * Undefined when leases are off (`leases: false`). Leases come from home, or with `inRegion`
 * from that region's leases: then every receipt names the region (leasedIn), so that its
 * refund goes back through this book.
 */
export function createLimiterLeases(
  ctx: LimiterContext,
  options: LeaseOptions | false | undefined,
  inRegion?: RegionLeaseSource,
): LimiterLeases | undefined {
  if (options === false) return undefined;
  const book = createLeaseBook({
    sizing: resolveLeaseSizing(options),
    store: inRegion?.store ?? createLeaseStore(ctx),
    now: ctx.now,
    timers: ctx.now === Date.now,
    timeoutMs: ctx.timeoutMs,
    storeDown: inRegion?.storeDown ?? (() => ctx.breaker.state === "open"),
    capacityFreed: (keys) => capacityFreed(ctx, keys),
    onStoreError: ctx.onStoreError,
    // A region's grant reports what its regional lease has left, not the key's window.
    soleShare: inRegion === undefined,
  });

  function decided(
    policies: readonly ResolvedPolicy[],
    spends: readonly LeaseSpend[],
    at: number,
  ): MultiDecision {
    const decisions = policies.map((policy, i) => {
      const spend = spends[i] as LeaseSpend;
      const remaining =
        (book.lastRemaining(policy.cacheKey) ?? 0) + book.liveUnits(policy.cacheKey, at);
      return fromLease(policy, spend.lease, remaining, at);
    });
    const first = spends[0] as LeaseSpend;
    return {
      allowed: true,
      decisions,
      replayed: false,
      receipt: countedReceipt({
        memberId: first.lease.memberId,
        policies: policies.map((policy) => policy.name),
        costs: policies.map((policy) => policy.cost),
        resolved: policies,
        at: first.lease.stamp,
        leased: spends,
        ...(inRegion ? { leasedIn: inRegion.region } : {}),
      }),
    };
  }

  return {
    book,
    decide(policies, waitUntil) {
      // Cheap exit for the common case: no policy of the request asked for leases.
      if (!policies.some((policy) => policy.lease)) return undefined;
      const at = ctx.now();
      const spends = book.spend(policies, at, waitUntil);
      if (spends) return decided(policies, spends, at);
      // One policy: wait for its key's lease call rather than make a call of its own.
      const only = policies.length === 1 ? policies[0] : undefined;
      const pending = only && book.pending(only, at, waitUntil);
      if (!pending) return undefined;
      return pending.then(() => {
        const later = ctx.now();
        const paid = book.spend(policies, later, waitUntil, true);
        return paid ? decided(policies, paid, later) : undefined;
      });
    },

    afterStore(policies, answer, waitUntil) {
      if (answer.replayed || answer.conflict || !policies.some((policy) => policy.lease)) return;
      book.afterStore(
        policies,
        answer.policies.map((policy) => policy.remaining),
        ctx.now(),
        waitUntil,
        { now: answer.now, stamp: answer.stamp, allowed: answer.allowed },
      );
    },

    async refund(receipt, only) {
      const leased = receipt.leased ?? [];
      const units: number[] = [];
      for (let i = 0; i < receipt.resolved.length; i++) {
        const policy = receipt.resolved[i] as ResolvedPolicy;
        const spend = leased[i];
        if (only !== undefined && !only.includes(policy.name)) continue;
        units.push(spend ? await book.refund(spend) : 0);
      }
      // Given back into a live lease, capacity is not freed in the log (the units are spent
      // again or given back at the lease's end); this isolate's denial claims stay true.
      return { refunded: units.some((n) => n > 0), units };
    },

    endAll: () => book.endAll(),
  };
}
