/**
 * Where the analytics live in Redis, and the one pipelined call that adds an isolate's pending
 * counts to them. Per minute (ms since the epoch / 60 000, the isolate's clock):
 *
 * - `<prefix>:analytics:<minute>`: one hash for every rule, field `<rule>|<code>` → count, codes
 *   a allowed, d denied, c denied from the cache, s shadow-denied, and per decision source its
 *   name (`api|redis`, `api|cache`, `api|fail-open`, `api|lease`…; only those seen). One key a
 *   minute, however many rules: a compact listpack hash while it has ≤ 128 fields (about 20
 *   rules). Expires `retentionMinutes` after its minute.
 * - `<prefix>:analytics:<minute>:top:<rule>`: a sorted set of that rule's most denied client
 *   keys, trimmed to `topKeys` members at every flush, expiring 62 minutes after its minute.
 * - a usage rule's units charged: the field `<rule>|u` of the minute's hash (signed increments:
 *   a settle gives back), and `<prefix>:analytics:<minute>:spend:<rule>`, a sorted set of its
 *   client keys by units charged, trimmed to 2 × `topKeys` members, expiring as the top keys.
 *   The minute is the request's admission's, for its settle's delta too: a give-back finds its
 *   reservation's member (ZADD XX INCR: a member trimmed away is not brought back negative).
 *
 * - `<prefix>:analytics:labels:<rule>:<hour>` (only with a `keyLabel`): a hash, top key → the raw
 *   value it was hashed from, for the top keys written in that hour; expires 62 minutes after it.
 *
 * Every write is an increment (HINCRBY, ZINCRBY), so isolates add up without coordination, and
 * every key gets an absolute expiry (PEXPIREAT) with every write: none lives without a TTL.
 */
import type { Pending, RuleMinute } from "./aggregate";
import type { TopKeys } from "./top-keys";
import type { AnalyticsStore } from "./types";

export const MINUTE_MS = 60_000;
/** Top keys serve the dashboard's hour (plus the minute being written and one of slack). */
export const TOP_KEYS_RETENTION_MINUTES = 62;

/** A region's count's field: `<rule>|@<region>` (docs/regions.md). */
export const REGION_CODE = "@";

/** Field codes of the four outcomes (a source's field is its name, never one letter). */
export const COUNT_CODES = ["a", "d", "c", "s"] as const;
/** A usage rule's units charged: `<rule>|u`. */
export const UNITS_CODE = "u";
/**
 * Top spenders kept per minute in Redis, per one answered: a reservation counts before its
 * settle, so a key ranked low at one flush may rank high once the others' settles give back.
 */
const SPENDERS_KEPT_PER_TOP_KEY = 2;

export const countsKey = (prefix: string, minute: number) => `${prefix}:analytics:${minute}`;
export const topKey = (prefix: string, minute: number, policy: string) =>
  `${prefix}:analytics:${minute}:top:${policy}`;
export const spendKey = (prefix: string, minute: number, policy: string) =>
  `${prefix}:analytics:${minute}:spend:${policy}`;

/** Labels of top keys are kept per hour: two hashes cover the dashboard's hour. */
export const HOUR_MINUTES = 60;
export const labelsKey = (prefix: string, hour: number, policy: string) =>
  `${prefix}:analytics:labels:${policy}:${hour}`;

export interface FlushLayout {
  prefix: string;
  retentionMinutes: number;
  topKeys: number;
  /** The raw value of a top key, when known (AnalyticsOptions.keyLabel). */
  keyLabel?: ((key: string) => string | undefined) | undefined;
}

/**
 * Adds `pending` to Redis in one pipelined call (one HTTP request). Resolves to the number of
 * commands sent (0: nothing to send, no call made); rejects when the store fails.
 */
