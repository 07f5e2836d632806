/**
 * Whether this isolate holds a key's whole window (docs/leases.md, "Sizing"): a
 * ledger, per key, of this isolate's own units in the key's log as its store answers report them
 * (admissions by the store, lease grants, less what it gave back), on the store's clock. When the
 * store's count of the window (limit − remaining) is exactly that ledger, nobody else has a unit
 * in the window, and a lease may take more than `maxShare` of what remains (lease-sizing.ts).
 *
 * Only sizing reads it: a lease of any size is exact (the store grants all of it or none, and
 * counts it against the limit), so a ledger that is wrong can cost fairness, never an
 * over-admission. Where it cannot know, it says no: units of this key admitted here before its
 * state was made, or refunded by the store, make the two differ (not sole), and so does a unit of
 * another isolate. So do calls of its own in flight (answers may arrive out of order): one the
 * store ran whose answer has not come yet, or one noted whose answer came before this one's.
 */

/** The ledger's part of a key's state (isolate-lease-keys.ts KeyState). */
export interface OwnUnits {
  /** This isolate's units in the key's log since the ledger started. */
  ownUnits: number;
  /** Store clock: the earliest and the latest stamp among them (±Infinity when none). */
  ownFrom: number;
  ownLast: number;
  /**
   * The ledger holds every unit of this isolate in the window: it started with none of them in
   * it, and none has left it since (then its count no longer says which are in it).
   */
  ownKnown: boolean;
  /** The last store answer counted only this isolate's units in the window. */
  sole: boolean;
}

export const NO_OWN_UNITS: OwnUnits = {
  ownUnits: 0,
  ownFrom: Number.POSITIVE_INFINITY,
  ownLast: Number.NEGATIVE_INFINITY,
  ownKnown: true,
  sole: false,
};

/**
 * At store time `now`: once its earliest unit may have left the window the ledger no longer
 * knows how many of its units are in it; once its latest has left too, none are, and it starts
 * again, knowing (a key quiet here for a window). A millisecond's margin each way: the edge is
 * the script's, and erring costs only a lease's size.
 */
function expire(state: OwnUnits, now: number, windowMs: number): void {
  const edge = now - windowMs;
  if (state.ownFrom > edge + 1) return;
  if (state.ownLast < edge - 1) {
    state.ownUnits = 0;
    state.ownFrom = Number.POSITIVE_INFINITY;
    state.ownLast = Number.NEGATIVE_INFINITY;
    state.ownKnown = true;
    return;
  }
  state.ownKnown = false;
}

/** The store admitted `units` of this isolate stamped `stamp` (a decision or a lease grant). */
export function noteOwn(
  state: OwnUnits,
  units: number,
  stamp: number,
  now: number,
  windowMs: number,
): void {
  expire(state, now, windowMs);
  state.ownUnits += units;
  state.ownFrom = Math.min(state.ownFrom, stamp);
  state.ownLast = Math.max(state.ownLast, stamp);
}

/** `units` of this isolate's left the log (a give-back the store confirmed). */
export function noteGivenBack(state: OwnUnits, units: number): void {
  state.ownUnits = Math.max(0, state.ownUnits - units);
}

/**
 * A store answer for the key at store time `now` said `remaining` under `limit` (after what it
 * admitted, noted first): sole when the window holds this isolate's units and no others.
 */
export function noteAnswer(
  state: OwnUnits,
  remaining: number,
  limit: number,
  now: number,
  windowMs: number,
): void {
  expire(state, now, windowMs);
  state.sole = state.ownKnown && state.ownUnits > 0 && limit - remaining === state.ownUnits;
}
