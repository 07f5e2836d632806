/**
 * One isolate's counts since its last flush: per minute, per rule, what was decided. Bounded:
 * a policy outside the listed rules (the configured ones; in the worker, an ad-hoc /check's
 * `check.<window>ms`, whose window the caller picks) is counted under ADHOC_RULE; at most
 * MAX_RULES_PER_MINUTE rules a minute (more land in OTHER_RULE: without a list, every policy is
 * its own rule) and MAX_PENDING_MINUTES minutes (older ones are dropped, and counted, if flushes
 * keep failing); each rule's denied keys, and a usage rule's units charged per key, each in a
 * TopKeys of a few times `topKeys`.
 */
import type { DecisionSource } from "../limiter/types";
import { ownedString } from "../owned-string";
import { TopKeys } from "./top-keys";
import type { RuleMinuteCounts } from "./types";

const MAX_RULES_PER_MINUTE = 64;
const MAX_PENDING_MINUTES = 15;
/** Where the rules past MAX_RULES_PER_MINUTE in one minute are counted. */
export const OTHER_RULE = "(other)";
/**
 * Where every policy outside the listed rules is counted: one bucket, however many ad-hoc
 * windows callers pick. Parentheses are outside a rule name's alphabet: no rule is called so.
 */
export const ADHOC_RULE = "(ad-hoc)";
/** Client keys are cut to this many characters (a key may be 512). */
export const MAX_KEY_LENGTH = 128;

export interface RuleMinute {
  allowed: number;
  denied: number;
  deniedFromCache: number;
  shadowDenied: number;
  /** Counts by source ("redis", "cache"…), only those seen. */
  sources: Partial<Record<DecisionSource, number>>;
  /** Counts by region (requests decided for a region), only those seen. */
  regions?: Record<string, number>;
  top: TopKeys | undefined;
  /** Usage rules: units charged (reservations, then settles' deltas), and by client key. */
  units?: number;
  spenders?: TopKeys;
}

/** minute (ms since the epoch / 60 000) → rule → counts. */
export type Pending = Map<number, Map<string, RuleMinute>>;

export type Outcome = "allowed" | "denied" | "shadow-denied" | "not-counted";

export class Aggregate {
  private pending: Pending = new Map();
  // The minute being written, cached: one Map lookup per decision instead of two.
  private minute = -1;
  private rules: Map<string, RuleMinute> | undefined;
  /** Rule-minutes dropped (MAX_PENDING_MINUTES). */
  dropped = 0;
  size = 0;

  /**
   * @param listed the rules counted by name (any other policy: ADHOC_RULE); undefined: every
   * policy by name, up to MAX_RULES_PER_MINUTE a minute
   */
  constructor(
    private readonly topCapacity: number,
    private readonly listed?: ReadonlySet<string>,
  ) {}

  add(
    minute: number,
    policy: string,
    outcome: Outcome,
    source: DecisionSource,
    key: string,
    region?: string,
  ): void {
    let rules = this.rules;
    if (minute !== this.minute || !rules) {
      rules = this.rulesOf(minute);
      if (!rules) return;
      this.minute = minute;
      this.rules = rules;
    }
    const counts = this.countsOf(rules, policy);
    counts.sources[source] = (counts.sources[source] ?? 0) + 1;
    if (region !== undefined) {
      counts.regions ??= {};
      counts.regions[region] = (counts.regions[region] ?? 0) + 1;
    }
    if (outcome === "allowed") counts.allowed++;
    else if (outcome === "denied" || outcome === "shadow-denied") {
      if (outcome === "denied") {
        counts.denied++;
        if (source === "cache") counts.deniedFromCache++;
      } else counts.shadowDenied++;
      if (this.topCapacity > 0) {
        counts.top ??= new TopKeys(this.topCapacity);
        // A copy: the key (or its first 128 units) may be a view into a large header, which a kept
        // view would keep alive for as long as the minute's counts.
        counts.top.add(
          ownedString(key.length > MAX_KEY_LENGTH ? key.slice(0, MAX_KEY_LENGTH) : key),
        );
      }
    }
  }

