/**
 * A shard's refusal of this isolate's placement (store/placement-fence.ts): the error that names
 * the setting at fault, told once per kind, and the denial the request gets. A refused request is
 * denied, never sent to the failure policy: the store answered, and what it said is that this
 * isolate's view of where the key lives is stale (deciding anywhere on that view, the local
 * fallback included, is what over-admits).
 */
import type { FenceRefusal, FenceRefusalKind, FenceView } from "../store/placement-fence";
import type { LimiterContext } from "./context";
import { denied, failClosed } from "./decisions";
import { PlacementFenceError } from "./placement-fence-error";
import type { ResolvedPolicy } from "./resolved-policy";
import type { LimitAllOptions, MultiDecision } from "./types";

/** What a sharded limiter passes its shards' limiters with a call: the placement it used. */
export interface PlacedCallOptions extends LimitAllOptions {
  /** The view the router placed this call's keys by (placement-fence.ts FenceView). */
  fence?: FenceView;
}

/**
 * A refused request's Retry-After (ms). The refusal lasts until the deployment is fixed, which
 * no wait fixes; a short one keeps clients polling rather than gone for a window.
 */
const FENCE_RETRY_MS = 1_000;

const iso = (ms: number) => (Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms));

/** The error for `refusal` of a call placed by `view`. */
export function fenceError(
  refusal: FenceRefusal,
  view: FenceView | undefined,
): PlacementFenceError {
  const mine = view?.kind === "reshard" ? view.at : undefined;
  switch (refusal.kind) {
    case "old-placement":
      return new PlacementFenceError(
        refusal.kind,
        "reshard.at",
        `this isolate placed the key by the shards before the reshard (reshard.from, or the old config without reshard) after the shards moved on at ${iso(refusal.at)}: every isolate must run the new config before reshard.at, on a clock that agrees`,
      );
    case "other-at":
      return new PlacementFenceError(
        refusal.kind,
        "reshard.at",
        `${mine === undefined ? "this isolate's" : iso(mine)} differs from the instant the shards were told, ${iso(refusal.at)}: every isolate must run the same reshard`,
      );
    case "second-reshard":
      return new PlacementFenceError(
        refusal.kind,
        "reshard",
        `a second reshard before the first's transition ends (${iso(refusal.endsBy)}): one reshard at a time`,
      );
    case "late":
      return new PlacementFenceError(
        refusal.kind,
        "reshard.at",
        `${iso(refusal.at)} had passed when the shards were first told of this reshard (isolates on the old config may have admitted moved keys meanwhile): deploy it with an instant ahead`,
      );
    default:
      return new PlacementFenceError(
        refusal.kind,
        "reshard.from",
        `this isolate's shards are neither side of the reshard the shards know (at ${iso(refusal.at)}): every isolate must run the same shards and reshard`,
      );
  }
}

// The kinds told per limiter context: one line each, not one per request.
const told = new WeakMap<LimiterContext, Set<FenceRefusalKind>>();

/**
 * Tells of a refusal once per kind for this shard's limiter: to `onStoreError` when given, else
 * as one JSON line on console.warn (a stale deployment must be seen, and would flood a log).
 */
export function tellRefusal(ctx: LimiterContext, error: PlacementFenceError): void {
  let kinds = told.get(ctx);
  if (!kinds) {
    kinds = new Set();
    told.set(ctx, kinds);
  }
  if (kinds.has(error.kind)) return;
  kinds.add(error.kind);
  if (ctx.onStoreError) ctx.onStoreError(error);
  else console.warn(JSON.stringify({ event: "placement-refused", error: error.message }));
}

/** The request the fence refused: told, and denied by every policy, nothing counted. */
export function refusedByFence(
  ctx: LimiterContext,
  policies: readonly ResolvedPolicy[],
  refusal: FenceRefusal,
  view: FenceView | undefined,
  at: number,
): MultiDecision {
  tellRefusal(ctx, fenceError(refusal, view));
  return denied(policies.map((policy) => failClosed(policy, at, FENCE_RETRY_MS)));
}
