/**
 * Each shard's store client from its bindings (docs/shards.md): a shard's name is the suffix of
 * `UPSTASH_REDIS_REST_URL_<NAME>` / `UPSTASH_REDIS_REST_TOKEN_<NAME>`, and `""` the unsuffixed
 * pair, so the database a deployment started with stays a shard. A reshard's old shards need
 * their bindings too until its transition ends: their counts are still held against the limit.
 */
import { createStoreClient, type LimiterConfig } from "edge-limiter";
import type { Env } from "./env";

type StoreClient = ReturnType<typeof createStoreClient>;

export type ShardsBuilt =
  | { ok: true; stores: Record<string, StoreClient> | undefined }
  | { ok: false; field: string; detail: string };

/** The bindings' names of a shard (`""`: the unsuffixed pair). */
export function shardBindings(name: string): { url: string; token: string } {
  return name === ""
    ? { url: "UPSTASH_REDIS_REST_URL", token: "UPSTASH_REDIS_REST_TOKEN" }
    : { url: `UPSTASH_REDIS_REST_URL_${name}`, token: `UPSTASH_REDIS_REST_TOKEN_${name}` };
}

/**
 * Every shard's client, by name: those of `shards`, then those only `reshard.from` names.
 * Undefined without `shards`. `home`: the unsuffixed pair's client, already built.
 */
export function buildShards(env: Env, config: LimiterConfig, home: StoreClient): ShardsBuilt {
  if (!config.shards) return { ok: true, stores: undefined };
  const stores: Record<string, StoreClient> = {};
  for (const name of [...config.shards, ...(config.reshard?.from ?? [])]) {
    if (stores[name]) continue;
    if (name === "") {
      stores[name] = home;
      continue;
    }
    const bindings = shardBindings(name);
    const url = env[bindings.url as `UPSTASH_REDIS_REST_URL_${string}`];
    const token = env[bindings.token as `UPSTASH_REDIS_REST_TOKEN_${string}`];
    if (!url || !token) {
      return {
        ok: false,
        field: url ? bindings.token : bindings.url,
        detail: `is not set: shard "${name}" has no store (set it with \`wrangler secret put\`)`,
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
      return { ok: false, field: bindings.url, detail: (error as Error).message };
    }
  }
  return { ok: true, stores };
}
