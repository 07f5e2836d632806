/**
 * The top keys GET /check/stats answers (read-stats.ts reads the counts): each rule's most
 * denied client keys and each usage rule's top spenders over the span's last hour, each merged
 * from its per-minute sets by one ZUNION, all in one pipelined call; then, when asked, their
 * labels in one more (HMGET of the listed keys only).
 */
import {
  HOUR_MINUTES,
  labelsKey,
  spendKey,
  TOP_KEYS_RETENTION_MINUTES,
  topKey,
} from "./redis-layout";
import type { AnalyticsStore } from "./types";

export interface TopEntry {
  key: string;
  count: number;
  label?: string;
}

export interface TopsAsked {
  prefix: string;
  topKeys: number;
  /** Read the keys' labels too (AnalyticsOptions.keyLabel given). */
  labels: boolean;
  /** The rules whose top denied keys are read. */
  denied: readonly string[];
  /** The usage rules whose top spenders are read. */
  spenders: readonly string[];
  /** The span's minutes (ms / 60 000), oldest first: the last hour of them is read. */
  minuteIds: readonly number[];
}

/** Per rule asked, in the order asked: its top denied keys, and its top spenders. */
export async function readTops(
  store: AnalyticsStore,
  asked: TopsAsked,
): Promise<{ denied: TopEntry[][]; spenders: TopEntry[][] }> {
  const { minuteIds, prefix } = asked;
  if (asked.topKeys === 0 || asked.denied.length + asked.spenders.length === 0) {
    return { denied: [], spenders: [] };
  }
  const recent = minuteIds.slice(-Math.min(minuteIds.length, TOP_KEYS_RETENTION_MINUTES - 2));
  const read = store.pipeline();
  const union = (keys: string[]) =>
    read.zunion(keys.length, keys, { withScores: true, aggregate: "sum" });
  for (const rule of asked.denied) union(recent.map((minute) => topKey(prefix, minute, rule)));
  for (const rule of asked.spenders) union(recent.map((minute) => spendKey(prefix, minute, rule)));
  const answers = (await read.exec()) as unknown[];
  const tops = answers.map((answer) =>
    scoredPairs(answer)
      // A spender whose settles gave back all it was charged used nothing: not a top spender.
      .filter((entry) => entry.count > 0)
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
      .slice(0, asked.topKeys),
  );
  const denied = tops.slice(0, asked.denied.length);
  const spenders = tops.slice(asked.denied.length);
  if (asked.labels) {
    await addLabels(store, prefix, recent, [
      ...asked.denied.map((rule, r) => ({ rule, entries: denied[r] ?? [] })),
      ...asked.spenders.map((rule, r) => ({ rule, entries: spenders[r] ?? [] })),
    ]);
  }
  return { denied, spenders };
}

/**
 * Each listed key's label, from the hour hashes the span's minutes fall in (two at most for an
 * hour): one more call, HMGET of the listed keys only.
 */
async function addLabels(
  store: AnalyticsStore,
  prefix: string,
  minuteIds: readonly number[],
  groups: readonly { rule: string; entries: TopEntry[] }[],
): Promise<void> {
  const hours = [...new Set(minuteIds.map((minute) => Math.floor(minute / HOUR_MINUTES)))];
  const read = store.pipeline();
  const asked: TopEntry[][] = [];
  for (const { rule, entries } of groups) {
    const keys = entries.map((top) => top.key);
    if (keys.length === 0) continue;
    for (const hour of hours) {
      read.hmget(labelsKey(prefix, hour, rule), ...keys);
      asked.push(entries);
    }
  }
  if (asked.length === 0) return;
  const answers = (await read.exec()) as unknown[];
  answers.forEach((answer, i) => {
    const top = asked[i] ?? [];
    const fields = top.map((entry) => entry.key);
    for (const [key, value] of pairs(answer, fields)) {
      const entry = top.find((candidate) => candidate.key === key);
      if (entry && typeof value === "string" && entry.label === undefined) entry.label = value;
    }
  });
}

/**
 * HMGET's answer as the client hands it back: the values in field order (raw), an object by
 * field, or null (none of the fields set).
 */
export function pairs(hash: unknown, fields: readonly string[]): [string, unknown][] {
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
