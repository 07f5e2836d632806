/**
 * Reads the analytics back for GET /check/stats: the last `minutes` minutes of the rules asked
 * for (the configured ones) and of the two buckets (ADHOC_RULE, OTHER_RULE), in two pipelined
 * calls (the fields of those rules in each per-minute hash, then each rule's top denied keys
 * merged by ZUNION over its per-minute sets). Answers with a zero for every minute without
 * counts. Only named fields are read (HMGET, never HGETALL): whatever else is under the prefix
 * (another deployment's rules, ad-hoc windows counted by name before they were folded) costs
 * nothing and is not listed, so the answer and the work are (rules + 2) × minutes.
 */
import type { DecisionSource } from "../limiter/types";
import { ADHOC_RULE, addCounts, OTHER_RULE } from "./aggregate";
import {
  COUNT_CODES,
  countsKey,
  HOUR_MINUTES,
  labelsKey,
  MINUTE_MS,
  REGION_CODE,
  TOP_KEYS_RETENTION_MINUTES,
  topKey,
} from "./redis-layout";
import type { AnalyticsStore, RuleMinuteCounts, StatsSpan } from "./types";

export interface ReadStatsOptions {
  prefix: string;
  /** How many minutes back, the current one included. */
  minutes: number;
  /** The isolate's clock now (ms). */
  now: number;
  /** Rules to list even without counts (the configured ones), in this order. */
  rules: readonly string[];
  shadowPolicies: ReadonlySet<string>;
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
  const tops = await readTopKeys(store, options, rules, minuteIds);
  return {
    from: first * MINUTE_MS,
    to: (last + 1) * MINUTE_MS,
    rules: rules.map((rule, r) => {
      const series = byRule.get(rule) as RuleMinuteCounts[];
      const totals = emptyCounts();
      for (const counts of series) {
        addCounts(totals, counts);
      }
      return {
        rule,
        shadow: options.shadowPolicies.has(rule),
        totals,
        minutes: series.map(({ allowed, denied, deniedFromCache, shadowDenied }, i) => ({
          minute: (minuteIds[i] as number) * MINUTE_MS,
          allowed,
          denied,
          deniedFromCache,
          shadowDenied,
        })),
        topDenied: tops[r] ?? [],
      };
    }),
  };
}

/** Each rule's top denied keys over the span's last hour: one ZUNION per rule, one call. */
async function readTopKeys(
  store: AnalyticsStore,
  options: ReadStatsOptions,
  rules: readonly string[],
  minuteIds: readonly number[],
): Promise<{ key: string; count: number }[][]> {
  if (options.topKeys === 0 || rules.length === 0) return [];
  const recent = minuteIds.slice(-Math.min(minuteIds.length, TOP_KEYS_RETENTION_MINUTES - 2));
  const read = store.pipeline();
  for (const rule of rules) {
    const keys = recent.map((minute) => topKey(options.prefix, minute, rule));
    read.zunion(keys.length, keys, { withScores: true, aggregate: "sum" });
  }
  const answers = (await read.exec()) as unknown[];
  const tops = answers.map((answer) =>
    scoredPairs(answer)
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
      .slice(0, options.topKeys),
  );
  if (options.labels) await addLabels(store, options.prefix, rules, recent, tops);
  return tops;
}

/**
 * Each top key's label, from the hour hashes the span's minutes fall in (two at most for an
 * hour): one more call, HMGET of the listed keys only.
 */
async function addLabels(
  store: AnalyticsStore,
  prefix: string,
  rules: readonly string[],
  minuteIds: readonly number[],
  tops: { key: string; count: number; label?: string }[][],
): Promise<void> {
  const hours = [...new Set(minuteIds.map((minute) => Math.floor(minute / HOUR_MINUTES)))];
  const read = store.pipeline();
  const asked: { rule: number }[] = [];
  rules.forEach((rule, r) => {
    const keys = (tops[r] ?? []).map((top) => top.key);
    if (keys.length === 0) return;
    for (const hour of hours) {
      read.hmget(labelsKey(prefix, hour, rule), ...keys);
      asked.push({ rule: r });
    }
  });
  if (asked.length === 0) return;
  const answers = (await read.exec()) as unknown[];
  answers.forEach((answer, i) => {
    const top = tops[asked[i]?.rule ?? -1] ?? [];
    const fields = top.map((entry) => entry.key);
    for (const [key, value] of pairs(answer, fields)) {
      const entry = top.find((candidate) => candidate.key === key);
      if (entry && typeof value === "string" && entry.label === undefined) entry.label = value;
    }
  });
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

/**
 * HMGET's answer as the client hands it back: the values in field order (raw), an object by
 * field, or null (none of the fields set).
 */
function pairs(hash: unknown, fields: readonly string[]): [string, unknown][] {
  if (Array.isArray(hash)) return fields.map((field, i) => [field, hash[i]]);
  if (hash && typeof hash === "object") return Object.entries(hash);
  return [];
}

/** A flat [member, score, …] array (raw) or an object. */
function flatPairs(answer: unknown): [string, unknown][] {
  if (Array.isArray(answer)) {
    const out: [string, unknown][] = [];
    for (let i = 0; i + 1 < answer.length; i += 2) out.push([String(answer[i]), answer[i + 1]]);
    return out;
  }
  if (answer && typeof answer === "object") return Object.entries(answer);
  return [];
}

/** ZUNION … WITHSCORES: flat [member, score, …], or [[member, score], …]. */
function scoredPairs(answer: unknown): { key: string; count: number }[] {
  if (!Array.isArray(answer)) return [];
  if (answer.every((item) => Array.isArray(item))) {
    return (answer as unknown[][]).map(([key, count]) => ({
      key: String(key),
      count: Number(count),
    }));
  }
  return flatPairs(answer).map(([key, count]) => ({ key, count: Number(count) }));
}
