/**
 * The middleware's `store` option: where its limiter's store comes from, and the one limiter kept
 * per store for the isolate (its denial cache, breaker and leases outlive each request).
 */
import type { Context, Env as HonoEnv } from "hono";
import { createLimiter } from "../limiter/create-limiter";
import type { Limiter } from "../limiter/limiter-api";
import type { LimiterOptions } from "../limiter/limiter-options";
import { createStoreClient, type StoreClient } from "../store/upstash-client";

/** An Upstash database (or the local bridge) by its REST URL and token. */
export interface StoreConfig {
  url: string;
  token: string;
}

/** A store as the middleware takes it: where to reach it, or a client already made. */
export type StoreInput = StoreConfig | StoreClient;

/** The limiter's options besides its store, for a limiter the middleware builds. */
export type MiddlewareLimiterOptions = Omit<LimiterOptions, "store">;

/**
 * A binding (or variable) the store needs is missing: the middleware answers 503 naming it.
 * Thrown by `fromEnv`; catch it where you read the store yourself.
 *
 * @example
 * ```ts
 * try {
 *   fromEnv(c);
 * } catch (error) {
 *   if (error instanceof MissingStoreSettingError) console.error(`set ${error.setting}`);
 * }
 * ```
 */
export class MissingStoreSettingError extends Error {
  constructor(readonly setting: string) {
    super(`${setting} is not set: the rate limiter has no store`);
    this.name = "MissingStoreSettingError";
  }
}

interface EnvRecord {
  readonly [name: string]: unknown;
}

/**
 * The store from the environment, as `Redis.fromEnv()` reads it: `UPSTASH_REDIS_REST_URL` and
 * `UPSTASH_REDIS_REST_TOKEN` from the Worker's bindings (`c.env`), else from `process.env`
 * (Node, Bun) or `Deno.env`. Throws MissingStoreSettingError naming a missing one.
 *
 * @example
 * ```ts
 * app.use("/api/*", rateLimit({ rules: { name: "api", limit: 100, window: "1m" }, store: fromEnv }))
 * ```
 */
export function fromEnv(c?: Context): StoreConfig {
  const read = (name: string): string => {
    const value = setting(c?.env as EnvRecord | undefined, name);
    if (typeof value !== "string" || value.trim() === "") throw new MissingStoreSettingError(name);
    return value;
  };
  return { url: read("UPSTASH_REDIS_REST_URL"), token: read("UPSTASH_REDIS_REST_TOKEN") };
}

function setting(bindings: EnvRecord | undefined, name: string): unknown {
  if (bindings && typeof bindings === "object" && bindings[name] !== undefined) {
    return bindings[name];
  }
  // Runtimes without bindings: read through globalThis, never an import (workerd runs src/).
  const g = globalThis as {
    process?: { env?: EnvRecord };
    Deno?: { env?: { get(name: string): string | undefined } };
  };
  const fromProcess = g.process?.env?.[name];
  if (fromProcess !== undefined) return fromProcess;
  try {
    return g.Deno?.env?.get(name);
  } catch {
    // Deno without --allow-env: as if unset.
    return undefined;
  }
}

function isStoreClient(store: StoreInput): store is StoreClient {
  return typeof (store as Partial<StoreClient>).evalsha === "function";
}

/**
 * The limiter for a middleware's `store` option: built on first use, then kept, one per store
 * (a client by identity, a config by URL and token), for as long as the isolate lives.
 */
export function limiterForStore<E extends HonoEnv>(
  store: StoreInput | ((c: Context<E>) => StoreInput),
  options: MiddlewareLimiterOptions,
): (c: Context<E>) => Limiter {
  const byClient = new WeakMap<StoreClient, Limiter>();
  const byConfig = new Map<string, Limiter>();
  return (c) => {
    const input = typeof store === "function" ? store(c) : store;
    if (isStoreClient(input)) {
      let limiter = byClient.get(input);
      if (!limiter) {
        limiter = createLimiter({ ...options, store: input });
        byClient.set(input, limiter);
      }
      return limiter;
    }
    if (typeof input?.url !== "string" || input.url === "") {
      throw new MissingStoreSettingError("store.url");
    }
    if (typeof input.token !== "string" || input.token === "") {
      throw new MissingStoreSettingError("store.token");
    }
    const id = `${input.url}\n${input.token}`;
    let limiter = byConfig.get(id);
    if (!limiter) {
      const client = createStoreClient({
        url: input.url,
        token: input.token,
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      });
      limiter = createLimiter({ ...options, store: client });
      byConfig.set(id, limiter);
    }
    return limiter;
  };
}
