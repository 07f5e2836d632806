/**
 * A reshard's transition (docs/shards.md "Reshard"): what a moved key's old shard still holds in
 * its window, read with a peek (counting nothing) and remembered per isolate for as long as it
 * cannot have fallen.
 *
 * Why remembering it is exact: after the settle instant the old shard admits nothing for a moved
 * key (sharded-limiter.ts says why), so its live count u only falls, and only when one of its
 * units leaves the window: the peek's `reset` is when the next one does (or, when the peek is
 * denied, later still). Until then u is exactly what was read; afterwards a remembered u is an
 * upper bound (deciding with it is conservative), and it is read again. A count of 0 cannot
 * fall: it holds until the transition ends. A refund or reset on the old shard only lowers u.
 *
 * A concurrency key's old slots the same way: after the settle instant the old shard takes no
 * slot for the key, so its live slots only fall (a release, a lapse) and a read is an upper
 * bound. A release may come at any instant, so only a count of 0 is remembered.
 */
import { countKeySlots } from "../../store/in-flight";
import { storageKey } from "../../store/keys";
import { peekQuota, type QuotaClient } from "../../store/peek-reset";
import { withinDeadline } from "../../store/script-runner";
import { withDeadline } from "../../store/with-deadline";
import type { LimiterContext } from "../context";
import { denialCacheKey } from "../resolved-policy";
import type { LimitRequest } from "../types";

/** What a moved key's old shard holds for one policy. */
interface OldCount {
  /** Units live in the window at the policy's limit (at most the limit). */
  used: number;
  /** Isolate-clock ms before which a request of this cost cannot fit on the old count alone. */
  retryAt: number;
}

/** Most remembered counts per isolate; the oldest go first (each is a few dozen bytes). */
const MAX_REMEMBERED = 10_000;

export interface MovedKeyCounts {
  /**
   * The old shard's count of `request` (its limit the effective one), or undefined when the old
   * shard could not be read (its breaker open, a failure, the deadline): then the request goes
   * to its failure policy. `holdsUntil`: the end of this policy's transition.
   */
  read(
    from: number,
    ctx: LimiterContext,
    request: LimitRequest,
    holdsUntil: number,
  ): Promise<OldCount | undefined>;
  /**
   * The live concurrency slots of `request`'s key on the old shard, or undefined when it could
   * not be read (as `read`). `request.key` as counted.
   */
  slots(
    from: number,
    ctx: LimiterContext,
    request: LimitRequest,
    holdsUntil: number,
  ): Promise<number | undefined>;
  /** Forget every remembered count (a reset or forget: a count may have been dropped). */
  clear(): void;
}

export function createMovedKeyCounts(now: () => number): MovedKeyCounts {
  const remembered = new Map<string, OldCount & { validUntil: number }>();
  const remember = (name: string, count: OldCount & { validUntil: number }) => {
    if (remembered.size >= MAX_REMEMBERED) {
      const oldest = remembered.keys().next();
      if (!oldest.done) remembered.delete(oldest.value);
    }
    remembered.set(name, count);
  };
  return {
    async read(from, ctx, request, holdsUntil) {
      const cost = request.cost ?? 1;
      const name = `${from}\n${denialCacheKey(request)}\n${cost}`;
      const known = remembered.get(name);
      const sentAt = now();
      if (known && sentAt < known.validUntil) return known;
      if (known) remembered.delete(name);
      const permit = ctx.breaker.acquire();
      if (permit === "skip") return undefined;
      let answer: Awaited<ReturnType<typeof peekQuota>>;
      try {
        // Its own deadline, as a decision's: the old shard's store client has evalshaRo
        // (createStoreClient's); one without it fails here and the request goes to its policy.
        answer = await withDeadline(ctx.timeoutMs, () =>
          peekQuota(ctx.store as QuotaClient, {
            prefix: ctx.prefix,
            policy: request.policy,
            key: request.key,
            algorithm: request.algorithm ?? "sliding-log",
            limit: request.limit,
            windowMs: request.windowMs,
            cost,
            ...(ctx.clock.source === "caller" ? { now: ctx.now() } : {}),
          }),
        );
      } catch (error) {
        ctx.breaker.failure(permit, error);
        ctx.onStoreError?.(error);
        return undefined;
      }
      ctx.breaker.success(permit);
      const used = Math.min(request.limit, Math.max(0, request.limit - answer.remaining));
      // The peek ran after it was sent: measured from the send, the next expiry is no later
      // than the isolate clock says.
      const count = {
        used,
        retryAt: sentAt + answer.retryAfterMs,
        validUntil: used === 0 ? holdsUntil : sentAt + Math.max(0, answer.reset - answer.now),
      };
      if (count.validUntil > sentAt) remember(name, count);
      return count;
    },
    async slots(from, ctx, request, holdsUntil) {
      const name = `${from}\n${denialCacheKey(request)}\nslots`;
      const known = remembered.get(name);
      const sentAt = now();
      if (known && sentAt < known.validUntil) return known.used;
      if (known) remembered.delete(name);
      const permit = ctx.breaker.acquire();
      if (permit === "skip") return undefined;
      const redisKey = storageKey(ctx.prefix, request.policy, request.key, "concurrency");
      let held: number;
      try {
        held = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
          ctx.clock.run(store, (client, clock) => countKeySlots(client, redisKey, clock)),
        );
      } catch (error) {
        ctx.breaker.failure(permit, error);
        ctx.onStoreError?.(error);
        return undefined;
      }
      ctx.breaker.success(permit);
      if (held === 0) remember(name, { used: 0, retryAt: sentAt, validUntil: holdsUntil });
      return held;
    },
    clear() {
      remembered.clear();
    },
  };
}
