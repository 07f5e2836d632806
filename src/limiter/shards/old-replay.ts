/**
 * A request id's retry of a moved key (docs/shards.md "Reshard"): the original was decided on
 * the key's old shard before the instant, and that shard still holds its record. Decided afresh
 * on the new shard, the retry would be counted twice, and at the limit denied, though the
 * original was admitted (the old shard's count of it holds the new shard's limit down). So a
 * call with a request id whose keys all lived on one old shard asks it first for the record
 * alone: an admission found there is the retry's answer, replayed; nothing is counted there.
 */
import { replayRecord } from "../../store/replay-record";
import { withinDeadline } from "../../store/script-runner";
import { fromEvaluation } from "../decisions";
import { resolvePolicies, withStorageKeys } from "../resolved-policy";
import type { FailMode, LimitAllOptions, LimitRequest, MultiDecision } from "../types";
import { tagShard } from "./merge";
import { movedPlan } from "./moved-plan";
import type { Shard } from "./shard";

/**
 * The replayed admission of `requestId` on `old` (the shard every request's key lived on before
 * the instant), undefined when none is recorded there, or "failed" when the shard could not be
 * asked (its breaker open, a failure, the deadline): the caller sends the call to that shard's
 * failure policy rather than ask it again (a second deadline). `keys`: as counted.
 */
export async function replayOnOld(
  old: Shard,
  requests: readonly LimitRequest[],
  keys: readonly string[],
  requestId: string,
  failMode: FailMode,
): Promise<MultiDecision | "failed" | undefined> {
  const { ctx } = old;
  // As the original was sent: its keys as counted, its asked limits (the record's fingerprint).
  const policies = resolvePolicies(
    "limit",
    requests.map((request, i) => ({ ...request, key: keys[i] as string })),
    failMode,
  );
  withStorageKeys(policies, ctx.prefix);
  const permit = ctx.breaker.acquire();
  if (permit === "skip") return "failed";
  try {
    const answer = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        replayRecord(client, { policies, memberId: "", now, requestId }),
      ),
    );
    ctx.breaker.success(permit);
    if (!answer) return undefined;
    // Its slots name the old shard: their release goes there, where they are held.
    return tagShard(fromEvaluation(policies, answer, "", requestId), old.name);
  } catch (error) {
    ctx.breaker.failure(permit, error);
    ctx.onStoreError?.(error);
    return "failed";
  }
}

/**
 * Whether a key block stands now on a request of the call that reads plans (`overrides`), its
 * plan merged over the key's new shard `to` and `old` (moved-plan.ts). The evaluate script
 * refuses a blocked key before it replays a record: a replay from the old shard must not let a
 * block written since through. A shard that does not answer counts as blocked here, so the call
 * takes the decision path, which answers that as it would without a request id.
 */
export async function blockedSinceRecord(
  requests: readonly LimitRequest[],
  placed: (request: LimitRequest) => Shard,
  old: Shard,
  timeoutMs: number,
  limitOptions: Pick<LimitAllOptions, "waitUntil">,
): Promise<boolean> {
  const plans = await Promise.all(
    requests
      .filter((request) => request.overrides === true)
      .map((request) => movedPlan(placed(request), old, request, timeoutMs, limitOptions)),
  );
  return plans.some(
    (plan) =>
      plan === undefined ||
      (plan.blockedUntil !== undefined &&
        (plan.blockedUntil === 0 || plan.blockedUntil > plan.now)),
  );
}
