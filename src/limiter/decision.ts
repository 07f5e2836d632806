import type { Algorithm } from "../store/algorithm";

/** Where a decision came from. */
export type DecisionSource = "redis" | "cache" | "fail-open" | "fail-closed" | "fallback";

/** One decision, shared by every surface (proxy, /check, middleware). */
export interface Decision {
  allowed: boolean;
  /** The policy's limit (units per window). */
  limit: number;
  /** Units left in the window after this decision. */
  remaining: number;
  /** Unix time (ms) when capacity next frees. */
  reset: number;
  /** ms from the decision until `reset` (clock-independent: headers use this, not `reset`). */
  resetAfterMs: number;
  /** ms until a request of this cost could pass; 0 when allowed. */
  retryAfterMs: number;
  source: DecisionSource;
  /** The policy (rule) this decision is for. */
  policy: string;
  /** The window in ms (for the RateLimit-Policy header). */
  windowMs: number;
  /** How the policy counts. */
  algorithm: Algorithm;
}
