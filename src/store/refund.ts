/**
 * The refund script call: give back what one admitted request consumed (the limiter's refund of
 * a receipt calls it; see limiter/refund-receipt.ts).
 */
import { REFUND_SCRIPT } from "./lua/scripts";
import { type ScriptCall, scriptInputs } from "./script-inputs";
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
 * Redis commands: sliding-log ZREM (one per 500 units); fixed-window and sliding-counter GET +
 * SET (+ TIME for the counter); token-bucket TIME + GET + SET (or DEL); with a request id MGET (the record and the reset marks) + DEL of the record.
 */
export async function refund(client: ScriptClient, call: RefundCall): Promise<RefundAnswer> {
  const { keys, args } = scriptInputs("refund", call, [call.at]);
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
