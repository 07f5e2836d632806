/**
 * `limiter.release`: concurrency slots given back when their requests end (docs/concurrency.md).
 * One script call for every slot given; a failure answered (never thrown) and, with a
 * `waitUntil`, retried off the request path a bounded number of times. A release that never
 * lands costs the slot's holder nothing more than its timeout: the slot lapses then.
 */
import { boundedKey, isDigestedKey } from "../bounded-key";
import { POLICY_NAME, storageKey } from "../store/keys";
import { releaseSlots, type SlotRef } from "../store/release";
import { withinDeadline } from "../store/script-runner";
import type { LimiterContext } from "./context";
import { LOCAL_SLOT_PREFIX, localSlotKey } from "./local-slots";
import { newSlotId } from "./member-id";
import type { ConcurrencySlot, ReleaseOutcome, WaitUntil } from "./types";

/** Retries of a failed release, off the path, and the wait before each (ms). */
const RELEASE_RETRY_DELAYS_MS = [100, 500, 2_000] as const;

/** Slot ids are the limiter's (random, or `r:<request id>` from older records): anything longer is not one. */
const MAX_SLOT_LENGTH = 1_024;

/** What `release` takes: one slot as a decision handed it out, or several. */
export type ReleaseInput = Pick<ConcurrencySlot, "policy" | "key" | "slot"> &
  Partial<Pick<ConcurrencySlot, "shard">>;

export interface ReleaseOptions {
  /**
   * Keeps the release, and the retries of a failed one, alive past the response:
   * `ctx.waitUntil`.
   */
  waitUntil?: WaitUntil | undefined;
}

/** Gives the slots back; see Limiter.release. */
export async function releaseOf(
  ctx: LimiterContext,
  given: ReleaseInput | readonly ReleaseInput[],
  options: ReleaseOptions = {},
): Promise<ReleaseOutcome> {
  const slots: readonly ReleaseInput[] = Array.isArray(given) ? given : [given as ReleaseInput];
  const issue = slots.map(slotIssue).find((found) => found !== undefined);
  if (issue) return { released: [], error: issue };
  // Slots the degraded path took in this isolate go back here; the store is not asked for them.
  if (slots.some(({ slot }) => slot.startsWith(LOCAL_SLOT_PREFIX))) {
    return releaseMixed(ctx, slots, options);
  }
  // Each slot under every key it may be counted under (countedKeys); one script call for all.
  const candidates = await Promise.all(slots.map(({ key }) => countedKeys(key)));
  const refs: SlotRef[] = [];
  const owner: number[] = [];
  candidates.forEach((keys, i) => {
    const { policy, slot } = slots[i] as ReleaseInput;
    for (const counted of keys) {
      refs.push({ redisKey: storageKey(ctx.prefix, policy, counted, "concurrency"), slot });
      owner.push(i);
    }
  });
  const attempt = async () => {
    const removed = await withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, clock) => releaseSlots(client, refs, clock)),
    );
    const released: boolean[] = new Array(slots.length).fill(false);
    removed.forEach((done, j) => {
      if (done) released[owner[j] as number] = true;
    });
    return released;
  };
  try {
    return { released: await attempt() };
  } catch (error) {
    ctx.onStoreError?.(error);
    const { waitUntil } = options;
    if (!waitUntil) return { released: [], error: String(error) };
    waitUntil(retry(attempt, ctx));
    return { released: [], error: String(error), retrying: true };
  }
}

/** Local slots given back here, the others by the store, answered in the order given. */
async function releaseMixed(
  ctx: LimiterContext,
  slots: readonly ReleaseInput[],
  options: ReleaseOptions,
): Promise<ReleaseOutcome> {
  const at = ctx.now();
  const stored = slots.filter(({ slot }) => !slot.startsWith(LOCAL_SLOT_PREFIX));
  const fromStore = stored.length > 0 ? await releaseOf(ctx, stored, options) : { released: [] };
  let next = 0;
  const released: boolean[] = [];
  for (const { policy, key, slot } of slots) {
    if (slot.startsWith(LOCAL_SLOT_PREFIX)) {
      let done = false;
      for (const counted of await countedKeys(key)) {
        done ||= ctx.localSlots.release(localSlotKey(policy, counted), slot, at);
      }
      released.push(done);
    } else {
      released.push(fromStore.released[next++] ?? false);
    }
  }
  const outcome: ReleaseOutcome = { released };
  if ("error" in fromStore && fromStore.error !== undefined) outcome.error = fromStore.error;
  if ("retrying" in fromStore && fromStore.retrying) outcome.retrying = true;
  return outcome;
}

/**
 * The keys a slot's key may be counted under. A decision's slot carries its key as counted: for
 * a key past MAX_KEY_LENGTH its digest, which boundedKey would digest again (a key spelling a
 * digest is digested, bounded-key.ts). A slot named by hand (POST /check/release) carries the
 * key as the client sent it. A key in the digest's form may be either: both are tried (slot ids
 * are unique, so at most one holds it).
 */
async function countedKeys(key: string): Promise<string[]> {
  const bounded = await boundedKey(key);
  return isDigestedKey(key) && bounded !== key ? [key, bounded] : [bounded];
}

/** The retries, one after another, until one lands; errors reported, never thrown. */
async function retry(attempt: () => Promise<boolean[]>, ctx: LimiterContext): Promise<void> {
  for (const delay of RELEASE_RETRY_DELAYS_MS) {
    await new Promise((resolve) => setTimeout(resolve, delay));
    try {
      await attempt();
      return;
    } catch (error) {
      ctx.onStoreError?.(error);
    }
  }
}

/**
 * The member id of a call with a concurrency policy: its slot's id, random (newSlotId), for a
 * release that names it is all a holder proves. A retry with a request id gets the original's
 * slot from its record (the record keeps the member id); undefined without a concurrency policy:
 * the short log member id then.
 */
export function slotMemberId(policies: readonly { algorithm: string }[]): string | undefined {
  return policies.some((policy) => policy.algorithm === "concurrency") ? newSlotId() : undefined;
}

// A plain-JS caller may pass anything: refused here, never sent.
function slotIssue(input: unknown): string | undefined {
  const { policy, key, slot } = (input ?? {}) as Record<string, unknown>;
  if (typeof policy !== "string" || !POLICY_NAME.test(policy)) {
    return "release: policy must be 1-64 characters of [A-Za-z0-9_.-]";
  }
  if (typeof key !== "string" || key.length === 0) {
    return "release: key must be a non-empty string";
  }
  if (typeof slot !== "string" || slot.length === 0 || slot.length > MAX_SLOT_LENGTH) {
    return `release: slot must be a non-empty string of at most ${MAX_SLOT_LENGTH} characters`;
  }
  return undefined;
}
