/**
 * The admin operations on one client's count: peek (what a request would get now, counting
 * nothing) and reset (forget the count and the request ids decided on it). The /admin routes call
 * these; the limiter never does.
 */

import { type Algorithm, isLogAlgorithm } from "./algorithm";
import { storePolicyIssue } from "./caps";
import type { PolicyAnswer } from "./evaluate";
import { POLICY_NAME, RECORD_TTL_MAX_MS, resetMarkKey, storageKey } from "./keys";
import { RESET_TOMBSTONE, STAMPED_COUNTS, TOMBSTONE_LIFE_MS } from "./lua/count-stamp.lua";
import { PEEK_SCRIPT } from "./lua/peek.lua";
import { DEFAULT_UNIT_COST, PolicyBoundsError } from "./script-inputs";
import {
  type ReadOnlyScriptClient,
  runReadOnlyScript,
  runScript,
  type ScriptClient,
  StoreReplyError,
} from "./script-runner";
import { type ClockRun, reportClockChange, runOnClock, storeClockOf } from "./store-clock";

/** The narrow slice of the Upstash client the admin operations need. */
export type QuotaClient = ReadOnlyScriptClient & ScriptClient;

export interface QuotaKey {
  prefix: string;
  policy: string;
  /** The client key as the limiter stores it (an IP group, a header's SHA-256, "global"…). */
  key: string;
  /** Which algorithm's key (each counts in its own). @default "sliding-log" */
  algorithm?: Algorithm;
}

export interface PeekRequest extends QuotaKey {
  limit: number;
  windowMs: number;
  /** The cost to ask about. @default 1 */
  cost?: number;
  /** The caller's clock (ms); omit to use the Redis clock, as the limiter does by default. */
  now?: number;
}

/**
 * What a request of `cost` would get now from the sliding log, without consuming anything.
 * The log only (the O(1) algorithms are not peeked: another `algorithm` throws). Its fields are checked as a decision's are
 * (PolicyBoundsError, before Redis is asked). Without `now` it runs on the store client's clock
 * policy (store-clock.ts), the one the limiter's scripts follow: the Redis clock until the store
 * refuses TIME to any script on this client, then the caller's (a refusal met here switches the
 * limiter too).
 * Throws on store errors.
 */
export async function peekQuota(client: QuotaClient, request: PeekRequest): Promise<PolicyAnswer> {
  const algorithm = request.algorithm ?? "sliding-log";
  const cost = request.cost ?? DEFAULT_UNIT_COST;
  const policy = { algorithm, limit: request.limit, windowMs: request.windowMs, cost };
  const issue = storePolicyIssue([policy]);
  if (issue) throw new PolicyBoundsError("peek", 0, issue.field, issue.detail);
  if (typeof request.key !== "string" || request.key.length === 0) {
    throw new PolicyBoundsError("peek", 0, "key", "must be a non-empty string");
  }
  if (typeof request.policy !== "string" || !POLICY_NAME.test(request.policy)) {
    throw new PolicyBoundsError("peek", 0, "policy", "must be 1 to 64 of A-Z a-z 0-9 _ . -");
  }
  if (cost > request.limit) {
    throw new PolicyBoundsError("peek", 0, "cost", "must be an integer from 1 to limit");
  }
  if (!isLogAlgorithm(algorithm)) {
    throw new TypeError(`peekQuota: the sliding log only, not ${request.algorithm}`);
  }
  const keys = [storageKey(request.prefix, request.policy, request.key)];
  const given = request.now;
  const run: ClockRun = {
    state: storeClockOf(client),
    caller: given !== undefined,
    now: () => given ?? Date.now(),
    // No limiter's handler here: the store client's one line (a limiter on the same client
    // with a handler of its own is told at its next call).
    onSwitch: () => reportClockChange(storeClockOf(client)),
  };
  const reply = await runOnClock(run, client, (clocked, now) =>
    runReadOnlyScript<unknown>(clocked, PEEK_SCRIPT, keys, [
      request.limit,
      request.windowMs,
      cost,
      now ?? "",
    ]),
  );
  if (
    !Array.isArray(reply) ||
    reply.length !== 5 ||
    !reply.every((value) => typeof value === "number" && Number.isFinite(value))
  ) {
    throw new StoreReplyError(`unexpected quota reply: ${JSON.stringify(reply)}`);
  }
  const [allowed, remaining, reset, retryAfterMs, now] = reply as number[];
  return {
    allowed: allowed === 1,
    remaining: remaining ?? 0,
    reset: reset ?? 0,
    retryAfterMs: retryAfterMs ?? 0,
    now: now ?? 0,
  };
}

/**
 * Forgets everything recorded for a client's key: its count (the next request starts with the
 * full limit) and the request ids decided on it (a retry is decided and counted afresh, not
 * replayed). UNLINK frees the state off the main thread, so this is O(1) for Redis whatever the
 * log's size. The request-id records themselves live under the first policy key of each call and
 * cannot be found without SCAN, so the reset writes a fresh random mark next to the key instead
 * (kept RECORD_TTL_MAX_MS, as long as any record): a record that finds a mark it was not written
 * under is not replayed (lua/scripts.ts readRecord). One script, so both happen or neither.
 * A fixed window's or a period's count is replaced by a tombstone (lua/count-stamp.lua.ts): the
 * count the next admission starts is stamped, so a settle or refund of a request admitted before
 * the reset moves nothing of it. No count there, no tombstone: nothing admitted to guard against.
 * Commands: UNLINK + SET (a count's: SET … GET of the tombstone + SET). True if the key existed
 * (a tombstone is none).
 */
export async function resetQuota(client: ScriptClient, key: QuotaKey): Promise<boolean> {
  const policyKey = storageKey(key.prefix, key.policy, key.key, key.algorithm);
  const keys = [policyKey, resetMarkKey(policyKey)];
  const existed = await runScript<unknown>(client, RESET_SCRIPT, keys, [
    crypto.randomUUID(),
    RECORD_TTL_MAX_MS,
    key.algorithm !== undefined && STAMPED_COUNTS.has(key.algorithm) ? TOMBSTONE_LIFE_MS : "",
  ]);
  if (typeof existed !== "number") {
    throw new StoreReplyError(`unexpected reset reply: ${JSON.stringify(existed)}`);
  }
  return existed > 0;
}

// KEYS[1] the policy key, KEYS[2] its reset mark; ARGV[1] the new mark, ARGV[2] its TTL (ms),
// ARGV[3] the tombstone's TTL (ms), or "" for none.
const RESET_SCRIPT = `#!lua flags=allow-key-locking
local existed
if ARGV[3] ~= '' then
  -- A count is a short string: overwritten in place (XX: no count, no admission to guard
  -- against), and a tombstone there before is no count.
  local old = redis.call('SET', KEYS[1], '${RESET_TOMBSTONE}', 'XX', 'PX', ARGV[3], 'GET')
  existed = (old and old ~= '${RESET_TOMBSTONE}') and 1 or 0
else
  existed = redis.call('UNLINK', KEYS[1])
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return existed
`;
