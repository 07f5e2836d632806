import { type PolicySpec, scriptInputs } from "./evaluate";
import { REFUND_SCRIPT } from "./lua/scripts";
import { runScript, type ScriptClient } from "./script-runner";
import { StoreReplyError } from "./store-result";

export interface RefundRequest {
  /** The policies exactly as the request was evaluated (keys, algorithms, limits, windows, costs). */
  policies: readonly PolicySpec[];
  /** The evaluation's member id. */
  memberId: string;
  /** The evaluation's `now` (store clock): the window the request was counted in. */
  at: number;
  /** The caller's clock (ms); omit to use the Redis clock (read by the token bucket and the sliding counter). */
  now?: number;
  /**
   * The evaluation's request id, if it had one: the refund then happens only if that request was
   * admitted and not refunded yet, and a retry afterwards is decided (and counted) afresh.
   */
  requestId?: string;
}

export interface RefundResult {
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
 * SET (+ TIME for the counter); token-bucket TIME + GET + SET (or DEL); with a request id GET + DEL of the record.
 */
export async function refund(client: ScriptClient, request: RefundRequest): Promise<RefundResult> {
  const { keys, args } = scriptInputs("refund", request, [request.at]);
  const reply = await runScript<unknown>(client, REFUND_SCRIPT, keys, args);
  if (
    !Array.isArray(reply) ||
    reply.length !== 1 + request.policies.length ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected refund reply: ${JSON.stringify(reply)}`);
  }
  const [refunded, ...units] = reply as number[];
  return { refunded: refunded === 1, units };
}
