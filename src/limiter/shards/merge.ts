/**
 * A request decided on several shards (docs/shards.md), put back together as one store would
 * have answered it: all or nothing, the decisions in request order, each naming its shard, one
 * receipt whose parts a refund gives back shard by shard.
 */
import type { CountedReceipt } from "../receipt-state";
import type { Decision, LimitRequest, MultiDecision } from "../types";

/** One shard's share of a request: which of the request's policies, and what that shard said. */
export interface ShardPart {
  shard: string;
  /** Positions in the request of this part's policies, in order. */
  indices: readonly number[];
  requests: readonly LimitRequest[];
  decided: MultiDecision;
  /** Its admission was given back because another part denied. */
  refunded?: boolean;
}

/** Every decision and the receipt of a one-shard answer name that shard. */
export function tagShard(decided: MultiDecision, shard: string): MultiDecision {
  for (const decision of decided.decisions) {
    decision.shard = shard;
    // A slot names its shard: its release goes there, whatever the placement is by then (one
    // named already was taken elsewhere: a fallback slot in a failed old shard's local store).
    if (decision.slot) decision.slot.shard ??= shard;
  }
  for (const slot of decided.slots ?? []) slot.shard ??= shard;
  if (decided.receipt) (decided.receipt as CountedReceipt).shard = shard;
  return decided;
}

/**
 * The parts as one answer. A denied request's parts that admitted were refunded before this
 * (`refunded`): their policies report `remaining` without this request's cost, as a policy that
 * alone allowed does in a denied one-store request.
 */
export function mergeParts(
  count: number,
  parts: readonly ShardPart[],
  requestId: string | undefined,
): MultiDecision {
  const decisions: Decision[] = new Array(count);
  const allowed = parts.every((part) => part.decided.allowed);
  for (const part of parts) {
    tagShard(part.decided, part.shard);
    part.indices.forEach((index, j) => {
      const decision = part.decided.decisions[j] as Decision;
      if (part.refunded) {
        const cost = part.requests[j]?.cost ?? 1;
        decision.remaining = Math.min(decision.limit, decision.remaining + cost);
      }
      decisions[index] = decision;
    });
  }
  const merged: MultiDecision = {
    allowed,
    decisions,
    replayed: parts.every((part) => part.decided.replayed),
  };
  if (!allowed) {
    // As one store names it: the denying policy with the longest wait.
    let binding: Decision | undefined;
    for (const decision of decisions) {
      if (!decision.allowed && (!binding || decision.retryAfterMs > binding.retryAfterMs)) {
        binding = decision;
      }
    }
    if (binding) merged.deniedBy = binding.policy;
    const conflicted = parts.find((part) => part.decided.conflict);
    if (conflicted?.decided.conflict) merged.conflict = conflicted.decided.conflict;
    const blocked = parts.find((part) => part.decided.blocked);
    if (blocked?.decided.blocked) merged.blocked = blocked.decided.blocked;
    merged.replayed = false;
  } else {
    const counted = parts.filter((part) => part.decided.receipt);
    if (counted.length > 0) merged.receipt = mergedReceipt(count, counted, requestId);
    const slots = parts.flatMap((part) => part.decided.slots ?? []);
    if (slots.length > 0) merged.slots = slots;
  }
  const regions = new Set(parts.map((part) => part.decided.region));
  const [region] = regions;
  if (regions.size === 1 && region !== undefined) merged.region = region;
  return merged;
}

/** One receipt over the parts the store counted now, in request order. */
function mergedReceipt(
  count: number,
  counted: readonly ShardPart[],
  requestId: string | undefined,
): CountedReceipt {
  const order: { part: ShardPart; j: number }[] = new Array(count);
  for (const part of counted) {
    part.indices.forEach((index, j) => {
      order[index] = { part, j };
    });
  }
  const slots = order.filter((slot) => slot !== undefined);
  const receiptOf = (part: ShardPart) => part.decided.receipt as CountedReceipt;
  const first = receiptOf(counted[0] as ShardPart);
  const receipt: CountedReceipt = {
    memberId: first.memberId,
    policies: slots.map(({ part, j }) => receiptOf(part).policies[j] as string),
    costs: slots.map(({ part, j }) => receiptOf(part).costs[j] as number),
    at: first.at,
    resolved: slots.map(
      ({ part, j }) => receiptOf(part).resolved[j] as CountedReceipt["resolved"][number],
    ),
    parts: counted.map((part) => ({
      shard: part.shard,
      indices: part.indices,
      receipt: receiptOf(part),
    })),
  };
  if (requestId !== undefined) receipt.requestId = requestId;
  return receipt;
}
