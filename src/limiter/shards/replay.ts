/**
 * A request id's retry over several shards (docs/shards.md). Each shard's part keeps its own
 * record, for its own policies' window: a part with a short window forgets the request while a
 * part with a long one still replays it. The parts cannot be asked to agree, but one replayed
 * admission is proof enough: a request denied as a whole gives back every part that admitted
 * (decide.ts), and that refund deletes the part's record. So a part that replays "admitted" means
 * the whole was admitted, and the retry is its replay: the parts decided afresh give back what
 * they counted now (and the slots they took), whatever they decided.
 *
 * A part that replays "denied" beside one that replays "admitted" does not make it a denial: a
 * denied original's admitted parts were refunded, records and all, so that denial is a retry's
 * own, recorded by a part an earlier replay decided afresh (its original record had lapsed;
 * the replay gave back nothing of a denial, and its record stays for the wait). Veto the replay
 * on it and the second retry of an admitted request would be denied where the first was
 * replayed. Alone, a replayed denial is the original's, and a conflict or a key block answers
 * as it does on one store: those retries are decided as they are.
 */
import type { LimitAllOptions } from "../types";
import type { ShardPart } from "./merge";
import type { Shard, Shards } from "./shard";

/** The original was admitted: some part replays an admission, none conflicts or is blocked. */
export function replaysAdmission(parts: readonly ShardPart[]): boolean {
  let admitted = false;
  for (const { decided } of parts) {
    if (decided.conflict || decided.blocked) return false;
    if (decided.replayed && decided.allowed) admitted = true;
  }
  return admitted;
}

/**
 * The parts decided afresh, turned into the replay: what they counted given back (their
 * receipt refunded, their slots released), their decisions reporting the admission the
 * original had. Mutates the parts; mergeParts then answers the whole as replayed.
 */
export async function asReplay(
  parts: readonly ShardPart[],
  shards: Shards,
  limitOptions: LimitAllOptions,
): Promise<void> {
  await Promise.all(
    parts.map(async (part) => {
      const { decided } = part;
      // A replayed denial (see above) took nothing: it only answers as the admission.
      if (decided.replayed && decided.allowed) return;
      const shard = shards.byName.get(part.shard) as Shard;
      const { receipt, slots } = decided;
      delete decided.receipt;
      delete decided.slots;
      const given: Promise<unknown>[] = [];
      if (decided.allowed && receipt) {
        given.push(
          shard.limiter.refund(receipt).then((outcome) => {
            part.refunded = outcome.refunded;
          }),
        );
      }
      // Each slot where it was taken (a fallback slot may name another shard's local store).
      for (const slot of decided.allowed ? (slots ?? []) : []) {
        const holder = shards.byName.get(slot.shard ?? part.shard) ?? shard;
        given.push(holder.limiter.release(slot, limitOptions));
      }
      await Promise.all(given);
      decided.allowed = true;
      decided.replayed = true;
      delete decided.deniedBy;
      for (const decision of decided.decisions) {
        // The original's admission; `remaining` is what the store holds now.
        decision.allowed = true;
        decision.retryAfterMs = 0;
        delete decision.slot;
      }
    }),
  );
}
