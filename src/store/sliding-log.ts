import { runScript, type ScriptClient } from "./script-runner";
import { SLIDING_LOG_SCRIPT } from "./sliding-log.lua";

/** What the store answers for one evaluation; the limiter turns it into a decision. */
export interface StoreResult {
  allowed: boolean;
  remaining: number;
  /** Store-clock ms when capacity next frees. */
  reset: number;
  /** ms from the store's `now` until a denied request of this cost could pass (0 when allowed). */
  retryAfterMs: number;
  /** The store's clock when it decided (ms). */
  now: number;
}

export interface SlidingLogRequest {
  key: string;
  limit: number;
  windowMs: number;
  cost: number;
  /** Unique per call: members are `<memberId>.<n>`. */
  memberId: string;
  /** The caller's clock (ms); omit to use the Redis clock. */
  now?: number;
}

type ScriptReply = [number, number, number, number, number];

export async function slidingLog(
  client: ScriptClient,
  request: SlidingLogRequest,
): Promise<StoreResult> {
  const reply = await runScript<unknown>(
    client,
    SLIDING_LOG_SCRIPT,
    [request.key],
    [request.limit, request.windowMs, request.cost, request.memberId, request.now ?? ""],
  );
  const [allowed, remaining, reset, retryAfterMs, now] = parseReply(reply);
  return { allowed: allowed === 1, remaining, reset, retryAfterMs, now };
}

/** A reply that is not five integers means the endpoint is not what we think: say so loudly. */
function parseReply(reply: unknown): ScriptReply {
  if (
    Array.isArray(reply) &&
    reply.length === 5 &&
    reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    return reply as ScriptReply;
  }
  throw new StoreReplyError(`unexpected sliding-log reply: ${JSON.stringify(reply)}`);
}

export class StoreReplyError extends Error {
  override name = "StoreReplyError";
}
