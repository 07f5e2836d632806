/**
 * The placement fence (docs/shards.md "Which mistakes are refused"): what each shard knows of a
 * reshard, so that a caller whose placement is stale is told so by the shard, as Redis Cluster
 * answers MOVED, instead of admitting on its own view.
 *
 * A reshard is exact only on premises (sharded-limiter.ts): every isolate runs the same
 * `reshard` before its `at`, on clocks that agree, and one reshard at a time. None of them is
 * something an isolate can see alone, but every admission of a key passes through the shard that
 * holds the key, so the shard can check them. Each shard keeps one record per prefix:
 *
 *   `<prefix>:placement` = "<from id>|<to id>|<at>|<endsBy>|<closed>"
 *
 * the ids of the placements before and after the reshard (a hash of their shard names), its
 * instant, the end of its longest transition, and whether the old placement is closed on this
 * shard. The record is written by the first script of an isolate on the new config (its announce,
 * or any of its decisions) before `at`; an `at` already past then is refused, because isolates on
 * the old config may have admitted moved keys on their old shards in the meantime without the
 * new shards counting them.
 *
 * Every decision script of a sharded limiter carries the caller's view: the placement it placed
 * the key by and, with a reshard configured, that reshard. The shard refuses (nothing read,
 * nothing counted) a caller that placed the key by the old placement once the old placement is
 * closed there, or from `at` on the script's clock. Which clock: on the Redis clock the store's
 * own TIME, one clock per shard, so an isolate whose clock is behind cannot decide on the old
 * placement after the store's `at`; on the caller clock (`clock: "caller"`, or a store that
 * refuses TIME) there is no clock of the store's to trust, so the fence rests on `closed`, which
 * needs no clock at all: the first call that places a key by the new placement closes the old
 * one on that shard, and a new-config isolate closes a moved key's old shard (fenceClose) before
 * it reads the old count there. From then on the old shard admits nothing on the old placement
 * whatever the caller's clock says, so the count read after the close only falls — the very
 * premise the transition's arithmetic needs, now enforced in the order the shard ran the scripts
 * rather than assumed of clocks. A new-config isolate whose clock is ahead closes the old
 * placement early: the mistake then costs denials on the old config, never an admission.
 *
 * Cost: one GET in each decision script of a sharded limiter (the record, beside the key's own
 * commands), a SET only when the record is first written or closed; one announce per isolate per
 * shard and one close per old shard. Like the plans hash, the record is one key per prefix in
 * every decision's KEYS (Upstash locks the keys a script names).
 */

import { clockedScript } from "./clock-slots";
import { CLOCK_LUA } from "./lua/clock.lua";
import { FENCE_LUA } from "./lua/placement-fence.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";
import type { ScriptArg } from "./store-clock";

/** The fence record's key on each shard. */
export function fenceKey(prefix: string): string {
  return `${prefix}:placement`;
}

/**
 * What a caller knows of the placement when it decides a key, sent with every decision.
 * `placed`: the id of the placement it placed the key by (placementId).
 */
export type FenceView =
  | { kind: "stable"; placed: string }
  | {
      kind: "reshard";
      placed: string;
      /** The ids of `reshard.from` and of the shards in force from `at`. */
      from: string;
      to: string;
      at: number;
      /** The end of the reshard's longest transition (unix ms). */
      endsBy: number;
    };

/** Why a shard refused a caller's view (the reply's code, 1-based). */
const FENCE_REFUSALS = [
  // 1: the key was placed by the old placement, and the shard has closed it or passed `at`.
  "old-placement",
  // 2: the same shards, another instant than the one the shards were told.
  "other-at",
  // 3: a reshard from the shards of one whose transition has not ended.
  "second-reshard",
  // 4: nobody told the shard of this reshard before its instant.
  "late",
  // 5: a placement the shard's record names neither as before nor as after.
  "other-shards",
] as const;

export type FenceRefusalKind = (typeof FENCE_REFUSALS)[number];

/** A shard's refusal: why, and the instant and transition end of the reshard it knows. */
export interface FenceRefusal {
  kind: FenceRefusalKind;
  at: number;
  endsBy: number;
}

/**
 * An id for a list of shard names: two 32-bit FNV-1a hashes (16 hex digits). Sorted first:
 * rendezvous hashing places a key by the set of names (only a tie, 1 in 2^32, goes by order).
 */
export function placementId(names: readonly string[]): string {
  const text = JSON.stringify([...names].sort());
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995) ^ (b >>> 15);
  }
  return (a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0");
}

/** The fence section of a script's ARGV: 'f', then the view. */
export function fenceArgs(view: FenceView): ScriptArg[] {
  return view.kind === "stable"
    ? ["f", "s", view.placed]
    : ["f", "r", view.placed, view.from, view.to, view.at, view.endsBy];
}

/** A refusal reply ({-3, code, at, endsBy}) read, or undefined for any other reply. */
export function fenceRefusalOf(reply: unknown): FenceRefusal | undefined {
  if (!Array.isArray(reply) || reply.length !== 4 || reply[0] !== -3) return undefined;
  const [, code, at, endsBy] = reply as unknown[];
  const kind = typeof code === "number" ? FENCE_REFUSALS[code - 1] : undefined;
  if (kind === undefined || typeof at !== "number" || typeof endsBy !== "number") {
    throw new StoreReplyError(`unexpected fence reply: ${JSON.stringify(reply)}`);
  }
  return { kind, at, endsBy };
}

// KEYS[1] the record; ARGV[1] the caller's clock or "" (TIME), ARGV[2..] the fence section.
// Returns {0}, or the refusal.
const FENCE_SCRIPT = clockedScript(
  `#!lua flags=allow-key-locking
${CLOCK_LUA}${FENCE_LUA}local refused = fence(KEYS[1], 2, clock(ARGV[1]))
if refused then return refused end
return {0}
`,
  0,
);

/**
 * Tells one shard of the caller's reshard (`close` false: the announce, before `at`), or closes
 * the old placement there (`close` true: before the caller reads a moved key's old count on it).
 * Undefined when the shard agrees; the refusal otherwise. Throws on a store failure. `now`: the
 * caller's clock, or undefined for the store's.
 */
export async function fencePlacement(
  client: ScriptClient,
  prefix: string,
  view: FenceView & { kind: "reshard" },
  close: boolean,
  now: number | undefined,
): Promise<FenceRefusal | undefined> {
  const args = fenceArgs({ ...view, placed: close ? view.to : "" });
  const reply = await runScript<unknown>(
    client,
    FENCE_SCRIPT,
    [fenceKey(prefix)],
    [now ?? "", ...args],
  );
  const refused = fenceRefusalOf(reply);
  if (refused) return refused;
  if (!Array.isArray(reply) || reply[0] !== 0) {
    throw new StoreReplyError(`unexpected fence reply: ${JSON.stringify(reply)}`);
  }
  return undefined;
}