export async function flushPending(
  store: AnalyticsStore,
  pending: Pending,
  layout: FlushLayout,
): Promise<number> {
  const pipeline = store.pipeline();
  let commands = 0;
  for (const [minute, rules] of pending) {
    const key = countsKey(layout.prefix, minute);
    const end = (minute + 1) * MINUTE_MS;
    for (const [policy, counts] of rules) {
      commands += addCounts(pipeline, key, policy, counts);
      if (counts.top && layout.topKeys > 0) {
        const top = topKey(layout.prefix, minute, policy);
        // Send a few more than kept: the merge across isolates needs their near-misses.
        const hour = Math.floor(minute / HOUR_MINUTES);
        const labels = labelsKey(layout.prefix, hour, policy);
        let labelled = false;
        for (const [client, count] of counts.top.top(layout.topKeys * 2)) {
          pipeline.zincrby(top, count, client);
          commands++;
          const label = layout.keyLabel?.(client);
          if (label !== undefined) {
            pipeline.hset(labels, { [client]: label });
            commands++;
            labelled = true;
          }
        }
        if (labelled) {
          const hourEnd = (hour + 1) * HOUR_MINUTES * MINUTE_MS;
          pipeline.pexpireat(labels, hourEnd + TOP_KEYS_RETENTION_MINUTES * MINUTE_MS);
          commands++;
        }
        pipeline.zremrangebyrank(top, 0, -(layout.topKeys + 1));
        pipeline.pexpireat(top, end + TOP_KEYS_RETENTION_MINUTES * MINUTE_MS);
        commands += 2;
      }
      if (counts.spenders && layout.topKeys > 0) {
        commands += addSpenders(pipeline, minute, policy, counts.spenders, layout);
      }
    }
    pipeline.pexpireat(key, end + layout.retentionMinutes * MINUTE_MS);
    commands++;
  }
  if (commands === 0) return 0;
  await pipeline.exec();
  return commands;
}

type Pipeline = ReturnType<AnalyticsStore["pipeline"]>;

function addCounts(pipeline: Pipeline, key: string, policy: string, counts: RuleMinute): number {
  let commands = 0;
  const values = [counts.allowed, counts.denied, counts.deniedFromCache, counts.shadowDenied];
  for (let i = 0; i < COUNT_CODES.length; i++) {
    const value = values[i] ?? 0;
    if (value > 0) {
      pipeline.hincrby(key, `${policy}|${COUNT_CODES[i]}`, value);
      commands++;
    }
  }
  for (const source in counts.sources) {
    const value = counts.sources[source as keyof RuleMinute["sources"]] ?? 0;
    if (value > 0) {
      pipeline.hincrby(key, `${policy}|${source}`, value);
      commands++;
    }
  }
  if (counts.units) {
    pipeline.hincrby(key, `${policy}|${UNITS_CODE}`, counts.units);
    commands++;
  }
  // A region's field is its name after "@" (outside the sources' alphabet).
  for (const [region, value] of Object.entries(counts.regions ?? {})) {
    if (value > 0) {
      pipeline.hincrby(key, `${policy}|${REGION_CODE}${region}`, value);
      commands++;
    }
  }
  return commands;
}

/**
 * A usage rule's units by client key in one minute: every key tracked is sent (a give-back must
 * reach its reservation's member), units added (ZINCRBY) or given back where the key is still
 * kept (ZADD XX INCR), labels as the top denied keys'; then trimmed and given its expiry.
 */
function addSpenders(
  pipeline: Pipeline,
  minute: number,
  policy: string,
  spenders: TopKeys,
  layout: FlushLayout,
): number {
  const key = spendKey(layout.prefix, minute, policy);
  const hour = Math.floor(minute / HOUR_MINUTES);
  const labels = labelsKey(layout.prefix, hour, policy);
  let commands = 0;
  let labelled = false;
  for (const [client, units] of spenders.counts) {
    if (units > 0) {
      pipeline.zincrby(key, units, client);
      const label = layout.keyLabel?.(client);
      if (label !== undefined) {
        pipeline.hset(labels, { [client]: label });
        commands++;
        labelled = true;
      }
    } else if (units < 0) {
      pipeline.zadd(key, { xx: true, incr: true }, { score: units, member: client });
    } else continue;
    commands++;
  }
  if (commands === 0) return 0;
  if (labelled) {
    pipeline.pexpireat(
      labels,
      (hour + 1) * HOUR_MINUTES * MINUTE_MS + TOP_KEYS_RETENTION_MINUTES * MINUTE_MS,
    );
    commands++;
  }
  pipeline.zremrangebyrank(key, 0, -(layout.topKeys * SPENDERS_KEPT_PER_TOP_KEY + 1));
  pipeline.pexpireat(key, (minute + 1) * MINUTE_MS + TOP_KEYS_RETENTION_MINUTES * MINUTE_MS);
  return commands + 2;
}
