/**
 * A lease book's contract (isolate-lease-book.ts implements it): what it is given, and what the limiter
 * asks of it — spend from live leases, wait for a key's lease call, learn from a store answer,
 * refund, end and drop leases.
 */

import type { ResolvedPolicy } from "../resolved-policy";
import type { WaitUntil } from "../types";
import type { LeaseStore } from "./isolate-lease-store";
import type { LeaseSpend } from "./lease";
import type { LeaseSizing } from "./lease-sizing";

export interface LeaseBookDeps {
  sizing: LeaseSizing;
  store: LeaseStore;
  /** The isolate clock (ms). */
  now: () => number;
  /** How long a lease call is trusted to settle (the limiter's timeout). */
  timeoutMs: number;
  /**
   * End each lease on time with a timer (real time). Off with an injected clock, which a real
   * timer cannot wait for: leases then end when their key is next touched, or by endAll.
   */
  timers: boolean;
  /** True while the breaker is open: no lease calls then (the store is not answering). */
  storeDown: () => boolean;
  /** A give-back freed capacity of these keys (the denial cache must forget them). */
  capacityFreed: (cacheKeys: string[]) => void;
  onStoreError: ((error: unknown) => void) | undefined;
  /**
   * Keep each key's own-units ledger (isolate-lease-own.ts), so that a lease may take all that remains
   * when this isolate holds the whole window. Off where the store's `remaining` is not the
   * key's window (leases taken from a region's lease).
   */
  soleShare?: boolean;
}

/** What a store decision said besides what remains: for the own-units ledger (isolate-lease-own.ts). */
interface StoreAnswered {
  /** The store's clock when it decided, and where it stamped the admissions. */
  now: number;
  stamp: number;
  /** Every policy admitted its cost. */
  allowed: boolean;
}

export interface LeaseBook {
  /**
   * Counts the request's demand (not `again`: the same request after waiting for a lease), then
   * spends every policy's cost from live leases, all or nothing: the spends, or undefined
   * (nothing spent) when any policy cannot be paid locally. Starts a renewal where a lease runs
   * low. Call only for requests without a request id.
   */
  spend(
    policies: readonly ResolvedPolicy[],
    at: number,
    waitUntil: WaitUntil | undefined,
    again?: boolean,
  ): LeaseSpend[] | undefined;
  /**
   * A lease call for this key in flight (started now if the key is hot and has none): settles
   * when its lease can be spent (or it failed, or its deadline passed). Undefined: none, ask the
   * store. A burst on a hot key whose lease has ended then costs one round trip, not one each.
   */
  pending(
    policy: ResolvedPolicy,
    at: number,
    waitUntil: WaitUntil | undefined,
  ): Promise<void> | undefined;
  /**
   * The store decided the request (its policies' Redis keys built): note what it said remains,
   * and lease hot keys. `answered` (a decision of the key's own store) feeds the own-units ledger.
   */
  afterStore(
    policies: readonly ResolvedPolicy[],
    remaining: readonly number[],
    at: number,
    waitUntil: WaitUntil | undefined,
    answered?: StoreAnswered,
  ): void;
  /**
   * Gives back `cost` spent units of a lease (a refund of a request it paid for): into the lease
   * while it lives (it is spent again or given back at its end), else to the store.
   */
  refund(spend: LeaseSpend): Promise<number>;
  /** Ends every lease now and gives back their unspent units (tests, shutdown). */
  endAll(): Promise<void>;
  /**
   * The Redis key `storageKey` was reset (by this isolate: forget): its leases here end with
   * nothing given back — the reset deleted their units, and a give-back would free units of the
   * log it started, other requests' — and its keys' state starts afresh. A lease call in flight
   * for it finds its state gone and gives its grant back (refused by the store if granted before
   * the reset: its reset mark changed).
   */
  drop(storageKey: string): void;
  /** Units left in live leases of a key (tests, remaining). */
  liveUnits(cacheKey: string, at: number): number;
  /** What the store last reported as remaining for a key (excludes this isolate's leases). */
  lastRemaining(cacheKey: string): number | undefined;
}
