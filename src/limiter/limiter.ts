import { storageKey } from "../store/keys";
import type { ScriptClient } from "../store/script-runner";
import { slidingLog } from "../store/sliding-log";
import type { Decision } from "./decision";
import { nextMemberId } from "./member-id";

export type FailMode = "open" | "closed";
export type Clock = "redis" | "caller";

export interface LimiterOptions {
  /** The Redis client (any object with `evalsha` and `eval` of `@upstash/redis`). */
  store: ScriptClient;
  /**
   * Prefix of every Redis key the limiter writes.
   * @default "edge-limiter"
   */
  prefix?: string;
  /**
   * Whose clock orders the log: `"redis"` (TIME inside the script: one clock for every isolate)
   * or `"caller"` (this isolate's `Date.now()`, passed to the script; for stores that reject
   * non-deterministic scripts).
   * @default "redis"
   */
  clock?: Clock;
  /**
   * What to decide when the store cannot answer (timeout, network error, 5xx, garbage).
   * @default "open"
   */
  failMode?: FailMode;
  /** Called with every store error (for logging); never throws into the decision. */
  onStoreError?: (error: unknown) => void;
}

export interface LimitRequest {
  /** Policy (rule) name: part of the Redis key and of the headers. [A-Za-z0-9_.-]+ */
  policy: string;
  /** The client key (IP, API key, user id…): any string. */
  key: string;
  limit: number;
  windowMs: number;
  /** @default 1 */
  cost?: number;
  /** Per-request override of the limiter's fail mode. */
  failMode?: FailMode;
}

export interface Limiter {
  /** Decide one request. Never throws: store failures become fail-open / fail-closed decisions. */
  limit(request: LimitRequest): Promise<Decision>;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const prefix = options.prefix ?? "edge-limiter";
  const clock = options.clock ?? "redis";
  const defaultFailMode = options.failMode ?? "open";

  return {
    async limit(request) {
      const cost = request.cost ?? 1;
      const base = { limit: request.limit, policy: request.policy, windowMs: request.windowMs };
      try {
        const result = await slidingLog(options.store, {
          key: storageKey(prefix, request.policy, request.key),
          limit: request.limit,
          windowMs: request.windowMs,
          cost,
          memberId: nextMemberId(),
          now: clock === "caller" ? Date.now() : undefined,
        });
        return {
          ...base,
          allowed: result.allowed,
          remaining: Math.max(0, result.remaining),
          reset: result.reset,
          resetAfterMs: Math.max(0, result.reset - result.now),
          retryAfterMs: result.retryAfterMs,
          source: "redis",
        };
      } catch (error) {
        options.onStoreError?.(error);
        const open = (request.failMode ?? defaultFailMode) === "open";
        const now = Date.now();
        return {
          ...base,
          allowed: open,
          remaining: open ? Math.max(0, request.limit - cost) : 0,
          reset: now + request.windowMs,
          resetAfterMs: request.windowMs,
          retryAfterMs: open ? 0 : request.windowMs,
          source: open ? "fail-open" : "fail-closed",
        };
      }
    },
  };
}
