/**
 * A moved key's plan during a reshard's transition (docs/shards.md "Reshard"): its override and
 * block as both of its shards hold them. A change made during the transition is written to both
 * (plans.ts), one made before it only to the old shard, so neither shard alone is the plan: the
 * new shard's override wins (it is the later), and the longer block of the two holds (a block is
 * never lost). What the new shard lacks is copied to it (off the request path), so that it stays
 * with the key once the old placement is forgotten.
 */
import { withDeadline } from "../../store/with-deadline";
import { planOf } from "../plan-changes";
import type { LimitAllOptions, LimitRequest } from "../types";
import type { Shard } from "./shard";

export type KeyPlan = Awaited<ReturnType<typeof planOf>>;

/** The longer of two blocks (0: no end); undefined when neither blocks. */
function longer(a: KeyPlan, b: KeyPlan): KeyPlan | undefined {
  if (a.blockedUntil === undefined) return b.blockedUntil === undefined ? undefined : b;
  if (b.blockedUntil === undefined || a.blockedUntil === 0) return a;
  if (b.blockedUntil === 0) return b;
  return b.blockedUntil - b.now > a.blockedUntil - a.now ? b : a;
}

/** `request`'s plan on `to` and `old` merged, or undefined when a shard did not answer. */
export async function movedPlan(
  to: Shard,
  old: Shard,
  request: Pick<LimitRequest, "policy" | "key" | "algorithm" | "usage">,
  timeoutMs: number,
  limitOptions: Pick<LimitAllOptions, "waitUntil">,
): Promise<KeyPlan | undefined> {
  const target = { policy: request.policy, key: request.key };
  let fresh: KeyPlan;
  let kept: KeyPlan;
  try {
    [fresh, kept] = await Promise.all([
      withDeadline(timeoutMs, () => planOf(to.ctx, target)),
      withDeadline(timeoutMs, () => planOf(old.ctx, target)),
    ]);
  } catch (error) {
    old.ctx.onStoreError?.(error);
    return undefined;
  }
  const block = longer(fresh, kept);
  const copies: Promise<unknown>[] = [];
  if (fresh.limit === undefined && kept.limit !== undefined) {
    copies.push(
      to.limiter.overrides.set(request.policy, request.key, {
        limit: kept.limit,
        algorithm: request.algorithm,
        anchor: kept.anchor,
        usage: request.usage,
      }),
    );
  }
  if (block === kept && block !== fresh && kept.blockedUntil !== undefined) {
    const seconds =
      kept.blockedUntil === 0 ? undefined : Math.ceil((kept.blockedUntil - kept.now) / 1000);
    if (seconds === undefined || seconds >= 1) {
      copies.push(to.limiter.blocks.add(target, seconds === undefined ? {} : { seconds }));
    }
  }
  if (copies.length > 0) {
    const copied = Promise.allSettled(copies);
    limitOptions.waitUntil?.(copied);
  }
  return {
    now: block?.now ?? fresh.now,
    limit: fresh.limit ?? kept.limit,
    blockedUntil: block?.blockedUntil,
  };
}
