/**
 * The worker's composition root: its bindings (LIMITER_CONFIG, the Upstash secrets) become the
 * parsed LimiterConfig, the compiled rules, the store client and the limiter (createLimiter's
 * LimiterOptions are built here from the LimiterConfig), once per isolate and configuration.
 */
import { waitUntil } from "cloudflare:workers";
import {
  type Analytics,
  type BreakerEvent,
  createAnalytics,
  createLimiter,
  createStoreClient,
  type Limiter,
  type LimiterOptions,
  type NetworkBlocks,
} from "edge-limiter";
import {
  createRules,
  type LimiterConfig,
  parseConfig,
  type RuleSet,
  type Validated,
} from "edge-limiter/server";
import { howToSet } from "./binding-hint";
import type { Env } from "./env";
import { createKeyLabels, type KeyLabels } from "./key-labels";
import { buildStores, receiptSecretOf } from "./shard-stores";
import { createShardTally, type ShardTally } from "./shard-tally";

/** What one isolate builds once from its bindings: the parsed config, rules and the limiter. */
export type Runtime =
  | {
      ok: true;
      config: LimiterConfig;
      /** The rules as the routes decide with them: matching, keys, /check, the proxy. */
      rules: RuleSet;
      limiter: Limiter;
      /** This isolate's counts, when `analytics.enabled` (GET /check/stats reads them back). */
      analytics: Analytics | undefined;
      /** This isolate's copy of the network blocks, when `networkBlocks` is on (docs/plans.md). */
      networkBlocks: NetworkBlocks | undefined;
      /** This isolate's decisions per shard, when `shards` is set (docs/shards.md). */
      shardTally: ShardTally | undefined;
      /** Raw keys beside the plans' digests, when `analytics.keyLabels` is on. */
      keyLabels: KeyLabels | undefined;
    }
  | { ok: false; field: string; detail: string };

/** A runtime built from valid bindings. */
export type ReadyRuntime = Extract<Runtime, { ok: true }>;

// Per-isolate state lives at module scope, built lazily on the first request (workerd forbids
// I/O and randomness at module scope) and rebuilt only if the bindings change. A few entries,
// not one: a test (or an app) handing the worker two configurations must not rebuild per request.
const cache = new Map<string, Runtime>();
const MAX_RUNTIMES = 4;

// In front of it, by env object: workerd hands an isolate the same env on every request, so the
// common case is one WeakMap lookup instead of serializing the config per request. (An env that
// is a fresh object per call still works through the signature.) Bindings are not mutated.
const byEnv = new WeakMap<Env, Runtime>();

export function getRuntime(env: Env): Runtime {
  const known = byEnv.get(env);
  if (known) return known;
  const runtime = bySignature(env);
  byEnv.set(env, runtime);
  return runtime;
}

function bySignature(env: Env): Runtime {
  const signature = JSON.stringify([
    env.UPSTASH_REDIS_REST_URL,
    env.UPSTASH_REDIS_REST_TOKEN,
    env.LIMITER_CONFIG,
    env.LIMITER_REGION,
    // Each region's and shard's store bindings (only read when the config names them).
    Object.entries(env).filter(
      ([name]) =>
        name.startsWith("UPSTASH_REDIS_REST_URL_") || name.startsWith("UPSTASH_REDIS_REST_TOKEN_"),
    ),
  ]);
  let runtime = cache.get(signature);
  if (!runtime) {
    runtime = buildRuntime(env);
    if (!runtime.ok) {
      // The operator's copy of the reason, once per isolate and configuration (this is built
      // once): public answers only name the setting, since the reason may quote a secret.
      console.error(
        JSON.stringify({
          event: "limiter-misconfigured",
          field: runtime.field,
          detail: runtime.detail,
        }),
      );
    }
    if (cache.size >= MAX_RUNTIMES) cache.delete(cache.keys().next().value as string);
    cache.set(signature, runtime);
  }
  return runtime;
}

