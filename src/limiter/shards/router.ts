/**
 * Where a key lives among a limiter's shards, and where it lived (docs/shards.md "Reshard"):
 * the one placement every operation on a key asks — decide, release, peek, reset, refund,
 * plans, in-flight counts and fallback slots — so that a moved key is handled the same way by
 * each. The transition's instants (sharded-limiter.ts says why each is where it is):
 *
 * - before `at`: the key lives where `reshard.from` places it;
 * - from `at`: where the placement in force does (`to`); a key whose shard changed also names
 *   the one it moved from (`from`) until `transitionEndsBy`;
 * - in [at, settledAt) a moved key is denied; after `settledAt` its old shard admits nothing.
 */
import { MAX_WINDOW_MS } from "../../store/caps";
import { STAMP_AHEAD_MAX_MS } from "../../store/keys";
import type { ShardLayout } from "./options";
import { createPlacement } from "./placement";
import type { ShardPlacement } from "./types";

/** A key's shard (index into the layout's names) at an instant, and the one it moved from. */
interface Route {
  to: number;
  /** The shard it lived on before the reshard, while a transition may last and only if other. */
  from: number | undefined;
}

export interface Router {
  /** The end of the interval after `at` in which moved keys are denied (unix ms; 0 without). */
  readonly settledAt: number;
  /** The latest end of every policy's transition (unix ms; 0 without a reshard). */
  readonly endsBy: number;
  route(key: string, t: number): Route;
  /** The end of a moved policy's transition: its window after the last stamp ahead. */
  transitionEnd(windowMs: number): number;
  /** The shard `key`'s policy of `windowMs` moved from, while its own transition lasts at `t`. */
  movedFrom(key: string, windowMs: number, t: number): number | undefined;
  /**
   * Every shard that may hold `key`'s state at `t`, the one deciding it first: both placements
   * while a reshard is configured and not over (a plan change goes to both, a slot or count
   * may be on either).
   */
  holders(key: unknown, t: number): number[];
  placement(t: number): ShardPlacement;
}

export function createRouter(layout: ShardLayout, timeoutMs: number): Router {
  const current = createPlacement(layout.names.slice(0, layout.placed));
  const reshard = layout.reshard;
  const previous = reshard && createPlacement(reshard.from);
  const previousIndex = reshard?.from.map((name) => layout.names.indexOf(name)) ?? [];
  const at = reshard?.at ?? 0;
  const settledAt = reshard ? at + timeoutMs : 0;
  const endsBy = reshard ? settledAt + STAMP_AHEAD_MAX_MS + MAX_WINDOW_MS : 0;
  const before = (key: string) => previousIndex[previous?.of(key) ?? 0] as number;

  function route(key: string, t: number): Route {
    if (!previous) return { to: current.of(key), from: undefined };
    if (t < at) return { to: before(key), from: undefined };
    const to = current.of(key);
    if (t >= endsBy) return { to, from: undefined };
    const from = before(key);
    return { to, from: from === to ? undefined : from };
  }
  const transitionEnd = (windowMs: number) => settledAt + STAMP_AHEAD_MAX_MS + windowMs;

  return {
    settledAt,
    endsBy,
    route,
    transitionEnd,
    movedFrom(key, windowMs, t) {
      const { from } = route(key, t);
      return from !== undefined && t < transitionEnd(windowMs) ? from : undefined;
    },
    holders(key, t) {
      if (typeof key !== "string") return [0];
      if (!previous || t >= endsBy) return [route(key, t).to];
      const after = current.of(key);
      const old = before(key);
      return old === after ? [after] : [after, old];
    },
    placement(t) {
      const placed = [...current.names];
      if (!reshard) return { phase: "stable", shards: placed };
      return {
        phase: t < at ? "before" : t < endsBy ? "transition" : "after",
        shards: t < at ? [...reshard.from] : placed,
        from: [...reshard.from],
        at,
        settledAt,
        transitionEndsBy: endsBy,
      };
    },
  };
}
