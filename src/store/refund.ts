/**
 * The refund script call: give back what one admitted request consumed (the limiter's refund of
 * a receipt calls it; see limiter/refund-receipt.ts).
 */
import { USAGE_ALGORITHMS } from "./algorithm";
import { REFUND_SCRIPT } from "./lua/scripts";
import { type ScriptCall, type StorePolicy, scriptInputs } from "./script-inputs";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** A refund: the evaluation's policies (exactly as evaluated: keys, algorithms, limits, windows, costs), member id and request id. */
export interface RefundCall extends ScriptCall {
  /** The evaluation's `now` (store clock): the window the request was counted in. */
  at: number;
  /**
   * The evaluation's request id, if it had one: the refund then happens only if that request was
   * admitted and not refunded yet, and a retry afterwards is decided (and counted) afresh.
   */
  requestId?: string | undefined;
  /**
   * The request's once-gate (keys.ts settleGateKey, beside its first usage count's key: the key
   * its settle takes), when any policy keepsUsageCount. The refund takes it in the same script;
   * taken before (by a settle), those policies give back nothing.
   */
  gateKey?: string | undefined;
}

/**
 * A usage rule's policy that keeps a count (a fixed window, a period), no entry per request: its
 * refund and its settle are one or the other, by the request's once-gate.
 */
export function keepsUsageCount(policy: StorePolicy): boolean {
  return (
    policy.usage === true &&
    policy.algorithm !== "sliding-log-weighted" &&
    USAGE_ALGORITHMS.has(policy.algorithm)
  );
}

/** What the refund script answers. */
export interface RefundAnswer {
  /** False when a request id was given and there was nothing (left) to refund. */
  refunded: boolean;
  /** Units given back, per policy. */
  units: number[];
}

/**
 * Give back what one admitted request consumed, in one script call.
 *
 * - sliding-log: exact — removes exactly the request's members (`<memberId>.<n>`) that are still
 *   in the window; idempotent by construction.
 * - fixed-window / sliding-counter: best effort — takes `cost` off the window the request was
 *   counted in while that window still counts (current, or previous for the counter); never
 *   below zero. Without a request id nothing proves the request was admitted or not yet refunded:
 *   refund each admitted request once.
 * - token-bucket: best effort — lowers the bucket's debt by `cost` tokens, never above full.
 *
 * - a usage rule's count (keepsUsageCount): as fixed-window, once the script has taken the
 *   request's once-gate (`gateKey`); a settle took it first: nothing (lua/refund-driver.lua.ts).
 *
 * Redis commands: sliding-log ZREM (one per 500 units); fixed-window and sliding-counter GET +
 * SET (+ TIME for the counter); token-bucket TIME + GET + SET (or DEL); with a request id MGET
 * (the record and the reset marks) + DEL of the record; with a usage count, SET … NX PX of the
 * gate (refused: that alone for the counts).
 */
export async function refund(client: ScriptClient, call: RefundCall): Promise<RefundAnswer> {
  const { keys, args } = scriptInputs("refund", call, [call.at]);
  const counts = call.policies.map((policy) => (keepsUsageCount(policy) ? "1" : "0")).join("");
  if (call.gateKey !== undefined && counts.includes("1")) {
    // The gate section before the fingerprint, which stays ARGV's last (request-records.lua.ts).
    args.splice(call.requestId === undefined ? args.length : args.length - 1, 0, "g", counts);
    keys.push(call.gateKey);
  }
  const reply = await runScript<unknown>(client, REFUND_SCRIPT, keys, args);
  if (
    !Array.isArray(reply) ||
    reply.length !== 1 + call.policies.length ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected refund reply: ${JSON.stringify(reply)}`);
  }
  const [refunded, ...units] = reply as number[];
  return { refunded: refunded === 1, units };
}
