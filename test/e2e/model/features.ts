/**
 * What the model test generates, by feature, and the switch that leaves some out: a feature
 * whose fix has not landed is listed in KNOWN_BROKEN (left out by default) until it holds.
 *
 * MODEL_OFF=a,b   leaves out more features (names below);
 * MODEL_ON=a,b    puts back ones KNOWN_BROKEN leaves out (MODEL_ON=all: every one);
 * MODEL_ONLY=a,b  generates these features alone (to aim a fuzz at a meeting of a few).
 *
 * A name with "×" is an intersection: both features stay on, only their meeting is left out
 * (e.g. "reshard×concurrency": no concurrency in a run that reshards).
 */
const FEATURES = [
  // algorithms
  "sliding-log",
  "fixed-window",
  "sliding-counter",
  "token-bucket",
  "concurrency",
  "calendar",
  "usage",
  // what is done with decisions
  "costs",
  "multi-policy",
  "burst",
  "request-ids",
  "refunds",
  "peek",
  "reset",
  "overrides",
  // a calendar key's own anchor (an override's), set and removed
  "anchors",
  "key-blocks",
  "network-blocks",
  "leases",
  // the environment
  "reshard",
  "faults",
  "hang",
  // intersections
  "reshard×concurrency",
  "reshard×request-ids",
  "reshard×plans",
  "reshard×peek",
  // a broken premise of the reshard: isolate 0 still on the old config up to 3 s after `at`
  "reshard-premise",
  "reshard×faults",
  "multi-shard×request-ids",
  "refunds×request-ids",
  "reshard×usage",
  // usage rules counted in a calendar period, in a fixed window
  "usage×calendar",
  "usage×fixed-window",
  // a refund, a reset of such a rule's request and its settle, both ways round
  "refunds×usage-count",
  "reset×usage-count",
  // a receipt refunded again (a caller repeating a refund, or retrying one that failed)
  "refund-again",
  // a key's own limit (an anchor's override) below a calendar request's cost
  "anchors×below-cost",
  // docs/calendar-quotas.md's promise across a key's anchor change: units admitted since the new
  // period's start count in it (off: only those admitted since the change are judged)
  "anchor-mid-period",
] as const;

export type Feature = (typeof FEATURES)[number];

/**
 * Left out by default: a meeting of features this test finds failing, until its fix lands (list
 * it here with its kept case in kept-seeds.json once fixed).
 *
 * - reshard×usage: a usage rule's moved key starts afresh on its new shard (the router peeks
 *   the old shard only for the ring, `sliding-log`; the weighted log is treated as a counter),
 *   so a rolling window holds the old shard's units plus up to the limit again. Shrunk:
 *   reshard at +1000; decide(iso1, usage/k2×3); settle(iso0, #0, 1.1×, any); clock +2500;
 *   decide(iso0, usage/k2×3+log/k0×1): 13 units at limit 12, no usage in flight. The worker's
 *   config now refuses a usage rule during a reshard (as a period rule), and docs/usage.md says
 *   what a library caller that reshards gets; left out here until the transition reads the
 *   old shard's weighted log too.
 *
 * - anchor-mid-period: a key's anchor moved back across one of the old anchor's period starts
 *   loses the units of the old period before it: the store keeps one count per key, the last
 *   period's (decide(iso0, monthly/k3×1); clock to monthly start 1 +1; decide(iso0,
 *   monthly/k3×2); anchor(iso0, monthly/k3, 2030-01-31T23:30:00-05:00, 5); decide(iso0,
 *   monthly/k3×3): 6 units in the month from March 1, 04:30 UTC at limit 5). Left out: in the
 *   period that holds a change only the units admitted since the change are judged (never over
 *   the limit).
 */
const KNOWN_BROKEN: readonly Feature[] = ["reshard×usage", "anchor-mid-period"];

function listed(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** The features on for this run: all, less KNOWN_BROKEN (unless MODEL_ON), less MODEL_OFF. */
export function enabledFeatures(
  env: Record<string, string | undefined> = process.env,
): Set<Feature> {
  const on = listed(env.MODEL_ON);
  const off = listed(env.MODEL_OFF);
  const only = listed(env.MODEL_ONLY);
  for (const name of [...on, ...off, ...only]) {
    if (name !== "all" && !(FEATURES as readonly string[]).includes(name)) {
      throw new Error(
        `unknown model feature ${JSON.stringify(name)}: one of ${FEATURES.join(", ")}`,
      );
    }
  }
  const enabled = new Set<Feature>(FEATURES);
  for (const feature of KNOWN_BROKEN) {
    if (!on.includes("all") && !on.includes(feature)) enabled.delete(feature);
  }
  for (const feature of off) enabled.delete(feature as Feature);
  if (only.length > 0) {
    for (const feature of FEATURES) {
      if (!only.includes(feature) && !on.includes(feature)) enabled.delete(feature);
    }
  }
  return enabled;
}
