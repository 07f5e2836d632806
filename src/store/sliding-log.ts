import { evaluatePolicy } from "./evaluate";
import type { ScriptClient } from "./script-runner";
import type { StoreResult } from "./store-result";

export { StoreReplyError, type StoreResult } from "./store-result";

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

/**
 * The exact sliding-window log for one policy (the default algorithm). Kept as its own entry
 * point for the limiter; `evaluatePolicy` / `evaluate` take any algorithm and several policies.
 */
export async function slidingLog(
  client: ScriptClient,
  request: SlidingLogRequest,
): Promise<StoreResult> {
  const { replayed: _, ...result } = await evaluatePolicy(client, {
    ...request,
    algorithm: "sliding-log",
  });
  return result;
}
