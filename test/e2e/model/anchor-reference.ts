/**
 * The reference's per-key calendar anchors (docs/calendar-quotas.md "A customer's own period"):
 * a calendar rule's key whose override carries `anchor` has its periods start on that anchor's
 * day and time of day, read in the rule's timezone; removing the override gives the rule's own
 * back. The store reads the override on every decision, so the period a decision counts in is
 * the one the override names at that instant (the isolate's remembered anchor only costs a
 * second script call when stale).
 *
 * A change mid-period: the store keeps one count per key (the last period written), so in the
 * period that holds the change (the new anchor's) it may count more than the model does (an old
 * period's units from before the new start, carried because its last admission is after it).
 * Denials there are not judged; what is judged is docs/calendar-quotas.md's promise that units
 * admitted since the new period's start still count in it (features.ts `anchor-mid-period`),
 * or, with that left out, only the units admitted since the change (never over the limit).
 */
import type { CalendarPeriod } from "../../../src/limiter/calendar-period";
import { periodOf } from "./calendar-reference";

interface AnchorState {
  /** The override's anchor (Unix ms); undefined: the rule's own. */
  anchor: number | undefined;
  /** A write whose outcome is unknown: the key's periods are not judged from then on. */
  unknown: boolean;
  /** The last change of the anchor: its step and instant. */
  changed: { seq: number; t: number } | undefined;
}

const pk = (policy: string, key: string) => `${policy}\u0000${key}`;

export class KeyAnchors {
  private readonly states = new Map<string, AnchorState>();

  /** Records a write of the key's override: its anchor (undefined: none), `ok` if it landed. */
  record(
    policy: string,
    key: string,
    anchor: number | undefined,
    ok: boolean,
    seq: number,
    t: number,
  ) {
    const id = pk(policy, key);
    const state = this.states.get(id) ?? { anchor: undefined, unknown: false, changed: undefined };
    if (!ok) state.unknown = true;
    else if (state.anchor !== anchor) state.changed = { seq, t };
    state.anchor = anchor;
    this.states.set(id, state);
  }

  /** Whether the key's anchor is not known (a write failed: it may have landed). */
  unknown(policy: string, key: string): boolean {
    return this.states.get(pk(policy, key))?.unknown === true;
  }

  /** The key's period: the rule's, on the override's anchor when it has one. */
  periodFor(period: CalendarPeriod, policy: string, key: string): CalendarPeriod {
    const anchor = this.states.get(pk(policy, key))?.anchor;
    return anchor === undefined ? period : { ...period, anchor };
  }

  /** The key's anchor changed in the period (its own) that holds `now`: the change, if so. */
  changedIn(
    period: CalendarPeriod,
    policy: string,
    key: string,
    now: number,
  ): { seq: number; t: number } | undefined {
    const changed = this.states.get(pk(policy, key))?.changed;
    if (!changed) return undefined;
    const { start } = periodOf(this.periodFor(period, policy, key), now);
    return changed.t >= start ? changed : undefined;
  }
}
