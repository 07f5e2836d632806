/**
 * This isolate's side of the placement fence (store/placement-fence.ts says what the shards
 * check, and why): the view each call places its keys by, the reshard told to every shard once,
 * and a moved key's old shard closed before its count is read there.
 *
 * Why the close comes before the read: the transition decides a moved key on its new shard with
 * the limit less the old shard's count, which is exact only if the old shard admits nothing more
 * for the key once the count is read. An isolate still on the old placement — the old config
 * after `at`, a clock behind, another `at` — would keep admitting there. The close is a write on
 * the old shard, ordered by that shard before the read: every admission there on the old
 * placement either ran before it (and is in the count) or is refused after it.
 */
import {
  type FenceRefusal,
  type FenceView,
  fencePlacement,
  placementId,
} from "../../store/placement-fence";
import { withinDeadline } from "../../store/script-runner";
import { fenceError, refusedByFence, tellRefusal } from "../placement-refusal";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision, WaitUntil } from "../types";
import type { ShardLayout } from "./options";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";

/** A close that did not happen: the shard failed (its failure policy) or refused (denied). */
type CloseOutcome = "closed" | "failed" | FenceRefusal;

export interface ShardFence {
  /** The placement a call at `t` places its keys by, as the shards are told it. */
  view(t: number): FenceView;
  /** Tells every shard of the reshard, once per isolate (off the request path). */
  announce(t: number, waitUntil: WaitUntil | undefined): void;
  /** Closes the old placement on `shard` (once per isolate) before a count is read there. */
  close(shard: Shard): Promise<CloseOutcome>;
  /** The denial of a request whose close was refused, told as the decision's would be. */
  refused(
    shard: Shard,
    policies: readonly ResolvedPolicy[],
    refusal: FenceRefusal,
    t: number,
  ): MultiDecision;
}

/** The placement a call at `t` places its keys by, as the shards are told it. */
export function placementViews(layout: ShardLayout, router: Router): (t: number) => FenceView {
  const { stable, before, after, at } = views(layout, router);
  if (!before || !after) return () => stable;
  return (t) => (t < at ? before : after);
}

function views(layout: ShardLayout, router: Router) {
  const to = placementId(layout.names.slice(0, layout.placed));
  const reshard = layout.reshard;
  const from = reshard ? placementId(reshard.from) : "";
  const stable: FenceView = { kind: "stable", placed: to };
  const at = reshard?.at ?? 0;
  const before: FenceView | undefined = reshard && {
    kind: "reshard",
    placed: from,
    from,
    to,
    at,
    endsBy: router.endsBy,
  };
  const after: FenceView | undefined = before && { ...before, placed: to };
  return { stable, before, after, at };
}

export function createShardFence(layout: ShardLayout, shards: Shards, router: Router): ShardFence {
  const { before, after } = views(layout, router);
  const view = placementViews(layout, router);
  // Per shard: announced (or under way), and the close's outcome once it has one.
  const announced = new Set<Shard>();
  const closes = new Map<Shard, Promise<CloseOutcome>>();

  /** One fence script on `shard`, within its deadline and on its clock; throws on failure. */
  function send(shard: Shard, close: boolean): Promise<FenceRefusal | undefined> {
    const { ctx } = shard;
    return withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, now) =>
        fencePlacement(client, ctx.prefix, after as FenceView & { kind: "reshard" }, close, now),
      ),
    );
  }

  return {
    view,
    announce(t, waitUntil) {
      // Nothing to tell without a reshard, nor once it is over everywhere.
      if (!before || announced.size === shards.list.length || t >= router.endsBy) return;
      for (const shard of shards.list) {
        if (announced.has(shard)) continue;
        announced.add(shard);
        const told = send(shard, false).then(
          (refusal) => {
            if (refusal) tellRefusal(shard.ctx, fenceError(refusal, before));
          },
          () => {
            // Told again with a later call: the decisions there announce it too.
            announced.delete(shard);
          },
        );
        waitUntil?.(told);
      }
    },
    close(shard) {
      let closing = closes.get(shard);
      if (!closing) {
        closing = send(shard, true).then(
          (refusal): CloseOutcome => refusal ?? "closed",
          (error: unknown): CloseOutcome => {
            shard.ctx.onStoreError?.(error);
            closes.delete(shard);
            return "failed";
          },
        );
        closes.set(shard, closing);
      }
      return closing;
    },
    refused(shard, policies, refusal, t) {
      return refusedByFence(shard.ctx, policies, refusal, after, t);
    },
  };
}
