/**
 * The worker's store clients from its bindings: the unsuffixed pair's, or with `shards` in
 * LIMITER_CONFIG (docs/shards.md) each shard's. A shard's name is the suffix of
 * `UPSTASH_REDIS_REST_URL_<NAME>` / `UPSTASH_REDIS_REST_TOKEN_<NAME>`, and `""` the unsuffixed
 * pair, so the database a deployment started with stays a shard. A reshard's old shards need
 * their bindings too until its transition ends: their counts are still held against the limit.
 */
import { createStoreClient } from "edge-limiter";
import type { LimiterConfig } from "edge-limiter/server";
import { howToSet } from "./binding-hint";
import type { Env } from "./env";

type StoreClient = ReturnType<typeof createStoreClient>;

export type StoresBuilt =
  | {
      ok: true;
      /** The one store, or the first shard's: what is per deployment lives there (analytics). */
      first: StoreClient;
      /** Every shard of `shards`, by name, in order; undefined without `shards`. */
      shards: Record<string, StoreClient> | undefined;
      /** The shards only `reshard.from` names (being removed), by name. */
      removed: Record<string, StoreClient> | undefined;
    }
  | { ok: false; field: string; detail: string };

/** The bindings' names of a shard (`""`: the unsuffixed pair). */
function shardBindings(name: string): { url: string; token: string } {
  return name === ""
    ? { url: "UPSTASH_REDIS_REST_URL", token: "UPSTASH_REDIS_REST_TOKEN" }
    : { url: `UPSTASH_REDIS_REST_URL_${name}`, token: `UPSTASH_REDIS_REST_TOKEN_${name}` };
}

/**
 * The secret usage receipts are sealed with: one no /check caller holds (each holds the /check
 * token, and could seal a receipt for another client's request with it alone), shared by every
 * instance of the deployment: the first store's token with the /check token. A new store token
 * makes outstanding receipts unreadable (their reservations stand), as a new /check token does.
 */
export function receiptSecretOf(env: Env, config: LimiterConfig): string {
  const store = env[shardBindings(config.shards?.[0] ?? "").token as "UPSTASH_REDIS_REST_TOKEN"];
  return `${store ?? ""}\n${env.LIMITER_TOKEN ?? ""}`;
}

export function buildStores(env: Env, config: LimiterConfig): StoresBuilt {
  const built = new Map<string, StoreClient>();
  const names = config.shards ?? [""];
  for (const name of [...names, ...(config.reshard?.from ?? [])]) {
    if (built.has(name)) continue;
    const client = storeOf(env, config, name);
    if (!("evalsha" in client)) return client;
    built.set(name, client);
  }
  const pick = (list: readonly string[]) =>
    Object.fromEntries(list.map((name) => [name, built.get(name) as StoreClient]));
  const removed = (config.reshard?.from ?? []).filter((name) => !names.includes(name));
  return {
    ok: true,
    first: built.get(names[0] ?? "") as StoreClient,
    shards: config.shards ? pick(config.shards) : undefined,
    removed: removed.length > 0 ? pick(removed) : undefined,
  };
}

function storeOf(
  env: Env,
  config: LimiterConfig,
  name: string,
): StoreClient | { ok: false; field: string; detail: string } {
  const bindings = shardBindings(name);
  const url = env[bindings.url as `UPSTASH_REDIS_REST_URL_${string}`];
  const token = env[bindings.token as `UPSTASH_REDIS_REST_TOKEN_${string}`];
  if (!url || !token) {
    return {
      ok: false,
      field: url ? bindings.token : bindings.url,
      detail:
        name === "" && !config.shards
          ? `is not set: the limiter has no store (${howToSet(url ? bindings.token : bindings.url)})`
          : `is not set: shard "${name}" has no store (${howToSet(url ? bindings.token : bindings.url)})`,
    };
  }
  try {
    return createStoreClient({
      url,
      token,
      timeoutMs: config.timeoutMs,
      // One decision per incoming request, never two in one tick: nothing to batch (see
      // autoPipeline), and without it every decision has one timer, not two.
      autoPipeline: false,
    });
  } catch (error) {
    return { ok: false, field: bindings.url, detail: (error as Error).message };
  }
}
