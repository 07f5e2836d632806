import { type LimiterConfig, parseLimiterConfig } from "./config/limiter-config";
import type { Validated } from "./config/validation";
import type { Env } from "./env";
import { createLimiter, type Limiter } from "./limiter/limiter";
import { createStoreClient } from "./store/upstash-client";

/** What one isolate builds once from its bindings: the parsed config and the limiter. */
export type Runtime =
  | { ok: true; config: LimiterConfig; limiter: Limiter }
  | { ok: false; field: string; detail: string };

// Per-isolate state lives at module scope, built lazily on the first request (workerd forbids
// I/O and randomness at module scope) and rebuilt only if the bindings change.
let cached: { signature: string; runtime: Runtime } | undefined;

export function getRuntime(env: Env): Runtime {
  const signature = JSON.stringify([
    env.UPSTASH_REDIS_REST_URL,
    env.UPSTASH_REDIS_REST_TOKEN,
    env.LIMITER_CONFIG,
  ]);
  if (cached?.signature !== signature) cached = { signature, runtime: buildRuntime(env) };
  return cached.runtime;
}

function buildRuntime(env: Env): Runtime {
  const parsed: Validated<LimiterConfig> = parseLimiterConfig(env.LIMITER_CONFIG);
  if (!parsed.ok) return parsed;
  const config = parsed.value;
  if (!env.UPSTASH_REDIS_REST_URL || !env.UPSTASH_REDIS_REST_TOKEN) {
    return {
      ok: false,
      field: env.UPSTASH_REDIS_REST_URL ? "UPSTASH_REDIS_REST_TOKEN" : "UPSTASH_REDIS_REST_URL",
      detail: "is not set: the limiter has no store (set it with `wrangler secret put`)",
    };
  }
  let store: ReturnType<typeof createStoreClient>;
  try {
    store = createStoreClient({
      url: env.UPSTASH_REDIS_REST_URL,
      token: env.UPSTASH_REDIS_REST_TOKEN,
      timeoutMs: config.timeoutMs,
    });
  } catch (error) {
    return { ok: false, field: "UPSTASH_REDIS_REST_URL", detail: (error as Error).message };
  }
  const limiter = createLimiter({
    store,
    prefix: config.prefix,
    clock: config.clock,
    failMode: config.failMode,
    onStoreError: (error) =>
      console.error(JSON.stringify({ event: "store-error", error: String(error) })),
  });
  return { ok: true, config, limiter };
}
