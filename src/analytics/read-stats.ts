/**
 * Reads the analytics back for GET /check/stats: the last `minutes` minutes of the rules asked
 * for (the configured ones) and of the two buckets (ADHOC_RULE, OTHER_RULE), in two pipelined
 * calls (the fields of those rules in each per-minute hash, then each rule's top denied keys and
 * each usage rule's top spenders: read-top.ts). Answers with a zero for every minute without
 * counts. A usage rule (listed as one, or one that charged units in the span) gets its units per
 * minute and in total, and its top spenders; no other rule has those fields. Only named fields are read (HMGET, never HGETALL): whatever else is under the prefix
 * (another deployment's rules, ad-hoc windows counted by name before they were folded) costs
 * nothing and is not listed, so the answer and the work are (rules + 2) × minutes.
 */
import type { DecisionSource } from "../limiter/types";
import { ADHOC_RULE, addCounts, OTHER_RULE } from "./aggregate";
import { pairs, readTops } from "./read-top";
import { COUNT_CODES, countsKey, MINUTE_MS, REGION_CODE, UNITS_CODE } from "./redis-layout";
import type { AnalyticsStore, RuleMinuteCounts, StatsRule, StatsSpan } from "./types";

export interface ReadStatsOptions {
  prefix: string;
  /** How many minutes back, the current one included. */
  minutes: number;
  /** The isolate's clock now (ms). */
  now: number;
  /** Rules to list even without counts (the configured ones), in this order. */
  rules: readonly string[];
  shadowPolicies: ReadonlySet<string>;
  /** Usage rules: answered with their units and top spenders even without any in the span. */
  usagePolicies?: ReadonlySet<string>;
  topKeys: number;
  /** Read the top keys' labels too (AnalyticsOptions.keyLabel given). */
  labels?: boolean;
  /** Region names whose counts are read (`<rule>|@<region>`). */
  regions?: readonly string[];
}

export async function readStats(
  store: AnalyticsStore,
  options: ReadStatsOptions,
): Promise<StatsSpan> {
  const last = Math.floor(options.now / MINUTE_MS);
  const first = last - options.minutes + 1;
  const minuteIds = Array.from({ length: options.minutes }, (_, i) => first + i);

  const buckets = [ADHOC_RULE, OTHER_RULE].filter((bucket) => !options.rules.includes(bucket));
  const names = [...new Set(options.rules), ...buckets];
  const codes = [
    ...FIELD_CODES,
    UNITS_CODE,
    ...(options.regions ?? []).map((region) => `${REGION_CODE}${region}`),
  ];
  const fields = names.flatMap((rule) => codes.map((code) => `${rule}|${code}`));
  const read = store.pipeline();
  for (const minute of minuteIds) read.hmget(countsKey(options.prefix, minute), ...fields);
  const hashes = (await read.exec()) as unknown[];

  // rule → minute index → counts
  const byRule = new Map(names.map((rule) => [rule, minuteIds.map(emptyCounts)]));
  hashes.forEach((hash, index) => {
    for (const [field, value] of pairs(hash, fields)) {
      if (value === null || value === undefined) continue;
      const bar = field.lastIndexOf("|");
      const counts = byRule.get(field.slice(0, bar))?.[index];
      if (counts) addField(counts, field.slice(bar + 1), Number(value) || 0);
    }
  });
  // A bucket is listed only when it counted something in the span.
  for (const bucket of buckets) {
    const series = byRule.get(bucket) ?? [];
    if (series.every((counts) => Object.values(counts.sources).every((n) => !n))) {
      byRule.delete(bucket);
    }
  }

  const rules = [...byRule.keys()];
  const usage = rules.filter(
    (rule) =>
      options.usagePolicies?.has(rule) ||
      byRule.get(rule)?.some((counts) => counts.units !== undefined),
  );
  const tops = await readTops(store, {
    prefix: options.prefix,
    topKeys: options.topKeys,
    labels: options.labels === true,
    denied: rules,
    spenders: usage,
    minuteIds,
  });
  return {
    from: first * MINUTE_MS,
    to: (last + 1) * MINUTE_MS,
    rules: rules.map((rule, r) => {
      const series = byRule.get(rule) as RuleMinuteCounts[];
      const spending = usage.indexOf(rule);
      // A usage rule's units in every minute (0 without any) and in total; no other rule's.
      if (spending >= 0) for (const counts of series) counts.units ??= 0;
      const totals = emptyCounts();
      if (spending >= 0) totals.units = 0;
      for (const counts of series) {
        addCounts(totals, counts);
      }
      const answered: StatsRule = {
        rule,
        shadow: options.shadowPolicies.has(rule),
        totals,
        minutes: series.map(({ allowed, denied, deniedFromCache, shadowDenied, units }, i) => ({
          minute: (minuteIds[i] as number) * MINUTE_MS,
          allowed,
          denied,
          deniedFromCache,
          shadowDenied,
          ...(units !== undefined ? { units } : {}),
        })),
        topDenied: tops.denied[r] ?? [],
      };
      if (spending >= 0) {
        answered.topSpenders = (tops.spenders[spending] ?? []).map(({ key, count, label }) => ({
          key,
          units: count,
          ...(label !== undefined ? { label } : {}),
        }));
      }
      return answered;
    }),
  };
}

// Every decision source, spelled out so that a new one fails to compile here until it is read.
const SOURCES: Record<DecisionSource, true> = {
  redis: true,
  cache: true,
  fallback: true,
  "fail-open": true,
  "fail-closed": true,
  lease: true,
  region: true,
  block: true,
};
/** Every field a rule may have in a minute's hash (redis-layout.ts): its outcomes and sources. */
const FIELD_CODES: readonly string[] = [...COUNT_CODES, ...Object.keys(SOURCES)];

function emptyCounts(): RuleMinuteCounts {
  return {
    allowed: 0,
    denied: 0,
    deniedFromCache: 0,
    shadowDenied: 0,
    sources: { redis: 0, cache: 0, fallback: 0, "fail-open": 0, "fail-closed": 0 },
  };
}

function addField(counts: RuleMinuteCounts, code: string, value: number) {
  switch (code) {
    case COUNT_CODES[0]:
      counts.allowed += value;
      return;
    case COUNT_CODES[1]:
      counts.denied += value;
      return;
    case COUNT_CODES[2]:
      counts.deniedFromCache += value;
      return;
    case COUNT_CODES[3]:
      counts.shadowDenied += value;
      return;
    case UNITS_CODE:
      counts.units = (counts.units ?? 0) + value;
      return;
  }
  if (code.startsWith(REGION_CODE)) {
    const region = code.slice(REGION_CODE.length);
    counts.regions ??= {};
    counts.regions[region] = (counts.regions[region] ?? 0) + value;
    return;
  }
  // Any other code is a decision source's name.
  const source = code as DecisionSource;
  counts.sources[source] = (counts.sources[source] ?? 0) + value;
}