function buildRuntime(env: Env): Runtime {
  const parsed: Validated<LimiterConfig> = parseConfig(env.LIMITER_CONFIG, {
    required: true,
  });
  if (!parsed.ok) return parsed;
  const config = parsed.value;
  const stores = buildStores(env, config);
  if (!stores.ok) return stores;
  // What is per deployment (analytics, network blocks) lives on the first shard.
  const store = stores.first;
  const rules = createRules(config, {
    region: env.LIMITER_REGION,
    receiptSecret: receiptSecretOf(env, config),
  });
  const analytics = buildAnalytics(env, config, store, rules);
  if (analytics && !("record" in analytics)) return analytics;
  const regions = buildRegions(env, config);
  if (!regions.ok) return regions;
  // Decisions per shard (/check/stats, the dashboard), beside the analytics' per-rule counts.
  const shardTally = config.shards ? createShardTally() : undefined;
  const onDecision: LimiterOptions["onDecision"] =
    shardTally && analytics
      ? (requests, decided) => {
          shardTally.record(decided);
          analytics.record(requests, decided);
        }
      : shardTally
        ? (_requests, decided) => shardTally.record(decided)
        : analytics?.record;
  const limiter = createLimiter({
    store: stores.shards ?? store,
    ...(config.reshard
      ? {
          reshard: {
            from: config.reshard.from,
            at: config.reshard.at,
            ...(stores.removed ? { stores: stores.removed } : {}),
          },
        }
      : {}),
    timeoutMs: config.timeoutMs,
    denialCache: config.denialCache,
    prefix: config.prefix,
    clock: config.clock,
    failMode: config.failMode,
    fallback: config.fallback.enabled ? config.fallback : false,
    breaker: config.breaker,
    singleFlight: config.singleFlight,
    ...(config.isolateLeases ? {} : { leases: false as const }),
    ...(regions.stores ? { regions: { stores: regions.stores } } : {}),
    // The library's own log, per store (one JSON line per breaker change and kind of store
    // error, at most one a cool-down: an outage must not flood the logs), beside the breaker
    // the stats report.
    log: true,
    ...(analytics
      ? { onBreakerChange: (event: BreakerEvent) => analytics.noteBreaker(event) }
      : {}),
    ...(onDecision ? { onDecision } : {}),
    // Usage rules' units and top spenders: what each settle charged or gave back.
    ...(analytics ? { onSettle: analytics.recordSettle } : {}),
  });
  return {
    ok: true,
    config,
    rules,
    limiter,
    analytics,
    shardTally,
    keyLabels: config.analytics.keyLabels ? createKeyLabels(store, config.prefix) : undefined,
    networkBlocks: config.networkBlocks
      ? limiter.networkBlocks({
          refreshMs: config.networkBlocks.refreshMs,
          timeoutMs: config.timeoutMs,
        })
      : undefined,
  };
}

type RegionsBuilt =
  | {
      ok: true;
      stores: Record<string, ReturnType<typeof createStoreClient>> | undefined;
    }
  | { ok: false; field: string; detail: string };

/** Each region's store client from its bindings (the rule set picks a request's region). */
function buildRegions(env: Env, config: LimiterConfig): RegionsBuilt {
  const names = Object.keys(config.regions);
  const pinned = env.LIMITER_REGION?.trim() || undefined;
  if (pinned !== undefined && !names.includes(pinned)) {
    return {
      ok: false,
      field: "LIMITER_REGION",
      detail: `names no region of LIMITER_CONFIG's regions (${names.join(", ") || "none"})`,
    };
  }
  if (names.length === 0) return { ok: true, stores: undefined };
  const stores: Record<string, ReturnType<typeof createStoreClient>> = {};
  for (const [name, region] of Object.entries(config.regions)) {
    const urlBinding = `UPSTASH_REDIS_REST_URL_${region.store}` as const;
    const tokenBinding = `UPSTASH_REDIS_REST_TOKEN_${region.store}` as const;
    const url = env[urlBinding];
    const token = env[tokenBinding];
    if (!url || !token) {
      return {
        ok: false,
        field: url ? tokenBinding : urlBinding,
        detail: `is not set: region "${name}" has no store (${howToSet(url ? tokenBinding : urlBinding)})`,
      };
    }
    try {
      stores[name] = createStoreClient({
        url,
        token,
        timeoutMs: config.timeoutMs,
        autoPipeline: false,
      });
    } catch (error) {
      return { ok: false, field: urlBinding, detail: (error as Error).message };
    }
  }
  return { ok: true, stores };
}

/**
 * The per-isolate recorder when LIMITER_CONFIG turns analytics on: its flushes ride on the
 * current request's waitUntil (off the request path), and the Analytics Engine sink needs its
 * binding.
 */
function buildAnalytics(
  env: Env,
  config: LimiterConfig,
  store: ReturnType<typeof createStoreClient>,
  rules: RuleSet,
): Analytics | { ok: false; field: string; detail: string } | undefined {
  const settings = config.analytics;
  if (!settings.enabled) return undefined;
  const dataset = env.LIMITER_ANALYTICS;
  if (settings.sinks.includes("analytics-engine") && !dataset) {
    return {
      ok: false,
      field: "LIMITER_ANALYTICS",
      detail:
        'is not bound: analytics.sinks names "analytics-engine" (add an analytics_engine_datasets binding named LIMITER_ANALYTICS)',
    };
  }
  return createAnalytics({
    ...(settings.sinks.includes("redis") ? { store } : {}),
    ...(settings.sinks.includes("analytics-engine") && dataset ? { analyticsEngine: dataset } : {}),
    prefix: config.prefix,
    flushIntervalMs: settings.flushIntervalMs,
    retentionMinutes: settings.retentionMinutes,
    topKeys: settings.topKeys,
    // Raw header values beside their digests, only when asked: they may be secrets (API keys).
    ...(settings.keyLabels ? { keyLabel: rules.keyLabel } : {}),
    // Counted by name: the configured rules; every ad-hoc /check window in one bucket.
    rules: config.rules.map((rule) => rule.name),
    regions: Object.keys(config.regions),
    shadowPolicies: config.rules.filter((rule) => rule.shadow).map((rule) => rule.name),
    usagePolicies: config.rules.filter((rule) => rule.usage).map((rule) => rule.name),
    waitUntil,
    onFlushError: (error) =>
      console.error(JSON.stringify({ event: "analytics-flush-error", error: String(error) })),
  });
}
