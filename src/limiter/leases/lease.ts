import type { ResolvedPolicy } from "../resolved-policy";

/**
 * How long a lease of this lifetime is spent: all but its last tenth (at least 1 ms). The tenth
 * is slack for the isolate clock, which may lag real time — workerd's Date.now() advances only
 * with I/O (a request's arrival, a timer, a fetch answered) — so a unit is never spent after its
 * stamp even by an isolate that has run a while without I/O.
 */
export function spendableMs(lifetime: number): number {
  return Math.max(1, lifetime - Math.max(1, Math.floor(lifetime / 10)));
}

/**
 * The policy a lease is bound to: what it was granted under (algorithm, limit, window). The cost
 * bounds follow from them (a cost from 1 to the limit; a lease of at most min(limit, 1 000)
 * units), and so does its life (a share of the window). A lease is spent only by a request of the
 * same policy; one of another (a downgrade, a deploy, a per-request limit) goes to the level above
 * and the lease ends at once: its units were counted against the old limit, and spending them
 * under a lower one would admit past it (docs/leases.md, "A change of policy").
 */
export type LeasePolicy = Pick<ResolvedPolicy, "algorithm" | "limit" | "windowMs">;

/** Whether a lease granted under `granted` may pay for a request of `policy`. */
export function samePolicy(granted: LeasePolicy, policy: LeasePolicy): boolean {
  return (
    granted.limit === policy.limit &&
    granted.windowMs === policy.windowMs &&
    granted.algorithm === policy.algorithm
  );
}

/**
 * The policy as one string, for a lease kept where no ResolvedPolicy is (a region's store: the
 * field `p` of each lease there, compared by its spend script).
 */
export function policyFingerprint(policy: LeasePolicy): string {
  return `${policy.algorithm}/${policy.limit}/${policy.windowMs}`;
}

/** One lease: units of one key recorded in the log at `stamp`, spendable until `deadline`. */
export interface Lease {
  readonly memberId: string;
  /**
   * The policy as leased (Redis key, algorithm, limit, window): what a give-back sends, and the
   * only policy it pays for (samePolicy).
   */
  readonly policy: ResolvedPolicy;
  /** Units granted. */
  readonly granted: number;
  /** Units left to spend. */
  units: number;
  /** Isolate clock: the last instant a unit may be spent (exclusive). */
  readonly deadline: number;
  /** Store clock: where its units are in the log. */
  readonly stamp: number;
  /**
   * The key's reset mark when the store granted it ('' for none). Every give-back carries it:
   * after a reset of the key the store refuses it, for the log then holds only other requests'
   * units (the reset deleted this lease's).
   */
  readonly resetMark: string;
  /** Store clock: when the store granted it. */
  readonly storeNow: number;
  /** Isolate clock: when the grant was asked for (the store's now is no earlier). */
  readonly sentAt: number;
  /** Store clock: when capacity next frees, as the grant reported it. */
  readonly reset: number;
  /** Ended: nothing more is spent from it, its unspent units were (or are being) given back. */
  ended: boolean;
}

/** What spending one request's cost of one policy took: the lease it came from. */
export interface LeaseSpend {
  readonly lease: Lease;
  readonly cost: number;
}
