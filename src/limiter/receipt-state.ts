/**
 * A refund receipt as the limiter made it: the public fields (types.ts) and the limiter's own
 * record of how each policy was counted, which a caller passes back untouched. Only the limiter
 * reads these; a receipt handed back is checked before any is used (checkReceipt).
 */
import type { LeaseSpend } from "./leases/lease";
import type { ResolvedPolicy } from "./resolved-policy";
import type { RefundReceipt } from "./types";

/** Where a request paid from regional leases took each policy's units (CountedReceipt.regional). */
export interface RegionalSpend {
  region: string;
  /** Per policy, the stamp of the lease it was paid from, and its reset mark at home. */
  stamps: readonly number[];
  memberIds: readonly string[];
  resetMarks: readonly string[];
}

export interface CountedReceipt extends RefundReceipt {
  /**
   * Every policy as it was evaluated (Redis key, algorithm, limit, window, cost, denial-cache
   * key), parallel to `policies`.
   */
  resolved: readonly ResolvedPolicy[];
  /**
   * Parallel to `resolved`: where each weighted log's entry went (store/evaluate.ts offsets; -1
   * for another algorithm). A settle writes there at once; without it (a receipt from before
   * offsets) it searches the log.
   */
  offsets?: readonly number[];
  /** For a request paid from leases, where each policy's units came from. */
  leased?: readonly LeaseSpend[];
  /** For a request paid from regional leases, which region and leases paid. */
  regional?: RegionalSpend;
  /** For a request paid from isolate leases taken from a region, that region. */
  leasedIn?: string;
  /** A sharded limiter's: the shard that counted it (docs/shards.md). */
  shard?: string;
  /**
   * A sharded limiter's request counted on several shards: each shard's receipt, whose
   * policies are the request's at `indices` (a refund gives each part back on its shard).
   */
  parts?: readonly { shard: string; indices: readonly number[]; receipt: CountedReceipt }[];
}

/** A receipt as MultiDecision carries it: the public type, the limiter's record beside it. */
export const countedReceipt = (receipt: CountedReceipt): CountedReceipt => receipt;
