/**
 * What one request's rules decided together: the one shape the pipeline, the middleware and the
 * refund read, whatever decided it (the limiter, a key block in the store, a network block).
 */
import type {
  ConcurrencySlot,
  Decision,
  RefundReceipt,
  RequestIdConflict,
  SettleOutcome,
} from "../limiter/types";

/** The block a request met (RulesOutcome.blocked). */
export interface RequestBlock {
  /** The enforced rule blocked (for a block of every rule: the first applying). */
  rule: string;
  by: "key" | "ip" | "country" | "asn";
  /** The network blocked (a CIDR or address, a country, an AS number); absent for a key. */
  value?: string;
  /** When the block ends (unix ms); absent: until it is removed. */
  until?: number;
}

/**
 * What the rules that apply to one request decided together (the middleware's public
 * `RateLimitResult`). Not the limiter's MultiDecision: this one also knows the shadow rules, a
 * missing key, and the receipts a refund needs.
 */
export interface RulesOutcome {
  /** True when every enforced rule allowed (shadow rules never deny). */
  allowed: boolean;
  /** One truthful decision per evaluated rule, in rule order. */
  decisions: Decision[];
  /** Enforced rules that denied: the policies a 429 names. */
  violated: string[];
  /** The enforced rule that denied with the longest wait (the one Retry-After honours). */
  deniedBy?: string;
  /** Shadow rules that would have denied (logged, never enforced). */
  shadowDenied: string[];
  /** The enforced rules' answer is the stored one of an earlier request with this request id. */
  replayed?: boolean;
  /**
   * The request id was decided with other parameters for the enforced rules (they changed since:
   * a deploy): nothing was counted, `allowed` is false (answered 409).
   */
  conflict?: RequestIdConflict;
  /**
   * Set when a rule with `missingKey: "deny"` found no key material: nothing was counted.
   * `reason` says what is missing (the header, the address, or the app's key function's key).
   */
  missingKey?: { rule: string; key: string; reason: string };
  /**
   * What a refund needs (one receipt for the enforced rules, one for the shadow rules), when
   * the store counted the request now; see `refundOnServerError`.
   */
  receipts?: RefundReceipt[];
  /**
   * The concurrency slots the request holds (docs/concurrency.md), enforced and shadow rules'
   * alike: the proxy and the middleware release them when the response body ends. A refused
   * request holds none (a shadow rule's slot taken beside the refusal was given back at once).
   */
  slots?: ConcurrencySlot[];
  /**
   * Set when the request is blocked (docs/plans.md): by its client key in `rule` (the store
   * said so), or by its address, country or AS number. Nothing was counted (answered 403).
   */
  blocked?: RequestBlock;
  /**
   * An admitted request counted in a usage rule (docs/usage.md): report what it used, once; the
   * difference to its reservation (the rule's `cost`) is charged or given back. Without a call,
   * the middleware settles from the response by the rule's `usage` spec.
   */
  settle?: (units: number) => Promise<SettleOutcome>;
}