  /**
   * Units a usage rule charged `key` (negative: given back by a settle), counted in `minute`: the
   * minute its request was admitted in, so that a settle's delta lands beside its reservation.
   */
  addUnits(minute: number, policy: string, key: string, units: number): void {
    const rules = this.rulesOf(minute);
    if (!rules) return;
    const counts = this.countsOf(rules, policy);
    counts.units = (counts.units ?? 0) + units;
    if (this.topCapacity > 0) {
      counts.spenders ??= new TopKeys(this.topCapacity);
      counts.spenders.add(
        ownedString(key.length > MAX_KEY_LENGTH ? key.slice(0, MAX_KEY_LENGTH) : key),
        units,
      );
    }
  }

  /** Everything held, handed over; the aggregate starts empty. */
  take(): Pending {
    const taken = this.pending;
    this.pending = new Map();
    this.minute = -1;
    this.rules = undefined;
    this.size = 0;
    return taken;
  }

  /** Puts back what a failed flush took (older minutes than the cap allows are dropped). */
  restore(taken: Pending): void {
    for (const [minute, rules] of taken) {
      const into = this.rulesOf(minute);
      if (!into) {
        this.dropped += rules.size;
        continue;
      }
      for (const [policy, counts] of rules) {
        const existing = into.get(policy);
        if (!existing) {
          into.set(policy, counts);
          this.size++;
          continue;
        }
        addCounts(existing, counts);
        if (counts.top) {
          existing.top ??= new TopKeys(this.topCapacity);
          for (const [key, count] of counts.top.counts) existing.top.add(key, count);
        }
        if (counts.spenders) {
          existing.spenders ??= new TopKeys(this.topCapacity);
          for (const [key, units] of counts.spenders.counts) existing.spenders.add(key, units);
        }
      }
    }
    this.minute = -1;
    this.rules = undefined;
  }

  /**
   * A minute's rules, made if new. Full (MAX_PENDING_MINUTES), the oldest minute goes, or this
   * one when it is older than all held (a settle of a request admitted long ago): undefined.
   */
  private rulesOf(minute: number): Map<string, RuleMinute> | undefined {
    let rules = this.pending.get(minute);
    if (!rules) {
      if (this.pending.size >= MAX_PENDING_MINUTES) {
        const oldest = Math.min(...this.pending.keys());
        if (minute < oldest) {
          this.dropped++;
          return undefined;
        }
        const gone = this.pending.get(oldest);
        if (oldest === this.minute) {
          this.minute = -1;
          this.rules = undefined;
        }
        this.dropped += gone?.size ?? 0;
        this.size -= gone?.size ?? 0;
        this.pending.delete(oldest);
      }
      rules = new Map();
      this.pending.set(minute, rules);
    }
    return rules;
  }

  /** A rule's counts in a minute, made if new (a policy outside the list: ADHOC_RULE). */
  private countsOf(rules: Map<string, RuleMinute>, policy: string): RuleMinute {
    if (this.listed && !this.listed.has(policy)) policy = ADHOC_RULE;
    let counts = rules.get(policy);
    if (!counts) {
      if (rules.size >= MAX_RULES_PER_MINUTE) policy = OTHER_RULE;
      counts = rules.get(policy);
      if (!counts) {
        counts = {
          allowed: 0,
          denied: 0,
          deniedFromCache: 0,
          shadowDenied: 0,
          sources: {},
          top: undefined,
        };
        rules.set(policy, counts);
        this.size++;
      }
    }
    return counts;
  }
}

/** Adds one rule's counts into another's (sources by name). */
export function addCounts(into: RuleMinuteCounts, counts: RuleMinuteCounts): void {
  into.allowed += counts.allowed;
  into.denied += counts.denied;
  into.deniedFromCache += counts.deniedFromCache;
  into.shadowDenied += counts.shadowDenied;
  if (counts.units !== undefined) into.units = (into.units ?? 0) + counts.units;
  for (const [source, count] of Object.entries(counts.sources) as [DecisionSource, number][]) {
    into.sources[source] = (into.sources[source] ?? 0) + count;
  }
  for (const [region, count] of Object.entries(counts.regions ?? {})) {
    into.regions ??= {};
    into.regions[region] = (into.regions[region] ?? 0) + count;
  }
}
