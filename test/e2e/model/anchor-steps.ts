/**
 * The model's step for a calendar key's own anchor (docs/calendar-quotas.md "A customer's own
 * period"): an override with `anchor` (and a limit) set for one key of a calendar rule, or the
 * override removed; the reference (anchor-reference.ts) then starts the key's periods there.
 */
import type fc from "fast-check";
import type { Policy } from "./reference";
import { POLICIES, policyOn, type World } from "./world";

type Step = fc.AsyncCommand<World, World, false>;

/**
 * Anchors as a caller gives them (ISO-8601 with an offset, or Unix ms), each read in the rule's
 * zone: 23:30 on the 31st in New York (a month's end; the 1st in Berlin and UTC); Sunday 02:30 in
 * New York (the hour its spring-forward day skips); the 29th at 01:30 UTC (February: its last
 * day), a Tuesday 02:30 in Berlin; midnight UTC on the 1st; an instant with seconds and ms.
 */
export const ANCHORS: readonly (string | number)[] = [
  "2030-01-31T23:30:00-05:00",
  "2030-01-06T07:30:00Z",
  "2030-01-29T01:30:00Z",
  "2030-01-01T00:00:00Z",
  1_900_000_123_456,
];

const anchorMs = (given: string | number) =>
  typeof given === "number" ? given : Date.parse(given);

/** Sets (anchor: an index of ANCHORS) or removes (undefined) a calendar key's override. */
export class Anchor implements Step {
  constructor(
    readonly iso: number,
    readonly p: string,
    readonly k: number,
    readonly anchor: number | undefined,
    readonly limit: number,
  ) {}
  check(w: World) {
    // A reshard run has no calendar rule (the config refuses one during a reshard).
    return w.on("anchors") && !w.cfg.reshard && policyOn(w.features, this.p);
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const key = w.keys[this.k] as string;
    const policy = POLICIES[this.p] as Policy;
    const given = this.anchor === undefined ? undefined : ANCHORS[this.anchor];
    const change =
      given === undefined
        ? isolate.limiter.overrides.remove(policy.policy, key)
        : isolate.limiter.overrides.set(policy.policy, key, {
            limit: this.limit,
            algorithm: "calendar",
            anchor: given,
          });
    const out = await change.catch(() => undefined);
    w.ref.next();
    if (out && !out.ok) throw new Error(`override refused: ${out.field} ${out.detail}`);
    const limit = given === undefined ? undefined : this.limit;
    w.ref.recordOverride(policy, key, isolate.id, isolate.oldConfig, limit, out !== undefined);
    const anchor = given === undefined ? undefined : anchorMs(given);
    w.ref.anchors.record(policy.policy, key, anchor, out !== undefined, w.ref.seq, w.ref.now);
  }
  toString() {
    const what = this.anchor === undefined ? "remove" : `${ANCHORS[this.anchor]}, ${this.limit}`;
    return `anchor(iso${this.iso}, ${this.p}/k${this.k}, ${what})`;
  }
}

/** An anchor step from its `toString()`, or undefined. */
export function parseAnchor(text: string): Step | undefined {
  const m = /^anchor\(iso(\d), ([a-z]+)\/k(\d+), (?:remove|(\S+), (\d+))\)$/.exec(text);
  if (!m) return undefined;
  const given = m[4];
  const index = given === undefined ? undefined : ANCHORS.findIndex((a) => String(a) === given);
  return new Anchor(Number(m[1]), m[2] as string, Number(m[3]), index, Number(m[5] ?? 0));
}
